//! The gimli walk over one call-frame-information section (`.eh_frame` or `.debug_frame`):
//! every FDE's rows, each reduced to the few rules the BPF walk can apply (`RowRule`). The
//! section comes from `unwind::elf`; the rows go to `unwind::table`, which sorts and merges
//! them into the file's table. x86-64 and aarch64 files each have their own reduction (the
//! file's `Machine`), into the one row layout of `unwind::row`.

use std::collections::HashMap;
use std::ops::Range;

use gimli::{
    AArch64, BaseAddresses, CieOrFde, CommonInformationEntry, EndianSlice, LittleEndian, Reader,
    RegisterRule, UnwindContext, UnwindOffset, UnwindSection, UnwindTableRow, X86_64,
};

use super::row::{CfaRule, RaRule, RbpRule, RowRule};
use super::{RuleCounts, UnsupportedCounts};

/// The section bytes as gimli reads them: borrowed from the mapped file, never copied.
pub(crate) type Slice<'a> = EndianSlice<'a, LittleEndian>;

/// The CFA expression of binutils' lazy `.plt` FDE (`ld`'s `elf_x86_64_eh_frame_lazy_plt`):
/// `DW_OP_breg7 (rsp) 8; DW_OP_breg16 (rip) 0; DW_OP_lit15; DW_OP_and; DW_OP_lit11; DW_OP_ge;
/// DW_OP_lit3; DW_OP_shl; DW_OP_plus`, that is rsp + 8 + ((rip & 15) >= 11 ? 8 : 0): each
/// 16-byte PLT entry is `jmp *GOT; push $n; jmp PLT0`, so from byte 11 on (after the push) one
/// more word is on the stack. It is the only expression -O2 code on this platform needs (libc,
/// libstdc++, ld.so and executables that GNU ld linked for lazy binding have it; `.plt.got`
/// and `.plt.sec` entries have plain rules); `CfaRule::Plt` lets the BPF side compute
/// it without a DWARF interpreter. Any other expression is `CfaRule::Unsupported`.
pub const PLT_CFA_EXPRESSION: [u8; 11] = [
    0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22,
];

/// The machine a file's code is for, which says what its CFI's register numbers mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Machine {
    /// x86-64: rsp, rbp, the return address at CFA-8.
    X86_64,
    /// aarch64: sp, x29 and x30 (the link register), return addresses signed with pointer
    /// authentication where the CFI says `DW_CFA_AARCH64_negate_ra_state` (which the walk
    /// strips from every return address, so the rows need no rule for it).
    Aarch64,
}

/// One FDE: the code range it covers and its rows in `Cfi::rows`.
#[derive(Clone, Debug)]
pub(crate) struct Fde {
    /// First address covered.
    pub start: u64,
    /// One past the last address covered.
    pub end: u64,
    /// Its rows, in increasing address order, each up to the next (the last up to `end`).
    pub rows: Range<usize>,
}

/// One row as the CFI says it: from `start` on, `rule`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CfiRow {
    /// First address the row covers.
    pub start: u64,
    /// What the walk does there.
    pub rule: RowRule,
}

/// Everything one section says, reduced to `RowRule`s, in section order.
#[derive(Debug, Default)]
pub(crate) struct Cfi {
    /// Every FDE, in section order.
    pub fdes: Vec<Fde>,
    /// The rows of all FDEs, each FDE's a contiguous run.
    pub rows: Vec<CfiRow>,
    /// CIEs seen.
    pub cies: usize,
    /// Rows per CFA rule.
    pub rules: RuleCounts,
    /// Why rows became `CfaRule::Unsupported` or `RbpRule::Unsupported`.
    pub unsupported: UnsupportedCounts,
}

impl Cfi {
    /// Adds `other`'s FDEs after this one's: an FDE of `other` that overlaps one of this
    /// section's loses to it (`unwind::table::assemble`).
    pub fn append(&mut self, other: Cfi) {
        let base = self.rows.len();
        self.rows.extend(other.rows);
        self.fdes.extend(other.fdes.into_iter().map(|fde| Fde {
            rows: fde.rows.start + base..fde.rows.end + base,
            ..fde
        }));
        self.cies += other.cies;
        self.rules.merge(&other.rules);
        self.unsupported.merge(&other.unsupported);
    }
}

/// Walks every entry of `section`. An entry that cannot be read (its header or CIE is
/// damaged) fails the whole section: where the next entry starts is then unknown. An FDE whose
/// instructions cannot be evaluated keeps its range, as one `Unsupported` row, so the walk
/// stops there instead of the file losing all its rows.
pub(crate) fn walk<'a, S>(
    section: &S,
    bases: &BaseAddresses,
    machine: Machine,
) -> gimli::Result<Cfi>
where
    S: UnwindSection<Slice<'a>>,
{
    let mut cfi = Cfi::default();
    // CIEs precede their FDEs in every toolchain's output; parse each once, not once per FDE.
    let mut cies: HashMap<usize, CommonInformationEntry<Slice<'a>>> = HashMap::new();
    let mut ctx = UnwindContext::new();
    let mut entries = section.entries(bases);
    while let Some(entry) = entries.next()? {
        let partial = match entry {
            CieOrFde::Cie(cie) => {
                cfi.cies += 1;
                cies.insert(cie.offset(), cie);
                continue;
            }
            CieOrFde::Fde(partial) => partial,
        };
        let fde = partial.parse(|section, bases, offset| {
            match cies.get(&UnwindOffset::into(offset)) {
                Some(cie) => Ok(cie.clone()),
                None => section.cie_from_offset(bases, offset),
            }
        })?;
        let first = cfi.rows.len();
        let start = fde.initial_address();
        let end = fde.end_address();
        let signal = fde.is_signal_trampoline();
        let evaluated = (|| -> gimli::Result<()> {
            let mut table = fde.rows(section, bases, &mut ctx)?;
            while let Some(row) = table.next_row()? {
                if row.start_address() >= row.end_address() {
                    continue;
                }
                let rule = match machine {
                    Machine::X86_64 => classify(row, signal, section, &mut cfi.unsupported),
                    Machine::Aarch64 => classify_aarch64(row, signal, &mut cfi.unsupported),
                };
                cfi.rows.push(CfiRow {
                    start: row.start_address(),
                    rule,
                });
            }
            Ok(())
        })();
        if evaluated.is_err() {
            cfi.rows.truncate(first);
            cfi.unsupported.damaged_fde += 1;
            cfi.rows.push(CfiRow {
                start,
                rule: RowRule::bare(CfaRule::Unsupported),
            });
        }
        for row in &cfi.rows[first..] {
            cfi.rules.add(row.rule.cfa);
        }
        cfi.fdes.push(Fde {
            start,
            end,
            rows: first..cfi.rows.len(),
        });
    }
    Ok(cfi)
}

/// Reduces one gimli row to what the BPF walk can apply, counting why when it cannot.
fn classify<'a, S>(
    row: &UnwindTableRow<usize>,
    signal: bool,
    section: &S,
    why: &mut UnsupportedCounts,
) -> RowRule
where
    S: UnwindSection<Slice<'a>>,
{
    // A signal frame's caller is the interrupted code, whose registers are in the ucontext on
    // the stack: the walk reads them from there when the CFI says the layout it knows.
    if signal {
        return signal_rule(row, section).unwrap_or_else(|| {
            why.signal_frame += 1;
            RowRule::bare(CfaRule::Unsupported)
        });
    }
    // The return address must be at CFA-8, where `call` put it. Undefined means this is the
    // outermost frame (`_start` says `DW_CFA_undefined rip`); no rule at all says the same.
    match row.register(X86_64::RA) {
        None | Some(RegisterRule::Undefined) => return RowRule::bare(CfaRule::End),
        Some(RegisterRule::Offset(-8)) => {}
        Some(_) => {
            why.return_address += 1;
            return RowRule::bare(CfaRule::Unsupported);
        }
    }
    let (cfa, cfa_offset) = match row.cfa() {
        gimli::CfaRule::RegisterAndOffset { register, offset } => {
            match register_cfa(*register, *offset, [X86_64::RSP, X86_64::RBP], why) {
                Some(cfa) => cfa,
                None => return RowRule::bare(CfaRule::Unsupported),
            }
        }
        gimli::CfaRule::Expression(expression) => {
            let is_plt = expression
                .get(section)
                .is_ok_and(|e| e.0.to_slice().is_ok_and(|b| *b == PLT_CFA_EXPRESSION));
            if !is_plt {
                why.cfa_expression += 1;
                return RowRule::bare(CfaRule::Unsupported);
            }
            (CfaRule::Plt, 8)
        }
    };
    let (rbp, rbp_offset) = match row.register(X86_64::RBP) {
        None | Some(RegisterRule::Undefined) | Some(RegisterRule::SameValue) => (RbpRule::Same, 0),
        Some(RegisterRule::Offset(offset)) => match i16::try_from(offset) {
            Ok(offset) => (RbpRule::AtCfa, offset),
            Err(_) => {
                why.rbp += 1;
                (RbpRule::Unsupported, 0)
            }
        },
        Some(_) => {
            why.rbp += 1;
            (RbpRule::Unsupported, 0)
        }
    };
    RowRule {
        cfa,
        cfa_offset,
        rbp,
        rbp_offset,
        ra: RaRule::CfaMinus8,
    }
}

/// The CFA rule of "CFA = `register` + `offset`", where `[sp, fp]` are the machine's stack and
/// frame pointers; `None` (counted) for another register or an offset beyond 32 bits.
fn register_cfa(
    register: gimli::Register,
    offset: i64,
    [sp, fp]: [gimli::Register; 2],
    why: &mut UnsupportedCounts,
) -> Option<(CfaRule, i32)> {
    let Ok(offset) = i32::try_from(offset) else {
        why.offset_range += 1;
        return None;
    };
    if register == sp {
        Some((CfaRule::Rsp, offset))
    } else if register == fp {
        Some((CfaRule::Rbp, offset))
    } else {
        // e.g. a stack-realigning function that keeps the old rsp in r10 for a few
        // instructions; the uprobe's registers would have it, a caller frame's not.
        why.cfa_register += 1;
        None
    }
}

/// Reduces one gimli row of an aarch64 file. The CFA is sp or x29 plus an offset; the return
/// address (x30) is still in x30 until the prologue saves it (no rule, or "same value"), then at
/// CFA + N, usually right above x29 in the frame record `stp x29, x30` saves (N is the frame's
/// size there, not a fixed 8). Signal frames are unsupported: aarch64's only trampoline is the
/// vDSO's `__kernel_rt_sigreturn`, in no file the walk has a table of.
fn classify_aarch64(
    row: &UnwindTableRow<usize>,
    signal: bool,
    why: &mut UnsupportedCounts,
) -> RowRule {
    if signal {
        why.signal_frame += 1;
        return RowRule::bare(CfaRule::Unsupported);
    }
    let (cfa, cfa_offset) = match row.cfa() {
        gimli::CfaRule::RegisterAndOffset { register, offset } => {
            match register_cfa(*register, *offset, [AArch64::SP, AArch64::X29], why) {
                Some(cfa) => cfa,
                None => return RowRule::bare(CfaRule::Unsupported),
            }
        }
        gimli::CfaRule::Expression(_) => {
            why.cfa_expression += 1;
            return RowRule::bare(CfaRule::Unsupported);
        }
    };
    // x29 saved at CFA + this offset, `Err` when the walk cannot follow it.
    let fp = match row.register(AArch64::X29) {
        None | Some(RegisterRule::Undefined) | Some(RegisterRule::SameValue) => Ok(None),
        Some(RegisterRule::Offset(offset)) => i16::try_from(offset).map(Some).map_err(|_| ()),
        Some(_) => Err(()),
    };
    let rule = |rbp, rbp_offset, ra| RowRule {
        cfa,
        cfa_offset,
        rbp,
        rbp_offset,
        ra,
    };
    let rule = match row.register(AArch64::X30) {
        // `_start` and a thread's start (glibc's clone) say `.cfi_undefined x30`.
        Some(RegisterRule::Undefined) => return RowRule::bare(CfaRule::End),
        None | Some(RegisterRule::SameValue) => match fp {
            Ok(None) => rule(RbpRule::Same, 0, RaRule::Lr),
            Ok(Some(at)) => rule(RbpRule::AtCfa, at, RaRule::Lr),
            Err(()) => rule(RbpRule::Unsupported, 0, RaRule::Lr),
        },
        Some(RegisterRule::Offset(ra)) => {
            let Ok(ra) = i16::try_from(ra) else {
                why.return_address += 1;
                return RowRule::bare(CfaRule::Unsupported);
            };
            match fp {
                Ok(Some(at)) if ra.checked_sub(8) == Some(at) => {
                    rule(RbpRule::AtCfa, at, RaRule::AboveFp)
                }
                Ok(None) => rule(RbpRule::Same, ra, RaRule::AtCfa),
                // x29 saved elsewhere than below the return address: one offset cannot say both.
                Ok(Some(_)) | Err(()) => rule(RbpRule::Unsupported, ra, RaRule::AtCfa),
            }
        }
        Some(_) => {
            why.return_address += 1;
            return RowRule::bare(CfaRule::Unsupported);
        }
    };
    if rule.rbp == RbpRule::Unsupported {
        why.rbp += 1;
    }
    rule
}

/// The rule of a signal trampoline's row whose CFI says what glibc's `__restore_rt` says on
/// x86-64 (`rsp` there points at the ucontext the kernel pushed): the CFA is the interrupted
/// rsp, loaded from rsp + N (`DW_OP_breg7 N; DW_OP_deref`); the return address is the
/// interrupted rip, saved at rsp + N + 8 (`DW_OP_breg7 N+8`, the sigcontext's order); rbp is
/// saved at rsp + K. `None` for any other CFI: the walk must not read a frame it does not know.
fn signal_rule<'a, S>(row: &UnwindTableRow<usize>, section: &S) -> Option<RowRule>
where
    S: UnwindSection<Slice<'a>>,
{
    // The operations of an expression that is `DW_OP_breg7 N`, then `DW_OP_deref` when asked.
    let rsp_plus = |expression: &gimli::UnwindExpression<usize>, deref: bool| -> Option<i64> {
        // Operations read the same in every CFI version and offset size at 8-byte addresses.
        let encoding = gimli::Encoding {
            format: gimli::Format::Dwarf32,
            version: 4,
            address_size: 8,
        };
        let expression = expression.get(section).ok()?;
        let mut operations = expression.operations(encoding);
        let Ok(Some(gimli::Operation::RegisterOffset {
            register, offset, ..
        })) = operations.next()
        else {
            return None;
        };
        if register != X86_64::RSP {
            return None;
        }
        if deref && !matches!(operations.next(), Ok(Some(gimli::Operation::Deref { .. }))) {
            return None;
        }
        matches!(operations.next(), Ok(None)).then_some(offset)
    };
    let gimli::CfaRule::Expression(cfa) = row.cfa() else {
        return None;
    };
    let sp_at = rsp_plus(cfa, true)?;
    let Some(RegisterRule::Expression(ra)) = row.register(X86_64::RA) else {
        return None;
    };
    if rsp_plus(&ra, false)? != sp_at.checked_add(8)? {
        return None;
    }
    let (rbp, rbp_offset) = match row.register(X86_64::RBP) {
        Some(RegisterRule::Expression(e)) => match rsp_plus(&e, false).map(i16::try_from) {
            Some(Ok(offset)) => (RbpRule::AtSp, offset),
            _ => (RbpRule::Unsupported, 0),
        },
        _ => (RbpRule::Unsupported, 0),
    };
    Some(RowRule {
        cfa: CfaRule::Signal,
        cfa_offset: i32::try_from(sp_at).ok()?,
        rbp,
        rbp_offset,
        ra: RaRule::CfaMinus8,
    })
}

#[cfg(test)]
mod tests {
    use super::super::synthetic::{eh_frame, eh_frame_aarch64, rsp, Fde};
    use super::*;
    use gimli::write::{CallFrameInstruction as I, Expression};
    use gimli::EhFrame;

    /// The rules of one FDE at 0x1000 with `instructions`, and why any is unsupported.
    fn rules(signal: bool, instructions: &[(u32, I)]) -> (Vec<RowRule>, UnsupportedCounts) {
        let data = eh_frame(signal, &[Fde::new(0x1000, 0x40, instructions)]);
        let cfi = walk(
            &EhFrame::new(&data, LittleEndian),
            &BaseAddresses::default(),
            Machine::X86_64,
        )
        .unwrap();
        assert_eq!(cfi.fdes.len(), 1);
        (cfi.rows.iter().map(|r| r.rule).collect(), cfi.unsupported)
    }

    /// The rule of the row from offset 4 on, after `instruction` there.
    fn rule_after(instruction: I) -> (RowRule, UnsupportedCounts) {
        let (rules, why) = rules(false, &[(4, instruction)]);
        assert_eq!(rules.len(), 2, "{rules:?}");
        (rules[1], why)
    }

    const UNSUPPORTED: RowRule = RowRule::bare(CfaRule::Unsupported);

    #[test]
    fn plt_expression_is_recognised() {
        let (rule, why) = rule_after(I::CfaExpression(Expression::raw(
            PLT_CFA_EXPRESSION.to_vec(),
        )));
        assert_eq!(rule.cfa, CfaRule::Plt);
        assert_eq!((rule.cfa_offset, rule.rbp), (8, RbpRule::Same));
        assert_eq!(why, UnsupportedCounts::default());
    }

    #[test]
    fn other_expressions_are_unsupported() {
        // The PLT's with another threshold, a prefix of it, and glibc's signal-frame CFA.
        let mut lit10 = PLT_CFA_EXPRESSION.to_vec();
        lit10[6] = 0x3a;
        let prefix = PLT_CFA_EXPRESSION[..10].to_vec();
        let deref = vec![0x77, 0xa0, 0x01, 0x06];
        for bytes in [lit10, prefix, deref] {
            let (rule, why) = rule_after(I::CfaExpression(Expression::raw(bytes.clone())));
            assert_eq!(rule, UNSUPPORTED, "{bytes:x?}");
            assert_eq!(why.cfa_expression, 1);
        }
    }

    #[test]
    fn signal_trampolines_are_unsupported() {
        let (rules, why) = rules(true, &[(4, I::CfaOffset(16))]);
        assert_eq!(rules, vec![UNSUPPORTED, UNSUPPORTED]);
        assert_eq!(why.signal_frame, 2);
    }

    /// glibc's `__restore_rt` CFI on x86-64, with the return address at `ra` from rsp.
    fn restore_rt(ra: i64) -> Vec<(u32, I)> {
        let rsp_plus = |offset, deref| {
            let mut e = Expression::new();
            e.op_breg(X86_64::RSP, offset);
            if deref {
                e.op_deref();
            }
            e
        };
        vec![
            (0, I::CfaExpression(rsp_plus(160, true))),
            (0, I::Expression(X86_64::RBP, rsp_plus(120, false))),
            (0, I::Expression(X86_64::RA, rsp_plus(ra, false))),
        ]
    }

    #[test]
    fn glibc_signal_trampoline_reads_the_sigcontext() {
        let (rules, why) = rules(true, &restore_rt(168));
        let signal = RowRule {
            cfa: CfaRule::Signal,
            cfa_offset: 160,
            rbp: RbpRule::AtSp,
            rbp_offset: 120,
            ra: RaRule::CfaMinus8,
        };
        assert_eq!(rules, vec![signal]);
        assert_eq!(why, UnsupportedCounts::default());
        // The same expressions outside a signal frame are no rule the walk knows.
        let data = eh_frame(false, &[Fde::new(0x1000, 0x40, &restore_rt(168))]);
        let cfi = walk(
            &EhFrame::new(&data, LittleEndian),
            &BaseAddresses::default(),
            Machine::X86_64,
        )
        .unwrap();
        assert_eq!(cfi.rows[0].rule, UNSUPPORTED);
    }

    #[test]
    fn a_signal_frame_of_another_layout_is_unsupported() {
        // The return address not right above the saved rsp.
        let (rules, why) = rules(true, &restore_rt(176));
        assert_eq!(rules, vec![UNSUPPORTED]);
        assert_eq!(why.signal_frame, 1);
    }

    #[test]
    fn return_address_must_be_at_cfa_minus_8() {
        for instruction in [
            I::Offset(X86_64::RA, -16),
            I::Register(X86_64::RA, X86_64::RDX),
            I::SameValue(X86_64::RA),
        ] {
            let (rule, why) = rule_after(instruction.clone());
            assert_eq!(rule, UNSUPPORTED, "{instruction:?}");
            assert_eq!(why.return_address, 1);
        }
    }

    #[test]
    fn undefined_return_address_is_the_end() {
        let (rule, why) = rule_after(I::Undefined(X86_64::RA));
        assert_eq!(rule, RowRule::bare(CfaRule::End));
        assert_eq!(why, UnsupportedCounts::default());
    }

    #[test]
    fn cfa_in_rbp_or_rsp_only() {
        let (rule, _) = rule_after(I::Cfa(X86_64::RBP, 16));
        assert_eq!(rule.cfa, CfaRule::Rbp);
        assert_eq!(rule.cfa_offset, 16);
        let (rule, why) = rule_after(I::CfaRegister(gimli::Register(10)));
        assert_eq!(rule, UNSUPPORTED);
        assert_eq!(why.cfa_register, 1);
    }

    #[test]
    fn rbp_rules() {
        let (rule, _) = rule_after(I::Offset(X86_64::RBP, -16));
        assert_eq!(
            rule,
            RowRule {
                rbp: RbpRule::AtCfa,
                rbp_offset: -16,
                ..rsp(8)
            }
        );
        let (rule, _) = rule_after(I::SameValue(X86_64::RBP));
        assert_eq!(rule, rsp(8));
        let (rule, _) = rule_after(I::Undefined(X86_64::RBP));
        assert_eq!(rule, rsp(8));
        // In another register, or beyond 16 bits: the CFA rule still holds.
        for instruction in [
            I::Register(X86_64::RBP, X86_64::RDX),
            I::Offset(X86_64::RBP, -40_000),
        ] {
            let (rule, why) = rule_after(instruction.clone());
            assert_eq!(
                rule,
                RowRule {
                    rbp: RbpRule::Unsupported,
                    ..rsp(8)
                },
                "{instruction:?}"
            );
            assert_eq!(why.rbp, 1);
        }
    }

    #[test]
    fn fde_that_cannot_be_evaluated_is_one_unsupported_row() {
        // DW_CFA_restore_state with nothing remembered.
        let (rules, why) = rules(false, &[(0, I::CfaOffset(16)), (4, I::RestoreState)]);
        assert_eq!(rules, vec![UNSUPPORTED]);
        assert_eq!(why.damaged_fde, 1);
    }

    /// The rules of one aarch64 FDE at 0x1000 with `instructions`, and why any is unsupported.
    fn aarch64_rules(signal: bool, instructions: &[(u32, I)]) -> (Vec<RowRule>, UnsupportedCounts) {
        let data = eh_frame_aarch64(signal, &[Fde::new(0x1000, 0x40, instructions)]);
        let mut section = EhFrame::new(&data, LittleEndian);
        section.set_vendor(gimli::Vendor::AArch64);
        let cfi = walk(&section, &BaseAddresses::default(), Machine::Aarch64).unwrap();
        (cfi.rows.iter().map(|r| r.rule).collect(), cfi.unsupported)
    }

    /// `stp x29, x30, [sp, #-32]!` at 4 (after `paciasp` at 0).
    const FRAME_RECORD: &[(u32, I)] = &[
        (0, I::NegateRaState),
        (4, I::CfaOffset(32)),
        (4, I::Offset(AArch64::X29, -32)),
        (4, I::Offset(AArch64::X30, -24)),
    ];

    #[test]
    fn aarch64_return_address_in_x30_then_in_the_frame_record() {
        let (rules, why) = aarch64_rules(false, FRAME_RECORD);
        let entry = RowRule {
            ra: RaRule::Lr,
            ..RowRule::bare(CfaRule::Rsp)
        };
        let record = RowRule {
            cfa: CfaRule::Rsp,
            cfa_offset: 32,
            rbp: RbpRule::AtCfa,
            rbp_offset: -32,
            ra: RaRule::AboveFp,
        };
        assert_eq!(rules, vec![entry, record]);
        assert_eq!(why, UnsupportedCounts::default());
    }

    #[test]
    fn aarch64_return_address_saved_alone_or_apart_from_x29() {
        let ra_at = |rbp, rbp_offset| RowRule {
            cfa: CfaRule::Rsp,
            cfa_offset: 16,
            rbp,
            rbp_offset,
            ra: RaRule::AtCfa,
        };
        let alone = [(4, I::CfaOffset(16)), (4, I::Offset(AArch64::X30, -16))];
        let (rules, why) = aarch64_rules(false, &alone);
        assert_eq!(rules[1], ra_at(RbpRule::Same, -16));
        assert_eq!(why.rbp, 0);
        // x29 saved, but not right below x30: one offset cannot say both.
        let apart = [
            (4, I::CfaOffset(16)),
            (4, I::Offset(AArch64::X30, -16)),
            (4, I::Offset(AArch64::X29, -8)),
        ];
        let (rules, why) = aarch64_rules(false, &apart);
        assert_eq!(rules[1], ra_at(RbpRule::Unsupported, -16));
        assert_eq!(why.rbp, 1);
    }

    #[test]
    fn aarch64_rules_the_walk_cannot_follow() {
        let cases = [
            (
                I::Undefined(AArch64::X30),
                RowRule::bare(CfaRule::End),
                None,
            ),
            (
                I::Register(AArch64::X30, AArch64::X29),
                UNSUPPORTED,
                Some("return_address"),
            ),
            (
                I::Offset(AArch64::X30, -40_000),
                UNSUPPORTED,
                Some("return_address"),
            ),
            (
                I::CfaRegister(gimli::Register(19)),
                UNSUPPORTED,
                Some("cfa_register"),
            ),
        ];
        for (instruction, want, counted) in cases {
            let (rules, why) = aarch64_rules(false, &[(4, instruction.clone())]);
            assert_eq!(rules[1], want, "{instruction:?}");
            let count = match counted {
                Some("return_address") => why.return_address,
                Some(_) => why.cfa_register,
                None => 0,
            };
            assert_eq!(
                count,
                usize::from(counted.is_some()),
                "{instruction:?}: {why:?}"
            );
        }
        // aarch64's only trampoline is the vDSO's, which no file's CFI describes.
        let (rules, why) = aarch64_rules(true, &[]);
        assert_eq!((rules, why.signal_frame), (vec![UNSUPPORTED], 1));
    }
}
