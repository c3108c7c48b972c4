//! `memtrack report --functions` on a real recording: a function that allocates through five
//! call paths is no top site of `--stacks`, yet first by function, with its exact bytes and
//! count, and `main`'s cumulative is the whole heap.

mod common;

use common::{record_fixture, report_json, report_text};
use serde_json::Value;

/// The row of `functions` named `name`.
fn function<'a>(functions: &'a [Value], name: &str) -> &'a Value {
    functions
        .iter()
        .find(|f| f["function"] == name)
        .unwrap_or_else(|| panic!("no function {name}: {functions:#?}"))
}

/// (allocations, allocated_bytes) of a cost.
fn counts(cost: &Value) -> (u64, u64) {
    (
        cost["allocations"].as_u64().unwrap(),
        cost["allocated_bytes"].as_u64().unwrap(),
    )
}

#[test]
fn a_function_of_many_call_paths_is_first_by_function() {
    skip_unless_recording!("a_function_of_many_call_paths_is_first_by_function");
    let rec = record_fixture("functions", &["--stacks"], "stacks/functions", &[]);
    assert_eq!(rec.run.code(), 0, "{}", rec.run.describe());
    let path = rec.path.to_str().unwrap();
    let r = report_json(
        path,
        &[
            "--stacks-by",
            "allocated",
            "--functions-by",
            "allocated",
            "--functions-top",
            "0",
        ],
    );
    // By site: big's 3001 bytes first; each of grow's five sites has at most 1005.
    let sites = r["stacks"]["sites"].as_array().unwrap();
    assert_eq!(sites[0]["allocated_bytes"], 3001, "{sites:#?}");
    let grow_sites: Vec<u64> = sites
        .iter()
        .filter(|s| s["frames"][1]["function"] == "grow")
        .map(|s| s["allocated_bytes"].as_u64().unwrap())
        .collect();
    assert_eq!(grow_sites, [1005, 1004, 1003, 1002, 1001], "{sites:#?}");

    let f = &r["functions"];
    assert_eq!(f["recorded"], true, "{f:#}");
    let functions = f["functions"].as_array().unwrap();
    let first = &functions[0];
    assert_eq!(first["function"], "grow", "{f:#}");
    assert_eq!(counts(&first["self"]), (5, 5015), "{first:#}");
    assert_eq!(counts(&first["cumulative"]), (5, 5015), "{first:#}");
    assert!(
        first["file"]
            .as_str()
            .unwrap()
            .ends_with("stacks/functions.c"),
        "{first:#}"
    );
    assert!(
        first["module"]
            .as_str()
            .unwrap()
            .ends_with("stacks_functions"),
        "{first:#}"
    );
    let big = function(functions, "big");
    assert_eq!(counts(&big["self"]), (1, 3001), "{big:#}");
    for k in 1..=5 {
        let caller = function(functions, &format!("caller_{k}"));
        assert_eq!(counts(&caller["self"]), (0, 0), "{caller:#}");
        assert_eq!(counts(&caller["cumulative"]), (1, 1000 + k), "{caller:#}");
    }
    // The allocator's frame (glibc's __GI___libc_malloc) is no function of the table.
    assert!(
        functions
            .iter()
            .all(|f| !f["function"].as_str().unwrap().contains("malloc")),
        "{f:#}"
    );
    // main is on every stack: its cumulative is the whole heap, which self adds up to.
    let heap = &r["totals"]["heap"];
    let main = function(functions, "main");
    assert_eq!(counts(&main["self"]), (0, 0), "{main:#}");
    assert_eq!(counts(&main["cumulative"]), (6, 8016), "{main:#}");
    assert_eq!(
        (heap["allocs"].as_u64(), heap["bytes_allocated"].as_u64()),
        (Some(6), Some(8016)),
        "{heap:#}"
    );
    assert_eq!(counts(&f["total"]), (6, 8016), "{f:#}");

    let text = report_text(
        path,
        &["--functions", "--functions-by", "allocated"],
        Some("200"),
    );
    let at = text
        .find("allocating functions by bytes allocated")
        .unwrap_or_else(|| panic!("{text}"));
    let row = text[at..]
        .lines()
        .find(|l| l.trim_start().starts_with("1 "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        row.contains("4.9 KiB") && row.contains("62.6%") && row.contains("grow (functions.c:"),
        "{row}"
    );
}

#[test]
fn without_stacks_the_functions_say_so() {
    skip_unless_recording!("without_stacks_the_functions_say_so");
    let rec = record_fixture(
        "functions_no_stacks",
        &["--no-stacks"],
        "stacks/functions",
        &[],
    );
    assert_eq!(rec.run.code(), 0, "{}", rec.run.describe());
    let text = report_text(&rec.path, &["--functions"], Some("200"));
    assert!(
        text.contains(
            "allocating functions: this recording has no call stacks (it was recorded with \
             --no-stacks); record again without it"
        ),
        "{text}"
    );
    let r = report_json(&rec.path, &["--functions"]);
    assert_eq!(r["functions"]["recorded"], false);
}
