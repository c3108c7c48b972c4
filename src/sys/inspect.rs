//! Reading a stopped process from outside, for the leak scan (src/record/leakscan.rs): its
//! memory through `process_vm_readv`, and each thread's registers through ptrace, held by a
//! [`Seized`] thread that is detached when dropped.
//!
//! The process is already in a group stop (SIGSTOP from BPF) when it is seized; seizing a
//! stopped thread makes the kernel move it to a ptrace stop (`ptrace_attach` sets
//! JOBCTL_TRAP_STOP for a stopped task), and detaching puts it back in the group stop, which
//! the recorder's SIGCONT ends. If the recorder dies in between, the kernel detaches its tracees
//! (`exit_ptrace`), and the guardian continues the tree (guardian.rs).

use std::io;

/// A thread under ptrace, stopped; detached when dropped.
#[derive(Debug)]
pub struct Seized {
    tid: i32,
}

impl Seized {
    /// Seize thread `tid` and wait until it is in a ptrace stop.
    pub fn stop(tid: i32) -> io::Result<Seized> {
        // SAFETY: PTRACE_SEIZE takes no pointer; addr and data are 0 (no options).
        let rc = unsafe { libc::ptrace(libc::PTRACE_SEIZE, tid, 0usize, 0usize) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        let seized = Seized { tid };
        // SAFETY: PTRACE_INTERRUPT takes no pointer.
        let rc = unsafe { libc::ptrace(libc::PTRACE_INTERRUPT, tid, 0usize, 0usize) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        let mut status = 0;
        loop {
            // SAFETY: status is a valid out pointer for the call.
            let got = unsafe { libc::waitpid(tid, &mut status, libc::__WALL) };
            if got == tid {
                break;
            }
            let e = io::Error::last_os_error();
            if got < 0 && e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if !libc::WIFSTOPPED(status) {
            // It ended (killed while stopped): nothing to detach from.
            std::mem::forget(seized);
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        Ok(seized)
    }

    /// The thread's general registers (NT_PRSTATUS) as words, and its stack pointer.
    pub fn registers(&self) -> io::Result<(Vec<u64>, u64)> {
        let mut words = [0u64; 64];
        let mut iov = libc::iovec {
            iov_base: words.as_mut_ptr().cast(),
            iov_len: std::mem::size_of_val(&words),
        };
        // SAFETY: iov points at `words`, which outlives the call; the kernel writes at most
        // iov_len bytes and sets iov_len to what it wrote.
        let rc = unsafe {
            libc::ptrace(
                libc::PTRACE_GETREGSET,
                self.tid,
                libc::NT_PRSTATUS as usize,
                &mut iov as *mut libc::iovec,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        let n = iov.iov_len / 8;
        // x86_64 user_regs_struct: rsp is word 19; arm64 user_pt_regs: sp is word 31.
        let sp_index = if cfg!(target_arch = "aarch64") {
            31
        } else {
            19
        };
        let sp = words.get(sp_index).copied().unwrap_or(0);
        Ok((words[..n.min(words.len())].to_vec(), sp))
    }
}

impl Drop for Seized {
    fn drop(&mut self) {
        // SAFETY: PTRACE_DETACH with signal 0 takes no pointer. A thread that is gone makes it
        // fail with ESRCH, which leaves nothing to do.
        unsafe { libc::ptrace(libc::PTRACE_DETACH, self.tid, 0usize, 0usize) };
    }
}

/// Read the ranges `remote` (address, length) of process `pid` into `buf`, one after another,
/// in one `process_vm_readv` call (at most 1024 ranges). Returns the bytes read, which stop at
/// the first range that is not wholly readable.
pub fn read_memory(pid: i32, remote: &[(u64, usize)], buf: &mut [u8]) -> io::Result<usize> {
    let total: usize = remote.iter().map(|r| r.1).sum();
    assert!(total <= buf.len() && remote.len() <= 1024);
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: total,
    };
    let iovs: Vec<libc::iovec> = remote
        .iter()
        .map(|&(addr, len)| libc::iovec {
            iov_base: addr as *mut libc::c_void,
            iov_len: len,
        })
        .collect();
    // SAFETY: `local` covers `total` bytes of `buf`, which the call may write; the remote
    // iovecs are addresses in the other process, which the kernel checks.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, iovs.as_ptr(), iovs.len() as _, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}
