//! Resident memory from the kernel's rmap functions (bpf/rmap.bpf.c, fentry), where the kernel
//! allows fentry: in the kernel matrix's guests (scripts/kernels.sh runs these there). On a
//! kernel that refuses fentry the recording says so once, and the tests that need the hooks say
//! why they skip; inside a matrix guest (virtme-ng) whose BTF has the rmap functions they fail
//! instead, since there the hooks must load.

mod common;

use common::{analyze, fixture, record, record_fixture, report_text, scratch_file, Recording};
use memtrack::format::{EventKind, RssMember};

const MIB: i64 = 1 << 20;
const UNAVAILABLE: &str = "rmap hooks unavailable";

/// Whether `rec` has rmap records; otherwise say why the test skips (or fail in a guest).
fn has_rmap(test: &str, rec: &Recording) -> bool {
    if rec.header.features.iter().any(|f| f == "rmap") {
        return true;
    }
    let why = rec
        .run
        .stderr
        .lines()
        .find(|l| l.contains(UNAVAILABLE))
        .unwrap_or("the recording has no rmap feature")
        .to_string();
    let guest = std::fs::read_to_string("/proc/cmdline").is_ok_and(|c| c.contains("virtme"));
    if guest && memtrack::preflight::rmap_hooks::choose_here().is_ok() {
        panic!("{test}: this guest's kernel has the rmap functions, yet: {why}");
    }
    eprintln!("skipped {test}: {why}");
    false
}

/// adds, removes (pages) of `member` for `pid`, inside [lo, hi) when given.
fn rmap_sums(
    rec: &Recording,
    pid: u32,
    member: RssMember,
    range: Option<(u64, u64)>,
) -> (i64, i64) {
    let (mut adds, mut removes) = (0i64, 0i64);
    for e in rec.events.iter().filter(|e| e.pid == pid) {
        if let EventKind::Rmap {
            member: m,
            pages,
            addr,
        } = e.kind
        {
            let inside = range.is_none_or(|(lo, hi)| addr >= lo && addr < hi);
            if m == member && inside {
                if pages > 0 {
                    adds += i64::from(pages);
                } else {
                    removes -= i64::from(pages);
                }
            }
        }
    }
    (adds, removes)
}

#[test]
fn rmap_unavailable_is_said_once_or_rmap_is_recorded() {
    skip_unless_recording!("rmap_unavailable_is_said_once_or_rmap_is_recorded");
    let rec = record_fixture("rmap-said-once", &[], "malloc_free", &["10"]);
    check!(rec, rec.code() == 0, "exit code");
    let said = rec.run.stderr.matches(UNAVAILABLE).count();
    let rmap_events = rec
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Rmap { .. }))
        .count();
    if rec.header.features.iter().any(|f| f == "rmap") {
        check!(rec, said == 0, "rmap loaded, yet said unavailable");
        check!(rec, rmap_events > 0, "rmap loaded, no rmap events");
    } else {
        check!(rec, said == 1, "said {said} times that rmap is unavailable");
        check!(rec, rmap_events == 0, "rmap events without the feature");
        // The line says why and what it would need.
        let line = rec.run.stderr.lines().find(|l| l.contains(UNAVAILABLE));
        check!(
            rec,
            line.is_some_and(|l| l.contains("fentry") && l.contains("rss_stat alone")),
            "the line names fentry and the fallback: {line:?}"
        );
    }
}

/// The seed's contract: the child unmaps the 32 MiB it inherited; its anon rmap net is at most
/// -24 MiB, with no adds inside the region, and the report shows the net unclamped.
#[test]
fn rmap_fork_inherited_unmap_contract() {
    skip_unless_recording!("rmap_fork_inherited_unmap_contract");
    let side = scratch_file("rmap-contract.status");
    let exe = fixture("rss/fork_unmap_inherited");
    let rec = common::record_with_env(
        "rmap-contract",
        &[],
        &[exe.to_str().unwrap()],
        &[("MEMTRACK_STATUS_FILE", side.as_os_str())],
    );
    check!(rec, rec.code() == 0, "exit code");
    if !has_rmap("rmap_fork_inherited_unmap_contract", &rec) {
        return;
    }
    let root = rec.header.root_pid;
    let child = rec
        .forks()
        .iter()
        .find(|(p, _)| *p == root)
        .map(|(_, c)| *c)
        .expect("the fixture forks");
    // The region: the child's 32 MiB munmap.
    let region = rec
        .events
        .iter()
        .filter(|e| e.pid == child)
        .find_map(|e| match e.kind {
            EventKind::Munmap { addr, len } if len == 32 << 20 => Some((addr, addr + len)),
            _ => None,
        });
    let Some(region) = region else {
        panic!("no 32 MiB munmap of the child\n{}", rec.describe());
    };
    let page = i64::from(rec.header.page_size_bytes);
    let (adds_in, removes_in) = rmap_sums(&rec, child, RssMember::Anon, Some(region));
    let (adds, removes) = rmap_sums(&rec, child, RssMember::Anon, None);
    eprintln!(
        "child {child}: anon adds {adds}, removes {removes}, net {} pages; in the region: adds \
         {adds_in}, removes {removes_in}",
        adds - removes
    );
    check!(rec, adds_in == 0, "child's adds in the region: {adds_in}");
    check!(
        rec,
        removes_in * page >= 24 * MIB,
        "child's removes in the region: {removes_in} pages"
    );
    check!(
        rec,
        (adds - removes) * page <= -24 * MIB,
        "child's anon net {} pages",
        adds - removes
    );
    // The report: the child's net unclamped, its inherited unmapped pages counted apart.
    let report = analyze(&rec.header, rec.events.iter().cloned(), Some(&rec.end));
    check!(
        rec,
        report.complete,
        "nothing lost: {:?}",
        report.lost_events
    );
    let rmap = report.rmap.as_ref().expect("an rmap section");
    let p = rmap.processes.iter().find(|p| p.pid == child).unwrap();
    let anon = p.kinds.iter().find(|k| k.kind == "anon").unwrap();
    check!(rec, anon.net_pages == adds - removes, "report net {anon:?}");
    check!(
        rec,
        anon.inherited_unmapped_pages as i64 >= removes_in,
        "inherited since unmapped {anon:?}"
    );
    let text = report_text(&rec.path, &[], None);
    let want = format!("net {}", adds - removes);
    check!(
        rec,
        text.contains(&want),
        "text report shows {want}:\n{text}"
    );
}

/// rmap-derived resident pages (rss_stat's inherited baseline plus the rmap net) equal
/// rss_stat's at the end, per process and kind, on the example and on a fork/exec tree.
#[test]
fn rmap_resident_equals_rss_stat() {
    skip_unless_recording!("rmap_resident_equals_rss_stat");
    let target = fixture("malloc_free");
    let example = fixture("example");
    // A few pages; before 6.2 up to a task's rss batch (memtrack::preflight::rmap_hooks::rss_counters_lag).
    let within = if memtrack::preflight::rmap_hooks::rss_counters_lag() {
        64
    } else {
        8
    };
    for rec in [
        record("rmap-example", &[], &[example.to_str().unwrap()]),
        record_fixture(
            "rmap-fork-tree",
            &[],
            "fork_tree",
            &[target.to_str().unwrap()],
        ),
    ] {
        check!(rec, rec.code() == 0, "exit code");
        if !has_rmap("rmap_resident_equals_rss_stat", &rec) {
            return;
        }
        let report = analyze(&rec.header, rec.events.iter().cloned(), Some(&rec.end));
        check!(
            rec,
            report.complete,
            "nothing lost: {:?}",
            report.lost_events
        );
        let rmap = report.rmap.as_ref().expect("an rmap section");
        check!(rec, !rmap.processes.is_empty(), "processes");
        for p in &rmap.processes {
            for k in &p.kinds {
                eprintln!(
                    "pid {} {}: adds {} removes {} net {} inherited {:?} rmap {:?} rss_stat {:?}",
                    p.pid,
                    k.kind,
                    k.adds_pages,
                    k.removes_pages,
                    k.net_pages,
                    k.inherited_pages,
                    k.rmap_resident_pages,
                    k.rss_stat_pages
                );
                let diff = k.difference_pages.expect("both sources");
                check!(
                    rec,
                    diff.abs() <= within,
                    "pid {} {}, within {within} pages: {k:?}",
                    p.pid,
                    k.kind
                );
            }
        }
    }
}

/// A 16 MiB file the fixture maps and reads is resident under its name in the by-mapping view
/// at the process's rmap peak (as shmem where the scratch directory is tmpfs, in the guests).
#[test]
fn rmap_mapped_file_appears_under_its_path() {
    skip_unless_recording!("rmap_mapped_file_appears_under_its_path");
    let path = common::scratch_dir().join("rmap-16mib.data");
    let side = scratch_file("rmap-file.status");
    let exe = fixture("rmap/file");
    let rec = common::record_with_env(
        "rmap-file",
        &[],
        &[exe.to_str().unwrap(), path.to_str().unwrap()],
        &[("MEMTRACK_STATUS_FILE", side.as_os_str())],
    );
    check!(rec, rec.code() == 0, "exit code");
    if !has_rmap("rmap_mapped_file_appears_under_its_path", &rec) {
        return;
    }
    let report = analyze(&rec.header, rec.events.iter().cloned(), Some(&rec.end));
    let rmap = report.rmap.as_ref().expect("an rmap section");
    let root = rec.header.root_pid;
    let p = rmap.processes.iter().find(|p| p.pid == root).unwrap();
    eprintln!("by mapping at the peak: {:?}", p.by_mapping);
    let file = p
        .by_mapping
        .iter()
        // "shmem PATH" where the scratch directory is on tmpfs (the guests' overlay).
        .find(|r| r.region.trim_start_matches("shmem ") == path.to_str().unwrap());
    check!(
        rec,
        file.is_some_and(|r| r.bytes as i64 == 16 * MIB),
        "16 MiB under the file's path {}: {:?}",
        path.display(),
        p.by_mapping
    );
    let text = report_text(&rec.path, &[], None);
    check!(rec, text.contains("rmap-16mib.data 16.0 MiB"), "{text}");
}
