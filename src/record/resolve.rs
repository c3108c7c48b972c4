//! Why a command that the kernel would not start "does not exist": the file itself, or a file
//! it needs. execve(2) fails with ENOENT both when the program is missing and when the
//! interpreter of its `#!` line (or its ELF dynamic loader) is; the second is exit 126 with the
//! missing file named, as shells do ("bad interpreter"), not "command not found".

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::error::Error;

/// The error for `program`, which execve refused with ENOENT.
pub fn not_found(program: &OsStr) -> Error {
    let name = program.to_string_lossy().into_owned();
    let Some(file) = find(program) else {
        return Error::CommandNotFound(name);
    };
    let detail = match interpreter(&file) {
        Some(interp) => format!(
            "its interpreter {interp} (from its #! line) does not exist; install it or fix the \
             #! line"
        ),
        None => "the file exists, but a file it needs does not (for a program, its dynamic \
                 loader: built for another system?)"
            .to_string(),
    };
    Error::CannotExecute {
        command: name,
        source: std::io::Error::new(std::io::ErrorKind::NotFound, detail),
    }
}

/// The file execvp would run for `program`: the path itself when it has a slash, else the first
/// regular file of that name on PATH.
fn find(program: &OsStr) -> Option<PathBuf> {
    if program.as_bytes().contains(&b'/') {
        let p = Path::new(program);
        return p.is_file().then(|| p.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// The interpreter named by the `#!` line of `file`, if it has one.
fn interpreter(file: &Path) -> Option<String> {
    let mut head = [0u8; 256];
    let mut f = std::fs::File::open(file).ok()?;
    let n = f.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|&b| b == b'\n').next()?;
    let interp = String::from_utf8_lossy(line);
    interp.split_whitespace().next().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_program_is_not_found() {
        let e = not_found(OsStr::new("/nonexistent/xyz"));
        assert!(matches!(e, Error::CommandNotFound(_)), "{e:?}");
        let e = not_found(OsStr::new("memtrack-surely-not-on-path-xyz"));
        assert!(matches!(e, Error::CommandNotFound(_)), "{e:?}");
    }

    #[test]
    fn a_script_with_a_missing_interpreter_names_it() {
        let path = std::env::temp_dir().join(format!("memtrack-shebang-{}", std::process::id()));
        std::fs::write(&path, b"#! /nonexistent/interp -x\necho hi\n").unwrap();
        let e = not_found(path.as_os_str());
        std::fs::remove_file(&path).unwrap();
        assert!(matches!(e, Error::CannotExecute { .. }), "{e:?}");
        let s = e.to_string();
        assert!(
            s.contains("its interpreter /nonexistent/interp (from its #! line)"),
            "{s}"
        );
        assert_eq!(e.exit_code(crate::error::Subcommand::Record), 126);
    }
}
