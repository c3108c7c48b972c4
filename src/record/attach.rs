//! Where exactly a probe goes, and attaching a file's planned sites (`catalogue.rs` plans
//! them) to the BPF programs of `bpf/alloc.bpf.c`.
//!
//! Probes are placed by file offset (resolved by `symbols.rs`) on the file for every process
//! (pid -1): a uprobe belongs to the file's inode, so it fires in each process that maps it,
//! and the BPF side keeps only processes of the recorded tree. The attach cookie of each site
//! carries its label and argument layout, which `alloc_enter` dispatches on.

use std::path::{Path, PathBuf};

use crate::sys::bpf::{BpfError, Link, LoadedObject};

/// The BPF programs of `bpf/alloc.bpf.c`, named as there.
pub const ALLOC_ENTER: &str = "alloc_enter";
pub const ALLOC_EXIT: &str = "alloc_exit";
pub const FREE_ENTER: &str = "free_enter";

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
    first_existing(LIBC_PATHS)
}

/// Where distributions keep the dynamic loader (the PT_INTERP of their executables).
const LOADER_PATHS: &[&str] = &[
    "/lib64/ld-linux-x86-64.so.2",
    "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
    "/lib/ld-linux-aarch64.so.1",
    "/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1",
    "/lib/ld-linux-riscv64-lp64d.so.1",
];

/// The system's dynamic loader, resolved to its real path.
pub fn find_loader() -> Option<PathBuf> {
    first_existing(LOADER_PATHS)
}

fn first_existing(paths: &[&str]) -> Option<PathBuf> {
    paths
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

/// The sites to probe in one file: (file offset, cookie) pairs.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Sites {
    /// Entry sites of functions that return a block (alloc_enter, and alloc_exit on return).
    pub enter: Vec<(u64, u64)>,
    /// Function entry offsets for the return probes (a return probe must sit at the entry).
    pub exit: Vec<(u64, u64)>,
    /// Sites of the functions that release a block (free_enter).
    pub free: Vec<(u64, u64)>,
    /// Functions found, for the log.
    pub functions: Vec<&'static str>,
}

impl Sites {
    /// How many probes attaching these sites makes.
    pub fn probes(&self) -> usize {
        self.enter.len() + self.exit.len() + self.free.len()
    }
}

/// Attach `sites` of the file at `path` for every process: with one uprobe_multi link per
/// program, or, with `classic`, one perf-event uprobe per site (kernels before 6.6).
pub fn attach<'obj>(
    obj: &'obj LoadedObject,
    path: &Path,
    sites: &Sites,
    classic: bool,
) -> Result<Vec<Link<'obj>>, BpfError> {
    attach_scoped(obj, path, sites, classic, -1)
}

/// As [`attach`], for process `pid` alone (-1: every process). Pid-scoped links cost nothing to
/// other processes, but each new process would need its own, attached while it is held stopped;
/// `pid_scoped_attach_cost` below measures what that costs.
fn attach_scoped<'obj>(
    obj: &'obj LoadedObject,
    path: &Path,
    sites: &Sites,
    classic: bool,
    pid: i32,
) -> Result<Vec<Link<'obj>>, BpfError> {
    let path = path.to_string_lossy();
    let groups = [
        (ALLOC_ENTER, false, &sites.enter),
        (ALLOC_EXIT, true, &sites.exit),
        (FREE_ENTER, false, &sites.free),
    ];
    let mut links = Vec::new();
    for (prog, retprobe, group) in groups {
        if group.is_empty() {
            continue;
        }
        if classic {
            for &(offset, cookie) in group.iter() {
                links.push(obj.attach_uprobe(prog, retprobe, pid, &path, offset, cookie)?);
            }
        } else {
            links.push(obj.attach_uprobe_multi(prog, retprobe, pid, &path, group)?);
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

    /// The lever "pid-scoped versus machine-wide attach" of issue #7, measured with memtrack's
    /// real link set for glibc (empty programs): attaching and detaching it once for the
    /// machine, and once per process for processes that already run. Root only:
    /// `cargo test --release --lib -- --ignored --nocapture pid_scoped_attach_cost`.
    #[test]
    #[ignore]
    fn pid_scoped_attach_cost() {
        use crate::record::{catalogue, symbols::ElfSymbols};
        use crate::sys::{bpf::OpenObject, raw};
        use std::time::{Duration, Instant};

        const PROCESSES: usize = 40;
        if crate::sys::process::geteuid() != 0 {
            eprintln!("pid_scoped_attach_cost: SKIPPED, needs root to attach uprobes");
            return;
        }
        let libc = find_libc().expect("no glibc");
        let symbols = ElfSymbols::read_only(&libc, catalogue::wants).unwrap();
        let sites = catalogue::plan(&symbols).sites;
        let floor = OpenObject::open("floor", raw::FLOOR_BPF_OBJECT)
            .unwrap()
            .load()
            .unwrap();
        let median = |mut v: Vec<Duration>| {
            v.sort();
            format!(
                "{:.2?} (min {:.2?}, max {:.2?})",
                v[v.len() / 2],
                v[0],
                v[v.len() - 1]
            )
        };
        let timed = |pid: i32| {
            let start = Instant::now();
            let links = attach_scoped(&floor, &libc, &sites, false, pid).unwrap();
            let attached = start.elapsed();
            let start = Instant::now();
            drop(links);
            (attached, start.elapsed())
        };
        let (mut wide_attach, mut wide_detach) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            let (a, d) = timed(-1);
            wide_attach.push(a);
            wide_detach.push(d);
        }
        let mut children: Vec<_> = (0..PROCESSES)
            .map(|_| {
                std::process::Command::new("sleep")
                    .arg("60")
                    .spawn()
                    .unwrap()
            })
            .collect();
        std::thread::sleep(Duration::from_millis(200)); // each has mapped libc
        let (mut attach, mut detach) = (Vec::new(), Vec::new());
        for child in &children {
            let (a, d) = timed(child.id() as i32);
            attach.push(a);
            detach.push(d);
        }
        for child in &mut children {
            let _ = child.kill();
            let _ = child.wait();
        }
        eprintln!(
            "glibc, {} sites in 3 links; machine-wide: attach {}, detach {}",
            sites.probes(),
            median(wide_attach),
            median(wide_detach)
        );
        eprintln!(
            "per process ({PROCESSES} processes): attach {}, detach {}",
            median(attach),
            median(detach)
        );
    }

    #[test]
    fn never_skips_past_the_known_code() {
        assert_eq!(probe_site(&[0x48, 0x85, 0xff]), 0);
        assert_eq!(probe_site(&[0x80, 0x3d, 1, 2, 3, 4, 0]), 0);
    }
}
