//! Sleeping until the recorder has something to do: one epoll set over the fds that can call
//! for it (the signalfd, the control FIFO, the ring buffer).
//!
//! The ring buffer is watched edge-triggered. Its poll reports "readable" whenever any record
//! is unread, and under load one always is, so a level-triggered wait would never sleep and the
//! recorder would spin on the allocating program's heels (it did: a full CPU of its own, and
//! every record twice as dear to the program, because each drain pulled the ring's cache lines
//! across CPUs while the kernel wrote them). Edge-triggered, epoll reports the ring only when
//! the kernel wakes its waiters, which it does only for records submitted with a wake-up: the
//! discovery stops, where a process waits for us. Everything else is drained on the timer.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// An epoll instance; closed on drop.
pub struct Waiter(OwnedFd);

/// How a watched fd wakes the waiter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// Whenever it is readable (a signalfd, a FIFO).
    Readable,
    /// Only when its owner wakes its waiters (a BPF ring buffer: a record that asked for it).
    WakeUp,
}

impl Waiter {
    pub fn new() -> io::Result<Waiter> {
        // SAFETY: epoll_create1 takes no pointers.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a new fd that nothing else owns.
        Ok(Waiter(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Watch `fd`, reported by [`Waiter::wait`] as bit `token` (below 64). The caller keeps
    /// `fd` open as long as it waits on it (closing it removes it from the set).
    pub fn watch(&self, fd: BorrowedFd<'_>, token: u32, trigger: Trigger) -> io::Result<()> {
        let mut events = libc::EPOLLIN as u32;
        if trigger == Trigger::WakeUp {
            events |= libc::EPOLLET as u32;
        }
        let mut ev = libc::epoll_event {
            events,
            u64: u64::from(token),
        };
        // SAFETY: ev is a valid epoll_event; both fds are open.
        let rc = unsafe {
            libc::epoll_ctl(
                self.0.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                fd.as_raw_fd(),
                &mut ev,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Sleep until a watched fd is ready or `timeout` passes; returns the ready tokens as a bit
    /// set (0 on timeout or when a signal handler interrupted the wait).
    pub fn wait(&self, timeout: Duration) -> u64 {
        let empty = libc::epoll_event { events: 0, u64: 0 };
        let mut ready = [empty; 8];
        let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
        // SAFETY: `ready` has room for the count passed.
        let n = unsafe {
            libc::epoll_wait(
                self.0.as_raw_fd(),
                ready.as_mut_ptr(),
                ready.len() as libc::c_int,
                ms,
            )
        };
        ready[..n.max(0) as usize]
            .iter()
            .fold(0, |bits, ev| bits | 1u64 << (ev.u64 & 63))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::time::Instant;

    fn pipe() -> (std::fs::File, std::fs::File) {
        let mut fds = [0; 2];
        // SAFETY: fds has room for two fds.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: pipe2 returned two new fds that nothing else owns.
        unsafe {
            (
                std::fs::File::from_raw_fd(fds[0]),
                std::fs::File::from_raw_fd(fds[1]),
            )
        }
    }

    #[test]
    fn readable_fds_are_reported_every_time_and_timeouts_are_empty() {
        let w = Waiter::new().unwrap();
        let (r, mut wr) = pipe();
        w.watch(r.as_fd(), 3, Trigger::Readable).unwrap();
        let start = Instant::now();
        assert_eq!(w.wait(Duration::from_millis(20)), 0);
        assert!(start.elapsed() >= Duration::from_millis(15));
        wr.write_all(b"x").unwrap();
        assert_eq!(w.wait(Duration::from_secs(5)), 1 << 3);
        // Still unread: level-triggered reports it again.
        assert_eq!(w.wait(Duration::from_secs(5)), 1 << 3);
    }

    #[test]
    fn wake_up_fds_are_reported_once_per_wake_up() {
        let w = Waiter::new().unwrap();
        let (r, mut wr) = pipe();
        w.watch(r.as_fd(), 1, Trigger::WakeUp).unwrap();
        wr.write_all(b"x").unwrap();
        assert_eq!(w.wait(Duration::from_secs(5)), 1 << 1);
        // Unread but not woken again: not reported, the wait times out.
        assert_eq!(w.wait(Duration::from_millis(10)), 0);
        wr.write_all(b"y").unwrap();
        assert_eq!(w.wait(Duration::from_secs(5)), 1 << 1);
    }
}
