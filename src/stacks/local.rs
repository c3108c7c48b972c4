//! Names the frames of a recording that has none, from the files on this machine: a recorder
//! killed before its end (a CI timeout, SIGKILL, the OOM killer) wrote the trie and the modules
//! (path and GNU build id) but never its `Symbol` events (issue 32).
//!
//! Where it sits in the flow: the report's pass (`analyze::stack_frames`) hands over the
//! modules whose frames have no `Symbol` event and those frames; each module's file is opened
//! at its recorded path and used only when its build id is the recorded one, so a name is never
//! taken from another version of the file. The names come from [`symbolize`](super::symbolize),
//! the recorder's own symbolizer, through the same path choice
//! ([`ModuleFile::preferred_path`]), so debug files are found as the recorder finds them.

use std::collections::BTreeSet;
use std::fmt;
use std::fs::File;
use std::path::{Path, PathBuf};

use super::symbolize::{symbolize, ModuleFile};
use super::trie::Frame;
use crate::format::SymbolFrame;

/// A module as the recording names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedModule {
    /// The module id its frames name.
    pub id: u32,
    /// The path it was mapped by.
    pub path: PathBuf,
    /// Its GNU build id, as the recorder read it (empty: the file had none).
    pub build_id: Vec<u8>,
}

/// Why a module's frames could not be named here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No file at the recorded path, or one that cannot be opened.
    Missing(String),
    /// The recording has no build id for it, so no file can be checked against it.
    NoRecordedBuildId,
    /// The file here has another build id (or none: empty).
    Differs { recorded: Vec<u8>, here: Vec<u8> },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Missing(e) => write!(f, "the file is not on this machine ({e})"),
            Refusal::NoRecordedBuildId => {
                f.write_str("the recording has no build id to check this machine's file by")
            }
            Refusal::Differs { recorded, here } if here.is_empty() => write!(
                f,
                "this machine's file has no build id (the recorded one is {})",
                hex(recorded)
            ),
            Refusal::Differs { recorded, here } => write!(
                f,
                "this machine's file is another build (build id {}, the recorded one {})",
                hex(here),
                hex(recorded)
            ),
        }
    }
}

/// What [`symbolize_here`] found.
#[derive(Debug, Default)]
pub struct LocalNames {
    /// The frames of every (module, offset) asked for in a module that was checked, innermost
    /// first as [`symbolize`] gives them (empty when the offset names nothing).
    pub symbols: Vec<(Frame, Vec<SymbolFrame>)>,
    /// The modules whose file here is the recorded one, by id.
    pub named: Vec<u32>,
    /// The modules whose frames keep their module+offset names, with the reason.
    pub refused: Vec<(u32, Refusal)>,
}

/// The frames of `frames` (of the modules `modules`) from this machine's files: a module whose
/// file is at its recorded path with its recorded build id is symbolized as the recorder does;
/// the others are refused. A frame of a module missing from `modules` is left out.
pub fn symbolize_here(
    modules: &[RecordedModule],
    frames: impl IntoIterator<Item = Frame>,
) -> LocalNames {
    let mut out = LocalNames::default();
    // Kept open until the names are read, so the checked file is the one symbolized.
    let mut open: Vec<File> = Vec::new();
    let mut files: Vec<ModuleFile> = Vec::new();
    for m in modules {
        match checked(m) {
            Ok(file) => {
                use std::os::fd::AsRawFd;
                let fd = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
                files.push(ModuleFile {
                    id: m.id,
                    path: ModuleFile::preferred_path(&m.path, &fd),
                });
                open.push(file);
                out.named.push(m.id);
            }
            Err(why) => out.refused.push((m.id, why)),
        }
    }
    let named: BTreeSet<u32> = out.named.iter().copied().collect();
    out.symbols = symbolize(
        &files,
        frames.into_iter().filter(|f| named.contains(&f.module)),
    );
    drop(open);
    out
}

/// The file of `m` on this machine, open, when its build id is the recorded one.
fn checked(m: &RecordedModule) -> Result<File, Refusal> {
    if m.build_id.is_empty() {
        return Err(Refusal::NoRecordedBuildId);
    }
    let file = File::open(&m.path).map_err(|e| Refusal::Missing(e.to_string()))?;
    let here = match crate::unwind::build_id(&file) {
        Ok(id) => id.unwrap_or_default(),
        Err(e) => return Err(Refusal::Missing(e.to_string())),
    };
    if here != m.build_id {
        return Err(Refusal::Differs {
            recorded: m.build_id.clone(),
            here,
        });
    }
    Ok(file)
}

/// The advice of a refused module's one-line warning: what to do so its frames get names.
pub fn advice(path: &Path) -> String {
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into(),
    );
    format!("run report on the machine that recorded, or install the same version of {name}")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The executable running the tests, with its build id.
    fn this_test() -> RecordedModule {
        let path = std::fs::read_link("/proc/self/exe").unwrap();
        let id = crate::unwind::build_id(&File::open(&path).unwrap())
            .unwrap()
            .expect("rustc links a build id on Linux");
        RecordedModule {
            id: 5,
            path,
            build_id: id,
        }
    }

    #[inline(never)]
    fn a_function_named_here() -> u64 {
        std::hint::black_box(a_function_named_here as *const () as u64)
    }

    /// The file offset of `a_function_named_here` in the test executable.
    fn offset_of_the_function() -> u64 {
        let addr = a_function_named_here();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        maps.lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let (lo, hi) = f[0].split_once('-')?;
                let lo = u64::from_str_radix(lo, 16).ok()?;
                let hi = u64::from_str_radix(hi, 16).ok()?;
                let off = u64::from_str_radix(f[2], 16).ok()?;
                (lo <= addr && addr < hi).then_some(addr - lo + off)
            })
            .expect("the function is mapped")
    }

    #[test]
    fn a_file_with_the_recorded_build_id_is_named() {
        let m = this_test();
        let frame = Frame {
            module: m.id,
            offset: offset_of_the_function(),
        };
        let got = symbolize_here(&[m], [frame]);
        assert_eq!(got.named, [5]);
        assert!(got.refused.is_empty(), "{:?}", got.refused);
        let (f, chain) = &got.symbols[0];
        assert_eq!(*f, frame);
        assert!(
            chain
                .last()
                .is_some_and(|c| c.function.ends_with("local::tests::a_function_named_here")),
            "{chain:?}"
        );
    }

    #[test]
    fn another_build_id_is_refused_and_its_frames_left_out() {
        let mut m = this_test();
        let here = m.build_id.clone();
        m.build_id[0] ^= 0xff;
        let recorded = m.build_id.clone();
        let frame = Frame {
            module: m.id,
            offset: offset_of_the_function(),
        };
        let got = symbolize_here(&[m], [frame]);
        assert!(got.named.is_empty() && got.symbols.is_empty(), "{got:?}");
        assert_eq!(got.refused, [(5, Refusal::Differs { recorded, here })]);
        assert!(got.refused[0]
            .1
            .to_string()
            .starts_with("this machine's file is another build (build id "));
    }

    #[test]
    fn a_missing_file_or_build_id_is_refused() {
        let gone = RecordedModule {
            id: 1,
            path: PathBuf::from("/nonexistent/libgone.so.3"),
            build_id: vec![1, 2],
        };
        let unchecked = RecordedModule {
            build_id: Vec::new(),
            ..this_test()
        };
        let frames = [
            Frame {
                module: 1,
                offset: 0x10,
            },
            Frame {
                module: 5,
                offset: 0x10,
            },
        ];
        let got = symbolize_here(&[gone, unchecked], frames);
        assert!(got.symbols.is_empty());
        assert!(
            matches!(
                &got.refused[..],
                [(1, Refusal::Missing(_)), (5, Refusal::NoRecordedBuildId)]
            ),
            "{:?}",
            got.refused
        );
        assert!(got.refused[0]
            .1
            .to_string()
            .starts_with("the file is not on this machine ("));
    }

    #[test]
    fn the_advice_names_the_file() {
        assert_eq!(
            advice(Path::new("/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30")),
            "run report on the machine that recorded, or install the same version of \
             libstdc++.so.6.0.30"
        );
    }
}
