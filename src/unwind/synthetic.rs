//! Synthetic `.eh_frame` sections for the unwind builder's unit tests, written with gimli's
//! writer: one x86-64 CIE as gcc emits it (CFA = rsp+8, return address at CFA-8), or aarch64's
//! (CFA = sp, the return address in x30), and FDEs with whatever instructions a test needs; and
//! the rule most of their rows expect.

use gimli::write::{
    Address, CallFrameInstruction, CommonInformationEntry, EhFrame, EndianVec,
    FrameDescriptionEntry, FrameTable,
};
use gimli::{AArch64, Encoding, Format, LittleEndian, X86_64};

use super::row::{CfaRule, RaRule, RbpRule, RowRule};

/// CFA = rsp + `offset`, rbp untouched: the rule of most rows.
pub(crate) fn rsp(offset: i32) -> RowRule {
    RowRule {
        cfa: CfaRule::Rsp,
        cfa_offset: offset,
        rbp: RbpRule::Same,
        rbp_offset: 0,
        ra: RaRule::CfaMinus8,
    }
}

/// One FDE to write: its range and (offset in the function, instruction) pairs.
pub(crate) struct Fde {
    start: u64,
    len: u32,
    instructions: Vec<(u32, CallFrameInstruction)>,
}

impl Fde {
    pub(crate) fn new(start: u64, len: u32, instructions: &[(u32, CallFrameInstruction)]) -> Self {
        Fde {
            start,
            len,
            instructions: instructions.to_vec(),
        }
    }
}

/// `push %rbp` at offset 0: CFA = rsp+16 and rbp saved at CFA-16 from offset 1 on.
pub(crate) const PROLOGUE: &[(u32, CallFrameInstruction)] = &[
    (1, CallFrameInstruction::CfaOffset(16)),
    (1, CallFrameInstruction::Offset(X86_64::RBP, -16)),
];

/// An `.eh_frame` (at address 0) with one x86-64 CIE, marked a signal trampoline if `signal`,
/// and `fdes` in this order.
pub(crate) fn eh_frame(signal: bool, fdes: &[Fde]) -> Vec<u8> {
    let mut cie = cie(1, X86_64::RA, signal);
    cie.add_instruction(CallFrameInstruction::Cfa(X86_64::RSP, 8));
    cie.add_instruction(CallFrameInstruction::Offset(X86_64::RA, -8));
    write(cie, fdes)
}

/// An `.eh_frame` (at address 0) with one aarch64 CIE as gcc emits it (`DW_CFA_def_cfa: sp+0`,
/// no rule for x30), marked a signal trampoline if `signal`, and `fdes` in this order.
pub(crate) fn eh_frame_aarch64(signal: bool, fdes: &[Fde]) -> Vec<u8> {
    let mut cie = cie(4, AArch64::X30, signal);
    cie.add_instruction(CallFrameInstruction::Cfa(AArch64::SP, 0));
    write(cie, fdes)
}

/// A CIE without instructions: `code_alignment` (the instruction size's unit), the return
/// address column, and whether it marks signal trampolines.
fn cie(code_alignment: u8, ra: gimli::Register, signal: bool) -> CommonInformationEntry {
    let encoding = Encoding {
        format: Format::Dwarf32,
        version: 1,
        address_size: 8,
    };
    let mut cie = CommonInformationEntry::new(encoding, code_alignment, -8, ra);
    cie.signal_trampoline = signal;
    cie
}

/// The section of `cie` and `fdes`.
fn write(cie: CommonInformationEntry, fdes: &[Fde]) -> Vec<u8> {
    let mut table = FrameTable::default();
    let cie = table.add_cie(cie);
    for fde in fdes {
        let mut written = FrameDescriptionEntry::new(Address::Constant(fde.start), fde.len);
        for (offset, instruction) in &fde.instructions {
            written.add_instruction(*offset, instruction.clone());
        }
        table.add_fde(cie, written);
    }
    let mut section = EhFrame(EndianVec::new(LittleEndian));
    table
        .write_eh_frame(&mut section)
        .expect("write a synthetic .eh_frame");
    section.0.into_vec()
}
