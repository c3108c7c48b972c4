//! One row of a file's unwind table, laid out exactly as `struct unwind_row` in `bpf/event.h`:
//! the user-space builder (`unwind::cfi`, `unwind::table`) writes these and the BPF walk
//! binary-searches them, so the Rust mirror and the C struct must agree byte for byte (checked
//! against the header compiled by the C compiler in `tests/unwind.rs`).
//!
//! One layout for both machines. On aarch64 the "rbp" fields speak of x29, the frame pointer,
//! and `CfaRule::Rsp`/`CfaRule::Rbp` of sp/x29; where the return address is (x86-64 has one
//! place, CFA-8; aarch64 has the link register x30 or a slot at any offset) is a [`RaRule`] in
//! the high four bits of `rbp_rule`. Growing the row for it would cost every x86-64 recording
//! 16 MiB of kernel memory (4 Mi rows); x86-64's rows keep those bits 0 and stay byte for byte
//! what they were.

/// How the walk finds the caller's canonical frame address (CFA), the value of rsp (sp) just
/// before the call instruction; where the return address is then says the row's [`RaRule`].
///
/// Numbered as `enum cfa_rule` in `bpf/event.h`.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CfaRule {
    /// CFA = rsp + cfa_offset (sp on aarch64): almost all -O2 code, which keeps no frame
    /// pointer.
    Rsp = 0,
    /// CFA = rbp + cfa_offset (x29 on aarch64): functions that keep a frame pointer (or realign
    /// the stack, where rsp no longer says where the frame starts).
    Rbp = 1,
    /// CFA = rsp + 8, plus 8 more when `(rip & 15) >= 11`: the lazy-binding `.plt` stubs, whose
    /// one shared FDE says this with a DWARF expression (`PLT_CFA_EXPRESSION`) because each
    /// 16-byte entry pushes once after its first jump. The BPF side computes it.
    Plt = 2,
    /// The return address is undefined: the outermost frame (`_start`, a thread's `clone`
    /// child). The walk ends here, complete.
    End = 3,
    /// No CFI covers this pc (code between functions, or past the last FDE). The walk ends here
    /// marked unknown: applying a neighbour's rule would be a guess.
    Unknown = 4,
    /// The CFI says something the walk cannot compute (a DWARF expression other than the PLT's
    /// or a signal frame's, a CFA in another register, a return address not at CFA-8). The walk
    /// ends and counts it; `UnwindStats::unsupported` says why.
    Unsupported = 5,
    /// A signal trampoline (glibc's `__restore_rt`, where a signal handler returns to): its
    /// caller is the code the signal interrupted, whose registers the kernel saved in the
    /// ucontext on the stack. The interrupted rsp is at rsp + cfa_offset, its rip 8 bytes
    /// above (the sigcontext's order), and its rbp at rsp + rbp_offset (`RbpRule::AtSp`). The
    /// interrupted rip is where the code was, not a return address: the walk looks it up as
    /// it is, without stepping back into a call instruction.
    Signal = 6,
}

/// Where the caller's rbp (x29 on aarch64) is. Only it is tracked besides the stack pointer and
/// the pc because a caller's CFA rule can be based on it; every other callee-saved register is
/// irrelevant to finding frames.
///
/// Numbered as `enum rbp_rule` in `bpf/event.h`.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RbpRule {
    /// The caller's rbp is this frame's rbp: not saved yet (the ABI makes rbp callee-saved, so
    /// a function that never says otherwise has not touched it), or explicitly the same value,
    /// or undefined (outermost frames, whose caller never reads it).
    Same = 0,
    /// Saved in memory at CFA + rbp_offset (after `push %rbp`).
    AtCfa = 1,
    /// Any other rule (in another register, an expression, an offset beyond 16 bits): the walk
    /// can still go on while no caller's CFA depends on rbp, and must stop when one does.
    Unsupported = 2,
    /// Saved in memory at rsp + rbp_offset: a signal frame's sigcontext (`CfaRule::Signal`).
    AtSp = 3,
}

/// Where the caller's return address is, once the CFA is known. Numbered as `enum ra_rule` in
/// `bpf/event.h`; stored in the high four bits of the row's `rbp_rule`.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RaRule {
    /// At CFA-8, where x86-64's `call` pushed it: every x86-64 row.
    CfaMinus8 = 0,
    /// Still in x30, the link register (aarch64): a function's first instructions, before its
    /// prologue saves it, and leaf functions that never save it. Only the first frame's x30 is
    /// known (the probe's registers); a caller's frame with this rule ends the walk.
    Lr = 1,
    /// At CFA + rbp_offset (aarch64), x29 not saved beside it: `rbp_offset` is the return
    /// address's offset, and `rbp` is `Same` or `Unsupported`.
    AtCfa = 2,
    /// At CFA + rbp_offset + 8, above the saved x29 (aarch64's frame record `{x29, x30}`, what
    /// `stp x29, x30, [sp, #-N]!` saves): `rbp` is `AtCfa` at rbp_offset.
    AboveFp = 3,
}

/// What the walk does at a pc: the rule part of a row, without where it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RowRule {
    /// How to find the CFA.
    pub cfa: CfaRule,
    /// The offset the CFA rule adds (0 for rules without one).
    pub cfa_offset: i32,
    /// Where the caller's rbp is.
    pub rbp: RbpRule,
    /// The offset from the CFA of the saved rbp (0 unless `rbp` is `AtCfa`), or of the return
    /// address for `RaRule::AtCfa`.
    pub rbp_offset: i16,
    /// Where the return address is.
    pub ra: RaRule,
}

impl RowRule {
    /// A rule with no offsets: `End`, `Unknown` and `Unsupported` rows carry none, so that
    /// neighbours with the same outcome merge and the BPF side never reads stale offsets.
    pub const fn bare(cfa: CfaRule) -> Self {
        RowRule {
            cfa,
            cfa_offset: 0,
            rbp: RbpRule::Same,
            rbp_offset: 0,
            ra: RaRule::CfaMinus8,
        }
    }
}

/// One row: from `pc` up to the next row's pc, `rule` applies. 12 bytes, the layout of
/// `struct unwind_row` in `bpf/event.h`; `pc` is the ELF virtual address (the walk subtracts
/// the mapping's load bias first), which is why a file with code above 4 GiB is refused.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UnwindRow {
    /// First ELF virtual address the row covers.
    pub pc: u32,
    /// `RowRule::cfa_offset`.
    pub cfa_offset: i32,
    /// `RowRule::rbp_offset`.
    pub rbp_offset: i16,
    /// A `CfaRule` as its number.
    pub cfa_rule: u8,
    /// An `RbpRule` as its number, plus an `RaRule`'s shifted left by 4.
    pub rbp_rule: u8,
}

impl UnwindRow {
    /// The row that applies `rule` from `pc` on.
    pub fn new(pc: u32, rule: RowRule) -> Self {
        UnwindRow {
            pc,
            cfa_offset: rule.cfa_offset,
            rbp_offset: rule.rbp_offset,
            cfa_rule: rule.cfa as u8,
            rbp_rule: rule.rbp as u8 | (rule.ra as u8) << 4,
        }
    }

    /// The row's 12 bytes as `struct unwind_row` lays them out, in the machine's byte order.
    pub fn to_bytes(&self) -> [u8; 12] {
        let mut b = [0u8; 12];
        b[0..4].copy_from_slice(&self.pc.to_ne_bytes());
        b[4..8].copy_from_slice(&self.cfa_offset.to_ne_bytes());
        b[8..10].copy_from_slice(&self.rbp_offset.to_ne_bytes());
        b[10] = self.cfa_rule;
        b[11] = self.rbp_rule;
        b
    }

    /// The row's rule, decoded. The builder only writes valid numbers; anything else reads as
    /// unsupported rather than panicking.
    pub fn rule(&self) -> RowRule {
        let cfa = match self.cfa_rule {
            0 => CfaRule::Rsp,
            1 => CfaRule::Rbp,
            2 => CfaRule::Plt,
            3 => CfaRule::End,
            4 => CfaRule::Unknown,
            6 => CfaRule::Signal,
            _ => CfaRule::Unsupported,
        };
        let rbp = match self.rbp_rule & 15 {
            0 => RbpRule::Same,
            1 => RbpRule::AtCfa,
            3 => RbpRule::AtSp,
            _ => RbpRule::Unsupported,
        };
        let ra = match self.rbp_rule >> 4 {
            0 => RaRule::CfaMinus8,
            1 => RaRule::Lr,
            2 => RaRule::AtCfa,
            _ => RaRule::AboveFp,
        };
        RowRule {
            cfa,
            cfa_offset: self.cfa_offset,
            rbp,
            rbp_offset: self.rbp_offset,
            ra,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_is_twelve_bytes_with_the_header_offsets() {
        assert_eq!(std::mem::size_of::<UnwindRow>(), 12);
        assert_eq!(std::mem::align_of::<UnwindRow>(), 4);
        assert_eq!(std::mem::offset_of!(UnwindRow, pc), 0);
        assert_eq!(std::mem::offset_of!(UnwindRow, cfa_offset), 4);
        assert_eq!(std::mem::offset_of!(UnwindRow, rbp_offset), 8);
        assert_eq!(std::mem::offset_of!(UnwindRow, cfa_rule), 10);
        assert_eq!(std::mem::offset_of!(UnwindRow, rbp_rule), 11);
        let row = UnwindRow {
            pc: 0x0102_0304,
            cfa_offset: -8,
            rbp_offset: 16,
            cfa_rule: 1,
            rbp_rule: 2,
        };
        let mut b = row.pc.to_ne_bytes().to_vec();
        b.extend((-8i32).to_ne_bytes());
        b.extend(16i16.to_ne_bytes());
        b.extend([1, 2]);
        assert_eq!(row.to_bytes().to_vec(), b);
    }

    #[test]
    fn rules_are_numbered_as_the_header_numbers_them() {
        use crate::sys::raw::{cfa_rule, ra_rule, rbp_rule};
        let cfa = [
            (CfaRule::Rsp, cfa_rule::CFA_RSP),
            (CfaRule::Rbp, cfa_rule::CFA_RBP),
            (CfaRule::Plt, cfa_rule::CFA_PLT),
            (CfaRule::End, cfa_rule::CFA_END),
            (CfaRule::Unknown, cfa_rule::CFA_UNKNOWN),
            (CfaRule::Unsupported, cfa_rule::CFA_UNSUPPORTED),
            (CfaRule::Signal, cfa_rule::CFA_SIGNAL),
        ];
        for (rust, c) in cfa {
            assert_eq!(rust as u32, c as u32, "{rust:?}");
            assert_eq!(UnwindRow::new(0, RowRule::bare(rust)).rule().cfa, rust);
        }
        let rbp = [
            (RbpRule::Same, rbp_rule::RBP_SAME),
            (RbpRule::AtCfa, rbp_rule::RBP_AT_CFA),
            (RbpRule::Unsupported, rbp_rule::RBP_UNSUPPORTED),
            (RbpRule::AtSp, rbp_rule::RBP_AT_SP),
        ];
        for (rust, c) in rbp {
            assert_eq!(rust as u32, c as u32, "{rust:?}");
        }
        let ra = [
            (RaRule::CfaMinus8, ra_rule::RA_CFA_MINUS_8),
            (RaRule::Lr, ra_rule::RA_LR),
            (RaRule::AtCfa, ra_rule::RA_AT_CFA),
            (RaRule::AboveFp, ra_rule::RA_ABOVE_FP),
        ];
        for (rust, c) in ra {
            assert_eq!(rust as u32, c as u32, "{rust:?}");
        }
    }

    #[test]
    fn rule_round_trips_through_the_row() {
        let rule = RowRule {
            cfa: CfaRule::Rbp,
            cfa_offset: 16,
            rbp: RbpRule::AtCfa,
            rbp_offset: -16,
            ra: RaRule::CfaMinus8,
        };
        assert_eq!(UnwindRow::new(0x1000, rule).rule(), rule);
        // An x86-64 row's byte is its rbp rule alone; aarch64's frame record puts its return
        // address rule above it.
        assert_eq!(UnwindRow::new(0, rule).rbp_rule, 1);
        let record = RowRule {
            cfa: CfaRule::Rbp,
            cfa_offset: 32,
            rbp: RbpRule::AtCfa,
            rbp_offset: -32,
            ra: RaRule::AboveFp,
        };
        assert_eq!(UnwindRow::new(0, record).rbp_rule, 0x31);
        assert_eq!(UnwindRow::new(0x1000, record).rule(), record);
        let lr = RowRule {
            ra: RaRule::Lr,
            ..RowRule::bare(CfaRule::Rsp)
        };
        assert_eq!(UnwindRow::new(0x1000, lr).rule(), lr);
        let bare = RowRule::bare(CfaRule::Unsupported);
        assert_eq!(UnwindRow::new(0, bare).rule(), bare);
    }
}
