//! The phrasebook of the text, markdown and html views and of `check`: how a count, a block,
//! a peak, a process or a leak is said, so that every form says it the same way.

use crate::model::functions::{FunctionMetrics, FunctionReport};
use crate::model::metrics::{
    HeapMetrics, LeakMetrics, LostEvents, Metrics, ProcessMetrics, Report, ResidentMetrics,
    RunInfo, Scope, SuppressionReport,
};
use crate::model::profile::{Profile, View};
use crate::model::sites::{
    FaultSampling, MemberBytes, ResidentSite, ResidentSites, SiteFrame, StackReport, StackSampling,
};
use std::collections::HashMap;

use crate::units::{format_bytes, format_duration_ns};

use super::rows::Rest;
use super::screen::shorten_to;

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

/// A phrase as a sentence or heading starts: "processes: top 20…" is "Processes: top 20…".
pub fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
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

/// Names for a sentence: "a, b or c" (a flag's choices, as its errors list them).
pub fn either<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.into_iter().collect();
    match names.split_last() {
        None => String::new(),
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

/// How the values of sites from sampled stacks were estimated (issue 32): "estimated from 1200
/// sampled allocations of 52000, 1 per 512.0 KiB", the mean interval in the report's units.
/// Every view says it in these words ([`estimates`]); `diff` says it per recording.
pub fn estimated_from(s: &StackSampling) -> String {
    format!(
        "estimated from {} of {}, 1 per {}",
        counted(
            s.sampled_allocations,
            "sampled allocation",
            "sampled allocations"
        ),
        s.allocations,
        format_bytes(s.mean_bytes)
    )
}

/// The resident sites' first line: "resident memory by site: 2 of 3 (whole run: peak resident
/// 24.0 KiB at 3 ns)" (text, and capitalized, markdown).
pub fn resident_sites_heading(title: &str, r: &ResidentSites) -> String {
    format!(
        "resident memory by site: {} of {} ({title}: peak resident {})",
        r.sites.len(),
        r.sites_total,
        peak(r.peak_bytes, r.peak_at_ns)
    )
}

/// What the resident sites are, and how many of the increases of resident memory their values
/// stand on: "the code that made the pages resident; 2 of 3 increases walked", or, from
/// sampled fault stacks, the estimates and what to do for exact values (text, markdown).
pub fn resident_sites_note(r: &ResidentSites) -> String {
    let how = match &r.sampling {
        Some(f) => format!(
            "{}; record with --stacks for exact values",
            fault_estimates(f)
        ),
        None => format!("{} of {} increases walked", r.walked, r.faults),
    };
    format!("the code that made the pages resident; {how}")
}

/// The frames of the resident sites' last row: the pages no walked stack made resident.
pub const UNATTRIBUTED: &str = "[unattributed: made resident with no stack walked]";

/// What "[inherited]" holds when the recording did not walk the children's writes to it: all
/// they got at fork (text, markdown); `None` when it did, or no site is "[inherited]".
pub fn inherited_note(r: &ResidentSites) -> Option<&'static str> {
    let inherited = |s: &ResidentSite| s.stack_id == crate::model::sites::INHERITED_STACK_ID;
    (!r.inherited_writes && r.sites.iter().any(inherited)).then_some(
        "[inherited] is all that forked processes got at fork: their writes to it were not \
         walked (that needs fentry on the kernel's do_wp_page, which the recording's kernel \
         refused or lacks)",
    )
}

/// What resident bytes are made of, the members that have any: "anon 24.0 MiB, file 16.0 MiB"
/// (the OF WHICH cell of the resident sites in text and markdown).
pub fn members(b: &MemberBytes) -> String {
    let parts: Vec<String> = [
        ("anon", b.anon_bytes),
        ("file", b.file_bytes),
        ("shmem", b.shmem_bytes),
    ]
    .iter()
    .filter(|(_, n)| *n > 0)
    .map(|(name, n)| format!("{name} {}", format_bytes(*n)))
    .collect();
    parts.join(", ")
}

/// The mark of values from sampled stacks where a title or a comment has room for one line
/// (pprof's comment, speedscope's profile names, a flame graph's subtitle): "estimates: values
/// estimated from ...".
pub fn estimates(s: &StackSampling) -> String {
    format!("estimates: values {}", estimated_from(s))
}

/// How the resident views' values were estimated from sampled fault stacks (issue 35): "estimated
/// from 33 walked increases of resident memory of 1789, 1 per 256.0 KiB made resident".
pub fn estimated_from_faults(f: &FaultSampling) -> String {
    format!(
        "estimated from {} of resident memory of {}, 1 per {} made resident",
        counted(f.walked, "walked increase", "walked increases"),
        f.increases,
        format_bytes(f.mean_bytes)
    )
}

/// [`estimates`] of the resident views: "estimates: values estimated from 33 walked increases
/// ...".
pub fn fault_estimates(f: &FaultSampling) -> String {
    format!("estimates: values {}", estimated_from_faults(f))
}

/// The one-line mark of `profile`'s values in `view` when they are estimates ([`estimates`]):
/// the resident views' stand on the sampled faults, the others on the sampled allocations.
pub fn estimates_of(profile: &Profile, view: View) -> Option<String> {
    if view.is_resident() {
        return profile.resident_sampling.as_ref().map(fault_estimates);
    }
    profile.sampling.as_ref().map(estimates)
}

/// [`estimates`] with what to do for exact values, the note under a table of sites or
/// functions (text, markdown, html, `check`).
pub fn estimates_note(s: &StackSampling) -> String {
    format!("{}; record with --stacks for exact values", estimates(s))
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

/// Longest process name, in characters; a longer one ends with "…". The whole command is in
/// the JSON, and on hover in the html page.
pub const NAME_WIDTH: usize = 60;

/// Most arguments a name keeps after its program when it names a process by what sets it
/// apart from the other processes of its program.
const NAME_ARGS: usize = 2;

/// Endings of the source files a compiler driver is given: the file names the process.
const SOURCE_ENDINGS: &[&str] = &[
    ".c", ".cc", ".cpp", ".cxx", ".c++", ".C", ".i", ".ii", ".s", ".S", ".m", ".mm", ".f", ".f90",
    ".rs",
];

/// How every view names a process in its rows: its program, then the arguments that tell it
/// apart from its siblings (#33: a `cargo build`'s rustc rows all read
/// `/root/.rustup/toolchains/stable-x86_64-…` at 80 columns).
///
/// - The program is the base name of `argv[0]` (of the executable without an argv, `?`
///   without either), without its directories.
/// - Known drivers are named by what they work on: `rustc --crate-name serde_json`;
///   `cc1plus prog.cpp` (cc1, cc1plus, cc, c++, gcc, g++, clang, clang++ and as, with a
///   target prefix or version suffix such as `x86_64-linux-gnu-gcc-12`: the first source
///   file, by its base name); `python3 -m pytest`, `python3 -c CODE` or `python3 run.py` (the
///   script's base name); `java -jar app.jar` or `java com.example.Main` (the main class);
///   `sh -c SCRIPT` or `bash build.sh` for the shells.
/// - Any other program, or a driver without what it is named by (`rustc -vV`, `gcc -o prog
///   a.o`): when the recording has other processes of the same program, the first
///   [`NAME_ARGS`] arguments that are not flags and differ from a sibling's at the same place
///   (a path by its base name), else all its arguments as given (`cargo build --release`).
/// - Control characters are shown as `?`, and the name is cut to [`NAME_WIDTH`] characters.
pub struct ProcessNames<'a> {
    processes: &'a [ProcessMetrics],
    /// Per program: how many processes ran it, and at each place of their arguments the one
    /// every one of them has there (`None` where two differ or one has none).
    programs: HashMap<&'a str, (usize, Vec<Option<&'a str>>)>,
}

impl<'a> ProcessNames<'a> {
    /// The names of `processes`: each is told apart from the others of its program.
    pub fn new(processes: &'a [ProcessMetrics]) -> ProcessNames<'a> {
        let mut programs: HashMap<&str, (usize, Vec<Option<&str>>)> = HashMap::new();
        for p in processes {
            let args = arguments(p);
            let (count, shared) = programs
                .entry(program(p))
                .or_insert_with(|| (0, args.iter().map(|a| Some(a.as_str())).collect()));
            *count += 1;
            for (k, place) in shared.iter_mut().enumerate() {
                if args.get(k).map(String::as_str) != *place {
                    *place = None;
                }
            }
        }
        ProcessNames {
            processes,
            programs,
        }
    }

    /// The name of `p`, one of the processes the names were made of.
    pub fn name(&self, p: &ProcessMetrics) -> String {
        process_name(p, self.programs.get(program(p)))
    }

    /// The name of the first of the processes with `pid`, if there is one (where a view has
    /// only a pid, as the timeline's series and the rmap section have).
    pub fn name_of_pid(&self, pid: u32) -> Option<String> {
        let p = self.processes.iter().find(|p| p.pid == pid)?;
        Some(self.name(p))
    }
}

/// The name of `p` (see [`ProcessNames`]); `siblings` is its program's entry, if any.
fn process_name(p: &ProcessMetrics, siblings: Option<&(usize, Vec<Option<&str>>)>) -> String {
    let program = program(p);
    let args = arguments(p);
    let told = driver_arguments(program, args).unwrap_or_else(|| match siblings {
        Some((count, shared)) if *count > 1 => {
            let differing: Vec<&str> = args
                .iter()
                .enumerate()
                .filter(|(k, a)| {
                    !a.starts_with('-') && shared.get(*k).copied().flatten() != Some(a.as_str())
                })
                .take(NAME_ARGS)
                .map(|(_, a)| base_name(a))
                .collect();
            if differing.is_empty() {
                args.join(" ")
            } else {
                differing.join(" ")
            }
        }
        _ => args.join(" "),
    });
    let name = if told.is_empty() {
        program.to_string()
    } else {
        format!("{program} {told}")
    };
    shorten_to(&clean(&name), NAME_WIDTH)
}

/// The base name of the program `p` ran.
fn program(p: &ProcessMetrics) -> &str {
    match (p.argv.first(), &p.executable) {
        (Some(arg0), _) => base_name(arg0),
        (None, Some(exe)) => base_name(exe),
        (None, None) => "?",
    }
}

/// The arguments of `p` after its program.
fn arguments(p: &ProcessMetrics) -> &[String] {
    p.argv.get(1..).unwrap_or(&[])
}

/// The last part of a path, or all of `path` when it has no other ("/" stays "/").
fn base_name(path: &str) -> &str {
    match path.trim_end_matches('/').rsplit('/').next() {
        Some(name) if !name.is_empty() => name,
        _ => path,
    }
}

/// The driver family of a program: `x86_64-linux-gnu-gcc-12` is `gcc`, `clang++-17` is
/// `clang++`, `python3.12` is `python`.
fn family(program: &str) -> &str {
    if program.starts_with("python") {
        return "python";
    }
    // A version suffix ("-12"), then a target prefix ("x86_64-linux-gnu-").
    let unversioned = match program.rsplit_once('-') {
        Some((head, tail)) if tail.chars().all(|c| c.is_ascii_digit() || c == '.') => head,
        _ => program,
    };
    unversioned.rsplit('-').next().unwrap_or(unversioned)
}

/// What a known driver is named by, after its program (see [`ProcessNames`]); `None` for
/// another program, or a driver without it.
fn driver_arguments(program: &str, args: &[String]) -> Option<String> {
    let value_of = |flag: &str| {
        let at = args.iter().position(|a| a == flag)?;
        args.get(at + 1).map(String::as_str)
    };
    match family(program) {
        "rustc" => value_of("--crate-name")
            .or_else(|| args.iter().find_map(|a| a.strip_prefix("--crate-name=")))
            .map(|c| format!("--crate-name {c}")),
        "cc1" | "cc1plus" | "cc" | "c++" | "gcc" | "g++" | "clang" | "clang++" | "as" => args
            .iter()
            .enumerate()
            .find(|(k, a)| {
                !a.starts_with('-')
                    && (*k == 0 || args[k - 1] != "-o")
                    && SOURCE_ENDINGS.iter().any(|e| a.ends_with(e))
            })
            .map(|(_, a)| base_name(a).to_string()),
        "python" => first_operand(args, &["-m", "-c"], &["-X", "-W", "-Q"]),
        "java" => first_operand(
            args,
            &["-jar", "-m", "--module"],
            &["-cp", "-classpath", "--class-path", "-p", "--module-path"],
        ),
        "sh" | "bash" | "dash" | "zsh" | "ksh" => first_operand(args, &["-c"], &["-o"]),
        _ => None,
    }
}

/// An interpreter's first operand, after flags: a flag of `naming` with its value ("-m pytest"),
/// or the first argument that is no flag (the script or class, by its base name); the flags of
/// `valued` take a value that is skipped.
fn first_operand(args: &[String], naming: &[&str], valued: &[&str]) -> Option<String> {
    let mut k = 0;
    while k < args.len() {
        let a = args[k].as_str();
        if naming.contains(&a) {
            let value = args.get(k + 1)?;
            let value = if a == "-jar" { base_name(value) } else { value };
            return Some(format!("{a} {value}"));
        }
        if !a.starts_with('-') {
            return Some(base_name(a).to_string());
        }
        k += if valued.contains(&a) { 2 } else { 1 };
    }
    None
}

/// The cells of one process's row, as the text table and the html page show them: its pid
/// indented by its depth in the tree up to `indent` levels (`None`: not indented, the rows are
/// not in tree order), its numbers, its exit and its name in `names`.
pub fn process_row(
    p: &ProcessMetrics,
    names: &ProcessNames,
    with_resident: bool,
    indent: Option<u32>,
) -> Vec<String> {
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
        row.push(peak_resident_cell(p.own.resident.as_ref()));
    }
    row.push(exit_text(p));
    row.push(names.name(p));
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
    listed(stacks.sites.len(), stacks.sites_total, "site", "sites")
}

/// How many of the scope's functions are listed: "4 functions", or "top 10 of 250 functions".
pub fn functions_shown(f: &FunctionReport) -> String {
    listed(
        f.functions.len(),
        f.functions_total,
        "function",
        "functions",
    )
}

/// `shown` of `total` things: "4 sites", or "top 10 of 250 sites".
fn listed(shown: usize, total: u64, one: &str, many: &str) -> String {
    if shown as u64 == total {
        counted(total, one, many)
    } else {
        format!("top {shown} of {total} {many}")
    }
}

/// A function in one line: "grow (grow.c:12) in app", "app+0x1234" without a name, a mark as
/// it is.
pub fn function_text(f: &FunctionMetrics) -> String {
    let module = f.module.rsplit('/').next().unwrap_or(&f.module);
    if f.module.is_empty() {
        return clean(&f.function);
    }
    if f.function.is_empty() {
        return format!("{module}+{:#x}", f.offset);
    }
    let file = f.file.rsplit('/').next().unwrap_or(&f.file);
    let place = match (file, f.line) {
        ("", _) => String::new(),
        (file, 0) => format!(" ({file})"),
        (file, line) => format!(" ({file}:{line})"),
    };
    clean(&format!("{}{place} in {module}", f.function))
}

/// The temporary allocations and their share: "12 (3.0% of allocations)".
pub fn temporary(h: &HeapMetrics) -> String {
    format!(
        "{} ({} of allocations)",
        h.temporary_allocs,
        percent(h.temporary_allocs, h.allocs)
    )
}

/// What a recording without call stacks says to a request for `$what`: why, and how to get
/// them.
macro_rules! no_stacks {
    ($what:literal) => {
        concat!(
            $what,
            ": this recording has no call stacks (it was recorded with --no-stacks); record \
             again without it to see where the allocations come from"
        )
    };
}

/// What the walk counters say of a recording that walked no stack although it has sites: its
/// walker never loaded (a kernel whose verifier refused it), so every site is "[no stack]".
/// Only then: where the walker is in place, a sampled allocation is always walked.
pub const NO_WALKER: &str = "none: the stack walker did not load where this was recorded (record \
     said why on its standard error, and `memtrack doctor` there says what the kernel lacks), so \
     no allocation has a stack";

/// Whether `stacks` has sites but walked none: [`NO_WALKER`].
pub fn walker_never_walked(stacks: &StackReport) -> bool {
    stacks.walks.is_some_and(|w| w.walks == 0) && stacks.sites_total > 0
}

/// What a recording without call stacks says to `--stacks`.
pub const NO_STACKS: &str = no_stacks!("allocation sites");

/// What a recording without call stacks says to `--functions`.
pub const NO_FUNCTIONS: &str = no_stacks!("allocating functions");

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

/// The peak resident column's cell of a row (a process's, a benchmark's): "-" where the
/// recording has no resident memory.
pub fn peak_resident_cell(resident: Option<&ResidentMetrics>) -> String {
    resident.map_or_else(|| "-".to_string(), |r| format_bytes(r.peak_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(argv: &[&str]) -> ProcessMetrics {
        crate::testkit::process_running(1, 0, argv)
    }

    /// The names of processes running `argvs`, in order.
    fn names(argvs: &[&[&str]]) -> Vec<String> {
        let processes: Vec<ProcessMetrics> = argvs.iter().map(|a| process(a)).collect();
        let names = ProcessNames::new(&processes);
        processes.iter().map(|p| names.name(p)).collect()
    }

    fn name(argv: &[&str]) -> String {
        names(&[argv]).remove(0)
    }

    #[test]
    fn estimates_say_how_many_were_sampled_of_how_many_and_how_often() {
        let s = crate::testkit::stack_sampling();
        assert_eq!(
            estimated_from(&s),
            "estimated from 1200 sampled allocations of 52000, 1 per 512.0 KiB"
        );
        assert_eq!(
            estimates_note(&s),
            "estimates: values estimated from 1200 sampled allocations of 52000, 1 per 512.0 \
             KiB; record with --stacks for exact values"
        );
        let one = StackSampling {
            mean_bytes: 100,
            sampled_allocations: 1,
            allocations: 1,
            ..s
        };
        assert_eq!(
            estimates(&one),
            "estimates: values estimated from 1 sampled allocation of 1, 1 per 100 B"
        );
    }

    #[test]
    fn resident_estimates_stand_on_the_walked_increases() {
        let mut profile = Profile {
            sampling: Some(crate::testkit::stack_sampling()),
            ..Profile::default()
        };
        assert_eq!(estimates_of(&profile, View::Resident), None);
        profile.resident_sampling = Some(FaultSampling {
            mean_bytes: 256 << 10,
            walked: 33,
            increases: 1789,
        });
        assert_eq!(
            estimates_of(&profile, View::Faulted).unwrap(),
            "estimates: values estimated from 33 walked increases of resident memory of 1789, \
             1 per 256.0 KiB made resident"
        );
        assert_eq!(
            estimates_of(&profile, View::Peak),
            Some(estimates(&crate::testkit::stack_sampling()))
        );
    }

    const RUSTC: &str = "/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/bin/rustc";

    #[test]
    fn rustc_by_its_crate() {
        let argv = [
            RUSTC,
            "--crate-name",
            "serde_json",
            "--edition=2021",
            "/root/.cargo/registry/src/index.crates.io-6f17d22bba15001f/serde_json-1.0.128/src/lib.rs",
            "--crate-type",
            "lib",
        ];
        assert_eq!(name(&argv), "rustc --crate-name serde_json");
        assert_eq!(
            name(&[RUSTC, "--crate-name=build_script_build", "build.rs"]),
            "rustc --crate-name build_script_build"
        );
    }

    #[test]
    fn rustc_without_a_crate_shows_its_arguments() {
        assert_eq!(name(&[RUSTC, "-vV"]), "rustc -vV");
    }

    #[test]
    fn compilers_by_their_source_file() {
        let cc1plus = [
            "/usr/libexec/gcc/x86_64-linux-gnu/12/cc1plus",
            "-quiet",
            "-imultiarch",
            "x86_64-linux-gnu",
            "/work/testdata/prog.cpp",
            "-quiet",
            "-dumpbase",
            "prog.cpp",
            "-o",
            "/tmp/ccAbCd.s",
        ];
        assert_eq!(name(&cc1plus), "cc1plus prog.cpp");
        assert_eq!(
            name(&[
                "x86_64-linux-gnu-gcc-12",
                "-O2",
                "-c",
                "-o",
                "x.o",
                "src/x.c"
            ]),
            "x86_64-linux-gnu-gcc-12 x.c"
        );
        assert_eq!(
            name(&["as", "--64", "-o", "/tmp/cc1.o", "/tmp/ccAbCd.s"]),
            "as ccAbCd.s"
        );
    }

    #[test]
    fn a_link_has_no_source_and_shows_its_arguments() {
        assert_eq!(name(&["gcc", "-o", "prog", "a.o"]), "gcc -o prog a.o");
    }

    #[test]
    fn python_by_its_module_or_script() {
        assert_eq!(
            name(&["/usr/bin/python3", "-m", "pytest", "-q", "tests/"]),
            "python3 -m pytest"
        );
        assert_eq!(
            name(&[
                "python3.12",
                "-u",
                "-X",
                "dev",
                "/work/scripts/run.py",
                "--fast"
            ]),
            "python3.12 run.py"
        );
        assert_eq!(name(&["python3", "-c", "print(1)"]), "python3 -c print(1)");
    }

    #[test]
    fn java_by_its_main_class_or_jar() {
        assert_eq!(
            name(&[
                "java",
                "-cp",
                "a.jar:b.jar",
                "-Xmx1g",
                "com.example.Main",
                "x"
            ]),
            "java com.example.Main"
        );
        assert_eq!(
            name(&["/usr/bin/java", "-jar", "/opt/app/app.jar"]),
            "java -jar app.jar"
        );
    }

    #[test]
    fn shells_by_their_script() {
        assert_eq!(
            name(&["/bin/sh", "-c", "cc -O2 x.c && ./a.out"]),
            "sh -c cc -O2 x.c && ./a.out"
        );
        assert_eq!(name(&["bash", "-e", "./build.sh"]), "bash build.sh");
    }

    #[test]
    fn another_program_alone_shows_its_arguments() {
        assert_eq!(
            name(&["/root/.cargo/bin/cargo", "build", "--release"]),
            "cargo build --release"
        );
    }

    #[test]
    fn siblings_are_told_apart_by_what_differs() {
        let worker = "/opt/tools/bin/worker";
        assert_eq!(
            names(&[
                &[worker, "--threads", "4", "run", "/data/in/a.json"],
                &[worker, "--threads", "4", "run", "/data/in/b.json"],
                &["/bin/true"],
            ]),
            vec!["worker a.json", "worker b.json", "true"]
        );
        // Nothing differs: all the arguments.
        assert_eq!(
            names(&[&[worker, "run"], &[worker, "run"]]),
            vec!["worker run", "worker run"]
        );
    }

    #[test]
    fn a_long_argument_is_cut_to_the_width() {
        let long = "x".repeat(500);
        let n = name(&["./bench", &long]);
        assert_eq!(n.chars().count(), NAME_WIDTH);
        assert!(n.starts_with("bench xxx"));
        assert!(n.ends_with('…'));
    }

    #[test]
    fn control_characters_do_not_reach_the_name() {
        assert_eq!(name(&["sh", "-c", "echo\u{1b}[2J"]), "sh -c echo?[2J");
    }

    #[test]
    fn without_argv_the_executable_names_it() {
        let mut p = process(&[]);
        p.executable = Some("/usr/bin/make".to_string());
        let all = [p];
        assert_eq!(ProcessNames::new(&all).name(&all[0]), "make");
        let all = [process(&[])];
        assert_eq!(ProcessNames::new(&all).name(&all[0]), "?");
    }
}
