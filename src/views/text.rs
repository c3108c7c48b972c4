//! The human form of a report: the run, a summary of the scope, the allocation sizes, then one
//! aligned row per process, indented as a tree; or, with `--by bench`, the run and one row per
//! benchmark.
//!
//! Flow: `run_report` builds a narrowed [`Report`] and hands it here with `--format text` (the
//! default), with a [`TextLayout`]: the width to fit (`screen`) and which rows to show (`rows`:
//! `--top`, `--all`, `--sort`); the allocation sites (`--stacks`) are `sites`'s, the
//! functions (`--functions`) `functions`'s, a process's cells `words::process_row`. This module
//! only reads the report; every number it shows is in the JSON form too. Sizes are 1024-based (KiB, MiB, GiB) and times are relative to the start
//! of the recording.

use std::io::{self, Write};

use crate::table::{Column, Table};
use crate::units::{format_bytes, format_duration_ns};

use super::rows::{self, Rest, RowOptions, Selection};
use super::screen::{self, FitColumn, Fitted, Wrap};
use super::words::*;
use super::{functions, sites};
use crate::model::metrics::{HeapMetrics, Metrics, Report, ResidentMetrics, RunInfo};

/// Width of the label column of the summary.
const LABEL_WIDTH: usize = 18;
/// Widest histogram bar, in characters.
const BAR_WIDTH: usize = 40;

/// Deepest indentation shown; deeper processes are listed at this level (depth is in the JSON).
const MAX_INDENT: u32 = 24;

/// How the text form is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TextLayout {
    /// No line is wider than this many characters (`screen::width`).
    pub width: usize,
    /// Which process or benchmark rows to show, in what order.
    pub rows: RowOptions,
}

impl Default for TextLayout {
    fn default() -> TextLayout {
        TextLayout {
            width: screen::DEFAULT_WIDTH,
            rows: RowOptions::default(),
        }
    }
}

/// Writes `report` for people, laid out as `layout` says.
pub fn write_text(report: &Report, layout: &TextLayout, out: &mut dyn Write) -> io::Result<()> {
    let mut wrapped = Wrap::new(out, layout.width);
    write_text_lines(report, layout, &mut wrapped)?;
    wrapped.finish()
}

fn write_text_lines(report: &Report, layout: &TextLayout, out: &mut dyn Write) -> io::Result<()> {
    write_run(report, out)?;
    write_incomplete(report, out)?;
    write_summary(report, out)?;
    write_histogram(&report.totals.heap, layout.width, out)?;
    write_processes(report, layout, out)?;
    if let Some(rmap) = &report.rmap {
        write_rmap(rmap, &ProcessNames::new(&report.processes), out)?;
    }
    if !report.benchmarks.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "{}: `memtrack report FILE --by bench` shows them",
            counted(report.benchmarks.len() as u64, "benchmark", "benchmarks")
        )?;
    }
    write_suppressions(report, out)?;
    sites::write_stacks(report, layout.width, out)?;
    functions::write_functions(report, layout.width, out)
}

/// What `--suppress` did: the suppressed blocks by how many rules, each unused rule.
pub(super) fn write_suppressions(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    if let Some(s) = &report.suppressions {
        writeln!(out)?;
        for line in suppression_lines(s) {
            writeln!(out, "{}", clean(&line))?;
        }
    }
    Ok(())
}

/// Which allocator the recorder found where, so that a run without allocations says why.
fn write_files(run: &RunInfo, out: &mut dyn Write) -> io::Result<()> {
    if run.files.is_empty() {
        return Ok(());
    }
    let name = |p: &str| p.rsplit('/').next().unwrap_or(p).to_string();
    let found: Vec<String> = run
        .files
        .iter()
        .filter(|f| f.allocator != "none")
        .map(|f| {
            format!(
                "{} in {} ({} probes)",
                clean(&f.allocator),
                clean(&name(&f.path)),
                f.probes
            )
        })
        .collect();
    let others = run.files.len() - found.len();
    let found = if found.is_empty() {
        "none found".to_string()
    } else {
        found.join(", ")
    };
    writeln!(
        out,
        "  allocators: {found}; {} without one",
        counted(
            others as u64,
            "other executable file",
            "other executable files"
        )
    )
}

/// The recording: command, root, duration, exit code, where it was made.
fn write_run(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let run = &report.run;
    writeln!(out, "memtrack report: {}", clean(&run.command.join(" ")))?;
    let exit = exit_code(run);
    writeln!(
        out,
        "  root pid {}, {}, {}, {exit}",
        run.root_pid,
        processes(run.processes),
        format_duration_ns(run.duration_ns),
    )?;
    if !run.hostname.is_empty() || !run.memtrack_version.is_empty() {
        writeln!(
            out,
            "  recorded on {} (kernel {}) by memtrack {}",
            clean(&run.hostname),
            clean(&run.kernel_release),
            clean(&run.memtrack_version),
        )?;
    }
    write_files(run, out)?;
    let lost = &report.lost_events;
    if lost.total == 0 {
        writeln!(
            out,
            "  {} read, none lost",
            counted(run.events, "event", "events")
        )?;
    } else {
        writeln!(
            out,
            "  {} read, {} lost while recording ({})",
            counted(run.events, "event", "events"),
            lost.total,
            lost_causes(lost)
        )?;
    }
    if run.ignored_events > 0 {
        writeln!(
            out,
            "  {} events named a process after its exit and were not counted",
            run.ignored_events
        )?;
    }
    Ok(())
}

/// The INCOMPLETE banner, one line per reason.
fn write_incomplete(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    if report.complete {
        return Ok(());
    }
    writeln!(out)?;
    for reason in &report.incomplete_reasons {
        writeln!(out, "INCOMPLETE: {}", clean(reason))?;
    }
    Ok(())
}

/// The metrics of the scope, one labelled line each.
fn write_summary(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let t: &Metrics = &report.totals;
    let h = &t.heap;
    writeln!(out)?;
    writeln!(out, "{}", scope_title(report))?;
    let line = |out: &mut dyn Write, label: &str, value: String| -> io::Result<()> {
        writeln!(out, "  {label:<LABEL_WIDTH$}{value}")
    };
    line(
        out,
        "allocations",
        format!(
            "{} ({}, average {})",
            h.allocs,
            format_bytes(h.bytes_allocated),
            format_bytes(h.average_alloc_bytes.round() as u64)
        ),
    )?;
    line(
        out,
        "frees",
        format!("{} ({})", h.frees, format_bytes(h.bytes_freed)),
    )?;
    line(out, "peak heap", peak(h.peak_live_bytes, h.peak_live_at_ns))?;
    line(out, "leaked", blocks(h.leaked.blocks, h.leaked.bytes))?;
    if let Some(l) = &h.leaks {
        for (label, b) in leak_split(l) {
            line(out, label, b)?;
        }
    }
    if let Some(live) = live_at_end(h, "processes still running when the recording ended") {
        line(out, "live at end", live)?;
    }
    if h.dropped_at_exec.blocks > 0 {
        line(
            out,
            "dropped at exec",
            blocks(h.dropped_at_exec.blocks, h.dropped_at_exec.bytes),
        )?;
    }
    line(out, "temporary", temporary(h))?;
    line(
        out,
        "reallocs",
        format!("{} ({} moved)", h.reallocs, h.realloc_moves),
    )?;
    line(out, "failed allocs", h.failed_allocs.to_string())?;
    line(out, "unknown frees", h.unknown_frees.to_string())?;
    if h.duplicate_allocs > 0 {
        line(out, "duplicate allocs", h.duplicate_allocs.to_string())?;
    }
    if let Some(r) = &t.resident {
        write_resident(r, out)?;
    }
    if let Some(m) = &t.mapped {
        line(
            out,
            "peak mapped",
            format!(
                "{} (anonymous {}; apart from the heap)",
                peak(m.peak_bytes, m.peak_at_ns),
                peak(m.peak_anon_bytes, m.peak_anon_at_ns)
            ),
        )?;
        line(
            out,
            "mapping calls",
            format!(
                "{} mmap, {} munmap, {} mremap, {} brk",
                m.mmaps, m.munmaps, m.mremaps, m.brks
            ),
        )?;
    }
    Ok(())
}

/// A benchmark's LEAKED cell: with leak scans, how much of it was definitely lost (and not
/// scanned), by the scan of each process at its exit: "3.3 KiB (1.1 KiB lost)".
fn bench_leaked(h: &crate::model::metrics::HeapMetrics) -> String {
    let leaked = format_bytes(h.leaked.bytes);
    match &h.leaks {
        Some(l) if l.not_scanned.blocks > 0 => format!(
            "{leaked} ({} lost, {} not scanned)",
            format_bytes(l.definitely_lost.bytes),
            format_bytes(l.not_scanned.bytes)
        ),
        Some(l) => format!("{leaked} ({} lost)", format_bytes(l.definitely_lost.bytes)),
        None => leaked,
    }
}

/// Peak resident memory of the scope, with its members.
fn write_resident(r: &ResidentMetrics, out: &mut dyn Write) -> io::Result<()> {
    let members: Vec<String> = r
        .members
        .iter()
        .map(|m| format!("{} {}", m.member, format_bytes(m.peak_bytes)))
        .collect();
    writeln!(
        out,
        "  {:<LABEL_WIDTH$}{} (peaks: {})",
        "peak resident",
        peak(r.peak_bytes, r.peak_at_ns),
        members.join(", ")
    )?;
    if r.removes_beyond_baseline_bytes > 0 {
        writeln!(
            out,
            "  {:<LABEL_WIDTH$}{} (removed beyond what the process was known to hold)",
            "beyond baseline",
            format_bytes(r.removes_beyond_baseline_bytes)
        )?;
    }
    Ok(())
}

/// The signed per-process rmap accounting (pages), each kind's rmap-derived resident figure
/// next to rss_stat's, and what held the process's own pages at its rmap peak.
fn write_rmap(
    rmap: &crate::model::rmap::RmapReport,
    names: &ProcessNames,
    out: &mut dyn Write,
) -> io::Result<()> {
    let opt = |v: Option<i64>| v.map_or_else(|| "?".to_string(), |v| v.to_string());
    writeln!(out)?;
    writeln!(
        out,
        "Resident memory by rmap, pages (signed, never clamped; rmap = inherited + net, \
         against rss_stat):"
    )?;
    for p in &rmap.processes {
        let name = names
            .name_of_pid(p.pid)
            .unwrap_or_else(|| clean(&p.command));
        writeln!(out, "  pid {} {name}", p.pid)?;
        for k in p
            .kinds
            .iter()
            .filter(|k| k.adds_pages + k.removes_pages > 0)
        {
            writeln!(
                out,
                "    {:<6}adds {}, removes {}, net {}; own resident {}, inherited {}, \
                 inherited since unmapped {}; rmap {} vs rss_stat {} (difference {})",
                k.kind,
                k.adds_pages,
                k.removes_pages,
                k.net_pages,
                k.own_resident_pages,
                opt(k.inherited_pages),
                k.inherited_unmapped_pages,
                opt(k.rmap_resident_pages),
                opt(k.rss_stat_pages),
                opt(k.difference_pages),
            )?;
        }
        if !p.by_mapping.is_empty() {
            let held: Vec<String> = p
                .by_mapping
                .iter()
                .map(|r| format!("{} {}", r.region, format_bytes(r.bytes)))
                .collect();
            writeln!(
                out,
                "    at its rmap peak ({}): {}",
                peak(p.peak_own_bytes, p.peak_at_ns),
                held.join(", ")
            )?;
        }
    }
    Ok(())
}

/// Allocation sizes as bars, the longest as long as the width leaves (at most [`BAR_WIDTH`]).
fn write_histogram(h: &HeapMetrics, width: usize, out: &mut dyn Write) -> io::Result<()> {
    if h.size_histogram.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(out, "allocation sizes")?;
    let most = h
        .size_histogram
        .iter()
        .map(|b| b.count)
        .max()
        .unwrap_or(1)
        .max(1);
    let mut table = Table::new(vec![
        Column::left("  "),
        Column::right("  "),
        Column::left("  "),
    ]);
    let label = |b: &crate::model::metrics::SizeBucket| {
        if b.min_bytes == b.max_bytes {
            format_bytes(b.min_bytes)
        } else {
            format!(
                "{} - {}",
                format_bytes(b.min_bytes),
                format_bytes(b.max_bytes)
            )
        }
    };
    let widest = |f: &dyn Fn(&crate::model::metrics::SizeBucket) -> String| {
        h.size_histogram
            .iter()
            .map(|b| f(b).chars().count())
            .max()
            .unwrap_or(0)
    };
    let used = 2 + widest(&label) + 2 + widest(&|b| b.count.to_string()) + 2;
    let bar_width = width.saturating_sub(used).clamp(1, BAR_WIDTH);
    for b in &h.size_histogram {
        let bar = ((b.count as f64 / most as f64) * bar_width as f64).round() as usize;
        table.row(vec![
            label(b),
            b.count.to_string(),
            "#".repeat(bar.clamp(1, bar_width)),
        ]);
    }
    for line in table.lines() {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// One row per process, columns aligned: the processes as a tree when they all fit and no
/// `--sort` is given, else the top ones in order and the rest summed in one row. A narrow
/// screen drops the least important columns first and shortens the commands.
fn write_processes(report: &Report, layout: &TextLayout, out: &mut dyn Write) -> io::Result<()> {
    if report.processes.is_empty() {
        return Ok(());
    }
    let with_resident = report.processes.iter().any(|p| p.own.resident.is_some());
    let numbers = [
        "ALLOCS",
        "FREES",
        "ALLOCATED",
        "PEAK HEAP",
        "AT",
        "TREE PEAK",
        "LEAKED",
        "FAILED",
    ];
    // A process has its pid to tell it by: its command may shrink to a few characters.
    let command = FitColumn::text("COMMAND", 10);
    let columns = table_columns(&numbers, with_resident, &["EXIT"], command);

    let selection = rows::select(&report.processes, layout.rows, rows::process_measures);
    // Indentation only means something in tree order; it never takes more than an eighth of
    // the width.
    let indent = selection
        .sorted_by
        .is_none()
        .then_some(MAX_INDENT.min((layout.width / 8) as u32));
    let names = ProcessNames::new(&report.processes);
    let mut body: Vec<Vec<String>> = selection
        .shown
        .iter()
        .map(|p| process_row(p, &names, with_resident, indent))
        .collect();
    if let Some(rest) = &selection.rest {
        body.push(process_rest_row(rest, with_resident));
    }
    let drop_order = drop_order(
        &[
            "FAILED",
            "AT",
            "FREES",
            "TREE PEAK",
            "EXIT",
            "ALLOCATED",
            "PEAK RSS",
            "ALLOCS",
            "LEAKED",
        ],
        &selection,
    );
    let fitted = screen::fit_table(&columns, body, &drop_order, layout.width);
    write_fitted(&selection.title("processes"), &fitted, out)?;
    if selection.running() {
        writeln!(out)?;
        writeln!(
            out,
            "  * still running when the recording ended: LEAKED shows its live heap at the end"
        )?;
    }
    write_rest_note(&selection, "processes", out)
}

/// The columns of the process and benchmark tables: PID on the left, `numbers` right, PEAK RSS
/// when the recording has resident memory, `after` right, then the `text` column.
fn table_columns(
    numbers: &[&'static str],
    with_resident: bool,
    after: &[&'static str],
    text: FitColumn,
) -> Vec<FitColumn> {
    let mut columns = vec![FitColumn::left("PID")];
    columns.extend(numbers.iter().map(|&n| FitColumn::right(n)));
    if with_resident {
        columns.push(FitColumn::right("PEAK RSS"));
    }
    columns.extend(after.iter().map(|&n| FitColumn::right(n)));
    columns.push(text);
    columns
}

/// `order` without the column the table is sorted by, which is never dropped.
fn drop_order<T>(order: &[&'static str], selection: &Selection<T>) -> Vec<&'static str> {
    let sorted = selection.sorted_by.map(rows::SortKey::column);
    order
        .iter()
        .copied()
        .filter(|&c| Some(c) != sorted)
        .collect()
}

/// The row that sums the processes a table leaves out.
fn process_rest_row(rest: &Rest, with_resident: bool) -> Vec<String> {
    let mut row = vec![
        "…".to_string(),
        rest.allocs.to_string(),
        rest.frees.to_string(),
        format_bytes(rest.bytes_allocated),
        format_bytes(rest.largest_peak_bytes),
        "-".to_string(),
        "-".to_string(),
        rest_leaked(rest),
        rest.failed_allocs.to_string(),
    ];
    if with_resident {
        row.push(rest_resident(rest));
    }
    row.push("-".to_string());
    row.push(rest_label(rest, "process", "processes"));
    row
}

/// The LEAKED cell of a summed row, marked when it includes live heap of running processes.
fn rest_leaked(rest: &Rest) -> String {
    let mark = if rest.running { "*" } else { "" };
    format!("{}{mark}", format_bytes(rest.leaked_bytes))
}

/// The PEAK RSS cell of a summed row: the largest.
fn rest_resident(rest: &Rest) -> String {
    rest.largest_resident_bytes
        .map_or_else(|| "-".to_string(), format_bytes)
}

/// Under a cut table, what its summed row holds and how to see every row.
fn write_rest_note<T>(selection: &Selection<T>, noun: &str, out: &mut dyn Write) -> io::Result<()> {
    let Some(rest) = &selection.rest else {
        return Ok(());
    };
    writeln!(out)?;
    writeln!(
        out,
        "  …: the other {} {noun} summed (their peaks: the largest of them); --all or --top N \
         shows more",
        rest.rows
    )
}

/// `title`, then a fitted table, then which columns it had to drop.
fn write_fitted(title: &str, fitted: &Fitted, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out)?;
    writeln!(out, "{title}")?;
    for line in &fitted.lines {
        writeln!(out, "{line}")?;
    }
    screen::write_dropped(fitted, out)
}

/// Writes `report` for people with one row per benchmark (`report --by bench`), laid out as
/// `layout` says.
pub fn write_benchmarks_text(
    report: &Report,
    layout: &TextLayout,
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut wrapped = Wrap::new(out, layout.width);
    write_benchmark_lines(report, layout, &mut wrapped)?;
    wrapped.finish()
}

fn write_benchmark_lines(
    report: &Report,
    layout: &TextLayout,
    out: &mut dyn Write,
) -> io::Result<()> {
    write_run(report, out)?;
    write_incomplete(report, out)?;
    if report.benchmarks.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "no benchmarks: the harness named none (record it with --control PATH and have it \
             send `bench URI PID`; see docs/control-protocol.md)"
        )?;
        sites::write_stacks(report, layout.width, out)?;
        return functions::write_functions(report, layout.width, out);
    }
    let with_resident = report
        .benchmarks
        .iter()
        .any(|b| b.metrics.resident.is_some());
    let numbers = [
        "WINDOWS",
        "MEASURED",
        "ALLOCS",
        "FREES",
        "ALLOCATED",
        "PEAK HEAP",
        "LEAKED",
        "FAILED",
    ];
    // A benchmark's name is all that tells it: it keeps more before a column goes.
    let name = FitColumn::text("BENCHMARK", 32);
    let columns = table_columns(&numbers, with_resident, &[], name);
    let selection = rows::select(&report.benchmarks, layout.rows, rows::benchmark_measures);
    let mut body: Vec<Vec<String>> = selection
        .shown
        .iter()
        .map(|b| {
            let h = &b.metrics.heap;
            let pids: Vec<String> = b.pids.iter().map(u32::to_string).collect();
            let mut row = vec![
                pids.join(","),
                b.windows.to_string(),
                format_duration_ns(b.measured_ns),
                h.allocs.to_string(),
                h.frees.to_string(),
                format_bytes(h.bytes_allocated),
                format_bytes(h.peak_live_bytes),
                bench_leaked(h),
                h.failed_allocs.to_string(),
            ];
            if with_resident {
                row.push(peak_resident_cell(b.metrics.resident.as_ref()));
            }
            row.push(shorten(&clean(&b.uri)));
            row
        })
        .collect();
    if let Some(rest) = &selection.rest {
        let mut row = vec![
            "…".to_string(),
            "-".to_string(),
            "-".to_string(),
            rest.allocs.to_string(),
            rest.frees.to_string(),
            format_bytes(rest.bytes_allocated),
            format_bytes(rest.largest_peak_bytes),
            rest_leaked(rest),
            rest.failed_allocs.to_string(),
        ];
        if with_resident {
            row.push(rest_resident(rest));
        }
        row.push(rest_label(rest, "benchmark", "benchmarks"));
        body.push(row);
    }
    let drop_order = drop_order(
        &[
            "FAILED",
            "FREES",
            "WINDOWS",
            "MEASURED",
            "ALLOCATED",
            "PEAK RSS",
            "ALLOCS",
            "LEAKED",
        ],
        &selection,
    );
    let fitted = screen::fit_table(&columns, body, &drop_order, layout.width);
    let title = format!(
        "{} ({})",
        selection.title("benchmarks"),
        report.benchmarks.len()
    );
    write_fitted(&title, &fitted, out)?;
    writeln!(out)?;
    writeln!(out, "  {BENCH_FOOTER}")?;
    write_rest_note(&selection, "benchmarks", out)?;
    sites::write_benchmark_stacks(report, layout.width, out)?;
    functions::write_functions(report, layout.width, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Header, ReadEnd};
    use crate::model::metrics::Scope;
    use crate::testkit::analyze;
    use crate::testkit::{at, exit, fork, free, lost, malloc, START};

    fn header() -> Header {
        Header {
            argv: vec!["./bench".into(), "--fast".into()],
            root_pid: 10,
            start_monotonic_ns: START,
            ..Header::default()
        }
    }

    /// Root 10 allocates 100 B and forks 11, which allocates 3000 B at 3 ms and exits with it.
    fn sample() -> Report {
        let events = vec![
            at(1_000, 10, 10, malloc(0x10, 100)),
            at(2_000, 10, 10, fork(11)),
            at(3_000_000, 11, 11, malloc(0x20, 3000)),
            at(4_000_000, 11, 11, exit(0)),
            at(5_000_000, 10, 10, free(0x10)),
            at(6_000_000, 10, 10, exit(1 << 8)),
        ];
        analyze(&header(), events, None)
    }

    /// A layout as wide as a wide terminal, so these tests see every column.
    const WIDE: TextLayout = TextLayout {
        width: 200,
        rows: RowOptions {
            top: Some(rows::DEFAULT_TOP_ROWS),
            sort: None,
        },
    };

    /// Asserts that `text` contains `needle`, showing the whole text when it does not.
    fn says(text: &str, needle: &str) {
        assert!(text.contains(needle), "{needle:?} missing from\n{text}");
    }

    fn render(report: &Report) -> String {
        render_with(report, &WIDE)
    }

    fn render_with(report: &Report, layout: &TextLayout) -> String {
        let mut out = Vec::new();
        write_text(report, layout, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn shows_command() {
        assert!(render(&sample()).starts_with("memtrack report: ./bench --fast\n"));
    }

    #[test]
    fn shows_exit_code_from_root() {
        assert!(render(&sample()).contains("exit code 1"));
    }

    #[test]
    fn shows_run_peak_with_time() {
        says(&render(&sample()), "peak heap         3.0 KiB at 3.0 ms");
    }

    #[test]
    fn shows_leaks() {
        says(&render(&sample()), "leaked            1 block, 2.9 KiB");
    }

    #[test]
    fn child_row_is_indented() {
        let text = render(&sample());
        assert!(text.lines().any(|l| l.starts_with("    11 ")), "{text}");
        assert!(text.lines().any(|l| l.starts_with("  10 ")), "{text}");
    }

    #[test]
    fn columns_align() {
        let text = render(&sample());
        let header = text.lines().find(|l| l.contains("ALLOCS")).unwrap();
        let row = text.lines().find(|l| l.starts_with("    11 ")).unwrap();
        let end = header.find("ALLOCS").unwrap() + "ALLOCS".len();
        assert_eq!(&row[end - 1..end], "1", "{text}");
    }

    #[test]
    fn histogram_lists_buckets() {
        let text = render(&sample());
        assert!(text.contains("64 B - 127 B"), "{text}");
        assert!(text.contains("2.0 KiB - 4.0 KiB"), "{text}");
    }

    #[test]
    fn complete_report_has_no_banner() {
        assert!(!render(&sample()).contains("INCOMPLETE"));
    }

    #[test]
    fn damaged_report_has_banner_with_offset() {
        let end = ReadEnd::Damaged {
            offset: 4242,
            reason: "torn chunk".into(),
        };
        let report = analyze(&header(), vec![at(1, 10, 10, malloc(1, 1))], Some(&end));
        says(
            &render(&report),
            "INCOMPLETE: the file is damaged at byte offset 4242 (torn chunk)",
        );
    }

    #[test]
    fn a_file_cut_short_says_so_with_its_offset_once() {
        for (reason, says) in [
            (
                "the file ends 321 bytes into a 749-byte payload (the recording was cut short)",
                "it ends 321 bytes into a 749-byte payload",
            ),
            (
                "the file ends without a trailer (the recording was cut short)",
                "it ends without a trailer",
            ),
        ] {
            let end = ReadEnd::Damaged {
                offset: 117,
                reason: reason.into(),
            };
            let report = analyze(&header(), vec![at(1, 10, 10, malloc(1, 1))], Some(&end));
            assert_eq!(
                report.incomplete_reasons,
                [format!(
                    "the file is cut short (truncated) at byte offset 117: {says}; only the \
                     events before it are counted"
                )]
            );
        }
    }

    #[test]
    fn says_nothing_was_lost() {
        assert!(render(&sample()).contains("\n  6 events read, none lost\n"));
    }

    #[test]
    fn says_what_was_lost() {
        let events = vec![at(1, 10, 10, lost("ring_full", 7))];
        let text = render(&analyze(&header(), events, None));
        assert!(
            text.contains("1 event read, 7 lost while recording (7 ring_full)"),
            "{text}"
        );
        assert!(text.contains("INCOMPLETE: 7 events were lost"), "{text}");
    }

    #[test]
    fn running_process_is_marked() {
        let report = analyze(&header(), vec![at(1, 10, 10, malloc(1, 10))], None);
        let text = render(&report);
        assert!(text.contains("10 B*"), "{text}");
        assert!(text.contains("running"), "{text}");
        assert!(text.contains("* still running"), "{text}");
    }

    #[test]
    fn empty_report_renders() {
        let text = render(&analyze(&Header::default(), Vec::new(), None));
        assert!(text.contains("whole run (0 processes)"), "{text}");
        assert!(!text.contains("processes\n"), "{text}");
    }

    #[test]
    fn control_characters_are_replaced() {
        assert_eq!(clean("a\nb\x1b[31m"), "a?b?[31m");
    }

    #[test]
    fn long_command_is_cut() {
        let mut p = sample().processes.remove(0);
        p.argv = vec!["x".repeat(500)];
        let c = command(&p);
        assert_eq!(c.chars().count(), COMMAND_WIDTH);
        assert!(c.ends_with('…'));
    }

    #[test]
    fn process_count_is_pluralized() {
        assert_eq!(processes(1), "1 process");
        assert_eq!(processes(0), "0 processes");
        assert_eq!(processes(2), "2 processes");
    }

    #[test]
    fn tree_scope_title() {
        let report = sample().narrow(Scope::Tree { pid: 11 }).unwrap();
        assert!(render(&report).contains("\ntree of process 11 (1 process)\n"));
    }

    #[test]
    fn process_scope_title() {
        let report = sample().narrow(Scope::Process { pid: 10 }).unwrap();
        let text = render(&report);
        assert!(text.contains("\nprocess 10\n"), "{text}");
        // The run's command as given, the row's name without the directory.
        assert_eq!(text.matches("./bench --fast").count(), 1, "{text}");
        assert_eq!(text.matches("bench --fast").count(), 2, "{text}");
    }

    /// Root 10 runs benchmark "parse small" in child 11, with noise from child 12.
    fn with_benchmarks() -> Report {
        use crate::testkit::{bench, start, stop};
        let events = vec![
            at(0, 10, 10, fork(11)),
            at(1, 10, 10, fork(12)),
            bench(2, "parse small", 11),
            start(3),
            at(1_000, 11, 11, malloc(0x10, 3000)),
            at(1_500, 12, 12, malloc(0x10, 999)),
            stop(2_003),
        ];
        analyze(&header(), events, None)
    }

    fn render_benchmarks(report: &Report) -> String {
        let mut out = Vec::new();
        write_benchmarks_text(report, &WIDE, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn benchmark_rows() {
        let text = render_benchmarks(&with_benchmarks());
        assert!(text.contains("\nbenchmarks (1)\n"), "{text}");
        let header = text.lines().find(|l| l.contains("WINDOWS")).unwrap();
        assert!(header.trim_start().starts_with("PID"), "{text}");
        assert!(header.ends_with("BENCHMARK"), "{text}");
        let row = text.lines().find(|l| l.ends_with("parse small")).unwrap();
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[..4], ["11", "1", "2.0", "µs"], "{text}");
        assert!(row.contains("2.9 KiB"), "{text}");
        assert!(!text.contains("999"), "{text}");
    }

    #[test]
    fn the_benchmark_footer_says_what_leaked_counts() {
        let text = render_benchmarks(&with_benchmarks());
        let footer = text.lines().find(|l| l.contains("LEAKED:")).unwrap();
        assert_eq!(
            footer,
            "  inside each benchmark's windows, in its pid and descendants; LEAKED: allocated \
             there and never freed, not even after stop, by the exit of its process or the end \
             of the recording"
        );
    }

    #[test]
    fn no_benchmarks_says_how_to_get_them() {
        says(
            &render_benchmarks(&sample()),
            "no benchmarks: the harness named none",
        );
    }

    #[test]
    fn process_report_points_to_the_benchmarks() {
        let text = render(&with_benchmarks());
        assert!(
            text.contains("\n1 benchmark: `memtrack report FILE --by bench`"),
            "{text}"
        );
        assert!(!render(&sample()).contains("--by bench"));
    }

    #[test]
    fn benchmark_scope_title() {
        let report = with_benchmarks()
            .narrow(Scope::Benchmark {
                uri: "parse small".into(),
            })
            .unwrap();
        assert!(render(&report).contains("\nbenchmark parse small\n"));
    }

    #[test]
    fn percent_of_zero() {
        assert_eq!(percent(0, 0), "0.0%");
        assert_eq!(percent(1, 3), "33.3%");
    }

    #[test]
    fn signal_exit_shown() {
        let events = vec![at(1, 10, 10, exit(9))];
        let text = render(&analyze(&header(), events, None));
        assert!(text.contains("sig 9"), "{text}");
    }

    /// Root 1 forks `n` children; child i allocates i + 1 bytes `i % 2 + 1` times (a long
    /// command line each), leaks them and exits.
    fn many(n: u32) -> Report {
        let mut events = Vec::new();
        let mut t = 1;
        let mut addr = 0x1000;
        for i in 0..n {
            let pid = 2 + i;
            events.push(at(t, 1, 1, fork(pid)));
            for _ in 0..=(i % 2) {
                t += 1;
                events.push(at(t, pid, pid, malloc(addr, u64::from(i) + 1)));
                addr += 0x10;
            }
            events.push(at(t + 1, pid, pid, exit(0)));
            t += 2;
        }
        let header = Header {
            argv: vec!["./worker".into(), "--input".into(), "x".repeat(150)],
            root_pid: 1,
            ..Header::default()
        };
        analyze(&header, events, None)
    }

    fn at_width(width: usize) -> TextLayout {
        TextLayout {
            width,
            ..TextLayout::default()
        }
    }

    #[test]
    fn no_line_is_wider_than_the_width() {
        for width in [40, 60, 80, 200] {
            for report in [sample(), many(30)] {
                let text = render_with(&report, &at_width(width));
                for line in text.lines() {
                    assert!(line.chars().count() <= width, "{width}: {line:?}\n{text}");
                }
            }
        }
    }

    /// The header line of the process table.
    fn process_header(text: &str) -> &str {
        text.lines()
            .find(|l| l.trim_start().starts_with("PID"))
            .unwrap()
    }

    #[test]
    fn wide_shows_every_column_narrow_the_important_ones() {
        let wide = render_with(&sample(), &at_width(200));
        assert_eq!(
            process_header(&wide),
            "  PID   ALLOCS  FREES  ALLOCATED  PEAK HEAP      AT  TREE PEAK   LEAKED  FAILED  \
             EXIT  COMMAND"
        );
        assert!(!wide.contains("left out to fit"), "{wide}");
        let medium = render_with(&sample(), &at_width(80));
        assert_eq!(
            process_header(&medium),
            "  PID   ALLOCS  ALLOCATED  PEAK HEAP  TREE PEAK   LEAKED  EXIT  COMMAND"
        );
        assert!(
            medium.contains("(left out to fit the width: FAILED, AT, FREES;"),
            "{medium}"
        );
        let narrow = render_with(&sample(), &at_width(40));
        assert_eq!(
            process_header(&narrow),
            "  PID   PEAK HEAP   LEAKED  COMMAND"
        );
        // Every row keeps its pid and its peak on one line.
        assert!(
            narrow.contains("\n    11    2.9 KiB  2.9 KiB  bench --fast\n"),
            "{narrow}"
        );
    }

    #[test]
    fn narrow_commands_end_with_an_ellipsis() {
        let text = render_with(&many(3), &at_width(60));
        let row = text.lines().find(|l| l.starts_with("    2 ")).unwrap();
        assert_eq!(row.chars().count(), 60, "{text}");
        assert!(row.ends_with("  worker --input…"), "{row}");
    }

    #[test]
    fn the_sort_column_is_never_dropped() {
        let layout = TextLayout {
            width: 40,
            rows: RowOptions {
                top: None,
                sort: Some(rows::SortKey::Allocs),
            },
        };
        let text = render_with(&sample(), &layout);
        assert!(text.contains("\nprocesses by allocations\n"), "{text}");
        assert!(process_header(&text).contains("ALLOCS"), "{text}");
        // Sorted rows are not a tree: no indentation.
        assert!(text.lines().any(|l| l.starts_with("  11 ")), "{text}");
    }

    #[test]
    fn a_thousand_processes_are_twenty_rows_and_one_sum() {
        let report = many(999);
        let text = render_with(&report, &at_width(200));
        assert!(
            text.contains("\nprocesses: top 20 of 1000 by peak heap\n"),
            "{text}"
        );
        let header = process_header(&text);
        let table: Vec<&str> = text
            .lines()
            .skip_while(|l| *l != header)
            .skip(1)
            .take_while(|l| !l.is_empty())
            .collect();
        assert_eq!(table.len(), 21, "{text}");
        let cells = |l: &str| -> Vec<String> { l.split_whitespace().map(String::from).collect() };
        let shown: Vec<Vec<String>> = table[..20].iter().map(|l| cells(l)).collect();
        let rest = cells(table[20]);
        assert_eq!(rest[0], "…", "{text}");
        assert!(table[20].ends_with("980 more processes"), "{text}");
        let sum =
            |col: usize| -> u64 { shown.iter().map(|c| c[col].parse::<u64>().unwrap()).sum() };
        let h = &report.totals.heap;
        assert_eq!(rest[1].parse::<u64>().unwrap(), h.allocs - sum(1), "{text}");
        assert_eq!(rest[2].parse::<u64>().unwrap(), h.frees - sum(2), "{text}");
        // The biggest peaks first: child 997 (pid 999) allocated 998 bytes twice.
        assert_eq!(shown[0][0], "999", "{text}");
        assert!(
            text.contains("…: the other 980 processes summed (their peaks: the largest of them)"),
            "{text}"
        );
        let all = TextLayout {
            rows: RowOptions::ALL,
            ..at_width(200)
        };
        let every = render_with(&report, &all);
        assert!(!every.contains("more processes"));
        assert!(every.contains("\nprocesses\n"));
    }

    #[test]
    fn deep_tree_indent_is_capped() {
        let mut events = Vec::new();
        for pid in 1..200u32 {
            events.push(at(u64::from(pid), pid, pid, fork(pid + 1)));
        }
        let layout = TextLayout {
            rows: RowOptions::ALL,
            ..WIDE
        };
        let text = render_with(&analyze(&Header::default(), events, None), &layout);
        let widest = text
            .lines()
            .map(|l| l.len() - l.trim_start().len())
            .max()
            .unwrap();
        assert!(widest <= 2 + 2 * MAX_INDENT as usize, "{widest}");
    }
}
