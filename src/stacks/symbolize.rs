//! Names stack frames: each (module, file offset) of the recording's trie becomes the chain of
//! functions it is in (the inlined ones first), with file:line, through blazesym.
//!
//! Where it sits in the flow: while `record` runs, while the files that ran are still there
//! (and their debug files: Debian's `/usr/lib/debug/.build-id/xx/yyyy.debug`, found by build
//! id or debug link), the recorder's naming thread (record/names.rs) names each new frame of
//! the trie with a [`FrameNamer`], and at the end it writes one `Symbol` event per frame, so a
//! report on another machine needs no binaries.
//! blazesym reads DWARF (with the inline chain and lines) where there is some, else the ELF
//! symbol tables, and demangles C++ and Rust names. A module it cannot read costs its frames
//! their names, with a debug log line, never the recording.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{CodeInfo, Input, Symbolized, Symbolizer};

use super::trie::Frame;
use crate::format::SymbolFrame;

/// A module of the recording and the file to read its symbols from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleFile {
    /// The module id its frames name.
    pub id: u32,
    /// The file: the module's path, or a path to the recorder's open descriptor of it
    /// (`/proc/self/fd/N`); see [`ModuleFile::preferred_path`].
    pub path: PathBuf,
}

impl ModuleFile {
    /// The path to symbolize a module from: `real` (the path it was mapped by) while it still
    /// names the very file that is open as `open` (same device and inode), since debug links
    /// are looked up beside it; else `open` (`/proc/self/fd/N` of the recorder's descriptor),
    /// which still reads the file that ran after it was replaced or deleted.
    pub fn preferred_path(real: &Path, open: &Path) -> PathBuf {
        let same = match (std::fs::metadata(real), std::fs::metadata(open)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        };
        if same {
            real.to_path_buf()
        } else {
            open.to_path_buf()
        }
    }
}

/// The frames of every (module, offset) of `frames`, innermost function first (see
/// `format::EventKind::Symbol`), sorted by module and offset, each once. An offset that names
/// nothing, a module missing from `modules` (a `MODULE_MARK` frame, say) or one whose file
/// cannot be read gets empty frames. Each module's offsets go to blazesym in one call.
pub fn symbolize(
    modules: &[ModuleFile],
    frames: impl IntoIterator<Item = Frame>,
) -> Vec<(Frame, Vec<SymbolFrame>)> {
    let mut out = Vec::new();
    for (module, offsets) in offsets_by_module(frames) {
        match modules.iter().find(|m| m.id == module) {
            // One namer per file: each file is symbolized once, and its parsed DWARF (tens of
            // MB for a big debug file) is freed before the next one is read.
            Some(m) => out.extend(FrameNamer::new().name_module(module, &m.path, offsets)),
            None => out.extend(
                offsets
                    .into_iter()
                    .map(|offset| (Frame { module, offset }, vec![])),
            ),
        }
    }
    out
}

/// The offsets of `frames` by module, each module's sorted and once: what one call to
/// blazesym per module takes.
pub fn offsets_by_module(frames: impl IntoIterator<Item = Frame>) -> BTreeMap<u32, Vec<u64>> {
    let mut by_module: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for f in frames {
        by_module.entry(f.module).or_default().push(f.offset);
    }
    for offsets in by_module.values_mut() {
        offsets.sort_unstable();
        offsets.dedup();
    }
    by_module
}

/// Names frames, file by file, keeping what it read of each file (its symbol tables, its
/// decompressed DWARF) until it is dropped: a file's frames can then be named in several
/// batches for the price of one read, as `record` does while the command runs
/// (record/names.rs).
pub struct FrameNamer {
    symbolizer: Symbolizer,
}

impl Default for FrameNamer {
    fn default() -> Self {
        FrameNamer::new()
    }
}

impl FrameNamer {
    pub fn new() -> FrameNamer {
        FrameNamer {
            symbolizer: Symbolizer::builder()
                .enable_code_info(true)
                .enable_inlined_fns(true)
                .enable_demangling(true)
                .build(),
        }
    }

    /// Each of `offsets` (file offsets) of module `module`, read from the ELF file at `path`,
    /// with its frames.
    pub fn name_module(
        &self,
        module: u32,
        path: &Path,
        offsets: Vec<u64>,
    ) -> impl Iterator<Item = (Frame, Vec<SymbolFrame>)> {
        let names = self.name(path, &offsets);
        (offsets.into_iter().zip(names))
            .map(move |(offset, frames)| (Frame { module, offset }, frames))
    }

    /// The frames of each of `offsets` (file offsets) in the ELF file at `path`; all empty if
    /// the file cannot be read (said in a debug line).
    fn name(&self, path: &Path, offsets: &[u64]) -> Vec<Vec<SymbolFrame>> {
        let source = Source::Elf(Elf::new(path));
        match self
            .symbolizer
            .symbolize(&source, Input::FileOffset(offsets))
        {
            Ok(found) => found.into_iter().map(frames_of).collect(),
            Err(e) => {
                log::debug!(
                    "{}: cannot symbolize its {} stack frames ({e}); they stay unnamed",
                    path.display(),
                    offsets.len()
                );
                vec![Vec::new(); offsets.len()]
            }
        }
    }
}

/// blazesym's answer as our frames: it lists the inlined functions outermost first, each with
/// the location inside it, and the symbol itself (the function they were inlined into) with
/// the location of its call to the first of them; we want innermost first.
fn frames_of(found: Symbolized<'_>) -> Vec<SymbolFrame> {
    let Symbolized::Sym(sym) = found else {
        return Vec::new();
    };
    let mut frames = Vec::with_capacity(sym.inlined.len() + 1);
    for inlined in sym.inlined.iter().rev() {
        frames.push(frame(&inlined.name, inlined.code_info.as_ref()));
    }
    frames.push(frame(&sym.name, sym.code_info.as_deref()));
    frames
}

fn frame(function: &str, code: Option<&CodeInfo<'_>>) -> SymbolFrame {
    SymbolFrame {
        function: function.to_owned(),
        file: code.map_or_else(String::new, |c| c.to_path().to_string_lossy().into_owned()),
        line: code.and_then(|c| c.line).unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{MARK_TRUNCATED, MODULE_MARK};
    use object::{Object, ObjectSegment, ObjectSymbol};
    use std::process::Command;

    /// The file offset of virtual address `vaddr` of an ELF file, through its segments.
    fn file_offset(elf: &object::File<'_>, vaddr: u64) -> u64 {
        elf.segments()
            .find_map(|s| {
                let (off, size) = s.file_range();
                (s.address() <= vaddr && vaddr < s.address() + size)
                    .then(|| vaddr - s.address() + off)
            })
            .unwrap_or_else(|| panic!("{vaddr:#x} is in no segment"))
    }

    /// (virtual address, size) of the symbol `name` in `path`'s symbol tables.
    fn symbol(path: &Path, name: &str) -> (u64, u64) {
        let data = std::fs::read(path).unwrap();
        let elf = object::File::parse(&*data).unwrap();
        elf.symbols()
            .chain(elf.dynamic_symbols())
            .find(|s| s.name() == Ok(name))
            .map(|s| (s.address(), s.size()))
            .unwrap_or_else(|| panic!("{}: no symbol {name}", path.display()))
    }

    /// The file offset of `name` (plus `delta` bytes) in the ELF file at `path`, whose symbol
    /// table may be in another file (a debug file has the same addresses).
    fn offset_of(path: &Path, symbols_from: &Path, name: &str, delta: u64) -> u64 {
        let (vaddr, _) = symbol(symbols_from, name);
        let data = std::fs::read(path).unwrap();
        file_offset(&object::File::parse(&*data).unwrap(), vaddr + delta)
    }

    fn one(path: &Path, offset: u64) -> Vec<SymbolFrame> {
        let modules = [ModuleFile {
            id: 1,
            path: path.to_path_buf(),
        }];
        let mut got = symbolize(&modules, [Frame { module: 1, offset }]);
        assert_eq!(got.len(), 1);
        got.pop().unwrap().1
    }

    /// Compiles `testdata/stacks/SRC` with `compiler` and `flags` into a scratch directory.
    fn build(src: &str, compiler: &str, flags: &[&str]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("memtrack-symbolize-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let exe = dir.join(src.replace('.', "_"));
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("testdata/stacks")
            .join(src);
        let out = Command::new(compiler)
            .args(flags)
            .arg("-o")
            .arg(&exe)
            .arg(&src)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {compiler}: {e}"));
        assert!(
            out.status.success(),
            "{compiler} {}: {out:?}",
            src.display()
        );
        exe
    }

    /// The line of `path` that contains `marker`, counting from 1.
    fn line_of(path: &Path, marker: &str) -> u32 {
        let text = std::fs::read_to_string(path).unwrap();
        1 + text.lines().position(|l| l.contains(marker)).unwrap() as u32
    }

    /// The libc the test runs with, and its debug file if libc6-dbg is installed.
    fn libc() -> (PathBuf, Option<PathBuf>) {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let libc = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("/libc.so"))
            .map(PathBuf::from)
            .expect("the test runs with a libc.so");
        let id = crate::unwind::build_id(&std::fs::File::open(&libc).unwrap())
            .unwrap()
            .expect("Debian's libc has a build id");
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        let debug = PathBuf::from(format!(
            "/usr/lib/debug/.build-id/{}/{}.debug",
            &hex[..2],
            &hex[2..]
        ));
        (libc, debug.exists().then_some(debug))
    }

    #[inline(never)]
    fn a_function_of_the_test_binary() -> u64 {
        std::hint::black_box(a_function_of_the_test_binary as *const () as u64)
    }

    #[test]
    fn a_function_of_the_test_binary_by_its_offset() {
        let addr = a_function_of_the_test_binary();
        // The mapping that holds it gives the file and the offset (no ASLR in file offsets).
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let (path, offset) = maps
            .lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let (lo, hi) = f[0].split_once('-')?;
                let (lo, hi) = (
                    u64::from_str_radix(lo, 16).ok()?,
                    u64::from_str_radix(hi, 16).ok()?,
                );
                let off = u64::from_str_radix(f[2], 16).ok()?;
                (lo <= addr && addr < hi).then(|| (PathBuf::from(f[5]), addr - lo + off))
            })
            .expect("the function is mapped");
        let frames = one(&path, offset);
        let f = frames.last().expect("the test's own function has a name");
        assert!(
            f.function
                .ends_with("stacks::symbolize::tests::a_function_of_the_test_binary"),
            "{frames:?}"
        );
        assert!(f.file.ends_with("src/stacks/symbolize.rs"), "{frames:?}");
        let decl = line_of(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/stacks/symbolize.rs"),
            "fn a_function_of_the_test_binary() -> u64",
        );
        assert!(
            (decl..decl + 3).contains(&f.line),
            "{frames:?}, declared at {decl}"
        );
    }

    #[test]
    fn libc_malloc_by_its_dynamic_symbol() {
        let (libc, debug) = libc();
        let offset = offset_of(&libc, &libc, "malloc", 0);
        let frames = one(&libc, offset);
        let f = frames.last().expect("malloc has a name");
        // With the debug file it is DWARF's name, glibc's internal alias `__GI___libc_malloc`
        // (as gdb shows it); without, the symbol table's.
        assert!(f.function.ends_with("malloc"), "{frames:?}");
        if debug.is_some() {
            assert!(f.file.ends_with("malloc.c") && f.line > 0, "{frames:?}");
        }
    }

    #[test]
    fn glibc_internal_functions_through_the_debug_file() {
        let (libc, Some(debug)) = libc() else {
            eprintln!("skipped: libc6-dbg is not installed (no build-id debug file for libc)");
            return;
        };
        // `_int_malloc` is static: only the debug file's symbol table knows it.
        let offset = offset_of(&libc, &debug, "_int_malloc", 16);
        let frames = one(&libc, offset);
        assert!(
            frames.iter().any(|f| f.function == "_int_malloc"),
            "{frames:?}"
        );
        let outer = frames.last().unwrap();
        assert_eq!(outer.function, "_int_malloc", "{frames:?}");
        assert!(
            outer.file.ends_with("malloc.c") && outer.line > 0,
            "{frames:?}"
        );
    }

    #[test]
    fn inlined_functions_innermost_first() {
        let exe = build("inline.c", "cc", &["-O2", "-g"]);
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/stacks/inline.c");
        let (inner, call) = (line_of(&src, "LINE_INNER"), line_of(&src, "LINE_CALL"));
        let (start, size) = symbol(&exe, "make");
        let data = std::fs::read(&exe).unwrap();
        let elf = object::File::parse(&*data).unwrap();
        let offsets: Vec<Frame> = (start..start + size)
            .map(|a| Frame {
                module: 7,
                offset: file_offset(&elf, a),
            })
            .collect();
        let modules = [ModuleFile {
            id: 7,
            path: exe.clone(),
        }];
        let got = symbolize(&modules, offsets.iter().copied());
        assert_eq!(got.len(), offsets.len(), "one answer per distinct offset");
        // Some instruction of `make` is grow's malloc call: the chain grow at its line, then
        // make at the line that calls grow.
        let chain = got
            .iter()
            .map(|(_, frames)| frames)
            .find(|frames| frames.first().is_some_and(|f| f.function == "grow"))
            .unwrap_or_else(|| panic!("no offset of make is inside grow: {got:?}"));
        let lines: Vec<(&str, u32)> = chain.iter().map(|f| (&*f.function, f.line)).collect();
        assert_eq!(lines, [("grow", inner), ("make", call)], "{chain:?}");
        assert!(
            chain.iter().all(|f| f.file.ends_with("inline.c")),
            "{chain:?}"
        );
    }

    #[test]
    fn cpp_names_are_demangled() {
        let exe = build("template.cpp", "c++", &["-O2", "-g"]);
        let mangled = "_ZN6shapes4makeIiEEPT_i";
        let offset = offset_of(&exe, &exe, mangled, 0);
        let frames = one(&exe, offset);
        let f = frames.last().expect("make<int> has a name");
        assert_eq!(f.function, "int* shapes::make<int>(int)", "{frames:?}");
    }

    #[test]
    fn unreadable_modules_and_marks_get_empty_frames() {
        let modules = [ModuleFile {
            id: 1,
            path: PathBuf::from("/nonexistent/libgone.so"),
        }];
        let frames = [
            Frame {
                module: 1,
                offset: 0x1000,
            },
            Frame {
                module: MODULE_MARK,
                offset: MARK_TRUNCATED,
            },
            Frame {
                module: 1,
                offset: 0x1000,
            },
        ];
        let got = symbolize(&modules, frames);
        assert_eq!(
            got,
            [
                (frames[0], vec![]),
                (
                    Frame {
                        module: MODULE_MARK,
                        offset: MARK_TRUNCATED
                    },
                    vec![]
                ),
            ]
        );
    }

    #[test]
    fn an_offset_outside_the_code_is_unnamed() {
        let (libc, _) = libc();
        let len = std::fs::metadata(&libc).unwrap().len();
        assert!(one(&libc, len + 4096).is_empty());
    }

    #[test]
    fn preferred_path_is_the_real_one_while_it_names_the_open_file() {
        let (libc, _) = libc();
        let file = std::fs::File::open(&libc).unwrap();
        let fd = PathBuf::from(format!("/proc/self/fd/{}", {
            use std::os::fd::AsRawFd;
            file.as_raw_fd()
        }));
        assert_eq!(ModuleFile::preferred_path(&libc, &fd), libc);
        let other = Path::new("/proc/self/exe");
        assert_eq!(ModuleFile::preferred_path(other, &fd), fd);
        let gone = Path::new("/nonexistent/libc.so.6");
        assert_eq!(ModuleFile::preferred_path(gone, &fd), fd);
    }

    /// `cargo test --lib --release stacks::symbolize -- --ignored --nocapture`: the time to
    /// symbolize 1,000 libc offsets (the batch one module of a big recording needs).
    #[test]
    #[ignore]
    fn time_for_a_thousand_libc_offsets() {
        let (libc, debug) = libc();
        let len = std::fs::metadata(&libc).unwrap().len();
        let (text, text_size) = {
            let data = std::fs::read(&libc).unwrap();
            let elf = object::File::parse(&*data).unwrap();
            let s = elf.section_by_name(".text").unwrap();
            use object::ObjectSection;
            (s.file_range().unwrap().0, s.size())
        };
        assert!(text + text_size <= len);
        let frames: Vec<Frame> = (0..1000)
            .map(|i| Frame {
                module: 1,
                offset: text + i * (text_size / 1000),
            })
            .collect();
        let modules = [ModuleFile { id: 1, path: libc }];
        let start = std::time::Instant::now();
        let got = symbolize(&modules, frames);
        let took = start.elapsed();
        let named = got.iter().filter(|(_, f)| !f.is_empty()).count();
        let lines = got
            .iter()
            .filter(|(_, f)| f.first().is_some_and(|f| f.line > 0))
            .count();
        println!(
            "1000 libc offsets in {took:?}: {named} named, {lines} with a line (debug file: {})",
            debug.is_some()
        );
    }
}
