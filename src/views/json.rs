//! The script form of a report: the [`Report`] as JSON, schema in docs/report-schema.md.
//!
//! Flow: `run_report` builds a narrowed report and hands it here with `--format json`. The
//! structure is `metrics` itself, so the JSON carries exactly the numbers the text form shows
//! (in bytes and nanoseconds rather than rounded units), under `schema_version`.

use std::io::{self, Write};

use crate::model::metrics::Report;

/// Writes `report` as pretty-printed JSON followed by a newline.
pub fn write_json(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, report).map_err(io::Error::from)?;
    writeln!(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Header, ReadEnd};
    use crate::model::metrics::SCHEMA_VERSION;
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

    /// The JSON of a run whose only site (main -> malloc, symbolized) leaks 24 bytes, with
    /// `report --stacks`.
    fn sites_sample(walks: bool) -> Value {
        sites_sample_with(walks, crate::analyze::stacks::SiteOptions::default())
    }

    /// [`sites_sample`] with the sites pass's `options`.
    fn sites_sample_with(walks: bool, options: crate::analyze::stacks::SiteOptions) -> Value {
        to_value(&sites_report(walks, options))
    }

    /// `report` as its JSON.
    fn to_value(report: &Report) -> Value {
        let mut out = Vec::new();
        write_json(report, &mut out).unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    /// The report of [`sites_sample_with`].
    fn sites_report(walks: bool, options: crate::analyze::stacks::SiteOptions) -> Report {
        use crate::model::metrics::Scope;
        use crate::testkit::{malloc_from, module, stack_node, stack_prelude, stack_stats, symbol};
        let mut kinds = vec![
            module(1, "/lib/libc.so.6"),
            stack_node(1, 0, 1, 0x100),
            stack_node(2, 1, 1, 0x9a1b0),
            symbol(1, 0x9a1b0, &[("malloc", "malloc.c", 3287)]),
        ];
        if walks {
            kinds.push(stack_stats([1, 0, 0, 0, 0, 0]));
        }
        let mut events = stack_prelude(kinds);
        events.extend([at(5, 1, 1, malloc_from(2, 0x10, 24)), at(6, 1, 1, exit(0))]);
        crate::analyze::accounting::analyze_sites(&header(), events, None, &Scope::Run, options)
    }

    /// The keys of object `v`, sorted.
    fn keys(v: &Value) -> Vec<String> {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    }

    #[test]
    fn stacks_shape() {
        let v = sites_sample(true);
        let s = &v["stacks"];
        assert_eq!(
            keys(s),
            [
                "collisions",
                "order",
                "peak_live_at_ns",
                "peak_live_bytes",
                "recorded",
                "sites",
                "sites_total",
                "truncated",
                "uncached",
                "unknown",
                "unsupported",
                "walks"
            ]
        );
        assert_eq!(
            (s["recorded"].as_bool(), s["order"].as_str()),
            (Some(true), Some("peak"))
        );
        assert_eq!(
            (s["walks"].as_u64(), s["truncated"].as_u64()),
            (Some(1), Some(0))
        );
        let site = &s["sites"][0];
        assert_eq!(
            keys(site),
            [
                "allocated_bytes",
                "allocations",
                "frames",
                "leaked_blocks",
                "leaked_bytes",
                "live_at_end_blocks",
                "live_at_end_bytes",
                "lost_blocks",
                "lost_bytes",
                "peak_live_bytes",
                "stack_id",
                "suppressed_blocks",
                "suppressed_bytes",
                "temporary"
            ]
        );
        assert_eq!(site["stack_id"], 2);
        assert_eq!(site["allocated_bytes"], 24);
        assert_eq!(site["allocations"], 1);
        assert_eq!(site["peak_live_bytes"], 24);
        assert_eq!(site["leaked_bytes"], 24);
        assert_eq!(site["leaked_blocks"], 1);
        assert_eq!(site["temporary"], 0);
        let f = &site["frames"];
        assert_eq!(f[0]["function"], "malloc");
        assert_eq!(f[0]["file"], "malloc.c");
        assert_eq!(f[0]["line"], 3287);
        assert_eq!(f[0]["module"], "/lib/libc.so.6");
        assert_eq!(f[0]["offset"], 0x9a1b0);
        assert_eq!(f[0]["inlined"], false);
        assert_eq!(f[1]["function"], "");
        assert_eq!(f[1]["offset"], 0x100);
        assert_eq!(f.as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn functions_shape() {
        use crate::analyze::functions::FunctionOptions;
        use crate::analyze::stacks::SiteOptions;
        assert!(
            sites_sample(true).get("functions").is_none(),
            "only when asked"
        );
        let v = sites_sample_with(
            true,
            SiteOptions {
                functions: Some(FunctionOptions::default()),
                ..SiteOptions::default()
            },
        );
        let f = &v["functions"];
        assert_eq!(
            keys(f),
            ["functions", "functions_total", "order", "recorded", "total"]
        );
        assert_eq!(
            (f["recorded"].as_bool(), f["order"].as_str()),
            (Some(true), Some("peak"))
        );
        // One function: the program's frame after malloc's, which has no name.
        assert_eq!(f["functions_total"], 1);
        let row = &f["functions"][0];
        assert_eq!(
            keys(row),
            [
                "cumulative",
                "file",
                "function",
                "line",
                "module",
                "offset",
                "self"
            ]
        );
        assert_eq!(
            (&row["function"], &row["module"], &row["offset"]),
            (
                &Value::from(""),
                &Value::from("/lib/libc.so.6"),
                &Value::from(0x100)
            )
        );
        let cost = [
            "allocated_bytes",
            "allocations",
            "leaked_blocks",
            "leaked_bytes",
            "lost_bytes",
            "peak_live_bytes",
            "temporary",
        ];
        for c in [&row["self"], &row["cumulative"], &f["total"]] {
            assert_eq!(keys(c), cost);
            assert_eq!(
                (&c["allocated_bytes"], &c["leaked_bytes"]),
                (&Value::from(24), &Value::from(24))
            );
        }
    }

    #[test]
    fn sampled_sites_and_functions_carry_their_sampling() {
        use crate::analyze::functions::FunctionOptions;
        use crate::analyze::stacks::SiteOptions;
        let mut report = sites_report(
            true,
            SiteOptions {
                functions: Some(FunctionOptions::default()),
                ..SiteOptions::default()
            },
        );
        let exact = to_value(&report);
        assert!(exact["stacks"].get("sampling").is_none());
        assert!(exact["functions"].get("sampling").is_none());
        let sampling = crate::testkit::stack_sampling();
        report.stacks.as_mut().unwrap().sampling = Some(sampling);
        report.functions.as_mut().unwrap().sampling = Some(sampling);
        let mut v = to_value(&report);
        let expected = serde_json::json!({
            "mean_bytes": 524288,
            "seed": 7,
            "sampled_allocations": 1200,
            "allocations": 52000
        });
        for part in ["stacks", "functions"] {
            let object = v[part].as_object_mut().unwrap();
            assert_eq!(object.remove("sampling"), Some(expected.clone()), "{part}");
        }
        // Nothing else changes.
        assert_eq!(v, exact);
    }

    #[test]
    fn walk_counters_are_absent_when_the_file_has_none() {
        let v = sites_sample(false);
        assert_eq!(v["stacks"]["walks"], Value::Null);
        assert_eq!(v["stacks"]["sites_total"], 1);
    }

    #[test]
    fn no_stacks_key_without_the_flag() {
        assert!(sample(None).get("stacks").is_none());
    }

    #[test]
    fn scope_is_run_by_default() {
        assert_eq!(sample(None)["scope"]["kind"], "run");
    }
}
