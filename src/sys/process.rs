//! libc calls the recorder needs around the recorded command: signals taken synchronously,
//! reaping children, clocks, and facts about the machine.

use std::io;
use std::time::Duration;

/// A set of signals blocked in this thread, to be taken with [`SignalSet::wait`] instead of
/// interrupting us asynchronously. Children get an empty mask (std's `Command` resets it).
pub struct SignalSet(libc::sigset_t);

impl SignalSet {
    /// Block `signals` in the calling thread and return them as a set.
    pub fn block(signals: &[i32]) -> io::Result<SignalSet> {
        // SAFETY: sigset_t is plain data that sigemptyset initialises.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: set is a valid sigset_t; the signal numbers are checked by the kernel.
        unsafe {
            libc::sigemptyset(&mut set);
            for &s in signals {
                libc::sigaddset(&mut set, s);
            }
            if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(SignalSet(set))
    }

    /// Wait up to `timeout` for one of the signals; `None` on timeout.
    pub fn wait(&self, timeout: Duration) -> Option<Received> {
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: siginfo_t is plain data the kernel fills.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: the set is initialised; info and ts are valid pointers.
        let sig = unsafe { libc::sigtimedwait(&self.0, &mut info, &ts) };
        (sig > 0).then_some(Received {
            signal: sig,
            // SI_USER, SI_QUEUE, SI_TKILL are <= 0; the kernel's own (a terminal's ^C) are > 0.
            from_process: info.si_code <= 0,
        })
    }

    /// Unblock the signals again.
    pub fn unblock(&self) {
        // SAFETY: the set is initialised.
        unsafe {
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &self.0, std::ptr::null_mut());
        }
    }
}

/// A signal taken by [`SignalSet::wait`].
pub struct Received {
    /// The signal number.
    pub signal: i32,
    /// Sent by a process with kill(2) (rather than by the kernel, as a terminal's Ctrl-C is,
    /// which reaches the whole foreground process group by itself).
    pub from_process: bool,
}

/// What a non-blocking reap found.
pub enum Reaped {
    /// Child `pid` ended with wait status `status`.
    Child { pid: i32, status: i32 },
    /// Children remain, none has ended yet.
    Running,
    /// No children are left.
    NoChildren,
}

/// Reap one ended child, if any, without blocking.
pub fn reap_one() -> Reaped {
    let mut status = 0;
    // SAFETY: status is a valid out pointer.
    let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG | libc::__WALL) };
    match pid {
        0 => Reaped::Running,
        p if p > 0 => Reaped::Child { pid: p, status },
        _ => match io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR) => Reaped::Running,
            _ => Reaped::NoChildren,
        },
    }
}

/// The exit code a shell would show for wait status `status`: the code, or 128+N for signal N.
pub fn exit_code_of(status: i32) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        128
    }
}

/// Make this process the reaper of its orphaned descendants, so that every process of the
/// recorded tree is our descendant until it ends and "no children left" means the tree is gone.
pub fn become_subreaper() -> io::Result<()> {
    // SAFETY: PR_SET_CHILD_SUBREAPER takes one integer argument.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Send `signal` to process `pid`.
pub fn kill(pid: i32, signal: i32) {
    // SAFETY: kill has no memory preconditions.
    unsafe {
        libc::kill(pid, signal);
    }
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out pointer; both clocks always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC in nanoseconds: the clock of `bpf_ktime_get_ns`.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Wall-clock time in nanoseconds since the Unix epoch.
pub fn wall_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// `uname -r` and the host name.
pub fn uname() -> (String, String) {
    // SAFETY: utsname is plain data filled by uname.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: u is a valid out pointer.
    if unsafe { libc::uname(&mut u) } != 0 {
        return (String::new(), String::new());
    }
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    (field(&u.release), field(&u.nodename))
}

/// Our own pid.
pub fn getpid() -> u32 {
    std::process::id()
}

/// The name of the background process [`close_fds_after_exit`] leaves behind (15 bytes, the
/// most a task name holds), so that `ps` and scripts can tell it apart: scripts/bench.sh waits
/// for it to end before timing the next run.
pub const LINGER_NAME: &std::ffi::CStr = c"memtrack-detach";

/// Let a background child close this process's file descriptors after this process has
/// exited, and return at once. Returns false if no child could be made.
///
/// Closing the last fd of a BPF link detaches it, and for uprobes and tracepoints that waits
/// on kernel grace periods (about 30-75 ms per link here, some 0.15 s in all). The child holds
/// a reference to every open file, so this process's own closes and its exit are quick; the
/// child waits until this process is gone (end of file on a pipe whose only writer is us) and
/// then exits, which drops the last references and pays the waits off the caller's clock. It
/// leaves the session first and points its standard streams at /dev/null, so a terminal's
/// Ctrl-C does not reach it and a caller reading our output through a pipe sees its end when
/// we exit, not when the child does.
pub fn close_fds_after_exit() -> bool {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return false;
    }
    let [read_end, write_end] = fds;
    // SAFETY: memtrack's recorder is single-threaded, so the child may run ordinary code; it
    // only makes the system calls below and leaves with _exit, running no destructors.
    match unsafe { libc::fork() } {
        -1 => {
            // SAFETY: both fds are ours and open.
            unsafe {
                libc::close(read_end);
                libc::close(write_end);
            }
            false
        }
        0 => {
            // SAFETY: plain system calls on fds we own and NUL-terminated constants; the loop
            // only reads into a local byte.
            unsafe {
                libc::close(write_end);
                libc::setsid();
                libc::prctl(libc::PR_SET_NAME, LINGER_NAME.as_ptr(), 0, 0, 0);
                let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
                if null >= 0 {
                    for fd in 0..3 {
                        libc::dup2(null, fd);
                    }
                    libc::close(null);
                }
                let mut byte = 0u8;
                while libc::read(read_end, (&mut byte as *mut u8).cast(), 1) < 0
                    && *libc::__errno_location() == libc::EINTR
                {}
                libc::_exit(0)
            }
        }
        _ => {
            // The write end stays open until we exit: that is the child's signal.
            // SAFETY: the read end is ours and open.
            unsafe { libc::close(read_end) };
            true
        }
    }
}

/// CPU time and peak resident memory of this process alone (not of its children).
#[derive(Clone, Copy, Debug)]
pub struct SelfUsage {
    pub user: Duration,
    pub system: Duration,
    pub peak_resident_bytes: u64,
}

/// What this process has used so far (getrusage RUSAGE_SELF).
pub fn self_usage() -> SelfUsage {
    // SAFETY: rusage is plain data that getrusage fills.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: ru is a valid out pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let time = |tv: libc::timeval| {
        Duration::from_secs(tv.tv_sec as u64) + Duration::from_micros(tv.tv_usec as u64)
    };
    SelfUsage {
        user: time(ru.ru_utime),
        system: time(ru.ru_stime),
        peak_resident_bytes: ru.ru_maxrss as u64 * 1024,
    }
}
