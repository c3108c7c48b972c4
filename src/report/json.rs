//! The script form of a report: the [`Report`] as JSON, schema in docs/report-schema.md.
//!
//! Flow: `run_report` builds a narrowed report and hands it here with `--format json`. The
//! structure is `metrics` itself, so the JSON carries exactly the numbers the text form shows
//! (in bytes and nanoseconds rather than rounded units), under `schema_version`.

use std::io::{self, Write};

use super::metrics::Report;

/// Writes `report` as pretty-printed JSON followed by a newline.
pub fn write_json(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, report).map_err(io::Error::from)?;
    writeln!(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Header, ReadEnd};
    use crate::report::metrics::SCHEMA_VERSION;
    use crate::testkit::analyze;
    use crate::testkit::{at, exit, header, malloc};
    use serde_json::Value;

    /// Process 1 allocates 24 bytes at 5 ns and exits without freeing them.
    fn sample(end: Option<&ReadEnd>) -> Value {
        let events = vec![at(5, 1, 1, malloc(0x10, 24)), at(6, 1, 1, exit(0))];
        let mut out = Vec::new();
        write_json(&analyze(&header(), events, end), &mut out).unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    #[test]
    fn has_schema_version() {
        assert_eq!(sample(None)["schema_version"], SCHEMA_VERSION);
    }

    #[test]
    fn schema_version_is_first() {
        let mut out = Vec::new();
        let report = analyze(&Header::default(), Vec::new(), None);
        write_json(&report, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("{\n  \"schema_version\": 1,"), "{text}");
    }

    #[test]
    fn ends_with_newline() {
        let mut out = Vec::new();
        write_json(&analyze(&Header::default(), Vec::new(), None), &mut out).unwrap();
        assert_eq!(out.last(), Some(&b'\n'));
    }

    #[test]
    fn totals_in_bytes() {
        let v = sample(None);
        assert_eq!(v["totals"]["heap"]["bytes_allocated"], 24);
        assert_eq!(v["totals"]["heap"]["leaked"]["bytes"], 24);
        assert_eq!(v["totals"]["heap"]["peak_live_at_ns"], 5);
    }

    #[test]
    fn process_fields() {
        let v = sample(None);
        let p = &v["processes"][0];
        assert_eq!(p["pid"], 1);
        assert_eq!(p["parent_pid"], Value::Null);
        assert_eq!(p["exit"]["exit_code"], 0);
        assert_eq!(p["own"]["heap"]["allocs"], 1);
        assert_eq!(p["tree"]["processes"], 1);
    }

    #[test]
    fn histogram_bucket_bounds() {
        let v = sample(None);
        let b = &v["totals"]["heap"]["size_histogram"][0];
        assert_eq!(
            (b["min_bytes"].as_u64(), b["max_bytes"].as_u64()),
            (Some(16), Some(31))
        );
    }

    #[test]
    fn damage_is_described() {
        let end = ReadEnd::Damaged {
            offset: 77,
            reason: "bad checksum".into(),
        };
        let v = sample(Some(&end));
        assert_eq!(v["complete"], false);
        assert_eq!(v["damage"]["offset_bytes"], 77);
        assert_eq!(v["incomplete_reasons"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn scope_is_run_by_default() {
        assert_eq!(sample(None)["scope"]["kind"], "run");
    }
}
