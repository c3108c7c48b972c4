//! Probe placement on arm64 (issue 31): which instructions an arm64 uprobe simulates, and how
//! far a probe may move from a function's entry to reach one.
//!
//! An arm64 uprobe replaces the probed instruction with a `brk`. On the trap, the kernel
//! simulates branches (`b`, `bl`, `b.cond`, `cbz`/`cbnz`, `tbz`/`tbnz`, `br`/`blr`/`ret`),
//! `adr`/`adrp` and `ldr`/`ldrsw` of a literal, and from Linux 6.13 `nop`
//! (arch/arm64/kernel/probes/decode-insn.c, `arm_probe_decode_insn`); everything else,
//! `paciasp`, `bti c` and the prologue's `stp x29, x30, [sp, #-N]!` included, is single-stepped
//! out of line, about twice the cost. The kernel's version is not known where probes are
//! placed, so `nop` counts as single-stepped (what every kernel before 6.13 does with it).
//!
//! The probe moves only over `bti` and `nop`: hints that write no register and no memory, so
//! the arguments are still in x0-x7, the stack pointer and the link register (x30, the return
//! address a return probe replaces) are as at the entry. It never moves over `paciasp`: that
//! signs x30, and a return probe that replaced the signed value would fail the function's
//! `autiasp`. Nor over the prologue's store of x30, after which replacing x30 no longer
//! changes where the function returns. A 32-bit decoder of these few classes is all this
//! needs: every instruction is one little-endian word.

/// What the kernel does with one instruction at a probe, and its name as objdump prints it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Class {
    /// objdump's mnemonic (`b.cond` for every condition), or `insn` for one this does not name.
    pub name: &'static str,
    /// Whether the kernel simulates it (else it is single-stepped).
    pub simulated: bool,
    /// Whether a probe may move past it: it writes no register and no memory.
    pub inert: bool,
}

/// The class of the instruction word `insn`.
pub fn classify(insn: u32) -> Class {
    let simulated = |name| Class {
        name,
        simulated: true,
        inert: false,
    };
    let stepped = |name| Class {
        name,
        simulated: false,
        inert: false,
    };
    match insn {
        0xd503201f => Class {
            name: "nop",
            simulated: false,
            inert: true,
        },
        // bti, bti c, bti j, bti jc: hint #32, #34, #36, #38.
        0xd503241f | 0xd503245f | 0xd503249f | 0xd50324df => Class {
            name: "bti",
            simulated: false,
            inert: true,
        },
        0xd503233f => stepped("paciasp"),
        0xd503237f => stepped("pacibsp"),
        _ if insn & 0xfc00_0000 == 0x1400_0000 => simulated("b"),
        _ if insn & 0xfc00_0000 == 0x9400_0000 => simulated("bl"),
        _ if insn & 0xff00_0010 == 0x5400_0000 => simulated("b.cond"),
        _ if insn & 0x7f00_0000 == 0x3400_0000 => simulated("cbz"),
        _ if insn & 0x7f00_0000 == 0x3500_0000 => simulated("cbnz"),
        _ if insn & 0x7f00_0000 == 0x3600_0000 => simulated("tbz"),
        _ if insn & 0x7f00_0000 == 0x3700_0000 => simulated("tbnz"),
        _ if insn & 0xffff_fc1f == 0xd61f_0000 => simulated("br"),
        _ if insn & 0xffff_fc1f == 0xd63f_0000 => simulated("blr"),
        _ if insn & 0xffff_fc1f == 0xd65f_0000 => simulated("ret"),
        _ if insn & 0x9f00_0000 == 0x1000_0000 => simulated("adr"),
        _ if insn & 0x9f00_0000 == 0x9000_0000 => simulated("adrp"),
        _ if insn & 0xbf00_0000 == 0x1800_0000 => simulated("ldr"),
        _ if insn & 0xff00_0000 == 0x9800_0000 => simulated("ldrsw"),
        // stp of a 64-bit pair, pre-indexed: the prologue's `stp x29, x30, [sp, #-N]!`.
        _ if insn & 0xffc0_0000 == 0xa980_0000 => stepped("stp"),
        _ => stepped("insn"),
    }
}

/// Where a direct branch `insn` at `pc` goes (`b`, `bl`, `b.cond`, `cbz`/`cbnz`, `tbz`/`tbnz`).
pub fn branch_target(insn: u32, pc: u64) -> Option<u64> {
    let offset = |bits: u32, width: u32| {
        // Sign-extend the `width`-bit word offset, in bytes.
        (((bits as i64) << (64 - width)) >> (64 - width)) * 4
    };
    let delta = if insn & 0x7c00_0000 == 0x1400_0000 {
        offset(insn & 0x03ff_ffff, 26)
    } else if insn & 0xff00_0010 == 0x5400_0000 || insn & 0x7e00_0000 == 0x3400_0000 {
        offset((insn >> 5) & 0x7ffff, 19)
    } else if insn & 0x7e00_0000 == 0x3600_0000 {
        offset((insn >> 5) & 0x3fff, 14)
    } else {
        return None;
    };
    Some(pc.wrapping_add(delta as u64))
}

/// The words of `code`, in order (a trailing partial word is not an instruction).
fn words(code: &[u8]) -> impl Iterator<Item = u32> + '_ {
    code.chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
}

/// Whether any direct branch of `code` (at `vaddr`) lands in `(vaddr, vaddr + skip]`: then a
/// probe moved `skip` bytes could fire more than once per call.
fn branches_into(code: &[u8], vaddr: u64, skip: u64) -> bool {
    words(code).enumerate().any(|(i, insn)| {
        branch_target(insn, vaddr + 4 * i as u64)
            .is_some_and(|target| target > vaddr && target <= vaddr + skip)
    })
}

/// How far to move the probe of the function whose code is `code` (from its entry; `complete`
/// when that is the whole function) at `vaddr`: the bytes skipped, whether the site is
/// simulated, and the probed instruction's name. Past `bti` and `nop` only, to the first
/// simulated instruction; else the entry.
pub fn place(code: &[u8], vaddr: u64, complete: bool) -> (u64, bool, &'static str) {
    let mut first = "insn";
    let mut skip = 0u64;
    for (i, insn) in words(code).take(8).enumerate() {
        let class = classify(insn);
        if i == 0 {
            first = class.name;
        }
        if class.simulated {
            if skip > 0 && (!complete || branches_into(code, vaddr, skip)) {
                break;
            }
            return (skip, true, class.name);
        }
        if !class.inert {
            break;
        }
        skip += 4;
    }
    (0, false, first)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Little-endian bytes of instruction words.
    fn code(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    // The first instructions of Debian 12's arm64 libc.so.6 (libc6 2.36-9+deb12u*) and
    // libstdc++.so.6 (12.2.0), as `aarch64-linux-gnu-objdump -d` prints them.

    #[test]
    fn debian_bookworm_malloc_calloc_realloc_stay_single_stepped() {
        // __libc_malloc: stp x29, x30, [sp, #-64]!; mov x29, sp; stp x23, x24, [sp, #48];
        // adrp x23, ...: the store of x30 comes first, so the entry is stepped.
        let malloc = code(&[0xa9bc7bfd, 0x910003fd, 0xa90363f7, 0x900008b7]);
        assert_eq!(place(&malloc, 0x92240, true), (0, false, "stp"));
        // __libc_calloc: stp x29, x30, [sp, #-80]!; umulh x2, x0, x1; ...
        let calloc = code(&[0xa9bb7bfd, 0x9bc17c02, 0x910003fd, 0xa90153f3]);
        assert_eq!(place(&calloc, 0x93380, true), (0, false, "stp"));
        // __libc_realloc: stp x29, x30, [sp, #-112]!; mov x29, sp; ...
        let realloc = code(&[0xa9b97bfd, 0x910003fd, 0xa9046bf9, 0x900008ba]);
        assert_eq!(place(&realloc, 0x92c70, true), (0, false, "stp"));
    }

    #[test]
    fn debian_bookworm_free_is_simulated_at_its_entry() {
        // __libc_free: cbz x0, 92ad4 <__libc_free+0x110>; stp x29, x30, [sp, #-64]!
        let free = code(&[0xb4000880, 0xa9bc7bfd, 0x910003fd]);
        assert_eq!(place(&free, 0x929c4, true), (0, true, "cbz"));
        assert_eq!(branch_target(0xb4000880, 0x929c4), Some(0x92ad4));
    }

    #[test]
    fn debian_bookworm_operator_new_and_delete() {
        // _Znwm: stp x29, x30, [sp, #-32]!; cmp x0, #0x0; mov x29, sp; str x19, [sp, #16]
        let new = code(&[0xa9be7bfd, 0xf100001f, 0x910003fd, 0xf9000bf3]);
        assert_eq!(place(&new, 0xa2c90, true), (0, false, "stp"));
        // _ZdlPv: b 9d230 <free@plt>; nop; nop; nop
        let delete = code(&[0x17fff164, 0xd503201f, 0xd503201f, 0xd503201f]);
        assert_eq!(place(&delete, 0xa0ca0, true), (0, true, "b"));
        assert_eq!(branch_target(0x17fff164, 0xa0ca0), Some(0x9d230));
    }

    // Debian 13 (libc6 2.41-12+deb13u5, libstdc++6 14.2) builds with PAC and BTI
    // (-mbranch-protection=standard): entries that return start with paciasp, others with bti c.

    #[test]
    fn debian_trixie_pac_entries_stay_on_paciasp() {
        // __libc_malloc: paciasp; stp x29, x30, [sp, #-64]!; mov x29, sp; str x23, [sp, #48]
        let malloc = code(&[0xd503233f, 0xa9bc7bfd, 0x910003fd, 0xf9001bf7]);
        assert_eq!(place(&malloc, 0x977c4, true), (0, false, "paciasp"));
        // __libc_calloc: paciasp; stp x29, x30, [sp, #-80]!; umulh x2, x0, x1; mov x29, sp
        let calloc = code(&[0xd503233f, 0xa9bb7bfd, 0x9bc17c02, 0x910003fd]);
        assert_eq!(place(&calloc, 0x98dc4, true), (0, false, "paciasp"));
        // __libc_realloc: paciasp; stp x29, x30, [sp, #-112]!; mov x29, sp; stp x21, x22, ...
        let realloc = code(&[0xd503233f, 0xa9b97bfd, 0x910003fd, 0xa9025bf5]);
        assert_eq!(place(&realloc, 0x9844c, true), (0, false, "paciasp"));
        // _Znwm: paciasp; stp x29, x30, [sp, #-32]!; cmp x0, #0x0; mov x29, sp
        let new = code(&[0xd503233f, 0xa9be7bfd, 0xf100001f, 0x910003fd]);
        assert_eq!(place(&new, 0xaa0a0, true), (0, false, "paciasp"));
    }

    #[test]
    fn debian_trixie_free_and_delete_move_past_bti() {
        // __libc_free: bti c; cbz x0, 98278 <__libc_free+0x1d8>; paciasp; stp ...
        let free = code(&[0xd503245f, 0xb4000ea0, 0xd503233f, 0xa9b97bfd]);
        assert_eq!(place(&free, 0x980a0, true), (4, true, "cbz"));
        assert_eq!(branch_target(0xb4000ea0, 0x980a4), Some(0x98278));
        // _ZdlPv: bti c; b 9fe70 <free@plt>; nop; nop
        let delete = code(&[0xd503245f, 0x17ffe0b3, 0xd503201f, 0xd503201f]);
        assert_eq!(place(&delete, 0xa7ba0, true), (4, true, "b"));
        assert_eq!(branch_target(0x17ffe0b3, 0xa7ba4), Some(0x9fe70));
    }

    #[test]
    fn bti_is_stepped_over_to_a_simulated_branch() {
        // A BTI-built free: bti c; cbz x0, +0x100; stp x29, x30, [sp, #-64]!
        let free = code(&[0xd503245f, 0xb4000800, 0xa9bc7bfd]);
        assert_eq!(place(&free, 0x1000, true), (4, true, "cbz"));
        // Unknown size: a branch into the skipped range cannot be ruled out.
        assert_eq!(place(&free, 0x1000, false), (0, false, "bti"));
        // A loop back onto the site: b.ne to 0x1004 from 0x1008.
        let looping = code(&[0xd503245f, 0xb4000800, 0x54ffffe1]);
        assert_eq!(branch_target(0x54ffffe1, 0x1008), Some(0x1004));
        assert_eq!(place(&looping, 0x1000, true), (0, false, "bti"));
    }

    #[test]
    fn paciasp_and_the_prologue_are_never_stepped_over() {
        // A PAC-built malloc: paciasp; stp x29, x30, [sp, #-64]!; ...; the probe stays on
        // paciasp (moving past it would leave a return probe a signed x30 to replace).
        let malloc = code(&[0xd503233f, 0xa9bc7bfd, 0x910003fd]);
        assert_eq!(place(&malloc, 0x1000, true), (0, false, "paciasp"));
        // bti c; paciasp; cbz: stops at paciasp, so the entry.
        let both = code(&[0xd503245f, 0xd503233f, 0xb4000800]);
        assert_eq!(place(&both, 0x1000, true), (0, false, "bti"));
    }

    #[test]
    fn classes_match_objdump() {
        // Words and the mnemonic aarch64-linux-gnu-objdump prints for each.
        for (insn, name, simulated) in [
            (0x14000010u32, "b", true),
            (0x94000010, "bl", true),
            (0x54000081, "b.cond", true),
            (0xb4000080, "cbz", true),
            (0x35000080, "cbnz", true),
            (0x36080080, "tbz", true),
            (0xb7f81973, "tbnz", true),
            (0xd61f0220, "br", true),
            (0xd63f0220, "blr", true),
            (0xd65f03c0, "ret", true),
            (0x10000080, "adr", true),
            (0x900008b7, "adrp", true),
            (0x58000080, "ldr", true),
            (0x98000080, "ldrsw", true),
            (0xd503201f, "nop", false),
            (0xd503245f, "bti", false),
            (0xd503233f, "paciasp", false),
            (0xa9bc7bfd, "stp", false),
            (0x910003fd, "insn", false),
        ] {
            let class = classify(insn);
            assert_eq!(
                (class.name, class.simulated),
                (name, simulated),
                "{insn:#010x}"
            );
        }
    }
}
