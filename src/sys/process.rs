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

/// Our effective user id.
pub fn geteuid() -> u32 {
    // SAFETY: geteuid cannot fail and has no memory preconditions.
    unsafe { libc::geteuid() }
}
