//! The kernel's types that the BPF objects' CO-RE relocations name, cut out of the kernel's
//! BTF into a small BTF of their own, which every object's load is given instead
//! (`btf_custom_path`).
//!
//! Why: libbpf resolves each relocated type by scanning every type of the BTF it is given for
//! the same name, once per type and object: against the kernel's 5 MiB BTF (about 150,000
//! types) those scans were 30% of a recording's start-up CPU (docs/PERFORMANCE.md, "Fixed
//! cost"). Cut once here (a read and one pass over the types), the same scans run over a few
//! thousand. What is kept gives libbpf the same answers: every kernel type whose name is a
//! relocated type's (flavours such as `mm_struct___atomic_rss` stripped, as libbpf strips
//! them), and every type such a type holds in place (members, arrays, typedefs), the bytes
//! of each record unchanged but for ids and names; pointers become `void *`, since a
//! relocation's access path never crosses one (each hop through a pointer is a relocation of
//! its own, on the type pointed to) and libbpf's field check takes any pointer for any other.
//!
//! Flow: [`trim`] reads the objects' `.BTF.ext` relocation records for their type names,
//! indexes the kernel's type records, keeps what the names reach, and writes the new BTF.
//! Anything it does not understand (a BTF kind newer than this code, a damaged section) is an
//! error, and the load goes on with the kernel's whole BTF, as before.

use crate::sys::bpf::CustomBtf;
use std::collections::{HashMap, HashSet};

use object::{Object as _, ObjectSection as _};

/// BTF's magic number, in the byte order of the machine that wrote it.
const MAGIC: u16 = 0xeb9f;
/// The size of BTF's header, and of .BTF.ext's.
const HEADER_LEN: usize = 24;
/// Bytes of every type record before its kind-specific part.
const TYPE_LEN: usize = 12;

// The kinds of BTF (include/uapi/linux/btf.h).
const INT: u32 = 1;
const PTR: u32 = 2;
const ARRAY: u32 = 3;
const STRUCT: u32 = 4;
const UNION: u32 = 5;
const ENUM: u32 = 6;
const FWD: u32 = 7;
const TYPEDEF: u32 = 8;
const VOLATILE: u32 = 9;
const CONST: u32 = 10;
const RESTRICT: u32 = 11;
const FUNC: u32 = 12;
const FUNC_PROTO: u32 = 13;
const VAR: u32 = 14;
const DATASEC: u32 = 15;
const FLOAT: u32 = 16;
const DECL_TAG: u32 = 17;
const TYPE_TAG: u32 = 18;
const ENUM64: u32 = 19;

fn u32_at(b: &[u8], at: usize) -> Result<u32, String> {
    b.get(at..at + 4)
        .map(|s| u32::from_ne_bytes(s.try_into().expect("four bytes")))
        .ok_or_else(|| format!("BTF cut short at byte {at}"))
}

fn put_u32(out: &mut [u8], at: usize, v: u32) {
    out[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

/// One BTF blob: its type records, indexed by id, and its strings.
struct Btf<'a> {
    types: &'a [u8],
    strings: &'a [u8],
    /// Where each type's record starts in `types`; id 0 (void) has none.
    starts: Vec<usize>,
}

impl<'a> Btf<'a> {
    fn parse(bytes: &'a [u8]) -> Result<Btf<'a>, String> {
        let magic = bytes
            .get(0..2)
            .map(|m| u16::from_ne_bytes([m[0], m[1]]))
            .ok_or("not BTF: empty")?;
        if magic != MAGIC {
            return Err(format!(
                "not BTF of this machine's byte order (magic {magic:#x})"
            ));
        }
        let header_len = u32_at(bytes, 4)? as usize;
        let section = |off: usize| -> Result<&'a [u8], String> {
            let start = header_len + u32_at(bytes, off)? as usize;
            let len = u32_at(bytes, off + 4)? as usize;
            bytes
                .get(start..start + len)
                .ok_or_else(|| "a BTF section is out of bounds".to_string())
        };
        let types = section(8)?;
        let strings = section(16)?;
        let mut starts = vec![0];
        let mut at = 0;
        while at < types.len() {
            starts.push(at);
            at += record_len(types, at)?;
        }
        Ok(Btf {
            types,
            strings,
            starts,
        })
    }

    fn info(&self, id: u32) -> Result<u32, String> {
        u32_at(self.types, self.start(id)? + 4)
    }

    fn start(&self, id: u32) -> Result<usize, String> {
        match self.starts.get(id as usize) {
            Some(&at) if id > 0 => Ok(at),
            _ => Err(format!("BTF type id {id} out of range")),
        }
    }

    fn name(&self, off: u32) -> &'a str {
        let rest = self.strings.get(off as usize..).unwrap_or_default();
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        std::str::from_utf8(&rest[..end]).unwrap_or_default()
    }

    fn type_name(&self, id: u32) -> Result<&'a str, String> {
        Ok(self.name(u32_at(self.types, self.start(id)?)?))
    }
}

fn kind(info: u32) -> u32 {
    (info >> 24) & 0x1f
}

fn vlen(info: u32) -> usize {
    (info & 0xffff) as usize
}

/// The length of the type record at `at`, which depends on its kind.
fn record_len(types: &[u8], at: usize) -> Result<usize, String> {
    let info = u32_at(types, at + 4)?;
    let extra = match kind(info) {
        INT | VAR | DECL_TAG => 4,
        PTR | FWD | TYPEDEF | VOLATILE | CONST | RESTRICT | FUNC | FLOAT | TYPE_TAG => 0,
        ARRAY => 12,
        STRUCT | UNION | DATASEC | ENUM64 => 12 * vlen(info),
        ENUM | FUNC_PROTO => 8 * vlen(info),
        k => return Err(format!("BTF kind {k} is newer than memtrack")),
    };
    Ok(TYPE_LEN + extra)
}

/// A name as libbpf matches it: without a `___flavour` suffix (`bpf_core_essential_name_len`).
fn essential(name: &str) -> &str {
    let b = name.as_bytes();
    (0..b.len().saturating_sub(4))
        .rev()
        .find(|&i| b[i] != b'_' && &b[i + 1..i + 4] == b"___" && b[i + 4] != b'_')
        .map_or(name, |i| &name[..=i])
}

/// The names of the types an object's CO-RE relocations are about, from its `.BTF.ext`.
fn relocated_names(object: &[u8], names: &mut HashSet<String>) -> Result<(), String> {
    let elf = object::File::parse(object).map_err(|e| format!("BPF object: {e}"))?;
    let data = |name: &str| {
        elf.section_by_name(name)
            .and_then(|s| s.data().ok())
            .ok_or_else(|| format!("BPF object without {name}"))
    };
    let (btf, ext) = (data(".BTF")?, data(".BTF.ext")?);
    let btf = Btf::parse(btf)?;
    let header_len = u32_at(ext, 4)? as usize;
    if header_len < HEADER_LEN + 8 {
        return Ok(()); // no CO-RE relocations recorded in this .BTF.ext
    }
    let start = header_len + u32_at(ext, 24)? as usize;
    let relos = ext
        .get(start..start + u32_at(ext, 28)? as usize)
        .ok_or(".BTF.ext's relocations are out of bounds")?;
    // A record size, then per section: its name, a count, and that many records whose second
    // word is the local type id.
    let record = u32_at(relos, 0)? as usize;
    let mut at = 4;
    while at < relos.len() {
        let count = u32_at(relos, at + 4)? as usize;
        at += 8;
        for _ in 0..count {
            let id = u32_at(relos, at + 4)?;
            names.insert(essential(btf.type_name(id)?).to_string());
            at += record;
        }
    }
    Ok(())
}

/// Set to `kernel`, CO-RE relocations read the kernel's whole BTF, as before this module.
pub const FULL_BTF_VAR: &str = "MEMTRACK_CORE_BTF";

/// The small BTF the CO-RE relocations of `objects` (ELF images) are resolved against (here), or `None`, said at -v, where it cannot be made: the loads then read the kernel's whole BTF.
pub fn custom(objects: &[&[u8]], kernel: Option<&[u8]>) -> Option<CustomBtf> {
    // The way back, to compare (tests/record.rs does, on every kernel of the matrix).
    if std::env::var_os(FULL_BTF_VAR).is_some_and(|v| v == "kernel") {
        log::info!("CO-RE relocations read the kernel's whole BTF ({FULL_BTF_VAR}=kernel)");
        return None;
    }
    let began = std::time::Instant::now();
    let made = kernel
        .ok_or_else(|| "preflight did not read the kernel's BTF".to_string())
        .and_then(|kernel| trim(kernel, objects))
        .and_then(|bytes| {
            let len = bytes.len();
            CustomBtf::new(&bytes)
                .map(|c| (c, len))
                .map_err(|e| format!("cannot make a memfd: {e}"))
        });
    match made {
        Ok((core, len)) => {
            let ms = began.elapsed().as_secs_f64() * 1e3;
            log::debug!("CO-RE types cut from the kernel's BTF: {len} bytes, in {ms:.1} ms");
            Some(core)
        }
        Err(why) => {
            log::info!("CO-RE relocations read the kernel's whole BTF ({why})");
            None
        }
    }
}

/// The kernel's BTF `kernel` cut to the types the CO-RE relocations of `objects` name, and
/// what they hold in place; the result parses as BTF on its own.
pub fn trim(kernel: &[u8], objects: &[&[u8]]) -> Result<Vec<u8>, String> {
    let mut names = HashSet::new();
    for object in objects {
        relocated_names(object, &mut names)?;
    }
    // Pointer sizes come from `long` (libbpf's determine_ptr_size): keep it.
    names.insert("long unsigned int".to_string());
    let btf = Btf::parse(kernel)?;
    let mut out = Writer::default();
    for id in 1..btf.starts.len() as u32 {
        let k = kind(btf.info(id)?);
        if matches!(k, STRUCT | UNION | ENUM | ENUM64 | TYPEDEF | FWD | INT)
            && names.contains(essential(btf.type_name(id)?))
        {
            out.keep(&btf, id)?;
        }
    }
    Ok(out.finish())
}

/// The new BTF, built as the kept types are reached.
#[derive(Default)]
struct Writer {
    types: Vec<u8>,
    strings: Vec<u8>,
    /// Offsets of strings already written.
    string_at: HashMap<String, u32>,
    /// Kernel type id -> new id.
    ids: HashMap<u32, u32>,
    /// The id of the one `void *`, once made.
    void_ptr: Option<u32>,
    next: u32,
}

impl Writer {
    fn string(&mut self, s: &str) -> u32 {
        if self.strings.is_empty() {
            self.strings.push(0);
        }
        if s.is_empty() {
            return 0;
        }
        if let Some(&at) = self.string_at.get(s) {
            return at;
        }
        let at = self.strings.len() as u32;
        self.strings.extend_from_slice(s.as_bytes());
        self.strings.push(0);
        self.string_at.insert(s.to_string(), at);
        at
    }

    fn new_id(&mut self) -> u32 {
        self.next += 1;
        self.next
    }

    fn void_ptr(&mut self) -> u32 {
        if let Some(id) = self.void_ptr {
            return id;
        }
        let id = self.new_id();
        for word in [0, PTR << 24, 0] {
            self.types.extend_from_slice(&u32::to_ne_bytes(word));
        }
        self.void_ptr = Some(id);
        id
    }

    /// Keeps kernel type `id` and what it holds; returns its new id. Records are written in
    /// the order their ids are given, and a record's references are fixed up once the types
    /// they name have ids (a struct may hold a pointer to itself, never itself).
    fn keep(&mut self, btf: &Btf, id: u32) -> Result<u32, String> {
        if id == 0 {
            return Ok(0);
        }
        if let Some(&new) = self.ids.get(&id) {
            return Ok(new);
        }
        let info = btf.info(id)?;
        if kind(info) == PTR {
            let new = self.void_ptr();
            self.ids.insert(id, new);
            return Ok(new);
        }
        let start = btf.start(id)?;
        let len = record_len(btf.types, start)?;
        let record = &btf.types[start..start + len];
        let new = self.new_id();
        self.ids.insert(id, new);
        let at = self.types.len();
        self.types.extend_from_slice(record);
        let name = self.string(btf.name(u32_at(record, 0)?));
        put_u32(&mut self.types, at, name);
        // Type references to keep and rewrite, and names of members and values.
        match kind(info) {
            INT | ENUM | ENUM64 | FWD | FLOAT => {}
            TYPEDEF | VOLATILE | CONST | RESTRICT | TYPE_TAG => {
                let target = self.keep(btf, u32_at(record, 8)?)?;
                put_u32(&mut self.types, at + 8, target);
            }
            ARRAY => {
                for field in [TYPE_LEN, TYPE_LEN + 4] {
                    let target = self.keep(btf, u32_at(record, field)?)?;
                    put_u32(&mut self.types, at + field, target);
                }
            }
            STRUCT | UNION => {
                for m in 0..vlen(info) {
                    let field = TYPE_LEN + 12 * m;
                    let name = self.string(btf.name(u32_at(record, field)?));
                    put_u32(&mut self.types, at + field, name);
                    let target = self.keep(btf, u32_at(record, field + 4)?)?;
                    put_u32(&mut self.types, at + field + 4, target);
                }
            }
            k => return Err(format!("BTF kind {k} is not held in place by a type")),
        }
        if matches!(kind(info), ENUM | ENUM64) {
            let step = if kind(info) == ENUM { 8 } else { 12 };
            for v in 0..vlen(info) {
                let field = TYPE_LEN + step * v;
                let name = self.string(btf.name(u32_at(record, field)?));
                put_u32(&mut self.types, at + field, name);
            }
        }
        Ok(new)
    }

    fn finish(mut self) -> Vec<u8> {
        self.string("");
        let mut out = Vec::with_capacity(HEADER_LEN + self.types.len() + self.strings.len());
        out.extend_from_slice(&MAGIC.to_ne_bytes());
        out.extend_from_slice(&[1, 0]); // version 1, no flags
        for word in [
            HEADER_LEN as u32,
            0,
            self.types.len() as u32,
            self.types.len() as u32,
            self.strings.len() as u32,
        ] {
            out.extend_from_slice(&word.to_ne_bytes());
        }
        out.extend_from_slice(&self.types);
        out.extend_from_slice(&self.strings);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine's BTF cut for every object: the result parses, names every relocated type
    /// with the size the kernel gives it, and is a small part of the kernel's.
    #[test]
    fn the_cut_keeps_every_relocated_type_at_its_size() {
        let Ok(kernel) = std::fs::read(crate::preflight::VMLINUX_BTF) else {
            eprintln!(
                "skipped: {} is not readable here",
                crate::preflight::VMLINUX_BTF
            );
            return;
        };
        use crate::sys::raw;
        let objects = [
            raw::PROCESS_BPF_OBJECT,
            raw::RSS_BPF_OBJECT,
            raw::RMAP_BPF_OBJECT,
            raw::DISCOVER_BPF_OBJECT,
            raw::MMAP_BPF_OBJECT,
            raw::ALLOC_BPF_OBJECT,
        ];
        let cut = trim(&kernel, &objects).unwrap();
        assert!(
            cut.len() * 20 < kernel.len(),
            "{} of {} bytes",
            cut.len(),
            kernel.len()
        );
        let (full, small) = (Btf::parse(&kernel).unwrap(), Btf::parse(&cut).unwrap());
        let sizes = |btf: &Btf, name: &str| -> Vec<u32> {
            (1..btf.starts.len() as u32)
                .filter(|&id| matches!(kind(btf.info(id).unwrap()), STRUCT | UNION))
                .filter(|&id| btf.type_name(id).unwrap() == name)
                .map(|id| u32_at(btf.types, btf.start(id).unwrap() + 8).unwrap())
                .collect()
        };
        let mut names = HashSet::new();
        for object in objects {
            relocated_names(object, &mut names).unwrap();
        }
        for name in ["task_struct", "mm_struct", "pid_namespace", "file"] {
            assert!(names.contains(name), "{name} is relocated: {names:?}");
        }
        for name in &names {
            assert_eq!(sizes(&small, name), sizes(&full, name), "struct {name}");
        }
    }

    #[test]
    fn essential_names_drop_flavours_as_libbpf_does() {
        assert_eq!(essential("mm_struct___atomic_rss"), "mm_struct");
        assert_eq!(essential("mm_struct"), "mm_struct");
        assert_eq!(essential("task_struct___x___y"), "task_struct___x");
        assert_eq!(essential("__u64"), "__u64");
        assert_eq!(essential("a____b"), "a____b");
    }
}
