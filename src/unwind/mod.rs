//! Unwind tables: a file's call frame information (`.eh_frame` and `.debug_frame`) turned
//! into compact rows sorted by pc, which the BPF stack walk searches (narrowed by `index`) to
//! find the caller's frame in code built without frame pointers (issue 15).
//!
//! Where it sits in the flow: discovery, which already opens each executable file a process
//! maps (at exec and dlopen, while the process is stopped), builds the file's table with
//! [`build`]; the recorder loads the rows once per file into a BPF map shared by every process
//! that maps the file. Inside: `elf` finds the sections, `cfi` walks them with gimli and reduces
//! each row to a [`RowRule`], `table` sorts, merges and fills gaps; `row` is the layout shared
//! with `bpf/event.h`, and `index` the buckets that narrow the walk's search.
//!
//! Sharing: the recorder keys shards by the file's (dev, ino), which `/proc/PID/maps` names
//! for every mapping, so finding an already loaded shard at discovery reads no file. The
//! [`FileIdentity`] (the build id, else a hash of the CFI) goes into the recording's module
//! record, so two inodes with the same content can share a shard and a report on another
//! machine can tell whether its copy of the file is the one that ran.

mod cfi;
mod elf;
mod index;
mod row;
#[cfg(test)]
mod synthetic;
mod table;

use std::fmt;
use std::fs::File;
use std::path::{Path, PathBuf};

use gimli::{BaseAddresses, DebugFrame, EhFrame, LittleEndian, Vendor};

pub use cfi::Machine;
pub use cfi::PLT_CFA_EXPRESSION;
pub use elf::{CfiSection, Segment};
pub use index::RowIndex;
pub use row::{CfaRule, RaRule, RbpRule, RowRule, UnwindRow};

/// One file's unwind table: the rows the BPF walk searches, what went into them, and what
/// identifies the file's content.
#[derive(Clone, Debug)]
pub struct UnwindTable {
    rows: Vec<UnwindRow>,
    stats: UnwindStats,
    identity: FileIdentity,
    segments: Vec<Segment>,
}

impl UnwindTable {
    /// The rows, sorted by pc, no two neighbours alike, ending in a `CfaRule::Unknown` row.
    pub fn rows(&self) -> &[UnwindRow] {
        &self.rows
    }

    /// What the builder saw and did.
    pub fn stats(&self) -> &UnwindStats {
        &self.stats
    }

    /// The file's content identity.
    pub fn identity(&self) -> &FileIdentity {
        &self.identity
    }

    /// The rows with their pc turned from an ELF virtual address into a file offset, which is
    /// what the BPF walk has: the kernel's VMA of a pc says where in the file it is, not where
    /// the linker put it. Each row moves by the delta of the executable segment it is in (the
    /// last one starting at or before it); a file without executable segments keeps its pcs.
    /// A row whose offset would not fit 32 bits is dropped with everything after it (the table
    /// still ends unknown there: the walk stops instead of guessing).
    pub fn file_offset_rows(&self) -> Vec<UnwindRow> {
        let mut out = Vec::with_capacity(self.rows.len());
        let mut seg = 0;
        for row in &self.rows {
            let pc = u64::from(row.pc);
            while seg + 1 < self.segments.len() && self.segments[seg + 1].vaddr <= pc {
                seg += 1;
            }
            let moved = match self.segments.get(seg) {
                Some(s) if s.vaddr <= pc || seg == 0 => {
                    (pc as i128 - s.vaddr as i128 + s.offset as i128).max(0)
                }
                _ => pc as i128,
            };
            let Ok(pc) = u32::try_from(moved) else {
                break;
            };
            out.push(UnwindRow { pc, ..*row });
        }
        out.sort_by_key(|r| r.pc);
        out
    }

    /// The rule at `pc` (an ELF virtual address), found as the BPF walk finds it: the last row
    /// at or before `pc`. A pc before the first row has no CFI: `CfaRule::Unknown`.
    ///
    /// For a caller's frame the walk must look up its return address minus 1 (minus 4 on
    /// aarch64, whose instructions are 4 bytes: the call itself): a call to a noreturn function
    /// can be a function's last instruction, so the return address is the first byte past the
    /// function (another function, or a gap without CFI).
    pub fn lookup(&self, pc: u64) -> RowRule {
        let Ok(pc) = u32::try_from(pc) else {
            return RowRule::bare(CfaRule::Unknown);
        };
        match self.rows.partition_point(|row| row.pc <= pc) {
            0 => RowRule::bare(CfaRule::Unknown),
            n => self.rows[n - 1].rule(),
        }
    }
}

/// What identifies a file's content, for sharing one table among files with the same content.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FileIdentity {
    /// The `NT_GNU_BUILD_ID` note: what debuggers and symbol servers match a file by.
    BuildId(Vec<u8>),
    /// No build id: a 64-bit FNV-1a hash of the CFI sections' addresses and bytes, which is
    /// all the table depends on (cheap next to parsing them).
    CfiHash(u64),
}

/// Counts per CFA rule, of the rows as the CFI states them (before merging).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuleCounts {
    /// `CfaRule::Rsp`.
    pub rsp: usize,
    /// `CfaRule::Rbp`.
    pub rbp: usize,
    /// `CfaRule::Plt`.
    pub plt: usize,
    /// `CfaRule::End`.
    pub end: usize,
    /// `CfaRule::Unsupported`.
    pub unsupported: usize,
    /// `CfaRule::Signal`.
    pub signal: usize,
}

impl RuleCounts {
    fn merge(&mut self, other: &RuleCounts) {
        self.rsp += other.rsp;
        self.rbp += other.rbp;
        self.plt += other.plt;
        self.end += other.end;
        self.unsupported += other.unsupported;
        self.signal += other.signal;
    }

    fn add(&mut self, rule: CfaRule) {
        match rule {
            CfaRule::Rsp => self.rsp += 1,
            CfaRule::Rbp => self.rbp += 1,
            CfaRule::Plt => self.plt += 1,
            CfaRule::End => self.end += 1,
            // The CFI never states "unknown"; the table adds those rows itself.
            CfaRule::Unknown => {}
            CfaRule::Unsupported => self.unsupported += 1,
            CfaRule::Signal => self.signal += 1,
        }
    }
}

/// Why CFI rows could not be expressed, per row as the CFI states them (before merging).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnsupportedCounts {
    /// Signal trampolines whose CFI does not say the x86-64 sigcontext's layout (interrupted
    /// rsp, then rip, at fixed offsets from rsp; rbp at another); every aarch64 one.
    pub signal_frame: usize,
    /// A CFA by DWARF expression other than the PLT's.
    pub cfa_expression: usize,
    /// A CFA relative to a register other than rsp or rbp.
    pub cfa_register: usize,
    /// A return address anywhere but at CFA-8 (x86-64), or neither in x30 nor at CFA + N
    /// within 16 bits (aarch64).
    pub return_address: usize,
    /// A CFA offset beyond 32 bits.
    pub offset_range: usize,
    /// FDEs whose instructions gimli could not evaluate (their whole range is unsupported).
    pub damaged_fde: usize,
    /// Rows whose rbp rule is `RbpRule::Unsupported` (their CFA rule may still be usable).
    pub rbp: usize,
}

impl UnsupportedCounts {
    fn merge(&mut self, other: &UnsupportedCounts) {
        self.signal_frame += other.signal_frame;
        self.cfa_expression += other.cfa_expression;
        self.cfa_register += other.cfa_register;
        self.return_address += other.return_address;
        self.offset_range += other.offset_range;
        self.damaged_fde += other.damaged_fde;
        self.rbp += other.rbp;
    }
}

/// What the builder saw and did, for the recorder's log and `doctor`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnwindStats {
    /// FDEs per section.
    pub fdes: SectionFdes,
    /// CIEs in both sections.
    pub cies: usize,
    /// FDEs covering no address, skipped.
    pub empty_fdes: usize,
    /// FDEs starting inside an earlier one, resolved in favour of the earlier one.
    pub overlapping_fdes: usize,
    /// Rows as the CFI states them, before merging.
    pub cfi_rows: usize,
    /// Rows of the table, after merging, with the `CfaRule::Unknown` rows.
    pub rows: usize,
    /// `CfaRule::Unknown` rows for gaps between FDEs (the final one not counted).
    pub gaps: usize,
    /// The ELF entry point had no FDE, so the table gives its code the outermost frame's rule
    /// itself (`CfaRule::End`, up to the next FDE): see `table::outermost_entry`.
    pub entry_end: bool,
    /// The CFI rows per CFA rule.
    pub rules: RuleCounts,
    /// Why CFI rows are unsupported.
    pub unsupported: UnsupportedCounts,
}

/// FDEs per call-frame section.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SectionFdes {
    /// In `.eh_frame`.
    pub eh_frame: usize,
    /// In `.debug_frame`.
    pub debug_frame: usize,
}

impl SectionFdes {
    /// In both.
    pub fn total(&self) -> usize {
        self.eh_frame + self.debug_frame
    }
}

impl UnwindStats {
    /// Bytes the table takes in a BPF map.
    pub fn table_bytes(&self) -> usize {
        self.rows * std::mem::size_of::<UnwindRow>()
    }
}

/// Why a file's unwind table could not be built.
#[derive(Debug)]
pub struct UnwindError {
    path: Option<PathBuf>,
    kind: UnwindErrorKind,
}

#[derive(Debug)]
enum UnwindErrorKind {
    Io(std::io::Error),
    NotElf,
    OtherMachine(&'static str),
    Relocatable,
    Damaged(String),
    NoCfi,
    Compressed(&'static str),
    Cfi(CfiSection, gimli::Error),
    AboveFourGiB(u64),
}

impl fmt::Display for UnwindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(path) = &self.path {
            write!(f, "{}: ", path.display())?;
        }
        match &self.kind {
            UnwindErrorKind::Io(e) => write!(f, "cannot read the file: {e}"),
            UnwindErrorKind::NotElf => write!(f, "not an ELF file"),
            UnwindErrorKind::OtherMachine(what) => {
                write!(
                    f,
                    "{what}; unwind tables are built for x86-64 and aarch64 only"
                )
            }
            UnwindErrorKind::Relocatable => write!(
                f,
                "a relocatable object (.o), whose call frame information is not yet relocated; \
                 only executables and shared libraries are mapped"
            ),
            UnwindErrorKind::Damaged(e) => write!(f, "damaged ELF file: {e}"),
            UnwindErrorKind::NoCfi => write!(
                f,
                "no call frame information (no FDE in .eh_frame or .debug_frame): built with \
                 -fno-asynchronous-unwind-tables and without -g, or stripped of it"
            ),
            UnwindErrorKind::Compressed(name) => {
                write!(f, "{name} is compressed, which is not supported")
            }
            UnwindErrorKind::Cfi(section, e) => {
                write!(f, "damaged {}: {e}", section.name())
            }
            UnwindErrorKind::AboveFourGiB(pc) => write!(
                f,
                "code at {pc:#x}, above 4 GiB: unwind rows hold 32-bit addresses"
            ),
        }
    }
}

impl std::error::Error for UnwindError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            UnwindErrorKind::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// Builds the unwind table of the ELF file at `path`. Reads only the headers, the call-frame
/// sections and the build-id note, not the whole file.
pub fn build(path: &Path) -> Result<UnwindTable, UnwindError> {
    let with_path = |kind| UnwindError {
        path: Some(path.to_path_buf()),
        kind,
    };
    let file = File::open(path).map_err(|e| with_path(UnwindErrorKind::Io(e)))?;
    // Read, not mapped: a library truncated while mapped would be SIGBUS in the recorder, and
    // the few reads this makes (headers, the CFI) cost less than faulting the pages in.
    let cache = object::ReadCache::new(file);
    build_from(&cache).map_err(with_path)
}

/// The GNU build id (`NT_GNU_BUILD_ID` note) of the open ELF file `file`, `None` when it has
/// none: what the recording's `Module` event carries, so a report on another machine can match
/// debug files and tell whether its copy of a file is the one that ran. Reads only the headers
/// and the notes, through the caller's descriptor (the file may have been replaced since).
pub fn build_id(file: &File) -> Result<Option<Vec<u8>>, UnwindError> {
    let cache = object::ReadCache::new(file);
    elf::build_id(&cache).map_err(|kind| UnwindError { path: None, kind })
}

/// Builds the unwind table of an ELF file already in memory.
pub fn build_from_bytes(data: &[u8]) -> Result<UnwindTable, UnwindError> {
    build_from(data).map_err(|kind| UnwindError { path: None, kind })
}

fn build_from<'d, R: object::ReadRef<'d>>(data: R) -> Result<UnwindTable, UnwindErrorKind> {
    table_of(elf::cfi_bytes(data)?)
}

/// The table of a file's call-frame sections, wherever their bytes came from: the FDEs of
/// `.eh_frame` and `.debug_frame` together, since a file built without unwind tables has its
/// own functions in the one and its startup code and PLT in the other.
fn table_of(cfi: elf::CfiBytes<'_>) -> Result<UnwindTable, UnwindErrorKind> {
    let mut bases = BaseAddresses::default();
    if let Some(text) = cfi.text_address {
        bases = bases.set_text(text);
    }
    if let Some(got) = cfi.got_address {
        bases = bases.set_got(got);
    }
    // 0x2d is aarch64's DW_CFA_AARCH64_negate_ra_state (the pac-ret ranges), which gimli
    // reads only when told the vendor; elsewhere it is SPARC's window save.
    let vendor = match cfi.machine {
        Machine::X86_64 => Vendor::Default,
        Machine::Aarch64 => Vendor::AArch64,
    };
    let mut all = cfi::Cfi::default();
    let mut fdes = SectionFdes::default();
    for bytes in &cfi.sections {
        let walked = match bytes.section {
            CfiSection::EhFrame => {
                let mut section = EhFrame::new(bytes.data, LittleEndian);
                section.set_vendor(vendor);
                cfi::walk(
                    &section,
                    &bases.clone().set_eh_frame(bytes.address),
                    cfi.machine,
                )
            }
            CfiSection::DebugFrame => {
                let mut section = DebugFrame::new(bytes.data, LittleEndian);
                section.set_vendor(vendor);
                // DWARF 4+ CIEs carry the address size; older ones rely on this.
                section.set_address_size(8);
                cfi::walk(&section, &bases, cfi.machine)
            }
        }
        .map_err(|e| UnwindErrorKind::Cfi(bytes.section, e))?;
        match bytes.section {
            CfiSection::EhFrame => fdes.eh_frame = walked.fdes.len(),
            CfiSection::DebugFrame => fdes.debug_frame = walked.fdes.len(),
        }
        all.append(walked);
    }
    if all.fdes.is_empty() {
        return Err(UnwindErrorKind::NoCfi);
    }
    let cfi_rows = all.rows.len();
    // The entry's own segment bounds the rule: an entry outside executable code gets none.
    let entry_end = cfi.entry.is_some_and(|entry| {
        cfi.segments
            .iter()
            .find(|s| s.vaddr <= entry && entry < s.vaddr.saturating_add(s.size))
            .is_some_and(|s| table::outermost_entry(&mut all, entry, s.vaddr + s.size))
    });
    assemble(fdes, &all, cfi_rows, entry_end, cfi.identity, cfi.segments)
}

fn assemble(
    fdes: SectionFdes,
    walked: &cfi::Cfi,
    cfi_rows: usize,
    entry_end: bool,
    identity: FileIdentity,
    segments: Vec<Segment>,
) -> Result<UnwindTable, UnwindErrorKind> {
    let (rows, assembly) =
        table::assemble(walked).map_err(|e| UnwindErrorKind::AboveFourGiB(e.pc))?;
    let stats = UnwindStats {
        fdes,
        cies: walked.cies,
        empty_fdes: assembly.empty_fdes,
        overlapping_fdes: assembly.overlapping_fdes,
        cfi_rows,
        entry_end,
        rows: rows.len(),
        gaps: assembly.gaps,
        rules: walked.rules,
        unsupported: walked.unsupported,
    };
    Ok(UnwindTable {
        rows,
        stats,
        identity,
        segments,
    })
}

#[cfg(test)]
mod tests {
    use super::synthetic::{eh_frame, rsp, Fde, PROLOGUE};
    use super::*;
    use gimli::write::CallFrameInstruction as I;
    use gimli::X86_64;

    #[test]
    fn build_id_is_the_note_readelf_shows() {
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new("readelf")
            .arg("-n")
            .arg(&exe)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let shown = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("Build ID: "))
            .map(str::to_owned);
        let got = build_id(&File::open(&exe).unwrap()).unwrap();
        let hex = got.map(|id| id.iter().map(|b| format!("{b:02x}")).collect::<String>());
        assert_eq!(hex, shown, "{text}");
    }

    #[test]
    fn build_id_of_a_file_without_the_note_is_none() {
        let dir = std::env::temp_dir().join(format!("memtrack-buildid-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (src, exe) = (dir.join("none.c"), dir.join("none"));
        std::fs::write(&src, "int main(void) { return 0; }\n").unwrap();
        let ok = std::process::Command::new("cc")
            .arg("-Wl,--build-id=none")
            .arg("-o")
            .arg(&exe)
            .arg(&src)
            .status()
            .unwrap();
        assert!(ok.success());
        assert_eq!(build_id(&File::open(&exe).unwrap()).unwrap(), None);
        let not_elf = build_id(&File::open(&src).unwrap()).unwrap_err();
        assert!(not_elf.to_string().contains("not an ELF file"), "{not_elf}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn table(fdes: &[Fde]) -> Result<UnwindTable, UnwindError> {
        let data = eh_frame(false, fdes);
        table_of(elf::CfiBytes {
            sections: vec![elf::SectionBytes {
                section: CfiSection::EhFrame,
                data: &data,
                address: 0,
            }],
            text_address: None,
            got_address: None,
            identity: FileIdentity::CfiHash(0),
            segments: Vec::new(),
            entry: None,
            machine: Machine::X86_64,
        })
        .map_err(|kind| UnwindError { path: None, kind })
    }

    /// Every library constructor is called from ld.so's `_dl_start_user`, which follows its
    /// `_start` at the entry point: whether the CFI says it (`DW_CFA_undefined rip`) or has no
    /// FDE there (Debian's glibc 2.36), the walk must end there complete, not unknown.
    #[test]
    fn the_loaders_entry_code_is_the_outermost_frame() {
        let path = Path::new("/lib64/ld-linux-x86-64.so.2");
        let data = std::fs::read(path).unwrap();
        let elf = object::File::parse(&*data).unwrap();
        let entry = object::Object::entry(&elf);
        let t = build(path).unwrap();
        assert_eq!(t.lookup(entry), RowRule::bare(CfaRule::End), "{entry:#x}");
        // _dl_start_user's call of _dl_init, a few instructions on.
        assert_eq!(t.lookup(entry + 0x2f), RowRule::bare(CfaRule::End));
    }

    #[test]
    fn code_above_four_gib_is_refused_with_its_address() {
        let e = table(&[Fde::new(0x1_0000_0000, 0x20, &[])]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "code at 0x100000000, above 4 GiB: unwind rows hold 32-bit addresses"
        );
        // Just below is fine, its terminator row included.
        let t = table(&[Fde::new(0xffff_ff00, 0xff, &[])]).unwrap();
        assert_eq!(t.rows().last().unwrap().pc, 0xffff_ffff);
    }

    #[test]
    fn lookup_follows_rows_and_is_unknown_outside() {
        let t = table(&[
            Fde::new(0x1000, 0x20, PROLOGUE),
            Fde::new(0x1040, 0x10, &[]),
        ])
        .unwrap();
        let saved = RowRule {
            cfa: CfaRule::Rsp,
            cfa_offset: 16,
            rbp: RbpRule::AtCfa,
            rbp_offset: -16,
            ra: RaRule::CfaMinus8,
        };
        let unknown = RowRule::bare(CfaRule::Unknown);
        assert_eq!(t.lookup(0xfff), unknown);
        assert_eq!(t.lookup(0x1000), rsp(8));
        assert_eq!(t.lookup(0x1001), saved);
        assert_eq!(t.lookup(0x101f), saved);
        assert_eq!(t.lookup(0x1020), unknown);
        assert_eq!(t.lookup(0x103f), unknown);
        assert_eq!(t.lookup(0x1040), rsp(8));
        assert_eq!(t.lookup(0x1050), unknown);
        assert_eq!(t.lookup(u64::MAX), unknown);
        let s = t.stats();
        assert_eq!(
            (s.cies, s.fdes.total(), s.cfi_rows, s.rows, s.gaps),
            (1, 2, 3, 5, 1)
        );
        assert_eq!(s.rules.rsp, 3);
    }

    #[test]
    fn section_without_fdes_is_no_cfi() {
        let e = table(&[]).unwrap_err().to_string();
        assert!(e.starts_with("no call frame information"), "{e}");
    }

    #[test]
    fn undefined_return_address_ends_the_walk() {
        let t = table(&[Fde::new(0x1000, 0x10, &[(0, I::Undefined(X86_64::RA))])]).unwrap();
        assert_eq!(t.lookup(0x1000), RowRule::bare(CfaRule::End));
        assert_eq!(t.stats().rules.end, 1);
    }
}
