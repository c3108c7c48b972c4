//! Function symbols of an ELF file and their file offsets, which is what a uprobe is placed by.
//!
//! A small reader of ELF64 little-endian files: section headers, `.symtab` and `.dynsym` with
//! their string tables, and the executable `PT_LOAD` segments that turn a symbol's virtual
//! address into a file offset. Stripped libraries (Debian's libc) keep `.dynsym`, which is all
//! the allocator entry points need. Every read is bounds-checked: a damaged or foreign file is
//! an error, never a panic.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::binary::placement::{self, TailJump};

const SHT_SYMTAB: u32 = 2;
const SHT_RELA: u32 = 4;
const SHT_DYNSYM: u32 = 11;
const R_X86_64_GLOB_DAT: u32 = 6;
const R_X86_64_JUMP_SLOT: u32 = 7;
const PT_LOAD: u32 = 1;
const PF_X: u32 = 1;
const STT_OBJECT: u8 = 1;
const STT_FUNC: u8 = 2;
const STT_GNU_IFUNC: u8 = 10;

/// Why an ELF file could not be read.
#[derive(Debug)]
pub struct ElfError {
    path: PathBuf,
    reason: String,
}

impl fmt::Display for ElfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.reason)
    }
}

impl std::error::Error for ElfError {}

/// A function symbol: its file offset (for a uprobe), address and size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FuncSymbol {
    /// Offset of the first instruction in the file.
    pub offset: u64,
    /// Size of the function in bytes (0 when the symbol does not say).
    pub size: u64,
    /// Its virtual address in the file's own numbering (before the loader moves it).
    pub vaddr: u64,
}

/// The defined function symbols of one ELF file, by name, its data objects' addresses, and
/// the first bytes of each function (to look at its first instructions).
#[derive(Debug, Default)]
pub struct ElfSymbols {
    funcs: HashMap<String, FuncSymbol>,
    objects: HashMap<String, u64>,
    /// The code of each kept function, by file offset (see `CODE_BYTES`).
    code: HashMap<u64, Vec<u8>>,
    /// For each kept function that only jumps to another kept function (directly, or through
    /// the PLT or GOT), by file offset: the name of that function.
    forwards: HashMap<u64, String>,
}

/// How many bytes of each kept function's code are read, for `ElfSymbols::code`: the whole
/// function up to this size (probe placement looks for branches into its prologue), or this
/// many when the symbol gives no size.
const CODE_BYTES: usize = crate::binary::placement::SCAN_BYTES;
const CODE_BYTES_UNSIZED: usize = 64;

impl ElfSymbols {
    /// Read the function symbols of the ELF file at `path`.
    pub fn read(path: &Path) -> Result<ElfSymbols, ElfError> {
        ElfSymbols::read_only(path, |_| true)
    }

    /// Read the symbols of the ELF file at `path` whose names `keep` accepts. A library defines
    /// thousands of symbols and an allocator a few dozen: skipping the rest early is most of
    /// the cost of scanning a file. Only the headers, the symbol and string tables and the first
    /// bytes of each kept function are read, not the whole file (a compiler's cc1 is 30 MB).
    pub fn read_only(path: &Path, keep: impl Fn(&str) -> bool) -> Result<ElfSymbols, ElfError> {
        use std::os::unix::fs::FileExt;
        let err = |reason: String| ElfError {
            path: path.to_path_buf(),
            reason,
        };
        let file = std::fs::File::open(path).map_err(|e| err(e.to_string()))?;
        let file_len = file.metadata().map_err(|e| err(e.to_string()))?.len();
        let mut fetch = |at: usize, len: usize| -> Result<Vec<u8>, String> {
            if (at as u64).saturating_add(len as u64) > file_len {
                return Err(format!(
                    "truncated ELF file (needs bytes {at}..{})",
                    at.saturating_add(len)
                ));
            }
            let mut buf = vec![0; len];
            file.read_exact_at(&mut buf, at as u64)
                .map_err(|e| format!("read bytes {at}..{}: {e}", at + len))?;
            Ok(buf)
        };
        ElfSymbols::parse_with(&mut fetch, keep).map_err(err)
    }

    /// Parse the function symbols of the ELF image `data`.
    pub fn parse(data: &[u8]) -> Result<ElfSymbols, String> {
        ElfSymbols::parse_only(data, |_| true)
    }

    /// Parse the symbols of the ELF image `data` whose names `keep` accepts.
    pub fn parse_only(data: &[u8], keep: impl Fn(&str) -> bool) -> Result<ElfSymbols, String> {
        let mut fetch = |at: usize, len: usize| -> Result<Vec<u8>, String> {
            Bytes(data).slice(at, len).map(<[u8]>::to_vec)
        };
        ElfSymbols::parse_with(&mut fetch, keep)
    }

    /// The parser over `fetch(offset, len)`, which returns exactly those bytes of the image.
    fn parse_with(
        fetch: &mut dyn FnMut(usize, usize) -> Result<Vec<u8>, String>,
        keep: impl Fn(&str) -> bool,
    ) -> Result<ElfSymbols, String> {
        let head = fetch(0, 64).map_err(|_| "not an ELF file".to_string())?;
        let b = Bytes(&head);
        if head.get(..4) != Some(b"\x7fELF".as_slice()) {
            return Err("not an ELF file".into());
        }
        if b.u8(4)? != 2 || b.u8(5)? != 1 {
            return Err("not a 64-bit little-endian ELF file".into());
        }
        let phoff = b.u64(0x20)? as usize;
        let shoff = b.u64(0x28)? as usize;
        let phentsize = b.u16(0x36)? as usize;
        let phnum = b.u16(0x38)? as usize;
        let shentsize = b.u16(0x3a)? as usize;
        let shnum = b.u16(0x3c)? as usize;

        let ph_table = fetch(phoff, phnum * phentsize)?;
        let ph = Bytes(&ph_table);
        let mut segments = Vec::new();
        for i in 0..phnum {
            let at = i * phentsize;
            if ph.u32(at)? == PT_LOAD && ph.u32(at + 4)? & PF_X != 0 {
                segments.push(Segment {
                    offset: ph.u64(at + 8)?,
                    vaddr: ph.u64(at + 16)?,
                    filesz: ph.u64(at + 32)?,
                });
            }
        }

        let sh_table = fetch(shoff, shnum * shentsize)?;
        let sh = Bytes(&sh_table);
        let section = |i: usize| -> Result<Section, String> {
            let at = i * shentsize;
            Ok(Section {
                kind: sh.u32(at + 4)?,
                offset: sh.u64(at + 24)? as usize,
                size: sh.u64(at + 32)? as usize,
                link: sh.u32(at + 40)? as usize,
                entsize: sh.u64(at + 56)? as usize,
            })
        };

        let mut funcs = HashMap::new();
        let mut objects = HashMap::new();
        // The dynamic symbol tables, by section index, for the relocations that name them.
        let mut dynamic = HashMap::new();
        for i in 0..shnum {
            let sec = section(i)?;
            if sec.kind != SHT_SYMTAB && sec.kind != SHT_DYNSYM {
                continue;
            }
            if sec.entsize < 24 {
                return Err(format!(
                    "symbol table {i} has entries of {} bytes",
                    sec.entsize
                ));
            }
            let strtab = section(sec.link)?;
            let syms = fetch(sec.offset, sec.size)?;
            let strs = fetch(strtab.offset, strtab.size)?;
            let b = Bytes(&syms);
            let names = Bytes(&strs);
            let count = sec.size / sec.entsize;
            for s in 0..count {
                let sym = s * sec.entsize;
                let info = b.u8(sym + 4)?;
                let shndx = b.u16(sym + 6)?;
                let value = b.u64(sym + 8)?;
                let kind = info & 0xf;
                let is_func = kind == STT_FUNC || kind == STT_GNU_IFUNC;
                if (!is_func && kind != STT_OBJECT) || shndx == 0 || value == 0 {
                    continue;
                }
                let name = names.cstr(b.u32(sym)? as usize, strs.len())?;
                if !keep(name) {
                    continue;
                }
                if !is_func {
                    objects.entry(name.to_string()).or_insert(value);
                    continue;
                }
                let Some(offset) = file_offset(&segments, value) else {
                    continue;
                };
                let size = b.u64(sym + 16)?;
                // .symtab and .dynsym may both list a function; they agree, keep the first.
                funcs.entry(name.to_string()).or_insert(FuncSymbol {
                    offset,
                    size,
                    vaddr: value,
                });
            }
            if sec.kind == SHT_DYNSYM {
                dynamic.insert(
                    i,
                    SymbolTable {
                        entsize: sec.entsize,
                        syms,
                        strs,
                    },
                );
            }
        }
        let code = code_bytes(&funcs, fetch);
        let slots = got_slots(fetch, &section, shnum, &dynamic, &keep)?;
        let forwards = tail_forwards(&funcs, &code, &slots, &segments, fetch);
        Ok(ElfSymbols {
            funcs,
            objects,
            code,
            forwards,
        })
    }

    /// The address (in the file's numbering) of the data object called `name`.
    pub fn object(&self, name: &str) -> Option<u64> {
        self.objects.get(name).copied()
    }

    /// The function called `name`, if the file defines it.
    pub fn get(&self, name: &str) -> Option<FuncSymbol> {
        self.funcs.get(name).copied()
    }

    /// The code of `sym`, a function of this file, from its entry: the whole function when
    /// the second value is true, else the first bytes read of it.
    pub fn code(&self, sym: FuncSymbol) -> (&[u8], bool) {
        let code = self.code.get(&sym.offset).map_or(&[][..], Vec::as_slice);
        (code, sym.size > 0 && code.len() as u64 == sym.size)
    }

    /// The kept function `sym` only jumps to, leaving its arguments as they are, if it does
    /// (`placement::tail_jump`).
    pub fn forwards_to(&self, sym: FuncSymbol) -> Option<&str> {
        self.forwards.get(&sym.offset).map(String::as_str)
    }

    /// How many function symbols the file defines.
    pub fn len(&self) -> usize {
        self.funcs.len()
    }

    /// Whether the file defines no function symbols at all.
    pub fn is_empty(&self) -> bool {
        self.funcs.is_empty()
    }
}

/// The GOT slots the dynamic loader fills with the address of a kept function (JUMP_SLOT
/// relocations of the PLT, GLOB_DAT ones of `-fno-plt` calls), by the slot's address. The
/// relocations name symbols of `dynamic`, the tables the symbol loop already read.
fn got_slots(
    fetch: &mut dyn FnMut(usize, usize) -> Result<Vec<u8>, String>,
    section: &dyn Fn(usize) -> Result<Section, String>,
    shnum: usize,
    dynamic: &HashMap<usize, SymbolTable>,
    keep: &dyn Fn(&str) -> bool,
) -> Result<HashMap<u64, String>, String> {
    let mut slots = HashMap::new();
    for i in 0..shnum {
        let rela = section(i)?;
        if rela.kind != SHT_RELA || rela.entsize < 24 {
            continue;
        }
        let Some(symtab) = dynamic.get(&rela.link) else {
            continue;
        };
        let relocs = fetch(rela.offset, rela.size)?;
        let (r, b, names) = (Bytes(&relocs), Bytes(&symtab.syms), Bytes(&symtab.strs));
        for e in 0..rela.size / rela.entsize {
            let at = e * rela.entsize;
            let info = r.u64(at + 8)?;
            if !matches!(info as u32, R_X86_64_JUMP_SLOT | R_X86_64_GLOB_DAT) {
                continue;
            }
            let sym = (info >> 32) as usize * symtab.entsize;
            let name = names.cstr(b.u32(sym)? as usize, symtab.strs.len())?;
            if keep(name) {
                slots.insert(r.u64(at)?, name.to_string());
            }
        }
    }
    Ok(slots)
}

/// A symbol table's entries and the string table its names are in.
struct SymbolTable {
    entsize: usize,
    syms: Vec<u8>,
    strs: Vec<u8>,
}

struct Segment {
    offset: u64,
    vaddr: u64,
    filesz: u64,
}

struct Section {
    kind: u32,
    offset: usize,
    size: usize,
    link: usize,
    entsize: usize,
}

fn file_offset(segments: &[Segment], vaddr: u64) -> Option<u64> {
    segments
        .iter()
        .find(|s| vaddr >= s.vaddr && vaddr - s.vaddr < s.filesz)
        .map(|s| vaddr - s.vaddr + s.offset)
}

/// Bounds-checked little-endian reads.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn slice(&self, at: usize, n: usize) -> Result<&[u8], String> {
        at.checked_add(n)
            .and_then(|end| self.0.get(at..end))
            .ok_or_else(|| {
                format!(
                    "truncated ELF file (needs bytes {at}..{})",
                    at.saturating_add(n)
                )
            })
    }
    fn u8(&self, at: usize) -> Result<u8, String> {
        Ok(self.slice(at, 1)?[0])
    }
    fn u16(&self, at: usize) -> Result<u16, String> {
        let s = self.slice(at, 2)?;
        Ok(u16::from_le_bytes([s[0], s[1]]))
    }
    fn u32(&self, at: usize) -> Result<u32, String> {
        let s = self.slice(at, 4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn u64(&self, at: usize) -> Result<u64, String> {
        let s = self.slice(at, 8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_le_bytes(a))
    }
    fn cstr(&self, at: usize, limit: usize) -> Result<&str, String> {
        let end_limit = limit.min(self.0.len());
        let tail = self
            .0
            .get(at..end_limit)
            .ok_or("symbol name outside its string table")?;
        let len = tail
            .iter()
            .position(|&c| c == 0)
            .ok_or("unterminated symbol name")?;
        std::str::from_utf8(&tail[..len]).map_err(|_| "symbol name is not UTF-8".to_string())
    }
}

/// The first bytes of every function in `funcs` (its size's worth up to [`CODE_BYTES`]), which
/// probe placement and the tail-jump forwards read.
fn code_bytes(
    funcs: &HashMap<String, FuncSymbol>,
    fetch: &mut dyn FnMut(usize, usize) -> Result<Vec<u8>, String>,
) -> HashMap<u64, Vec<u8>> {
    let mut code = HashMap::new();
    for f in funcs.values() {
        let len = if f.size > 0 {
            (f.size as usize).min(CODE_BYTES)
        } else {
            CODE_BYTES_UNSIZED
        };
        // Code near the end of the file may be shorter: keep what there is.
        let bytes = std::iter::successors(Some(len), |n| Some(n / 2))
            .take_while(|&n| n > 0)
            .find_map(|n| fetch(f.offset as usize, n).ok())
            .unwrap_or_default();
        code.insert(f.offset, bytes);
    }
    code
}

/// The functions that are a tail jump to another (directly, or through a PLT stub and its GOT
/// slot): their file offset, and the name of the function jumped to.
fn tail_forwards(
    funcs: &HashMap<String, FuncSymbol>,
    code: &HashMap<u64, Vec<u8>>,
    slots: &HashMap<u64, String>,
    segments: &[Segment],
    fetch: &mut dyn FnMut(usize, usize) -> Result<Vec<u8>, String>,
) -> HashMap<u64, String> {
    let by_vaddr: HashMap<u64, &str> = funcs.iter().map(|(n, f)| (f.vaddr, n.as_str())).collect();
    let mut forwards = HashMap::new();
    for f in funcs.values() {
        let Some(mut jump) = code
            .get(&f.offset)
            .and_then(|c| placement::tail_jump(c, f.vaddr))
        else {
            continue;
        };
        // At most two steps: a jump to a PLT stub, which jumps through its GOT slot.
        for _ in 0..2 {
            let target = match jump {
                TailJump::Slot(slot) => slots.get(&slot).cloned(),
                TailJump::Direct(to) => by_vaddr.get(&to).map(|n| n.to_string()),
            };
            if let Some(name) = target {
                forwards.insert(f.offset, name);
                break;
            }
            let TailJump::Direct(to) = jump else {
                break;
            };
            let Some(stub) = file_offset(segments, to).and_then(|at| fetch(at as usize, 16).ok())
            else {
                break;
            };
            match placement::tail_jump(&stub, to) {
                Some(next) => jump = next,
                None => break,
            }
        }
    }
    forwards
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_non_elf() {
        assert!(ElfSymbols::parse(b"hello world").is_err());
        assert!(ElfSymbols::parse(b"").is_err());
    }

    #[test]
    fn truncated_elf_is_an_error_not_a_panic() {
        let exe = std::fs::read("/proc/self/exe").unwrap();
        for cut in [5, 64, 100, 1000, exe.len() / 2] {
            let _ = ElfSymbols::parse(&exe[..cut.min(exe.len())]);
        }
    }

    #[test]
    fn finds_glibc_allocator_entry_points() {
        let Some(libc) = crate::binary::find_libc() else {
            eprintln!("skipped: no glibc found at the usual paths");
            return;
        };
        let syms = ElfSymbols::read(&libc).unwrap();
        for name in ["malloc", "free", "calloc", "realloc", "posix_memalign"] {
            let f = syms.get(name).unwrap_or_else(|| panic!("{name} missing"));
            assert!(f.offset > 0 && f.size > 0, "{name}: {f:?}");
        }
    }

    #[test]
    fn finds_the_loaders_debugger_hook_and_r_debug() {
        let Some(ld) = crate::binary::find_loader() else {
            eprintln!("skipped: no dynamic loader found at the usual paths");
            return;
        };
        let syms = ElfSymbols::read(&ld).unwrap();
        let hook = syms
            .get("_dl_debug_state")
            .expect("_dl_debug_state in .dynsym");
        let r_debug = syms.object("_r_debug").expect("_r_debug in .dynsym");
        assert!(
            hook.vaddr > 0 && r_debug > hook.vaddr,
            "{hook:?} {r_debug:#x}"
        );
    }
}
