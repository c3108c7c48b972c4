//! Golden outputs: what `report`, `check`, `diff` and `dump` print for the stored compat
//! samples, kept byte for byte under `testdata/golden/` and compared on every run, so a
//! refactor of the report side proves it changed nothing a user sees.
//!
//! Each case runs the real binary on files only (nothing is recorded) and stores its standard
//! output as `NAME` and its exit code and standard error as `NAME.status`. After a change
//! meant to alter an output, regenerate with `MEMTRACK_BLESS=1 cargo test --test golden` and
//! read the diff of `testdata/golden/` before committing it.

use std::path::{Path, PathBuf};
use std::process::Command;

use memtrack::views::FORMATS;

/// The samples the cases read, in `testdata/compat/`.
const SAMPLES: [&str; 6] = [
    "v1-malloc_free.mt",
    "v2-control.mt",
    "v3-pool.mt",
    "v4-stacks.mt",
    "v5-leaks.mt",
    "v6-rmap.mt",
];

/// One invocation: the golden file's name and the arguments after `memtrack`. `{compat}`
/// in an argument is the compat folder.
struct Case {
    name: String,
    args: Vec<String>,
}

fn case(name: impl Into<String>, args: &[&str]) -> Case {
    Case {
        name: name.into(),
        args: args.iter().map(|a| a.to_string()).collect(),
    }
}

fn cases() -> Vec<Case> {
    let v4 = "{compat}/v4-stacks.mt";
    let mut cases = Vec::new();
    // Every format of the sample with call stacks.
    for format in FORMATS.iter().map(|f| f.name) {
        cases.push(case(
            format!("report-v4-{format}"),
            &["report", v4, "--format", format],
        ));
    }
    // Every sample, as text and JSON, with and without sites.
    for sample in SAMPLES {
        let stem = sample.trim_end_matches(".mt");
        let file = format!("{{compat}}/{sample}");
        cases.push(case(format!("report-{stem}-text"), &["report", &file]));
        cases.push(case(
            format!("report-{stem}-json"),
            &["report", &file, "--format", "json"],
        ));
        cases.push(case(
            format!("report-{stem}-json-stacks"),
            &[
                "report",
                &file,
                "--format",
                "json",
                "--stacks",
                "--stacks-top",
                "0",
            ],
        ));
        cases.push(case(
            format!("report-{stem}-markdown"),
            &["report", &file, "--format", "markdown"],
        ));
        cases.push(case(format!("dump-{stem}"), &["dump", &file]));
        cases.push(case(
            format!("check-{stem}"),
            &[
                "check",
                &file,
                "--max-peak-heap",
                "64KiB",
                "--max-leaked",
                "0",
                "--max-allocs",
                "1000",
            ],
        ));
    }
    let v2 = "{compat}/v2-control.mt";
    let v5 = "{compat}/v5-leaks.mt";
    let v6 = "{compat}/v6-rmap.mt";
    cases.extend([
        // The text form's other shapes.
        case("report-v4-text-stacks", &["report", v4, "--stacks"]),
        case(
            "report-v4-text-stacks-by-allocated",
            &[
                "report",
                v4,
                "--stacks-by",
                "allocated",
                "--stacks-top",
                "2",
            ],
        ),
        case(
            "report-v4-markdown-stacks",
            &["report", v4, "--format", "markdown", "--stacks"],
        ),
        case(
            "report-v4-html-stacks",
            &["report", v4, "--format", "html", "--stacks"],
        ),
        case("report-v2-text-by-bench", &["report", v2, "--by", "bench"]),
        case(
            "report-v2-markdown-by-bench",
            &["report", v2, "--format", "markdown", "--by", "bench"],
        ),
        case(
            "report-v2-text-sort-bytes-top1",
            &["report", v2, "--sort", "bytes", "--top", "1"],
        ),
        case(
            "report-v2-text-all",
            &["report", v2, "--all", "--sort", "allocs"],
        ),
        case("report-v6-text-sort-rss", &["report", v6, "--sort", "rss"]),
        case("report-v4-text-narrow", &["report", v4, "--stacks"]),
        // The stack formats' views and weights.
        case(
            "report-v4-folded-leaked-count",
            &[
                "report", v4, "--format", "folded", "--view", "leaked", "--weight", "count",
            ],
        ),
        case(
            "report-v4-folded-allocated",
            &["report", v4, "--format", "folded", "--view", "allocated"],
        ),
        case(
            "report-v4-flamegraph-temporary",
            &[
                "report",
                v4,
                "--format",
                "flamegraph",
                "--view",
                "temporary",
            ],
        ),
        case(
            "report-v4-speedscope-leaked",
            &["report", v4, "--format", "speedscope", "--view", "leaked"],
        ),
        // The stacks as recorded, the allocator's frames kept.
        case(
            "report-v4-folded-allocator-frames",
            &["report", v4, "--format", "folded", "--allocator-frames"],
        ),
        case(
            "report-v4-pprof-allocator-frames",
            &["report", v4, "--format", "pprof", "--allocator-frames"],
        ),
        // Refusals: the words of each error.
        case(
            "report-v1-folded-refused",
            &["report", "{compat}/v1-malloc_free.mt", "--format", "folded"],
        ),
        case(
            "report-v4-unknown-format",
            &["report", v4, "--format", "xml"],
        ),
        case(
            "report-v4-json-top-refused",
            &["report", v4, "--format", "json", "--top", "3"],
        ),
        case(
            "report-v4-text-view-refused",
            &["report", v4, "--view", "leaked"],
        ),
        // check's other forms.
        case("check-v4-pass", &["check", v4, "--max-peak-heap", "1GiB"]),
        case(
            "check-v5-baseline",
            &[
                "check",
                v5,
                "--baseline",
                "{compat}/v4-stacks.mt",
                "--max-increase",
                "5%",
            ],
        ),
        case(
            "check-v2-by-bench",
            &[
                "check",
                v2,
                "--baseline",
                v2,
                "--by",
                "bench",
                "--max-increase",
                "0%",
            ],
        ),
        // diff of two samples, in each form.
        case("diff-v4-v5-text", &["diff", v4, v5]),
        case("diff-v4-v5-json", &["diff", v4, v5, "--format", "json"]),
        case(
            "diff-v1-v3-text",
            &["diff", "{compat}/v1-malloc_free.mt", "{compat}/v3-pool.mt"],
        ),
        case("diff-v5-v6-text-stacks", &["diff", v5, v6, "--stacks"]),
        case(
            "diff-v5-v6-json-stacks",
            &["diff", v5, v6, "--stacks", "--format", "json"],
        ),
        case("diff-v4-v5-folded", &["diff", v4, v5, "--format", "folded"]),
        case(
            "diff-v4-v5-flamegraph",
            &["diff", v4, v5, "--format", "flamegraph"],
        ),
        case("diff-v2-v2-text", &["diff", v2, v2]),
        // The help of the report-side commands names their choices.
        case("help-report", &["report", "--help"]),
        case("help-check", &["check", "--help"]),
        case("help-diff", &["diff", "--help"]),
    ]);
    cases
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs one case: its standard output, and its exit code and standard error as text. The
/// compat folder is given relative to the crate, so no absolute path reaches an output.
fn run(case: &Case) -> (Vec<u8>, Vec<u8>) {
    let args: Vec<String> = case
        .args
        .iter()
        .map(|a| a.replace("{compat}", "testdata/compat"))
        .collect();
    let columns = if case.name.ends_with("-narrow") {
        "60"
    } else {
        "100"
    };
    let out = Command::new(env!("CARGO_BIN_EXE_memtrack"))
        .args(&args)
        .current_dir(root())
        .env("COLUMNS", columns)
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR")
        .output()
        .unwrap_or_else(|e| panic!("memtrack {}: {e}", args.join(" ")));
    let mut status = format!(
        "memtrack {}\nexit {:?}\n",
        args.join(" "),
        out.status.code()
    )
    .into_bytes();
    status.extend_from_slice(&out.stderr);
    (out.stdout, status)
}

fn golden_dir() -> PathBuf {
    root().join("testdata/golden")
}

#[test]
fn every_output_is_its_golden() {
    let bless = std::env::var_os("MEMTRACK_BLESS").is_some();
    let dir = golden_dir();
    if bless {
        std::fs::create_dir_all(&dir).unwrap();
    }
    let mut failures = Vec::new();
    let cases = cases();
    for case in &cases {
        let (stdout, status) = run(case);
        for (path, got) in [
            (dir.join(&case.name), stdout),
            (dir.join(format!("{}.status", case.name)), status),
        ] {
            if bless {
                std::fs::write(&path, &got).unwrap();
                continue;
            }
            let want = std::fs::read(&path).unwrap_or_default();
            if want != got {
                failures.push(format!(
                    "{} differs from {} ({} bytes, want {}): first difference at byte {}",
                    case.name,
                    path.display(),
                    got.len(),
                    want.len(),
                    want.iter()
                        .zip(&got)
                        .position(|(a, b)| a != b)
                        .unwrap_or(want.len().min(got.len()))
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} outputs changed (regenerate with MEMTRACK_BLESS=1 if meant):\n{}",
        failures.len(),
        cases.len() * 2,
        failures.join("\n")
    );
}

/// `report --help` names every format of the table (its words are argh's doc comment, so a
/// new row must be named there too).
#[test]
fn report_help_names_every_format() {
    let help = std::fs::read_to_string(golden_dir().join("help-report")).unwrap();
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    for f in FORMATS {
        assert!(
            help.contains(f.name),
            "report --help does not name {}",
            f.name
        );
    }
}

/// No golden file is left over from a case that no longer exists.
#[test]
fn every_golden_has_its_case() {
    let names: std::collections::HashSet<String> = cases()
        .iter()
        .flat_map(|c| [c.name.clone(), format!("{}.status", c.name)])
        .collect();
    let Ok(entries) = std::fs::read_dir(golden_dir()) else {
        return;
    };
    for entry in entries {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(names.contains(&name), "testdata/golden/{name} has no case");
    }
}
