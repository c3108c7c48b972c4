//! The ELF side of the unwind-table builder: which call-frame section a file has, where it is
//! loaded, and what identifies the file's content. Read with `object` (read-only, ELF only)
//! from the mapped file; the section bytes go to `unwind::cfi` uncopied.

use object::elf::SHT_NOBITS;
use object::read::elf::{ElfFile64, ElfSection64, SectionHeader};
use object::{
    Architecture, CompressionFormat, Endianness, FileKind, Object, ObjectKind, ObjectSection,
    ReadRef,
};

use super::{FileIdentity, UnwindErrorKind};

/// Which DWARF section the rows come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CfiSection {
    /// `.eh_frame`: the loaded copy every x86-64 toolchain emits for exceptions, so it is there
    /// in stripped files too.
    EhFrame,
    /// `.debug_frame`: only in files built without unwind tables (`-fno-asynchronous-unwind-
    /// tables -g`), used when there is no `.eh_frame`.
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

/// What `unwind::cfi` needs of one file.
pub(crate) struct CfiBytes<'a> {
    /// Which section.
    pub section: CfiSection,
    /// Its bytes.
    pub data: &'a [u8],
    /// The addresses `.eh_frame` pointers may be relative to (pc-relative, text-relative,
    /// data-relative), from the section headers.
    pub eh_frame_address: u64,
    pub text_address: Option<u64>,
    pub got_address: Option<u64>,
    /// Build id, or a hash of the CFI.
    pub identity: FileIdentity,
}

/// Finds the call-frame section of an x86-64 ELF file.
/// `data` is the whole file: mapped, in memory, or an `object::ReadCache` that reads only the
/// headers and the sections asked for.
pub(crate) fn cfi_bytes<'d, R: ReadRef<'d>>(data: R) -> Result<CfiBytes<'d>, UnwindErrorKind> {
    match FileKind::parse(data) {
        Ok(FileKind::Elf64) => {}
        Ok(FileKind::Elf32) => return Err(UnwindErrorKind::NotX86_64("a 32-bit ELF file")),
        _ => return Err(UnwindErrorKind::NotElf),
    }
    let file = ElfFile64::<Endianness, R>::parse(data)
        .map_err(|e| UnwindErrorKind::Damaged(e.to_string()))?;
    if file.architecture() != Architecture::X86_64 || !file.is_little_endian() {
        return Err(UnwindErrorKind::NotX86_64(
            "an ELF file for another machine",
        ));
    }
    // Relocatable objects have unapplied relocations in their CFI; they are never mapped.
    if file.kind() == ObjectKind::Relocatable {
        return Err(UnwindErrorKind::Relocatable);
    }
    let (section, found) = match present(&file, ".eh_frame") {
        Some(s) => (CfiSection::EhFrame, s),
        None => match present(&file, ".debug_frame") {
            Some(s) => (CfiSection::DebugFrame, s),
            None => return Err(UnwindErrorKind::NoCfi),
        },
    };
    let compressed = found
        .compressed_file_range()
        .map_err(|e| UnwindErrorKind::Damaged(e.to_string()))?;
    if compressed.format != CompressionFormat::None {
        return Err(UnwindErrorKind::Compressed(section.name()));
    }
    let bytes = found
        .data()
        .map_err(|e| UnwindErrorKind::Damaged(format!("{}: {e}", section.name())))?;
    let identity = match file.build_id() {
        Ok(Some(id)) if !id.is_empty() => FileIdentity::BuildId(id.to_vec()),
        _ => FileIdentity::CfiHash(fnv1a(found.address(), bytes)),
    };
    Ok(CfiBytes {
        section,
        data: bytes,
        eh_frame_address: found.address(),
        text_address: file.section_by_name(".text").map(|s| s.address()),
        got_address: file.section_by_name(".got").map(|s| s.address()),
        identity,
    })
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

/// 64-bit FNV-1a over the section's load address and bytes: stable for the same CFI at the
/// same addresses, which is all a table depends on, and cheap next to parsing it.
fn fnv1a(address: u64, bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in address.to_le_bytes().iter().chain(bytes) {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}
