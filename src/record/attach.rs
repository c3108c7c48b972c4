//! Which allocator entry points get which BPF program, where exactly the probe goes, and
//! attaching them.
//!
//! Probes are placed by file offset (resolved by `symbols.rs`) on the library file for every
//! process (pid -1): a uprobe belongs to the file's inode, so it fires in each process that maps
//! it, and the BPF side keeps only processes of the recorded tree. The attach cookie of each
//! site is the `enum alloc_func` of its function, which `alloc_enter` dispatches on. Two
//! symbols at one address (glibc's aligned_alloc and memalign) get one probe: two would count
//! one call twice.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::record::symbols::{ElfSymbols, FuncSymbol};
use crate::sys::bpf::{BpfError, Link, LoadedObject};
use crate::sys::raw::alloc_func;

/// The BPF programs of `bpf/alloc.bpf.c`, named as there.
pub const ALLOC_ENTER: &str = "alloc_enter";
pub const ALLOC_EXIT: &str = "alloc_exit";
pub const FREE_ENTER: &str = "free_enter";

/// glibc's allocator API and the function number each site reports. Order matters only for
/// symbols sharing an address: the first wins.
const GLIBC: &[(&str, alloc_func)] = &[
    ("malloc", alloc_func::FUNC_MALLOC),
    ("calloc", alloc_func::FUNC_CALLOC),
    ("realloc", alloc_func::FUNC_REALLOC),
    ("reallocarray", alloc_func::FUNC_REALLOCARRAY),
    ("aligned_alloc", alloc_func::FUNC_ALIGNED_ALLOC),
    ("memalign", alloc_func::FUNC_MEMALIGN),
    ("posix_memalign", alloc_func::FUNC_POSIX_MEMALIGN),
    ("valloc", alloc_func::FUNC_VALLOC),
    ("pvalloc", alloc_func::FUNC_PVALLOC),
];

/// Where distributions keep the C library; the first that exists is used.
const LIBC_PATHS: &[&str] = &[
    "/lib/x86_64-linux-gnu/libc.so.6",
    "/usr/lib/x86_64-linux-gnu/libc.so.6",
    "/lib/aarch64-linux-gnu/libc.so.6",
    "/usr/lib/aarch64-linux-gnu/libc.so.6",
    "/lib64/libc.so.6",
    "/usr/lib64/libc.so.6",
    "/usr/lib/libc.so.6",
    "/lib/libc.so.6",
];

/// The system's glibc, resolved to its real path.
pub fn find_libc() -> Option<PathBuf> {
    LIBC_PATHS
        .iter()
        .map(Path::new)
        .find(|p| p.exists())
        .and_then(|p| std::fs::canonicalize(p).ok())
}

/// Where to probe a function so that the kernel can emulate the probed instruction instead of
/// single-stepping it (about 1 µs against 10 µs here, KERNEL-FACTS.md), while the argument
/// registers and the stack pointer are still as they were at entry.
///
/// Skips leading instructions that read registers or memory and change neither (only the
/// flags): `test r64, r64` and `cmpb $imm8, disp32(%rip)`, glibc's usual first instructions of
/// free and of the aligned allocators. When unsure, the entry itself. x86_64 only.
pub fn probe_site(code: &[u8]) -> usize {
    if !cfg!(target_arch = "x86_64") {
        return 0;
    }
    let mut at = 0;
    for _ in 0..2 {
        let rest = &code[at.min(code.len())..];
        let len = match rest {
            // REX.W test r/m64, r64 with both operands registers (mod = 11).
            [0x48 | 0x49 | 0x4c | 0x4d, 0x85, modrm, ..] if modrm >> 6 == 0b11 => 3,
            // cmpb $imm8, disp32(%rip): opcode 80 /7, modrm 00 111 101.
            [0x80, 0x3d, _, _, _, _, _, ..] => 7,
            _ => break,
        };
        // Only skip when what follows is known code, so the site is an instruction boundary.
        if rest.len() <= len {
            break;
        }
        at += len;
    }
    at
}

/// The sites to probe in one library: (file offset, cookie) pairs.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Sites {
    /// Entry sites of functions that return a block (alloc_enter, and alloc_exit on return).
    pub enter: Vec<(u64, u64)>,
    /// Function entry offsets for the return probes (a return probe must sit at the entry).
    pub exit: Vec<(u64, u64)>,
    /// free's site.
    pub free: Option<u64>,
    /// Functions found, for the log.
    pub functions: Vec<&'static str>,
}

/// Plan the glibc sites of the library whose symbols are `symbols`.
pub fn glibc_sites(symbols: &ElfSymbols) -> Sites {
    let mut sites = Sites::default();
    let mut seen = HashSet::new();
    let site = |sym: FuncSymbol| sym.offset + probe_site(symbols.code(sym, 16)) as u64;
    for &(name, func) in GLIBC {
        let Some(sym) = symbols.get(name) else {
            continue;
        };
        if !seen.insert(sym.offset) {
            log::debug!("{name} shares its address with another entry point; probed once");
            continue;
        }
        sites.enter.push((site(sym), func as u64));
        sites.exit.push((sym.offset, func as u64));
        sites.functions.push(name);
    }
    if let Some(sym) = symbols.get("free") {
        sites.free = Some(site(sym));
        sites.functions.push("free");
    }
    sites
}

/// Attach `sites` of the library at `path`: with one uprobe_multi link per program, or, with
/// `classic`, one perf-event uprobe per site (kernels before 6.6).
pub fn attach<'obj>(
    obj: &'obj LoadedObject,
    path: &Path,
    sites: &Sites,
    classic: bool,
) -> Result<Vec<Link<'obj>>, BpfError> {
    let path = path.to_string_lossy();
    let free: Vec<(u64, u64)> = sites
        .free
        .iter()
        .map(|&o| (o, alloc_func::FUNC_FREE as u64))
        .collect();
    let groups = [
        (ALLOC_ENTER, false, &sites.enter),
        (ALLOC_EXIT, true, &sites.exit),
        (FREE_ENTER, false, &free),
    ];
    let mut links = Vec::new();
    for (prog, retprobe, group) in groups {
        if group.is_empty() {
            continue;
        }
        if classic {
            for &(offset, cookie) in group.iter() {
                links.push(obj.attach_uprobe(prog, retprobe, -1, &path, offset, cookie)?);
            }
        } else {
            links.push(obj.attach_uprobe_multi(prog, retprobe, -1, &path, group)?);
        }
    }
    Ok(links)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skips_glibc_free_test_instruction() {
        // test %rdi,%rdi; je ...
        assert_eq!(
            probe_site(&[0x48, 0x85, 0xff, 0x0f, 0x84, 0xbf, 0, 0, 0]),
            3
        );
    }

    #[test]
    fn skips_rip_relative_cmpb() {
        // cmpb $0x0,0x140201(%rip); push %r12
        assert_eq!(
            probe_site(&[0x80, 0x3d, 0x01, 0x02, 0x14, 0x00, 0x00, 0x41, 0x54]),
            7
        );
    }

    #[test]
    fn stays_at_entry_for_push_and_unknown_code() {
        assert_eq!(probe_site(&[0x41, 0x54, 0x55]), 0); // push %r12: emulated already
        assert_eq!(probe_site(&[0x48, 0x89, 0xf0]), 0); // mov: not known to be safe to skip
        assert_eq!(probe_site(&[]), 0);
    }

    #[test]
    fn test_with_memory_operand_is_not_skipped() {
        assert_eq!(probe_site(&[0x48, 0x85, 0x07, 0x74, 0x00]), 0); // test %rax,(%rdi)
    }

    #[test]
    fn never_skips_past_the_known_code() {
        assert_eq!(probe_site(&[0x48, 0x85, 0xff]), 0);
        assert_eq!(probe_site(&[0x80, 0x3d, 1, 2, 3, 4, 0]), 0);
    }

    #[test]
    fn glibc_plan_probes_each_address_once() {
        let Some(libc) = find_libc() else {
            eprintln!("skipped: no glibc at the usual paths");
            return;
        };
        let symbols = ElfSymbols::read(&libc).unwrap();
        let sites = glibc_sites(&symbols);
        let offsets: HashSet<u64> = sites.exit.iter().map(|s| s.0).collect();
        assert_eq!(offsets.len(), sites.exit.len(), "one probe per address");
        assert!(sites.functions.contains(&"malloc") && sites.functions.contains(&"free"));
        let free = symbols.get("free").unwrap().offset;
        assert!(sites.free.unwrap() >= free && sites.free.unwrap() < free + 8);
    }
}
