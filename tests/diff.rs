//! `memtrack diff` and `check --baseline` on two real recordings of testdata/diff.c that differ
//! by exactly what their arguments say: `diff 100 1 1` against `diff 200 2 2` (100 more
//! temporary blocks of 7001 bytes in grow(), one more leaked block of 7002 bytes, one more
//! child process).

mod common;

use common::{can_record, record_fixture, run};

/// The value of `metric` in a diff's list of metrics: (base, new, change).
fn metric(list: &serde_json::Value, name: &str) -> (u64, u64, i64) {
    let m = list
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == name)
        .unwrap_or_else(|| panic!("no {name} in {list}"));
    (
        m["base"].as_u64().unwrap(),
        m["new"].as_u64().unwrap(),
        m["change"].as_i64().unwrap(),
    )
}

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
    assert_eq!(metric(run_metrics, "allocations"), (102, 204, 102));
    assert_eq!(
        metric(run_metrics, "temporary_allocations"),
        (101, 202, 101)
    );
    assert_eq!(metric(run_metrics, "leaked_blocks"), (1, 2, 1));
    assert_eq!(metric(run_metrics, "leaked_bytes"), (7002, 14004, 7002));
    assert_eq!(
        metric(run_metrics, "bytes_allocated").2,
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
