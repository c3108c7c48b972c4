//! Resident memory against the kernel's own numbers. Each fixture of `testdata/rss/` writes its
//! `/proc/thread-self/status` (VmHWM, RssAnon, RssFile, RssShmem) at checkpoints to a side
//! file; each test records it and compares memtrack's per-process estimate with those, within
//! 5% or 2 MiB. The contract of SPEC section 5 (removes may exceed adds per pid; a child starts
//! from the baseline it inherited at fork; estimates are never floored) is asserted on the
//! stream and on the report.

mod common;

use std::collections::HashMap;
use std::path::PathBuf;

use common::{
    analyze, fixture, record_with_env, scratch_dir, scratch_file, ProcessMetrics, Recording, Report,
};
use memtrack::format::{EventKind, RssMember};

const MIB: i64 = 1 << 20;

/// One line of a fixture's side file, sizes in bytes.
#[derive(Debug, Clone)]
struct Checkpoint {
    pid: u32,
    hwm: i64,
    anon: i64,
    file: i64,
    shmem: i64,
}

/// A recording of an rss fixture, its report, and what the fixture read from /proc at each
/// checkpoint.
struct RssRun {
    rec: Recording,
    report: Report,
    checkpoints: HashMap<String, Checkpoint>,
}

impl RssRun {
    fn process(&self, pid: u32) -> &ProcessMetrics {
        self.report
            .processes
            .iter()
            .find(|p| p.pid == pid)
            .unwrap_or_else(|| panic!("pid {pid} not in the report\n{}", self.rec.describe()))
    }

    fn checkpoint(&self, name: &str) -> &Checkpoint {
        self.checkpoints
            .get(name)
            .unwrap_or_else(|| panic!("no checkpoint {name}\n{}", self.rec.describe()))
    }

    /// memtrack's peak resident (anon + file + shmem) of `pid`, bytes.
    fn peak(&self, pid: u32) -> i64 {
        self.process(pid)
            .own
            .resident
            .as_ref()
            .map_or(0, |r| r.peak_bytes as i64)
    }

    /// memtrack's peak of one member of `pid`, bytes.
    fn member_peak(&self, pid: u32, member: &str) -> i64 {
        self.member(pid, member).peak_bytes as i64
    }

    fn member(&self, pid: u32, member: &str) -> &common::MemberResident {
        self.process(pid)
            .own
            .resident
            .as_ref()
            .and_then(|r| r.members.iter().find(|m| m.member == member))
            .unwrap_or_else(|| panic!("no {member} for {pid}\n{}", self.rec.describe()))
    }

    /// Sum of the signed Rss deltas of `pid` for `member` made by the process itself, split
    /// into adds and removes, pages.
    fn own_changes(&self, pid: u32, member: RssMember) -> (i64, i64) {
        let mut adds = 0;
        let mut removes = 0;
        for e in self.rec.events.iter().filter(|e| e.pid == pid) {
            if let EventKind::Rss {
                member: m,
                delta_pages,
                by_owner: true,
                ..
            } = e.kind
            {
                if m == member {
                    if delta_pages > 0 {
                        adds += delta_pages;
                    } else {
                        removes -= delta_pages;
                    }
                }
            }
        }
        (adds, removes)
    }
}

/// Whether `got` is within 5% or 2 MiB of `want`.
fn close(got: i64, want: i64) -> bool {
    (got - want).abs() <= (want / 20).max(2 * MIB)
}

macro_rules! near {
    ($run:expr, $got:expr, $want:expr, $what:expr) => {{
        let (got, want) = ($got, $want);
        assert!(
            close(got, want),
            "{}: memtrack {:.1} MiB, kernel {:.1} MiB\n{}",
            $what,
            got as f64 / MIB as f64,
            want as f64 / MIB as f64,
            $run.rec.describe()
        );
    }};
}

/// Record the fixture `testdata/rss/NAME.c` with `args`, and read back its checkpoints.
fn record_rss(name: &str, args: &[&str]) -> RssRun {
    let exe = fixture(&format!("rss/{name}"));
    // Tests may run one fixture with different arguments at the same time.
    let tag = format!(
        "rss-{name}{}",
        args.first()
            .map_or(String::new(), |a| format!("-{}", a.len()))
    );
    let side = scratch_file(format!("{tag}.status"));
    let mut command = vec![exe.to_str().unwrap().to_string()];
    command.extend(args.iter().map(|s| s.to_string()));
    let command: Vec<&str> = command.iter().map(String::as_str).collect();
    let rec = record_with_env(
        &tag,
        &[],
        &command,
        &[("MEMTRACK_STATUS_FILE", side.as_os_str())],
    );
    let report = analyze(&rec.header, rec.events.iter().cloned(), Some(&rec.end));
    let text = std::fs::read_to_string(&side).unwrap_or_default();
    let checkpoints = text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let kb = |i: usize| {
                f.get(i)
                    .and_then(|v| v.parse::<i64>().ok())
                    .map(|v| v * 1024)
            };
            Some((
                f.first()?.to_string(),
                Checkpoint {
                    pid: f.get(1)?.parse().ok()?,
                    hwm: kb(2)?,
                    anon: kb(3)?,
                    file: kb(4)?,
                    shmem: kb(5)?,
                },
            ))
        })
        .collect();
    RssRun {
        rec,
        report,
        checkpoints,
    }
}

/// A file on disk (not tmpfs) for the file-backed fixtures.
fn disk_file(name: &str) -> PathBuf {
    scratch_dir().join(name)
}

#[test]
fn anon_64_mib() {
    skip_unless_recording!("anon_64_mib");
    let r = record_rss("anon", &["64"]);
    let c = r.checkpoint("anon").clone();
    assert_eq!(r.rec.code(), 0, "{}", r.rec.describe());
    near!(r, r.peak(c.pid), c.hwm, "peak vs VmHWM");
    near!(
        r,
        r.member_peak(c.pid, "anon"),
        c.anon,
        "anon peak vs RssAnon"
    );
    assert!(r.report.complete, "{}", r.rec.describe());
}

#[test]
fn file_mapping_64_mib() {
    skip_unless_recording!("file_mapping_64_mib");
    let path = disk_file("rss-file.data");
    let r = record_rss("file", &[path.to_str().unwrap()]);
    let c = r.checkpoint("file").clone();
    near!(
        r,
        r.member_peak(c.pid, "file"),
        c.file,
        "file peak vs RssFile"
    );
    assert!(c.file >= 64 * MIB, "the fixture mapped 64 MiB: {c:?}");
    near!(r, r.peak(c.pid), c.hwm, "peak vs VmHWM");
}

#[test]
fn shmem_memfd_32_mib() {
    skip_unless_recording!("shmem_memfd_32_mib");
    let r = record_rss("shmem", &[]);
    let c = r.checkpoint("shmem").clone();
    near!(
        r,
        r.member_peak(c.pid, "shmem"),
        c.shmem,
        "shmem peak vs RssShmem"
    );
    assert!(c.shmem >= 32 * MIB, "{c:?}");
    near!(r, r.peak(c.pid), c.hwm, "peak vs VmHWM");
}

#[test]
fn fork_child_touches_more() {
    skip_unless_recording!("fork_child_touches_more");
    let r = record_rss("fork", &[]);
    let parent = r.checkpoint("parent").clone();
    let child = r.checkpoint("child").clone();
    near!(r, r.peak(parent.pid), parent.hwm, "parent peak vs VmHWM");
    near!(r, r.peak(child.pid), child.hwm, "child peak vs VmHWM");
    // The child's baseline is what it inherited: the parent's 32 MiB.
    let baseline = r.member(child.pid, "anon").baseline_bytes.unwrap() as i64;
    near!(r, baseline, 32 * MIB, "child's anon baseline");
    // Tree peak: both alive at once, parent ~32 MiB + child ~64 MiB.
    let tree = r
        .process(parent.pid)
        .tree
        .resident
        .as_ref()
        .unwrap()
        .peak_bytes as i64;
    near!(r, tree, parent.hwm + child.hwm, "tree peak vs sum of both");
}

#[test]
fn fork_unmap_inherited_contract() {
    skip_unless_recording!("fork_unmap_inherited_contract");
    let r = record_rss("fork_unmap_inherited", &[]);
    let parent = r.checkpoint("parent-after").clone();
    let child = r.checkpoint("child-unmapped").clone();
    let page = r.rec.header.page_size_bytes as i64;
    let (adds, removes) = r.own_changes(child.pid, RssMember::Anon);
    // The child made no anon adds of its own worth speaking of (a few copy-on-write stack and
    // data pages), and its anon removes total at least about 24 MiB: removes exceed adds.
    assert!(
        adds * page < MIB,
        "child's own anon adds: {adds} pages\n{}",
        r.rec.describe()
    );
    assert!(
        removes * page >= 24 * MIB,
        "child's anon removes: {removes} pages"
    );
    let anon = r.member(child.pid, "anon");
    near!(
        r,
        anon.baseline_bytes.unwrap() as i64,
        32 * MIB,
        "child's baseline"
    );
    assert_eq!(
        anon.min_bytes,
        Some(0),
        "the child's estimate never goes below zero"
    );
    assert_eq!(anon.removes_beyond_baseline_bytes, 0);
    near!(
        r,
        anon.end_bytes.unwrap(),
        child.anon,
        "child's anon after the unmap vs RssAnon"
    );
    // The parent is untouched by its child's unmapping.
    near!(r, r.peak(parent.pid), parent.hwm, "parent peak vs VmHWM");
    near!(
        r,
        r.member(parent.pid, "anon").end_bytes.unwrap(),
        parent.anon,
        "parent's anon"
    );
}

#[test]
fn fork_unmap_then_touch_peak_is_not_floored() {
    skip_unless_recording!("fork_unmap_then_touch_peak_is_not_floored");
    let r = record_rss("fork_unmap_inherited", &["touch"]);
    let child = r.checkpoint("child-touched").clone();
    // The child's high-water mark is the 32 MiB it inherited, not the 16 MiB it touched later:
    // flooring the estimate at zero after the unmap would report about 16 MiB.
    near!(r, r.peak(child.pid), child.hwm, "child peak vs VmHWM");
    assert!(child.hwm >= 32 * MIB, "{child:?}");
}

#[test]
fn thread_fork_charges_the_child() {
    skip_unless_recording!("thread_fork_charges_the_child");
    let r = record_rss("thread_fork", &[]);
    let parent = r.checkpoint("parent").clone();
    let child = r.checkpoint("child").clone();
    near!(r, r.peak(child.pid), child.hwm, "child peak vs VmHWM");
    assert!(child.hwm >= 64 * MIB);
    near!(r, r.peak(parent.pid), parent.hwm, "parent peak vs VmHWM");
    assert!(
        r.peak(parent.pid) < 16 * MIB,
        "the child's 64 MiB is not the parent's"
    );
}

#[test]
fn vfork_spawned_child_after_exec() {
    skip_unless_recording!("vfork_spawned_child_after_exec");
    let anon = fixture("rss/anon");
    let r = record_rss("vfork_spawn", &[anon.to_str().unwrap()]);
    let child = r.checkpoint("anon").clone();
    near!(
        r,
        r.peak(child.pid),
        child.hwm,
        "spawned child peak vs VmHWM"
    );
    assert!(child.hwm >= 32 * MIB);
}

#[test]
fn madvise_dontneed_then_touch_again() {
    skip_unless_recording!("madvise_dontneed_then_touch_again");
    let r = record_rss("madvise", &[]);
    let c = r.checkpoint("madvise").clone();
    near!(r, r.peak(c.pid), c.hwm, "peak vs VmHWM");
    assert!(r.peak(c.pid) < 80 * MIB, "peak is 64 MiB, not 96");
}

#[test]
fn leader_exit_worker_faults() {
    skip_unless_recording!("leader_exit_worker_faults");
    let r = record_rss("leader_exit", &[]);
    let c = r.checkpoint("worker").clone();
    near!(r, r.peak(c.pid), c.hwm, "peak vs VmHWM");
    let exits: Vec<usize> = r
        .rec
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.pid == c.pid && matches!(e.kind, EventKind::Exit { .. }))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(exits.len(), 1, "exactly one Exit\n{}", r.rec.describe());
    let last_rss = r
        .rec
        .events
        .iter()
        .rposition(|e| e.pid == c.pid && matches!(e.kind, EventKind::Rss { .. }))
        .unwrap();
    assert!(
        exits[0] > last_rss,
        "the Exit comes after the process's last change"
    );
}

#[test]
fn reclaim_by_another_task_is_charged_to_the_owner() {
    skip_unless_recording!("reclaim_by_another_task_is_charged_to_the_owner");
    let path = disk_file("rss-reclaim.data");
    let r = record_rss("reclaim", &[path.to_str().unwrap()]);
    if r.rec.code() == 77 {
        eprintln!("skipped reclaim: this kernel refused process_madvise(MADV_PAGEOUT)");
        return;
    }
    assert_eq!(r.rec.code(), 0, "{}", r.rec.describe());
    let before = r.checkpoint("parent-mapped").clone();
    let after = r.checkpoint("parent-reclaimed").clone();
    let page = r.rec.header.page_size_bytes as i64;
    let foreign_removes: i64 = r
        .rec
        .events
        .iter()
        .filter(|e| e.pid == before.pid)
        .filter_map(|e| match e.kind {
            EventKind::Rss {
                member: RssMember::File,
                delta_pages,
                by_owner: false,
                ..
            } if delta_pages < 0 => Some(-delta_pages * page),
            _ => None,
        })
        .sum();
    let dropped = before.file - after.file;
    assert!(
        dropped >= 16 * MIB,
        "the kernel paged out the parent's file pages: {before:?} {after:?}"
    );
    near!(
        r,
        foreign_removes,
        dropped,
        "decrease charged to the parent, made by another task"
    );
    near!(
        r,
        r.member(before.pid, "file").end_bytes.unwrap(),
        after.file,
        "parent's file at the end"
    );
}
