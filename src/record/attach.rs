//! Attaching a file's planned sites (`binary::catalogue` plans them, `binary::placement` says
//! where in each function) to the BPF programs of `bpf/alloc.bpf.c`.
//!
//! Probes are placed by file offset (resolved by `binary::symbols`) on the file for every process
//! (pid -1): a uprobe belongs to the file's inode, so it fires in each process that maps it,
//! and the BPF side keeps only processes of the recorded tree. The attach cookie of each site
//! carries its label and argument layout, which `alloc_enter` dispatches on.

use std::path::Path;

use crate::binary::Sites;
use crate::record::stacks::StackMode;
use crate::sys::bpf::{BpfError, Link, LoadedObject};

/// The BPF programs of `bpf/alloc.bpf.c`, named as there. The entry and return programs come in
/// two variants each, one of each loaded per recording (`load`): without stacks, or with the
/// walker's tail calls, which walk a sample of the stacks or every one.
pub const ALLOC_ENTER: &str = "alloc_enter";
pub const ALLOC_ENTER_SAMPLED: &str = "alloc_enter_sampled";
pub const ALLOC_EXIT: &str = "alloc_exit";
pub const ALLOC_EXIT_SAMPLED: &str = "alloc_exit_sampled";
pub const FREE_ENTER: &str = "free_enter";

/// The entry and return programs of the variants that a recording with `stacks` loads.
pub fn programs_for(stacks: StackMode) -> [&'static str; 2] {
    match stacks {
        StackMode::Off => [ALLOC_ENTER, ALLOC_EXIT],
        StackMode::All | StackMode::Sampled(_) => [ALLOC_ENTER_SAMPLED, ALLOC_EXIT_SAMPLED],
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
    // The entry and return programs `load` kept of the two of each.
    let [enter, exit] = if obj.has_loaded(ALLOC_ENTER_SAMPLED) {
        [ALLOC_ENTER_SAMPLED, ALLOC_EXIT_SAMPLED]
    } else {
        [ALLOC_ENTER, ALLOC_EXIT]
    };
    let groups = [
        (enter, false, &sites.enter),
        (exit, true, &sites.exit),
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

    /// The lever "pid-scoped versus machine-wide attach" of issue #7, measured with memtrack's
    /// real link set for glibc (empty programs): attaching and detaching it once for the
    /// machine, and once per process for processes that already run. Root only:
    /// `cargo test --release --lib -- --ignored --nocapture pid_scoped_attach_cost`.
    #[test]
    #[ignore]
    fn pid_scoped_attach_cost() {
        use crate::binary::{catalogue, find_libc, symbols::ElfSymbols};
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
}
