//! The ELF side of the unwind-table builder: which call-frame section a file has, where it is
//! loaded, and what identifies the file's content. Read with `object` (read-only, ELF only)
//! from the mapped file; the section bytes go to `unwind::cfi` uncopied.

use object::elf::{PF_X, PT_LOAD, SHT_NOBITS};
use object::read::elf::{ElfFile64, ElfSection64, ProgramHeader, SectionHeader};
use object::{
    Architecture, CompressionFormat, Endianness, FileKind, Object, ObjectKind, ObjectSection,
    ReadRef,
};

use super::cfi::Machine;
use super::{FileIdentity, UnwindErrorKind};

/// Which DWARF section rows come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CfiSection {
    /// `.eh_frame`: the loaded copy every x86-64 toolchain emits for exceptions, so it is there
    /// in stripped files too.
    EhFrame,
    /// `.debug_frame`: what code built with `-fno-asynchronous-unwind-tables -g` has instead.
    /// Such a file usually has both: `.eh_frame` for the startup files and the PLT (which
    /// were built with unwind tables), `.debug_frame` for its own functions.
    DebugFrame,
}

impl CfiSection {
    /// The section's name in the file.
    pub fn name(self) -> &'static str {
        match self {
            CfiSection::EhFrame => ".eh_frame",
            CfiSection::DebugFrame => ".debug_frame",
        }
    }
}

/// One call-frame section's bytes and load address.
pub(crate) struct SectionBytes<'a> {
    /// Which section.
    pub section: CfiSection,
    /// Its bytes.
    pub data: &'a [u8],
    /// Its address, which `.eh_frame`'s pc-relative pointers are relative to.
    pub address: u64,
}

/// What `unwind::cfi` needs of one file.
pub(crate) struct CfiBytes<'a> {
    /// `.eh_frame` first, then `.debug_frame`, those present with contents.
    pub sections: Vec<SectionBytes<'a>>,
    /// The addresses other `.eh_frame` pointer encodings may be relative to.
    pub text_address: Option<u64>,
    pub got_address: Option<u64>,
    /// Build id, or a hash of the CFI.
    pub identity: FileIdentity,
    /// The executable `PT_LOAD` segments, by address.
    pub segments: Vec<Segment>,
    /// `e_entry`, where the process (or, for the dynamic loader, the loader) starts: the code
    /// there has no caller. `None` when 0 (most shared libraries).
    pub entry: Option<u64>,
    /// What the CFI's register numbers mean.
    pub machine: Machine,
}

/// An executable `PT_LOAD` segment: where its code is in memory (ELF virtual addresses, which
/// the CFI speaks in) and in the file (what the kernel's VMA of a pc gives the BPF walk).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// `p_vaddr`.
    pub vaddr: u64,
    /// `p_memsz`.
    pub size: u64,
    /// `p_offset`.
    pub offset: u64,
}

/// Finds the call-frame sections of an x86-64 or aarch64 ELF file. `data` is the whole file: mapped, in
/// memory, or an `object::ReadCache` that reads only the headers and the sections asked for.
pub(crate) fn cfi_bytes<'d, R: ReadRef<'d>>(data: R) -> Result<CfiBytes<'d>, UnwindErrorKind> {
    match FileKind::parse(data) {
        Ok(FileKind::Elf64) => {}
        Ok(FileKind::Elf32) => return Err(UnwindErrorKind::OtherMachine("a 32-bit ELF file")),
        _ => return Err(UnwindErrorKind::NotElf),
    }
    let file = ElfFile64::<Endianness, R>::parse(data)
        .map_err(|e| UnwindErrorKind::Damaged(e.to_string()))?;
    let machine = match file.architecture() {
        Architecture::X86_64 if file.is_little_endian() => Machine::X86_64,
        Architecture::Aarch64 if file.is_little_endian() => Machine::Aarch64,
        _ => {
            return Err(UnwindErrorKind::OtherMachine(
                "an ELF file for another machine",
            ))
        }
    };
    // Relocatable objects have unapplied relocations in their CFI; they are never mapped.
    if file.kind() == ObjectKind::Relocatable {
        return Err(UnwindErrorKind::Relocatable);
    }
    let mut sections = Vec::new();
    let mut hash = Fnv1a::default();
    for section in [CfiSection::EhFrame, CfiSection::DebugFrame] {
        let Some(found) = present(&file, section.name()) else {
            continue;
        };
        let compressed = found
            .compressed_file_range()
            .map_err(|e| UnwindErrorKind::Damaged(format!("{}: {e}", section.name())))?;
        if compressed.format != CompressionFormat::None {
            return Err(UnwindErrorKind::Compressed(section.name()));
        }
        let data = found
            .data()
            .map_err(|e| UnwindErrorKind::Damaged(format!("{}: {e}", section.name())))?;
        hash.add(&found.address().to_le_bytes());
        hash.add(data);
        sections.push(SectionBytes {
            section,
            data,
            address: found.address(),
        });
    }
    if sections.is_empty() {
        return Err(UnwindErrorKind::NoCfi);
    }
    let identity = match file.build_id() {
        Ok(Some(id)) if !id.is_empty() => FileIdentity::BuildId(id.to_vec()),
        _ => FileIdentity::CfiHash(hash.0),
    };
    let endian = file.endian();
    let mut segments: Vec<Segment> = file
        .elf_program_headers()
        .iter()
        .filter(|p| p.p_type(endian) == PT_LOAD && p.p_flags(endian).contains(PF_X))
        .map(|p| Segment {
            vaddr: p.p_vaddr(endian),
            size: p.p_memsz(endian),
            offset: p.p_offset(endian),
        })
        .collect();
    segments.sort_by_key(|s| s.vaddr);
    Ok(CfiBytes {
        sections,
        text_address: file.section_by_name(".text").map(|s| s.address()),
        got_address: file.section_by_name(".got").map(|s| s.address()),
        identity,
        segments,
        entry: Some(file.entry()).filter(|&e| e != 0),
        machine,
    })
}

/// The `NT_GNU_BUILD_ID` of an ELF file (`None` when it has none), for the recording's module
/// records; the same note `cfi_bytes` takes the identity from.
pub(crate) fn build_id<'d, R: ReadRef<'d>>(data: R) -> Result<Option<Vec<u8>>, UnwindErrorKind> {
    let file = match FileKind::parse(data) {
        Ok(FileKind::Elf64) => ElfFile64::<Endianness, R>::parse(data)
            .map_err(|e| UnwindErrorKind::Damaged(e.to_string()))?,
        Ok(FileKind::Elf32) => return Err(UnwindErrorKind::OtherMachine("a 32-bit ELF file")),
        _ => return Err(UnwindErrorKind::NotElf),
    };
    match file.build_id() {
        Ok(id) => Ok(id.filter(|id| !id.is_empty()).map(<[u8]>::to_vec)),
        Err(e) => Err(UnwindErrorKind::Damaged(format!("the build-id note: {e}"))),
    }
}

/// The named section, if it has bytes in this file (a separate debug file keeps `.eh_frame`
/// as a header without contents, `SHT_NOBITS`).
fn present<'d, 'f, R: ReadRef<'d>>(
    file: &'f ElfFile64<'d, Endianness, R>,
    name: &str,
) -> Option<ElfSection64<'d, 'f, Endianness, R>> {
    let section = file.section_by_name(name)?;
    let header = section.elf_section_header();
    (header.sh_type(file.endian()) != SHT_NOBITS && section.size() > 0).then_some(section)
}

/// 64-bit FNV-1a over the CFI sections' load addresses and bytes: stable for the same CFI at
/// the same addresses, which is all a table depends on, and cheap next to parsing it.
struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    fn add(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}
