//! The unwind-table builder (`memtrack::unwind`) on real files, against an oracle: binutils'
//! `readelf --debug-dump=frames-interp`, which evaluates the same CFI independently. For every
//! row readelf prints, the builder's table must give the same CFA register and offset and the
//! same rbp rule at the row's first pc, its last pc and one inside; every expression must be
//! the PLT's (`CfaRule::Plt`) or unsupported, exactly as designed; and code between FDEs must
//! be `CfaRule::Unknown`. aarch64 files (Debian's arm64 glibc of the cross toolchain, and
//! testdata/unwind/frames.c cross-compiled with and without pointer authentication) against the
//! same oracle, read with the aarch64 rules: CFA from sp or x29, the return address in x30 or
//! saved at any offset. Also: the row layout against `bpf/event.h` as the C compiler sees it,
//! bad input, and (ignored) the build time per file.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use memtrack::unwind::{
    self, CfaRule, CfiSection, RaRule, RbpRule, RowRule, UnwindRow, UnwindTable,
};

/// The PLT's CFA expression as `readelf --debug-dump=frames` prints it.
const PLT_EXPRESSION_TEXT: &str = "DW_CFA_def_cfa_expression (DW_OP_breg7 (rsp): 8; \
     DW_OP_breg16 (rip): 0; DW_OP_lit15; DW_OP_and; DW_OP_lit11; DW_OP_ge; DW_OP_lit3; \
     DW_OP_shl; DW_OP_plus)";

/// One row of readelf's interpreted table: the column values as printed.
#[derive(Clone, Debug)]
struct OracleRow {
    loc: u64,
    cfa: String,
    rbp: Option<String>,
    ra: Option<String>,
}

/// One FDE as readelf reads it.
#[derive(Debug)]
struct OracleFde {
    offset: String,
    start: u64,
    end: u64,
    /// Its CIE's augmentation has `S`: a signal trampoline.
    signal: bool,
    /// Its instructions contain the PLT expression (from the raw dump).
    plt: bool,
    /// Where its instructions say a signal frame's registers are (from the raw dump).
    layout: SignalLayout,
    /// An aarch64 file's FDE, and from which address it says `DW_CFA_undefined` for x30, if
    /// it does (readelf prints "u" alike for that and for no rule, which on aarch64 means the
    /// return address is still in x30).
    aarch64: Option<Option<u64>>,
    rows: Vec<OracleRow>,
}

fn readelf(args: &[&str], file: &Path) -> String {
    let out = Command::new("readelf")
        .args(args)
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("run readelf (binutils; scripts/setup.sh installs it): {e}"));
    assert!(
        out.status.success(),
        "readelf {args:?} {} failed: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("readelf prints text")
}

/// The lines of `text` inside the "Contents of the SECTION section" block.
fn section_lines(text: &str, section: CfiSection) -> Vec<&str> {
    let head = format!("Contents of the {} section", section.name());
    text.lines()
        .skip_while(|l| !l.starts_with(&head))
        .skip(1)
        .take_while(|l| !l.starts_with("Contents of the "))
        .collect()
}

/// Splits an entry header `OFFSET LENGTH ID CIE|FDE ...` into its offset and the rest.
fn entry_header(line: &str) -> Option<(&str, &str, &str)> {
    let mut words = line.splitn(5, ' ');
    let offset = words.next()?;
    if offset.len() != 8 || !offset.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let _length = words.next()?;
    let _id = words.next()?;
    let kind = words.next()?;
    (kind == "CIE" || kind == "FDE").then(|| (offset, kind, words.next().unwrap_or("")))
}

/// FDE offsets whose raw instructions contain the PLT's expression.
fn plt_fdes(raw: &str, section: CfiSection) -> Vec<String> {
    let mut found = Vec::new();
    let mut current = None;
    for line in section_lines(raw, section) {
        if let Some((offset, kind, _)) = entry_header(line) {
            current = (kind == "FDE").then(|| offset.to_string());
        } else if line.contains(PLT_EXPRESSION_TEXT) {
            found.extend(current.clone());
        }
    }
    found
}

/// Where the raw instructions of each FDE say a signal frame's registers are, as rsp offsets
/// (`DW_OP_breg7 (rsp): N`): the CFA loaded from (`DW_CFA_def_cfa_expression (... N;
/// DW_OP_deref)`), rip's and rbp's (`DW_CFA_expression: r16 (rip) (... N)`), by FDE offset.
fn signal_layouts(raw: &str, section: CfiSection) -> HashMap<String, SignalLayout> {
    let rsp_offset = |line: &str| -> Option<i64> {
        let (_, n) = line.split_once("DW_OP_breg7 (rsp): ")?;
        n.split([';', ')']).next()?.parse().ok()
    };
    let mut found: HashMap<String, SignalLayout> = HashMap::new();
    let mut current = None;
    for line in section_lines(raw, section) {
        if let Some((offset, kind, _)) = entry_header(line) {
            current = (kind == "FDE").then(|| offset.to_string());
            continue;
        }
        let Some(fde) = &current else { continue };
        let line = line.trim();
        let layout = found.entry(fde.clone()).or_default();
        if line.starts_with("DW_CFA_def_cfa_expression") && line.ends_with("DW_OP_deref)") {
            layout.sp = rsp_offset(line);
        } else if line.starts_with("DW_CFA_expression: r16 (rip)") {
            layout.ip = rsp_offset(line);
        } else if line.starts_with("DW_CFA_expression: r6 (rbp)") {
            layout.bp = rsp_offset(line);
        }
    }
    found
}

/// A signal frame's saved registers as rsp offsets, as its FDE states them.
#[derive(Clone, Copy, Debug, Default)]
struct SignalLayout {
    sp: Option<i64>,
    ip: Option<i64>,
    bp: Option<i64>,
}

/// readelf's interpreted tables of `file`: `.eh_frame`'s FDEs, then `.debug_frame`'s (the
/// builder takes both, in this order).
fn oracle(file: &Path) -> Vec<OracleFde> {
    let interp = readelf(&["--debug-dump=frames-interp,no-follow-links"], file);
    let raw = readelf(&["--debug-dump=frames,no-follow-links"], file);
    let aarch64 = readelf(&["--file-header"], file).contains("AArch64");
    [CfiSection::EhFrame, CfiSection::DebugFrame]
        .into_iter()
        .flat_map(|section| {
            let mut fdes = oracle_section(&interp, &raw, section);
            if aarch64 {
                let undefined = undefined_x30_fdes(&raw, section);
                for fde in &mut fdes {
                    let from = undefined
                        .get(&fde.offset)
                        .map(|loc| loc.unwrap_or(fde.start));
                    fde.aarch64 = Some(from);
                }
            }
            fdes
        })
        .collect()
}

/// Where the raw instructions of an FDE say `DW_CFA_undefined` for x30 (aarch64's outermost
/// frames: `_start`, a thread's start), by FDE offset: the address it takes effect at (the
/// last `DW_CFA_advance_loc` before it), `None` for the FDE's start.
fn undefined_x30_fdes(raw: &str, section: CfiSection) -> HashMap<String, Option<u64>> {
    let mut found = HashMap::new();
    let mut current = None;
    let mut loc = None;
    for line in section_lines(raw, section) {
        if let Some((offset, kind, _)) = entry_header(line) {
            current = (kind == "FDE").then(|| offset.to_string());
            loc = None;
        } else if let Some((_, to)) = line.split_once(" to ") {
            loc = u64::from_str_radix(to.trim(), 16).ok();
        } else if line.contains("DW_CFA_undefined: r30 (x30)") {
            if let Some(fde) = &current {
                found.insert(fde.clone(), loc);
            }
        }
    }
    found
}

/// readelf's interpreted table of one section, from its outputs `interp` (frames-interp) and
/// `raw` (frames).
fn oracle_section(interp: &str, raw: &str, section: CfiSection) -> Vec<OracleFde> {
    let plt = plt_fdes(raw, section);
    let layouts = signal_layouts(raw, section);
    // A CIE's rows (printed with loc 0) apply to an FDE that prints none of its own.
    let mut cies: HashMap<String, (bool, Vec<OracleRow>)> = HashMap::new();
    let mut fdes: Vec<OracleFde> = Vec::new();
    let mut columns: Vec<String> = Vec::new();
    enum Entry {
        None,
        Cie(String),
        Fde,
    }
    let mut entry = Entry::None;
    for line in section_lines(interp, section) {
        if let Some((offset, kind, rest)) = entry_header(line) {
            columns.clear();
            if kind == "CIE" {
                let augmentation = rest.split('"').nth(1).unwrap_or("");
                cies.insert(offset.to_string(), (augmentation.contains('S'), Vec::new()));
                entry = Entry::Cie(offset.to_string());
            } else {
                let field = |name: &str| {
                    rest.split_whitespace()
                        .find_map(|w| w.strip_prefix(name))
                        .unwrap_or_else(|| panic!("no {name} in FDE header {line:?}"))
                        .to_string()
                };
                let cie = field("cie=");
                let pc = field("pc=");
                let (start, end) = pc.split_once("..").expect("pc=A..B");
                let (signal, cie_rows) = cies
                    .get(&cie)
                    .cloned()
                    .unwrap_or_else(|| panic!("FDE {offset} names unknown CIE {cie}"));
                let start = u64::from_str_radix(start, 16).unwrap();
                fdes.push(OracleFde {
                    offset: offset.to_string(),
                    start,
                    end: u64::from_str_radix(end, 16).unwrap(),
                    signal,
                    plt: plt.iter().any(|p| p == offset),
                    layout: layouts.get(offset).copied().unwrap_or_default(),
                    aarch64: None,
                    rows: cie_rows
                        .into_iter()
                        .map(|r| OracleRow { loc: start, ..r })
                        .collect(),
                });
                entry = Entry::Fde;
            }
            continue;
        }
        // A register rule prints as `r10 (r10)`: the parenthesised name belongs to the value.
        let mut words: Vec<String> = Vec::new();
        for word in line.split_whitespace() {
            match words.last_mut() {
                Some(last) if word.starts_with('(') => {
                    last.push(' ');
                    last.push_str(word);
                }
                _ => words.push(word.to_string()),
            }
        }
        if words.first().is_some_and(|w| w == "LOC") {
            columns = words;
            // An FDE that prints its own table replaces what it inherited.
            if let Entry::Fde = entry {
                fdes.last_mut().unwrap().rows.clear();
            }
            continue;
        }
        if words.len() < 2 || columns.is_empty() {
            continue;
        }
        let Ok(loc) = u64::from_str_radix(&words[0], 16) else {
            continue;
        };
        let column = |name: &str| {
            columns
                .iter()
                .position(|c| c == name)
                .and_then(|i| words.get(i))
                .cloned()
        };
        let row = OracleRow {
            loc,
            cfa: words[1].clone(),
            rbp: column("rbp").or_else(|| column("x29")),
            ra: column("ra"),
        };
        let rows = match &entry {
            Entry::Cie(offset) => &mut cies.get_mut(offset).unwrap().1,
            Entry::Fde => &mut fdes.last_mut().unwrap().rows,
            Entry::None => continue,
        };
        // Two rows at one loc: the later is what holds there.
        if rows.last().is_some_and(|r| r.loc == loc) {
            rows.pop();
        }
        rows.push(row);
    }
    fdes
}

/// The rule the design gives a readelf row.
fn expected(fde: &OracleFde, row: &OracleRow) -> RowRule {
    if let Some(undefined_from) = fde.aarch64 {
        let undefined_ra = undefined_from.is_some_and(|from| row.loc >= from);
        return expected_aarch64(fde.signal, undefined_ra, row);
    }
    let bare = RowRule::bare;
    // A signal frame: the interrupted rsp loaded from rsp+N and rip right above it (the
    // sigcontext's order) is the one layout the walk reads; rbp is kept if saved too.
    if fde.signal {
        let l = fde.layout;
        return match (l.sp, l.ip) {
            (Some(sp), Some(ip)) if ip == sp + 8 => RowRule {
                cfa: CfaRule::Signal,
                cfa_offset: sp as i32,
                rbp: if l.bp.is_some() {
                    RbpRule::AtSp
                } else {
                    RbpRule::Unsupported
                },
                rbp_offset: l.bp.unwrap_or(0) as i16,
                ra: RaRule::CfaMinus8,
            },
            _ => bare(CfaRule::Unsupported),
        };
    }
    match row.ra.as_deref() {
        None | Some("u") => return bare(CfaRule::End),
        Some("c-8") => {}
        Some(_) => return bare(CfaRule::Unsupported),
    }
    let (cfa, cfa_offset) = if row.cfa == "exp" {
        if !fde.plt {
            return bare(CfaRule::Unsupported);
        }
        (CfaRule::Plt, 8)
    } else if let Some(n) = row.cfa.strip_prefix("rsp+") {
        (CfaRule::Rsp, n.parse().unwrap())
    } else if let Some(n) = row.cfa.strip_prefix("rbp+") {
        (CfaRule::Rbp, n.parse().unwrap())
    } else {
        return bare(CfaRule::Unsupported);
    };
    let (rbp, rbp_offset) = match row.rbp.as_deref() {
        None | Some("u") | Some("s") => (RbpRule::Same, 0),
        Some(rule) => match rule.strip_prefix('c').map(str::parse::<i16>) {
            Some(Ok(n)) => (RbpRule::AtCfa, n),
            _ => (RbpRule::Unsupported, 0),
        },
    };
    RowRule {
        cfa,
        cfa_offset,
        rbp,
        rbp_offset,
        ra: RaRule::CfaMinus8,
    }
}

/// The rule the design gives a readelf row of an aarch64 file: CFA from sp or x29; the return
/// address still in x30 ("u" or "s" without `DW_CFA_undefined`), above a saved x29 (the frame
/// record), or saved alone; x29 saved elsewhere than right below it cannot be followed.
fn expected_aarch64(signal: bool, undefined_ra: bool, row: &OracleRow) -> RowRule {
    let bare = RowRule::bare;
    if signal {
        return bare(CfaRule::Unsupported);
    }
    let saved = |rule: Option<&str>| -> Result<Option<i16>, ()> {
        match rule {
            None | Some("u") | Some("s") => Ok(None),
            Some(rule) => match rule.strip_prefix('c').map(str::parse::<i16>) {
                Some(Ok(n)) => Ok(Some(n)),
                _ => Err(()),
            },
        }
    };
    let ra = saved(row.ra.as_deref());
    if undefined_ra && ra == Ok(None) {
        return bare(CfaRule::End);
    }
    let (cfa, cfa_offset) = if let Some(n) = row.cfa.strip_prefix("sp+") {
        (CfaRule::Rsp, n.parse().unwrap())
    } else if let Some(n) = row.cfa.strip_prefix("x29+") {
        (CfaRule::Rbp, n.parse().unwrap())
    } else {
        return bare(CfaRule::Unsupported);
    };
    let fp = saved(row.rbp.as_deref());
    let (rbp, rbp_offset, ra) = match (ra, fp) {
        (Err(()), _) => return bare(CfaRule::Unsupported),
        (Ok(None), Ok(None)) => (RbpRule::Same, 0, RaRule::Lr),
        (Ok(None), Ok(Some(at))) => (RbpRule::AtCfa, at, RaRule::Lr),
        (Ok(None), Err(())) => (RbpRule::Unsupported, 0, RaRule::Lr),
        (Ok(Some(ra)), Ok(Some(at))) if ra - 8 == at => (RbpRule::AtCfa, at, RaRule::AboveFp),
        (Ok(Some(ra)), Ok(None)) => (RbpRule::Same, ra, RaRule::AtCfa),
        (Ok(Some(ra)), _) => (RbpRule::Unsupported, ra, RaRule::AtCfa),
    };
    RowRule {
        cfa,
        cfa_offset,
        rbp,
        rbp_offset,
        ra,
    }
}

/// What the comparison of one file found.
#[derive(Debug, Default)]
struct Comparison {
    oracle_rows: usize,
    expression_rows: usize,
    plt_rows: usize,
    signal_rows: usize,
    unsupported_rows: usize,
    checked_pcs: usize,
    mismatches: Vec<String>,
}

fn compare(file: &Path, table: &UnwindTable) -> Comparison {
    let fdes = oracle(file);
    let mut c = Comparison::default();
    let check = |c: &mut Comparison, pc: u64, want: RowRule, what: &str| {
        c.checked_pcs += 1;
        let got = table.lookup(pc);
        if got != want && c.mismatches.len() < 30 {
            c.mismatches
                .push(format!("{pc:#x} ({what}): want {want:?}, got {got:?}"));
        }
    };
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for fde in fdes.iter().filter(|f| f.start < f.end) {
        ranges.push((fde.start, fde.end));
        let rows: Vec<&OracleRow> = fde
            .rows
            .iter()
            .filter(|r| r.loc >= fde.start && r.loc < fde.end)
            .collect();
        assert!(
            !rows.is_empty(),
            "{}: FDE {} has no rows in readelf's table",
            file.display(),
            fde.offset
        );
        assert_eq!(
            rows[0].loc, fde.start,
            "FDE {} starts without a row",
            fde.offset
        );
        for (i, row) in rows.iter().enumerate() {
            let end = rows.get(i + 1).map_or(fde.end, |next| next.loc);
            let want = expected(fde, row);
            c.oracle_rows += 1;
            if row.cfa == "exp" {
                c.expression_rows += 1;
            }
            match want.cfa {
                CfaRule::Plt => c.plt_rows += 1,
                CfaRule::Signal => c.signal_rows += 1,
                CfaRule::Unsupported => c.unsupported_rows += 1,
                _ => {}
            }
            let what = format!("FDE {} row {row:?}", fde.offset);
            check(&mut c, row.loc, want, &what);
            check(&mut c, row.loc + (end - row.loc) / 2, want, &what);
            check(&mut c, end - 1, want, &what);
        }
    }
    // Where an FDE ends and no other starts or covers, there is no CFI: unknown.
    ranges.sort();
    for &(_, end) in &ranges {
        let covered = ranges.iter().any(|&(s, e)| s <= end && end < e);
        if !covered {
            check(&mut c, end, RowRule::bare(CfaRule::Unknown), "past an FDE");
        }
    }
    if let Some(&(first, _)) = ranges.first() {
        if first > 0 {
            check(
                &mut c,
                first - 1,
                RowRule::bare(CfaRule::Unknown),
                "before all FDEs",
            );
        }
    }
    c
}

/// Builds `file`'s table, compares it with readelf, prints the numbers and fails on any
/// difference.
fn assert_matches_readelf(file: &Path) -> (UnwindTable, Comparison) {
    let table = unwind::build(file).unwrap_or_else(|e| panic!("{e}"));
    let c = compare(file, &table);
    let s = table.stats();
    eprintln!(
        "{}: {:?}, {} CIEs; readelf {} rows ({} expressions: {} PLT, {} unsupported in \
         all); builder {} CFI rows -> {} table rows ({} bytes); {:?}; {:?}; {} pcs checked",
        file.display(),
        s.fdes,
        s.cies,
        c.oracle_rows,
        c.expression_rows,
        c.plt_rows,
        c.unsupported_rows,
        s.cfi_rows,
        s.rows,
        s.table_bytes(),
        s.rules,
        s.unsupported,
        c.checked_pcs
    );
    assert!(
        c.mismatches.is_empty(),
        "{}: the table differs from readelf at {} checked pcs (first ones):\n{}",
        file.display(),
        c.mismatches.len(),
        c.mismatches.join("\n")
    );
    assert!(
        c.oracle_rows > 0,
        "{}: readelf printed no rows",
        file.display()
    );
    // The expectations above assume each pc has one FDE.
    assert_eq!(s.overlapping_fdes, 0, "overlapping FDEs");
    // Every expression row is accounted for by the design: the PLT's or unsupported.
    assert_eq!(s.rules.plt, c.plt_rows, "PLT rows");
    assert_eq!(s.rules.unsupported, c.unsupported_rows, "unsupported rows");
    assert_table_shape(&table);
    (table, c)
}

/// Sorted, no two neighbours alike, ending in an unknown row.
fn assert_table_shape(table: &UnwindTable) {
    let rows = table.rows();
    assert!(rows.windows(2).all(|w| w[0].pc < w[1].pc), "rows sorted");
    assert!(
        rows.windows(2).all(|w| w[0].rule() != w[1].rule()),
        "rows merged"
    );
    assert_eq!(rows.last().unwrap().rule(), RowRule::bare(CfaRule::Unknown));
}

fn system_file(name: &str) -> Option<PathBuf> {
    common::require(
        &format!("unwind table of {name}"),
        common::system_library(name),
    )
}

/// Runs a build tool and fails with its stderr if it fails.
fn run(command: &mut Command) {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("run {command:?} (scripts/setup.sh installs it): {e}"));
    assert!(
        out.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `testdata/unwind/frames.c` built -O2 -fomit-frame-pointer, plus `flags`, as `out`.
fn frames_fixture(out: &str, flags: &[&str]) -> PathBuf {
    let flags: Vec<&str> = ["-fomit-frame-pointer"]
        .iter()
        .chain(flags)
        .copied()
        .collect();
    common::build_fixture("unwind/frames.c", out, &flags).unwrap_or_else(|e| panic!("{e}"))
}

/// A copy of `exe` with extension `extension`, without `sections`.
fn without_sections(exe: &Path, extension: &str, sections: &[&str]) -> PathBuf {
    let copy = exe.with_extension(extension);
    run(Command::new("objcopy")
        .args(sections.iter().map(|s| format!("--remove-section={s}")))
        .arg(exe)
        .arg(&copy));
    copy
}

#[test]
fn libc_matches_readelf() {
    let Some(libc) = system_file("libc.so.6") else {
        return;
    };
    let (table, c) = assert_matches_readelf(&libc);
    // Debian 12's glibc: the lazy PLT and the signal trampoline are its only expressions, and
    // the trampoline says the sigcontext's layout.
    assert_eq!(c.expression_rows, 2, "libc's expression rows");
    assert_eq!(table.stats().rules.plt, 1, "libc's PLT row");
    assert_eq!(c.signal_rows, 1, "__restore_rt");
    assert_eq!(table.stats().rules.signal, 1, "__restore_rt");
    assert_eq!(table.stats().unsupported.signal_frame, 0, "__restore_rt");
    assert!(matches!(table.identity(), unwind::FileIdentity::BuildId(id) if id.len() == 20));
}

#[test]
fn libstdcxx_matches_readelf() {
    if let Some(file) = system_file("libstdc++.so.6") {
        assert_matches_readelf(&file);
    }
}

#[test]
fn dynamic_loader_matches_readelf() {
    if let Some(file) = system_file("ld-linux-x86-64.so.2") {
        assert_matches_readelf(&file);
    }
}

#[test]
fn c_fixture_without_frame_pointers_matches_readelf() {
    let exe = frames_fixture("unwind_frames", &[]);
    let (table, _) = assert_matches_readelf(&exe);
    let s = table.stats();
    assert_eq!(s.fdes.debug_frame, 0);
    // alloca gives rbp-based rows, the PLT its expression, _start an undefined return address.
    assert!(s.rules.rbp > 0, "{s:?}");
    assert_eq!(s.rules.plt, 1, "{s:?}");
    assert!(s.rules.end > 0, "{s:?}");
}

#[test]
fn c_fixture_with_debug_frame_matches_readelf() {
    let exe = frames_fixture(
        "unwind_frames_debug_frame",
        &["-fno-asynchronous-unwind-tables", "-fno-unwind-tables"],
    );
    // Its own functions in .debug_frame; crt1.o's _start and the PLT in .eh_frame.
    let (table, _) = assert_matches_readelf(&exe);
    let fdes = table.stats().fdes;
    assert!(fdes.eh_frame > 0 && fdes.debug_frame > 0, "{fdes:?}");
    assert!(
        table.stats().rules.rbp > 0,
        "alloca's rows come from .debug_frame"
    );
    // Without .eh_frame, .debug_frame is all there is.
    let stripped = without_sections(&exe, "noeh", &[".eh_frame", ".eh_frame_hdr"]);
    let (table, _) = assert_matches_readelf(&stripped);
    assert_eq!(table.stats().fdes.eh_frame, 0);
    assert_eq!(table.stats().fdes.debug_frame, fdes.debug_frame);
}

#[test]
fn rust_binary_matches_readelf() {
    assert_matches_readelf(Path::new(common::memtrack()));
}

/// Debian's arm64 glibc as the cross toolchain ships it (libc6-arm64-cross).
const AARCH64_LIBC: &str = "/usr/aarch64-linux-gnu/lib/libc.so.6";

/// A file of the arm64 job's trixie userland (scripts/arm64.sh), whose glibc 2.41 is built
/// with pointer authentication: its CFI says `DW_CFA_AARCH64_negate_ra_state`.
const AARCH64_PAC_LIBC: &str = "target/arm64/root-trixie/root/usr/lib/aarch64-linux-gnu/libc.so.6";

#[test]
fn aarch64_libc_matches_readelf() {
    let libc = Path::new(AARCH64_LIBC);
    if !libc.exists() {
        eprintln!("aarch64_libc_matches_readelf: skipped, no {AARCH64_LIBC} (scripts/setup.sh)");
        return;
    }
    let (table, c) = assert_matches_readelf(libc);
    let s = table.stats();
    // No expressions, and every FDE evaluated; `_start`-like frames (clone's thread start)
    // end walks.
    assert_eq!(
        (c.expression_rows, s.unsupported.damaged_fde),
        (0, 0),
        "{s:?}"
    );
    assert!(s.rules.end > 0, "{s:?}");
    let pac = Path::new(env!("CARGO_MANIFEST_DIR")).join(AARCH64_PAC_LIBC);
    if pac.exists() {
        let (table, _) = assert_matches_readelf(&pac);
        assert_eq!(table.stats().unsupported.damaged_fde, 0);
    } else {
        eprintln!(
            "aarch64_libc_matches_readelf: no {AARCH64_PAC_LIBC}: scripts/arm64.sh fetches it"
        );
    }
}

/// testdata/unwind/frames.c cross-compiled -O2 for aarch64 with `flags` as `out`; `None`
/// (saying why) without the cross compiler.
fn aarch64_frames(out: &str, flags: &[&str]) -> Option<PathBuf> {
    let gcc = "aarch64-linux-gnu-gcc";
    if Command::new(gcc).arg("--version").output().is_err() {
        eprintln!("{out}: skipped, no {gcc} (scripts/setup.sh installs gcc-aarch64-linux-gnu)");
        return None;
    }
    let dir = common::scratch_dir().join("fixtures");
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join(out);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/unwind/frames.c");
    run(Command::new(gcc)
        .args(["-O2", "-o"])
        .arg(&exe)
        .args(flags)
        .arg(&src));
    Some(exe)
}

/// The instructions of `function` in `exe`, as (address, text) from objdump.
fn disassembly(exe: &Path, function: &str) -> Vec<(u64, String)> {
    let out = Command::new("aarch64-linux-gnu-objdump")
        .args(["-d", "--no-show-raw-insn"])
        .arg(format!("--disassemble={function}"))
        .arg(exe)
        .output()
        .expect("run aarch64-linux-gnu-objdump (binutils-aarch64-linux-gnu)");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (addr, text) = l.trim().split_once(":\t")?;
            Some((u64::from_str_radix(addr, 16).ok()?, text.replace('\t', " ")))
        })
        .collect()
}

/// The rows at an aarch64 function's prologue: the return address in x30 at its entry (and
/// after `paciasp`, which signs it in place), then above x29 in the frame record once `stp x29,
/// x30, [sp, #-N]!` ran, CFA = sp + N; and in x30 again after the epilogue's `ldp`.
#[test]
fn aarch64_prologues_with_and_without_pointer_authentication() {
    let entry = RowRule {
        ra: RaRule::Lr,
        ..RowRule::bare(CfaRule::Rsp)
    };
    for (out, flags) in [
        ("unwind_frames_aarch64", &[][..]),
        (
            "unwind_frames_aarch64_pac",
            &["-mbranch-protection=standard"][..],
        ),
    ] {
        let Some(exe) = aarch64_frames(out, flags) else {
            return;
        };
        let (table, _) = assert_matches_readelf(&exe);
        let code = disassembly(&exe, "saves_registers");
        let (start, first) = code.first().cloned().expect("saves_registers disassembled");
        assert_eq!(table.lookup(start), entry, "{out}: at entry");
        let pac = !flags.is_empty();
        assert_eq!(first.starts_with("paciasp"), pac, "{out}: {first}");
        let (at, stp) = code
            .iter()
            .find(|(_, t)| t.starts_with("stp x29, x30, [sp, #-"))
            .unwrap_or_else(|| panic!("{out}: no frame record in {code:?}"));
        let n: i32 = stp["stp x29, x30, [sp, #-".len()..]
            .trim_end_matches("]!")
            .parse()
            .unwrap();
        assert_eq!(table.lookup(*at), entry, "{out}: before {stp}");
        let record = RowRule {
            cfa: CfaRule::Rsp,
            cfa_offset: n,
            rbp: RbpRule::AtCfa,
            rbp_offset: -n as i16,
            ra: RaRule::AboveFp,
        };
        assert_eq!(table.lookup(at + 4), record, "{out}: after {stp}");
        let (ldp, _) = code
            .iter()
            .find(|(_, t)| t.starts_with("ldp x29, x30, [sp], #"))
            .unwrap_or_else(|| panic!("{out}: no epilogue in {code:?}"));
        assert_eq!(table.lookup(ldp + 4), entry, "{out}: after the epilogue");
        let leaf = disassembly(&exe, "leaf");
        assert!(
            leaf.iter().all(|&(pc, _)| table.lookup(pc) == entry),
            "{out}: a leaf keeps its return address in x30: {leaf:?}"
        );
    }
}

/// Issue 32: the recorder's rows array holds what a `cargo build` maps. The toolchain's
/// libLLVM and librustc_driver alone have 2.6 Mi rows (with cargo and rustup 3.3 Mi); at the
/// old 2 Mi the one found last got none, and every allocation entering through its
/// `operator new` had no frame at all (a bare `[unknown]` site, 20 % of the build's bytes).
#[test]
fn a_rust_toolchains_tables_fit_the_rows_array() {
    let test = "a_rust_toolchains_tables_fit_the_rows_array";
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let Ok(out) = Command::new(&rustc).args(["--print", "sysroot"]).output() else {
        eprintln!("{test}: skipped, cannot run {rustc}");
        return;
    };
    let sysroot = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    let mut files: Vec<PathBuf> = std::fs::read_dir(sysroot.join("lib"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            (name.starts_with("libLLVM") || name.starts_with("librustc_driver"))
                && !p.is_symlink()
                && std::fs::metadata(p).is_ok_and(|m| m.len() > 1 << 20)
        })
        .collect();
    if files.len() < 2 {
        eprintln!("{test}: skipped, no libLLVM and librustc_driver in {sysroot:?}: {files:?}");
        return;
    }
    files.extend(["cargo", "rustc"].map(|bin| sysroot.join("bin").join(bin)));
    let rows: usize = files
        .iter()
        .map(|f| unwind::build(f).unwrap().rows().len())
        .sum();
    let capacity = memtrack::record::stacks::ROW_CAPACITY as usize;
    assert!(
        rows > 2 << 20 && rows + (1 << 19) < capacity,
        "{test}: {rows} rows in {files:?}: more than 2 Mi, and room for 0.5 Mi more in {capacity}"
    );
}

#[test]
fn row_layout_matches_the_c_header() {
    let dir = common::scratch_dir().join("unwind-layout");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("layout.c");
    std::fs::write(
        &src,
        r#"#include <stdio.h>
#include <stddef.h>
#include "event.h"
int main(void) {
	printf("%zu %zu %zu %zu %zu %zu %zu\n", sizeof(struct unwind_row),
	       _Alignof(struct unwind_row), offsetof(struct unwind_row, pc),
	       offsetof(struct unwind_row, cfa_offset), offsetof(struct unwind_row, rbp_offset),
	       offsetof(struct unwind_row, cfa_rule), offsetof(struct unwind_row, rbp_rule));
	printf("%d %d %d %d %d %d %d %d %d\n", CFA_RSP, CFA_RBP, CFA_PLT, CFA_END, CFA_UNKNOWN,
	       CFA_UNSUPPORTED, RBP_SAME, RBP_AT_CFA, RBP_UNSUPPORTED);
	return 0;
}
"#,
    )
    .unwrap();
    let exe = dir.join("layout");
    let bpf = Path::new(env!("CARGO_MANIFEST_DIR")).join("bpf");
    run(Command::new("cc")
        .arg("-I")
        .arg(&bpf)
        .arg("-o")
        .arg(&exe)
        .arg(&src));
    let out = Command::new(&exe).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let rust = format!(
        "{} {} {} {} {} {} {}\n{} {} {} {} {} {} {} {} {}\n",
        std::mem::size_of::<UnwindRow>(),
        std::mem::align_of::<UnwindRow>(),
        std::mem::offset_of!(UnwindRow, pc),
        std::mem::offset_of!(UnwindRow, cfa_offset),
        std::mem::offset_of!(UnwindRow, rbp_offset),
        std::mem::offset_of!(UnwindRow, cfa_rule),
        std::mem::offset_of!(UnwindRow, rbp_rule),
        CfaRule::Rsp as u8,
        CfaRule::Rbp as u8,
        CfaRule::Plt as u8,
        CfaRule::End as u8,
        CfaRule::Unknown as u8,
        CfaRule::Unsupported as u8,
        RbpRule::Same as u8,
        RbpRule::AtCfa as u8,
        RbpRule::Unsupported as u8,
    );
    assert_eq!(
        text, rust,
        "struct unwind_row in bpf/event.h vs src/unwind/row.rs"
    );
}

fn build_error(data: &[u8]) -> String {
    match unwind::build_from_bytes(data) {
        Ok(t) => panic!("built a table from bad input: {:?}", t.stats()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn not_an_elf_file_is_an_error() {
    assert_eq!(build_error(b"#!/bin/sh\necho hello\n"), "not an ELF file");
    assert_eq!(build_error(b""), "not an ELF file");
}

#[test]
fn truncated_file_is_an_error() {
    let libc = std::fs::read(common::system_library("libc.so.6").unwrap_or_else(|e| panic!("{e}")))
        .unwrap();
    // Inside the ELF header, inside the program headers, and with the section headers (at
    // the end of the file) cut off.
    for len in [20, 100, libc.len() / 2, libc.len() - 1] {
        let e = build_error(&libc[..len]);
        assert!(e.starts_with("damaged ELF file: "), "{len} bytes: {e}");
    }
}

#[test]
fn damaged_eh_frame_is_an_error() {
    let path = common::system_library("libc.so.6").unwrap_or_else(|e| panic!("{e}"));
    let mut libc = std::fs::read(&path).unwrap();
    // Offset of .eh_frame in the file, from readelf's section table.
    let sections = readelf(&["-SW"], &path);
    let line = sections
        .lines()
        .find(|l| l.contains(" .eh_frame ") && !l.contains("_hdr"))
        .expect(".eh_frame in readelf -S");
    let words: Vec<&str> = line.split_whitespace().collect();
    let name = words.iter().position(|w| *w == ".eh_frame").unwrap();
    let offset = usize::from_str_radix(words[name + 3], 16).unwrap();
    // The first CIE's length grows past the end of the section.
    libc[offset..offset + 4].copy_from_slice(&0x7fff_0000u32.to_le_bytes());
    let e = build_error(&libc);
    assert!(e.starts_with("damaged .eh_frame: "), "{e}");
}

#[test]
fn file_without_cfi_is_an_error() {
    let exe = frames_fixture("unwind_frames", &[]);
    let bare = without_sections(
        &exe,
        "nocfi",
        &[".eh_frame", ".eh_frame_hdr", ".debug_frame"],
    );
    let e = unwind::build(&bare).unwrap_err().to_string();
    assert!(e.contains("no call frame information"), "{e}");
    assert!(
        e.starts_with(&bare.display().to_string()),
        "names the file: {e}"
    );
}

#[test]
fn missing_file_is_an_error() {
    let e = unwind::build(Path::new("/nonexistent/libfoo.so"))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("/nonexistent/libfoo.so: cannot read the file: "),
        "{e}"
    );
}

#[test]
fn relocatable_object_is_refused() {
    let dir = common::scratch_dir().join("unwind-object");
    std::fs::create_dir_all(&dir).unwrap();
    let obj = dir.join("frames.o");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/unwind/frames.c");
    run(Command::new("cc")
        .args(["-O2", "-c", "-o"])
        .arg(&obj)
        .arg(&src));
    let e = unwind::build(&obj).unwrap_err().to_string();
    assert!(e.contains("relocatable object"), "{e}");
}

/// `cargo test --release --test unwind -- --ignored --nocapture build_time`: ms per file.
#[test]
#[ignore]
fn build_time_per_file() {
    let mut files: Vec<PathBuf> = ["libc.so.6", "libstdc++.so.6", "ld-linux-x86-64.so.2"]
        .iter()
        .filter_map(|n| common::system_library(n).ok())
        .collect();
    files.extend(
        ["/usr/bin/gdb", common::memtrack()]
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.exists()),
    );
    for file in files {
        // Once to warm the page cache, then the best of 10.
        let table = unwind::build(&file).unwrap_or_else(|e| panic!("{e}"));
        let best = (0..10)
            .map(|_| {
                let start = Instant::now();
                unwind::build(&file).unwrap();
                start.elapsed()
            })
            .min()
            .unwrap();
        let s = table.stats();
        eprintln!(
            "{}: {:.2} ms; {} bytes, {} FDEs, {} CFI rows -> {} rows, {} KiB",
            file.display(),
            best.as_secs_f64() * 1e3,
            std::fs::metadata(&file).unwrap().len(),
            s.fdes.total(),
            s.cfi_rows,
            s.rows,
            s.table_bytes() / 1024
        );
    }
}
