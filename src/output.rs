//! Every file memtrack writes with `-o` (`record`, `report`, `diff`), made one way. A regular
//! file (or a new name) is written under a hidden temporary name in the directory of `-o` and
//! renamed over it only when complete, so a failure never leaves half a file or destroys the
//! previous one; `record` also locks it (`sys::lock`: readers then know it is still being
//! written) and renames it once the command has started. A symbolic link at `-o` is followed
//! (the new file replaces its target, as writing through the link would), and what is not a
//! regular file (`/dev/null`, a FIFO, `/dev/stdout`) is written in place: renaming over it
//! would replace a device with a file, which as root breaks the machine.

use std::fs::File;
use std::io::Write;
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
        let path = match Target::of(path)? {
            Target::InPlace(path) => {
                let file = File::options()
                    .write(true)
                    .open(&path)
                    .map_err(|e| create_error(&path, e))?;
                return Ok(PendingOutput {
                    file: Some(file),
                    temp: None,
                    path,
                });
            }
            Target::Replace(path) => path,
        };
        let path = path.as_path();
        let (temp, file) = create_temporary(path)?;
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

/// Where the bytes for `-o PATH` go.
enum Target {
    /// Not a regular file (a device, a FIFO, a socket): opened and written as it is.
    InPlace(PathBuf),
    /// A regular file, or nothing yet: replaced by a complete new file at this path (the
    /// target of a symbolic link, when `-o` is one).
    Replace(PathBuf),
}

impl Target {
    fn of(path: &Path) -> Result<Target, Error> {
        match std::fs::metadata(path) {
            Ok(m) if !m.is_file() => Ok(Target::InPlace(path.to_path_buf())),
            // The file replaces the link's target, as writing through the link would.
            Ok(_) if path.is_symlink() => {
                let target = std::fs::canonicalize(path).map_err(|e| create_error(path, e))?;
                Ok(Target::Replace(target))
            }
            // A missing file (or a dangling link, which then becomes the new file).
            _ => Ok(Target::Replace(path.to_path_buf())),
        }
    }
}

/// Creates the hidden temporary file beside `path` that will replace it. Named for memtrack,
/// so a leftover (memtrack killed meanwhile) says whose it is.
fn create_temporary(path: &Path) -> Result<(PathBuf, File), Error> {
    let name = path.file_name().ok_or_else(|| {
        Error::Usage(format!(
            "-o {}: give a file name, e.g. -o run.mt",
            path.display()
        ))
    })?;
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(".memtrack-{}.tmp", std::process::id()));
    let temp = path.with_file_name(temp_name);
    let file = File::options()
        .write(true)
        .create_new(true)
        .open(&temp)
        .map_err(|e| create_error(path, e))?;
    Ok((temp, file))
}

/// Writes `-o path` with `write` (a report, a diff): a regular file is replaced only once
/// `write` succeeded and the bytes are on disk, a device or FIFO is written in place, a link is
/// followed. A failed `write` leaves a previous file as it was and returns its error.
pub fn write_file(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> Result<(), Error>,
) -> Result<(), Error> {
    let path = match Target::of(path)? {
        Target::InPlace(path) => {
            let mut file = File::options()
                .write(true)
                .open(&path)
                .map_err(|e| create_error(&path, e))?;
            return write(&mut file);
        }
        Target::Replace(path) => path,
    };
    let (temp, mut file) = create_temporary(&path)?;
    let written = write(&mut file)
        .and_then(|()| file.sync_all().map_err(|e| Error::io(&temp, e)))
        .and_then(|()| std::fs::rename(&temp, &path).map_err(|e| Error::io(&path, e)));
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

/// The one-line error for a file that cannot be created at `path`.
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

/// Maps an output failure to an error; a closed pipe (`memtrack report f | head`) is not one.
pub fn output_result(result: std::io::Result<()>) -> Result<(), Error> {
    match result {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Error::io("<output>", e)),
        Ok(()) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        lock::wait_until_unlocked(&path);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A character device like /dev/null (1, 3) made in `dir`, never the machine's own; `None`
    /// (with the reason printed) where mknod is not allowed.
    fn null_device(dir: &Path) -> Option<PathBuf> {
        let dev = dir.join("null");
        let made = std::process::Command::new("mknod")
            .arg(&dev)
            .args(["c", "1", "3"])
            .output();
        match made {
            Ok(o) if o.status.success() => Some(dev),
            Ok(o) => {
                eprintln!(
                    "skipped: mknod: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("skipped: mknod: {e}");
                None
            }
        }
    }

    #[test]
    fn a_device_is_written_directly_never_replaced() {
        use std::os::unix::fs::FileTypeExt;
        let dir = scratch("device");
        let Some(dev) = null_device(&dir) else {
            return;
        };
        let mut file = PendingOutput::create(&dev, None).unwrap().commit();
        file.write_all(b"recording").unwrap();
        write_file(&dev, |w| {
            w.write_all(b"report").map_err(|e| Error::io("x", e))
        })
        .unwrap();
        let meta = std::fs::symlink_metadata(&dev).unwrap();
        assert!(meta.file_type().is_char_device());
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "no temporary left"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_write_keeps_the_previous_file() {
        let dir = scratch("failed");
        let path = dir.join("report.txt");
        std::fs::write(&path, b"previous").unwrap();
        let e = write_file(&path, |w| {
            w.write_all(b"half").unwrap();
            Err(Error::Usage("no".into()))
        });
        assert!(e.is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"previous");
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "temporary removed"
        );
        write_file(&path, |w| {
            w.write_all(b"new").map_err(|e| Error::io("x", e))
        })
        .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
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
