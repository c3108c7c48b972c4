//! The controlling terminal and its foreground process group, the way a shell handles them:
//! the recorded command gets its own process group, and when memtrack is in the terminal's
//! foreground the command's group gets the terminal (so ^C, ^Z and terminal reads reach the
//! command as if the shell had started it); memtrack takes it back afterwards.

use std::ffi::CStr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The controlling terminal of this process, opened while memtrack is in its foreground group.
pub struct Terminal {
    fd: OwnedFd,
    /// Our own process group, the terminal's foreground when we started.
    our_pgrp: libc::pid_t,
}

impl Terminal {
    /// The controlling terminal, if there is one and our process group is its foreground.
    pub fn foreground() -> Option<Terminal> {
        let path: &CStr = c"/dev/tty";
        // SAFETY: path is NUL-terminated; O_NOCTTY so that opening never acquires a terminal.
        let fd = unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return None; // no controlling terminal (CI, cron, setsid)
        }
        // SAFETY: open returned a new fd nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: getpgrp cannot fail; tcgetpgrp only reads the terminal's state.
        let (ours, fg) = unsafe { (libc::getpgrp(), libc::tcgetpgrp(fd.as_raw_fd())) };
        (fg == ours).then_some(Terminal { fd, our_pgrp: ours })
    }

    /// The fd, for the child to make its own group the foreground before it execs.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The terminal's foreground process group now.
    pub fn foreground_group(&self) -> libc::pid_t {
        // SAFETY: tcgetpgrp only reads the terminal's state.
        unsafe { libc::tcgetpgrp(self.fd.as_raw_fd()) }
    }

    /// Whether our own group is the terminal's foreground (false after a shell's `bg`).
    pub fn is_ours(&self) -> bool {
        self.foreground_group() == self.our_pgrp
    }

    /// Make process group `pgrp` the terminal's foreground.
    pub fn give_to(&self, pgrp: libc::pid_t) {
        set_foreground(self.fd.as_raw_fd(), pgrp);
    }

    /// Make our own group the foreground again.
    pub fn take_back(&self) {
        set_foreground(self.fd.as_raw_fd(), self.our_pgrp);
    }
}

/// The terminal lent to the recorded command: dropping the lease takes the terminal back for
/// our own group from whoever memtrack lent it to, and never from a group it was not lent to
/// (after a shell's `bg`, the shell's own group holds it, and it is the shell's to give).
pub struct Lease {
    terminal: Terminal,
    holder: Holder,
}

/// Whom memtrack lent the terminal to.
#[derive(Clone, Copy)]
enum Holder {
    /// A child being started, which makes its own group the foreground before it execs; should
    /// that fail, the group holding the terminal is gone, and taking it back is always right.
    Starting,
    /// The command's process group.
    Group(libc::pid_t),
}

impl Lease {
    /// The lease of `terminal` to a child about to start, which may take the terminal for its
    /// own group.
    pub fn starting(terminal: Terminal) -> Lease {
        Lease {
            terminal,
            holder: Holder::Starting,
        }
    }

    /// The terminal itself.
    pub fn terminal(&self) -> &Terminal {
        &self.terminal
    }

    /// Make `pgrp`, the command's group, the terminal's foreground.
    pub fn lend_to(&mut self, pgrp: libc::pid_t) {
        self.terminal.give_to(pgrp);
        self.holder = Holder::Group(pgrp);
    }

    /// Take the terminal back if whom it was lent to still holds it (also done on drop).
    pub fn restore(&self) {
        match self.holder {
            Holder::Starting => self.terminal.take_back(),
            Holder::Group(pgrp) => {
                if self.terminal.foreground_group() == pgrp {
                    self.terminal.take_back();
                }
            }
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.restore();
    }
}

/// tcsetpgrp with SIGTTOU blocked: a process outside the foreground group may only change it
/// then (otherwise the kernel stops it with SIGTTOU). Async-signal-safe, so a child may call it
/// between fork and exec. Failures are ignored: the terminal may be gone (a hangup).
pub fn set_foreground(fd: RawFd, pgrp: libc::pid_t) {
    // SAFETY: sigset_t is plain data initialised by sigemptyset; sigprocmask and tcsetpgrp are
    // async-signal-safe and take valid pointers or plain values.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTTOU);
        libc::sigprocmask(libc::SIG_BLOCK, &set, &mut old);
        libc::tcsetpgrp(fd, pgrp);
        libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
}

/// The width in columns of the terminal on standard output, or `None` when standard output is
/// not a terminal (a pipe, a file) or the terminal does not say (a width of 0).
pub fn stdout_columns() -> Option<usize> {
    // SAFETY: winsize is plain data; TIOCGWINSZ only writes into the struct we pass, and fails
    // with ENOTTY (leaving it untouched) when fd 1 is not a terminal.
    let (rc, size) = unsafe {
        let mut size: libc::winsize = std::mem::zeroed();
        let rc = libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size);
        (rc, size)
    };
    (rc == 0 && size.ws_col > 0).then_some(usize::from(size.ws_col))
}
