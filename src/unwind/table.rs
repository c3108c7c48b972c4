//! From one section's FDE rows (`unwind::cfi`) to the table the BPF walk searches: sorted by
//! pc, neighbours with the same rule merged, a `CfaRule::Unknown` row wherever code has no
//! CFI, and overlapping FDEs resolved the same way every time.

use super::cfi::{Cfi, CfiRow, Fde};
use super::row::{CfaRule, RowRule, UnwindRow};

/// What assembling did besides producing rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Assembly {
    /// FDEs covering no address (zero length), skipped.
    pub empty_fdes: usize,
    /// FDEs starting inside an earlier one's range (see `assemble`).
    pub overlapping_fdes: usize,
    /// `CfaRule::Unknown` rows inserted between FDEs (the final terminator not included).
    pub gaps: usize,
}

/// Why a section's table cannot be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AboveFourGiB {
    /// The first address past 32 bits.
    pub pc: u64,
}

/// Sorts, clips, fills and merges `cfi`'s FDEs into rows.
///
/// FDEs are taken by start address (ties in section order). One that starts inside the range
/// already covered overlaps: the earlier-starting one keeps its range and the later one only
/// adds what lies past it. Real toolchains never overlap; the rule is only there to make a
/// broken file give the same table every time, and the count shows it happened.
///
/// After the last FDE, and between two FDEs that do not touch, a `CfaRule::Unknown` row, so a
/// search for a pc past a function's end never lands on that function's last rule.
pub(crate) fn assemble(cfi: &Cfi) -> Result<(Vec<UnwindRow>, Assembly), AboveFourGiB> {
    let mut assembly = Assembly::default();
    let mut order: Vec<&Fde> = Vec::with_capacity(cfi.fdes.len());
    for fde in &cfi.fdes {
        if fde.start >= fde.end {
            assembly.empty_fdes += 1;
            continue;
        }
        // The walk's pcs are 32 bits: even the terminator at `end` must fit.
        if fde.end > u64::from(u32::MAX) {
            return Err(AboveFourGiB {
                pc: fde.start.max(u64::from(u32::MAX) + 1),
            });
        }
        order.push(fde);
    }
    // Stable: FDEs with the same start stay in section order, so the first one wins.
    order.sort_by_key(|fde| fde.start);

    let mut rows = Rows::with_capacity(cfi.rows.len() + 1);
    let mut covered: Option<u64> = None;
    for fde in order {
        let mut from = fde.start;
        match covered {
            Some(end) if fde.start < end => {
                assembly.overlapping_fdes += 1;
                if fde.end <= end {
                    continue;
                }
                from = end;
            }
            Some(end) if fde.start > end => {
                rows.push(end, RowRule::bare(CfaRule::Unknown));
                assembly.gaps += 1;
            }
            _ => {}
        }
        let fde_rows = &cfi.rows[fde.rows.clone()];
        for (i, row) in fde_rows.iter().enumerate() {
            let row_end = fde_rows.get(i + 1).map_or(fde.end, |next| next.start);
            let start = row.start.max(from);
            if start < row_end.min(fde.end) {
                rows.push(start, row.rule);
            }
        }
        covered = Some(fde.end);
    }
    if let Some(end) = covered {
        rows.push(end, RowRule::bare(CfaRule::Unknown));
    }
    Ok((rows.0, assembly))
}

/// Gives the ELF entry point's code an outermost-frame rule when no FDE covers it: `CfaRule::End`
/// from `entry` up to the next FDE (or `code_end`, the end of its executable segment). Returns
/// whether it did.
///
/// The code at `e_entry` is where the kernel starts the process, or the loader for an
/// executable: nothing called it, so a walk that reaches it has reached the outermost frame.
/// Most entry points say so themselves (glibc's `_start` in crt1.o has `DW_CFA_undefined rip`),
/// but Debian's glibc 2.36 ld.so has no FDE at all for its `_start` and `_dl_start_user`
/// (RTLD_START, inline assembly without CFI), which every library constructor is called from
/// through `_dl_init`: without this, those walks ended at a gap and counted as unknown although
/// they were complete. Only the gap the entry opens is covered, never code before it.
pub(crate) fn outermost_entry(cfi: &mut Cfi, entry: u64, code_end: u64) -> bool {
    if entry >= code_end
        || cfi
            .fdes
            .iter()
            .any(|fde| fde.start <= entry && entry < fde.end)
    {
        return false;
    }
    let end = cfi
        .fdes
        .iter()
        .map(|fde| fde.start)
        .filter(|&start| start > entry)
        .fold(code_end, u64::min);
    let row = cfi.rows.len();
    cfi.rows.push(CfiRow {
        start: entry,
        rule: RowRule::bare(CfaRule::End),
    });
    cfi.fdes.push(Fde {
        start: entry,
        end,
        rows: row..row + 1,
    });
    true
}

/// Rows being built in increasing pc order, merging as they come.
struct Rows(Vec<UnwindRow>);

impl Rows {
    fn with_capacity(n: usize) -> Self {
        Rows(Vec::with_capacity(n))
    }

    /// Appends `rule` from `pc` on; `pc` is at or past the last row's (callers guarantee it
    /// fits 32 bits). Same rule as the last row: nothing to add. Same pc: the later rule wins,
    /// the earlier covered nothing.
    fn push(&mut self, pc: u64, rule: RowRule) {
        let pc = pc as u32;
        if let Some(last) = self.0.last_mut() {
            if last.pc == pc {
                *last = UnwindRow::new(pc, rule);
                // The replaced row may now repeat the one before it.
                let n = self.0.len();
                if n >= 2 && self.0[n - 2].rule() == rule {
                    self.0.pop();
                }
                return;
            }
            if last.rule() == rule {
                return;
            }
        }
        self.0.push(UnwindRow::new(pc, rule));
    }
}

#[cfg(test)]
mod tests {
    use super::super::synthetic::rsp;
    use super::*;

    /// One synthetic FDE: start, end, and (row start, rule) per row.
    type FdeSpec<'a> = (u64, u64, &'a [(u64, RowRule)]);

    /// A `Cfi` from its FDEs, in section order.
    fn cfi(fdes: &[FdeSpec]) -> Cfi {
        let mut cfi = Cfi::default();
        for &(start, end, rows) in fdes {
            let first = cfi.rows.len();
            cfi.rows
                .extend(rows.iter().map(|&(start, rule)| CfiRow { start, rule }));
            cfi.fdes.push(Fde {
                start,
                end,
                rows: first..cfi.rows.len(),
            });
        }
        cfi
    }

    fn pairs(rows: &[UnwindRow]) -> Vec<(u32, RowRule)> {
        rows.iter().map(|r| (r.pc, r.rule())).collect()
    }

    const UNKNOWN: RowRule = RowRule::bare(CfaRule::Unknown);
    const END: RowRule = RowRule::bare(CfaRule::End);

    /// ld.so's layout (Debian's glibc 2.36): `_start` and `_dl_start_user` between two FDEs,
    /// without one of their own, the entry in that gap.
    #[test]
    fn entry_without_fde_is_the_outermost_frame_up_to_the_next_fde() {
        let mut c = cfi(&[
            (0x10, 0x18, &[(0x10, rsp(8))]),
            (0x40, 0x48, &[(0x40, rsp(8))]),
        ]);
        assert!(outermost_entry(&mut c, 0x20, 0x100));
        let (rows, _) = assemble(&c).unwrap();
        assert_eq!(
            pairs(&rows),
            vec![
                (0x10, rsp(8)),
                (0x18, UNKNOWN),
                (0x20, END),
                (0x40, rsp(8)),
                (0x48, UNKNOWN)
            ]
        );
    }

    #[test]
    fn entry_past_the_last_fde_ends_with_its_segment() {
        let mut c = cfi(&[(0x10, 0x18, &[(0x10, rsp(8))])]);
        assert!(outermost_entry(&mut c, 0x18, 0x30));
        let (rows, _) = assemble(&c).unwrap();
        assert_eq!(
            pairs(&rows),
            vec![(0x10, rsp(8)), (0x18, END), (0x30, UNKNOWN)]
        );
    }

    #[test]
    fn entry_with_its_own_fde_or_outside_the_code_changes_nothing() {
        let mut c = cfi(&[(0x10, 0x18, &[(0x10, rsp(8))])]);
        assert!(!outermost_entry(&mut c, 0x14, 0x100));
        assert!(!outermost_entry(&mut c, 0x200, 0x100));
        assert_eq!(c.fdes.len(), 1);
    }

    #[test]
    fn touching_fdes_merge_equal_rules_and_end_with_unknown() {
        let (rows, asm) = assemble(&cfi(&[
            (
                0x20,
                0x30,
                &[(0x20, rsp(8)), (0x21, rsp(16)), (0x2f, rsp(8))],
            ),
            (0x10, 0x20, &[(0x10, rsp(8)), (0x18, rsp(8))]),
            (0x30, 0x40, &[(0x30, rsp(8))]),
        ]))
        .unwrap();
        assert_eq!(
            pairs(&rows),
            vec![
                (0x10, rsp(8)),
                (0x21, rsp(16)),
                (0x2f, rsp(8)),
                (0x40, UNKNOWN)
            ]
        );
        assert_eq!(asm, Assembly::default());
    }

    #[test]
    fn gap_between_fdes_is_unknown() {
        let (rows, asm) = assemble(&cfi(&[
            (0x10, 0x18, &[(0x10, rsp(8))]),
            (0x20, 0x28, &[(0x20, rsp(8))]),
        ]))
        .unwrap();
        assert_eq!(
            pairs(&rows),
            vec![
                (0x10, rsp(8)),
                (0x18, UNKNOWN),
                (0x20, rsp(8)),
                (0x28, UNKNOWN)
            ]
        );
        assert_eq!(asm.gaps, 1);
    }

    #[test]
    fn overlapping_fde_only_adds_what_lies_past_the_first() {
        let (rows, asm) = assemble(&cfi(&[
            (0x10, 0x20, &[(0x10, rsp(8)), (0x14, rsp(16))]),
            // Starts inside the first: only 0x20..0x28 of it is used, at its rule there.
            (0x18, 0x28, &[(0x18, rsp(32)), (0x1c, rsp(24))]),
            // Entirely inside: dropped.
            (0x11, 0x12, &[(0x11, rsp(64))]),
        ]))
        .unwrap();
        assert_eq!(
            pairs(&rows),
            vec![
                (0x10, rsp(8)),
                (0x14, rsp(16)),
                (0x20, rsp(24)),
                (0x28, UNKNOWN)
            ]
        );
        assert_eq!(asm.overlapping_fdes, 2);
    }

    #[test]
    fn same_start_keeps_the_first_in_section_order() {
        let (rows, asm) = assemble(&cfi(&[
            (0x10, 0x20, &[(0x10, rsp(16))]),
            (0x10, 0x20, &[(0x10, rsp(8))]),
        ]))
        .unwrap();
        assert_eq!(pairs(&rows), vec![(0x10, rsp(16)), (0x20, UNKNOWN)]);
        assert_eq!(asm.overlapping_fdes, 1);
    }

    #[test]
    fn empty_fdes_are_skipped_and_counted() {
        let (rows, asm) =
            assemble(&cfi(&[(0x10, 0x10, &[]), (0x10, 0x18, &[(0x10, rsp(8))])])).unwrap();
        assert_eq!(pairs(&rows), vec![(0x10, rsp(8)), (0x18, UNKNOWN)]);
        assert_eq!(asm.empty_fdes, 1);
        assert_eq!(asm.overlapping_fdes, 0);
    }

    #[test]
    fn no_fdes_no_rows() {
        let (rows, _) = assemble(&Cfi::default()).unwrap();
        assert!(rows.is_empty());
    }

    #[test]
    fn code_above_four_gib_is_refused() {
        let max = u64::from(u32::MAX);
        let err = assemble(&cfi(&[(max - 0x10, max + 0x10, &[(max - 0x10, rsp(8))])]));
        assert_eq!(err.unwrap_err(), AboveFourGiB { pc: max + 1 });
        // Ending exactly at 4 GiB - 1 still fits, terminator included.
        assert!(assemble(&cfi(&[(max - 0x10, max, &[(max - 0x10, rsp(8))])])).is_ok());
    }
}
