//! The calls the control channel needs that std does not wrap (at memtrack's minimum Rust):
//! making a FIFO (mkfifo(3)), waiting for one to become readable (poll(2)) and taking turns on
//! it (flock(2)). Everything else on the FIFOs (opening without blocking, reading, writing,
//! ownership) is safe std code in `control` and `record::listen`.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

/// Makes a FIFO at `path` with permission bits `mode` (the umask may take bits away, never add
/// them). Fails with `AlreadyExists` if anything is at `path`, a symbolic link included.
pub fn make(path: &Path, mode: u32) -> io::Result<()> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "the path contains a NUL"))?;
    // SAFETY: c is a NUL-terminated path that outlives the call.
    if unsafe { libc::mkfifo(c.as_ptr(), mode as libc::mode_t) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Waits up to `timeout` until `file` can be read without blocking: data, or every writer gone.
/// Returns false on timeout.
pub fn wait_readable(file: &File, timeout: Duration) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: file.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: pfd is one valid pollfd for the duration of the call; the fd is open (borrowed).
    match unsafe { libc::poll(&mut pfd, 1, ms) } {
        n if n > 0 => Ok(true),
        0 => Ok(false),
        _ => {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            }
        }
    }
}

/// Tries to take an exclusive `flock` on `file` without waiting: `Ok(false)` when another open
/// file description holds it. Closing `file` releases it. (std's `File::try_lock` needs a newer
/// Rust than memtrack's minimum.)
pub fn try_lock(file: &File) -> io::Result<bool> {
    // SAFETY: flock takes an open fd (borrowed from `file`) and flags; no memory is passed.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EWOULDBLOCK) | Some(libc::EINTR) => Ok(false),
        _ => Err(e),
    }
}
