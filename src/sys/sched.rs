//! The scheduling priority of the recorder's threads: the drain thread's, and the BPF loads'
//! that can wait (record/load.rs).
//!
//! The recorder competes for CPU with the threads it records: 16 threads in tight malloc loops
//! on 2 CPUs left it 1/17 of the machine, less than draining their records takes, and the ring
//! overflowed (issue 13, docs/PERFORMANCE.md "Levers measured"). A low real-time priority lets
//! the drain run as soon as it wakes; it sleeps between drains, so it takes no more CPU than
//! before, only at the right moment. Every change here carries `SCHED_RESET_ON_FORK`: a process
//! forked by the thread afterwards starts at the normal policy and nice 0, so nothing the
//! recorder starts (the command is started before this is called, in any case) inherits it.

use std::io;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

/// `SCHED_OTHER`, `SCHED_FIFO` and `SCHED_RESET_ON_FORK` from <linux/sched.h>.
const SCHED_OTHER: libc::c_int = 0;
const SCHED_FIFO: libc::c_int = 1;
const SCHED_RESET_ON_FORK: libc::c_int = 0x4000_0000;

/// A priority for the calling thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priority {
    /// `SCHED_FIFO` at this real-time priority (1 is the lowest).
    Fifo(i32),
    /// The normal policy at this nice value (negative: more CPU).
    Nice(i32),
}

impl std::fmt::Display for Priority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Priority::Fifo(p) => write!(f, "SCHED_FIFO priority {p}"),
            Priority::Nice(n) => write!(f, "nice {n}"),
        }
    }
}

/// Gives the calling thread `priority`, never to be inherited by what it forks later. Fails
/// with EPERM without CAP_SYS_NICE (or, for `Fifo`, in a cgroup with no real-time budget).
pub fn set_thread_priority(priority: Priority) -> io::Result<()> {
    match priority {
        Priority::Fifo(rt) => set_policy(SCHED_FIFO, rt),
        Priority::Nice(nice) => {
            // SAFETY: setpriority reads its arguments only; on Linux, PRIO_PROCESS with who 0
            // is the calling thread.
            if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) } != 0 {
                return Err(io::Error::last_os_error());
            }
            // Reset on fork for a negative nice too: the kernel then gives children nice 0.
            set_policy(SCHED_OTHER, 0)
        }
    }
}

/// A background thread's hold on its own priority: the thread lowers itself ([`Self::lower`])
/// and its starter gives it the normal priority back once something waits on its work
/// ([`Self::raise`]): the walker's load, the unwind tables' parse and the frames' naming, each
/// at nice 19 while nothing waits, and each awaited by a stopped process or the recording's
/// end at some point.
#[derive(Clone, Debug, Default)]
pub struct Lowered {
    /// The thread's id once it has lowered itself, 0 before, [`RAISED_EARLY`] when raised
    /// before it could.
    tid: Arc<AtomicI32>,
}

/// [`Lowered::raise`] came first: the thread does not lower itself then.
const RAISED_EARLY: i32 = -1;

impl Lowered {
    /// On the thread itself: nice `nice` from now on, unless it was raised already. Its id is
    /// said after the change, so that a raise never comes between and is undone.
    pub fn lower(&self, nice: i32) -> io::Result<()> {
        set_thread_priority(Priority::Nice(nice))?;
        let tid = current_thread_id();
        match (self.tid).compare_exchange(0, tid, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => Ok(()),
            Err(_) => set_thread_priority(Priority::Nice(0)),
        }
    }

    /// From another thread: the thread at nice 0, now if it has lowered itself, else it will
    /// not. The caller makes sure that the thread still runs (an ended thread's id may be
    /// another's).
    pub fn raise(&self) -> io::Result<()> {
        let early =
            (self.tid).compare_exchange(0, RAISED_EARLY, Ordering::AcqRel, Ordering::Acquire);
        match early {
            Ok(_) | Err(RAISED_EARLY) => Ok(()),
            Err(tid) => set_nice_of(tid, 0),
        }
    }
}

/// The calling thread's id (its tid), for [`set_nice_of`] from another thread.
pub fn current_thread_id() -> i32 {
    // SAFETY: gettid takes nothing and cannot fail.
    unsafe { libc::gettid() }
}

/// Gives thread `tid` of this process nice value `nice`: how one thread hands another the
/// normal priority back once its work is awaited (record/names.rs). Lowering a nice value
/// needs CAP_SYS_NICE; fails with EPERM without it.
pub fn set_nice_of(tid: i32, nice: i32) -> io::Result<()> {
    // SAFETY: setpriority reads its arguments only; on Linux, PRIO_PROCESS with a tid is that
    // thread alone.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn set_policy(policy: libc::c_int, rt_priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: rt_priority,
    };
    // SAFETY: `param` is a valid sched_param for the duration of the call, which only reads
    // it; pid 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, policy | SCHED_RESET_ON_FORK, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calling thread's policy (without the reset-on-fork flag) and nice value.
    fn thread_policy_and_nice() -> (i32, i32) {
        // SAFETY: sched_getscheduler and getpriority take plain values and only read them.
        let policy = unsafe { libc::sched_getscheduler(0) } & !SCHED_RESET_ON_FORK;
        // SAFETY: as above.
        let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        (policy, nice)
    }

    #[test]
    fn a_lowered_thread_is_normal_again_whether_raised_after_or_before() {
        use std::sync::mpsc;
        // Raised after it lowered itself: nice 19, then 0.
        let lowered = Lowered::default();
        let (its, (go, wait), (said, heard)) = (lowered.clone(), mpsc::channel(), mpsc::channel());
        let thread = std::thread::spawn(move || {
            its.lower(19).expect("a thread may always lower itself");
            said.send(thread_policy_and_nice().1).unwrap();
            wait.recv().unwrap();
            said.send(thread_policy_and_nice().1).unwrap();
        });
        assert_eq!(heard.recv().unwrap(), 19);
        if let Err(e) = lowered.raise() {
            // Giving a thread a lower nice value needs CAP_SYS_NICE: the tests run as root.
            println!("skipped: raising a thread's priority needs CAP_SYS_NICE ({e})");
            go.send(()).unwrap();
            thread.join().unwrap();
            return;
        }
        go.send(()).unwrap();
        assert_eq!(heard.recv().unwrap(), 0, "raised after lowering itself");
        thread.join().unwrap();
        // Raised before it could lower itself: it never stays lowered.
        let early = Lowered::default();
        early.raise().unwrap();
        let its = early.clone();
        let nice = std::thread::spawn(move || {
            its.lower(19).unwrap();
            thread_policy_and_nice().1
        });
        assert_eq!(nice.join().unwrap(), 0, "raised before lowering itself");
    }

    #[test]
    fn priorities_read_as_their_setting() {
        assert_eq!(Priority::Fifo(1).to_string(), "SCHED_FIFO priority 1");
        assert_eq!(Priority::Nice(-10).to_string(), "nice -10");
    }

    #[test]
    fn a_forked_child_of_a_raised_thread_starts_normal() {
        // Only where the change is allowed (root); elsewhere it must fail cleanly. The test may
        // run niced (`nice cargo test`): the raised thread keeps its nice, and its child starts
        // at nice 0 all the same (SCHED_RESET_ON_FORK resets a real-time parent's child to
        // SCHED_NORMAL at nice 0).
        let start = thread_policy_and_nice().1;
        let raised = std::thread::spawn(|| {
            if set_thread_priority(Priority::Fifo(1)).is_err() {
                return None;
            }
            let mine = thread_policy_and_nice();
            let child = std::process::Command::new("cut")
                .args(["-d", " ", "-f", "19,41", "/proc/self/stat"])
                .output()
                .expect("cut runs");
            Some((
                mine,
                String::from_utf8_lossy(&child.stdout).trim().to_string(),
            ))
        })
        .join()
        .unwrap();
        if let Some((mine, child)) = raised {
            assert_eq!(mine, (SCHED_FIFO, start));
            assert_eq!(child, "0 0", "nice and policy of the child");
        }
    }
}
