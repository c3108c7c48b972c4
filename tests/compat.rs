//! Files from every released format version stay readable: each sample in `testdata/compat/`
//! is read and its contents checked exactly. Add a sample whenever the format version changes.

mod common;

use std::path::Path;

use common::{alloc_sizes, analyze};
use memtrack::format::{Coverage, EventKind, ReadEnd, Reader};

fn sample(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/compat")
        .join(name)
}

/// Format version 1, written by memtrack 0.1.0: `malloc_free 10 3` (10 blocks of 10007 bytes,
/// freed, one leaked block of 10009, the calloc'd array of 80 bytes, exit code 3), with rss.
#[test]
fn v1_malloc_free_reads_exactly() {
    let mut reader = Reader::open(&sample("v1-malloc_free.mt")).unwrap();
    let header = reader.header().clone();
    assert_eq!(header.memtrack_version, "0.1.0");
    assert_eq!(header.argv[1..], ["10".to_string(), "3".to_string()]);
    assert_eq!(header.page_size_bytes, 4096);
    assert!(header.features.contains(&"rss".to_string()));
    let events: Vec<_> = reader.by_ref().collect();
    let Some(ReadEnd::Complete(trailer)) = reader.end().cloned() else {
        panic!("v1 sample no longer reads completely: {:?}", reader.end());
    };
    assert_eq!(trailer.events, events.len() as u64);
    assert_eq!(trailer.exit_code, 3);
    assert!(trailer.lost.is_empty());

    let sizes = alloc_sizes(&events);
    assert_eq!(sizes.iter().filter(|&&s| s == 10007).count(), 10);
    assert_eq!(sizes.iter().filter(|&&s| s == 10009).count(), 1);
    assert_eq!(sizes.len(), 12, "{sizes:?}");

    let report = analyze(&header, events.iter().cloned(), reader.end());
    assert!(report.complete);
    assert_eq!(report.totals.heap.allocs, 12);
    assert_eq!(report.totals.heap.frees, 11);
    assert_eq!(report.totals.heap.bytes_allocated, 80 + 10 * 10007 + 10009);
    assert_eq!(report.totals.heap.leaked.blocks, 1);
    assert_eq!(report.totals.heap.leaked.bytes, 10009);
    assert_eq!(report.totals.heap.peak_live_bytes, 80 + 10 * 10007);
    assert_eq!(report.run.exit_code, Some(3));
    let resident = report
        .totals
        .resident
        .expect("the v1 sample has rss events");
    assert!(resident.peak_bytes > 0);
}

/// Format version 2, written by memtrack 0.1.0 with `--no-rss --control`:
/// `./harness ./worker` (testdata/control/harness.c), three benchmarks with known allocations,
/// a noise process, and 13 control commands.
#[test]
fn v2_control_reads_exactly() {
    use common::Blocks;
    use memtrack::format::{Bench, ControlCommand, FEATURE_CONTROL};

    let mut reader = Reader::open(&sample("v2-control.mt")).unwrap();
    assert_eq!(reader.format_version(), 2);
    let header = reader.header().clone();
    assert_eq!(header.memtrack_version, "0.1.0");
    assert_eq!(header.argv, ["./harness", "./worker"]);
    assert!(header.features.contains(&FEATURE_CONTROL.to_string()));
    let events: Vec<_> = reader.by_ref().collect();
    let Some(ReadEnd::Complete(trailer)) = reader.end().cloned() else {
        panic!("v2 sample no longer reads completely: {:?}", reader.end());
    };
    assert_eq!(trailer.events, events.len() as u64);
    assert_eq!(trailer.exit_code, 0);

    let commands: Vec<&ControlCommand> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Control { command } => Some(command),
            _ => None,
        })
        .collect();
    assert_eq!(commands.len(), 13);
    assert!(
        matches!(commands[0], ControlCommand::Bench(Bench { uri, .. }) if uri == "harness::own")
    );
    let paused = |size| {
        events
            .iter()
            .any(|e| matches!(e.kind, EventKind::Alloc { size: s, .. } if s == size))
    };
    assert!(!paused(21009) && !paused(22009));

    let report = analyze(&header, events.iter().cloned(), reader.end());
    assert!(report.complete);
    let got: Vec<(&str, u64, u64, u64, Blocks)> = report
        .benchmarks
        .iter()
        .map(|b| {
            let h = &b.metrics.heap;
            (
                b.uri.as_str(),
                h.allocs,
                h.bytes_allocated,
                h.frees,
                h.leaked,
            )
        })
        .collect();
    let leaked = |blocks, bytes| Blocks { blocks, bytes };
    assert_eq!(
        got,
        [
            ("harness::own", 10, 210_010, 4, leaked(6, 126_006)),
            ("harness::child", 6, 132_007, 5, leaked(1, 22_002)),
            ("harness::exec", 4, 92_006, 3, leaked(1, 23_003)),
        ]
    );
}

/// Format version 3, written by memtrack 0.1.0 with `--allocator` for the four pool functions
/// of testdata/alloc/pool.c (built with -DPOOL_STATIC): the `AllocFunc` numbers 18 to 21 that
/// version 3 appended, and the file's family "pool" in its coverage record.
#[test]
fn v3_pool_reads_exactly() {
    use memtrack::format::AllocFunc;

    let mut reader = Reader::open(&sample("v3-pool.mt")).unwrap();
    assert_eq!(reader.format_version(), 3);
    let events: Vec<_> = reader.by_ref().collect();
    let Some(ReadEnd::Complete(trailer)) = reader.end().cloned() else {
        panic!("v3 sample no longer reads completely: {:?}", reader.end());
    };
    assert_eq!(trailer.events, events.len() as u64);
    let count = |f: AllocFunc| {
        events
            .iter()
            .filter(|e| match e.kind {
                EventKind::Alloc { func, .. }
                | EventKind::Realloc { func, .. }
                | EventKind::Free { func, .. } => func == f,
                _ => false,
            })
            .count()
    };
    assert_eq!(
        [
            count(AllocFunc::CustomAlloc),
            count(AllocFunc::CustomCalloc),
            count(AllocFunc::CustomRealloc),
            count(AllocFunc::CustomFree),
        ],
        [5, 2, 1, 6]
    );
    assert!(events.iter().any(|e| matches!(&e.kind,
        EventKind::Coverage(Coverage { path, allocator, probes: 7 })
            if path.ends_with("pool_static") && allocator == "pool")));
}

/// Format version 4, written by memtrack 0.1.0 with `--stacks --no-rss`: `malloc_free 10 3`
/// (testdata/malloc_free.c built -O2 -g), with its call stacks, modules and symbols. The sites
/// must come back with their numbers and frames named as they were when it was written.
#[test]
fn v4_stacks_reads_exactly() {
    use memtrack::analyze::stacks::SiteOptions;
    use memtrack::model::metrics::Scope;

    let mut reader = Reader::open(&sample("v4-stacks.mt")).unwrap();
    assert_eq!(reader.format_version(), 4);
    let header = reader.header().clone();
    assert_eq!(header.argv[1..], ["10".to_string(), "3".to_string()]);
    assert!(header.features.contains(&"stacks".to_string()));
    let events: Vec<_> = reader.by_ref().collect();
    let Some(ReadEnd::Complete(trailer)) = reader.end().cloned() else {
        panic!("v4 sample no longer reads completely: {:?}", reader.end());
    };
    assert_eq!(trailer.events, events.len() as u64);
    assert_eq!(trailer.exit_code, 3);

    let options = SiteOptions {
        top: 0,
        ..SiteOptions::default()
    };
    let report = memtrack::analyze::accounting::analyze_sites(
        &header,
        events.iter().cloned(),
        reader.end(),
        &Scope::Run,
        options,
    );
    assert!(report.complete);
    let stacks = report.stacks.expect("sites were asked for");
    assert!(stacks.recorded);
    assert_eq!(stacks.peak_live_bytes, 80 + 10 * 10007);
    let walks = stacks.walks.expect("the sample has the walk counters");
    assert_eq!((walks.walks, walks.truncated, walks.unknown), (12, 0, 0));
    let sites: Vec<(u64, u64, u64, u64, Vec<&str>)> = stacks
        .sites
        .iter()
        .map(|s| {
            let frames = s.frames.iter().map(|f| f.function.as_str()).take(3);
            (
                s.allocations,
                s.allocated_bytes,
                s.peak_live_bytes,
                s.leaked_bytes,
                frames.collect(),
            )
        })
        .collect();
    let start = ["main", "__libc_start_call_main"];
    assert_eq!(
        sites,
        [
            (
                10,
                100_070,
                100_070,
                0,
                [&["__GI___libc_malloc"][..], &start].concat()
            ),
            (1, 80, 80, 0, [&["__libc_calloc"][..], &start].concat()),
            (
                1,
                10_009,
                0,
                10_009,
                [&["__GI___libc_malloc"][..], &start].concat()
            ),
        ]
    );
    let main_lines: Vec<u32> = stacks.sites.iter().map(|s| s.frames[1].line).collect();
    assert_eq!(main_lines, [13, 9, 17], "testdata/malloc_free.c's lines");
}

/// Format version 5, written by memtrack 0.1.0 with `--stacks --no-rss`: `./leaks`
/// (testdata/leaks/leaks.c built as tests/common builds fixtures: `cc -O2 -g -Wall -Werror
/// -pthread -I testdata/leaks`), with a `LeakScan` record for the parent and its forked child.
/// Made with:
///
///     cc -O2 -g -Wall -Werror -pthread -o leaks -I testdata/leaks testdata/leaks/leaks.c
///     memtrack record --stacks --no-rss -q -o v5-leaks.mt -- ./leaks
///
/// Its scans, the report's lost/reachable split and the lost sites must read back as written;
/// a suppression must match the lost sites' frames.
#[test]
fn v5_leak_scan_reads_exactly() {
    use memtrack::analyze::accounting::Accounting;
    use memtrack::analyze::stacks::{SiteOptions, SiteOrder};
    use memtrack::analyze::suppress::Suppressions;
    use memtrack::format::{LeakScan, FEATURE_LEAK_SCAN};
    use memtrack::model::metrics::Scope;

    let mut reader = Reader::open(&sample("v5-leaks.mt")).unwrap();
    assert_eq!(reader.format_version(), 5);
    let header = reader.header().clone();
    assert_eq!(header.argv, ["./leaks"]);
    assert!(header.features.contains(&FEATURE_LEAK_SCAN.to_string()));
    assert!(header.features.contains(&"stacks".to_string()));
    let events: Vec<_> = reader.by_ref().collect();
    let Some(ReadEnd::Complete(trailer)) = reader.end().cloned() else {
        panic!("v5 sample no longer reads completely: {:?}", reader.end());
    };
    assert_eq!(trailer.events, events.len() as u64);
    assert_eq!(trailer.exit_code, 0);

    // The two scans: the child (forked first, exits first) and the parent.
    let scans: Vec<(u32, &LeakScan)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::LeakScan(s) => Some((e.pid, s)),
            _ => None,
        })
        .collect();
    let counts: Vec<_> = scans
        .iter()
        .map(|(pid, s)| {
            (
                *pid,
                s.failure.as_str(),
                s.threads,
                s.registers,
                (s.lost_blocks, s.lost_bytes),
                (s.reachable_blocks, s.reachable_bytes),
                s.lost.len(),
            )
        })
        .collect();
    let root = header.root_pid;
    assert_eq!(
        counts,
        [
            (root + 1, "", 1, 1, (1, 1008), (1, 1009), 1),
            (root, "", 3, 3, (4, 4022), (7, 8656), 4),
        ]
    );
    assert_eq!(scans[1].1.scanned_bytes, 120_584);

    let options = SiteOptions {
        order: SiteOrder::Leaked,
        top: 0,
        profile: false,
        functions: None,
    };
    let report = memtrack::analyze::accounting::analyze_sites(
        &header,
        events.iter().cloned(),
        reader.end(),
        &Scope::Run,
        options,
    );
    assert!(report.complete);
    let heap = &report.totals.heap;
    let leaks = heap.leaks.as_ref().expect("a recording with scans");
    assert_eq!(
        (leaks.definitely_lost.blocks, leaks.definitely_lost.bytes),
        (5, 5030)
    );
    assert_eq!((leaks.scanned_processes, leaks.unscanned_processes), (2, 0));
    assert_eq!(leaks.not_scanned.blocks, 0);
    assert_eq!(
        leaks.definitely_lost.bytes + leaks.still_reachable.bytes,
        heap.leaked.bytes
    );
    assert_eq!((heap.leaked.blocks, heap.leaked.bytes), (13, 14_695));
    let stacks = report.stacks.expect("sites were asked for");
    let lost: Vec<(u64, Vec<&str>)> = stacks
        .sites
        .iter()
        .filter(|s| s.lost_blocks > 0)
        .map(|s| {
            let frames = s.frames.iter().skip(1).map(|f| f.function.as_str()).take(2);
            (s.lost_bytes, frames.collect())
        })
        .collect();
    assert_eq!(
        lost,
        [
            (1010, vec!["loses", "start_thread"]),
            (1008, vec!["main", "__libc_start_call_main"]),
            (1006, vec!["cycle", "main"]),
            (1005, vec!["cycle", "main"]),
            (1001, vec!["main", "__libc_start_call_main"]),
        ]
    );

    // The lost sites' frames are what a suppression matches.
    let rules = Suppressions::parse("v5.supp", "leak:^cycle$\nleak:loses\n").unwrap();
    let mut accounting =
        Accounting::with_sites(&header, &Scope::Run, options).with_suppressions(rules);
    for e in &events {
        accounting.apply(e);
    }
    let report = accounting.finish(reader.end());
    let s = report.suppressions.expect("suppressions were given");
    let used: Vec<(u64, u64)> = s
        .rules
        .iter()
        .map(|r| (r.suppressed.blocks, r.suppressed.bytes))
        .collect();
    assert_eq!(used, [(2, 2011), (1, 1010)]);
    let leaks = report.totals.heap.leaks.expect("scans");
    assert_eq!(
        (leaks.definitely_lost.blocks, leaks.definitely_lost.bytes),
        (2, 2009)
    );
    assert_eq!((leaks.suppressed.blocks, leaks.suppressed.bytes), (3, 3021));
}

/// Format version 6, written by memtrack 0.1.0 in the kernel matrix's 6.12 guest (which allows
/// the rmap hooks): `malloc_free 10 3`, with rmap and rmap_region records. Its rmap
/// accounting, exactly as recorded: the root's anon and file sums, equal to rss_stat's.
#[test]
fn v6_rmap_reads_exactly() {
    let mut reader = Reader::open(&sample("v6-rmap.mt")).unwrap();
    let header = reader.header().clone();
    assert!(header.features.contains(&"rmap".to_string()));
    assert_eq!(header.kernel_release, "6.12.117+deb13-amd64");
    let events: Vec<_> = reader.by_ref().collect();
    let Some(ReadEnd::Complete(trailer)) = reader.end().cloned() else {
        panic!("v6 sample no longer reads completely: {:?}", reader.end());
    };
    assert_eq!(trailer.events, 459);
    assert_eq!(trailer.exit_code, 3);
    let rmaps = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Rmap { .. }))
        .count();
    let regions = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::RmapRegion(_)))
        .count();
    assert!(
        rmaps > 100 && regions > 5,
        "{rmaps} rmap, {regions} regions"
    );

    let report = analyze(&header, events.iter().cloned(), reader.end());
    assert_eq!(report.totals.heap.allocs, 12);
    assert_eq!(report.totals.heap.frees, 11);
    let rmap = report.rmap.expect("the v6 sample has rmap events");
    let p = &rmap.processes[0];
    assert_eq!(p.pid, header.root_pid);
    let sums: Vec<_> = p
        .kinds
        .iter()
        .map(|k| {
            (
                k.kind.as_str(),
                k.adds_pages,
                k.removes_pages,
                k.net_pages,
                k.rmap_resident_pages,
                k.difference_pages,
            )
        })
        .collect();
    assert_eq!(
        sums,
        [
            ("anon", 50, 16, 34, Some(39), Some(0)),
            ("file", 195, 49, 146, Some(161), Some(0)),
            ("shmem", 0, 0, 0, Some(0), Some(0)),
        ]
    );
    assert_eq!(p.peak_own_bytes, 720 << 10);
    let libc = p.by_mapping.iter().find(|r| r.region == "libc.so.6");
    assert_eq!(libc.map(|r| r.bytes), Some(472 << 10), "{:?}", p.by_mapping);
}

/// Format version 7, written by memtrack 0.1.0 on the development machine (Linux 6.18):
/// `malloc_free 10 3` with `--stacks`, whose 11 page faults each carry their stack (`Fault`
/// records). Its resident view, exactly as recorded: malloc's faults under main, the rest
/// unattributed (made before the walker was in place), adding up to the peak.
#[test]
fn v7_resident_reads_exactly() {
    let mut reader = Reader::open(&sample("v7-resident.mt")).unwrap();
    let events: Vec<_> = reader.by_ref().collect();
    let Some(ReadEnd::Complete(trailer)) = reader.end().cloned() else {
        panic!("v7 sample no longer reads completely: {:?}", reader.end());
    };
    assert_eq!(trailer.exit_code, 3);
    let faults: Vec<(u32, bool)> = events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Fault {
                pages,
                addr,
                stack_id,
                ..
            } => Some((pages, addr != 0 && stack_id != 0)),
            _ => None,
        })
        .collect();
    assert_eq!(faults, vec![(1, true); 11]);

    let out = std::process::Command::new(common::memtrack())
        .args(["report", "--format", "folded", "--view", "resident"])
        .arg(sample("v7-resident.mt"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let folded = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<(&str, u64)> = folded
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap())
        .map(|(s, v)| (s, v.parse().unwrap()))
        .collect();
    assert!(lines.contains(&(
        "[anon];_start;__libc_start_main_impl;__libc_start_call_main;main;__GI___libc_malloc;\
         _int_malloc",
        40960
    )));
    assert!(
        lines.contains(&("[anon];[unattributed]", 114688)),
        "{folded}"
    );
    assert_eq!(lines.iter().map(|l| l.1).sum::<u64>(), 1126400, "{folded}");
}
