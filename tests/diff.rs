//! `memtrack diff` and `check --baseline` on two real recordings of testdata/diff.c that differ
//! by exactly what their arguments say: `diff 100 1 1` against `diff 200 2 2` (100 more
//! temporary blocks of 7001 bytes in grow(), one more leaked block of 7002 bytes, one more
//! child process); with call stacks, the same two runs site by site and as differential folded
//! stacks and flame graph; and `check --by bench` on testdata/diff_bench.c, whose benchmark
//! diff::grows regresses while diff::steady does not.

mod common;

use std::process::Command;

use common::{can_record, diff_metric, fixture, record, record_fixture, run, scratch_file};

#[test]
fn diff_and_check_against_a_baseline() {
    if !can_record("diff_and_check_against_a_baseline") {
        return;
    }
    let base = record_fixture("diff_base", &["--no-rss"], "diff", &["100", "1", "1"]);
    let new = record_fixture("diff_new", &["--no-rss"], "diff", &["200", "2", "2"]);
    assert_eq!((base.code(), new.code()), (0, 0));
    let (b, n) = (base.path.to_str().unwrap(), new.path.to_str().unwrap());

    let out = run(&["diff", b, n, "--format", "json"])
        .expect_code(0)
        .stdout;
    let d: serde_json::Value = serde_json::from_str(&out).unwrap();
    let run_metrics = &d["run"];
    assert_eq!(diff_metric(run_metrics, "allocations"), (102, 204, 102));
    assert_eq!(
        diff_metric(run_metrics, "temporary_allocations"),
        (101, 202, 101)
    );
    assert_eq!(diff_metric(run_metrics, "leaked_blocks"), (1, 2, 1));
    assert_eq!(
        diff_metric(run_metrics, "leaked_bytes"),
        (7002, 14004, 7002)
    );
    assert_eq!(
        diff_metric(run_metrics, "bytes_allocated").2,
        100 * 7001 + 7002 + 7003
    );
    let rules: Vec<(&str, &str)> = d["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["rule"].as_str().unwrap(), p["status"].as_str().unwrap()))
        .collect();
    // The root's arguments differ, so it matches by command; the first child by its place in
    // the tree; the second child is new.
    assert_eq!(
        rules,
        [
            ("command", "matched"),
            ("tree position", "matched"),
            ("unmatched", "added")
        ]
    );
    let text = run(&["diff", b, n]).expect_code(0).stdout;
    assert!(text.contains("allocations"), "{text}");

    let fail = run(&["check", n, "--baseline", b, "--max-increase", "5%"])
        .expect_code(1)
        .stdout;
    for name in ["allocations", "leaked", "temporary"] {
        assert!(
            fail.lines()
                .any(|l| l.starts_with(name) && l.ends_with("FAIL")),
            "{name} fails in\n{fail}"
        );
    }
    run(&["check", n, "--baseline", b, "--max-allocs-increase", "100%"]).expect_code(0);
    run(&["check", n, "--baseline", b, "--max-allocs-increase", "99%"]).expect_code(1);
    run(&[
        "check",
        n,
        "--baseline",
        "/nonexistent.mt",
        "--max-increase",
        "5%",
    ])
    .expect_code(2);
}

/// `frames` (a site's, innermost first) has a frame of `function`.
fn has_function(site: &serde_json::Value, function: &str) -> bool {
    site["frames"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["function"] == function)
}

#[test]
fn sites_folded_and_flame_graph_of_two_recordings_with_stacks() {
    if !can_record("sites_folded_and_flame_graph_of_two_recordings_with_stacks") {
        return;
    }
    let extra = ["--no-rss", "--stacks"];
    let base = record_fixture("diff_stacks_base", &extra, "diff", &["100", "1", "1"]);
    let new = record_fixture("diff_stacks_new", &extra, "diff", &["200", "2", "2"]);
    assert_eq!((base.code(), new.code()), (0, 0));
    let (b, n) = (base.path.to_str().unwrap(), new.path.to_str().unwrap());

    // The sites, matched by function: grow() made 100 then 200 blocks of 7001 bytes, all
    // temporary; leak_one() 1 then 2 of 7002, all leaked.
    let out = run(&["diff", b, n, "--format", "json", "--stacks", "--top", "0"])
        .expect_code(0)
        .stdout;
    let d: serde_json::Value = serde_json::from_str(&out).unwrap();
    let changed = d["sites"]["changed"].as_array().unwrap();
    let site = |function: &str| {
        let found: Vec<&serde_json::Value> = changed
            .iter()
            .filter(|s| has_function(s, function))
            .collect();
        assert_eq!(found.len(), 1, "one site of {function} in {out}");
        found[0]
    };
    let grow = site("grow");
    assert_eq!(grow["status"], "matched");
    assert_eq!(grow["base"]["allocations"], 100);
    assert_eq!(grow["new"]["allocations"], 200);
    assert_eq!(grow["base"]["allocated_bytes"], 100 * 7001);
    assert_eq!(grow["new"]["allocated_bytes"], 200 * 7001);
    assert_eq!(grow["base"]["temporary"], 100);
    assert_eq!(grow["new"]["temporary"], 200);
    assert_eq!(grow["allocations_change"], 100);
    assert_eq!(grow["allocated_bytes_change"], 100 * 7001);
    let leak = site("leak_one");
    assert_eq!(leak["base"]["leaked_bytes"], 7002);
    assert_eq!(leak["new"]["leaked_bytes"], 2 * 7002);
    assert_eq!(leak["leaked_bytes_change"], 7002);
    // Innermost first: glibc's malloc (by whatever name its symbols give it), then grow.
    let allocator = grow["frames"][0]["module"].as_str().unwrap();
    assert!(allocator.ends_with("/libc.so.6"), "{allocator}");
    assert_eq!(grow["frames"][1]["function"], "grow");

    // The differential folded lines: `stack base new`, frames by function and module; by
    // default allocated bytes.
    let folded = |view: &str, weight: &str| -> String {
        let args = [
            "diff", b, n, "--format", "folded", "--view", view, "--weight", weight,
        ];
        run(&args).expect_code(0).stdout
    };
    let allocated = run(&["diff", b, n, "--format", "folded"])
        .expect_code(0)
        .stdout;
    assert_eq!(allocated, folded("allocated", "bytes"));
    // The base and new values of the one stack through `function`, whose allocator frame
    // follows it (named by libc's symbols).
    let values = |out: &str, function: &str| -> String {
        let frame = format!(";{function} [diff];");
        let found: Vec<&str> = out.lines().filter(|l| l.contains(&frame)).collect();
        assert_eq!(found.len(), 1, "one stack through {function} in\n{out}");
        let leaf = found[0].rsplit(';').next().unwrap();
        assert!(leaf.contains(" [libc.so.6] "), "{}", found[0]);
        let mut words = found[0].rsplitn(3, ' ');
        let new = words.next().unwrap();
        format!("{} {new}", words.next().unwrap())
    };
    assert_eq!(
        values(&allocated, "grow"),
        format!("{} {}", 100 * 7001, 200 * 7001)
    );
    assert_eq!(values(&allocated, "leak_one"), "7002 14004");
    // The children (one, then two) allocate 7003 bytes each straight from main.
    let children: Vec<&str> = allocated
        .lines()
        .filter(|l| {
            let mut frames = l.rsplit(';');
            let leaf = frames.next().unwrap_or("");
            frames.next() == Some("main [diff]") && leaf.contains(" [libc.so.6] ")
        })
        .collect();
    assert_eq!(children.len(), 1, "{allocated}");
    assert!(children[0].ends_with(" 7003 14006"), "{allocated}");
    // --view and --weight: the leaked bytes of leak_one, the temporary count of grow.
    assert_eq!(values(&folded("leaked", "bytes"), "leak_one"), "7002 14004");
    assert_eq!(values(&folded("temporary", "count"), "grow"), "100 200");

    // The flame graph: XML whose frame titles carry the new recording's value of grow.
    let svg = scratch_file("diff_flame.svg");
    let out = run(&["diff", b, n, "--format", "flamegraph"])
        .expect_code(0)
        .stdout;
    std::fs::write(&svg, &out).unwrap();
    let titles = Command::new("python3")
        .args([
            "-c",
            "import sys, xml.etree.ElementTree as t\n\
             for e in t.parse(sys.argv[1]).iter('{http://www.w3.org/2000/svg}title'):\n\
             \tprint(e.text)",
        ])
        .arg(&svg)
        .output()
        .unwrap();
    assert!(titles.status.success(), "not XML: {}", svg.display());
    let titles = String::from_utf8(titles.stdout).unwrap();
    assert!(
        titles
            .lines()
            .any(|t| t.starts_with("grow [diff] (1,400,200 bytes, ")),
        "{titles}"
    );
    assert!(
        out.contains("memtrack diff: allocated, in bytes: diff 100 1 1 -&gt; diff 200 2 2"),
        "the title names the view and both commands"
    );
    let widths = run(&["diff", b, n, "--format", "flamegraph", "--base-widths"])
        .expect_code(0)
        .stdout;
    assert!(
        widths.contains("grow [diff] (700,100 bytes, "),
        "base widths"
    );

    // Without stacks in one of them: one line saying to record both without --no-stacks, exit 2.
    let plain = record_fixture(
        "diff_plain",
        &["--no-rss", "--no-stacks"],
        "diff",
        &["100", "1", "1"],
    );
    assert_eq!(plain.code(), 0);
    let p = plain.path.to_str().unwrap();
    let err = run(&["diff", b, p, "--format", "flamegraph"])
        .expect_code(2)
        .stderr;
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(p) && err.contains("record both recordings without `--no-stacks`"),
        "{err}"
    );
}

/// `memtrack record --control FIFO --no-rss` of `diff_bench N` as `name`.
fn record_benchmarks(name: &str, n: &str) -> common::Recording {
    let control = scratch_file(format!("{name}.ctl"));
    scratch_file(format!("{name}.ctl.ack"));
    let exe = fixture("diff_bench");
    record(
        name,
        &["--control", control.to_str().unwrap(), "--no-rss"],
        &[exe.to_str().unwrap(), n],
    )
}

#[test]
fn check_by_bench_names_the_benchmark_that_regressed() {
    if !can_record("check_by_bench_names_the_benchmark_that_regressed") {
        return;
    }
    let base = record_benchmarks("diff_bench_base", "100");
    let new = record_benchmarks("diff_bench_new", "200");
    assert_eq!((base.code(), new.code()), (0, 0), "{}", new.run.describe());
    let (b, n) = (base.path.to_str().unwrap(), new.path.to_str().unwrap());

    // What the benchmarks did, as diff sees them.
    let out = run(&["diff", b, n, "--format", "json"])
        .expect_code(0)
        .stdout;
    let d: serde_json::Value = serde_json::from_str(&out).unwrap();
    let bench = |uri: &str| {
        d["benchmarks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["uri"] == uri)
            .unwrap_or_else(|| panic!("no {uri} in {out}"))["metrics"]
            .clone()
    };
    let grows = bench("diff::grows");
    assert_eq!(diff_metric(&grows, "allocations"), (100, 200, 100));
    assert_eq!(
        diff_metric(&grows, "bytes_allocated"),
        (100 * 32001, 200 * 32001, 100 * 32001)
    );
    assert_eq!(
        diff_metric(&grows, "temporary_allocations"),
        (100, 200, 100)
    );
    let steady = bench("diff::steady");
    assert_eq!(diff_metric(&steady, "allocations"), (10, 10, 0));
    assert_eq!(
        diff_metric(&steady, "bytes_allocated"),
        (10 * 31001, 10 * 31001, 0)
    );

    let args = |limit: &'static str| {
        [
            "check",
            n,
            "--baseline",
            b,
            "--max-increase",
            limit,
            "--by",
            "bench",
        ]
    };
    let fail = run(&args("5%")).expect_code(1).stdout;
    let failed: Vec<&str> = fail.lines().filter(|l| l.ends_with("FAIL")).collect();
    for name in ["allocations", "bytes allocated", "temporary"] {
        assert!(
            failed
                .iter()
                .any(|l| l.starts_with(&format!("diff::grows: {name}"))),
            "diff::grows: {name} fails in\n{fail}"
        );
    }
    assert!(
        failed.iter().all(|l| l.starts_with("diff::grows: ")),
        "only diff::grows fails:\n{fail}"
    );
    assert!(
        fail.lines()
            .any(|l| l.starts_with("diff::steady: allocations") && l.ends_with("pass")),
        "diff::steady is checked and passes:\n{fail}"
    );
    // 200 allocations are 100% more than 100: exactly at the limit passes, under it fails.
    run(&args("100%")).expect_code(0);
    run(&args("99%")).expect_code(1);
}
