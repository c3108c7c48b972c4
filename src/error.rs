//! The crate's one error type. Its kinds follow what the user must do next, and each knows the
//! exit code it maps to; `main` prints it on one line and exits with that code.

use std::fmt;
use std::path::PathBuf;

use crate::format::{FileError, FormatError};

/// Everything that can go wrong, with what the user should do about it.
#[derive(Debug)]
pub enum Error {
    /// A flag or argument is wrong; the message says which and what form it takes.
    Usage(String),
    /// Recording needs a privilege or capability we do not have.
    Privilege(String),
    /// The kernel refused something (BTF missing, a program rejected, an attach failed).
    Kernel(String),
    /// Reading or writing a file failed.
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A recording is damaged or of a format we cannot read.
    BadFile { path: PathBuf, message: String },
    /// The command to record does not exist.
    CommandNotFound(String),
    /// The command exists but cannot be executed.
    CannotExecute {
        command: String,
        source: std::io::Error,
    },
    /// The control channel failed: no recorder listening, no reply, or a refused request.
    Control(String),
    /// Anything else that is memtrack's own fault.
    Internal(String),
}

impl Error {
    /// The process exit code this error maps to, for `subcommand`: 127 when the command does
    /// not exist, 126 when it cannot be executed (as `env(1)` and `timeout(1)` say both); any
    /// other failure of `record` is 125, memtrack's own (the command's codes are the rest); for
    /// the other subcommands a bad file or flag is 2 (1 is a failed check or doctor).
    pub fn exit_code(&self, subcommand: Subcommand) -> i32 {
        match self {
            Error::CommandNotFound(_) => 127,
            Error::CannotExecute { .. } => 126,
            _ if subcommand == Subcommand::Record => 125,
            Error::Usage(_) | Error::BadFile { .. } | Error::Io { .. } => 2,
            _ => 1,
        }
    }

    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// Which subcommand failed, since exit codes differ between them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subcommand {
    Record,
    Other,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Usage(m)
            | Error::Privilege(m)
            | Error::Kernel(m)
            | Error::Control(m)
            | Error::Internal(m) => f.write_str(m),
            Error::Io { path, source } => write!(f, "{}: {}", path.display(), source),
            Error::BadFile { path, message } => write!(f, "{}: {}", path.display(), message),
            Error::CommandNotFound(cmd) => write!(
                f,
                "command not found: {cmd} (check the spelling, or give its full path)"
            ),
            Error::CannotExecute { command, source } => {
                write!(f, "cannot execute {command}: {source}")
            }
        }
    }
}

impl std::error::Error for Error {}

/// A recording that cannot be read: `Error::Io` when the file cannot be opened or read,
/// `Error::BadFile` for everything else (damaged, of another format, still being written).
/// Both print as the `FileError` does: the path, then what `format` says is wrong.
impl From<FileError> for Error {
    fn from(FileError { path, error }: FileError) -> Error {
        match error {
            FormatError::Io(source) => Error::io(path, source),
            other => Error::BadFile {
                path,
                message: other.to_string(),
            },
        }
    }
}

/// Shorthand for results in this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn on(path: &str, error: FormatError) -> Error {
        Error::from(FileError {
            path: path.into(),
            error,
        })
    }

    #[test]
    fn io_becomes_io_error_with_path() {
        let e = on("x.mt", FormatError::Io(std::io::Error::other("boom")));
        assert!(matches!(e, Error::Io { .. }));
        assert_eq!(e.to_string(), "x.mt: boom");
    }

    #[test]
    fn others_become_bad_file_with_path() {
        let error = FormatError::Truncated {
            offset: 3,
            what: "the magic",
        };
        match on("run.mt", error) {
            Error::BadFile { path, message } => {
                assert_eq!(path, Path::new("run.mt"));
                assert!(message.contains("byte 3"), "{message}");
            }
            other => panic!("expected BadFile, got {other:?}"),
        }
    }

    #[test]
    fn a_file_still_being_written_is_a_bad_file() {
        let e = on("live.mt", FormatError::StillBeingWritten);
        assert!(matches!(e, Error::BadFile { .. }), "{e:?}");
        assert_eq!(e.exit_code(Subcommand::Other), 2);
    }

    #[test]
    fn the_crate_error_prints_as_the_file_error() {
        let errors: [fn() -> FormatError; 3] = [
            || FormatError::Io(std::io::Error::other("device gone")),
            || FormatError::NotMemtrack { found: vec![0x89] },
            || FormatError::StillBeingWritten,
        ];
        for error in errors {
            let file_error = FileError {
                path: "a.mt".into(),
                error: error(),
            };
            assert_eq!(on("a.mt", error()).to_string(), file_error.to_string());
        }
    }
}
