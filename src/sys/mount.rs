//! Private files for the recorded command (issue 19): a tmpfs mounted nowhere, whose files
//! memtrack writes and probes, and the steps that bind them over real paths inside the
//! command's own mount namespace.
//!
//! A uprobe belongs to an inode. A file of a tmpfs made with the new mount API (`fsopen`,
//! `fsmount`) and never attached to any path is reachable only through memtrack's descriptors,
//! and it disappears with the last of them and the last namespace that mounts it: nothing to
//! clean up after a crash. A memfd would be the same kind of owner, but the kernel refuses to
//! bind-mount one (`may_copy_tree`: a memfd's mount is internal, EINVAL); a detached tmpfs's
//! file can be cloned as a detached bind mount (`open_tree(OPEN_TREE_CLONE)`) and moved over
//! a path (`move_mount`) by a child after `unshare(CLONE_NEWNS)` (measured on Linux 6.18).
//!
//! [`MountSteps::enter`] runs between fork and exec, so it makes only raw system calls on
//! values computed before the fork.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// linux/mount.h: `fsconfig` commands and `fsmount`, `open_tree`, `move_mount` and
/// `mount_setattr` flags (not all of them are in the libc crate for every target).
const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
const FSOPEN_CLOEXEC: libc::c_uint = 1;
const FSMOUNT_CLOEXEC: libc::c_uint = 1;
const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 4;
const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;

/// `struct mount_attr` of linux/mount.h (MOUNT_ATTR_SIZE_VER0).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// The return value of a system call that returns a new descriptor, owned.
fn owned_fd(ret: libc::c_long) -> io::Result<OwnedFd> {
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the call returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(ret as RawFd) })
}

/// A tmpfs mounted nowhere: its files are reached through this descriptor alone.
pub struct DetachedTmpfs {
    root: OwnedFd,
}

impl DetachedTmpfs {
    /// Make one (needs CAP_SYS_ADMIN).
    pub fn new() -> io::Result<DetachedTmpfs> {
        // SAFETY: a NUL-terminated constant and integer flags.
        let fs = owned_fd(unsafe {
            libc::syscall(libc::SYS_fsopen, c"tmpfs".as_ptr(), FSOPEN_CLOEXEC)
        })?;
        // SAFETY: FSCONFIG_CMD_CREATE takes no key nor value.
        let created = unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                fs.as_raw_fd(),
                FSCONFIG_CMD_CREATE,
                std::ptr::null::<libc::c_char>(),
                std::ptr::null::<libc::c_void>(),
                0,
            )
        };
        if created < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fs is an open filesystem context; no mount attributes.
        let root = owned_fd(unsafe {
            libc::syscall(libc::SYS_fsmount, fs.as_raw_fd(), FSMOUNT_CLOEXEC, 0)
        })?;
        Ok(DetachedTmpfs { root })
    }

    /// Create the file `name` (one path component) for writing, mode 0755.
    pub fn create(&self, name: &CStr) -> io::Result<File> {
        self.open_at(
            name,
            libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC,
        )
    }

    /// Open the file `name` read-only.
    pub fn open(&self, name: &CStr) -> io::Result<File> {
        self.open_at(name, libc::O_RDONLY | libc::O_CLOEXEC)
    }

    fn open_at(&self, name: &CStr, flags: libc::c_int) -> io::Result<File> {
        // SAFETY: name is NUL-terminated; the mode is a plain value.
        let fd = unsafe { libc::openat(self.root.as_raw_fd(), name.as_ptr(), flags, 0o755) };
        owned_fd(fd as libc::c_long).map(File::from)
    }

    /// A detached, read-only bind mount of the file `name`, for a child to move over a path
    /// ([`MountSteps`]). Each call makes a new one: moving a mount uses it up.
    pub fn bind_of(&self, name: &CStr) -> io::Result<OwnedFd> {
        // SAFETY: name is NUL-terminated; integer flags.
        let tree = owned_fd(unsafe {
            libc::syscall(
                libc::SYS_open_tree,
                self.root.as_raw_fd(),
                name.as_ptr(),
                OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint,
            )
        })?;
        let attr = MountAttr {
            attr_set: MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
            attr_clr: 0,
            propagation: 0,
            userns_fd: 0,
        };
        // SAFETY: attr is a live mount_attr of the size passed; the empty path with
        // AT_EMPTY_PATH names the tree itself.
        let set = unsafe {
            libc::syscall(
                libc::SYS_mount_setattr,
                tree.as_raw_fd(),
                c"".as_ptr(),
                libc::AT_EMPTY_PATH,
                &attr as *const MountAttr,
                std::mem::size_of::<MountAttr>(),
            )
        };
        if set < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(tree)
    }
}

/// The step of [`MountSteps::enter`] that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// `unshare(CLONE_NEWNS)`.
    Unshare,
    /// Making every mount a slave of the host's.
    Slave,
    /// Moving the bind mount of the file with this index over its path.
    Bind(usize),
}

/// What a child does before it execs, so that it runs in a mount namespace of its own in which
/// each detached bind mount covers its path. Built before the fork; holds the descriptors of
/// the mounts (used up by one `enter`) and the target paths.
pub struct MountSteps {
    binds: Vec<(OwnedFd, CString)>,
}

impl MountSteps {
    /// The steps that move each `(bind, target)` over its absolute target path.
    pub fn new(binds: Vec<(OwnedFd, CString)>) -> MountSteps {
        MountSteps { binds }
    }

    /// Whether there is nothing to mount.
    pub fn is_empty(&self) -> bool {
        self.binds.is_empty()
    }

    /// In the calling process (single-threaded: the guardian before it forks the command, or
    /// the check's child): leave the parent's mount namespace, make every mount a slave (the
    /// host's mounts still reach us, ours stay here), and move each bind mount over its path.
    /// Async-signal-safe: raw system calls on values made before the fork. Returns the failed
    /// step and its errno.
    pub fn enter(&self) -> Result<(), (Step, i32)> {
        let errno = || io::Error::last_os_error().raw_os_error().unwrap_or(0);
        // SAFETY: unshare takes a flag; mount with a NULL source, type and data and a
        // NUL-terminated constant target only changes propagation.
        unsafe {
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return Err((Step::Unshare, errno()));
            }
            if libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_SLAVE,
                std::ptr::null(),
            ) != 0
            {
                return Err((Step::Slave, errno()));
            }
        }
        for (i, (tree, target)) in self.binds.iter().enumerate() {
            // SAFETY: tree is an open detached mount; both paths are NUL-terminated.
            let moved = unsafe {
                libc::syscall(
                    libc::SYS_move_mount,
                    tree.as_raw_fd(),
                    c"".as_ptr(),
                    libc::AT_FDCWD,
                    target.as_ptr(),
                    MOVE_MOUNT_F_EMPTY_PATH,
                )
            };
            if moved < 0 {
                return Err((Step::Bind(i), errno()));
            }
        }
        Ok(())
    }
}

/// Fork a process that takes `steps` and exits, and return what it found: whether a command's
/// child could enter the namespace. It is a grandchild, whose parent exits at once: tearing
/// its namespace down waits on RCU grace periods (about 10 ms here), which nobody needs to
/// wait for. The children make only async-signal-safe calls, so this is safe in a process
/// with threads too. `Err` when no process could be made.
pub fn try_in_child(steps: &MountSteps) -> io::Result<Result<(), (Step, i32)>> {
    let (read, write) = crate::sys::process::pipe()?;
    // SAFETY: the children run `enter` (raw system calls), fork, one write and _exit: all
    // async-signal-safe, and they return to no Rust code.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above; in the middle child, fork and _exit only.
    if pid == 0 && unsafe { libc::fork() } != 0 {
        // The middle child (or a failed fork: the pipe then closes without an answer).
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(0) }
    }
    if pid == 0 {
        let code: [i32; 2] = match steps.enter() {
            Ok(()) => [-1, 0],
            Err((Step::Unshare, e)) => [-2, e],
            Err((Step::Slave, e)) => [-3, e],
            Err((Step::Bind(i), e)) => [i as i32, e],
        };
        // SAFETY: code is 8 readable bytes; write and _exit are async-signal-safe.
        unsafe {
            libc::write(write.as_raw_fd(), code.as_ptr().cast(), 8);
            libc::_exit(0)
        }
    }
    drop(write);
    let mut status = 0;
    // SAFETY: status is a valid out pointer; pid is our child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    let mut bytes = [0u8; 8];
    io::Read::read_exact(&mut { read }, &mut bytes)?;
    let word = |i: usize| i32::from_ne_bytes(bytes[i * 4..i * 4 + 4].try_into().expect("4"));
    Ok(match (word(0), word(1)) {
        (-1, _) => Ok(()),
        (-2, e) => Err((Step::Unshare, e)),
        (-3, e) => Err((Step::Slave, e)),
        (i, e) => Err((Step::Bind(i.max(0) as usize), e)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_detached_tmpfs_holds_files_nobody_else_reaches() {
        let Ok(fs) = DetachedTmpfs::new() else {
            eprintln!("skipped: no CAP_SYS_ADMIN for fsopen");
            return;
        };
        use std::io::{Read, Write};
        fs.create(c"x").unwrap().write_all(b"hello").unwrap();
        let mut back = String::new();
        fs.open(c"x").unwrap().read_to_string(&mut back).unwrap();
        assert_eq!(back, "hello");
        assert!(fs.create(c"x").is_err(), "created twice");
        assert!(fs.bind_of(c"x").is_ok());
        assert!(fs.bind_of(c"missing").is_err());
    }

    #[test]
    fn a_child_sees_the_private_file_at_the_real_path_and_we_do_not() {
        let Ok(fs) = DetachedTmpfs::new() else {
            eprintln!("skipped: no CAP_SYS_ADMIN for fsopen");
            return;
        };
        use std::io::Write;
        let dir = std::env::temp_dir().join(format!("memtrack-mount-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("target");
        std::fs::write(&target, b"real").unwrap();
        fs.create(c"x").unwrap().write_all(b"copy").unwrap();
        let c_target = CString::new(target.to_str().unwrap()).unwrap();
        let steps = MountSteps::new(vec![(fs.bind_of(c"x").unwrap(), c_target.clone())]);
        assert_eq!(try_in_child(&steps).unwrap(), Ok(()));
        // The child's namespace died with it: our view is untouched.
        assert_eq!(std::fs::read(&target).unwrap(), b"real");
        // A bind mount is used up by one move; the step that failed is named.
        let missing = CString::new(dir.join("missing").to_str().unwrap()).unwrap();
        let steps = MountSteps::new(vec![
            (fs.bind_of(c"x").unwrap(), c_target),
            (fs.bind_of(c"x").unwrap(), missing),
        ]);
        assert_eq!(
            try_in_child(&steps).unwrap(),
            Err((Step::Bind(1), libc::ENOENT))
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
