//! `memtrack report` and `memtrack check`: read a recording once, account every event, and
//! print the metrics for people (text), for scripts (JSON) or against limits (check).
//!
//! Flow: [`run_report`] / [`run_check`] take the options `cli` validated, read the file with
//! [`read_report`] (which streams its events through `accounting`: memory follows live
//! allocations, not file length), narrow the `metrics::Report` to the scope, then render it by
//! `text` (fitted to the width by `screen`, its rows chosen by `rows`), `markdown`, `json` or
//! `check`. [`analyze`] is the pure core, for tests and other commands.

pub mod accounting;
mod assemble;
mod bench;
pub mod check;
mod counters;
pub mod flamegraph;
pub mod folded;
pub mod frames;
mod html;
pub mod incomplete;
pub mod json;
mod mapped;
pub mod markdown;
pub mod pprof;
mod resident;
pub mod rmap;
pub mod rows;
pub mod screen;
pub mod speedscope;
pub mod stacks;
pub mod suppress;
pub mod text;
pub mod timeline;
mod timeline_data;
mod tree;

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::mpsc;

use crate::error::{Error, Result};
use crate::format::{Event, Reader};

pub use crate::model::metrics::{
    MemberResident, ProcessMetrics, Report, ResidentMetrics, Scope, Unknown,
};
pub use crate::model::profile::{View, Weight};
pub use accounting::{analyze, Accounting};
pub use check::CheckOptions;
pub use rows::{RowOptions, SortKey};
pub use stacks::{SiteOptions, SiteOrder};

/// How `report` prints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OutputFormat {
    /// Aligned text for people.
    #[default]
    Text,
    /// JSON for scripts (docs/report-schema.md).
    Json,
    /// A compact summary for CI job summaries and pull-request comments (GitHub markdown).
    Markdown,
    /// Folded stacks, one `root;...;leaf value` line per stack (flamegraph.pl, inferno).
    Folded,
    /// A flame graph SVG (inferno).
    Flamegraph,
    /// Gzipped pprof profile.proto (`go tool pprof`).
    Pprof,
    /// speedscope's JSON file format.
    Speedscope,
    /// One self-contained HTML page: memory over time, the process tree, flame graphs.
    Html,
    /// The decimated timeline as CSV, one row per point (docs/report-schema.md, "Timeline").
    TimelineCsv,
    /// The decimated timeline as JSON (docs/report-schema.md, "Timeline").
    TimelineJson,
}

impl OutputFormat {
    /// Whether it is a stack format: every allocation site, from the scope's `Profile`.
    pub fn is_stack_format(self) -> bool {
        matches!(
            self,
            OutputFormat::Folded
                | OutputFormat::Flamegraph
                | OutputFormat::Pprof
                | OutputFormat::Speedscope
        )
    }

    /// Its `--format` name.
    pub fn name(self) -> &'static str {
        match self {
            OutputFormat::Text => "text",
            OutputFormat::Json => "json",
            OutputFormat::Markdown => "markdown",
            OutputFormat::Folded => "folded",
            OutputFormat::Flamegraph => "flamegraph",
            OutputFormat::Pprof => "pprof",
            OutputFormat::Speedscope => "speedscope",
            OutputFormat::Html => "html",
            OutputFormat::TimelineCsv => "timeline-csv",
            OutputFormat::TimelineJson => "timeline-json",
        }
    }

    /// Whether the format draws memory over time, so the pass must follow it.
    pub fn needs_timeline(self) -> bool {
        matches!(
            self,
            OutputFormat::Html | OutputFormat::TimelineCsv | OutputFormat::TimelineJson
        )
    }
}

impl FromStr for OutputFormat {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s {
            "text" => Ok(OutputFormat::Text),
            "json" => Ok(OutputFormat::Json),
            "markdown" => Ok(OutputFormat::Markdown),
            "html" => Ok(OutputFormat::Html),
            "timeline-csv" => Ok(OutputFormat::TimelineCsv),
            "timeline-json" => Ok(OutputFormat::TimelineJson),
            "folded" => Ok(OutputFormat::Folded),
            "flamegraph" => Ok(OutputFormat::Flamegraph),
            "pprof" => Ok(OutputFormat::Pprof),
            "speedscope" => Ok(OutputFormat::Speedscope),
            _ => Err(format!(
                "unknown format '{s}': expected 'text', 'json', 'markdown', 'html', \
                 'timeline-csv' or 'timeline-json', or a stack format: 'folded', 'flamegraph', \
                 'pprof' or 'speedscope'"
            )),
        }
    }
}

/// What the rows of the text form are (`--by`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Rows {
    /// One row per process, as a tree.
    #[default]
    Processes,
    /// One row per benchmark the harness named.
    Benchmarks,
}

/// What `memtrack report` was asked for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReportOptions {
    /// The recording to read.
    pub file: PathBuf,
    /// Text or JSON.
    pub format: OutputFormat,
    /// What to show: the run, one process (`--pid`) or one tree (`--tree`).
    pub scope: Scope,
    /// Rows of the text form (`--by`); JSON always has processes and benchmarks.
    pub rows: Rows,
    /// The top allocation sites of the scope (`--stacks`), if asked for.
    pub stacks: Option<SiteOptions>,
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
    // Suppressions match the stacks of lost blocks: they need the sites even when the report
    // does not list them.
    let site_options = opts.stacks.or_else(|| {
        opts.suppress.as_ref().map(|_| SiteOptions {
            order: SiteOrder::Leaked,
            ..SiteOptions::default()
        })
    });
    let sites = site_options.map(|options| (&opts.scope, options));
    let timeline = opts.format.needs_timeline().then_some(&opts.scope);
    let read = read_report_suppressed(path, sites, timeline, opts.suppress.as_ref())?;
    let mut report = narrow(read, opts.scope.clone(), path)?;
    if let Some(s) = &opts.suppress {
        suppressible(&report, path, s)?;
    }
    if opts.stacks.is_none() {
        report.stacks = None;
    }
    if opts.format.is_stack_format() {
        return write_profile(&report, opts, out);
    }
    let layout = text::TextLayout {
        width: opts.width.unwrap_or(screen::DEFAULT_WIDTH),
        rows: opts.row_options,
    };
    write_report(&report, opts.format, opts.rows, &layout, out)
}

/// Writes the scope's profile in the stack format of `opts` to `out`, buffered. A recording
/// without call stacks is a usage error: there is nothing to draw.
fn write_profile(report: &Report, opts: &ReportOptions, out: &mut dyn Write) -> Result<()> {
    let profile = match &report.profile {
        Some(p) if p.recorded => p,
        _ => {
            return Err(Error::Usage(format!(
                "{} has no call stacks, so --format {} has nothing to show: record with \
                 `memtrack record --stacks`",
                opts.file.display(),
                opts.format.name()
            )))
        }
    };
    let title = profile_title(report, opts);
    let mut out = BufWriter::new(out);
    let written = match opts.format {
        OutputFormat::Folded => folded::write_folded(profile, opts.view, opts.weight, &mut out),
        OutputFormat::Flamegraph => {
            flamegraph::write_svg(profile, opts.view, opts.weight, &title, &mut out)
        }
        OutputFormat::Pprof => {
            pprof::write_pprof(profile, report, opts.view, opts.weight, &mut out)
        }
        OutputFormat::Speedscope => {
            speedscope::write_speedscope(profile, opts.view, opts.weight, &title, &mut out)
        }
        _ => Ok(()),
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

/// Writes `report` in `format` (with `rows` and `layout` for text and markdown) to `out`,
/// buffered; a closed pipe ends quietly.
fn write_report(
    report: &Report,
    format: OutputFormat,
    rows: Rows,
    layout: &text::TextLayout,
    out: &mut dyn Write,
) -> Result<()> {
    let mut out = BufWriter::new(out);
    let written = match (format, rows) {
        (OutputFormat::Text, Rows::Processes) => text::write_text(report, layout, &mut out),
        (OutputFormat::Text, Rows::Benchmarks) => {
            text::write_benchmarks_text(report, layout, &mut out)
        }
        (OutputFormat::Json, _) => json::write_json(report, &mut out),
        (OutputFormat::Markdown, rows) => {
            markdown::write_markdown(report, rows, layout.rows, &mut out)
        }
        // `run_report` sends them to `write_profile`, which knows the recording's path.
        (OutputFormat::Folded, _)
        | (OutputFormat::Flamegraph, _)
        | (OutputFormat::Pprof, _)
        | (OutputFormat::Speedscope, _) => Err(io::Error::other(
            "a stack format is written by write_profile",
        )),
        (OutputFormat::Html, _) => html::write_html(report, &mut out),
        (OutputFormat::TimelineCsv, _) => timeline_data::write_csv(report, &mut out),
        (OutputFormat::TimelineJson, _) => timeline_data::write_json(report, &mut out),
    };
    output_result(written.and_then(|()| out.flush()))
}

/// Reads the recording `opts.file`, checks the limits in `opts` and prints one line per limit.
/// Returns whether every limit holds.
///
/// An incomplete recording (events lost, damaged, cut short) is an error (exit 2) naming the
/// cause, unless `opts.allow_incomplete`, or a limit fails on a value that can only be too low
/// (`incomplete::lower_bounds`): more events would not make it pass. A `--probe-floor`
/// recording has no allocations and is always refused.
pub fn run_check(opts: &CheckOptions, out: &mut dyn Write) -> Result<bool> {
    let path = &opts.file;
    // A leak limit names the top lost site when the recording has stacks, and suppressions
    // match them: then the pass finds the sites of the scope, lost first.
    let leak_limit = opts.max_leaked.is_some() || opts.suppress.is_some();
    let with_stacks = leak_limit
        && Reader::open(path)?
            .header()
            .features
            .iter()
            .any(|f| f == crate::format::FEATURE_STACKS);
    let site_options = SiteOptions {
        order: SiteOrder::Leaked,
        top: 3,
        profile: false,
    };
    let sites = (with_stacks || opts.suppress.is_some()).then_some((&opts.scope, site_options));
    let report = narrow(
        read_report_suppressed(path, sites, None, opts.suppress.as_ref())?,
        opts.scope.clone(),
        path,
    )?;
    if let Some(s) = &opts.suppress {
        suppressible(&report, path, s)?;
    }
    let bad_file = |message: String| Error::BadFile {
        path: path.to_path_buf(),
        message,
    };
    let floor = report
        .run
        .features
        .iter()
        .any(|f| f == incomplete::FEATURE_PROBE_FLOOR);
    if floor {
        return Err(bad_file(
            "recorded with --probe-floor: allocations were not recorded (it measures the \
             probes' own cost), so there is nothing to check; record again without --probe-floor"
                .to_string(),
        ));
    }
    if opts.max_peak_rss.is_some() && report.totals.resident.is_none() {
        return Err(Error::Usage(format!(
            "{} has no resident memory (it was recorded with --no-rss); drop --max-peak-rss or \
             record again without --no-rss",
            path.display()
        )));
    }
    let mut notes = Vec::new();
    let results = match &opts.baseline {
        Some(base_path) => against_baseline(&report, base_path, opts, &mut notes)?,
        None => check::evaluate(&report, opts),
    };
    let all_pass = results.iter().all(|r| r.pass);
    let mut out = BufWriter::new(out);
    let written = check::write_results(&results, &report, &mut out)
        .and_then(|()| notes.iter().try_for_each(|n| writeln!(out, "note: {n}")));
    output_result(written.and_then(|()| out.flush()))?;
    if report.complete || opts.allow_incomplete {
        return Ok(all_pass);
    }
    // Allocation counts and bytes allocated only grow with more events, whatever was lost; the
    // other values do too when the file was only cut short.
    let all_lower = incomplete::lower_bounds(report.lost_events.total, &report.skipped, floor);
    let certain_failure = results
        .iter()
        .any(|r| !r.pass && (all_lower || matches!(r.name, "allocations" | "bytes allocated")));
    if certain_failure {
        return Ok(false);
    }
    let mut causes = Vec::new();
    if let Some(damage) = &report.damage {
        causes.push(incomplete::end_reason(damage.offset_bytes, &damage.reason));
    }
    if !report.skipped.is_empty() {
        let first = &report.skipped[0];
        causes.push(format!(
            "{} damaged range{} skipped, the first at byte offset {} ({})",
            report.skipped.len(),
            if report.skipped.len() == 1 { "" } else { "s" },
            first.offset_bytes,
            first.reason
        ));
    }
    if report.lost_events.total > 0 {
        let by: Vec<String> = report
            .lost_events
            .by_cause
            .iter()
            .map(|l| format!("{} {}", l.count, l.cause))
            .collect();
        causes.push(format!(
            "{} events lost while recording ({}; raise --ring-size)",
            report.lost_events.total,
            by.join(", ")
        ));
    }
    if causes.is_empty() {
        // A recording that saw nothing (incomplete::unseen_reason): its reason's first clause.
        causes.extend(
            report
                .incomplete_reasons
                .iter()
                .filter_map(|r| r.split(':').next().map(str::to_string)),
        );
    }
    Err(bad_file(format!(
        "the recording is incomplete: {}; its numbers may be wrong either way (see the \
         incomplete lines above), so the limits were not checked: record again, or give \
         --allow-incomplete to check what was read",
        causes.join("; ")
    )))
}

/// The limits of `opts` on `report` (the new recording, narrowed to the scope) against the
/// baseline at `base_path`: the absolute limits and the increase limits, for the scope or, with
/// `--by bench`, for each benchmark both recordings have (one only one has is a note). An
/// incomplete baseline is refused unless `--allow-incomplete`, as the new recording is.
fn against_baseline(
    report: &Report,
    base_path: &Path,
    opts: &CheckOptions,
    notes: &mut Vec<String>,
) -> Result<Vec<check::LimitResult>> {
    let base = narrow(read_report(base_path)?, opts.scope.clone(), base_path)?;
    let bad_base = |message: String| Error::BadFile {
        path: base_path.to_path_buf(),
        message,
    };
    if base
        .run
        .features
        .iter()
        .any(|f| f == incomplete::FEATURE_PROBE_FLOOR)
    {
        return Err(bad_base(
            "the baseline was recorded with --probe-floor: it has no allocations to compare \
             with; record it again without --probe-floor"
                .into(),
        ));
    }
    if !base.complete && !opts.allow_incomplete {
        return Err(bad_base(format!(
            "the baseline is incomplete ({}): its numbers may be wrong either way, so the \
             limits were not checked; record it again, or give --allow-incomplete",
            base.incomplete_reasons.join("; ")
        )));
    }
    if base.run.command != report.run.command {
        notes.push(format!(
            "the recorded commands differ (baseline `{}`, new `{}`): compared anyway",
            base.run.command.join(" "),
            report.run.command.join(" ")
        ));
    }
    if !opts.by_bench {
        let mut results = check::evaluate(report, opts);
        results.extend(check::evaluate_increase(
            &report.totals,
            &base.totals,
            opts,
            None,
            notes,
        ));
        return Ok(results);
    }
    let mut results = Vec::new();
    for bench in &report.benchmarks {
        let Some(base_bench) = base.benchmarks.iter().find(|b| b.uri == bench.uri) else {
            notes.push(format!(
                "benchmark {} is not in the baseline: not compared",
                bench.uri
            ));
            continue;
        };
        let scoped = report
            .clone()
            .narrow(Scope::Benchmark {
                uri: bench.uri.clone(),
            })
            .map_err(|_| Error::Internal(format!("benchmark {} vanished", bench.uri)))?;
        let mut absolute = check::evaluate(&scoped, opts);
        for r in &mut absolute {
            r.benchmark = Some(bench.uri.clone());
        }
        results.extend(absolute);
        results.extend(check::evaluate_increase(
            &bench.metrics,
            &base_bench.metrics,
            opts,
            Some(&bench.uri),
            notes,
        ));
    }
    for b in &base.benchmarks {
        if !report.benchmarks.iter().any(|n| n.uri == b.uri) {
            notes.push(format!(
                "benchmark {} is only in the baseline: not compared",
                b.uri
            ));
        }
    }
    if report.benchmarks.is_empty() {
        notes.push("the recording names no benchmark: nothing was checked by bench".into());
    }
    Ok(results)
}

/// Events pass from the decoding thread to the accounting in batches of this many.
const BATCH_EVENTS: usize = 4096;

/// Reads the recording at `path` into its [`Report`] for the whole run, as `report` and
/// `check` do before narrowing it (and as a command comparing two recordings would). A damaged,
/// cut or lossy file still gives a report, with `complete` false and the reasons in
/// `incomplete_reasons`; only a file that cannot be opened or is not a recording is an error.
///
/// Events stream through the accounting, so memory follows the live allocations, not the file
/// length. Decoding (checksums, varints, delta state) and accounting each take about half of
/// the work, so a second thread decodes while this one accounts (3.3 M-event storm recording:
/// 0.17 to 0.14 s of wall time; 10 M-event churn recording: 0.37 to 0.24 s, on 2 CPUs). Events
/// arrive in file order, exactly as a single loop would see them.
pub fn read_report(path: &Path) -> Result<Report> {
    read_report_with(path, None)
}

/// [`read_report`] that also finds the allocation sites of a scope (`report --stacks`), in the
/// same single pass.
pub fn read_report_with(path: &Path, sites: Option<(&Scope, SiteOptions)>) -> Result<Report> {
    read_report_full(path, sites, None)
}

/// [`read_report_full`] that also applies leak suppressions to the definitely lost blocks of
/// the sites' scope (they need `sites`: a suppression matches a block by its stack).
pub fn read_report_suppressed(
    path: &Path,
    sites: Option<(&Scope, SiteOptions)>,
    timeline: Option<&Scope>,
    suppress: Option<&suppress::Suppressions>,
) -> Result<Report> {
    read_pass(path, sites, timeline, suppress)
}

/// Whether suppressions can apply to `report`: its recording must have leak scans (they find
/// what is definitely lost) and call stacks (the rules match their frames). Either missing is
/// a usage error: a gate that silently suppressed nothing would pretend.
fn suppressible(report: &Report, path: &Path, s: &suppress::Suppressions) -> Result<()> {
    let has = |f: &str| report.run.features.iter().any(|g| g == f);
    if !has(crate::format::FEATURE_LEAK_SCAN) {
        return Err(Error::Usage(format!(
            "--suppress {}: {} has no leak scans (recorded with --no-leak-scan, or before format \
             version 5), so nothing is definitely lost to suppress; record again without \
             --no-leak-scan",
            s.file,
            path.display()
        )));
    }
    if !report.stacks.as_ref().is_some_and(|st| st.recorded) {
        return Err(Error::Usage(format!(
            "--suppress {}: suppressions need call stacks, and {} has none; record again with \
             --stacks",
            s.file,
            path.display()
        )));
    }
    Ok(())
}

/// [`read_report_with`] that also follows memory over time (`Report::timeline`) of the scope
/// `timeline`, if given, in the same single pass.
pub fn read_report_full(
    path: &Path,
    sites: Option<(&Scope, SiteOptions)>,
    timeline: Option<&Scope>,
) -> Result<Report> {
    read_pass(path, sites, timeline, None)
}

/// The one pass over the file behind every `read_report*`.
fn read_pass(
    path: &Path,
    sites: Option<(&Scope, SiteOptions)>,
    timeline: Option<&Scope>,
    suppress: Option<&suppress::Suppressions>,
) -> Result<Report> {
    let reader = Reader::open(path)?;
    let mut accounting = match sites {
        Some((scope, options)) => Accounting::with_sites(reader.header(), scope, options),
        None => Accounting::new(reader.header()),
    };
    if let Some(scope) = timeline {
        accounting = accounting.with_timeline_of(scope);
    }
    if let Some(s) = suppress {
        accounting = accounting.with_suppressions(s.clone());
    }
    let (full_tx, full_rx) = mpsc::sync_channel::<Vec<Event>>(4);
    let (empty_tx, empty_rx) = mpsc::channel::<Vec<Event>>();
    let reader = std::thread::scope(|s| {
        let decoder = s.spawn(move || {
            let mut reader = reader;
            loop {
                let mut batch = empty_rx
                    .try_recv()
                    .unwrap_or_else(|_| Vec::with_capacity(BATCH_EVENTS));
                batch.extend(reader.by_ref().take(BATCH_EVENTS));
                if batch.is_empty() || full_tx.send(batch).is_err() {
                    return reader;
                }
            }
        });
        for mut batch in full_rx {
            for event in batch.drain(..) {
                accounting.apply(&event);
            }
            let _ = empty_tx.send(batch); // the decoder may have finished: nothing to reuse
        }
        decoder.join()
    });
    let reader = reader.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    if reader.end().is_none() {
        log::warn!(
            "{}: the reader stopped without saying how the file ended",
            path.display()
        );
    }
    accounting.note_skipped(reader.skipped());
    Ok(accounting.finish(reader.end()))
}

/// Narrows `report` to `scope`, turning an unknown pid or benchmark into a usage error that
/// says how to list what the recording has.
fn narrow(report: Report, scope: Scope, path: &Path) -> Result<Report> {
    report.narrow(scope).map_err(|unknown| {
        Error::Usage(match unknown {
            Unknown::Pid(pid) => format!(
                "pid {pid} is not in the recording; `memtrack report {}` lists its processes",
                path.display()
            ),
            Unknown::Benchmark(uri) => format!(
                "benchmark '{uri}' is not in the recording; `memtrack report {} --by bench` \
                 lists its benchmarks",
                path.display()
            ),
        })
    })
}

/// Maps an output failure to an error; a closed pipe (`memtrack report f | head`) is not one.
fn output_result(result: io::Result<()>) -> Result<()> {
    match result {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Error::io("<output>", e)),
        Ok(()) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn format_parses() {
        assert_eq!("json".parse(), Ok(OutputFormat::Json));
        assert_eq!("text".parse(), Ok(OutputFormat::Text));
    }

    #[test]
    fn format_error_names_choices() {
        let e = "xml".parse::<OutputFormat>().unwrap_err();
        assert!(e.contains("'text', 'json', 'markdown', 'html'"), "{e}");
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

    /// A recording on disk, removed when dropped.
    struct TempRecording(std::path::PathBuf);

    impl Drop for TempRecording {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// Bytes of a real recording (written by `format::Writer`): root 1 allocates 100 and 50
    /// bytes, frees the 50, forks 2, which allocates 3000 bytes and exits with them; 1 exits.
    fn recording_bytes() -> Vec<u8> {
        use crate::format::{Trailer, Writer};
        use crate::testkit::{at, exit, fork, free, header, malloc};
        let events = [
            at(10, 1, 1, malloc(0x10, 100)),
            at(20, 1, 1, malloc(0x20, 50)),
            at(30, 1, 1, free(0x20)),
            at(40, 1, 1, fork(2)),
            at(50, 2, 2, malloc(0x30, 3000)),
            at(60, 2, 2, exit(0)),
            at(70, 1, 1, exit(0)),
        ];
        let mut w = Writer::new(Vec::new(), &header()).unwrap();
        for (i, e) in events.iter().enumerate() {
            w.push(e).unwrap();
            // Several chunks, so a cut can fall between them.
            if i % 2 == 1 {
                w.flush_chunk().unwrap();
            }
        }
        w.finish(&Trailer::default()).unwrap()
    }

    fn temp_recording(name: &str, bytes: &[u8]) -> TempRecording {
        let path =
            std::env::temp_dir().join(format!("memtrack-report-{}-{name}.mt", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        TempRecording(path)
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
            format: OutputFormat::Json,
            scope,
            ..report_of(path)
        };
        let mut out = Vec::new();
        run_report(&opts, &mut out).unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    fn limits(path: &Path, max_peak_heap: u64) -> CheckOptions {
        CheckOptions {
            file: path.to_path_buf(),
            max_peak_heap: Some(max_peak_heap),
            ..CheckOptions::default()
        }
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
            format: OutputFormat::Json,
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
            format: OutputFormat::Json,
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
                .ends_with("record again with --stacks to see where the allocations come from"),
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
                format: OutputFormat::Json,
                ..report_of(&file.0)
            };
            let _ = run_report(&opts, &mut Vec::new());
            let _ = run_check(&limits(&file.0, 1), &mut Vec::new());
        }
    }

    #[test]
    fn check_of_a_file_passes_and_fails() {
        let file = temp_recording("check", &recording_bytes());
        assert!(run_check(&limits(&file.0, 3100), &mut Vec::new()).unwrap());
        assert!(!run_check(&limits(&file.0, 3099), &mut Vec::new()).unwrap());
    }

    #[test]
    fn check_of_a_tree() {
        let file = temp_recording("check-tree", &recording_bytes());
        let opts = CheckOptions {
            scope: Scope::Tree { pid: 2 },
            ..limits(&file.0, 3000)
        };
        let mut out = Vec::new();
        assert!(run_check(&opts, &mut out).unwrap());
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("peak heap"), "{text}");
        assert!(text.trim_end().ends_with("pass"), "{text}");
    }

    #[test]
    fn check_of_a_damaged_file() {
        let bytes = recording_bytes();
        let file = temp_recording("check-damaged", &bytes[..bytes.len() - 3]);
        // The limits hold for what could be read, but the rest is unknown: a bad file.
        let e = run_check(&limits(&file.0, 1 << 30), &mut Vec::new()).unwrap_err();
        assert!(matches!(e, Error::BadFile { .. }), "{e}");
        assert!(e.to_string().contains("byte offset"), "{e}");
        // A limit already exceeded stays exceeded whatever followed.
        assert!(!run_check(&limits(&file.0, 10), &mut Vec::new()).unwrap());
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

    #[test]
    fn closed_pipe_ends_quietly() {
        let report = analyze(&Default::default(), Vec::new(), None);
        let layout = text::TextLayout::default();
        for format in [
            OutputFormat::Text,
            OutputFormat::Json,
            OutputFormat::Markdown,
        ] {
            assert!(
                write_report(&report, format, Rows::Processes, &layout, &mut ClosedPipe).is_ok()
            );
        }
    }

    #[test]
    fn full_disk_is_an_error() {
        let report = analyze(&Default::default(), Vec::new(), None);
        let layout = text::TextLayout::default();
        let e = write_report(
            &report,
            OutputFormat::Json,
            Rows::Processes,
            &layout,
            &mut FullDisk,
        )
        .unwrap_err();
        assert!(matches!(e, Error::Io { .. }));
    }
}
