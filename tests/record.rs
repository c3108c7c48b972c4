//! `memtrack record` on real programs: every glibc allocation entry point, the process tree
//! (fork, vfork, exec, threads), exit statuses, and the file it leaves. Each test runs the real
//! recorder on a C fixture from `testdata/` and compares what the file says with what the
//! fixture did, exactly.

mod common;

use std::collections::HashSet;

use common::{fixture, record, record_fixture, run, run_command};
use memtrack::format::{AllocFunc, EventKind, ReadEnd};

fn addrs(events: &[&memtrack::format::Event]) -> HashSet<u64> {
    events
        .iter()
        .map(|e| match e.kind {
            EventKind::Alloc { addr, .. } | EventKind::Realloc { addr, .. } => addr,
            _ => unreachable!(),
        })
        .collect()
}

#[test]
fn malloc_and_free_are_recorded_exactly() {
    skip_unless_recording!("malloc_and_free_are_recorded_exactly");
    let exe = fixture("malloc_free");
    let rec = record("malloc_free", &[], &[exe.to_str().unwrap(), "1000"]);
    check!(rec, rec.code() == 0, "exit code");
    check!(
        rec,
        matches!(rec.end, ReadEnd::Complete(_)),
        "complete file"
    );
    let root = rec.header.root_pid;
    let blocks = rec.allocs_of_size(10007);
    check!(
        rec,
        blocks.len() == 1000,
        "1000 mallocs of 10007, got {}",
        blocks.len()
    );
    check!(
        rec,
        blocks.iter().all(|e| e.pid == root && e.tid == root),
        "all by the root thread"
    );
    check!(
        rec,
        blocks.iter().all(|e| matches!(
            e.kind,
            EventKind::Alloc {
                func: AllocFunc::Malloc,
                ..
            }
        )),
        "all malloc"
    );
    let live = addrs(&blocks);
    check!(
        rec,
        live.len() == 1000,
        "1000 distinct addresses (all live at once)"
    );
    check!(rec, rec.frees_in(root, &live) == 1000, "each freed once");
    check!(
        rec,
        rec.allocs_of_size(10009).len() == 1,
        "the leaked block"
    );
    check!(
        rec,
        rec.allocs_of_size(8000).len() == 1,
        "the calloc'd pointer array"
    );
    check!(rec, rec.lost() == 0, "no lost events");
    let exits = rec.exits();
    check!(
        rec,
        exits == vec![(root, 0)],
        "one Exit, status 0: {exits:?}"
    );
    let execs = rec.execs();
    check!(
        rec,
        execs.len() == 1
            && execs[0].0 == root
            && execs[0].2 == vec![exe.to_str().unwrap().to_string(), "1000".into()],
        "Exec with argv: {execs:?}"
    );
}

#[test]
fn timestamps_are_monotonic_clock_within_the_run() {
    skip_unless_recording!("timestamps_are_monotonic_clock_within_the_run");
    let rec = record_fixture("timestamps", &[], "malloc_free", &["10"]);
    let end = match &rec.end {
        ReadEnd::Complete(t) => t.end_monotonic_ns,
        other => panic!("incomplete: {other:?}"),
    };
    let start = rec.header.start_monotonic_ns;
    check!(
        rec,
        rec.events
            .iter()
            .all(|e| e.ts_ns >= start && e.ts_ns <= end),
        "every event between start {start} and end {end}"
    );
}

#[test]
fn calloc_realloc_reallocarray() {
    skip_unless_recording!("calloc_realloc_reallocarray");
    let rec = record_fixture("calloc_realloc", &[], "calloc_realloc", &[]);
    check!(rec, rec.code() == 0, "exit code");

    let callocs = rec.allocs_of_size(7063);
    check!(rec, callocs.len() == 5, "5 callocs of 7 x 1009");
    check!(
        rec,
        callocs.iter().all(|e| matches!(
            e.kind,
            EventKind::Alloc {
                func: AllocFunc::Calloc,
                ..
            }
        )),
        "labelled calloc"
    );
    check!(rec, callocs.iter().all(|a| rec.is_freed(a)), "each freed");
    check!(
        rec,
        rec.failures(AllocFunc::Calloc) == vec![u64::MAX],
        "overflowing calloc fails, size saturated"
    );

    // realloc(NULL, n): one allocation (glibc forwards it to malloc by tail call, so it may be
    // labelled either way), never two.
    let first = rec.allocs_of_size(20011);
    check!(
        rec,
        first.len() == 1,
        "realloc(NULL, 20011) is one allocation"
    );
    check!(
        rec,
        matches!(first[0].kind, EventKind::Alloc { .. }),
        "an Alloc, not a Realloc"
    );
    let grown = rec.allocs_of_size(30011);
    check!(rec, grown.len() == 1, "one resize to 30011");
    let EventKind::Realloc {
        old_addr,
        addr: new_addr,
        ..
    } = grown[0].kind
    else {
        panic!("not a Realloc: {:?}", grown[0]);
    };
    let EventKind::Alloc {
        addr: first_addr, ..
    } = first[0].kind
    else {
        unreachable!()
    };
    check!(rec, old_addr == first_addr, "resize names the old block");
    check!(
        rec,
        rec.failures(AllocFunc::Realloc) == vec![u64::MAX - 8192],
        "failing realloc"
    );
    let freed_by_realloc = rec
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Free { func: AllocFunc::Realloc, addr } if addr == new_addr))
        .count();
    check!(rec, freed_by_realloc == 1, "realloc(p, 0) is a free of p");

    check!(
        rec,
        rec.allocs_of_size(13169).len() == 1,
        "reallocarray(NULL, 13, 1013)"
    );
    let arr = rec.allocs_of_size(17221);
    check!(
        rec,
        arr.len() == 1 && matches!(arr[0].kind, EventKind::Realloc { .. }),
        "reallocarray resize"
    );
    check!(
        rec,
        rec.failures(AllocFunc::Reallocarray) == vec![u64::MAX],
        "overflowing reallocarray"
    );
    // Nothing counted twice: no free event for a block freed inside realloc.
    check!(rec, rec.lost() == 0, "no loss");
}

#[test]
fn aligned_allocators_and_a_failing_posix_memalign() {
    skip_unless_recording!("aligned_allocators_and_a_failing_posix_memalign");
    let rec = record_fixture("aligned", &[], "aligned", &[]);
    check!(rec, rec.code() == 0, "exit code");
    for size in [5120, 5003, 6007, 7001, 9001] {
        let a = rec.allocs_of_size(size);
        check!(
            rec,
            a.len() == 1,
            "one allocation of {size}, got {}",
            a.len()
        );
        check!(rec, rec.is_freed(a[0]), "{size} freed");
    }
    for (size, align) in [
        (5120u64, 256u64),
        (5003, 128),
        (6007, 64),
        (7001, 4096),
        (9001, 4096),
    ] {
        let a = addrs(&rec.allocs_of_size(size));
        check!(
            rec,
            a.iter().all(|x| x % align == 0),
            "{size} aligned to {align}"
        );
    }
    let EventKind::Alloc { func, .. } = rec.allocs_of_size(6007)[0].kind else {
        unreachable!()
    };
    check!(
        rec,
        func == AllocFunc::PosixMemalign,
        "posix_memalign labelled"
    );
    check!(
        rec,
        rec.failures(AllocFunc::PosixMemalign) == vec![6011],
        "EINVAL posix_memalign is a failure"
    );
    check!(
        rec,
        rec.allocs_of_size(6011).is_empty(),
        "and not an allocation"
    );
}

#[test]
fn allocation_in_a_constructor_before_main() {
    skip_unless_recording!("allocation_in_a_constructor_before_main");
    let rec = record_fixture("constructor", &[], "constructor", &[]);
    check!(rec, rec.code() == 0, "exit code");
    let early = rec.allocs_of_size(40009);
    check!(rec, early.len() == 1, "the constructor's malloc");
    check!(rec, rec.is_freed(early[0]), "freed in main");
}

#[test]
fn hundred_thousand_pairs_without_loss() {
    skip_unless_recording!("hundred_thousand_pairs_without_loss");
    let rec = record_fixture("churn", &[], "churn", &["100000", "77"]);
    check!(rec, rec.code() == 0, "exit code");
    let allocs = rec.allocs_of_size(77);
    check!(
        rec,
        allocs.len() == 100_000,
        "100000 mallocs of 77, got {}",
        allocs.len()
    );
    let frees = rec
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Free { .. }))
        .count();
    check!(rec, frees >= 100_000, "at least 100000 frees, got {frees}");
    check!(rec, rec.lost() == 0, "zero lost events");
    let ReadEnd::Complete(trailer) = &rec.end else {
        panic!("incomplete")
    };
    check!(
        rec,
        trailer.events == rec.events.len() as u64,
        "trailer counts every event"
    );
}

#[test]
fn fork_tree_with_exec() {
    skip_unless_recording!("fork_tree_with_exec");
    let target = fixture("malloc_free");
    let rec = record_fixture("fork_tree", &[], "fork_tree", &[target.to_str().unwrap()]);
    check!(rec, rec.code() == 0, "exit code");
    let root = rec.header.root_pid;
    let forks = rec.forks();
    check!(
        rec,
        forks.len() == 3 && forks.iter().all(|(p, _)| *p == root),
        "3 children of the root: {forks:?}"
    );
    let children: Vec<u32> = forks.iter().map(|(_, c)| *c).collect();

    check!(
        rec,
        rec.allocs_of_size(11000).iter().all(|e| e.pid == root),
        "parent's block"
    );
    let c1 = rec.allocs_of_size(11001);
    check!(
        rec,
        c1.len() == 1 && c1[0].pid == children[0],
        "first child's block"
    );
    let c2 = rec.allocs_of_size(11002);
    check!(
        rec,
        c2.len() == 2 && c2.iter().all(|e| e.pid == children[1]),
        "second child's blocks"
    );
    // The third child execs malloc_free with "1": one block of 10007 and the leak of 10009.
    let execs = rec.execs();
    check!(
        rec,
        execs.iter().any(|(pid, f, argv)| *pid == children[2]
            && f == target.to_str().unwrap()
            && argv.len() == 2),
        "third child execs the target: {execs:?}"
    );
    let c3 = rec.allocs_of_size(10007);
    check!(
        rec,
        c3.len() == 1 && c3[0].pid == children[2],
        "exec'd image allocates under the child's pid"
    );
    let mut exits = rec.exits();
    exits.sort();
    let mut want = vec![
        (root, 0),
        (children[0], 11 << 8),
        (children[1], 12 << 8),
        (children[2], 0),
    ];
    want.sort();
    check!(rec, exits == want, "exit statuses {exits:?}, want {want:?}");
}

#[test]
fn vfork_then_exec() {
    skip_unless_recording!("vfork_then_exec");
    let target = fixture("malloc_free");
    let rec = record_fixture("vfork_exec", &[], "vfork_exec", &[target.to_str().unwrap()]);
    check!(rec, rec.code() == 0, "exit code");
    let root = rec.header.root_pid;
    let forks = rec.forks();
    check!(
        rec,
        forks.len() == 1 && forks[0].0 == root,
        "one vfork child: {forks:?}"
    );
    let child = forks[0].1;
    let c = rec.allocs_of_size(10007);
    check!(
        rec,
        c.len() == 1 && c[0].pid == child,
        "child's allocation after exec"
    );
    let p = rec.allocs_of_size(12000);
    check!(
        rec,
        p.len() == 1 && p[0].pid == root,
        "parent's allocation after the vfork"
    );
}

#[test]
fn four_threads_allocating() {
    skip_unless_recording!("four_threads_allocating");
    let rec = record_fixture("threads", &[], "threads", &[]);
    check!(rec, rec.code() == 0, "exit code");
    let root = rec.header.root_pid;
    let mut tids = HashSet::new();
    for n in 1..=4u64 {
        let a = rec.allocs_of_size(13000 + n);
        check!(
            rec,
            a.len() == 1000,
            "thread {n}: 1000 allocations, got {}",
            a.len()
        );
        let t: HashSet<u32> = a.iter().map(|e| e.tid).collect();
        check!(
            rec,
            t.len() == 1 && a.iter().all(|e| e.pid == root),
            "one thread of the root per size"
        );
        check!(rec, !t.contains(&root), "not the main thread");
        tids.extend(t);
        let frees = rec
            .events
            .iter()
            .filter(|e| e.tid == a[0].tid && matches!(e.kind, EventKind::Free { .. }))
            .count();
        check!(rec, frees >= 1000, "thread {n} frees its blocks");
    }
    check!(rec, tids.len() == 4, "four distinct threads");
    check!(rec, rec.forks().is_empty(), "threads are not Fork events");
    check!(rec, rec.exits().len() == 1, "one Exit for the process");
}

/// Sizes stay with the process that passed them while processes share one CPU: on Linux 6.13+
/// a probe program gets a per-CPU stack, and one preempted there had its arguments overwritten
/// by another process's run of it (Debian's 7.2 under qemu swapped a first malloc's size with a
/// sibling's in 1 recording of 2, until the programs ran with preemption off). The kernel
/// matrix runs this test on every kernel it boots.
#[test]
fn sizes_stay_with_their_process_on_a_shared_cpu() {
    skip_unless_recording!("sizes_stay_with_their_process_on_a_shared_cpu");
    let rec = record_fixture("preempted", &["-q", "--no-leak-scan"], "preempted", &[]);
    check!(rec, rec.code() == 0, "exit code");
    let root = rec.header.root_pid;
    let forks = rec.forks();
    check!(
        rec,
        forks.len() == 41,
        "the noise and 40 children: {forks:?}"
    );
    let noise = forks[0].1;
    let children: Vec<u32> = forks[1..].iter().map(|(_, c)| *c).collect();
    let mut crossed = Vec::new();
    let mut firsts = vec![0u32; children.len()];
    for e in &rec.events {
        let EventKind::Alloc { size, .. } = e.kind else {
            continue;
        };
        let ok = if e.pid == noise {
            size == 31001
        } else if let Some(i) = children.iter().position(|&c| c == e.pid) {
            firsts[i] += 1;
            size == 20000 + i as u64
        } else {
            e.pid == root && !(20000..20040).contains(&size) && size != 31001
        };
        if !ok {
            crossed.push((e.pid, size));
        }
    }
    check!(
        rec,
        crossed.is_empty(),
        "sizes recorded under another process (pid, size): {crossed:?}"
    );
    check!(
        rec,
        firsts.iter().all(|&n| n == 1),
        "one allocation per child: {firsts:?}"
    );
}

#[test]
fn command_killed_by_sigkill() {
    skip_unless_recording!("command_killed_by_sigkill");
    let rec = record_fixture("sigkill", &[], "sigkill", &[]);
    check!(rec, rec.code() == 137, "128 + SIGKILL");
    check!(
        rec,
        matches!(rec.end, ReadEnd::Complete(_)),
        "file complete"
    );
    check!(
        rec,
        rec.allocs_of_size(14000).len() == 1,
        "allocation before the kill"
    );
    check!(
        rec,
        rec.exits() == vec![(rec.header.root_pid, 9)],
        "Exit with signal 9"
    );
}

#[test]
fn exit_code_passes_through() {
    skip_unless_recording!("exit_code_passes_through");
    let rec = record_fixture("exit_code", &["-q"], "malloc_free", &["1", "42"]);
    check!(rec, rec.code() == 42, "the command's exit code");
    check!(rec, rec.run.stderr.is_empty(), "-q prints nothing");
}

#[test]
fn command_not_found_exits_127() {
    skip_unless_recording!("command_not_found_exits_127");
    let path = common::scratch_dir().join("not_found.mt");
    run_command(
        std::process::Command::new(common::memtrack())
            // The error line alone: where the kernel cannot bind the private library copies
            // (before 6.15) the fallback says so in a warning line of its own.
            .args(["record", "--no-private-libs", "-o"])
            .arg(&path)
            .args(["--", "/nonexistent/command-xyz"]),
    )
    .expect_failure(127, &["command not found: /nonexistent/command-xyz"]);
    assert!(!path.exists(), "no file left behind");
}

#[test]
fn bad_flags_are_one_line_errors() {
    for (args, want) in [
        (
            vec!["record", "--ring-size", "3", "--", "true"],
            "--ring-size 3",
        ),
        (vec!["record", "-o", "x.mt"], "no command given"),
    ] {
        run(&args).expect_failure(125, &[want]);
    }
}

/// The BPF objects' CO-RE relocations resolve against a small BTF cut from the kernel's
/// (record/core_btf.rs): each resolves, and patches its instruction, exactly as it does against
/// the kernel's whole BTF (`MEMTRACK_CORE_BTF=kernel`), as libbpf's debug lines say, for every
/// object this kernel loads (stacks' walker and, where fentry attaches, rmap's hooks included).
#[test]
fn core_relocations_equal_the_kernels_whole_btf() {
    skip_unless_recording!("core_relocations_equal_the_kernels_whole_btf");
    let relocations = |full: bool| {
        let path = common::scratch_file(format!("core_btf_{full}.mt"));
        let mut cmd = std::process::Command::new(common::memtrack());
        // A command that allocates: its first allocation waits for the walker, whose load
        // (beside the command's) is then sure to have ended, and logged, before the recording.
        cmd.args(["record", "--stacks", "-v", "-v", "-v", "-o"])
            .arg(&path)
            .args(["--", "ls", "/"]);
        if full {
            cmd.env("MEMTRACK_CORE_BTF", "kernel");
        } else {
            cmd.env_remove("MEMTRACK_CORE_BTF");
        }
        let run = run_command(&mut cmd);
        assert!(run.status.success(), "{}", run.describe());
        let cut = run.stderr.contains("CO-RE types cut from the kernel's BTF");
        assert_eq!(
            cut,
            !full,
            "which BTF the relocations read: {}",
            run.describe()
        );
        // "prog 'rss_stat': relo #0: matching candidate #0 <byte_off> [264] struct
        // mm_struct.owner (0:0:59 @ offset 1304)": type ids differ between the two BTFs.
        let ids = |line: &str| {
            line.split(' ')
                .filter(|w| !(w.starts_with('[') && w.ends_with(']')))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let mut lines: Vec<String> = (run.stderr.lines())
            .filter_map(|l| l.split_once("libbpf: prog "))
            .map(|(_, rest)| rest)
            .filter(|l| l.contains(": relo #") && (l.contains("patched") || l.contains("matching")))
            .map(ids)
            .collect();
        lines.sort();
        lines
    };
    let (cut, full) = (relocations(false), relocations(true));
    assert!(
        full.iter().any(|l| l.contains("patched")),
        "libbpf's relocation lines at -v -v -v: {full:?}"
    );
    assert_eq!(cut.len(), full.len(), "relocations resolved");
    for (c, f) in cut.iter().zip(&full) {
        assert_eq!(c, f, "a relocation against the cut BTF");
    }
}

/// The kernel's BTF is parsed once per recording (src/sys/kernel_btf.rs), where libbpf parsed
/// it once per object loaded and preflight once more: libbpf says each parse at -v -v -v.
#[test]
fn the_kernels_btf_is_parsed_once() {
    skip_unless_recording!("the_kernels_btf_is_parsed_once");
    let path = common::scratch_file("btf_once.mt");
    let run = run_command(
        std::process::Command::new(common::memtrack())
            .args(["-v", "-v", "-v", "record", "--stacks", "-o"])
            .arg(&path)
            .args(["--", "true"]),
    );
    assert!(run.status.success(), "{}", run.describe());
    let parses = run.stderr.matches("libbpf: loaded kernel BTF from").count();
    assert!(
        run.stderr.contains("libbpf: "),
        "libbpf's lines at -v -v -v: {}",
        run.describe()
    );
    assert_eq!(parses, 1, "parses of the kernel's BTF: {}", run.describe());
}
