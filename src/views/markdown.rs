//! `report --format markdown`: a compact summary for a CI job summary ($GITHUB_STEP_SUMMARY)
//! or a pull-request comment. The totals of the scope, what was lost or damaged (the text
//! report's own warnings, which say which way each number may be wrong), the top processes and
//! the benchmarks as GitHub tables, the top allocation sites with `--stacks` (and the scope's
//! resident memory by the code that made it resident, when recorded) and the top allocating
//! functions with `--functions`.
//!
//! Flow: `run_report` hands the narrowed [`Report`] here as it does to `text`; the rows come
//! from `rows` (the same `--top`, `--all`, `--sort`), the words and units from `text` and
//! `units`, so both forms say the same numbers the same way. Everything taken from the
//! recording (commands, benchmark names, frames) is escaped, so a `|` or a backtick in an
//! argument cannot break a table or start markup.

use std::io::{self, Write};

use crate::units::{format_bytes, format_duration_ns};

use super::frames;
use super::functions;
use super::rows::Rows;
use super::rows::{self, Measures, Rest, RowOptions, Selection};
use super::words::{
    blocks, capitalized, clean, counted, estimates_note, exit_code, exit_text, frame_text,
    functions_shown, inherited_note, live_at_end, lost_causes, members, order_label, peak, plural,
    processes, resident_sites_heading, resident_sites_note, rest_label, scope_title, sites_shown,
    temporary, walker_never_walked, ProcessNames, NO_FUNCTIONS, NO_STACKS, NO_WALKER, UNATTRIBUTED,
};
use crate::model::functions::FunctionReport;
use crate::model::metric::value_text;
use crate::model::metrics::{BenchmarkMetrics, ProcessMetrics, Report};
use crate::model::sites::{
    ResidentSite, ResidentSites, SiteFrame, SiteMetrics, StackReport, StackSampling,
};

/// Frames shown per allocation or resident site, innermost first (a folded run is one); the
/// JSON has them all.
const SITE_FRAMES: usize = 5;
/// Longest command in a table cell; longer ones end with "…" (the JSON has them whole).
const COMMAND_CHARS: usize = 60;

/// Writes `report` as GitHub markdown: with `rows` Benchmarks, the benchmarks' table in place
/// of the processes'; `row_options` chooses the rows of either.
pub fn write_markdown(
    report: &Report,
    rows: Rows,
    row_options: RowOptions,
    out: &mut dyn Write,
) -> io::Result<()> {
    write_heading(report, out)?;
    write_incomplete(report, out)?;
    write_totals(report, out)?;
    if rows == Rows::Processes {
        write_processes(report, row_options, out)?;
    }
    if rows == Rows::Benchmarks || !report.benchmarks.is_empty() {
        write_benchmarks(report, row_options, out)?;
    }
    if let Some(s) = &report.suppressions {
        writeln!(out)?;
        for line in super::words::suppression_lines(s) {
            writeln!(out, "{}  ", escape(&line))?;
        }
    }
    match (&report.stacks, rows) {
        (Some(stacks), Rows::Benchmarks) if stacks.recorded => {
            for b in &report.benchmarks {
                if let Some(stacks) = &b.stacks {
                    write_sites(&format!("benchmark {}", escape(&b.uri)), stacks, out)?;
                }
            }
        }
        (Some(stacks), _) => write_sites(&escape(&scope_title(report)), stacks, out)?,
        (None, _) => {}
    }
    match &report.functions {
        Some(f) => write_functions(&escape(&scope_title(report)), f, out),
        None => Ok(()),
    }
}

/// The command as the heading, then the run in one line.
fn write_heading(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let run = &report.run;
    writeln!(out, "### memtrack: {}", escape(&run.command.join(" ")))?;
    writeln!(out)?;
    let exit = exit_code(run);
    writeln!(
        out,
        "root pid {}, {}, {}, {exit}, {} read",
        run.root_pid,
        processes(run.processes),
        format_duration_ns(run.duration_ns),
        counted(run.events, "event", "events")
    )
}

/// The INCOMPLETE warning, one item per reason, as the text report gives them.
fn write_incomplete(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    if report.complete {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(out, "> [!WARNING]")?;
    writeln!(
        out,
        "> **Incomplete recording**: some numbers may be wrong, as each reason says."
    )?;
    for reason in &report.incomplete_reasons {
        writeln!(out, "> - {}", escape(reason))?;
    }
    Ok(())
}

/// The metrics of the scope, one row each.
fn write_totals(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let t = &report.totals;
    let h = &t.heap;
    writeln!(out)?;
    writeln!(out, "| {} | |", escape(&scope_title(report)))?;
    writeln!(out, "|:--|--:|")?;
    let row = |out: &mut dyn Write, label: &str, value: String| -> io::Result<()> {
        writeln!(out, "| {label} | {} |", escape(&value))
    };
    row(out, "peak heap", peak(h.peak_live_bytes, h.peak_live_at_ns))?;
    row(
        out,
        "allocations",
        format!("{} ({})", h.allocs, format_bytes(h.bytes_allocated)),
    )?;
    row(out, "leaked", blocks(h.leaked.blocks, h.leaked.bytes))?;
    if let Some(l) = &h.leaks {
        for (label, value) in super::words::leak_split(l) {
            row(out, &format!("leaked: {}", label.trim()), value)?;
        }
    }
    if let Some(live) = live_at_end(h, "still running at the end") {
        row(out, "live at end", live)?;
    }
    row(out, "temporary", temporary(h))?;
    if h.failed_allocs > 0 {
        row(out, "failed allocs", h.failed_allocs.to_string())?;
    }
    if let Some(r) = &t.resident {
        row(out, "peak resident", peak(r.peak_bytes, r.peak_at_ns))?;
    }
    if let Some(m) = &t.mapped {
        row(out, "peak mapped", peak(m.peak_bytes, m.peak_at_ns))?;
    }
    let lost = &report.lost_events;
    let lost_text = if lost.total == 0 {
        "none".to_string()
    } else {
        // `escape` below cleans the causes again, which changes nothing.
        format!("{} ({})", lost.total, lost_causes(lost))
    };
    row(out, "lost events", lost_text)?;
    if !report.skipped.is_empty() || report.damage.is_some() {
        let bytes: u64 = report.skipped.iter().map(|s| s.size_bytes).sum();
        let mut parts = Vec::new();
        if !report.skipped.is_empty() {
            parts.push(format!(
                "{} {} skipped ({bytes} bytes)",
                report.skipped.len(),
                plural(report.skipped.len() as u64, "range", "ranges")
            ));
        }
        let end = report.damage.as_ref().map(|d| d.end_reason());
        let cut_short =
            report.skipped.is_empty() && end.as_ref().is_some_and(|e| e.contains("cut short"));
        parts.extend(end);
        row(
            out,
            if cut_short { "cut short" } else { "damaged" },
            parts.join("; "),
        )?;
    }
    Ok(())
}

/// A table's header row and its alignment row: numbers right, the last (text) column left.
fn write_header(headers: &[&str], out: &mut dyn Write) -> io::Result<()> {
    writeln!(out)?;
    writeln!(out, "| {} |", headers.join(" | "))?;
    let aligns: Vec<&str> = (0..headers.len())
        .map(|i| if i + 1 == headers.len() { ":--" } else { "--:" })
        .collect();
    writeln!(out, "|{}|", aligns.join("|"))
}

/// One table row of already escaped cells.
fn write_row(cells: &[String], out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "| {} |", cells.join(" | "))
}

/// What the processes' and the benchmarks' tables do not share; `write_table` is the rest.
struct Table<'f, T> {
    /// The rows' noun, one and many ("process", "processes").
    noun: (&'static str, &'static str),
    /// The headers of the two text columns after the numbers.
    last: [&'static str; 2],
    /// What a row measures (`rows::process_measures`, `rows::benchmark_measures`).
    measures: fn(&T) -> Measures<'_>,
    /// The PID cell.
    pids: fn(&T) -> String,
    /// The cells of the two text columns, escaped.
    tail: &'f dyn Fn(&T) -> [String; 2],
}

/// Writes the heading, the header and the rows `options` selects of `items` (the rest summed in
/// one row); returns the selection, for the notes under the table.
fn write_table<'a, T>(
    table: &Table<'_, T>,
    items: &'a [T],
    options: RowOptions,
    out: &mut dyn Write,
) -> io::Result<Selection<'a, T>> {
    let measures = table.measures;
    let with_resident = items
        .iter()
        .any(|item| measures(item).resident_peak_bytes.is_some());
    let selection = rows::select(items, options, measures);
    let (one, many) = table.noun;
    writeln!(out)?;
    writeln!(out, "#### {}", capitalized(&selection.title(many)))?;
    let mut headers = vec!["PID", "ALLOCS", "ALLOCATED", "PEAK HEAP", "LEAKED"];
    if with_resident {
        headers.push("PEAK RSS");
    }
    headers.extend(table.last);
    write_header(&headers, out)?;
    for &item in &selection.shown {
        let m = measures(item);
        let leaked_mark = if m.running { "\\*" } else { "" };
        let mut cells = vec![
            (table.pids)(item),
            m.heap.allocs.to_string(),
            format_bytes(m.heap.bytes_allocated),
            format_bytes(m.heap.peak_live_bytes),
            format!("{}{leaked_mark}", format_bytes(m.leaked_bytes)),
        ];
        if with_resident {
            cells.push(resident_cell(m.resident_peak_bytes));
        }
        cells.extend((table.tail)(item));
        write_row(&cells, out)?;
    }
    if let Some(rest) = &selection.rest {
        let mut cells = rest_cells(rest);
        if with_resident {
            cells.push(resident_cell(rest.largest_resident_bytes));
        }
        cells.push(String::new());
        cells.push(rest_label(rest, one, many));
        write_row(&cells, out)?;
    }
    Ok(selection)
}

/// The top processes (all of them when they fit), and the rest summed in one row.
fn write_processes(report: &Report, options: RowOptions, out: &mut dyn Write) -> io::Result<()> {
    if report.processes.is_empty() {
        return Ok(());
    }
    let names = ProcessNames::new(&report.processes);
    let table = Table {
        noun: ("process", "processes"),
        last: ["EXIT", "COMMAND"],
        measures: rows::process_measures,
        pids: |p: &ProcessMetrics| p.pid.to_string(),
        tail: &|p: &ProcessMetrics| {
            let name = super::screen::shorten_to(&names.name(p), COMMAND_CHARS);
            [exit_text(p), escape(&name)]
        },
    };
    let selection = write_table(&table, &report.processes, options, out)?;
    if selection.running() {
        writeln!(out)?;
        writeln!(
            out,
            "\\* still running when the recording ended: LEAKED is its live heap at the end"
        )?;
    }
    write_rest_note(&selection, out)
}

/// The benchmarks the harness named, or a line saying there are none.
fn write_benchmarks(report: &Report, options: RowOptions, out: &mut dyn Write) -> io::Result<()> {
    if report.benchmarks.is_empty() {
        writeln!(out)?;
        return writeln!(
            out,
            "No benchmarks: the harness named none (see docs/control-protocol.md)."
        );
    }
    let table = Table {
        noun: ("benchmark", "benchmarks"),
        last: ["MEASURED", "BENCHMARK"],
        measures: rows::benchmark_measures,
        pids: |b: &BenchmarkMetrics| {
            let pids: Vec<String> = b.pids.iter().map(u32::to_string).collect();
            pids.join(", ")
        },
        tail: &|b: &BenchmarkMetrics| [format_duration_ns(b.measured_ns), escape(&b.uri)],
    };
    let selection = write_table(&table, &report.benchmarks, options, out)?;
    writeln!(out)?;
    let mut footer = super::words::BENCH_FOOTER.to_string();
    footer[..1].make_ascii_uppercase();
    writeln!(out, "{footer}.")?;
    write_rest_note(&selection, out)
}

/// The cells a summed row shares in both tables: "…", allocations, bytes, largest peak, leaked.
fn rest_cells(rest: &Rest) -> Vec<String> {
    let mark = if rest.running { "\\*" } else { "" };
    vec![
        "…".to_string(),
        rest.allocs.to_string(),
        format_bytes(rest.bytes_allocated),
        format_bytes(rest.largest_peak_bytes),
        format!("{}{mark}", format_bytes(rest.leaked_bytes)),
    ]
}

/// Under a cut table, what its summed row holds.
fn write_rest_note<T>(selection: &Selection<T>, out: &mut dyn Write) -> io::Result<()> {
    if selection.rest.is_none() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(
        out,
        "The last row sums the rest (PEAK columns: the largest of them); `--all` or `--top N` \
         lists more."
    )
}

/// A PEAK RSS cell.
fn resident_cell(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| "-".to_string(), format_bytes)
}

/// The top allocation sites of the scope called `title` (already escaped), then its resident
/// memory by site when the recording has the stacks of its faults (never a benchmark's).
fn write_sites(title: &str, stacks: &StackReport, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out)?;
    if !stacks.recorded {
        return writeln!(out, "{}", escape(NO_STACKS));
    }
    let shown = sites_shown(stacks);
    writeln!(
        out,
        "#### Allocation sites by {}: {shown} ({title})",
        order_label(&stacks.order)
    )?;
    if walker_never_walked(stacks) {
        writeln!(out)?;
        // Our own words, whose backticks are meant as code.
        writeln!(out, "Stack walks: {NO_WALKER}.")?;
    } else if let Some(w) = &stacks.walks {
        if w.truncated + w.unknown + w.unsupported > 0 {
            writeln!(out)?;
            writeln!(
                out,
                "Of {} stack walks, {} were truncated, {} unknown and {} unsupported: their \
                 sites end early.",
                w.walks, w.truncated, w.unknown, w.unsupported
            )?;
        }
    }
    write_estimates(stacks.sampling.as_ref(), out)?;
    if !stacks.sites.is_empty() {
        write_header(
            &[
                "#",
                "AT PEAK",
                "ALLOCATED",
                "ALLOCS",
                "LEAKED",
                "TEMPORARY",
                "WHERE (innermost first)",
            ],
            out,
        )?;
        for (n, site) in stacks.sites.iter().enumerate() {
            write_row(&site_cells(n + 1, site), out)?;
        }
    }
    match &stacks.resident {
        Some(resident) => write_resident(title, resident, out),
        None => Ok(()),
    }
}

/// The scope's resident memory at its peak by the code that made it resident, as the text form
/// says it (`sites::write_resident`): the top stacks with their frames, then a row of what no
/// walked stack made resident, so the AT PEAK column adds up to the peak in the heading.
fn write_resident(title: &str, r: &ResidentSites, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "#### {}",
        capitalized(&resident_sites_heading(title, r))
    )?;
    writeln!(out)?;
    writeln!(out, "{}.", escape(&capitalized(&resident_sites_note(r))))?;
    write_header(
        &[
            "#",
            "AT PEAK",
            "OF WHICH",
            "MADE RESIDENT",
            "WHERE (innermost first)",
        ],
        out,
    )?;
    let row = |n: String, s: &ResidentSite, place: String| {
        vec![
            n,
            format_bytes(s.resident.total_bytes),
            members(&s.resident),
            format_bytes(s.faulted.total_bytes),
            place,
        ]
    };
    for (n, site) in r.sites.iter().enumerate() {
        let place = frames_cell(&site.frames);
        write_row(&row((n + 1).to_string(), site, place), out)?;
    }
    write_row(
        &row("-".to_string(), &r.unattributed, escape(UNATTRIBUTED)),
        out,
    )?;
    match inherited_note(r) {
        Some(note) => writeln!(out, "\n{}.", escape(&capitalized(note))),
        None => Ok(()),
    }
}

/// The top allocating functions of the scope called `title` (already escaped), the text
/// form's cells (`functions::cells`).
fn write_functions(title: &str, f: &FunctionReport, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out)?;
    if !f.recorded {
        return writeln!(out, "{}", escape(NO_FUNCTIONS));
    }
    let measure = functions::measure_of(f);
    writeln!(
        out,
        "#### Allocating functions by {}: {} ({title}: {} in all)",
        order_label(&f.order),
        functions_shown(f),
        value_text(measure.unit(), Some(f.total.value(measure)))
    )?;
    write_estimates(f.sampling.as_ref(), out)?;
    if f.functions.is_empty() {
        return Ok(());
    }
    write_header(&functions::HEADERS, out)?;
    for (n, function) in f.functions.iter().enumerate() {
        let mut cells = functions::cells(n + 1, function, measure, &f.total);
        if let Some(name) = cells.last_mut() {
            *name = escape(name);
        }
        write_row(&cells, out)?;
    }
    writeln!(out)?;
    writeln!(out, "{}", escape(functions::FOOTER))
}

/// That the values under it are estimates from sampled stacks, when they are: a paragraph
/// of `words::estimates_note`.
fn write_estimates(sampling: Option<&StackSampling>, out: &mut dyn Write) -> io::Result<()> {
    match sampling {
        Some(s) => writeln!(out, "\n{}.", escape(&capitalized(&estimates_note(s)))),
        None => Ok(()),
    }
}

/// The cells of one site's row.
fn site_cells(n: usize, s: &SiteMetrics) -> Vec<String> {
    vec![
        n.to_string(),
        format_bytes(s.peak_live_bytes),
        format_bytes(s.allocated_bytes),
        s.allocations.to_string(),
        format_bytes(s.leaked_bytes),
        s.temporary.to_string(),
        frames_cell(&s.frames),
    ]
}

/// A site's WHERE cell, escaped: its first [`SITE_FRAMES`] frames joined by "←", the standard
/// library's runs folded, "…" when there are more.
fn frames_cell(site_frames: &[SiteFrame]) -> String {
    let (lines, more) = frames::for_people(site_frames, SITE_FRAMES);
    let mut cell: Vec<String> = lines
        .into_iter()
        .map(|line| match line {
            frames::Line::Frame(f) => escape(&short_frame(f)),
            frames::Line::Library(n) => frames::library_text(n),
        })
        .collect();
    if more > 0 {
        cell.push("…".to_string());
    }
    if cell.is_empty() {
        cell.push("no call stack recorded".to_string());
    }
    cell.join(" ← ")
}

/// A frame in a few words: "function (file.c:23)", the file without its directory (a
/// comment has no room for build paths; the JSON has them), else as the text form writes it.
fn short_frame(f: &SiteFrame) -> String {
    if f.is_mark() || f.function.is_empty() || f.file.is_empty() {
        return frame_text(f);
    }
    let file = f.file.rsplit('/').next().unwrap_or(&f.file);
    match f.line {
        0 => format!("{} ({file})", f.function),
        line => format!("{} ({file}:{line})", f.function),
    }
}

/// `text` from the recording as literal markdown: control characters replaced (as the text
/// form does) and every character that could start inline markup (emphasis, code, links, HTML,
/// strike-through, math, entities) or end a table cell escaped with a backslash, which
/// GitHub's markdown honours before any ASCII punctuation. Line-start markup (`#`, `-`, `>`)
/// needs nothing: what is escaped here never starts a line.
pub fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in clean(text).chars() {
        if matches!(
            c,
            '\\' | '|' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '~' | '&' | '$'
        ) {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Header, ReadEnd};
    use crate::testkit::{analyze, at, exit, fork, free, lost, malloc, START};

    fn header(argv: &[&str]) -> Header {
        Header {
            argv: argv.iter().map(|a| a.to_string()).collect(),
            root_pid: 10,
            start_monotonic_ns: START,
            ..Header::default()
        }
    }

    /// Root 10 allocates 100 B and forks 11, which allocates 3000 B at 3 ms and exits with it.
    fn sample(argv: &[&str]) -> Report {
        let events = vec![
            at(1_000, 10, 10, malloc(0x10, 100)),
            at(2_000, 10, 10, fork(11)),
            at(3_000_000, 11, 11, malloc(0x20, 3000)),
            at(4_000_000, 11, 11, exit(0)),
            at(5_000_000, 10, 10, free(0x10)),
            at(6_000_000, 10, 10, exit(0)),
        ];
        analyze(&header(argv), events, None)
    }

    fn render(report: &Report, options: RowOptions) -> String {
        let mut out = Vec::new();
        write_markdown(report, Rows::Processes, options, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn totals_with_their_times() {
        let md = render(&sample(&["./app"]), RowOptions::default());
        assert!(md.starts_with("### memtrack: ./app\n"), "{md}");
        assert!(md.contains("\n| peak heap | 3.0 KiB at 3.0 ms |\n"), "{md}");
        assert!(md.contains("\n| allocations | 2 (3.0 KiB) |\n"), "{md}");
        assert!(md.contains("\n| leaked | 1 block, 2.9 KiB |\n"), "{md}");
        assert!(md.contains("\n| lost events | none |\n"), "{md}");
        assert!(!md.contains("WARNING"), "{md}");
    }

    #[test]
    fn processes_are_a_table() {
        let md = render(&sample(&["./app"]), RowOptions::default());
        assert!(md.contains("\n#### Processes\n"), "{md}");
        assert!(
            md.contains(
                "\n| PID | ALLOCS | ALLOCATED | PEAK HEAP | LEAKED | EXIT | COMMAND |\n\
                 |--:|--:|--:|--:|--:|--:|:--|\n\
                 | 10 | 1 | 100 B | 100 B | 0 B | 0 | app |\n\
                 | 11 | 1 | 2.9 KiB | 2.9 KiB | 2.9 KiB | 0 | app |\n"
            ),
            "{md}"
        );
    }

    #[test]
    fn commands_are_escaped() {
        let md = render(
            &sample(&["sh", "-c", "a|b `x` *y* <z>"]),
            RowOptions::default(),
        );
        let escaped = "sh -c a\\|b \\`x\\` \\*y\\* \\<z\\>";
        assert!(md.contains(&format!("### memtrack: {escaped}\n")), "{md}");
        assert!(md.contains(&format!("| {escaped} |\n")), "{md}");
        // Every row of the table still has its 7 cells (8 unescaped bars).
        for line in md.lines().filter(|l| l.starts_with("| 1")) {
            let bars = line.matches('|').count() - line.matches("\\|").count();
            assert_eq!(bars, 8, "{line}");
        }
    }

    #[test]
    fn sampled_sites_and_functions_say_their_values_are_estimates() {
        use crate::analyze::functions::FunctionOptions;
        use crate::analyze::stacks::SiteOptions;
        use crate::testkit::{stack_sampling, two_sites_report};
        let mut report = two_sites_report(SiteOptions {
            functions: Some(FunctionOptions::default()),
            ..SiteOptions::default()
        });
        let exact = render(&report, RowOptions::default());
        assert!(!exact.contains("stimate"), "{exact}");
        report.stacks.as_mut().unwrap().sampling = Some(stack_sampling());
        report.functions.as_mut().unwrap().sampling = Some(stack_sampling());
        let sampled = render(&report, RowOptions::default());
        let note = &format!("\nE{}.\n", &crate::testkit::SAMPLED_NOTE[1..]);
        // Under each heading, and nothing else changed.
        for heading in ["#### Allocation sites", "#### Allocating functions"] {
            let at = sampled.find(heading).expect(heading);
            let line_end = at + sampled[at..].find('\n').unwrap() + 1;
            assert!(sampled[line_end..].starts_with(note), "{sampled}");
        }
        assert_eq!(sampled.replace(note, ""), exact);
    }

    /// Process 1 allocates 4 KiB from make_a, then makes 3 anon pages resident with no stack
    /// walked and 2 anon and 1 file page from make_a's stack, and is still running at the end.
    fn resident_report() -> Report {
        use crate::analyze::accounting::analyze_sites;
        use crate::analyze::stacks::SiteOptions;
        use crate::format::{EventKind, RssMember};
        use crate::model::metrics::Scope;
        use crate::testkit::{
            header, malloc_from, module, rss, seq, stack_node, stack_prelude, symbol,
        };
        let fault = |member, pages, addr| EventKind::Fault {
            member,
            pages,
            addr,
            stack_id: 1,
        };
        let mut events = stack_prelude(vec![
            module(1, "/usr/lib/x86_64-linux-gnu/libc.so.6"),
            module(2, "/work/app"),
            stack_node(1, 0, 2, 0x1100),
            stack_node(2, 1, 1, 0x9a1b0),
            symbol(1, 0x9a1b0, &[("malloc", "", 0)]),
            symbol(
                2,
                0x1100,
                &[("make_a", "/src/app_a.c", 7), ("main", "/src/app.c", 20)],
            ),
        ]);
        events.extend(seq(vec![
            malloc_from(2, 0x10, 4096),
            rss(RssMember::Anon, 3, 3, true),
            rss(RssMember::Anon, 2, 5, true),
            fault(RssMember::Anon, 2, 0x7000),
            rss(RssMember::File, 1, 1, true),
            fault(RssMember::File, 1, 0x9000),
        ]));
        analyze_sites(&header(), events, None, &Scope::Run, SiteOptions::default())
    }

    #[test]
    fn resident_sites_follow_the_allocation_sites() {
        let md = render(&resident_report(), RowOptions::default());
        let at = md
            .find("\n#### Resident memory by site")
            .expect("a resident section");
        assert!(
            md[..at].contains("\n#### Allocation sites by live bytes at the peak: 1 site "),
            "{md}"
        );
        let expected = "
#### Resident memory by site: 1 of 1 (whole run (1 process): peak resident 24.0 KiB at 4 ns)

The code that made the pages resident; 2 of 3 increases walked.

| # | AT PEAK | OF WHICH | MADE RESIDENT | WHERE (innermost first) |
|--:|--:|--:|--:|:--|
| 1 | 12.0 KiB | anon 8.0 KiB, file 4.0 KiB | 12.0 KiB | make\\_a (app\\_a.c:7) ← main (app.c:20) |
| - | 12.0 KiB | anon 12.0 KiB | 12.0 KiB | \\[unattributed: made resident with no stack walked\\] |
";
        assert_eq!(&md[at..], expected);
    }

    #[test]
    fn sampled_resident_sites_say_what_their_estimates_stand_on() {
        let mut report = resident_report();
        let resident = report.stacks.as_mut().unwrap().resident.as_mut().unwrap();
        resident.sampling = Some(crate::model::sites::FaultSampling {
            mean_bytes: 256 << 10,
            walked: 2,
            increases: 3,
        });
        let md = render(&report, RowOptions::default());
        let note = "\nThe code that made the pages resident; estimates: values estimated from 2 \
                    walked increases of resident memory of 3, 1 per 256.0 KiB made resident; \
                    record with --stacks for exact values.\n";
        assert!(md.contains(note), "{md}");
        assert!(!md.contains("increases walked"), "{md}");
    }

    #[test]
    fn escape_leaves_plain_text() {
        assert_eq!(escape("./bench --fast 1.5"), "./bench --fast 1.5");
        assert_eq!(escape("a\nb"), "a?b");
        assert_eq!(escape("x_y [l](u) &amp;"), "x\\_y \\[l\\](u) \\&amp;");
    }

    #[test]
    fn lost_events_are_a_warning_with_their_effect() {
        let events = vec![at(1, 10, 10, lost("ring_full_alloc", 7))];
        let md = render(
            &analyze(&header(&["./a"]), events, None),
            RowOptions::default(),
        );
        assert!(md.contains("\n> [!WARNING]\n"), "{md}");
        assert!(
            md.contains("> - 7 events were lost while recording (7 ring\\_full\\_alloc: "),
            "{md}"
        );
        assert!(md.contains("too HIGH"), "{md}");
        assert!(
            md.contains("| lost events | 7 (7 ring\\_full\\_alloc) |"),
            "{md}"
        );
    }

    #[test]
    fn damage_is_a_warning_and_a_row() {
        let end = ReadEnd::Damaged {
            offset: 4242,
            reason: "torn chunk".into(),
        };
        let report = analyze(
            &header(&["./a"]),
            vec![at(1, 10, 10, malloc(1, 1))],
            Some(&end),
        );
        let md = render(&report, RowOptions::default());
        assert!(md.contains("damaged at byte offset 4242"), "{md}");
        assert!(
            md.contains("| damaged | the file is damaged at byte offset 4242 (torn chunk) |"),
            "{md}"
        );
    }

    #[test]
    fn a_file_cut_short_is_called_so_with_its_offset_once() {
        let end = ReadEnd::Damaged {
            offset: 117,
            reason: "the file ends 321 bytes into a 749-byte payload (the recording was cut short)"
                .into(),
        };
        let report = analyze(
            &header(&["./a"]),
            vec![at(1, 10, 10, malloc(1, 1))],
            Some(&end),
        );
        let md = render(&report, RowOptions::default());
        assert!(
            md.contains(
                "| cut short | the file is cut short (truncated) at byte offset 117: it ends 321 \
                 bytes into a 749-byte payload |"
            ),
            "{md}"
        );
        assert!(!md.contains("damaged"), "{md}");
    }

    /// Root 1 forks `n` children; child i allocates i + 1 bytes, leaks them and exits.
    fn many(n: u32) -> Report {
        let mut events = Vec::new();
        for i in 0..n {
            let pid = 2 + i;
            let t = u64::from(i) * 3 + 1;
            events.push(at(t, 1, 1, fork(pid)));
            events.push(at(
                t + 1,
                pid,
                pid,
                malloc(0x1000 + u64::from(i), u64::from(i) + 1),
            ));
            events.push(at(t + 2, pid, pid, exit(0)));
        }
        let header = Header {
            root_pid: 1,
            ..Header::default()
        };
        analyze(&header, events, None)
    }

    #[test]
    fn a_thousand_processes_are_twenty_rows_and_one_sum() {
        let report = many(999);
        let md = render(&report, RowOptions::default());
        assert!(
            md.contains("\n#### Processes: top 20 of 1000 by peak heap\n"),
            "{md}"
        );
        let rows: Vec<&str> = md
            .lines()
            .filter(|l| l.starts_with("| ") && !l.starts_with("| PID"))
            .filter(|l| !l.contains(" | |") || l.starts_with("| …"))
            .filter(|l| l.split(" | ").count() == 7)
            .collect();
        assert_eq!(rows.len(), 21, "{md}");
        let allocs = |l: &str| l.split(" | ").nth(1).unwrap().parse::<u64>().unwrap();
        let shown: u64 = rows[..20].iter().map(|l| allocs(l)).sum();
        assert_eq!(allocs(rows[20]), report.totals.heap.allocs - shown);
        assert!(rows[20].ends_with("| 980 more processes |"), "{}", rows[20]);
        // The biggest first: child 998 (pid 1000) leaked 999 bytes.
        assert!(rows[0].starts_with("| 1000 | 1 | 999 B |"), "{}", rows[0]);
        let all = render(&report, RowOptions::ALL);
        assert!(!all.contains("more processes"));
        assert!(all.contains("\n#### Processes\n"));
    }

    #[test]
    fn sorted_by_what_was_asked() {
        let options = RowOptions {
            top: None,
            sort: Some(rows::SortKey::Leaked),
        };
        let md = render(&sample(&["./a"]), options);
        assert!(md.contains("\n#### Processes by leaked\n"), "{md}");
        let first = md.lines().find(|l| l.starts_with("| 1")).unwrap();
        assert!(first.starts_with("| 11 |"), "{md}");
    }
}
