//! libc calls the recorder needs around the recorded command: signals taken synchronously,
//! reaping children, clocks, and facts about the machine.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A set of signals blocked in this thread, to be taken with [`SignalSet::wait`] instead of
/// interrupting us asynchronously. Children inherit the mask (std's `Command` keeps it, in
/// both its posix_spawn and fork paths), so spawn them inside [`with_unblocked`]. The signals
/// are also readable from a signalfd ([`SignalSet::fd`]), so that the recorder can wait for them
/// and for other fds at once.
pub struct SignalSet(libc::sigset_t, OwnedFd);

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
        // SAFETY: set is initialised; -1 asks for a new fd.
        let fd = unsafe { libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: signalfd returned a new fd that nothing else owns.
        Ok(SignalSet(set, unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// The signalfd, readable while one of the signals is pending (to wait on with
    /// [`crate::sys::wait::Waiter`]).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.1.as_fd()
    }

    /// Take one pending signal, if there is one; never blocks.
    pub fn take(&self) -> Option<Received> {
        // SAFETY: signalfd_siginfo is plain data the kernel fills.
        let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::signalfd_siginfo>();
        // SAFETY: info is writable for `size` bytes; the fd is non-blocking.
        let got = unsafe {
            libc::read(
                self.1.as_raw_fd(),
                &mut info as *mut libc::signalfd_siginfo as *mut libc::c_void,
                size,
            )
        };
        (got == size as isize).then_some(Received {
            signal: info.ssi_signo as i32,
            from_process: info.ssi_code <= 0,
        })
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
    fn unblock(&self) {
        // SAFETY: the set is initialised.
        unsafe {
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &self.0, std::ptr::null_mut());
        }
    }
}

/// A [`SignalSet`] blocked for as long as this owner lives: dropping it unblocks the signals,
/// on whichever path leaves the scope that blocked them. A signal pending by then is delivered
/// at the drop, so drop it where that may happen (after the file is complete).
pub struct BlockedSignals(SignalSet);

impl BlockedSignals {
    /// Block `signals` in the calling thread until the owner is dropped.
    pub fn block(signals: &[i32]) -> io::Result<BlockedSignals> {
        SignalSet::block(signals).map(BlockedSignals)
    }
}

impl std::ops::Deref for BlockedSignals {
    type Target = SignalSet;

    fn deref(&self) -> &SignalSet {
        &self.0
    }
}

impl Drop for BlockedSignals {
    fn drop(&mut self) {
        self.0.unblock();
    }
}

/// Block every signal in the calling thread. For a thread started before the recorder blocks
/// the signals it takes from its signalfd and still running after (record::walker): the kernel
/// hands a process's signal to any thread that does not block it, and there SIGTERM's default
/// action would end the recorder mid-recording instead of ending its wait.
pub fn block_all_signals() -> io::Result<()> {
    // SAFETY: sigset_t is plain data that sigfillset initialises; pthread_sigmask only changes
    // the calling thread's mask (faults are still delivered: the kernel unblocks them).
    let rc = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut())
    };
    match rc {
        0 => Ok(()),
        errno => Err(io::Error::from_raw_os_error(errno)),
    }
}

/// Signals caught by [`note_signal`] while [`with_unblocked`] runs, one bit per number.
/// Written by the handler, read and cleared once `with_unblocked` has blocked them again.
static CAUGHT: AtomicU64 = AtomicU64::new(0);

extern "C" fn note_signal(signal: libc::c_int) {
    if (1..64).contains(&signal) {
        CAUGHT.fetch_or(1 << signal, Ordering::SeqCst);
    }
}

/// Run `f` (a spawn) with `signals` unblocked, so that the child it starts inherits none of
/// them blocked, and block them again. A signal that arrives meanwhile is caught by a handler
/// that only notes it, instead of taking its default action (ending memtrack mid-recording);
/// the numbers caught are returned with `f`'s result, for the caller to act on. The handler
/// never reaches the command: posix_spawn's child and exec reset caught signals to SIG_DFL.
pub fn with_unblocked<T>(signals: &[i32], f: impl FnOnce() -> T) -> (T, Vec<i32>) {
    // SAFETY: sigset_t and sigaction are plain data, initialised by sigemptyset and field by
    // field; note_signal is async-signal-safe (one atomic OR); `old` holds each signal's
    // previous action, restored below.
    let mut old: Vec<libc::sigaction> = Vec::with_capacity(signals.len());
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigemptyset(&mut set);
        for &sig in signals {
            libc::sigaddset(&mut set, sig);
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = note_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            action.sa_flags = libc::SA_RESTART;
            let mut previous: libc::sigaction = std::mem::zeroed();
            libc::sigaction(sig, &action, &mut previous);
            old.push(previous);
        }
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
    let result = f();
    // SAFETY: as above; the set and the saved actions are initialised.
    unsafe {
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        for (&sig, previous) in signals.iter().zip(&old) {
            libc::sigaction(sig, previous, std::ptr::null_mut());
        }
    }
    let caught = CAUGHT.swap(0, Ordering::SeqCst);
    let caught = signals
        .iter()
        .copied()
        .filter(|&sig| (1..64).contains(&sig) && caught & (1 << sig) != 0)
        .collect();
    (result, caught)
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
    /// Child `pid` was stopped by `signal` (job control: ^Z, or reading the terminal from the
    /// background).
    Stopped { pid: i32, signal: i32 },
    /// Children remain, none has ended yet.
    Running,
    /// No children are left.
    NoChildren,
}

/// Reap one ended child, if any, without blocking; a child that stopped is reported once.
pub fn reap_one() -> Reaped {
    let mut status = 0;
    // SAFETY: status is a valid out pointer.
    let pid = unsafe {
        libc::waitpid(
            -1,
            &mut status,
            libc::WNOHANG | libc::WUNTRACED | libc::__WALL,
        )
    };
    match pid {
        0 => Reaped::Running,
        p if p > 0 && libc::WIFSTOPPED(status) => Reaped::Stopped {
            pid: p,
            signal: libc::WSTOPSIG(status),
        },
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

/// Send `signal` to every process of process group `pgid`.
pub fn kill_group(pgid: i32, signal: i32) {
    // SAFETY: killpg has no memory preconditions.
    unsafe {
        libc::killpg(pgid, signal);
    }
}

/// Wait, for at most `limit`, until every thread of process `pid` is stopped (`T`, or `t`
/// under ptrace) or gone, thread `tid` first; returns how long that took. A SIGSTOP stops the
/// whole thread group, each thread as it next leaves the kernel, so once all are stopped none
/// is left running.
pub fn wait_until_stopped(pid: u32, tid: u32, limit: Duration) -> Duration {
    let began = std::time::Instant::now();
    let stopped = |tid: &str| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat"));
        // The state is the field after the command name, in parentheses that may hold either.
        let state = stat.ok().and_then(|s| {
            let (_, after) = s.rsplit_once(')')?;
            after.trim_start().chars().next()
        });
        matches!(state, None | Some('T' | 't' | 'Z' | 'X'))
    };
    let all_stopped = || match std::fs::read_dir(format!("/proc/{pid}/task")) {
        Ok(tasks) => tasks
            .flatten()
            .all(|t| stopped(&t.file_name().to_string_lossy())),
        Err(_) => true, // gone
    };
    while !(stopped(&tid.to_string()) && all_stopped()) && began.elapsed() < limit {
        std::thread::sleep(Duration::from_micros(50));
    }
    began.elapsed()
}

/// Stop this process as ^Z would (SIGTSTP), returning once something continues it (a shell's
/// `fg` or `bg`). The kernel drops the signal when our process group is orphaned: then no shell
/// could continue us, and this returns at once.
pub fn stop_self() {
    kill(getpid() as i32, libc::SIGTSTP);
}

/// The user and groups a child takes on before it execs.
#[derive(Clone, Debug)]
pub struct Credentials {
    /// Set with setuid, last.
    pub uid: u32,
    /// Set with setgid, after the groups.
    pub gid: u32,
    /// Supplementary groups (the primary group included, as getgrouplist gives them).
    pub groups: Vec<u32>,
}

/// Make `cmd`'s child, between fork and exec: take the terminal `tty` for its process group
/// (set with `Command::process_group(0)`), drop to `creds`, and give up every capability it
/// would otherwise inherit from memtrack (`sys::caps`). Everything here is computed before the
/// fork; the child only makes async-signal-safe calls. With nothing to do, `cmd` is left
/// untouched (std may then spawn with posix_spawn).
pub fn prepare_child(cmd: &mut Command, creds: Option<Credentials>, tty: Option<RawFd>) {
    let child_is_root = match &creds {
        Some(c) => c.uid == 0,
        None => user_ids().0 == 0 && geteuid() == 0,
    };
    let clear_caps = crate::sys::caps::CapSets::own().leak_into_child(child_is_root);
    if creds.is_none() && tty.is_none() && !clear_caps {
        return;
    }
    let groups: Vec<libc::gid_t> = creds
        .as_ref()
        .map(|c| c.groups.iter().map(|&g| g as libc::gid_t).collect())
        .unwrap_or_default();
    let hook = move || -> io::Result<()> {
        if let Some(fd) = tty {
            // Here too, not only in the parent: the command may read the terminal before the
            // parent gets to it, and would be stopped with SIGTTIN.
            // SAFETY: getpid is async-signal-safe.
            crate::sys::terminal::set_foreground(fd, unsafe { libc::getpid() });
        }
        if let Some(c) = &creds {
            // Groups first and uid last: each later step gives up the right to do the earlier.
            // SAFETY: groups is a live slice of gid_t of the given length; setgid and setuid
            // take plain values. All three are async-signal-safe.
            unsafe {
                if libc::setgroups(groups.len(), groups.as_ptr()) != 0
                    || libc::setgid(c.gid as libc::gid_t) != 0
                    || libc::setuid(c.uid as libc::uid_t) != 0
                {
                    return Err(io::Error::last_os_error());
                }
            }
        }
        // Last, after setuid, which needs CAP_SETUID.
        if clear_caps {
            crate::sys::caps::clear_for_exec().map_err(io::Error::from_raw_os_error)?;
        }
        Ok(())
    };
    // SAFETY: the hook allocates nothing and makes only async-signal-safe calls (see above), as
    // code between fork and exec of a multi-threaded process must.
    unsafe {
        cmd.pre_exec(hook);
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
        // c_char is i8 on x86_64 and u8 on arm64: its byte either way, without a cast that
        // is needless on one of them.
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c.to_ne_bytes()[0])
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    (field(&u.release), field(&u.nodename))
}

/// Our own pid.
pub fn getpid() -> u32 {
    std::process::id()
}

/// Our real user and group ids: whom the recorded command runs as when no other user is
/// given (it inherits them).
pub fn user_ids() -> (u32, u32) {
    // SAFETY: getuid and getgid cannot fail and have no memory preconditions.
    unsafe { (libc::getuid(), libc::getgid()) }
}

/// Our effective user id.
pub fn geteuid() -> u32 {
    // SAFETY: geteuid cannot fail and has no memory preconditions.
    unsafe { libc::geteuid() }
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
    let mut exit_pipe = [0 as libc::c_int; 2];
    let mut ready_pipe = [0 as libc::c_int; 2];
    // SAFETY: each array is two ints for pipe2 to fill.
    if unsafe { libc::pipe2(exit_pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return false;
    }
    // SAFETY: as above.
    if unsafe { libc::pipe2(ready_pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        // SAFETY: both fds are ours and open.
        unsafe {
            libc::close(exit_pipe[0]);
            libc::close(exit_pipe[1]);
        }
        return false;
    }
    let [exit_read, exit_write] = exit_pipe;
    let [ready_read, ready_write] = ready_pipe;
    // SAFETY: memtrack's recorder is single-threaded, so the child may run ordinary code; it
    // only makes the system calls below and leaves with _exit, running no destructors.
    match unsafe { libc::fork() } {
        -1 => {
            // SAFETY: all four fds are ours and open.
            unsafe {
                for fd in [exit_read, exit_write, ready_read, ready_write] {
                    libc::close(fd);
                }
            }
            false
        }
        0 => {
            // SAFETY: plain system calls on fds we own and NUL-terminated constants; the loop
            // only reads into a local byte.
            unsafe {
                libc::close(exit_write);
                libc::close(ready_read);
                libc::setsid();
                libc::prctl(libc::PR_SET_NAME, LINGER_NAME.as_ptr(), 0, 0, 0);
                let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
                if null >= 0 {
                    for fd in 0..3 {
                        libc::dup2(null, fd);
                    }
                    libc::close(null);
                }
                // Our copies of the caller's streams are gone: the parent may exit now.
                libc::close(ready_write);
                let mut byte = 0u8;
                while libc::read(exit_read, (&mut byte as *mut u8).cast(), 1) < 0
                    && *libc::__errno_location() == libc::EINTR
                {}
                libc::_exit(0)
            }
        }
        _ => {
            // The exit pipe's write end stays open until we exit: that is the child's signal.
            // Wait for the child to let go of our standard streams (end of file on the ready
            // pipe), or a caller reading them to their end would wait for the child too.
            // SAFETY: fds we own; the loop reads into a local byte.
            unsafe {
                libc::close(exit_read);
                libc::close(ready_write);
                let mut byte = 0u8;
                while libc::read(ready_read, (&mut byte as *mut u8).cast(), 1) < 0
                    && *libc::__errno_location() == libc::EINTR
                {}
                libc::close(ready_read);
            }
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

/// Fork this process; `Ok(None)` in the child, `Ok(Some(pid))` in the parent. Refused while
/// this process has more than one thread: the child could then find a lock held forever by a
/// thread that does not exist in it, and it runs ordinary code (the guardian of
/// record/guardian.rs), not only async-signal-safe calls.
pub fn fork_single_threaded() -> io::Result<Option<i32>> {
    // A thread already joined stays in /proc/self/task until the kernel has reaped it: join
    // returns at its exit's tid wake-up, a moment before. Under qemu's TCG that moment was long
    // enough for arm64's job to see 2 threads once. So the count is asked again until it is 1,
    // for at most a second, before refusing.
    let deadline = std::time::Instant::now() + Duration::from_secs(1);
    loop {
        let threads = std::fs::read_dir("/proc/self/task")?.count();
        if threads == 1 {
            break;
        }
        if std::time::Instant::now() > deadline {
            return Err(io::Error::other(format!(
                "memtrack has {threads} threads; it forks only while it has one"
            )));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // SAFETY: this process has one thread (checked above, and nothing here starts one), so
    // the child inherits no lock held by another thread and may run ordinary code.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(None),
        pid => Ok(Some(pid)),
    }
}

/// End this process at once with `code`, running no destructors or exit handlers: for a
/// forked child, whose copies of the parent's buffers and files are not its own to flush.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and has no memory preconditions.
    unsafe { libc::_exit(code) }
}

/// Put this process in a process group of its own (its pid is the group id).
pub fn own_process_group() {
    // SAFETY: setpgid with plain values.
    unsafe {
        libc::setpgid(0, 0);
    }
}

/// Name this process (the task name `ps` and /proc/PID/comm show, up to 15 bytes).
pub fn set_name(name: &std::ffi::CStr) {
    // SAFETY: name is NUL-terminated and outlives the call.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, name.as_ptr(), 0, 0, 0);
    }
}

/// Our parent's pid (the reaper's, once the parent has exited).
pub fn parent_pid() -> i32 {
    // SAFETY: getppid cannot fail.
    unsafe { libc::getppid() }
}

/// Point the file descriptors `fds` (of 0, 1, 2) at /dev/null, so that this process no longer
/// holds a caller's pipe or terminal open.
pub fn null_stdio(fds: &[RawFd]) {
    // SAFETY: a NUL-terminated constant path; dup2 and close on fds we own.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if null < 0 {
            return;
        }
        for &fd in fds {
            libc::dup2(null, fd);
        }
        libc::close(null);
    }
}

/// Make reads of `fd` return at once (EAGAIN) when nothing is there.
pub fn set_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: fcntl on an open fd with integer arguments.
    unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Wait for any child to end (not for stops), blocking; `Running` only when a signal
/// interrupted the wait.
pub fn reap_wait() -> Reaped {
    let mut status = 0;
    // SAFETY: status is a valid out pointer.
    let pid = unsafe { libc::waitpid(-1, &mut status, libc::__WALL) };
    match pid {
        p if p > 0 => Reaped::Child { pid: p, status },
        _ => match io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR) => Reaped::Running,
            _ => Reaped::NoChildren,
        },
    }
}

/// A pipe, both ends close-on-exec: (read end, write end).
pub fn pipe() -> io::Result<(std::fs::File, std::fs::File)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds has room for the two fds pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 returned two new fds that nothing else owns.
    Ok(unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    })
}
