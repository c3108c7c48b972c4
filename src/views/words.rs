//! The phrasebook of the text, markdown and html views and of `check`: how a count, a block,
//! a peak, a process or a leak is said, so that every form says it the same way.

use crate::model::metrics::{
    HeapMetrics, LeakMetrics, LostEvents, Metrics, ProcessMetrics, Report, RunInfo, Scope,
    SuppressionReport,
};
use crate::model::sites::{SiteFrame, StackReport};
use crate::units::{format_bytes, format_duration_ns};

use super::rows::Rest;

/// Longest command shown in a row, in characters; longer ones end with "…".
pub const COMMAND_WIDTH: usize = 100;

/// "12 blocks, 1.2 KiB".
pub fn blocks(count: u64, bytes: u64) -> String {
    format!(
        "{}, {}",
        counted(count, "block", "blocks"),
        format_bytes(bytes)
    )
}

/// Text from the recording with control characters replaced, so a newline or escape sequence
/// in an argument cannot break the table or the terminal.
pub fn clean(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// What the process ran, on one line, shortened to [`COMMAND_WIDTH`].
pub fn command(p: &ProcessMetrics) -> String {
    let text = if !p.argv.is_empty() {
        p.argv.join(" ")
    } else if let Some(exe) = &p.executable {
        exe.clone()
    } else {
        "?".to_string()
    };
    shorten(&clean(&text))
}

/// `n` followed by the noun in the right number: "1 event", "3 events".
pub fn counted(n: u64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// The run's exit in words: "exit code 1", or "exit code unknown" (the root's end was not
/// recorded). Text and markdown say it alike.
pub fn exit_code(run: &RunInfo) -> String {
    match run.exit_code {
        Some(code) => format!("exit code {code}"),
        None => "exit code unknown".to_string(),
    }
}

/// How a process ended: its exit code, "sig N", or "running".
pub fn exit_text(p: &ProcessMetrics) -> String {
    match p.exit {
        Some(e) => match e.signal {
            Some(sig) => format!("sig {sig}"),
            None => e.exit_code.to_string(),
        },
        None => "running".to_string(),
    }
}

/// One frame for people: "function  file:line", "function  libc.so.6+0x9a1b0" without a line,
/// "libc.so.6+0x9a1b0" without a name, or the mark ("[truncated]").
pub fn frame_text(f: &SiteFrame) -> String {
    if f.is_mark() {
        return f.function.clone();
    }
    let place = frame_place(f);
    let inlined = if f.inlined { " (inlined)" } else { "" };
    if f.function.is_empty() {
        place
    } else {
        format!("{}{inlined}  {place}", f.function)
    }
}

/// The heap live in processes still running at the end, and `who` in brackets; `None` when
/// there is none, and the row is left out.
pub fn live_at_end(h: &HeapMetrics, who: &str) -> Option<String> {
    let live = &h.live_at_end;
    (live.blocks > 0).then(|| format!("{} ({who})", blocks(live.blocks, live.bytes)))
}

/// The events lost per cause: "7 ring_full, 2 stack_full" (causes cleaned of control
/// characters).
pub fn lost_causes(lost: &LostEvents) -> String {
    let causes: Vec<String> = lost
        .by_cause
        .iter()
        .map(|l| format!("{} {}", l.count, clean(&l.cause)))
        .collect();
    causes.join(", ")
}

/// The words for a `--stacks-by` order in the sites' title line.
pub fn order_label(order: &str) -> &str {
    match order {
        "peak" => "live bytes at the peak",
        "allocated" => "bytes allocated",
        "count" => "allocations",
        "leaked" => "bytes leaked",
        "temporary" => "temporary allocations",
        other => other,
    }
}

/// "3.2 MiB at 1.234 s", or "0 B" when nothing was ever live.
pub fn peak(bytes: u64, at_ns: Option<u64>) -> String {
    match at_ns {
        Some(at) => format!("{} at {}", format_bytes(bytes), format_duration_ns(at)),
        None => format_bytes(bytes),
    }
}

/// The noun for `n` of them: "process", "processes".
pub fn plural<'a>(n: u64, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

/// "1 process", "3 processes".
pub fn processes(n: u64) -> String {
    counted(n, "process", "processes")
}

/// The cells of one process's row, as the text table and the html page show them: its pid
/// indented by its depth in the tree up to `indent` levels (`None`: not indented, the rows are
/// not in tree order), its numbers, its exit and its command.
pub fn process_row(p: &ProcessMetrics, with_resident: bool, indent: Option<u32>) -> Vec<String> {
    let h = &p.own.heap;
    let indent = "  ".repeat(indent.map_or(0, |max| p.depth.min(max)) as usize);
    let leaked = match p.exit {
        Some(_) => format_bytes(h.leaked.bytes),
        None => format!("{}*", format_bytes(h.live_at_end.bytes)),
    };
    let tree_peak = if p.tree.processes > 1 {
        format_bytes(p.tree.heap.peak_live_bytes)
    } else {
        "-".to_string()
    };
    let mut row = vec![
        format!("{indent}{}", p.pid),
        h.allocs.to_string(),
        h.frees.to_string(),
        format_bytes(h.bytes_allocated),
        format_bytes(h.peak_live_bytes),
        h.peak_live_at_ns
            .map_or_else(|| "-".to_string(), format_duration_ns),
        tree_peak,
        leaked,
        h.failed_allocs.to_string(),
    ];
    if with_resident {
        row.push(
            p.own
                .resident
                .as_ref()
                .map_or_else(|| "-".to_string(), |r| format_bytes(r.peak_bytes)),
        );
    }
    row.push(exit_text(p));
    row.push(command(p));
    row
}

/// The text cell of a summed row: "980 more processes".
pub fn rest_label(rest: &Rest, one: &str, many: &str) -> String {
    format!("{} more {}", rest.rows, plural(rest.rows, one, many))
}

/// What the report covers: "whole run (3 processes)", "process 42", ...
pub fn scope_title(report: &Report) -> String {
    let t: &Metrics = &report.totals;
    match &report.scope {
        Scope::Run => format!("whole run ({})", processes(t.processes)),
        Scope::Process { pid } => format!("process {pid}"),
        Scope::Tree { pid } => format!("tree of process {pid} ({})", processes(t.processes)),
        Scope::Benchmark { uri } => format!("benchmark {}", clean(uri)),
    }
}

/// How many of the scope's sites are listed: "4 sites", or "top 10 of 250 sites".
pub fn sites_shown(stacks: &StackReport) -> String {
    if stacks.sites.len() as u64 == stacks.sites_total {
        counted(stacks.sites_total, "site", "sites")
    } else {
        format!("top {} of {} sites", stacks.sites.len(), stacks.sites_total)
    }
}

/// The temporary allocations and their share: "12 (3.0% of allocations)".
pub fn temporary(h: &HeapMetrics) -> String {
    format!(
        "{} ({} of allocations)",
        h.temporary_allocs,
        percent(h.temporary_allocs, h.allocs)
    )
}

/// What a recording without call stacks says to `--stacks`: why, and how to get them.
pub const NO_STACKS: &str =
    "allocation sites: this recording has no call stacks (record takes them only when asked); \
     record again with --stacks to see where the allocations come from";

/// The lines that split `leaked` by the leak scans: definitely lost and still reachable, and
/// what was not scanned when some process was not (killed, exec, a scan that failed).
pub fn leak_split(l: &LeakMetrics) -> Vec<(&'static str, String)> {
    let mut out = vec![
        (
            "  definitely lost",
            blocks(l.definitely_lost.blocks, l.definitely_lost.bytes),
        ),
        (
            "  still reachable",
            blocks(l.still_reachable.blocks, l.still_reachable.bytes),
        ),
    ];
    if l.suppressed.blocks > 0 {
        out.push((
            "  suppressed",
            format!(
                "{} (definitely lost, matched by --suppress)",
                blocks(l.suppressed.blocks, l.suppressed.bytes)
            ),
        ));
    }
    if l.unscanned_processes > 0 {
        out.push((
            "  not scanned",
            format!(
                "{} ({} not scanned at exit: killed by a signal, or no C library `_exit` to \
                 hold {} at)",
                blocks(l.not_scanned.blocks, l.not_scanned.bytes),
                processes(l.unscanned_processes),
                if l.unscanned_processes == 1 {
                    "it"
                } else {
                    "them"
                }
            ),
        ));
    }
    out
}

/// The footer of the benchmark table: what its numbers count. LEAKED is what `bench.rs` counts:
/// a block allocated inside a window that no recorded free released, a free after `stop`
/// included (frees are recorded while paused), by its process's exit or the recording's end.
pub const BENCH_FOOTER: &str = "inside each benchmark's windows, in its pid and \
     descendants; LEAKED: allocated there and never freed, not even after stop, by the exit of \
     its process or the end of the recording";

/// The lines people read of what the suppressions did: "suppressed: N blocks, B bytes by K
/// rules (FILE)", then one line per unused rule, and the blocks no rule could match.
pub fn suppression_lines(s: &SuppressionReport) -> Vec<String> {
    let used = s.used() as u64;
    let mut out = vec![format!(
        "suppressed: {} by {} ({})",
        blocks(s.suppressed.blocks, s.suppressed.bytes),
        counted(used, "rule", "rules"),
        s.file
    )];
    for r in s.rules.iter().filter(|r| r.suppressed.blocks == 0) {
        out.push(format!(
            "unused suppression: {} (line {}) matched no lost block",
            r.rule, r.line
        ));
    }
    if s.unmatchable.blocks > 0 {
        out.push(format!(
            "not matchable: {} definitely lost without a call stack in the scope",
            blocks(s.unmatchable.blocks, s.unmatchable.bytes)
        ));
    }
    out
}

/// `text` cut to [`COMMAND_WIDTH`] characters, ending with "…" when cut.
pub fn shorten(text: &str) -> String {
    if text.chars().count() <= COMMAND_WIDTH {
        return text.to_string();
    }
    let mut short: String = text.chars().take(COMMAND_WIDTH - 1).collect();
    short.push('…');
    short
}

/// Where a frame is: "file:line", "file" without a line, "module+0x9a1b0" without a file.
pub fn frame_place(f: &SiteFrame) -> String {
    let module = f.module.rsplit('/').next().unwrap_or(&f.module);
    if f.file.is_empty() {
        format!("{module}+{:#x}", f.offset)
    } else if f.line == 0 {
        f.file.clone()
    } else {
        format!("{}:{}", f.file, f.line)
    }
}

/// `part` as a percentage of `whole` with one decimal; "0.0%" when `whole` is zero.
pub fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "0.0%".to_string();
    }
    format!("{:.1}%", part as f64 * 100.0 / whole as f64)
}
