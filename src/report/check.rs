//! `memtrack check`: compares a recording's metrics with limits, so CI can gate on memory.
//!
//! Flow: `run_check` builds the report (narrowed to `--tree` or `--bench` if given) the same
//! way `report` does, then [`evaluate`] compares its totals with each limit and
//! [`write_results`] prints one aligned line per limit. The caller maps the outcome to an exit code: 0 all hold, 1 any fails, 2 a bad
//! file or flag.

use std::io::{self, Write};
use std::path::PathBuf;

use crate::table::{Column, Table};
use crate::units::format_bytes;

use super::metrics::{Report, Scope};

/// What `memtrack check` was asked for: the recording, what to check in it, and the limits,
/// each optional (`cli` refuses a check without one). Every limit holds when the value is at
/// most the limit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckOptions {
    /// The recording to read.
    pub file: PathBuf,
    /// What to check: the whole run, the tree of a pid (`--tree`: the process and its
    /// descendants) or a benchmark (`--bench`: its pid tree inside its windows).
    pub scope: Scope,
    /// Highest live heap, bytes (`--max-peak-heap`).
    pub max_peak_heap: Option<u64>,
    /// Successful allocations, reallocs included (`--max-allocs`).
    pub max_allocs: Option<u64>,
    /// Bytes allocated (`--max-bytes`).
    pub max_bytes: Option<u64>,
    /// Bytes live when their process exited (`--max-leaked`); the heap of processes still
    /// running at the end of the recording is not a leak.
    pub max_leaked: Option<u64>,
    /// Highest resident memory (anon + file + shmem), bytes (`--max-peak-rss`); for a tree or
    /// the run, the peak of the sum over processes alive at the same moment.
    pub max_peak_rss: Option<u64>,
    /// Check a recording that lost events or is damaged on what it holds, instead of refusing
    /// it (`--allow-incomplete`).
    pub allow_incomplete: bool,
}

impl CheckOptions {
    /// Whether no limit was given.
    pub fn has_no_limit(&self) -> bool {
        self.max_peak_heap.is_none()
            && self.max_allocs.is_none()
            && self.max_bytes.is_none()
            && self.max_leaked.is_none()
            && self.max_peak_rss.is_none()
    }
}

/// The flags that set limits, for the message when none is given.
pub const LIMIT_FLAGS: &str =
    "--max-peak-heap SIZE, --max-allocs N, --max-bytes SIZE, --max-leaked SIZE, --max-peak-rss SIZE";

/// What a limit measures, which decides how its numbers are shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quantity {
    /// A size in bytes.
    Bytes,
    /// A count.
    Count,
}

/// One limit compared with the recording.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitResult {
    /// What is limited, for people ("peak heap").
    pub name: &'static str,
    /// The flag that set the limit.
    pub flag: &'static str,
    /// Bytes or a count.
    pub quantity: Quantity,
    /// The recording's value.
    pub value: u64,
    /// The limit.
    pub limit: u64,
    /// Whether `value <= limit`.
    pub pass: bool,
}

/// Compares the totals of `report` (already narrowed to the scope) with every given limit, in
/// the order the flags are documented.
pub fn evaluate(report: &Report, opts: &CheckOptions) -> Vec<LimitResult> {
    let heap = &report.totals.heap;
    let candidates = [
        (
            "peak heap",
            "--max-peak-heap",
            Quantity::Bytes,
            heap.peak_live_bytes,
            opts.max_peak_heap,
        ),
        (
            "allocations",
            "--max-allocs",
            Quantity::Count,
            heap.allocs,
            opts.max_allocs,
        ),
        (
            "bytes allocated",
            "--max-bytes",
            Quantity::Bytes,
            heap.bytes_allocated,
            opts.max_bytes,
        ),
        (
            "leaked",
            "--max-leaked",
            Quantity::Bytes,
            heap.leaked.bytes,
            opts.max_leaked,
        ),
        (
            "peak resident",
            "--max-peak-rss",
            Quantity::Bytes,
            report.totals.resident.as_ref().map_or(0, |r| r.peak_bytes),
            opts.max_peak_rss,
        ),
    ];
    candidates
        .into_iter()
        .filter_map(|(name, flag, quantity, value, limit)| {
            limit.map(|limit| LimitResult {
                name,
                flag,
                quantity,
                value,
                limit,
                pass: value <= limit,
            })
        })
        .collect()
}

/// A number as the check line shows it: sizes both rounded and exact, so a failure by a few
/// bytes is visible.
fn show(quantity: Quantity, n: u64) -> String {
    match quantity {
        Quantity::Bytes => format!("{} ({n} bytes)", format_bytes(n)),
        Quantity::Count => n.to_string(),
    }
}

/// Prints one aligned line per limit: name, value, limit, pass or FAIL; then a line per reason
/// the report is incomplete.
pub fn write_results(
    results: &[LimitResult],
    report: &Report,
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut table = Table::new(vec![
        Column::left(""),
        Column::right("  "),
        Column::right("  limit "),
        Column::left("  "),
    ]);
    for r in results {
        let verdict = if r.pass { "pass" } else { "FAIL" };
        table.row(vec![
            r.name.to_string(),
            show(r.quantity, r.value),
            show(r.quantity, r.limit),
            verdict.to_string(),
        ]);
    }
    for line in table.lines() {
        writeln!(out, "{line}")?;
    }
    for reason in &report.incomplete_reasons {
        writeln!(out, "incomplete: {reason}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{exit, free, malloc, run, seq};

    /// 3 allocations of 1000 bytes, peak 2000, one block of 1000 leaked at exit.
    fn report() -> Report {
        run(seq(vec![
            malloc(1, 1000),
            malloc(2, 1000),
            free(1),
            malloc(3, 1000),
            free(3),
            exit(0),
        ]))
    }

    fn all(limit: u64) -> CheckOptions {
        CheckOptions {
            file: PathBuf::new(),
            scope: Scope::Run,
            max_peak_heap: Some(limit),
            max_allocs: Some(limit),
            max_bytes: Some(limit),
            max_leaked: Some(limit),
            max_peak_rss: None,
            allow_incomplete: false,
        }
    }

    #[test]
    fn peak_rss_is_the_resident_peak() {
        use crate::format::RssMember;
        use crate::testkit::rss;
        // 100 anon pages, then 50 file pages, then anon down to 20: peak 150 pages.
        let report = run(seq(vec![
            rss(RssMember::Anon, 100, 100, true),
            rss(RssMember::File, 50, 50, true),
            rss(RssMember::Anon, -80, 20, true),
            exit(0),
        ]));
        let page = 4096;
        let limit = |n| CheckOptions {
            max_peak_rss: Some(n),
            ..CheckOptions::default()
        };
        let r = evaluate(&report, &limit(150 * page));
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].value, r[0].pass), (150 * page, true));
        assert!(!evaluate(&report, &limit(150 * page - 1))[0].pass);
    }

    #[test]
    fn values_are_the_totals() {
        let r = evaluate(&report(), &all(u64::MAX));
        let values: Vec<u64> = r.iter().map(|l| l.value).collect();
        assert_eq!(values, vec![2000, 3, 3000, 1000]);
    }

    #[test]
    fn only_given_limits_are_checked() {
        let opts = CheckOptions {
            max_allocs: Some(3),
            ..CheckOptions::default()
        };
        let r = evaluate(&report(), &opts);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].flag, "--max-allocs");
    }

    #[test]
    fn equal_to_limit_passes() {
        let opts = CheckOptions {
            max_peak_heap: Some(2000),
            ..CheckOptions::default()
        };
        assert!(evaluate(&report(), &opts)[0].pass);
    }

    #[test]
    fn one_over_limit_fails() {
        let opts = CheckOptions {
            max_peak_heap: Some(1999),
            ..CheckOptions::default()
        };
        assert!(!evaluate(&report(), &opts)[0].pass);
    }

    #[test]
    fn leaked_limit_uses_leaked_bytes() {
        let opts = CheckOptions {
            max_leaked: Some(999),
            ..CheckOptions::default()
        };
        let r = evaluate(&report(), &opts);
        assert_eq!((r[0].value, r[0].pass), (1000, false));
    }

    #[test]
    fn no_limit_detected() {
        assert!(CheckOptions::default().has_no_limit());
        assert!(!all(1).has_no_limit());
    }

    #[test]
    fn lines_show_value_limit_and_verdict() {
        let rep = report();
        let results = evaluate(&rep, &all(2000));
        let mut out = Vec::new();
        write_results(&results, &rep, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[0].starts_with("peak heap "), "{text}");
        assert!(lines[0].contains("2.0 KiB (2000 bytes)"), "{text}");
        assert!(lines[0].ends_with("pass"), "{text}");
        assert!(lines[2].starts_with("bytes allocated"), "{text}");
        assert!(lines[2].ends_with("FAIL"), "{text}");
    }

    #[test]
    fn lines_align() {
        let rep = report();
        let results = evaluate(&rep, &all(2000));
        let mut out = Vec::new();
        write_results(&results, &rep, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let columns: Vec<usize> = text.lines().map(|l| l.find("limit").unwrap()).collect();
        assert!(columns.windows(2).all(|w| w[0] == w[1]), "{text}");
    }

    #[test]
    fn incomplete_reasons_are_printed() {
        let mut rep = report();
        rep.incomplete_reasons.push("3 events were lost".into());
        let mut out = Vec::new();
        write_results(&[], &rep, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "incomplete: 3 events were lost\n"
        );
    }
}
