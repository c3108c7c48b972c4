//! Where exactly a probe goes in a function: on the first instruction of its entry that the
//! kernel can emulate, past instructions that cannot matter to the probe.
//!
//! An x86 uprobe replaces the probed instruction with `int3`. When the trap returns, the kernel
//! must carry out the instruction it replaced: it emulates a few (push of a register, jmp,
//! call, jcc, nop) and single-steps every other one out of line, which costs about ten times
//! as much here (docs/kernel-facts.md: 5-6 µs against 0.8-1.1 µs per call). Function entries are
//! often not emulated: `endbr64` (every function built with `-fcf-protection`, as Ubuntu and
//! Fedora build glibc, and libstdc++'s operators), jemalloc's `cmp`, mimalloc's and tcmalloc's
//! `mov`. So the probe moves forward, over instructions that
//!
//! - fall through to the next one (no branch, so the site is reached on every call),
//! - write neither the stack pointer nor memory (so `[rsp]` is still the return address: the
//!   return probe can sit on the same site, and the nesting check sees the entry's `rsp`);
//!   a label-only entry (no return probe, `Needs::entry_sp` false) may also step over
//!   `sub $N,%rsp`, as the nothrow operator new does before it calls operator new: calls it
//!   makes are still deeper than the stack pointer its label records,
//! - leave each argument the BPF program reads somewhere it can be read: in its own register,
//!   or in the register a plain `mov` copied it to (mimalloc's malloc moves its size from rdi
//!   to rsi and loads its heap into rdi before anything emulated); the site's cookie then says
//!   where each is (`enum arg_reg`, bpf/event.h),
//!
//! to the first instruction the kernel emulates. When a branch of the function lands inside the
//! stepped-over range or on the site (a loop back into the prologue), the site would fire more
//! than once per call, and the probe stays at the entry; so it does when the function's size is
//! unknown and that cannot be checked.
//!
//! iced-x86 decodes the instructions and says which registers and memory each writes: a
//! hand-written table of byte patterns (what this replaced) knew two instructions and had to
//! be extended for each new compiler idiom; a real decoder knows every encoding, prefix and
//! implicit operand (`cpuid` writing `rcx`, `rep` string instructions writing `rdi`).

use iced_x86::{
    Code, Decoder, DecoderOptions, FlowControl, Instruction, InstructionInfoFactory, Mnemonic,
    OpAccess, OpKind, Register,
};

use crate::sys::raw::{arg_reg, COOKIE_ARGS_SHIFT, COOKIE_ARG_BITS};

// The arm64 decoder is plain Rust over instruction words: built and unit-tested on every host,
// used by `place` on aarch64.
mod arm64;

/// The registers an argument can be read from at a site, in `enum arg_reg` order from
/// `ARG_RDI` (bpf/event.h): what `pt_regs` holds of the integer registers, but rsp.
const LOCATIONS: [Register; 15] = [
    Register::RDI,
    Register::RSI,
    Register::RDX,
    Register::RCX,
    Register::R8,
    Register::R9,
    Register::RAX,
    Register::R10,
    Register::R11,
    Register::RBX,
    Register::RBP,
    Register::R12,
    Register::R13,
    Register::R14,
    Register::R15,
];

/// The integer argument registers of the System V x86_64 ABI, in order.
const ARGS: [Register; 6] = [
    Register::RDI,
    Register::RSI,
    Register::RDX,
    Register::RCX,
    Register::R8,
    Register::R9,
];

/// Instructions stepped over at most before the probe stays at the entry: the longest prologue
/// seen here is jemalloc's free, nine loads and arithmetic on scratch registers before a `jne`.
const MAX_STEPS: usize = 16;

/// How many bytes of a function are decoded to look for branches into its prologue.
pub const SCAN_BYTES: usize = 64 * 1024;

/// What the BPF program at a site relies on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Needs {
    /// How many integer arguments (rdi, rsi, rdx, ...) it reads as the caller set them.
    pub args: usize,
    /// Whether it needs the stack pointer exactly as at the entry (a return probe, or the
    /// nesting check of a call); if not, the stack may have grown down by a `sub`.
    pub entry_sp: bool,
}

/// Where one function's probe goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Site {
    /// Bytes from the function's entry to the probed instruction.
    pub skip: u64,
    /// Whether the kernel emulates the probed instruction; if not, it is single-stepped.
    pub emulated: bool,
    /// The probed instruction.
    pub mnemonic: Mnemonic,
    /// The probed instruction's name where iced-x86 has none for it (arm64), else empty.
    pub name: &'static str,
    /// Where the arguments the program reads are at the site (`ARG_OWN_REG` for each at
    /// the entry, or when nothing moved it).
    pub args: [arg_reg; 3],
    /// Where each of the six integer arguments is at the site, always as an explicit register
    /// (its own while it holds it); meaningful for the first `Needs::args` only.
    pub registers: [arg_reg; 6],
}

impl Site {
    /// The probed instruction's name, as objdump spells it (`push`, `endbr64`).
    pub fn instruction(&self) -> String {
        if !self.name.is_empty() {
            return self.name.to_string();
        }
        format!("{:?}", self.mnemonic).to_lowercase()
    }

    /// The bits of an attach cookie that say where the arguments are.
    pub fn cookie_bits(&self) -> u64 {
        self.args.iter().enumerate().fold(0, |bits, (i, &reg)| {
            bits | (reg as u64) << (COOKIE_ARGS_SHIFT as u64 + i as u64 * COOKIE_ARG_BITS as u64)
        })
    }
}

/// Where each argument is while the probe moves forward: for each, the set of registers (bits
/// over `LOCATIONS`) that hold the value the caller passed.
struct Holders([u16; 6]);

impl Holders {
    fn at_entry() -> Holders {
        Holders(ARGS.map(location_bit))
    }

    /// After `insn`, which writes the registers `written` (bits over `LOCATIONS`).
    fn step(&mut self, insn: &Instruction, written: u16) {
        let copy = matches!(insn.code(), Code::Mov_rm64_r64 | Code::Mov_r64_rm64)
            && insn.op0_kind() == OpKind::Register
            && insn.op1_kind() == OpKind::Register;
        for held in &mut self.0 {
            let from_source = copy && *held & location_bit(insn.op1_register()) != 0;
            *held &= !written;
            if from_source {
                *held |= location_bit(insn.op0_register());
            }
        }
    }

    /// Whether each of the first `n` arguments is still somewhere.
    fn all_held(&self, n: usize) -> bool {
        self.0[..n.min(6)].iter().all(|&h| h != 0)
    }

    /// Where each argument is, as an explicit register: its own while it holds it, else the
    /// first register that does.
    fn registers(&self) -> [arg_reg; 6] {
        let mut out = [arg_reg::ARG_OWN_REG; 6];
        for (i, &held) in self.0.iter().enumerate() {
            let own = location_bit(ARGS[i]);
            let bit = if held & own != 0 || held == 0 {
                own
            } else {
                held & held.wrapping_neg()
            };
            out[i] = ARG_REGS[bit.trailing_zeros() as usize];
        }
        out
    }

    /// Where the first `n` arguments are: their own register while it holds them, else the
    /// first register that does.
    fn locations(&self, n: usize) -> [arg_reg; 3] {
        let mut out = [arg_reg::ARG_OWN_REG; 3];
        for (i, &held) in self.0.iter().enumerate().take(n.min(3)) {
            if held & location_bit(ARGS[i]) == 0 && held != 0 {
                out[i] = ARG_REGS[held.trailing_zeros() as usize];
            }
        }
        out
    }
}

/// `LOCATIONS` as the `enum arg_reg` values that name them.
const ARG_REGS: [arg_reg; 15] = [
    arg_reg::ARG_RDI,
    arg_reg::ARG_RSI,
    arg_reg::ARG_RDX,
    arg_reg::ARG_RCX,
    arg_reg::ARG_R8,
    arg_reg::ARG_R9,
    arg_reg::ARG_RAX,
    arg_reg::ARG_R10,
    arg_reg::ARG_R11,
    arg_reg::ARG_RBX,
    arg_reg::ARG_RBP,
    arg_reg::ARG_R12,
    arg_reg::ARG_R13,
    arg_reg::ARG_R14,
    arg_reg::ARG_R15,
];

/// The bit of `reg`'s full register in a `Holders` set; 0 for registers no argument is read
/// from (rsp, vector registers).
fn location_bit(reg: Register) -> u16 {
    let full = reg.full_register();
    LOCATIONS
        .iter()
        .position(|&l| l == full)
        .map_or(0, |i| 1 << i)
}

/// Where to probe the function whose code is `code` (from its entry; `complete` when that is
/// the whole function), at address `vaddr`, for a program that `needs` what it says. x86_64
/// and aarch64 (`arm64::place`: the arguments stay in their own registers there); elsewhere,
/// the entry.
pub fn place(code: &[u8], vaddr: u64, complete: bool, needs: Needs) -> Site {
    let entry = |mnemonic| Site {
        skip: 0,
        emulated: false,
        mnemonic,
        name: "",
        args: [arg_reg::ARG_OWN_REG; 3],
        registers: Holders::at_entry().registers(),
    };
    if cfg!(target_arch = "aarch64") {
        let (skip, emulated, name) = arm64::place(code, vaddr, complete);
        return Site {
            skip,
            emulated,
            name,
            ..entry(Mnemonic::INVALID)
        };
    }
    if !cfg!(target_arch = "x86_64") {
        return entry(Mnemonic::INVALID);
    }
    let mut decoder = Decoder::with_ip(64, code, vaddr, DecoderOptions::NONE);
    let mut info = InstructionInfoFactory::new();
    let mut insn = Instruction::default();
    let mut holders = Holders::at_entry();
    let mut first = Mnemonic::INVALID;
    let mut skip = 0usize;
    for step in 0..MAX_STEPS {
        if !decoder.can_decode() {
            break;
        }
        decoder.decode_out(&mut insn);
        if insn.is_invalid() {
            break;
        }
        if step == 0 {
            first = insn.mnemonic();
        }
        if emulated(&insn, &code[skip..skip + insn.len()]) {
            if skip > 0 && (!complete || branches_into(code, vaddr, skip as u64)) {
                break;
            }
            return Site {
                skip: skip as u64,
                emulated: true,
                mnemonic: insn.mnemonic(),
                name: "",
                args: holders.locations(needs.args),
                registers: holders.registers(),
            };
        }
        let Some(written) = steppable(&insn, &mut info, needs) else {
            break;
        };
        holders.step(&insn, written);
        if !holders.all_held(needs.args) {
            break;
        }
        skip += insn.len();
    }
    entry(first)
}

/// Where a function that only forwards its call jumps to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TailJump {
    /// `jmp TARGET`: to the function or PLT stub at this address.
    Direct(u64),
    /// `jmp *SLOT(%rip)`: to the address the GOT slot at this address holds (a PLT stub, or a
    /// call built with `-fno-plt`).
    Slot(u64),
}

/// Whether the code `code` at `vaddr` does nothing but jump elsewhere, leaving every register
/// and the stack as its caller set them (`endbr64` and nops before the jump at most): libstdc++'s
/// sized `operator delete` is `endbr64; jmp _ZdlPv@plt`, and that PLT stub `endbr64; bnd jmp
/// *GOT(%rip)`. Such a function's probe adds a trap and nothing else when its target, probed
/// itself, reports the same.
pub fn tail_jump(code: &[u8], vaddr: u64) -> Option<TailJump> {
    if !cfg!(target_arch = "x86_64") {
        return None;
    }
    let mut decoder = Decoder::with_ip(64, code, vaddr, DecoderOptions::NONE);
    let mut insn = Instruction::default();
    for _ in 0..4 {
        if !decoder.can_decode() {
            return None;
        }
        decoder.decode_out(&mut insn);
        match insn.mnemonic() {
            Mnemonic::Endbr64 | Mnemonic::Nop => continue,
            Mnemonic::Jmp if insn.op0_kind() == OpKind::NearBranch64 => {
                return Some(TailJump::Direct(insn.near_branch_target()));
            }
            Mnemonic::Jmp
                if insn.op0_kind() == OpKind::Memory && insn.is_ip_rel_memory_operand() =>
            {
                return Some(TailJump::Slot(insn.ip_rel_memory_address()));
            }
            _ => return None,
        }
    }
    None
}

/// Whether the code `code` at `vaddr` returns at once (`ret`, after `endbr64` and nops at most):
/// a function that does nothing, whose calls a compiler that sees it may remove (gcc from -O1:
/// it proves the function has no effect), so that its probe, though attached, never fires.
pub fn only_returns(code: &[u8], vaddr: u64) -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let mut decoder = Decoder::with_ip(64, code, vaddr, DecoderOptions::NONE);
    let mut insn = Instruction::default();
    for _ in 0..4 {
        if !decoder.can_decode() {
            return false;
        }
        decoder.decode_out(&mut insn);
        match insn.mnemonic() {
            Mnemonic::Endbr64 | Mnemonic::Nop => continue,
            Mnemonic::Ret => return true,
            _ => return false,
        }
    }
    false
}

/// Whether the kernel emulates `insn` (encoded as `bytes`) instead of single-stepping it:
/// Linux's `push_setup_xol_ops` and `branch_setup_xol_ops` (arch/x86/kernel/uprobes.c, the
/// same from 4.x to 6.18): push of a 64-bit register (no prefix but REX.B), jmp, call and jcc
/// with a relative target and no operand-size prefix, and the one-byte nop.
fn emulated(insn: &Instruction, bytes: &[u8]) -> bool {
    if insn.code() == Code::Push_r64 {
        return bytes.len() == 1 || (bytes.len() == 2 && bytes[0] == 0x41);
    }
    if bytes == [0x90] {
        return true;
    }
    let relative =
        insn.is_jcc_short_or_near() || insn.is_jmp_short_or_near() || insn.is_call_near();
    relative && !prefixes(bytes).contains(&0x66)
}

/// The legacy and REX prefixes that start `bytes`.
fn prefixes(bytes: &[u8]) -> &[u8] {
    let is_prefix = |b: &u8| {
        matches!(
            b,
            0x26 | 0x2e | 0x36 | 0x3e | 0x40
                ..=0x4f | 0x64 | 0x65 | 0x66 | 0x67 | 0xf0 | 0xf2 | 0xf3
        )
    };
    let n = bytes.iter().take_while(|b| is_prefix(b)).count();
    &bytes[..n]
}

/// Whether the probe may move past `insn`: it falls through, and writes neither memory nor
/// the stack pointer (but for a `sub` from it, when `needs` allows). Returns the registers it
/// writes (bits over `LOCATIONS`), for `Holders::step` to see which arguments survive it.
fn steppable(insn: &Instruction, info: &mut InstructionInfoFactory, needs: Needs) -> Option<u16> {
    let grows_stack = matches!(insn.code(), Code::Sub_rm64_imm8 | Code::Sub_rm64_imm32)
        && insn.op0_kind() == OpKind::Register
        && insn.op0_register() == Register::RSP;
    if grows_stack && !needs.entry_sp {
        return Some(0);
    }
    if insn.flow_control() != FlowControl::Next
        || insn.is_stack_instruction()
        || insn.stack_pointer_increment() != 0
    {
        return None;
    }
    let writes = |access: OpAccess| {
        matches!(
            access,
            OpAccess::Write | OpAccess::CondWrite | OpAccess::ReadWrite | OpAccess::ReadCondWrite
        )
    };
    let info = info.info(insn);
    if info.used_memory().iter().any(|m| writes(m.access())) {
        return None;
    }
    let mut written = 0;
    for r in info.used_registers().iter().filter(|r| writes(r.access())) {
        if r.register().full_register() == Register::RSP {
            return None;
        }
        written |= location_bit(r.register());
    }
    Some(written)
}

/// Whether a direct branch or call of the function `code` at `vaddr` lands in
/// `(vaddr, vaddr + skip]`: past the entry and up to the site, which would then run again
/// within one call.
fn branches_into(code: &[u8], vaddr: u64, skip: u64) -> bool {
    let mut decoder = Decoder::with_ip(64, code, vaddr, DecoderOptions::NONE);
    let mut insn = Instruction::default();
    while decoder.can_decode() {
        decoder.decode_out(&mut insn);
        if insn.op_count() > 0
            && matches!(
                insn.op0_kind(),
                OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64
            )
        {
            let target = insn.near_branch_target();
            if target > vaddr && target <= vaddr + skip {
                return true;
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const AT: u64 = 0x1000;

    fn site(code: &[u8], args: usize) -> (u64, bool, String) {
        let needs = Needs {
            args,
            entry_sp: true,
        };
        let s = place(code, AT, true, needs);
        (s.skip, s.emulated, s.instruction())
    }

    #[test]
    fn an_emulated_entry_stays() {
        // push %r12 (glibc's malloc), push %rbx, jmp, call, nop.
        assert_eq!(site(&[0x41, 0x54, 0x55], 1), (0, true, "push".into()));
        assert_eq!(site(&[0x53], 1), (0, true, "push".into()));
        assert_eq!(site(&[0xe9, 0, 0, 0, 0], 1), (0, true, "jmp".into()));
        assert_eq!(site(&[0xe8, 0, 0, 0, 0], 1), (0, true, "call".into()));
        assert_eq!(site(&[0x90, 0xc3], 1), (0, true, "nop".into()));
    }

    #[test]
    fn glibc_free_moves_past_test_to_je() {
        // test %rdi,%rdi; je ...
        let code = [0x48, 0x85, 0xff, 0x0f, 0x84, 0xbf, 0, 0, 0];
        assert_eq!(site(&code, 1), (3, true, "je".into()));
    }

    #[test]
    fn rip_relative_cmpb_is_stepped_over() {
        // cmpb $0x0,0x140201(%rip); push %r12
        let code = [0x80, 0x3d, 0x01, 0x02, 0x14, 0x00, 0x00, 0x41, 0x54];
        assert_eq!(site(&code, 2), (7, true, "push".into()));
    }

    #[test]
    fn libstdcxx_operator_new_moves_to_its_push() {
        // endbr64; test %rdi,%rdi; mov $0x1,%eax; push %rbx
        let code = [
            0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x85, 0xff, 0xb8, 0x01, 0, 0, 0, 0x53, 0x48, 0x0f, 0x45,
            0xc7,
        ];
        assert_eq!(site(&code, 1), (12, true, "push".into()));
    }

    #[test]
    fn a_tail_jump_is_probed_at_its_jmp() {
        // endbr64; jmp _ZdlPv@plt
        let code = [0xf3, 0x0f, 0x1e, 0xfa, 0xe9, 0x27, 0x21, 0xff, 0xff];
        assert_eq!(site(&code, 1), (4, true, "jmp".into()));
    }

    #[test]
    fn jemalloc_malloc_moves_to_its_ja() {
        // cmp $0x1000,%rdi; ja ...
        let code = [
            0x48, 0x81, 0xff, 0x00, 0x10, 0x00, 0x00, 0x0f, 0x87, 0, 0, 0, 0,
        ];
        assert_eq!(site(&code, 1), (7, true, "ja".into()));
    }

    #[test]
    fn a_scratch_register_load_is_stepped_over() {
        // mov %fs:0x28,%rax; mov $0x5,%r10d; push %rbp
        let code = [
            0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0, 0, 0, 0x41, 0xba, 5, 0, 0, 0, 0x55,
        ];
        assert_eq!(site(&code, 3), (15, true, "push".into()));
    }

    #[test]
    fn writing_an_argument_register_stops_the_move() {
        // mov $0,%esi; push %rbx: rsi is read when two arguments are, not when one is.
        let code = [0xbe, 0, 0, 0, 0, 0x53];
        assert_eq!(site(&code, 2), (0, false, "mov".into()));
        assert_eq!(site(&code, 1), (5, true, "push".into()));
        // mov $0,%edi writes rdi (a 32-bit write clears the upper half).
        assert_eq!(site(&[0xbf, 0, 0, 0, 0, 0x53], 1), (0, false, "mov".into()));
        // mul %rdx writes rdx: glibc's reallocarray.
        let code = [
            0x48, 0x89, 0xf0, 0x48, 0xf7, 0xe2, 0x48, 0x89, 0xc6, 0x70, 0x05,
        ];
        assert_eq!(site(&code, 3), (0, false, "mov".into()));
    }

    fn args_at(code: &[u8], args: usize) -> (u64, [arg_reg; 3]) {
        let needs = Needs {
            args,
            entry_sp: true,
        };
        let s = place(code, AT, true, needs);
        (s.skip, s.args)
    }

    /// `--allocator` functions read arguments past the third (issue 18): each of the six is
    /// tracked, and named by an explicit register.
    #[test]
    fn the_fourth_argument_is_tracked_too() {
        use arg_reg::*;
        // mov %rcx,%rbx; xor %ecx,%ecx; push %rbp: argument 4 is in rbx at the push.
        let code = [0x48, 0x89, 0xcb, 0x31, 0xc9, 0x55];
        let site = place(
            &code,
            AT,
            true,
            Needs {
                args: 4,
                entry_sp: true,
            },
        );
        assert_eq!(site.skip, 5);
        assert_eq!(
            site.registers,
            [ARG_RDI, ARG_RSI, ARG_RDX, ARG_RBX, ARG_R8, ARG_R9]
        );
        // With 3 arguments needed only, the first three stay where they were, as before.
        assert_eq!(args_at(&code, 3), (5, [ARG_OWN_REG; 3]));
        // xor %ecx,%ecx alone loses argument 4: the probe stays at the entry.
        let site = place(
            &[0x31, 0xc9, 0x55],
            AT,
            true,
            Needs {
                args: 4,
                entry_sp: true,
            },
        );
        assert_eq!(site.skip, 0);
        assert_eq!(site.registers[3], ARG_RCX);
    }

    #[test]
    fn an_argument_copied_by_mov_is_read_where_it_went() {
        use arg_reg::*;
        // mimalloc's malloc: mov 0xb449(%rip),%rax; mov %rdi,%rsi; mov %fs:(%rax),%rdi;
        // cmp $0x400,%rsi; ja ...
        let code = [
            0x48, 0x8b, 0x05, 0x49, 0xb4, 0, 0, 0x48, 0x89, 0xfe, 0x64, 0x48, 0x8b, 0x38, 0x48,
            0x81, 0xfe, 0x00, 0x04, 0, 0, 0x77, 0x29,
        ];
        assert_eq!(args_at(&code, 1), (21, [ARG_RSI, ARG_OWN_REG, ARG_OWN_REG]));
        // mimalloc's realloc: mov ..(%rip),%rax; mov %rsi,%rdx; mov %rdi,%rsi;
        // mov %fs:(%rax),%rax; mov %rax,%rdi; jmp mi_heap_realloc
        let code = [
            0x48, 0x8b, 0x05, 0x49, 0xa9, 0, 0, 0x48, 0x89, 0xf2, 0x48, 0x89, 0xfe, 0x64, 0x48,
            0x8b, 0x00, 0x48, 0x89, 0xc7, 0xe9, 0, 0, 0, 0,
        ];
        assert_eq!(args_at(&code, 2), (20, [ARG_RSI, ARG_RDX, ARG_OWN_REG]));
        let site = place(
            &code,
            AT,
            true,
            Needs {
                args: 2,
                entry_sp: true,
            },
        );
        assert_eq!(
            site.cookie_bits(),
            (ARG_RSI as u64) << 24 | (ARG_RDX as u64) << 28
        );
        // A copy that is then overwritten is lost with it: mov %rdi,%rax; mov $1,%eax;
        // mov $2,%edi; push %rbx.
        let code = [0x48, 0x89, 0xf8, 0xb8, 1, 0, 0, 0, 0xbf, 2, 0, 0, 0, 0x53];
        assert_eq!(args_at(&code, 1).0, 0);
        // While the own register still holds it, it is read there: mov %rdi,%rax; push %rbx.
        let code = [0x48, 0x89, 0xf8, 0x53];
        assert_eq!(args_at(&code, 1), (3, [ARG_OWN_REG; 3]));
    }

    #[test]
    fn a_label_may_step_over_its_frame() {
        // endbr64; sub $0x8,%rsp; call _Znwm@plt (the nothrow operator new)
        let code = [
            0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x83, 0xec, 0x08, 0xe8, 0, 0, 0, 0,
        ];
        let label = Needs {
            args: 1,
            entry_sp: false,
        };
        let s = place(&code, AT, true, label);
        assert_eq!(
            (s.skip, s.emulated, s.instruction()),
            (8, true, "call".into())
        );
        // Not where the stack pointer must be the entry's.
        assert_eq!(site(&code, 1), (0, false, "endbr64".into()));
        // add $0x8,%rsp shrinks the stack: never.
        let code = [0x48, 0x83, 0xc4, 0x08, 0x53];
        assert_eq!(place(&code, AT, true, label).skip, 0);
    }

    #[test]
    fn stack_and_memory_writes_stop_the_move() {
        // sub $0x8,%rsp; push %rbx
        assert_eq!(site(&[0x48, 0x83, 0xec, 0x08, 0x53], 1).0, 0);
        // mov %rax,(%rsp); push %rbx: [rsp] is the return address a return probe needs.
        assert_eq!(site(&[0x48, 0x89, 0x04, 0x24, 0x53], 1).0, 0);
        // mov %rax,0x10(%rip); push %rbx
        assert_eq!(site(&[0x48, 0x89, 0x05, 0x10, 0, 0, 0, 0x53], 1).0, 0);
    }

    #[test]
    fn a_branch_or_unknown_code_stops_the_move() {
        // test %rdi,%rdi; ret: the site would not be reached.
        assert_eq!(
            site(&[0x48, 0x85, 0xff, 0xc3], 1),
            (0, false, "test".into())
        );
        // jmp *%rax is not emulated (indirect).
        assert_eq!(site(&[0xff, 0xe0], 1), (0, false, "jmp".into()));
        // Code that ends before an emulated instruction.
        assert_eq!(site(&[0x48, 0x85, 0xff], 1), (0, false, "test".into()));
        assert_eq!(site(&[], 1), (0, false, "invalid".into()));
    }

    #[test]
    fn operand_size_prefixed_branches_and_prefixed_pushes_are_stepped() {
        // push %r12 with an extra 0x40 REX: more than REX.B.
        assert!(!site(&[0x40, 0x41, 0x54], 1).1);
        // callw (66 e8): not emulated.
        assert!(!site(&[0x66, 0xe8, 0, 0], 1).1);
    }

    #[test]
    fn forwarding_functions_are_told_apart() {
        // endbr64; jmp -0xded9 (libstdc++'s _ZdlPvm to _ZdlPv@plt)
        let code = [0xf3, 0x0f, 0x1e, 0xfa, 0xe9, 0x27, 0x21, 0xff, 0xff];
        assert_eq!(
            tail_jump(&code, 0xa78e0),
            Some(TailJump::Direct(0xa78e9 - 0xded9))
        );
        // endbr64; bnd jmp *0x1f7a42(%rip) (a .plt.sec stub)
        let code = [
            0xf3, 0x0f, 0x1e, 0xfa, 0xf2, 0xff, 0x25, 0x42, 0x7a, 0x1f, 0x00,
        ];
        assert_eq!(
            tail_jump(&code, 0x9a000),
            Some(TailJump::Slot(0x9a00b + 0x1f7a42))
        );
        // A function that does something first, or jumps through a register, is none.
        assert_eq!(tail_jump(&[0x48, 0x85, 0xff, 0xe9, 0, 0, 0, 0], AT), None);
        assert_eq!(tail_jump(&[0xff, 0xe0], AT), None);
        assert_eq!(tail_jump(&[], AT), None);
    }

    #[test]
    fn a_function_that_only_returns_is_seen() {
        assert!(only_returns(&[0xc3], AT), "ret");
        assert!(only_returns(&[0xf3, 0xc3], AT), "rep ret");
        assert!(
            only_returns(&[0xf3, 0x0f, 0x1e, 0xfa, 0xc3], AT),
            "endbr64; ret"
        );
        assert!(
            !only_returns(&[0xe9, 0, 0, 0, 0], AT),
            "a tail call does something"
        );
        assert!(!only_returns(&[0x31, 0xc0, 0xc3], AT), "xor %eax,%eax; ret");
        assert!(!only_returns(&[], AT));
    }

    #[test]
    fn a_branch_back_into_the_prologue_keeps_the_entry() {
        // 0: test %rdi,%rdi   3: je +2 (to 7)   5: jmp -4 (to 3, the site)   7: ret
        let code = [0x48, 0x85, 0xff, 0x74, 0x02, 0xeb, 0xfc, 0xc3];
        assert_eq!(site(&code, 1), (0, false, "test".into()));
        // A branch to the entry itself is a new call, probed once as before.
        let code = [0x48, 0x85, 0xff, 0x74, 0x02, 0xeb, 0xf9, 0xc3];
        assert_eq!(site(&code, 1), (3, true, "je".into()));
        // The same code as an incomplete prefix of the function: cannot tell, stays.
        let needs = Needs {
            args: 1,
            entry_sp: true,
        };
        assert_eq!(place(&code, AT, false, needs).skip, 0);
    }
}
