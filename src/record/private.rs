//! Private allocator libraries (issue 19): the recorded tree runs with its own copies of the
//! allocator libraries of this machine, so that the machine-wide probes on them tax nobody
//! outside the tree.
//!
//! A uprobe belongs to an inode, not a path. Before the guardian forks, every allocator library
//! memtrack knows that the dynamic loader would load here (`binary::allocator_libraries`: glibc,
//! the loader, libstdc++, jemalloc, mimalloc, tcmalloc...) is copied byte for byte into a tmpfs
//! that is mounted nowhere (`sys::mount`). The guardian, before it forks the command, enters a
//! mount namespace of its own (slave of the host's, so the host's mounts still reach it) in which
//! each copy is bind-mounted over its library's real path; the command inherits it. Discovery
//! probes the copies (the C library and the loader up front, the others when a tracked process maps
//! them), one attach per library as before, and every process outside the tree runs the untouched
//! files. The copies disappear with the recorder's descriptors and the tree's namespace.
//!
//! Before the recording relies on it, [`PrivateLibs::check`] has a child do the same steps;
//! should it fail (no CAP_SYS_ADMIN, a seccomp'd container), the recording probes the shared
//! files as with `--no-private-libs`, after one warning line.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::record::file_key::FileKey;
use crate::sys::mount::{DetachedTmpfs, MountSteps, Step};

/// A private copy of one library.
pub struct Copy {
    /// The library's real path (no symlink in it), which the copy covers in the tree.
    pub real: PathBuf,
    /// The copy, open read-only: probes attach through it.
    file: File,
    /// The copy's file in the kernel's terms: what the tree's processes map.
    pub key: FileKey,
    /// Its name in the tmpfs.
    name: CString,
}

impl Copy {
    /// A path that opens the copy (this process's descriptor of it).
    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.file.as_raw_fd()))
    }
}

/// The copies of a recording, in the tmpfs that holds them.
pub struct PrivateLibs {
    fs: DetachedTmpfs,
    copies: Vec<Copy>,
}

impl PrivateLibs {
    /// Copy each of `libraries` (real paths). A library that cannot be read is left out (the
    /// tree then maps the real file, probed as before); failing to make the tmpfs is an error.
    pub fn make(libraries: &[PathBuf]) -> io::Result<PrivateLibs> {
        let fs = DetachedTmpfs::new()?;
        let mut copies = Vec::new();
        for (i, real) in libraries.iter().enumerate() {
            match copy_one(&fs, i, real) {
                Ok(c) => copies.push(c),
                Err(e) => log::info!("{}: no private copy ({e})", real.display()),
            }
        }
        Ok(PrivateLibs { fs, copies })
    }

    /// [`PrivateLibs::make`], then [`PrivateLibs::check`]: copies the command can run with,
    /// or why there are none, in words.
    pub fn make_checked(libraries: &[PathBuf]) -> Result<PrivateLibs, String> {
        let libs = PrivateLibs::make(libraries)
            .map_err(|e| format!("cannot make a private tmpfs ({e})"))?;
        libs.check()?;
        Ok(libs)
    }

    /// The copies made.
    pub fn copies(&self) -> &[Copy] {
        &self.copies
    }

    /// Their size in all, bytes.
    pub fn bytes(&self) -> u64 {
        self.copies
            .iter()
            .filter_map(|c| c.file.metadata().ok())
            .map(|m| m.len())
            .sum()
    }

    /// What the command's child does before its exec: a namespace in which each copy covers
    /// its library. Each call makes new bind mounts (moving one uses it up).
    pub fn steps(&self) -> io::Result<MountSteps> {
        let mut binds = Vec::with_capacity(self.copies.len());
        for c in &self.copies {
            let target = CString::new(c.real.as_os_str().as_bytes())
                .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
            binds.push((self.fs.bind_of(&c.name)?, target));
        }
        Ok(MountSteps::new(binds))
    }

    /// Whether a child can enter the namespace: a forked child takes the very steps the
    /// command's will, and exits. `Err` says why not, in words.
    pub fn check(&self) -> Result<(), String> {
        let steps = self.steps().map_err(|e| match e.raw_os_error() {
            // open_tree(OPEN_TREE_CLONE) of a file in a mount that is in no namespace.
            Some(libc::EINVAL) => "this kernel cannot bind files from a detached mount \
                                       (open_tree of a detached mount came in Linux 6.15)"
                .to_string(),
            _ => format!("cannot clone a mount ({e})"),
        })?;
        match crate::sys::mount::try_in_child(&steps) {
            Ok(Ok(())) => Ok(()),
            Ok(Err((step, errno))) => Err(self.step_words(step, errno)),
            Err(e) => Err(format!("cannot fork to try it ({e})")),
        }
    }

    fn step_words(&self, step: Step, errno: i32) -> String {
        let e = io::Error::from_raw_os_error(errno);
        match step {
            Step::Unshare => format!("unshare(CLONE_NEWNS): {e}"),
            Step::Slave => format!("making the mounts slaves: {e}"),
            Step::Bind(i) => format!(
                "binding a copy over {}: {e}",
                self.copies
                    .get(i)
                    .map_or(Path::new("?"), |c| &c.real)
                    .display()
            ),
        }
    }
}

/// Copy `real` into `fs` as its `i`th file; the copy is opened again read-only, so that no
/// descriptor may write it while the tree executes it (ETXTBSY).
fn copy_one(fs: &DetachedTmpfs, i: usize, real: &Path) -> io::Result<Copy> {
    let name = CString::new(format!("{i}")).expect("digits hold no NUL");
    let mut source = File::open(real)?;
    {
        let mut dest = fs.create(&name)?;
        io::copy(&mut source, &mut dest)?;
    }
    let file = fs.open(&name)?;
    let key = FileKey::of(&file.metadata()?);
    Ok(Copy {
        real: real.to_path_buf(),
        file,
        key,
        name,
    })
}

/// The private copies for a recording, made (or found impossible) without a word:
/// [`Prepared::said`] says what came of them, once the recording is sure to go on (they are
/// made while preflight runs, which may refuse the recording).
pub fn prepare() -> Prepared {
    let libraries = crate::binary::allocator_libraries();
    if libraries.is_empty() {
        return Prepared::NoLibraries;
    }
    match PrivateLibs::make_checked(&libraries) {
        Ok(libs) => Prepared::Made(libs),
        Err(why) => Prepared::Refused(why),
    }
}

/// What [`prepare`] came to.
pub enum Prepared {
    NoLibraries,
    Made(PrivateLibs),
    /// The machine does not let the command run with copies: why.
    Refused(String),
}

impl Prepared {
    /// The copies, or `None` with one line saying why and, for a refusal, what it costs.
    pub fn said(self) -> Option<PrivateLibs> {
        match self {
            Prepared::NoLibraries => {
                log::info!(
                    "no allocator library found to copy; probing files as the tree maps them"
                );
                None
            }
            Prepared::Made(libs) => {
                log::info!(
                    "private copies of {} allocator libraries ({}): {}",
                    libs.copies.len(),
                    crate::units::format_bytes(libs.bytes()),
                    libs.copies
                        .iter()
                        .map(|c| c.real.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                Some(libs)
            }
            Prepared::Refused(why) => {
                log::warn!("{}", fallback_warning(&why));
                None
            }
        }
    }
}

/// The warning when the copies cannot be used: why, and what it costs.
pub fn fallback_warning(why: &str) -> String {
    format!(
        "cannot give the command private copies of its allocator libraries ({why}); probing \
         the shared files instead, which slows every process on the machine that allocates \
         while the recording runs (--no-private-libs chooses this without the warning)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_are_byte_identical_other_inodes_and_bind_over_their_files() {
        let dir = std::env::temp_dir().join(format!("memtrack-private-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("liba.so"), dir.join("libb.so"));
        std::fs::write(&a, b"\x7fELF a").unwrap();
        std::fs::write(&b, vec![7u8; 100_000]).unwrap();
        let libs = match PrivateLibs::make(&[a.clone(), dir.join("missing.so"), b.clone()]) {
            Ok(l) => l,
            Err(e) => {
                eprintln!("skipped: no private tmpfs here ({e})");
                return;
            }
        };
        let reals: Vec<&Path> = libs.copies().iter().map(|c| c.real.as_path()).collect();
        assert_eq!(
            reals,
            [a.as_path(), b.as_path()],
            "the missing file is left out"
        );
        for c in libs.copies() {
            assert_eq!(
                std::fs::read(c.path()).unwrap(),
                std::fs::read(&c.real).unwrap()
            );
            assert_ne!(c.key, FileKey::of(&std::fs::metadata(&c.real).unwrap()));
        }
        assert_eq!(libs.bytes(), 6 + 100_000);
        assert_eq!(libs.check(), Ok(()));
        // Twice: each check makes its own mounts.
        assert_eq!(libs.check(), Ok(()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_fallback_is_one_line_with_the_cost_and_the_flag() {
        let w = fallback_warning("unshare(CLONE_NEWNS): Operation not permitted");
        assert!(!w.contains('\n'), "{w}");
        assert!(w.contains("Operation not permitted") && w.contains("--no-private-libs"));
        assert!(w.contains("every process on the machine"), "{w}");
    }
}
