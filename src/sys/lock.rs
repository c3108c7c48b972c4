//! Advisory locks on a recording (flock(2)). `record` holds an exclusive lock on the file it
//! writes for as long as it writes it, and the kernel drops the lock when the recorder closes
//! the file or dies, however it dies. A reader that finds the lock held knows the file is still
//! being written, not cut short. (std's `File::try_lock*` needs a newer Rust than memtrack's
//! minimum.)

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// Tries `flock(file, how | LOCK_NB)`: `Ok(false)` when another open file description holds a
/// conflicting lock.
fn try_flock(file: &File, how: libc::c_int) -> io::Result<bool> {
    // SAFETY: flock takes an open fd (borrowed from `file`) and flags; no memory is passed.
    if unsafe { libc::flock(file.as_raw_fd(), how | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EWOULDBLOCK) => Ok(false),
        _ => Err(e),
    }
}

/// Takes an exclusive lock on `file` without waiting; `Ok(false)` when someone holds one.
/// Closing `file` (every descriptor of its open file description) releases it.
pub fn try_lock_exclusive(file: &File) -> io::Result<bool> {
    try_flock(file, libc::LOCK_EX)
}

/// Whether another open file description holds an exclusive lock on `file` (a recorder
/// writing it). Takes and at once releases a shared lock to find out.
pub fn is_locked_by_another(file: &File) -> io::Result<bool> {
    if !try_flock(file, libc::LOCK_SH)? {
        return Ok(true);
    }
    // SAFETY: as in try_flock; unlocking what this description just took.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
    Ok(false)
}

/// For tests: waits until nobody holds a lock on the file at `path`, and fails after 10 s. A
/// descriptor a test has closed can live on for a moment in another test's child: forked
/// (`Command::spawn`) before its exec closed the copy, the child holds the lock until then.
/// So a test waits for the release, not a fixed time.
#[cfg(test)]
pub fn wait_until_unlocked(path: &std::path::Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while is_locked_by_another(&File::open(path).unwrap()).unwrap() {
        let waited = std::time::Instant::now() < deadline;
        assert!(
            waited,
            "{} still locked 10 s after its writer closed it",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_seen_through_another_open() {
        let path = std::env::temp_dir().join(format!("memtrack-lock-{}", std::process::id()));
        let writer = File::create(&path).unwrap();
        let reader = File::open(&path).unwrap();
        assert!(!is_locked_by_another(&reader).unwrap());
        assert!(try_lock_exclusive(&writer).unwrap());
        assert!(is_locked_by_another(&reader).unwrap());
        // Twice: checking leaves nothing behind.
        assert!(is_locked_by_another(&reader).unwrap());
        drop(writer);
        wait_until_unlocked(&path);
        assert!(!is_locked_by_another(&reader).unwrap());
        // A reader's check never blocks the writer either.
        let writer = File::options().write(true).open(&path).unwrap();
        assert!(try_lock_exclusive(&writer).unwrap());
        std::fs::remove_file(&path).unwrap();
    }
}
