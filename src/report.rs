//! `memtrack report`: read a recording once through the pass (`analyze`), narrow its report to
//! the scope, and write it in the asked format by its view.
//!
//! Flow: [`run`] takes the options `cli` validated and picks standard output or `-o`;
//! [`run_report`] reads the file with `analyze::read_report_suppressed` (events stream through
//! the accounting: memory follows live allocations, not file length), narrows the
//! `model::metrics::Report` to the scope, then hands it to the view of `--format` (`views`).

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use crate::analyze::functions::FunctionOptions;
use crate::analyze::stacks::{SiteOptions, SiteOrder};
use crate::analyze::{narrow, read_report_suppressed, suppress, suppressible};
use crate::error::{Error, Result};
use crate::model::metrics::{Report, Scope};
use crate::model::profile::{View, Weight};
use crate::output::output_result;
use crate::views::rows::{RowOptions, Rows};
use crate::views::{screen, text, Format, ViewOptions, Writer};

/// What `memtrack report` was asked for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReportOptions {
    /// The recording to read.
    pub file: PathBuf,
    /// The format (`--format`), a row of `views::FORMATS`.
    pub format: &'static Format,
    /// What to show: the run, one process (`--pid`) or one tree (`--tree`).
    pub scope: Scope,
    /// Rows of the text form (`--by`); JSON always has processes and benchmarks.
    pub rows: Rows,
    /// The top allocation sites of the scope (`--stacks`), if asked for.
    pub stacks: Option<SiteOptions>,
    /// The top allocating functions of the scope (`--functions`), if asked for.
    pub functions: Option<FunctionOptions>,
    /// The file to write (`-o`), else standard output.
    pub output: Option<PathBuf>,
    /// Which process and benchmark rows the text and markdown tables show (`--top`, `--all`,
    /// `--sort`); JSON lists them all.
    pub row_options: RowOptions,
    /// The width of the text form; `None` to find it when writing (`screen::width`: `$COLUMNS`,
    /// else the terminal on standard output, else 80).
    pub width: Option<usize>,
    /// What a stack format weighs (`--view`); pprof and speedscope open on it.
    pub view: View,
    /// What a stack format weighs blocks by (`--weight`).
    pub weight: Weight,
    /// Whether the stack formats and the page's flame graphs keep the allocator's own frames
    /// (`--allocator-frames`); by default their stacks start at the allocator's caller.
    pub allocator_frames: bool,
    /// Leak suppression rules (`--suppress FILE`), if given.
    pub suppress: Option<suppress::Suppressions>,
}

/// Runs `memtrack report`: the report goes to `opts.output` (`output::write_file`: a file is
/// replaced only when complete, a device or FIFO written in place) or to standard output.
pub fn run(opts: &ReportOptions) -> Result<()> {
    // Only standard output can be a terminal; a file gets `$COLUMNS` or the default width.
    let terminal = match opts.output {
        None => crate::sys::terminal::stdout_columns(),
        Some(_) => None,
    };
    let columns = std::env::var("COLUMNS").ok();
    let opts = &ReportOptions {
        width: Some(
            opts.width
                .unwrap_or_else(|| screen::width(columns.as_deref(), terminal)),
        ),
        ..opts.clone()
    };
    let Some(path) = &opts.output else {
        return run_report(opts, &mut io::stdout().lock());
    };
    crate::output::write_file(path, |file| run_report(opts, file))
}

/// Reads the recording `opts.file` and writes its report to `out`. A damaged or lossy file
/// still gives a report, marked incomplete; a closed pipe on `out` ends quietly.
pub fn run_report(opts: &ReportOptions, out: &mut dyn Write) -> Result<()> {
    let path = &opts.file;
    // Suppressions match the stacks of lost blocks, and the functions add up the sites: they
    // need the sites even when the report does not list them.
    let site_options = opts
        .stacks
        .or_else(|| {
            opts.suppress.as_ref().map(|_| SiteOptions {
                order: SiteOrder::Leaked,
                ..SiteOptions::default()
            })
        })
        .or_else(|| opts.functions.map(|_| SiteOptions::default()))
        .map(|o| SiteOptions {
            functions: opts.functions,
            ..o
        });
    let sites = site_options.map(|options| (&opts.scope, options));
    let timeline = opts.format.needs.timeline.then_some(&opts.scope);
    let read = read_report_suppressed(path, sites, timeline, opts.suppress.as_ref())?;
    let mut report = narrow(read, opts.scope.clone(), path)?;
    if let Some(s) = &opts.suppress {
        suppressible(&report, path, s)?;
    }
    if opts.stacks.is_none() {
        report.stacks = None;
    }
    if !opts.allocator_frames {
        if let Some(profile) = report.profile.as_mut() {
            profile.start_at_callers();
        }
    }
    let view_options = ViewOptions {
        rows: opts.rows,
        layout: text::TextLayout {
            width: opts.width.unwrap_or(screen::DEFAULT_WIDTH),
            rows: opts.row_options,
        },
        view: opts.view,
        weight: opts.weight,
        title: String::new(),
    };
    write_view(&report, opts, view_options, out)
}

/// Writes `report` in the format of `opts` to `out`, buffered; a closed pipe ends quietly. A
/// stack format of a recording without call stacks is a usage error: there is nothing to draw.
fn write_view(
    report: &Report,
    opts: &ReportOptions,
    view_options: ViewOptions,
    out: &mut dyn Write,
) -> Result<()> {
    let mut out = BufWriter::new(out);
    let written = match opts.format.write {
        Writer::Report(write) => write(report, &view_options, &mut out),
        Writer::Profile(write) => {
            let profile = match &report.profile {
                Some(p) if p.recorded => p,
                _ => {
                    return Err(Error::Usage(format!(
                        "{} has no call stacks, so --format {} has nothing to show: record \
                         with `memtrack record --stacks`",
                        opts.file.display(),
                        opts.format.name
                    )))
                }
            };
            let view_options = ViewOptions {
                title: profile_title(report, opts),
                ..view_options
            };
            write(profile, report, &view_options, &mut out)
        }
    };
    output_result(written.and_then(|()| out.flush()))
}

/// The title of a stack format's view: what it shows, the recorded command and the scope,
/// e.g. "memtrack: live at the heap peak, in bytes: ./app --n 3 (tree 1234)".
pub fn profile_title(report: &Report, opts: &ReportOptions) -> String {
    let scope = match &opts.scope {
        Scope::Run => String::new(),
        Scope::Process { pid } => format!(" (process {pid})"),
        Scope::Tree { pid } => format!(" (tree {pid})"),
        Scope::Benchmark { uri } => format!(" (benchmark {uri})"),
    };
    format!(
        "memtrack: {}, in {}: {}{scope}",
        opts.view.describe(),
        opts.weight.unit(),
        report.run.command.join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::{analyze, read_report};
    use crate::check::{run_check, CheckOptions};
    use crate::testkit::{recording_bytes, temp_recording, TempRecording};
    use std::path::Path;

    /// A writer that fails like a closed pipe.
    struct ClosedPipe;

    impl Write for ClosedPipe {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::from(io::ErrorKind::BrokenPipe))
        }
        fn flush(&mut self) -> io::Result<()> {
            Err(io::Error::from(io::ErrorKind::BrokenPipe))
        }
    }

    /// A writer that fails like a full disk.
    struct FullDisk;

    impl Write for FullDisk {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::other("no space left on device"))
        }
        fn flush(&mut self) -> io::Result<()> {
            Err(io::Error::other("no space left on device"))
        }
    }

    #[test]
    fn broken_pipe_is_quiet() {
        assert!(output_result(Err(io::Error::from(io::ErrorKind::BrokenPipe))).is_ok());
    }

    #[test]
    fn other_output_errors_are_io() {
        let e = output_result(Err(io::Error::other("disk full"))).unwrap_err();
        assert!(matches!(e, Error::Io { .. }));
    }

    #[test]
    fn narrow_unknown_pid_is_usage() {
        let report = analyze(&Default::default(), Vec::new(), None);
        let e = narrow(report, Scope::Tree { pid: 123 }, Path::new("run.mt")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "pid 123 is not in the recording; `memtrack report run.mt` lists its processes"
        );
    }

    #[test]
    fn missing_file_is_an_error() {
        let opts = report_of(Path::new("/nonexistent/missing.mt"));
        assert!(run_report(&opts, &mut Vec::new()).is_err());
    }

    /// The default report of the recording at `path`.
    fn report_of(path: &Path) -> ReportOptions {
        ReportOptions {
            file: path.to_path_buf(),
            ..ReportOptions::default()
        }
    }

    fn json_of(path: &Path, scope: Scope) -> serde_json::Value {
        let opts = ReportOptions {
            format: format("json"),
            scope,
            ..report_of(path)
        };
        let mut out = Vec::new();
        run_report(&opts, &mut out).unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    #[test]
    fn report_of_a_written_file() {
        let file = temp_recording("complete", &recording_bytes());
        let v = json_of(&file.0, Scope::Run);
        assert_eq!(v["complete"], true);
        assert_eq!(v["totals"]["heap"]["allocs"], 3);
        assert_eq!(v["totals"]["heap"]["peak_live_bytes"], 3100);
        assert_eq!(v["totals"]["heap"]["leaked"]["bytes"], 3100);
        assert_eq!(v["run"]["events"], 7);
    }

    /// A written recording with call stacks: pid 1 allocates 64 bytes from main -> malloc and
    /// leaks them, and 8 bytes from a truncated stack it frees at once.
    fn stacks_recording_bytes() -> Vec<u8> {
        use crate::format::{Trailer, Writer, MODULE_MARK};
        use crate::testkit::*;
        let mut events = stack_prelude(vec![
            module(1, "/lib/libc.so.6"),
            stack_node(1, 0, 1, 0x100),
            stack_node(2, 1, 1, 0x9a1b0),
            stack_node(3, 0, MODULE_MARK, 1),
            stack_node(4, 3, 1, 0x9a1b0),
        ]);
        events.extend([
            at(10, 1, 1, malloc_from(2, 0x10, 64)),
            at(20, 1, 1, malloc_from(4, 0x20, 8)),
            at(30, 1, 1, free(0x20)),
            at(40, 1, 1, exit(0)),
            at(
                50,
                0,
                0,
                symbol(1, 0x9a1b0, &[("malloc", "malloc.c", 3287)]),
            ),
            at(50, 0, 0, stack_stats([2, 1, 0, 0, 0, 0])),
        ]);
        let mut w = Writer::new(Vec::new(), &header()).unwrap();
        for e in &events {
            w.push(e).unwrap();
        }
        w.finish(&Trailer::default()).unwrap()
    }

    fn with_stacks(opts: ReportOptions) -> ReportOptions {
        ReportOptions {
            stacks: Some(SiteOptions::default()),
            ..opts
        }
    }

    #[test]
    fn output_file_is_replaced_only_by_a_whole_report() {
        let file = temp_recording("output", &stacks_recording_bytes());
        let out = file.0.with_extension("json");
        std::fs::write(&out, "previous").unwrap();
        let opts = ReportOptions {
            format: format("json"),
            output: Some(out.clone()),
            ..report_of(&file.0)
        };
        run(&opts).unwrap();
        let mut direct = Vec::new();
        run_report(&opts, &mut direct).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), direct);

        // A report that fails (the recording is gone) leaves the previous file and no temporary.
        std::fs::write(&out, "previous").unwrap();
        let missing = ReportOptions {
            file: file.0.with_extension("missing"),
            ..opts
        };
        assert!(run(&missing).is_err());
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "previous");
        let dir = out.parent().unwrap();
        let name = out.file_name().unwrap().to_string_lossy().into_owned();
        let leftovers = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.starts_with(&name) && n != name
            })
            .count();
        assert_eq!(leftovers, 0);
        std::fs::remove_file(&out).unwrap();
    }

    #[test]
    fn stacks_of_a_written_file() {
        let file = temp_recording("stacks", &stacks_recording_bytes());
        let opts = ReportOptions {
            format: format("json"),
            ..with_stacks(report_of(&file.0))
        };
        let mut out = Vec::new();
        run_report(&opts, &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let s = &v["stacks"];
        assert_eq!(s["recorded"], true);
        assert_eq!(
            (s["walks"].as_u64(), s["truncated"].as_u64()),
            (Some(2), Some(1))
        );
        assert_eq!(s["sites"][0]["stack_id"], 2);
        assert_eq!(s["sites"][0]["leaked_bytes"], 64);
        assert_eq!(s["sites"][0]["frames"][0]["function"], "malloc");
        assert_eq!(s["sites"][1]["temporary"], 1);
        assert_eq!(s["sites"][1]["frames"][1]["function"], "[truncated]");
    }

    #[test]
    fn stacks_of_a_file_without_them_is_a_note() {
        let file = temp_recording("no-stacks", &recording_bytes());
        let mut out = Vec::new();
        // Wide enough that the note is one line.
        let opts = ReportOptions {
            width: Some(200),
            ..with_stacks(report_of(&file.0))
        };
        run_report(&opts, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.trim_end()
                .ends_with("record again without it to see where the allocations come from"),
            "{text}"
        );
    }

    #[test]
    fn report_narrowed_to_a_pid_of_a_file() {
        let file = temp_recording("pid", &recording_bytes());
        let v = json_of(&file.0, Scope::Process { pid: 2 });
        assert_eq!(v["scope"]["kind"], "process");
        assert_eq!(v["totals"]["heap"]["bytes_allocated"], 3000);
        assert_eq!(v["processes"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn report_text_of_a_file() {
        let file = temp_recording("text", &recording_bytes());
        let mut out = Vec::new();
        run_report(&report_of(&file.0), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("memtrack report: /bin/root arg"), "{text}");
        assert!(!text.contains("INCOMPLETE"), "{text}");
    }

    #[test]
    fn unknown_pid_of_a_file_is_usage() {
        let file = temp_recording("unknown", &recording_bytes());
        let opts = ReportOptions {
            scope: Scope::Tree { pid: 99 },
            ..report_of(&file.0)
        };
        let e = run_report(&opts, &mut Vec::new()).unwrap_err();
        assert!(matches!(e, Error::Usage(_)), "{e}");
        assert!(
            e.to_string().starts_with("pid 99 is not in the recording"),
            "{e}"
        );
    }

    #[test]
    fn truncated_file_is_incomplete_with_offset() {
        let bytes = recording_bytes();
        let file = temp_recording("truncated", &bytes[..bytes.len() - 3]);
        let v = json_of(&file.0, Scope::Run);
        assert_eq!(v["complete"], false);
        assert!(v["damage"]["offset_bytes"].as_u64().is_some(), "{v}");
        assert_eq!(v["totals"]["heap"]["allocs"], 3);
    }

    #[test]
    fn every_prefix_of_a_file_reports_or_fails_cleanly() {
        let bytes = recording_bytes();
        let file = temp_recording("prefixes", &bytes);
        for len in 0..bytes.len() {
            std::fs::write(&file.0, &bytes[..len]).unwrap();
            match run_report(&report_of(&file.0), &mut Vec::new()) {
                Ok(()) => {}
                Err(e) => assert!(matches!(e, Error::BadFile { .. }), "cut at {len}: {e}"),
            }
        }
    }

    #[test]
    fn every_corrupted_byte_reports_or_fails_cleanly() {
        let bytes = recording_bytes();
        let file = temp_recording("corrupt", &bytes);
        for i in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[i] ^= 0x5a;
            std::fs::write(&file.0, &damaged).unwrap();
            let opts = ReportOptions {
                format: format("json"),
                ..report_of(&file.0)
            };
            let _ = run_report(&opts, &mut Vec::new());
            let limits = CheckOptions {
                file: file.0.clone(),
                max_peak_heap: Some(1),
                ..CheckOptions::default()
            };
            let _ = run_check(&limits, &mut Vec::new());
        }
    }

    /// `cargo test --release --lib -- --ignored --nocapture report_file_throughput`: writes 10
    /// million synthetic events with `format::Writer`, then times `memtrack report` on the file
    /// (reader and accounting together) and prints events per second and peak memory.
    #[test]
    #[ignore]
    fn report_file_throughput() {
        use crate::format::{Trailer, Writer};
        const EVENTS: u64 = 10_000_000;
        let path =
            std::env::temp_dir().join(format!("memtrack-report-bench-{}.mt", std::process::id()));
        let file = TempRecording(path);
        let out = std::io::BufWriter::new(std::fs::File::create(&file.0).unwrap());
        let mut w = Writer::new(out, &crate::testkit::header()).unwrap();
        for e in crate::testkit::benchmark_events(EVENTS, 64) {
            w.push(&e).unwrap();
        }
        w.finish(&Trailer::default()).unwrap();
        let size = std::fs::metadata(&file.0).map(|m| m.len()).unwrap_or(0);

        let started = std::time::Instant::now();
        let report = read_report(&file.0).unwrap();
        let elapsed = started.elapsed().as_secs_f64();
        let hwm = crate::testkit::peak_resident();
        assert_eq!(report.run.events, EVENTS);
        println!(
            "{EVENTS} events, {size} bytes on disk: report in {elapsed:.3} s, {:.1} M events/s; \
             {hwm}",
            EVENTS as f64 / elapsed / 1e6
        );
    }

    /// The format named `name`.
    fn format(name: &str) -> &'static Format {
        crate::views::format(name).unwrap()
    }

    #[test]
    fn closed_pipe_ends_quietly() {
        let report = analyze(&Default::default(), Vec::new(), None);
        // The empty report has no timeline, which the pass adds for the formats that need it.
        for format in crate::views::FORMATS.iter().filter(|f| !f.needs.timeline) {
            let opts = ReportOptions {
                format,
                ..ReportOptions::default()
            };
            let written = write_view(&report, &opts, ViewOptions::default(), &mut ClosedPipe);
            match written {
                Ok(()) => {}
                // A stack format of a report without call stacks says so before writing.
                Err(Error::Usage(_)) => assert!(format.is_stack_format(), "{}", format.name),
                Err(e) => panic!("{}: {e}", format.name),
            }
        }
    }

    #[test]
    fn full_disk_is_an_error() {
        let report = analyze(&Default::default(), Vec::new(), None);
        let opts = ReportOptions {
            format: format("json"),
            ..ReportOptions::default()
        };
        let e = write_view(&report, &opts, ViewOptions::default(), &mut FullDisk).unwrap_err();
        assert!(matches!(e, Error::Io { .. }));
    }
}
