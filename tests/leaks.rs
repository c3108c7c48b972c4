//! Leaks you can gate on (issue 36): the recorder scans each process at its normal exit and
//! tells definitely lost blocks from still reachable ones. Every test runs the real recorder
//! on real programs; `testdata/leaks/leaks.c` has one block of a fingerprint size per case,
//! and Valgrind's memcheck judges the same program.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::process::Command;

use common::*;
use memtrack::format::{EventKind, LeakScan};

/// The leak scans of a recording, by pid.
fn scans(r: &Recording) -> HashMap<u32, LeakScan> {
    r.events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::LeakScan(s) => Some((e.pid, s.clone())),
            _ => None,
        })
        .collect()
}

/// The fingerprint sizes (1000..1100 bytes) process `pid` allocated, by address.
fn fingerprints(r: &Recording, pid: u32) -> HashMap<u64, u64> {
    r.events
        .iter()
        .filter(|e| e.pid == pid)
        .filter_map(|e| match e.kind {
            EventKind::Alloc { addr, size, .. } if (1000..1100).contains(&size) => {
                Some((addr, size))
            }
            _ => None,
        })
        .collect()
}

/// The fingerprint sizes the scan of `pid` found lost.
fn lost_sizes(r: &Recording, pid: u32) -> BTreeSet<u64> {
    let by_addr = fingerprints(r, pid);
    let scan = &scans(r)[&pid];
    scan.lost
        .iter()
        .filter_map(|a| by_addr.get(a).copied())
        .collect()
}

/// The root pid and its one forked child.
fn parent_and_child(r: &Recording) -> (u32, u32) {
    let forks = r.forks();
    assert_eq!(forks.len(), 1, "{forks:?}\n{}", r.describe());
    forks[0]
}

fn record_leaks(name: &str, extra: &[&str]) -> Recording {
    let r = record_fixture(name, extra, "leaks/leaks", &[]);
    check!(r, r.code() == 0, "the fixture exits 0");
    r
}

#[test]
fn fixture_lost_and_reachable_block_by_block() {
    skip_unless_recording!("fixture_lost_and_reachable");
    let r = record_leaks("leaks-fixture", &[]);
    let (parent, child) = parent_and_child(&r);
    let all = scans(&r);
    let (p, c) = (&all[&parent], &all[&child]);
    check!(
        r,
        p.failure.is_empty() && c.failure.is_empty(),
        "{p:?} {c:?}"
    );
    // Overwritten pointer (1001), a cycle (1005, 1006), lost by a thread (1010).
    check!(
        r,
        (p.lost_blocks, p.lost_bytes) == (4, 4022),
        "parent: {p:?}"
    );
    check!(
        r,
        lost_sizes(&r, parent) == BTreeSet::from([1001, 1005, 1006, 1010]),
        "parent lost {:?}",
        lost_sizes(&r, parent)
    );
    // Held by a global (1002), on a blocked thread's stack (1003), in a spinning thread's r12
    // (1004), through an interior pointer (1007): reachable, so live at exit but not lost.
    let live: BTreeSet<u64> = fingerprints(&r, parent).into_values().collect();
    for size in [1002, 1003, 1004, 1007] {
        check!(r, live.contains(&size), "{size} was allocated");
    }
    check!(
        r,
        p.threads == 3 && p.registers == 3,
        "three threads held: {p:?}"
    );
    // The forked child: its own blocks only (what it inherited is its parent's).
    check!(
        r,
        (c.lost_blocks, c.lost_bytes) == (1, 1008),
        "child: {c:?}"
    );
    check!(
        r,
        (c.reachable_blocks, c.reachable_bytes) == (1, 1009),
        "child: {c:?}"
    );

    // The report splits `leaked` by the scans, per process and for the run.
    let v = report_json(&r.path, &[]);
    let leaks = &v["totals"]["heap"]["leaks"];
    assert_eq!(leaks["definitely_lost"]["bytes"], 4022 + 1008, "{leaks}");
    assert_eq!(leaks["definitely_lost"]["blocks"], 5, "{leaks}");
    assert_eq!(leaks["scanned_processes"], 2, "{leaks}");
    assert_eq!(leaks["unscanned_processes"], 0, "{leaks}");
    let leaked = &v["totals"]["heap"]["leaked"];
    assert_eq!(
        leaks["definitely_lost"]["bytes"].as_u64().unwrap()
            + leaks["still_reachable"]["bytes"].as_u64().unwrap(),
        leaked["bytes"].as_u64().unwrap(),
        "lost + reachable = leaked: {leaks} {leaked}"
    );
    let text = report_text(&r.path, &[], Some("100"));
    assert!(text.contains("definitely lost 5 blocks, 4.9 KiB"), "{text}");
    let md = report_text(&r.path, &["--format", "markdown"], None);
    assert!(
        md.contains("| leaked: definitely lost | 5 blocks, 4.9 KiB |"),
        "{md}"
    );
}

/// memcheck's "N bytes in M blocks are definitely|indirectly lost" lines of each process of
/// its log (one file per pid): the fingerprint sizes it calls lost, and its definitely plus
/// indirectly lost bytes.
fn memcheck_lost(log_dir: &std::path::Path) -> HashMap<u32, (BTreeSet<u64>, u64)> {
    let mut out = HashMap::new();
    for entry in std::fs::read_dir(log_dir).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix("vg.").and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let log = std::fs::read_to_string(entry.path()).unwrap();
        let mut sizes = BTreeSet::new();
        let mut bytes = 0u64;
        let number = |s: &str| s.replace(',', "").parse::<u64>().unwrap();
        for line in log.lines() {
            let body = line.split("== ").nth(1).unwrap_or("").trim();
            if body.contains("are definitely lost in loss record")
                || body.contains("are indirectly lost in loss record")
            {
                let words: Vec<&str> = body.split_whitespace().collect();
                let (b, blocks) = (number(words[0]), number(words[3]));
                if blocks == 1 && (1000..1100).contains(&b) {
                    sizes.insert(b);
                }
            }
            for kind in ["definitely lost:", "indirectly lost:"] {
                if let Some(rest) = body.strip_prefix(kind) {
                    bytes += number(rest.split_whitespace().next().unwrap());
                }
            }
        }
        out.insert(pid, (sizes, bytes));
    }
    out
}

#[test]
fn memcheck_agrees_on_definitely_lost() {
    skip_unless_recording!("memcheck_agrees");
    let Ok(valgrind) = which("valgrind") else {
        skip(
            "memcheck_agrees",
            "valgrind is not installed (scripts/setup.sh)",
        );
        return;
    };
    let r = record_leaks("leaks-memcheck", &[]);
    let (parent, child) = parent_and_child(&r);
    let dir = scratch_dir().join("leaks-memcheck-logs");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    if let Err(e) = wait_for_detaching_recorders() {
        panic!("{e}");
    }
    let run = run_command(
        Command::new(valgrind)
            .args(["--leak-check=full", "--trace-children=yes"])
            .arg(format!("--log-file={}/vg.%p", dir.display()))
            .arg(fixture("leaks/leaks")),
    );
    assert_eq!(run.code(), 0, "{}", run.describe());
    let vg = memcheck_lost(&dir);
    assert_eq!(vg.len(), 2, "one log per process: {vg:?}");
    // The root is the process without a parent in the logs: the one with the lower pid, as the
    // child is forked after it.
    let mut pids: Vec<u32> = vg.keys().copied().collect();
    pids.sort_unstable();
    let (vg_parent, vg_child) = (&vg[&pids[0]], &vg[&pids[1]]);
    let mine = scans(&r);
    // The parent: the same fingerprints, and the same bytes (memcheck's definitely plus
    // indirectly lost; the C library loses nothing).
    assert_eq!(
        vg_parent.0,
        lost_sizes(&r, parent),
        "parent: memcheck {vg_parent:?}"
    );
    assert_eq!(
        vg_parent.1, mine[&parent].lost_bytes,
        "parent: memcheck {vg_parent:?}"
    );
    // The child: memcheck also counts what it inherited; memtrack counts those blocks in the
    // parent. Of the blocks the child allocated, both call the same ones lost.
    let own: BTreeSet<u64> = fingerprints(&r, child).into_values().collect();
    let vg_own: BTreeSet<u64> = vg_child.0.intersection(&own).copied().collect();
    assert_eq!(
        vg_own,
        lost_sizes(&r, child),
        "child: memcheck {vg_child:?}"
    );
}

fn which(name: &str) -> Result<PathBuf, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| format!("{name} is not installed"))
}

/// `check --max-leaked 0` on a recording of `command`: its run.
fn gate(name: &str, command: &[&str]) -> (Recording, Run) {
    let r = record(name, &[], command);
    check!(r, r.code() == 0, "the command exits 0");
    let run = run(&["check", r.path.to_str().unwrap(), "--max-leaked", "0"]);
    (r, run)
}

#[test]
fn programs_that_lose_nothing_pass_max_leaked_0() {
    skip_unless_recording!("lose_nothing");
    let Some(cpp) = require_fixture("lose_nothing", "leaks/string.cpp", "leaks_string", &[]) else {
        return;
    };
    let cases: [(&str, Vec<&str>); 3] = [
        ("leaks-cpp", vec![cpp.to_str().unwrap()]),
        ("leaks-echo", vec!["/bin/echo", "hi"]),
        ("leaks-ls", vec!["/bin/ls", "/"]),
    ];
    for (name, command) in cases {
        let (r, gate) = gate(name, &command);
        let v = report_json(&r.path, &[]);
        let heap = &v["totals"]["heap"];
        assert_eq!(
            heap["leaks"]["definitely_lost"]["bytes"], 0,
            "{name}: {heap}"
        );
        assert_eq!(heap["leaks"]["unscanned_processes"], 0, "{name}: {heap}");
        assert!(
            heap["leaked"]["bytes"].as_u64().unwrap() > 0,
            "{name}: the C library keeps blocks to the end: {heap}"
        );
        assert_eq!(
            heap["leaks"]["still_reachable"], heap["leaked"],
            "{name}: all it keeps is reachable"
        );
        assert_eq!(gate.code(), 0, "{name}: {}", gate.describe());
        assert!(
            gate.stdout.contains("definitely lost"),
            "{}",
            gate.describe()
        );
    }
    // libstdc++'s emergency exception pool (about 71 KiB) is among the reachable blocks.
    let v = report_json(scratch_dir().join("leaks-cpp.mt"), &[]);
    let reachable = v["totals"]["heap"]["leaks"]["still_reachable"]["bytes"]
        .as_u64()
        .unwrap();
    assert!(reachable > 70 << 10, "{reachable}");
}

#[test]
fn a_leaking_program_fails_max_leaked_0_and_its_site_comes_first() {
    skip_unless_recording!("leaking_fails");
    let r = record_leaks("leaks-gate", &["--stacks"]);
    let run = run(&[
        "check",
        r.path.to_str().unwrap(),
        "--max-leaked",
        "0",
        "--max-reachable",
        "1GiB",
    ]);
    assert_eq!(run.code(), 1, "{}", run.describe());
    assert!(
        run.stdout.contains("definitely lost") && run.stdout.contains("5030 bytes"),
        "{}",
        run.describe()
    );
    let v = report_json(&r.path, &["--stacks", "--stacks-by", "leaked"]);
    let sites = v["stacks"]["sites"].as_array().expect("sites");
    let first = &sites[0];
    // 1010 bytes lost by the thread function `loses`: the largest lost site.
    assert_eq!(first["lost_bytes"], 1010, "{first}");
    let names: Vec<&str> = first["frames"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["function"].as_str())
        .collect();
    assert!(names.contains(&"loses"), "{names:?}");
}

#[test]
fn killed_processes_are_not_scanned_and_exec_drops_the_old_image() {
    skip_unless_recording!("not_scanned");
    let r = record_fixture("leaks-sigkill", &[], "sigkill", &[]);
    check!(r, r.code() == 128 + 9, "killed");
    check!(r, scans(&r).is_empty(), "no scan of a killed process");
    let v = report_json(&r.path, &[]);
    let leaks = &v["totals"]["heap"]["leaks"];
    assert_eq!(leaks["unscanned_processes"], 1, "{leaks}");
    assert_eq!(
        leaks["not_scanned"], v["totals"]["heap"]["leaked"],
        "{leaks}"
    );
    assert!(leaks["not_scanned"]["bytes"].as_u64().unwrap() >= 14000);
    let text = report_text(&r.path, &[], Some("120"));
    assert!(text.contains("not scanned"), "{text}");
    // The gate cannot clear what it could not scan.
    let gate = run(&["check", r.path.to_str().unwrap(), "--max-leaked", "0"]);
    assert_eq!(gate.code(), 1, "{}", gate.describe());
    assert!(gate.stdout.contains("not scanned"), "{}", gate.describe());

    // A shell that execs: its image's blocks are dropped at exec, never scanned as leaks; the
    // program it became is scanned at its exit.
    let r = record("leaks-exec", &[], &["/bin/sh", "-c", "exec /bin/echo hi"]);
    check!(r, r.code() == 0, "exit 0");
    let all = scans(&r);
    check!(r, all.len() == 1, "one scan, of echo: {all:?}");
    let exec_at = r
        .events
        .iter()
        .position(|e| matches!(e.kind, EventKind::Exec(_)) && e.pid == r.header.root_pid)
        .unwrap();
    let scan_at = r
        .events
        .iter()
        .rposition(|e| matches!(e.kind, EventKind::LeakScan(_)))
        .unwrap();
    check!(r, scan_at > exec_at, "the scan is of the new image");
}

#[test]
fn no_leak_scan_records_no_scan_and_check_gates_on_leaked() {
    skip_unless_recording!("no_leak_scan");
    let r = record_leaks("leaks-off", &["--no-leak-scan"]);
    check!(r, scans(&r).is_empty(), "no scan");
    let v = report_json(&r.path, &[]);
    assert!(
        v["totals"]["heap"].get("leaks").is_none(),
        "{}",
        v["totals"]["heap"]
    );
    let gate = run(&["check", r.path.to_str().unwrap(), "--max-leaked", "0"]);
    assert_eq!(gate.code(), 1);
    assert!(gate.stdout.contains("leaked"), "{}", gate.describe());
}

/// `testdata/leaks/suppress.c` linked with its library `libleaks_suppress.so` (both built
/// here), or why not.
fn suppress_fixture(test: &str) -> Option<PathBuf> {
    let lib = require_fixture(
        test,
        "leaks/suppress_lib.c",
        "libleaks_suppress.so",
        &["-shared", "-fPIC"],
    )?;
    let dir = lib.parent().unwrap().to_str().unwrap().to_string();
    require_fixture(
        test,
        "leaks/suppress.c",
        "leaks_suppress",
        &[
            &format!("-L{dir}"),
            "-lleaks_suppress",
            &format!("-Wl,-rpath,{dir}"),
        ],
    )
}

/// A suppression file `name` in the scratch directory with `text`.
fn suppressions(name: &str, text: &str) -> String {
    let path = scratch_file(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

fn blocks(v: &serde_json::Value) -> (u64, u64) {
    (v["blocks"].as_u64().unwrap(), v["bytes"].as_u64().unwrap())
}

#[test]
fn suppressions_by_name_wildcard_and_module() {
    skip_unless_recording!("suppressions");
    let Some(exe) = suppress_fixture("suppressions") else {
        return;
    };
    let r = record("leaks-suppress", &["--stacks"], &[exe.to_str().unwrap()]);
    check!(r, r.code() == 0, "the fixture exits 0");
    let path = r.path.to_str().unwrap();

    // Without suppressions the gate fails on the three lost blocks and names the largest site.
    let gate = run(&["check", path, "--max-leaked", "0"]);
    assert_eq!(gate.code(), 1, "{}", gate.describe());
    assert!(
        gate.stdout.contains("definitely lost") && gate.stdout.contains("(9009 bytes)"),
        "{}",
        gate.describe()
    );
    assert!(
        gate.stdout
            .contains("top lost site: 3.9 KiB (4004 bytes) in 1 block: other_leak_of_cache ("),
        "{}",
        gate.describe()
    );

    // By name, by wildcard, by module; a rule that matches nothing is listed as unused.
    let all = suppressions(
        "all.supp",
        "# known leaks\nleak:known_leak_in_parser\n\nleak:other_*_cache\n  leak:libleaks_suppress.so\nleak:never_called_anywhere\n",
    );
    let gate = run(&["check", path, "--max-leaked", "0", "--suppress", &all]);
    assert_eq!(gate.code(), 0, "{}", gate.describe());
    assert!(
        gate.stdout
            .contains(&format!("suppressed: 3 blocks, 8.8 KiB by 3 rules ({all})")),
        "{}",
        gate.describe()
    );
    assert!(
        gate.stdout.contains(
            "unused suppression: leak:never_called_anywhere (line 6) matched no lost block"
        ),
        "{}",
        gate.describe()
    );
    let v = report_json(&r.path, &["--suppress", &all]);
    let heap = &v["totals"]["heap"];
    let leaks = &heap["leaks"];
    assert_eq!(blocks(&leaks["definitely_lost"]), (0, 0), "{leaks}");
    assert_eq!(blocks(&leaks["suppressed"]), (3, 9009), "{leaks}");
    assert_eq!(
        blocks(&leaks["suppressed"]).1 + blocks(&leaks["still_reachable"]).1,
        blocks(&heap["leaked"]).1,
        "suppressed + reachable = leaked: {heap}"
    );
    let rules = v["suppressions"]["rules"].as_array().expect("rules");
    let per_rule: Vec<(String, u64, (u64, u64))> = rules
        .iter()
        .map(|r| {
            (
                r["rule"].as_str().unwrap().to_string(),
                r["line"].as_u64().unwrap(),
                blocks(&r["suppressed"]),
            )
        })
        .collect();
    assert_eq!(
        per_rule,
        vec![
            ("leak:known_leak_in_parser".into(), 2, (1, 3003)),
            ("leak:other_*_cache".into(), 4, (1, 4004)),
            ("leak:libleaks_suppress.so".into(), 5, (1, 2002)),
            ("leak:never_called_anywhere".into(), 6, (0, 0)),
        ]
    );
    let text = report_text(&r.path, &["--suppress", &all], Some("120"));
    assert!(
        text.contains(
            "    suppressed      3 blocks, 8.8 KiB (definitely lost, matched by --suppress)\n"
        ) && text.contains("    definitely lost 0 blocks, 0 B\n"),
        "{text}"
    );

    // One anchored rule: the other two stay lost, and the gate names the next site.
    let one = suppressions("one.supp", "leak:^known_leak_in_parser$\n");
    let gate = run(&["check", path, "--max-leaked", "0", "--suppress", &one]);
    assert_eq!(gate.code(), 1, "{}", gate.describe());
    assert!(
        gate.stdout.contains("(6006 bytes)")
            && gate.stdout.contains("top lost site: 3.9 KiB (4004 bytes)")
            && gate
                .stdout
                .contains("suppressed: 1 block, 2.9 KiB by 1 rule"),
        "{}",
        gate.describe()
    );

    // A bad line: one line naming it, exit 2.
    let bad = suppressions("bad.supp", "leak:known_leak_in_parser\nknown_leak\n");
    let gate = run(&["check", path, "--max-leaked", "0", "--suppress", &bad]);
    assert_eq!(gate.code(), 2, "{}", gate.describe());
    assert!(
        gate.stderr
            .contains(&format!("{bad}:2: 'known_leak' is not a suppression")),
        "{}",
        gate.describe()
    );
    assert_eq!(gate.stderr.trim().lines().count(), 1, "{}", gate.describe());

    // Without call stacks there is nothing to match: said, not pretended.
    let r = record(
        "leaks-suppress-nostacks",
        &["--no-stacks"],
        &[exe.to_str().unwrap()],
    );
    check!(r, r.code() == 0, "the fixture exits 0");
    let gate = run(&[
        "check",
        r.path.to_str().unwrap(),
        "--max-leaked",
        "0",
        "--suppress",
        &all,
    ]);
    assert_eq!(gate.code(), 2, "{}", gate.describe());
    assert!(
        gate.stderr.contains("suppressions need call stacks")
            && gate.stderr.contains("record again with --stacks"),
        "{}",
        gate.describe()
    );
}

/// The "done when": the README's gate, `check --max-leaked 0` on a recording made
/// with --stacks, passes on the leak-free C++ program and fails on one that leaks, naming the
/// function that lost the block.
#[test]
fn the_readme_gate_passes_leak_free_cpp_and_names_the_site_of_a_leak() {
    skip_unless_recording!("readme_gate");
    let (Some(clean), Some(leaky)) = (
        require_fixture("readme_gate", "leaks/string.cpp", "leaks_string", &[]),
        require_fixture("readme_gate", "leaks/leak.cpp", "leaks_leak_cpp", &[]),
    ) else {
        return;
    };
    let r = record(
        "leaks-readme-clean",
        &["--stacks"],
        &[clean.to_str().unwrap()],
    );
    check!(r, r.code() == 0, "exit 0");
    let gate = run(&["check", r.path.to_str().unwrap(), "--max-leaked", "0"]);
    assert_eq!(gate.code(), 0, "{}", gate.describe());
    assert!(
        gate.stdout
            .starts_with("definitely lost  0 B (0 bytes)  limit 0 B (0 bytes)  pass"),
        "{}",
        gate.describe()
    );
    assert!(
        !gate.stdout.contains("top lost site"),
        "{}",
        gate.describe()
    );

    let r = record(
        "leaks-readme-leak",
        &["--stacks"],
        &[leaky.to_str().unwrap()],
    );
    check!(r, r.code() == 0, "exit 0");
    let gate = run(&["check", r.path.to_str().unwrap(), "--max-leaked", "0"]);
    assert_eq!(gate.code(), 1, "{}", gate.describe());
    assert!(
        gate.stdout
            .contains("definitely lost  1.5 KiB (1500 bytes)  limit 0 B (0 bytes)  FAIL"),
        "{}",
        gate.describe()
    );
    assert!(
        gate.stdout
            .contains("top lost site: 1.5 KiB (1500 bytes) in 1 block: lose_widget() (leak.cpp:"),
        "{}",
        gate.describe()
    );
    // Without stacks the gate still fails, and says how to name the site.
    let r = record(
        "leaks-readme-leak-nostacks",
        &["--no-stacks"],
        &[leaky.to_str().unwrap()],
    );
    check!(r, r.code() == 0, "exit 0");
    let gate = run(&["check", r.path.to_str().unwrap(), "--max-leaked", "0"]);
    assert_eq!(gate.code(), 1, "{}", gate.describe());
    assert!(
        gate.stdout.contains(
            "lost blocks have no call stacks in this recording: record with --stacks to name \
             the sites that lost them"
        ),
        "{}",
        gate.describe()
    );
}

/// The `<tr>` of process `pid` in the page's process table.
fn html_row(html: &str, pid: u64) -> &str {
    let start = html
        .find(&format!("<tr data-pid=\"{pid}\""))
        .unwrap_or_else(|| panic!("no row for {pid}"));
    let end = start + html[start..].find("</tr>").unwrap();
    &html[start..end]
}

/// The text of the cells of class `class` in `html`, in order.
fn html_cells<'a>(html: &'a str, class: &str) -> Vec<&'a str> {
    let open = format!("<td class=\"{class}\">");
    html.match_indices(&open)
        .map(|(i, _)| {
            let start = i + open.len();
            &html[start..start + html[start..].find("</td>").unwrap()]
        })
        .collect()
}

/// "4.9 KiB in 5 blocks", as the page writes blocks.
fn in_blocks(v: &serde_json::Value) -> String {
    let (blocks, bytes) = blocks(v);
    let noun = if blocks == 1 { "block" } else { "blocks" };
    format!(
        "{} in {blocks} {noun}",
        memtrack::units::format_bytes(bytes)
    )
}

#[test]
fn html_page_splits_lost_and_reachable_and_lists_lost_sites_first() {
    skip_unless_recording!("html_leaks");
    let r = record_leaks("leaks-html", &["--stacks"]);
    let (parent, child) = parent_and_child(&r);
    let page = |extra: &[&str]| {
        let mut args = vec!["report", r.path.to_str().unwrap(), "--format", "html"];
        args.extend_from_slice(extra);
        run(&args).expect_code(0).stdout
    };
    let html = page(&[]);
    let v = report_json(&r.path, &[]);
    let leaks = &v["totals"]["heap"]["leaks"];
    // The summary: the run's split, as the JSON report has it.
    assert!(
        html.contains("<li id=\"summary-lost\"><b>definitely lost</b> 4.9 KiB in 5 blocks</li>"),
        "{html}"
    );
    assert!(
        html.contains(&format!(
            "<li id=\"summary-reachable\"><b>still reachable</b> {}</li>",
            in_blocks(&leaks["still_reachable"])
        )),
        "{html}"
    );
    assert!(!html.contains("summary-not-scanned"), "{html}");
    // Per process, and for the tree: the parent lost 4 blocks (4022 B), its child 1 (1008 B).
    let processes = v["processes"].as_array().unwrap();
    let json_of = |pid: u32| {
        processes
            .iter()
            .find(|p| p["pid"] == pid)
            .unwrap_or_else(|| panic!("{pid}"))
    };
    for (pid, lost, tree_lost) in [
        (parent, "3.9 KiB in 4 blocks", "4.9 KiB in 5 blocks"),
        (child, "1008 B in 1 block", "1008 B in 1 block"),
    ] {
        let row = html_row(&html, u64::from(pid));
        let own = &json_of(pid)["own"]["heap"]["leaks"];
        assert_eq!(html_cells(row, "lost"), [lost], "{row}");
        assert_eq!(
            html_cells(row, "reachable"),
            [in_blocks(&own["still_reachable"])],
            "{row}"
        );
        assert_eq!(html_cells(row, "tree-lost"), [tree_lost], "{row}");
    }
    // The sites of lost blocks, the most lost first, named by their frames.
    let start = html
        .find("<table class=\"sites\" id=\"lost-sites\">")
        .expect("lost sites");
    let table = &html[start..start + html[start..].find("</table>").unwrap()];
    let rows: Vec<(&str, &str)> = table
        .split("<tr><td>")
        .skip(1)
        .map(|row| {
            let lost = &row[..row.find("</td>").unwrap()];
            let by = html_cells(row, "cmd")[0];
            (lost, by.split(" &lt;- ").next().unwrap())
        })
        .collect();
    let functions: Vec<(&str, &str)> = rows
        .iter()
        .map(|(lost, by)| (*lost, by.split(' ').next().unwrap()))
        .collect();
    assert_eq!(
        functions,
        [
            ("1010 B", "loses"),
            ("1008 B", "main"),
            ("1006 B", "cycle"),
            ("1005 B", "cycle"),
            ("1001 B", "main"),
        ],
        "{table}"
    );
    // The lost sites come before the flame graphs.
    assert!(start < html.find("<section id=\"flames\">").unwrap());

    // With a suppression: the suppressed block leaves the lost figures and the sites, and the
    // page says what was suppressed.
    let supp = suppressions("html.supp", "leak:loses\nleak:no_such_function\n");
    let html = page(&["--suppress", &supp]);
    assert!(
        html.contains("<li id=\"summary-lost\"><b>definitely lost</b> 3.9 KiB in 4 blocks</li>")
            && html
                .contains("<li id=\"summary-suppressed\"><b>suppressed</b> 1010 B in 1 block</li>"),
        "{html}"
    );
    assert!(!html.contains("<td class=\"cmd\">loses"), "{html}");
    assert!(
        html.contains(&format!(
            "<li>suppressed: 1 block, 1010 B by 1 rule ({supp})</li>"
        )) && html.contains(
            "<li>unused suppression: leak:no_such_function (line 2) matched no lost block</li>"
        ),
        "{html}"
    );

    // A process killed by a signal: its page says it was not scanned.
    let r = record_fixture("leaks-html-sigkill", &[], "sigkill", &[]);
    check!(r, r.code() == 128 + 9, "killed");
    let html = run(&["report", r.path.to_str().unwrap(), "--format", "html"])
        .expect_code(0)
        .stdout;
    let v = report_json(&r.path, &[]);
    assert!(
        html.contains(&format!(
            "<li id=\"summary-not-scanned\"><b>not scanned</b> {} of 1 process not scanned at \
             exit",
            in_blocks(&v["totals"]["heap"]["leaks"]["not_scanned"])
        )),
        "{html}"
    );
    let row = html_row(&html, u64::from(r.header.root_pid));
    assert_eq!(html_cells(row, "lost"), ["not scanned"], "{row}");
    assert!(
        html.contains("<p id=\"no-lost\">Nothing definitely lost in the processes scanned.</p>"),
        "{html}"
    );
}

#[test]
fn diff_shows_lost_and_reachable_apart() {
    skip_unless_recording!("diff_leaks");
    let base = record_fixture(
        "leaks-diff-base",
        &["--no-rss"],
        "leaks/lose_n",
        &["1", "2"],
    );
    let same = record_fixture(
        "leaks-diff-same",
        &["--no-rss"],
        "leaks/lose_n",
        &["1", "2"],
    );
    let more = record_fixture(
        "leaks-diff-more",
        &["--no-rss"],
        "leaks/lose_n",
        &["3", "2"],
    );
    for r in [&base, &same, &more] {
        check!(r, r.code() == 0, "exit 0");
    }
    let diff = |new: &Recording| -> serde_json::Value {
        let out = run(&[
            "diff",
            base.path.to_str().unwrap(),
            new.path.to_str().unwrap(),
            "--format",
            "json",
        ])
        .expect_code(0)
        .stdout;
        serde_json::from_str(&out).unwrap()
    };
    // Reachable: the two kept blocks (the program uses no stdio, so the C library keeps none).
    let reachable =
        report_json(&base.path, &[])["totals"]["heap"]["leaks"]["still_reachable"].clone();
    let (reach_blocks, reach_bytes) = blocks(&reachable);
    assert_eq!((reach_blocks, reach_bytes), (2, 4444), "{reachable}");

    // The new run loses two blocks more: lost changes by exactly them, reachable not at all.
    let d = diff(&more);
    let run_metrics = &d["run"];
    assert_eq!(
        diff_metric(run_metrics, "definitely_lost_bytes"),
        (1111, 3333, 2222)
    );
    assert_eq!(
        diff_metric(run_metrics, "definitely_lost_blocks"),
        (1, 3, 2)
    );
    assert_eq!(
        diff_metric(run_metrics, "still_reachable_bytes"),
        (reach_bytes, reach_bytes, 0)
    );
    assert_eq!(
        diff_metric(run_metrics, "still_reachable_blocks"),
        (reach_blocks, reach_blocks, 0)
    );
    let root = &d["processes"][0]["metrics"];
    assert_eq!(
        diff_metric(root, "definitely_lost_bytes"),
        (1111, 3333, 2222)
    );
    let text = run(&[
        "diff",
        base.path.to_str().unwrap(),
        more.path.to_str().unwrap(),
    ])
    .expect_code(0)
    .stdout;
    let line = |name: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name} in\n{text}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(
        line("definitely lost blocks"),
        "definitely lost blocks 1 3 +2 +200.0%"
    );
    assert_eq!(
        line("definitely lost "),
        "definitely lost 1.1 KiB 3.3 KiB +2.2 KiB +200.0%"
    );
    assert_eq!(
        line("still reachable blocks"),
        "still reachable blocks 2 2 0 0.0%"
    );
    assert_eq!(
        line("still reachable "),
        "still reachable 4.3 KiB 4.3 KiB 0 B 0.0%"
    );

    // The same run again: every part of the split unchanged.
    let d = diff(&same);
    for name in [
        "definitely_lost_bytes",
        "definitely_lost_blocks",
        "still_reachable_bytes",
        "still_reachable_blocks",
    ] {
        let (b, n, c) = diff_metric(&d["run"], name);
        assert_eq!((b, c), (n, 0), "{name}");
    }
    assert_eq!(
        diff_metric(&d["run"], "definitely_lost_bytes"),
        (1111, 1111, 0)
    );
}

#[test]
fn each_benchmark_splits_its_leaks_by_the_scan_of_its_process() {
    skip_unless_recording!("bench_leaks");
    let control = scratch_file("leaks-bench.ctl");
    let _ = std::fs::remove_file(scratch_dir().join("leaks-bench.ctl.ack"));
    let r = record_fixture(
        "leaks-bench",
        &["--control", control.to_str().unwrap(), "--stacks"],
        "leaks/bench_leaks",
        &[],
    );
    check!(r, r.code() == 0, "the harness exits 0");
    let v = report_json(&r.path, &[]);
    let benches = v["benchmarks"].as_array().expect("benchmarks");
    let split = |uri: &str| {
        let b = benches
            .iter()
            .find(|b| b["uri"] == uri)
            .unwrap_or_else(|| panic!("no {uri} in {benches:?}"));
        let heap = &b["metrics"]["heap"];
        let l = &heap["leaks"];
        (
            blocks(&heap["leaked"]),
            blocks(&l["definitely_lost"]),
            blocks(&l["still_reachable"]),
            blocks(&l["not_scanned"]),
            (
                l["scanned_processes"].as_u64().unwrap(),
                l["unscanned_processes"].as_u64().unwrap(),
            ),
        )
    };
    // The process outlived both windows: its scan at exit splits each benchmark's blocks.
    assert_eq!(
        split("leaks::first"),
        ((2, 3333), (1, 1111), (1, 2222), (0, 0), (1, 0))
    );
    assert_eq!(
        split("leaks::second"),
        ((1, 3333), (1, 3333), (0, 0), (0, 0), (1, 0))
    );
    // A process killed by a signal is not scanned: its benchmark's block is neither.
    assert_eq!(
        split("leaks::killed"),
        ((1, 4444), (0, 0), (0, 0), (1, 4444), (0, 1))
    );

    // The gate per benchmark: --bench narrows to one, --by bench checks each.
    let path = r.path.to_str().unwrap();
    let gate = run(&[
        "check",
        path,
        "--bench",
        "leaks::first",
        "--max-leaked",
        "1111",
    ]);
    assert_eq!(gate.code(), 0, "{}", gate.describe());
    let gate = run(&[
        "check",
        path,
        "--bench",
        "leaks::first",
        "--max-leaked",
        "1110",
    ]);
    assert_eq!(gate.code(), 1, "{}", gate.describe());
    let gate = run(&[
        "check",
        path,
        "--bench",
        "leaks::killed",
        "--max-leaked",
        "0",
    ]);
    assert_eq!(gate.code(), 1, "{}", gate.describe());
    assert!(
        gate.stdout.starts_with(
            "definitely lost + not scanned  4.3 KiB (4444 bytes)  limit 0 B (0 bytes)  FAIL"
        ),
        "{}",
        gate.describe()
    );

    // A suppression takes the blocks of the benchmarks' windows too.
    let supp = suppressions("bench.supp", "leak:^lose$\n");
    let gate = run(&[
        "check",
        path,
        "--bench",
        "leaks::second",
        "--max-leaked",
        "0",
        "--suppress",
        &supp,
    ]);
    assert_eq!(gate.code(), 0, "{}", gate.describe());
    let v = report_json(&r.path, &["--suppress", &supp]);
    let first = v["benchmarks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["uri"] == "leaks::first")
        .unwrap()["metrics"]["heap"]["leaks"]
        .clone();
    assert_eq!(
        (
            blocks(&first["definitely_lost"]),
            blocks(&first["suppressed"])
        ),
        ((0, 0), (1, 1111)),
        "{first}"
    );

    // Text: the benchmark table says how much of each one's leaks was lost.
    let text = report_text(&r.path, &["--by", "bench"], Some("200"));
    for cell in [
        "3.3 KiB (1.1 KiB lost)",
        "3.3 KiB (3.3 KiB lost)",
        "4.3 KiB (0 B lost, 4.3 KiB not scanned)",
    ] {
        assert!(text.contains(cell), "{cell} in\n{text}");
    }
}

#[test]
fn the_default_recording_names_the_site_that_loses_blocks() {
    skip_unless_recording!("default_names_leak_site");
    // 300 blocks of 1,111 bytes lost from lose_one: the default's sample (1 per 16 KiB) walks
    // about 20 of them, so the estimate names the site (with seed 0 always the same ones).
    let r = record_fixture(
        "leaks-default-sample",
        &["--no-rss"],
        "leaks/lose_n",
        &["300", "0"],
    );
    check!(r, r.code() == 0, "exit 0");
    let gate = run(&["check", r.path.to_str().unwrap(), "--max-leaked", "0"]);
    assert_eq!(gate.code(), 1, "{}", gate.describe());
    let out = &gate.stdout;
    assert!(
        out.contains("definitely lost  325.5 KiB (333300 bytes)  limit 0 B (0 bytes)  FAIL"),
        "the total stays exact: {out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("top lost site: ") && l.contains(": lose_one (lose_n.c:")),
        "{out}"
    );
    assert!(out.contains("estimates: values estimated from "), "{out}");
}
