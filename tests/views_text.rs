//! `memtrack report` text that fits the screen and `--format markdown`, on a real recording of
//! testdata/fork_tree.c (a parent and three children, one of which execs malloc_free): the
//! markdown says exactly the numbers `report --format json` gives for the same file, its
//! summed row is the total minus the rows shown, and the text at COLUMNS=60 has no line wider
//! than 60.

mod common;

use std::path::PathBuf;
use std::sync::OnceLock;

use common::{fixture, record_fixture, report_json, report_text};
use memtrack::units::{format_bytes, format_duration_ns};
use serde_json::Value;

/// The recording every test here reads, made once (with call stacks); `None` when this machine
/// cannot record.
fn recording() -> Option<&'static PathBuf> {
    static PATH: OnceLock<Option<PathBuf>> = OnceLock::new();
    PATH.get_or_init(|| {
        if !common::can_record("views_text") {
            return None;
        }
        let target = fixture("malloc_free");
        let rec = record_fixture(
            "views_text_fork_tree",
            &["--stacks"],
            "fork_tree",
            &[target.to_str().unwrap()],
        );
        assert_eq!(rec.code(), 0, "{}", rec.describe());
        Some(rec.path)
    })
    .as_ref()
}

/// The cells of a markdown table row, without the outer bars.
fn cells(row: &str) -> Vec<&str> {
    let inner = row.trim().trim_start_matches("| ").trim_end_matches(" |");
    inner.split(" | ").collect()
}

/// The row of the markdown processes table for `pid`.
fn process_row(md: &str, pid: u64) -> Vec<&str> {
    md.lines()
        .find(|l| l.starts_with(&format!("| {pid} | ")))
        .map(cells)
        .unwrap_or_else(|| panic!("no row for pid {pid}:\n{md}"))
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// "3.0 KiB at 1.2 ms" as text and markdown write a peak.
fn peak(bytes: &Value, at_ns: &Value) -> String {
    match at_ns.as_u64() {
        Some(at) => format!("{} at {}", format_bytes(u(bytes)), format_duration_ns(at)),
        None => format_bytes(u(bytes)),
    }
}

#[test]
fn markdown_says_what_json_says() {
    let Some(path) = recording() else { return };
    let json = report_json(path, &["--stacks"]);
    let md = report_text(path, &["--format", "markdown", "--stacks"], None);
    let h = &json["totals"]["heap"];
    // The fixture: parent 11000, children 11001 and 2 x 11002, malloc_free 1 after the exec.
    assert_eq!(u(&json["run"]["processes"]), 4, "{json:#}");
    assert!(u(&h["allocs"]) >= 1 + 1 + 2 + 3, "{h:#}");
    let row = |label: &str, value: String| format!("\n| {label} | {value} |\n");
    for want in [
        row(
            "peak heap",
            peak(&h["peak_live_bytes"], &h["peak_live_at_ns"]),
        ),
        row(
            "allocations",
            format!(
                "{} ({})",
                u(&h["allocs"]),
                format_bytes(u(&h["bytes_allocated"]))
            ),
        ),
        row(
            "leaked",
            format!(
                "{} block{}, {}",
                u(&h["leaked"]["blocks"]),
                if u(&h["leaked"]["blocks"]) == 1 {
                    ""
                } else {
                    "s"
                },
                format_bytes(u(&h["leaked"]["bytes"]))
            ),
        ),
        row(
            "peak resident",
            peak(
                &json["totals"]["resident"]["peak_bytes"],
                &json["totals"]["resident"]["peak_at_ns"],
            ),
        ),
        row(
            "peak mapped",
            peak(
                &json["totals"]["mapped"]["peak_bytes"],
                &json["totals"]["mapped"]["peak_at_ns"],
            ),
        ),
        row("lost events", "none".to_string()),
    ] {
        assert!(md.contains(&want), "{want:?} missing from:\n{md}");
    }
    assert_eq!(json["complete"], true, "{json:#}");
    assert!(!md.contains("WARNING"), "{md}");

    // One row per process (4 fit in the default 20), numbers as the JSON's.
    assert!(md.contains("\n#### Processes\n"), "{md}");
    for p in json["processes"].as_array().unwrap() {
        let own = &p["own"]["heap"];
        let c = process_row(&md, u(&p["pid"]));
        assert_eq!(c[1], u(&own["allocs"]).to_string(), "{md}");
        assert_eq!(c[2], format_bytes(u(&own["bytes_allocated"])), "{md}");
        assert_eq!(c[3], format_bytes(u(&own["peak_live_bytes"])), "{md}");
        assert_eq!(c[4], format_bytes(u(&own["leaked"]["bytes"])), "{md}");
        assert_eq!(
            c[5],
            format_bytes(u(&p["own"]["resident"]["peak_bytes"])),
            "{md}"
        );
    }
    // The exec'd child leaked malloc_free's 10009 bytes.
    assert!(
        md.lines()
            .any(|l| l.contains(&format!("| {} |", format_bytes(10009)))
                && l.contains("malloc\\_free")),
        "{md}"
    );
    let sites = &json["stacks"];
    let shown = sites["sites"].as_array().unwrap().len() as u64;
    let title = if shown == u(&sites["sites_total"]) {
        format!("{shown} sites")
    } else {
        format!("top {shown} of {} sites", u(&sites["sites_total"]))
    };
    assert!(
        md.contains(&format!(
            "\n#### Allocation sites by live bytes at the peak: {title} (whole run (4 processes))\n"
        )),
        "{md}"
    );
    let first = &sites["sites"][0];
    let site_row = md
        .lines()
        .find(|l| l.starts_with("| 1 | "))
        .map(cells)
        .unwrap_or_else(|| panic!("no site row:\n{md}"));
    assert_eq!(site_row[1], format_bytes(u(&first["peak_live_bytes"])));
    assert_eq!(site_row[3], u(&first["allocations"]).to_string());
}

#[test]
fn markdown_top_sums_the_rest_exactly() {
    let Some(path) = recording() else { return };
    let json = report_json(path, &[]);
    let md = report_text(path, &["--format", "markdown", "--top", "2"], None);
    assert!(
        md.contains("\n#### Processes: top 2 of 4 by peak heap\n"),
        "{md}"
    );
    let processes = json["processes"].as_array().unwrap();
    let mut by_peak: Vec<&Value> = processes.iter().collect();
    by_peak.sort_by_key(|p| std::cmp::Reverse(u(&p["own"]["heap"]["peak_live_bytes"])));
    let shown: Vec<u64> = md
        .lines()
        .filter(|l| l.starts_with("| "))
        .filter_map(|l| cells(l)[0].parse::<u64>().ok())
        .collect();
    assert_eq!(shown.len(), 2, "{md}");
    for (pid, p) in shown.iter().zip(&by_peak) {
        assert_eq!(
            u(&p["own"]["heap"]["peak_live_bytes"]),
            u(
                &processes.iter().find(|q| u(&q["pid"]) == *pid).unwrap()["own"]["heap"]
                    ["peak_live_bytes"]
            ),
            "{md}"
        );
    }
    let rest = md
        .lines()
        .find(|l| l.starts_with("| … | "))
        .map(cells)
        .unwrap_or_else(|| panic!("no summed row:\n{md}"));
    let sum_shown = |field: &str| -> u64 {
        shown
            .iter()
            .map(|pid| {
                let p = processes.iter().find(|q| u(&q["pid"]) == *pid).unwrap();
                u(&p["own"]["heap"][field])
            })
            .sum()
    };
    let h = &json["totals"]["heap"];
    assert_eq!(
        rest[1],
        (u(&h["allocs"]) - sum_shown("allocs")).to_string(),
        "{md}"
    );
    assert_eq!(rest.last(), Some(&"2 more processes"), "{md}");
    // --all lists every process.
    let all = report_text(path, &["--format", "markdown", "--all"], None);
    assert!(!all.contains("more processes"), "{all}");
}

#[test]
fn text_at_sixty_columns_fits() {
    let Some(path) = recording() else { return };
    let json = report_json(path, &[]);
    for args in [
        &[][..],
        &["--stacks"],
        &["--sort", "allocs"],
        &["--by", "bench"],
    ] {
        let text = report_text(path, args, Some("60"));
        for line in text.lines() {
            assert!(
                line.chars().count() <= 60,
                "{args:?}: {} characters: {line:?}\n{text}",
                line.chars().count()
            );
        }
        if args.is_empty() {
            // Every process still has its row, with its pid and its peak.
            for p in json["processes"].as_array().unwrap() {
                let pid = u(&p["pid"]).to_string();
                let peak = format_bytes(u(&p["own"]["heap"]["peak_live_bytes"]));
                assert!(
                    text.lines()
                        .any(|l| l.split_whitespace().next() == Some(&pid) && l.contains(&peak)),
                    "pid {pid} with {peak} in:\n{text}"
                );
            }
            assert!(text.contains("(left out to fit the width: "), "{text}");
        }
    }
    // Wide, nothing is left out; $COLUMNS also sets the width of a report written with -o.
    let wide = report_text(path, &[], Some("200"));
    assert!(!wide.contains("left out to fit"), "{wide}");
    assert!(wide.contains("  FAILED  "), "{wide}");
    let out = common::scratch_file("views_text_report.txt");
    report_text(path, &["-o", out.to_str().unwrap()], Some("200"));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), wide);
}
