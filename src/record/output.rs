//! The file `record` writes. It is created under a temporary name in the directory of `-o`,
//! locked (`sys::lock`: readers then know it is still being written), and renamed over `-o`
//! only once the command has started; a command that cannot start, or a failure before it,
//! removes the temporary file and leaves a previous recording at `-o` as it was. A symbolic
//! link at `-o` is followed (the recording replaces its target), and what is not a regular file
//! (`/dev/null`, a FIFO, `/dev/stdout`) is written directly: renaming over it would replace a
//! device with a file.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::sys::lock;

/// Checks what can be checked of `-o PATH` before anything is loaded: that it names a file in
/// a directory that exists.
pub fn validate(path: &Path) -> Result<(), Error> {
    validate_output(path, "run.mt")
}

/// Checks that `-o PATH` names a file in a directory that exists; the errors suggest a file
/// named like `example`. Also for `report -o`.
pub fn validate_output(path: &Path, example: &str) -> Result<(), Error> {
    if path.as_os_str().is_empty() {
        return Err(Error::Usage(format!(
            "-o needs a file name, e.g. -o {example}; an empty one names no file"
        )));
    }
    if path.is_dir() {
        return Err(Error::Usage(format!(
            "-o {}: that is a directory; give a file name, e.g. -o {}",
            path.display(),
            path.join(example).display()
        )));
    }
    let dir = directory_of(path);
    if !dir.is_dir() {
        return Err(Error::Usage(format!(
            "-o {}: the directory {} does not exist; create it first, or give -o a path in an \
             existing directory",
            path.display(),
            dir.display()
        )));
    }
    Ok(())
}

/// The directory `path` is in ("." for a bare file name).
fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// A recording being created: written under `temp` until `commit` moves it to `path` (no
/// `temp` when `-o` is not a regular file, which is written directly).
pub struct PendingOutput {
    file: Option<File>,
    temp: Option<PathBuf>,
    path: PathBuf,
}

impl PendingOutput {
    /// Creates and locks the temporary file beside `path`, owned by `owner` (uid, gid) when
    /// given, as the recording will be.
    pub fn create(path: &Path, owner: Option<(u32, u32)>) -> Result<PendingOutput, Error> {
        validate(path)?;
        match std::fs::metadata(path) {
            Ok(m) if !m.is_file() => {
                let file = File::options()
                    .write(true)
                    .open(path)
                    .map_err(|e| create_error(path, e))?;
                return Ok(PendingOutput {
                    file: Some(file),
                    temp: None,
                    path: path.to_path_buf(),
                });
            }
            // The recording replaces the link's target, as writing through the link would.
            Ok(_) if path.is_symlink() => {
                let target = std::fs::canonicalize(path).map_err(|e| create_error(path, e))?;
                return PendingOutput::create(&target, owner);
            }
            _ => {}
        }
        let name = path.file_name().ok_or_else(|| {
            Error::Usage(format!(
                "-o {}: give a file name, e.g. -o run.mt",
                path.display()
            ))
        })?;
        // Hidden, and named for the recorder, so a leftover (memtrack killed while starting the
        // command) says whose it is.
        let mut temp_name = std::ffi::OsString::from(".");
        temp_name.push(name);
        temp_name.push(format!(".memtrack-{}.tmp", std::process::id()));
        let temp = path.with_file_name(temp_name);
        let file = File::options()
            .write(true)
            .create_new(true)
            .open(&temp)
            .map_err(|e| create_error(path, e))?;
        let pending = PendingOutput {
            file: Some(file),
            temp: Some(temp.clone()),
            path: path.to_path_buf(),
        };
        let file = pending.file.as_ref().expect("just created");
        match lock::try_lock_exclusive(file) {
            Ok(true) => {}
            Ok(false) => {
                return Err(Error::Internal(format!(
                    "{}: another process locked memtrack's new temporary file; record again",
                    temp.display()
                )))
            }
            // Some file systems have no flock: record anyway; only a report made while the
            // recording runs then calls it cut short instead of still being written.
            Err(e) => log::info!("cannot lock {}: {e}", temp.display()),
        }
        if let Some((uid, gid)) = owner {
            // The recording belongs to the user it was made for, not to root.
            if let Err(e) = std::os::unix::fs::fchown(file, Some(uid), Some(gid)) {
                log::warn!("cannot give {} to uid {uid}: {e}", path.display());
            }
        }
        Ok(pending)
    }

    /// The command has started: moves the file to its name (replacing a previous recording
    /// there) and returns it for writing. If the move fails, the recording goes on under the
    /// temporary name, which a warning gives.
    pub fn commit(mut self) -> File {
        let file = self.file.take().expect("committed once");
        if let Some(temp) = &self.temp {
            if let Err(e) = std::fs::rename(temp, &self.path) {
                log::warn!(
                    "cannot move the recording to {} ({e}); it is written to {} instead",
                    self.path.display(),
                    temp.display()
                );
            }
        }
        file
    }
}

impl Drop for PendingOutput {
    /// Not committed: the command never started, so the temporary file goes.
    fn drop(&mut self) {
        if let (Some(_), Some(temp)) = (self.file.take(), &self.temp) {
            let _ = std::fs::remove_file(temp);
        }
    }
}

/// The one-line error for a recording that cannot be created at `path`.
fn create_error(path: &Path, e: std::io::Error) -> Error {
    let dir = directory_of(path);
    let what = match e.kind() {
        std::io::ErrorKind::PermissionDenied => format!(
            "memtrack may not create files in {} (permission denied); give -o a path in a \
             directory it can write",
            dir.display()
        ),
        std::io::ErrorKind::NotFound => format!(
            "the directory {} does not exist; create it first, or give -o a path in an \
             existing directory",
            dir.display()
        ),
        _ => format!(
            "cannot create a file in {} ({e}); give -o another path",
            dir.display()
        ),
    };
    Error::Usage(format!("-o {}: {what}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("memtrack-output-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn an_uncommitted_recording_leaves_the_old_one_alone() {
        let dir = scratch("drop");
        let path = dir.join("run.mt");
        std::fs::write(&path, b"old recording").unwrap();
        let pending = PendingOutput::create(&path, None).unwrap();
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
        drop(pending);
        assert_eq!(std::fs::read(&path).unwrap(), b"old recording");
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "temporary file removed"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_committed_recording_replaces_the_old_one_and_stays_locked() {
        let dir = scratch("commit");
        let path = dir.join("run.mt");
        std::fs::write(&path, b"old recording").unwrap();
        let mut file = PendingOutput::create(&path, None).unwrap().commit();
        file.write_all(b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert!(lock::is_locked_by_another(&File::open(&path).unwrap()).unwrap());
        drop(file);
        assert!(!lock::is_locked_by_another(&File::open(&path).unwrap()).unwrap());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_device_is_written_directly_never_replaced() {
        use std::os::unix::fs::FileTypeExt;
        let mut file = PendingOutput::create(Path::new("/dev/null"), None)
            .unwrap()
            .commit();
        file.write_all(b"recording").unwrap();
        let meta = std::fs::metadata("/dev/null").unwrap();
        assert!(meta.file_type().is_char_device());
    }

    #[test]
    fn a_symbolic_link_is_followed() {
        let dir = scratch("link");
        let target = dir.join("target.mt");
        let link = dir.join("link.mt");
        std::fs::write(&target, b"old").unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let mut file = PendingOutput::create(&link, None).unwrap().commit();
        file.write_all(b"new").unwrap();
        assert!(link.is_symlink());
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_paths_say_what_to_do() {
        let dir = scratch("bad");
        let cases = [
            (dir.join("nodir/x.mt"), "does not exist; create it first"),
            (dir.clone(), "that is a directory; give a file name"),
            (PathBuf::new(), "-o needs a file name"),
        ];
        for (path, want) in cases {
            let e = PendingOutput::create(&path, None).err().unwrap();
            assert!(matches!(e, Error::Usage(_)), "{e:?}");
            assert!(e.to_string().contains(want), "{path:?}: {e}");
            assert_eq!(validate(&path).unwrap_err().to_string(), e.to_string());
        }
        assert!(validate(Path::new("bare-name.mt")).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
