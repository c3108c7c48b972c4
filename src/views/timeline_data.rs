//! The timeline as data: `report --format timeline-csv` (one row per point of every series)
//! and `--format timeline-json` (the whole [`Timeline`], events included). A renderer: it only
//! reads the report's `timeline`, which `timeline` built during the pass.
//!
//! Both are documented in docs/report-schema.md, "Timeline".

use std::io::{self, Write};

use serde::Serialize;

use crate::model::metrics::{Report, SCHEMA_VERSION};
use crate::model::timeline::Timeline;

/// The header row of the CSV form.
pub(super) const CSV_HEADER: &str = "time_s,bucket_s,series,pid,heap_bytes_max,heap_bytes_min,\
heap_bytes_last,resident_bytes_max,resident_bytes_min,resident_bytes_last";

/// The report's timeline, or an error saying the pass did not follow it (a caller bug, not
/// user input: `run_report` asks for it whenever the format needs it).
fn timeline_of(report: &Report) -> io::Result<&Timeline> {
    report
        .timeline
        .as_ref()
        .ok_or_else(|| io::Error::other("the report was read without its timeline"))
}

/// Nanoseconds as seconds with every digit: "1.000000250".
fn seconds(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// Writes one CSV row per point: the run's, then each drawn process's, then "others"; the
/// resident columns are empty when the recording has no resident memory.
pub fn write_csv(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let t = timeline_of(report)?;
    writeln!(out, "{CSV_HEADER}")?;
    for s in &t.series {
        let pid = s.pid.map_or_else(String::new, |p| p.to_string());
        let bucket = seconds(s.bucket_ns);
        for p in &s.points {
            let opt = |v: Option<u64>| v.map_or_else(String::new, |v| v.to_string());
            writeln!(
                out,
                "{},{bucket},{},{pid},{},{},{},{},{},{}",
                seconds(p.at_ns),
                s.name,
                p.heap_max,
                p.heap_min,
                p.heap_last,
                opt(p.resident_max),
                opt(p.resident_min),
                opt(p.resident_last),
            )?;
        }
    }
    Ok(())
}

/// The JSON form: the timeline with the schema version first.
#[derive(Serialize)]
struct TimelineJson<'a> {
    schema_version: u32,
    #[serde(flatten)]
    timeline: &'a Timeline,
}

/// Writes the timeline as one JSON object.
pub fn write_json(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let t = timeline_of(report)?;
    let doc = TimelineJson {
        schema_version: SCHEMA_VERSION,
        timeline: t,
    };
    serde_json::to_writer_pretty(&mut *out, &doc).map_err(io::Error::other)?;
    writeln!(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::accounting::Accounting;
    use crate::testkit::*;

    fn report_of(events: Vec<crate::format::Event>) -> Report {
        let mut a = Accounting::new(&header()).with_timeline();
        for e in &events {
            a.apply(e);
        }
        a.finish(None)
    }

    #[test]
    fn csv_rows_follow_the_series() {
        let r = report_of(vec![
            at(1_000_000_250, 1, 1, malloc(1, 100)),
            at(2_000_000_000, 1, 1, free(1)),
        ]);
        let mut out = Vec::new();
        write_csv(&r, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], CSV_HEADER);
        let run: Vec<&str> = lines
            .iter()
            .filter(|l| l.contains(",run,"))
            .copied()
            .collect();
        assert_eq!(run.len(), 2, "{text}");
        let first: Vec<&str> = run[0].split(',').collect();
        assert_eq!(first[2..7], ["run", "", "100", "0", "100"]);
        // No resident memory: the resident columns are empty.
        assert_eq!(first[7..], ["", "", ""]);
        let at: f64 = first[0].parse().unwrap();
        let width: f64 = first[1].parse().unwrap();
        assert!(
            at <= 1.000_000_250 && 1.000_000_250 < at + width,
            "{}",
            run[0]
        );
        assert!(lines.iter().any(|l| l.contains(",pid 1,1,")), "{text}");
    }

    #[test]
    fn json_has_the_version_and_the_series() {
        let r = report_of(vec![at(5, 1, 1, malloc(1, 7))]);
        let mut out = Vec::new();
        write_json(&r, &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["schema_version"], SCHEMA_VERSION);
        assert_eq!(v["series"][0]["name"], "run");
        assert_eq!(v["series"][0]["heap_peak"]["bytes"], 7);
        assert_eq!(v["series"][0]["heap_peak"]["at_ns"], 5);
    }

    #[test]
    fn seconds_keep_every_digit() {
        assert_eq!(seconds(1_000_000_250), "1.000000250");
        assert_eq!(seconds(0), "0.000000000");
    }

    #[test]
    fn a_report_without_timeline_is_an_error_not_a_panic() {
        let r = run(seq(vec![malloc(1, 1)]));
        assert!(write_csv(&r, &mut Vec::new()).is_err());
    }
}
