//! `report --format html`: one self-contained page (no network, no external script, font or
//! image) with the heap and resident memory over time, the process tree with the text report's
//! numbers, and flame graphs when the recording has call stacks. A renderer: it reads the
//! finished [`Report`] (its `timeline`, processes and profile) and writes the page.
//!
//! The page's template, styles and script are separate files beside this one, embedded at
//! build time. The charts are drawn by the script from the timeline embedded as JSON (the same
//! document `--format timeline-json` prints, with `<` escaped so no string can end the script
//! element); everything else is written here, every string from the recording escaped.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::Serialize;

use crate::units::{format_bytes, format_duration_ns};

use super::flamegraph;
use super::words;
use crate::model::metrics::{Blocks, ProcessMetrics, Report, Scope};
use crate::model::profile::{View, Weight};
use crate::model::sites::StackSampling;
use crate::model::timeline::{Timeline, PROCESS_BUCKETS, RUN_BUCKETS, TOP_PROCESSES};

const TEMPLATE: &str = include_str!("html/page.html");
const STYLE: &str = include_str!("html/page.css");
const SCRIPT: &str = include_str!("html/page.js");

/// Widest indent of the process column, as in the text report.
const MAX_INDENT: u32 = 12;

/// Text for HTML element content or a quoted attribute: `&`, `<`, `>`, `"` and `'` escaped,
/// control characters (which a command line may hold) shown as `?`.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

/// JSON that is safe inside a `<script>` element: no `<` (so no `</script>` or `<!--`), and
/// no U+2028 / U+2029, which old script parsers took for line ends.
fn script_json(value: &impl Serialize) -> io::Result<String> {
    let json = serde_json::to_string(value).map_err(io::Error::other)?;
    Ok(json
        .replace('<', "\\u003c")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029"))
}

/// What the script reads.
#[derive(Serialize)]
struct PageData<'a> {
    timeline: &'a Timeline,
    /// The name of each process series' pid as the tables name it (`words::ProcessNames`):
    /// the legend shows it, with the whole command as its title.
    names: BTreeMap<u32, String>,
}

/// The names of the processes `timeline` draws, by pid (a reused pid: its first process).
fn series_names(report: &Report, timeline: &Timeline) -> BTreeMap<u32, String> {
    let names = words::ProcessNames::new(&report.processes);
    timeline
        .series
        .iter()
        .filter_map(|s| s.pid)
        .filter_map(|pid| Some((pid, names.name_of_pid(pid)?)))
        .collect()
}

/// Writes the page for `report`, which must carry its timeline.
pub fn write_html(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let timeline = report
        .timeline
        .as_ref()
        .ok_or_else(|| io::Error::other("the report was read without its timeline"))?;
    let command = report.run.command.join(" ");
    let title = format!("memtrack: {}", shorten(&command, 80));
    let data = script_json(&PageData {
        timeline,
        names: series_names(report, timeline),
    })?;
    let decimation = format!(
        "Each curve is decimated into buckets ({} wide for the run, {} for processes) that keep \
         their largest and smallest value, so a peak is never drawn lower than it was. Drawn: \
         the {TOP_PROCESSES} processes with the highest heap peak and the {TOP_PROCESSES} with \
         the highest resident peak; \"others\" sums the rest (its maxima are an upper bound). \
         Up to {RUN_BUCKETS} buckets for the run, {PROCESS_BUCKETS} per process.",
        format_duration_ns(timeline.bucket_ns),
        format_duration_ns(timeline.process_bucket_ns),
    );
    let mut rest = TEMPLATE;
    while let Some(open) = rest.find("{{") {
        let Some(close) = rest[open..].find("}}") else {
            break;
        };
        out.write_all(&rest.as_bytes()[..open])?;
        match &rest[open + 2..open + close] {
            "title" => out.write_all(escape(&title).as_bytes())?,
            "style" => out.write_all(STYLE.as_bytes())?,
            "script" => out.write_all(SCRIPT.as_bytes())?,
            "command" => out.write_all(escape(&command).as_bytes())?,
            "summary" => write_summary(report, out)?,
            "decimation" => out.write_all(escape(&decimation).as_bytes())?,
            "tree" => write_tree(report, out)?,
            "leaks" => write_leaks(report, out)?,
            "flames" => write_flames(report, out)?,
            "data" => out.write_all(data.as_bytes())?,
            other => {
                return Err(io::Error::other(format!(
                    "page template names an unknown part '{other}'"
                )))
            }
        }
        rest = &rest[open + close + 2..];
    }
    out.write_all(rest.as_bytes())
}

/// `text` cut to `width` characters, ending with "…" when cut.
fn shorten(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut short: String = text.chars().take(width - 1).collect();
    short.push('…');
    short
}

/// "3.2 MiB at 1.234 s", or "0 B" when nothing was ever live (the text report's form).
fn peak(bytes: u64, at_ns: Option<u64>) -> String {
    match at_ns {
        Some(at) => format!("{} at {}", format_bytes(bytes), format_duration_ns(at)),
        None => format_bytes(bytes),
    }
}

/// The run's headline numbers, as the text report's summary has them.
fn write_summary(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let h = &report.totals.heap;
    let mut items = Vec::new();
    let scope = match &report.scope {
        Scope::Run => None,
        Scope::Process { pid } => Some(format!("process {pid}")),
        Scope::Tree { pid } => Some(format!("tree of {pid}")),
        Scope::Benchmark { uri } => Some(format!("benchmark {uri} (curves: the run)")),
    };
    if let Some(scope) = scope {
        items.push(("scope", scope, "scope"));
    }
    items.extend([
        (
            "duration",
            format_duration_ns(report.run.duration_ns),
            "duration",
        ),
        (
            "processes",
            report.totals.processes.to_string(),
            "processes",
        ),
        (
            "peak heap",
            peak(h.peak_live_bytes, h.peak_live_at_ns),
            "peak-heap",
        ),
        ("allocations", h.allocs.to_string(), "allocs"),
        ("allocated", format_bytes(h.bytes_allocated), "allocated"),
        (
            "leaked",
            format!(
                "{} in {} blocks",
                format_bytes(h.leaked.bytes),
                h.leaked.blocks
            ),
            "leaked",
        ),
    ]);
    if let Some(l) = &h.leaks {
        items.push(("definitely lost", in_blocks(l.definitely_lost), "lost"));
        items.push(("still reachable", in_blocks(l.still_reachable), "reachable"));
        if l.suppressed.blocks > 0 {
            items.push(("suppressed", in_blocks(l.suppressed), "suppressed"));
        }
        if l.unscanned_processes > 0 {
            items.push((
                "not scanned",
                format!(
                    "{} of {} not scanned at exit (killed by a signal, or no C library \
                     `_exit` to hold it at)",
                    in_blocks(l.not_scanned),
                    words::processes(l.unscanned_processes)
                ),
                "not-scanned",
            ));
        }
    }
    if let Some(r) = &report.totals.resident {
        items.push((
            "peak resident",
            peak(r.peak_bytes, r.peak_at_ns),
            "peak-resident",
        ));
    }
    if let Some(code) = report.run.exit_code {
        items.push(("exit code", code.to_string(), "exit-code"));
    }
    writeln!(out, "<ul class=\"summary\">")?;
    for (name, value, id) in items {
        writeln!(
            out,
            "<li id=\"summary-{id}\"><b>{name}</b> {}</li>",
            escape(&value)
        )?;
    }
    writeln!(out, "</ul>")?;
    if !report.complete {
        writeln!(
            out,
            "<p class=\"incomplete\">INCOMPLETE: {}</p>",
            escape(&report.incomplete_reasons.join(" "))
        )?;
    }
    Ok(())
}

/// "4.9 KiB in 5 blocks".
fn in_blocks(b: Blocks) -> String {
    format!(
        "{} in {}",
        format_bytes(b.bytes),
        words::counted(b.blocks, "block", "blocks")
    )
}

/// The leak scan's cells of a process row: its own definitely lost and still reachable, and
/// its tree's definitely lost; "not scanned" where its exit was not scanned, "-" while it ran.
fn leak_cells(p: &ProcessMetrics) -> [String; 3] {
    let own = match &p.own.heap.leaks {
        Some(l) if l.unscanned_processes > 0 => ["not scanned".to_string(), "not scanned".into()],
        Some(l) => [in_blocks(l.definitely_lost), in_blocks(l.still_reachable)],
        None => ["-".to_string(), "-".to_string()],
    };
    let tree = match &p.tree.heap.leaks {
        Some(l) if l.unscanned_processes > 0 => format!(
            "{} + {} not scanned",
            in_blocks(l.definitely_lost),
            words::processes(l.unscanned_processes)
        ),
        Some(l) => in_blocks(l.definitely_lost),
        None => "-".to_string(),
    };
    let [lost, reachable] = own;
    [lost, reachable, tree]
}

/// The process tree as a table with the text report's columns and units.
fn write_tree(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    if report.processes.is_empty() {
        return writeln!(out, "<p>No processes in the recording.</p>");
    }
    let with_resident = report.processes.iter().any(|p| p.own.resident.is_some());
    let with_leaks = report.totals.heap.leaks.is_some();
    write!(
        out,
        "<table class=\"tree\" id=\"process-tree\"><thead><tr><th class=\"cmd\">PID</th>\
         <th>ALLOCS</th><th>FREES</th><th>ALLOCATED</th><th>PEAK HEAP</th><th>AT</th>\
         <th>TREE PEAK</th><th>LEAKED</th><th>FAILED</th>"
    )?;
    if with_resident {
        write!(out, "<th>PEAK RSS</th>")?;
    }
    write!(out, "<th>EXIT</th>")?;
    if with_leaks {
        write!(
            out,
            "<th title=\"definitely lost at its exit: nothing pointed to them\">LOST</th>\
             <th title=\"still reachable at its exit\">REACHABLE</th>\
             <th title=\"definitely lost by the process and its descendants\">TREE LOST</th>"
        )?;
    }
    writeln!(out, "<th class=\"cmd\">COMMAND</th></tr></thead><tbody>")?;
    let names = words::ProcessNames::new(&report.processes);
    for p in &report.processes {
        write_process_row(p, &names, with_resident, with_leaks, out)?;
    }
    writeln!(out, "</tbody></table>")?;
    if with_leaks {
        writeln!(
            out,
            "<p class=\"note\">LOST and REACHABLE: the leak scan at each normal exit split \
             LEAKED into blocks nothing pointed to (definitely lost) and blocks the program \
             still pointed to; \"not scanned\": the process ended by a signal, or had no C \
             library <code>_exit</code> to hold it at, and its LEAKED is neither.</p>"
        )?;
    }
    if report.processes.iter().any(|p| p.exit.is_none()) {
        writeln!(
            out,
            "<p class=\"note\">* still running when the recording ended: LEAKED shows its live \
             heap at the end</p>"
        )?;
    }
    if let Some(rmap) = &report.rmap {
        write_rmap(rmap, out)?;
    }
    Ok(())
}

/// The rmap accounting (recordings with rmap hooks): per process and kind the signed sums in
/// pages, rmap's resident figure next to rss_stat's, and what held the process's own pages at
/// its rmap peak.
fn write_rmap(rmap: &crate::model::rmap::RmapReport, out: &mut dyn Write) -> io::Result<()> {
    let opt = |v: Option<i64>| v.map_or_else(|| "?".to_string(), |v| v.to_string());
    writeln!(
        out,
        "<h3>Resident memory by rmap</h3><p class=\"note\">Pages, signed and never clamped: \
         removes of pages a process inherited (at fork, or set up by exec) make its net \
         negative. rmap = inherited + net, against rss_stat.</p>\n\
         <table class=\"tree\" id=\"rmap\"><thead><tr><th class=\"cmd\">PID</th><th>KIND</th>\
         <th>ADDS</th><th>REMOVES</th><th>NET</th><th>OWN</th><th>INHERITED</th>\
         <th>INHERITED, UNMAPPED</th><th>RMAP</th><th>RSS_STAT</th><th>DIFF</th>\
         <th class=\"cmd\">AT ITS RMAP PEAK</th></tr></thead><tbody>"
    )?;
    for p in &rmap.processes {
        let held: Vec<String> = p
            .by_mapping
            .iter()
            .map(|r| format!("{} {}", r.region, format_bytes(r.bytes)))
            .collect();
        let kinds: Vec<_> = p
            .kinds
            .iter()
            .filter(|k| k.adds_pages + k.removes_pages > 0)
            .collect();
        for (n, k) in kinds.iter().enumerate() {
            let (pid, peak) = if n == 0 {
                (p.pid.to_string(), held.join(", "))
            } else {
                (String::new(), String::new())
            };
            writeln!(
                out,
                "<tr><td class=\"cmd\" title=\"{}\">{pid}</td><td>{}</td><td>{}</td><td>{}</td>\
                 <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
                 <td class=\"cmd\">{}</td></tr>",
                escape(&p.command),
                escape(&k.kind),
                k.adds_pages,
                k.removes_pages,
                k.net_pages,
                k.own_resident_pages,
                opt(k.inherited_pages),
                k.inherited_unmapped_pages,
                opt(k.rmap_resident_pages),
                opt(k.rss_stat_pages),
                opt(k.difference_pages),
                escape(&peak),
            )?;
        }
    }
    writeln!(out, "</tbody></table>")
}

/// One process's row: the cells of the text report's process table (`words::process_row`),
/// with the pid indented by its depth, and the process's name with its whole command as the
/// cell's title.
fn write_process_row(
    p: &ProcessMetrics,
    names: &words::ProcessNames,
    with_resident: bool,
    with_leaks: bool,
    out: &mut dyn Write,
) -> io::Result<()> {
    let indent = "&nbsp;&nbsp;".repeat(p.depth.min(MAX_INDENT) as usize);
    let command = if !p.argv.is_empty() {
        p.argv.join(" ")
    } else {
        p.executable.clone().unwrap_or_else(|| "?".to_string())
    };
    write!(
        out,
        "<tr data-pid=\"{}\" data-peak-heap=\"{}\"><td class=\"pid\">{indent}{}</td>",
        p.pid, p.own.heap.peak_live_bytes, p.pid,
    )?;
    // Between the text row's pid and its command (shortened to the terminal's width).
    let cells = words::process_row(p, names, with_resident, None);
    for cell in &cells[1..cells.len() - 1] {
        write!(out, "<td>{}</td>", escape(cell))?;
    }
    if with_leaks {
        let [lost, reachable, tree] = leak_cells(p);
        write!(
            out,
            "<td class=\"lost\">{}</td><td class=\"reachable\">{}</td>\
             <td class=\"tree-lost\">{}</td>",
            escape(&lost),
            escape(&reachable),
            escape(&tree)
        )?;
    }
    writeln!(
        out,
        "<td class=\"cmd\" title=\"{}\">{}</td></tr>",
        escape(&command),
        escape(&names.name(p))
    )
}

/// The leaks section, when the recording has leak scans: with call stacks, the sites of the
/// definitely lost blocks, the most lost first (the report's sites are sorted by lost bytes
/// for this page), each named by its frames; without, how to get them. Then what
/// `--suppress` did.
fn write_leaks(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let Some(l) = &report.totals.heap.leaks else {
        return Ok(());
    };
    writeln!(
        out,
        "<section id=\"leaks\"><h2>Definitely lost, by allocation site</h2>"
    )?;
    match report.stacks.as_ref().filter(|s| s.recorded) {
        _ if l.definitely_lost.blocks == 0 => writeln!(
            out,
            "<p id=\"no-lost\">Nothing definitely lost{}.</p>",
            if l.unscanned_processes > 0 {
                " in the processes scanned"
            } else {
                ""
            }
        )?,
        None => writeln!(
            out,
            "<p id=\"lost-no-stacks\">{} definitely lost; this recording has no call stacks \
             to say where they were allocated: record again without --no-stacks.</p>",
            escape(&in_blocks(l.definitely_lost))
        )?,
        Some(stacks) => {
            let lost: Vec<_> = stacks.sites.iter().filter(|s| s.lost_blocks > 0).collect();
            writeln!(
                out,
                "<table class=\"sites\" id=\"lost-sites\"><thead><tr><th>LOST</th>\
                 <th>BLOCKS</th><th>LEAKED</th><th class=\"cmd\">ALLOCATED BY</th></tr>\
                 </thead><tbody>"
            )?;
            for s in &lost {
                writeln!(
                    out,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"cmd\">{}</td></tr>",
                    format_bytes(s.lost_bytes),
                    s.lost_blocks,
                    format_bytes(s.leaked_bytes),
                    escape(&super::frames::site_name(&s.frames))
                )?;
            }
            writeln!(out, "</tbody></table>")?;
            write_estimates("lost-estimates", stacks.sampling.as_ref(), out)?;
            let shown: u64 = lost.iter().map(|s| s.lost_blocks).sum();
            if shown < l.definitely_lost.blocks {
                writeln!(
                    out,
                    "<p class=\"note\">{} more definitely lost at sites not listed (the top {} \
                     sites are).</p>",
                    words::counted(l.definitely_lost.blocks - shown, "block", "blocks"),
                    stacks.sites.len()
                )?;
            }
        }
    }
    if let Some(s) = &report.suppressions {
        writeln!(out, "<ul class=\"suppressions\" id=\"suppressions\">")?;
        for line in super::words::suppression_lines(s) {
            writeln!(out, "<li>{}</li>", escape(&line))?;
        }
        writeln!(out, "</ul>")?;
    }
    writeln!(out, "</section>")
}

/// The flame graphs section, when the report has call stacks: live bytes at the heap peak,
/// bytes allocated and bytes leaked, then, when the recording has the stacks of its faults,
/// resident memory at the resident peak (issue 35) with its own note when it is estimated
/// from sampled faults. Each of inferno's SVGs runs its own script (hover, search,
/// zoom) with fixed element ids, so each gets a document of its own: an iframe whose `srcdoc`
/// holds the SVG, still inside this one file.
fn write_flames(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let Some(profile) = report.profile.as_ref().filter(|p| p.recorded) else {
        return Ok(());
    };
    let command = report.run.command.join(" ");
    out.write_all(b"<section id=\"flames\"><h2>Flame graphs</h2>\n")?;
    write_estimates("flame-estimates", profile.sampling.as_ref(), out)?;
    let graphs = [
        (View::Peak, "live bytes at the heap peak"),
        (View::Allocated, "bytes allocated"),
        (View::Leaked, "bytes leaked"),
        (View::Resident, "resident memory at the resident peak"),
    ];
    for &(view, what) in profile.views_in(&graphs, |g| g.0) {
        let title = format!("memtrack: {what}: {command}");
        let mut svg = Vec::new();
        flamegraph::write_svg(profile, view, Weight::Bytes, &title, &mut svg)?;
        let svg = String::from_utf8_lossy(&svg);
        // The frame is as tall as the graph, so only the page scrolls.
        let height = svg_height(&svg).unwrap_or(FLAME_HEIGHT);
        writeln!(out, "<h3>{}</h3>", escape(what))?;
        // The heap graphs' note is the section's; the resident graph's values stand on the
        // sampled faults instead.
        if let Some(f) = profile.resident_sampling.filter(|_| view.is_resident()) {
            writeln!(
                out,
                "<p class=\"note\" id=\"resident-estimates\">{}.</p>",
                escape(&words::capitalized(&words::fault_estimates(&f)))
            )?;
        }
        writeln!(
            out,
            "<iframe class=\"flame\" title=\"{}\" style=\"height: {}px\" srcdoc=\"{}\"></iframe>",
            escape(what),
            height + 2,
            attribute(&flame_document(&svg))
        )?;
    }
    out.write_all(b"</section>\n")
}

/// That the values of the sites or flame graphs beside it are estimates from sampled stacks,
/// when they are: a note of `words::estimates_note`, its element id `id`.
fn write_estimates(
    id: &str,
    sampling: Option<&StackSampling>,
    out: &mut dyn Write,
) -> io::Result<()> {
    match sampling {
        Some(s) => writeln!(
            out,
            "<p class=\"note\" id=\"{id}\">{}.</p>",
            escape(&words::capitalized(&words::estimates_note(s)))
        ),
        None => Ok(()),
    }
}

/// The height of a frame whose SVG does not say its own.
const FLAME_HEIGHT: u32 = 420;

/// The page of one flame graph's iframe: inferno's SVG inline in a standards-mode HTML document
/// that gives it the frame's whole width. Parsed as HTML, inferno's XML declaration and SVG
/// doctype would put the frame in quirks mode, and its SVG, which drops its `width` to fit its
/// parent ("fluid drawing"), would fall back to 300 px; so both are cut and the SVG is styled
/// to 100%. A srcdoc frame's URL is `about:srcdoc`, where `history.replaceState` (which
/// inferno's search and zoom call to keep their state in the URL) throws a SecurityError: the
/// wrapper makes that call a no-op there, so search and zoom work and raise no exception.
///
/// inferno's `init` sizes the graph once, from the frame's width at load (its resize handler
/// only corrects it later). A frame that loads before the page has laid it out (a loaded
/// machine) has no width yet, and `init` would set the graph's width to -20 (a console error):
/// so the SVG's `onload` starts `init` only once the frame has a width, at load or at the first
/// resize that gives it one. Even then the root SVG's own width can still read 0 on a loaded
/// machine (one run in four of tests/views_html.rs's `--pid` page, 2026-12-06): the frames'
/// width is kept at 1 at least, and inferno's resize handler sets the right one once the frame
/// is laid out.
fn flame_document(svg: &str) -> String {
    let svg = svg.find("<svg").map_or(svg, |start| &svg[start..]);
    let svg = svg.replacen(INFERNO_ONLOAD, WIDE_ONLOAD, 1).replacen(
        INFERNO_FRAMES_WIDTH,
        KEPT_FRAMES_WIDTH,
        1,
    );
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><style>html, body {{ margin: 0; \
         }} svg {{ display: block; width: 100%; }}</style><script>(function () {{ var replace = \
         history.replaceState; history.replaceState = function () {{ try {{ \
         return replace.apply(history, arguments); }} catch (e) {{ /* about:srcdoc */ }} }}; \
         }})();\nfunction init_when_wide(evt) {{ var wide = function () {{ return \
         document.documentElement.clientWidth > 0; }}; if (wide()) return init(evt); \
         window.addEventListener('resize', function wait() {{ if (wide()) {{ \
         window.removeEventListener('resize', wait); init(evt); }} }}); }}</script></head><body>\n\
         {svg}</body></html>\n"
    )
}

/// The root element's `onload` in inferno's SVG, and the one that waits for a width.
const INFERNO_ONLOAD: &str = "onload=\"init(evt)\"";
const WIDE_ONLOAD: &str = "onload=\"init_when_wide(evt)\"";

/// inferno's script sizing the frames to the SVG's width less its padding, and the same kept
/// positive.
const INFERNO_FRAMES_WIDTH: &str =
    "frames.attributes.width.value = svg.width.baseVal.value - xpad * 2;";
const KEPT_FRAMES_WIDTH: &str =
    "frames.attributes.width.value = Math.max(1, svg.width.baseVal.value - xpad * 2);";

/// The `height` attribute of an SVG's root element, in pixels.
fn svg_height(svg: &str) -> Option<u32> {
    let start = svg.find("<svg")?;
    let tag = &svg[start..start + svg[start..].find('>')?];
    let value = &tag[tag.find(" height=\"")? + 9..];
    value[..value.find('"')?].parse().ok()
}

/// `text` inside a double-quoted attribute, unchanged otherwise (newlines stay: the SVG's
/// script needs them).
fn attribute(text: &str) -> String {
    text.replace('&', "&amp;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::accounting::Accounting;
    use crate::testkit::*;

    fn page(events: Vec<crate::format::Event>) -> String {
        let mut a = Accounting::new(&header()).with_timeline();
        for e in &events {
            a.apply(e);
        }
        let r = a.finish(None);
        let mut out = Vec::new();
        write_html(&r, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn escape_covers_markup_and_quotes() {
        assert_eq!(
            escape("a<b>&\"c\"'d'\n"),
            "a&lt;b&gt;&amp;&quot;c&quot;&#39;d&#39;?"
        );
    }

    #[test]
    fn script_json_cannot_close_the_script() {
        let j = script_json(&"</script><!--\u{2028}").unwrap();
        assert!(!j.contains('<'), "{j}");
        assert_eq!(
            serde_json::from_str::<String>(&j).unwrap(),
            "</script><!--\u{2028}"
        );
    }

    #[test]
    fn recording_strings_are_escaped_everywhere() {
        let html = page(vec![
            at(0, 1, 1, malloc(1, 10)),
            at(1, 1, 1, exec("/bin/</script><b>&x\"")),
            at(2, 1, 1, malloc(2, 20)),
        ]);
        assert!(!html.contains("<b>&x"), "{html}");
        assert!(!html.contains("</script><b>"), "{html}");
        assert!(html.contains("/bin/&lt;/script&gt;&lt;b&gt;&amp;x&quot; -x"));
        // The page is whole: every part of the template was filled.
        assert!(!html.contains("{{"), "{html}");
        assert!(html.trim_end().ends_with("</html>"));
    }

    #[test]
    fn page_is_self_contained() {
        let html = page(vec![at(0, 1, 1, malloc(1, 10))]);
        for external in ["src=", "href=", "@import", "url(", "http://", "https://"] {
            let found = html
                .match_indices(external)
                .map(|(i, _)| &html[i.saturating_sub(30)..(i + 40).min(html.len())])
                .find(|context| !context.contains("http://www.w3.org/2000/svg"));
            assert!(found.is_none(), "{external}: {found:?}");
        }
    }

    #[test]
    fn a_flame_frame_is_a_standards_mode_page_as_tall_as_its_svg() {
        let svg = "<?xml version=\"1.0\" standalone=\"no\"?><!DOCTYPE svg PUBLIC \"x\">\
                   <svg version=\"1.1\" width=\"1200\" height=\"182\" onload=\"init(evt)\">\
                   <script>frames.attributes.width.value = svg.width.baseVal.value - xpad * 2;\
                   </script><rect height=\"16\"/></svg>";
        assert_eq!(svg_height(svg), Some(182));
        assert_eq!(svg_height("<svg width=\"1\">"), None);
        assert_eq!(svg_height("no svg"), None);
        let doc = flame_document(svg);
        assert!(doc.starts_with("<!DOCTYPE html>"), "{doc}");
        assert!(
            !doc.contains("<?xml") && !doc.contains("DOCTYPE svg"),
            "{doc}"
        );
        assert!(doc.contains("width: 100%"), "{doc}");
        assert!(doc.contains("history.replaceState = function"), "{doc}");
        assert!(doc.contains("<svg version=\"1.1\""), "{doc}");
        // inferno starts only once the frame has a width, and never makes the frames' negative.
        assert!(
            doc.contains(WIDE_ONLOAD)
                && !doc.contains(INFERNO_ONLOAD)
                && doc.contains(KEPT_FRAMES_WIDTH)
                && !doc.contains(INFERNO_FRAMES_WIDTH),
            "{doc}"
        );
        assert!(doc.contains("function init_when_wide(evt)"), "{doc}");
    }

    #[test]
    fn sampled_sites_and_flame_graphs_say_their_values_are_estimates() {
        use crate::analyze::stacks::SiteOptions;
        let mut report = two_sites_report(SiteOptions {
            profile: true,
            ..SiteOptions::default()
        });
        // One block definitely lost, at the first site: the page lists it.
        lost_at_first_site(&mut report, 64);
        let sections = |r: &Report| {
            let mut out = Vec::new();
            write_leaks(r, &mut out).unwrap();
            write_flames(r, &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        let exact = sections(&report);
        assert!(exact.contains("id=\"lost-sites\"") && exact.contains("<iframe"));
        assert!(!exact.contains("stimate"), "{exact}");
        report.stacks.as_mut().unwrap().sampling = Some(stack_sampling());
        report.profile.as_mut().unwrap().sampling = Some(stack_sampling());
        let sampled = sections(&report);
        for id in ["lost-estimates", "flame-estimates"] {
            let p = format!(
                "<p class=\"note\" id=\"{id}\">E{}.</p>\n",
                &SAMPLED_NOTE[1..]
            );
            assert!(sampled.contains(&p), "{id}: {sampled}");
        }
        // And each of the three flame graphs under its title.
        assert_eq!(
            sampled.matches(&format!(">{SAMPLED}</text>")).count(),
            3,
            "{sampled}"
        );
    }

    #[test]
    fn summary_has_the_reports_peak() {
        let html = page(vec![
            at(0, 1, 1, malloc(1, 3 << 20)),
            at(1_500_000, 1, 1, free(1)),
        ]);
        assert!(
            html.contains("<li id=\"summary-peak-heap\"><b>peak heap</b> 3.0 MiB at 0 ns</li>"),
            "{html}"
        );
    }
}
