//! What can go wrong opening or writing a recording, before any event flows.
//!
//! `Writer` returns these while writing; `Reader::new` returns them when the start of a file
//! (magic, version, header) is unusable, and `Reader::open` a [`FileError`], the same with the
//! file's path. Damage later in a file is not an error but how reading ends
//! (`ReadEnd::Damaged`), so a report can still show everything before it. Each value keeps what
//! was found and where; the crate's `Error` is made from a `FileError` in src/error.rs, so that
//! `format` names nothing of the commands that read it.

use std::fmt;
use std::path::PathBuf;

use super::{FORMAT_VERSION, MAGIC, OLDEST_FORMAT_VERSION};

/// What `FormatError::StillBeingWritten` says: why `Reader::open` refuses a file whose recorder still writes it.
pub const STILL_BEING_WRITTEN: &str = "the recording is still being written (memtrack record \
     holds it and has not written its trailer yet); wait for memtrack record to finish, then \
     run this again";

/// A recording that cannot be opened, or an event or header that cannot be written.
#[derive(Debug)]
#[non_exhaustive]
pub enum FormatError {
    /// Reading or writing the underlying stream failed.
    Io(std::io::Error),
    /// The file does not start with `MAGIC`; `found` holds its first bytes (at most 8).
    NotMemtrack { found: Vec<u8> },
    /// The file ends at byte `offset`, inside `what` ("the magic", "the header", ...).
    Truncated { offset: u64, what: &'static str },
    /// The file's format version is one this memtrack cannot read.
    UnsupportedVersion { found: u16 },
    /// The header frame starting at byte `offset` is damaged; `reason` says how.
    BadHeader { offset: u64, reason: String },
    /// A header, event or trailer whose encoding (`bytes`, estimated) exceeds what one frame may
    /// hold (`max`); nothing was written for it.
    TooLarge {
        what: &'static str,
        bytes: u64,
        max: u64,
    },
    /// postcard refused to encode a value (does not happen for the types written here).
    Encode { what: &'static str, message: String },
    /// The recorder still holds the file and has not written its trailer (`sys::lock`): the
    /// file is not damaged, only unfinished.
    StillBeingWritten,
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::Io(e) => write!(f, "{e}"),
            FormatError::NotMemtrack { found } if found.is_empty() => write!(
                f,
                "not a memtrack recording (the file is empty, expected {})",
                String::from_utf8_lossy(&MAGIC)
            ),
            FormatError::NotMemtrack { found } => {
                f.write_str("not a memtrack recording (starts with")?;
                for b in found {
                    write!(f, " {b:02x}")?;
                }
                write!(f, ", expected {})", String::from_utf8_lossy(&MAGIC))
            }
            FormatError::Truncated { offset, what } => write!(
                f,
                "the file ends at byte {offset}, inside {what} (the recording was cut short)"
            ),
            FormatError::UnsupportedVersion { found } if *found > FORMAT_VERSION => write!(
                f,
                "format version {found} is newer than this memtrack reads ({FORMAT_VERSION}); \
                 upgrade memtrack"
            ),
            FormatError::UnsupportedVersion { found } => write!(
                f,
                "format version {found} was never written by memtrack (this memtrack reads \
                 {OLDEST_FORMAT_VERSION} to {FORMAT_VERSION}); the file is damaged"
            ),
            FormatError::BadHeader { offset, reason } => {
                write!(f, "damaged header at byte {offset}: {reason}")
            }
            FormatError::TooLarge { what, bytes, max } => write!(
                f,
                "{what} needs about {bytes} bytes, more than the {max} one frame may hold; \
                 shorten it"
            ),
            FormatError::Encode { what, message } => write!(f, "cannot encode {what}: {message}"),
            FormatError::StillBeingWritten => f.write_str(STILL_BEING_WRITTEN),
        }
    }
}

impl std::error::Error for FormatError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FormatError::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// A [`FormatError`] on the file at `path`, as `Reader::open` returns it.
#[derive(Debug)]
pub struct FileError {
    pub path: PathBuf,
    pub error: FormatError,
}

/// The path, then what is wrong: the line the user reads.
impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.error)
    }
}

impl std::error::Error for FileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl From<std::io::Error> for FormatError {
    fn from(e: std::io::Error) -> Self {
        FormatError::Io(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_magic_names_the_bytes_found() {
        let e = FormatError::NotMemtrack {
            found: vec![0x89, 0x50, 0x4e, 0x47],
        };
        assert_eq!(
            e.to_string(),
            "not a memtrack recording (starts with 89 50 4e 47, expected MEMTRACK)"
        );
    }

    #[test]
    fn empty_file_says_empty() {
        let e = FormatError::NotMemtrack { found: vec![] };
        assert!(e.to_string().contains("empty"), "{e}");
    }

    #[test]
    fn newer_version_names_both() {
        let e = FormatError::UnsupportedVersion { found: 8 };
        assert_eq!(
            e.to_string(),
            "format version 8 is newer than this memtrack reads (7); upgrade memtrack"
        );
    }

    #[test]
    fn version_zero_names_both() {
        let s = FormatError::UnsupportedVersion { found: 0 }.to_string();
        assert!(s.contains("version 0") && s.contains("reads 1 to 7"), "{s}");
    }

    #[test]
    fn display_is_one_line() {
        let all = [
            FormatError::NotMemtrack { found: vec![1, 2] },
            FormatError::Truncated {
                offset: 9,
                what: "the format version",
            },
            FormatError::UnsupportedVersion { found: 3 },
            FormatError::BadHeader {
                offset: 10,
                reason: "checksum mismatch".into(),
            },
            FormatError::TooLarge {
                what: "an exec event",
                bytes: 1 << 30,
                max: 1 << 23,
            },
        ];
        for e in all {
            assert!(!e.to_string().contains('\n'), "{e}");
        }
    }
}
