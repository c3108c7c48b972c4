//! `memtrack diff BASE NEW`: what changed between two recordings, for the whole run, each
//! benchmark (by URI), each process (matched across the runs, since pids differ) and, when both
//! have call stacks, each allocation site.
//!
//! Flow: [`run`] reads both files with `analyze::read_report_with` (the same accounting as
//! `report`; nothing is re-accounted here), [`compare`] pairs what the two reports have
//! (`matching` for processes, `sites` for call stacks) into a [`Diff`] of `metric::Change`s,
//! and `render` prints it as text or JSON. `check --baseline` uses `metric` for its limits.
//! `--format folded|flamegraph` goes to `differential` instead: the two recordings' call
//! stacks side by side, with no table.

pub mod differential;
pub mod matching;
pub mod render;
pub mod resident;
pub mod sites;

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::analyze::read_report_with;
use crate::analyze::stacks::{SiteOptions, SiteOrder};
use crate::error::{Error, Result};
use crate::format::Reader;
use crate::model::metrics::Scope;
use crate::model::metrics::{Metrics, Report};
use crate::model::profile::{View, Weight};

use crate::model::metric::Change;
use crate::views::words::ProcessNames;
use matching::{Pairing, Rule};
use resident::ResidentDiff;
use sites::SitesDiff;

/// Version of the `diff --format json` structure: additive fields keep it; renames, removals
/// and changes of meaning bump it.
pub const DIFF_SCHEMA_VERSION: u32 = 1;

/// How `diff` prints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DiffFormat {
    /// Aligned text for people, 80 columns.
    #[default]
    Text,
    /// JSON for scripts, the same content.
    Json,
    /// Differential folded stacks, `stack base new` per line (`differential`).
    Folded,
    /// inferno's differential flame graph of those lines, an SVG.
    Flamegraph,
}

impl DiffFormat {
    /// Every format with its flag name, as `diff --format` takes them.
    pub const NAMES: [(&'static str, DiffFormat); 4] = [
        ("text", DiffFormat::Text),
        ("json", DiffFormat::Json),
        ("folded", DiffFormat::Folded),
        ("flamegraph", DiffFormat::Flamegraph),
    ];

    /// The flag name.
    pub fn name(self) -> &'static str {
        DiffFormat::NAMES
            .iter()
            .find(|(_, f)| *f == self)
            .map_or("text", |(n, _)| n)
    }
}

/// What `memtrack diff` was asked for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiffOptions {
    /// The recording compared against (e.g. main's).
    pub base: PathBuf,
    /// The recording compared (e.g. the pull request's).
    pub new: PathBuf,
    /// Text or JSON.
    pub format: DiffFormat,
    /// Compare allocation sites too (`--stacks`; both recordings need call stacks).
    pub stacks: bool,
    /// How many changed sites to list (0: all).
    pub top: usize,
    /// What the folded lines and the flame graph weigh (`--view`).
    pub view: View,
    /// What they weigh blocks by (`--weight`).
    pub weight: Weight,
    /// Whether the flame graph's widths are the base's rather than the new recording's.
    pub base_widths: bool,
    /// The file to write (`-o`), else standard output.
    pub output: Option<PathBuf>,
}

/// One recording as the diff names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Side {
    /// The file.
    pub file: String,
    /// The recorded command line.
    pub command: Vec<String>,
    /// The file's format version.
    pub format_version: u16,
    /// The memtrack that recorded it.
    pub memtrack_version: String,
    /// What the recorder captured ("alloc", "rss", ...).
    pub features: Vec<String>,
    /// Whether its numbers are complete (no events lost, not damaged).
    pub complete: bool,
    /// Why not, one sentence each.
    pub incomplete_reasons: Vec<String>,
    /// Processes in the recording.
    pub processes: u64,
}

/// One benchmark URI of either recording.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BenchmarkDiff {
    /// The URI.
    pub uri: String,
    /// "matched" (both have it), "added" (only the new one) or "removed" (only the base).
    pub status: &'static str,
    /// Its metrics, largest relative change first.
    pub metrics: Vec<Change>,
}

/// One process as a recording has it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProcessSide {
    /// Its pid in that recording.
    pub pid: u32,
    /// Its command (the file name of what it executed).
    pub command: String,
    /// Its arguments.
    pub argv: Vec<String>,
    /// How the text names it, as every report view does (`views::words::ProcessNames`: its
    /// program and what tells it apart); the JSON has the whole command in `argv`.
    #[serde(skip)]
    pub name: String,
    /// Where it sits: (command, ordinal) per level from the root, as "make[0]/cc1[2]".
    pub position: String,
}

/// One process of either or both recordings.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProcessDiff {
    /// How it was matched: "tree position", "command" or "unmatched".
    pub rule: Rule,
    /// "matched", "added" (only the new recording) or "removed" (only the base).
    pub status: &'static str,
    /// The process in the base recording, absent when added.
    pub base: Option<ProcessSide>,
    /// The process in the new recording, absent when removed.
    pub new: Option<ProcessSide>,
    /// Its own metrics (without its children), largest relative change first.
    pub metrics: Vec<Change>,
}

/// Everything `diff` says.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Diff {
    /// [`DIFF_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The recording compared against.
    pub base: Side,
    /// The recording compared.
    pub new: Side,
    /// What differs between the recordings beside their numbers (commands, versions, what
    /// was recorded, completeness), one sentence each; what was compared despite it.
    pub notes: Vec<String>,
    /// The whole run's metrics, largest relative change first.
    pub run: Vec<Change>,
    /// Each benchmark URI of either recording: matched ones in the new recording's order, then
    /// added, then removed.
    pub benchmarks: Vec<BenchmarkDiff>,
    /// Each process of either recording: matched ones first, by their largest relative change
    /// (ties in the new recording's tree order), then added, then removed.
    pub processes: Vec<ProcessDiff>,
    /// The allocation sites that changed (`--stacks`, both recordings with call stacks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sites: Option<SitesDiff>,
    /// The resident memory by site that changed (`--stacks`, both recordings with the stacks
    /// of their faults).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resident_sites: Option<ResidentDiff>,
}

/// Runs `memtrack diff`: writes to `opts.output` (`output::write_file`: a file is replaced
/// only when complete, a device or FIFO written in place), else to `stdout`.
pub fn run_to(opts: &DiffOptions, stdout: &mut dyn Write) -> Result<()> {
    match &opts.output {
        Some(path) => crate::output::write_file(path, |file| run(opts, file)),
        None => run(opts, stdout),
    }
}

/// Runs `memtrack diff`, writing to `out`; a closed pipe ends quietly.
pub fn run(opts: &DiffOptions, out: &mut dyn Write) -> Result<()> {
    let write: fn(&Diff, &mut dyn Write) -> io::Result<()> = match opts.format {
        DiffFormat::Text => render::write_text,
        DiffFormat::Json => render::write_json,
        DiffFormat::Folded | DiffFormat::Flamegraph => return differential::run(opts, out),
    };
    let diff = read_and_compare(opts)?;
    let mut out = BufWriter::new(out);
    let written = write(&diff, &mut out);
    match written.and_then(|()| out.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Error::io("<output>", e)),
        Ok(()) => Ok(()),
    }
}

/// Reads both recordings of `opts` and compares them.
pub fn read_and_compare(opts: &DiffOptions) -> Result<Diff> {
    let sites = opts.stacks.then_some(SiteOptions {
        order: SiteOrder::Allocated,
        top: 0,
        profile: false,
        functions: None,
    });
    let read = |path: &Path| -> Result<(Report, u16)> {
        let version = Reader::open(path)?.format_version();
        let report = read_report_with(path, sites.map(|s| (&Scope::Run, s)))?;
        Ok((report, version))
    };
    let (base, base_version) = read(&opts.base)?;
    let (new, new_version) = read(&opts.new)?;
    let mut diff = compare(&base, &new, opts.top);
    diff.base = side(&opts.base, &base, base_version);
    diff.new = side(&opts.new, &new, new_version);
    if base_version != new_version {
        diff.notes.insert(
            0,
            format!(
                "the files have different format versions (base {base_version}, new \
                 {new_version}): what both record is compared"
            ),
        );
    }
    Ok(diff)
}

/// How `report` names one side.
fn side(path: &Path, r: &Report, format_version: u16) -> Side {
    Side {
        file: path.display().to_string(),
        command: r.run.command.clone(),
        format_version,
        memtrack_version: r.run.memtrack_version.clone(),
        features: r.run.features.clone(),
        complete: r.complete,
        incomplete_reasons: r.incomplete_reasons.clone(),
        processes: r.run.processes,
    }
}

/// Compares two whole-run reports: the run, benchmarks by URI, processes by `matching`, and
/// the sites of both when both have them (`top` of them, 0 for all). The sides' file names and
/// format versions are left empty for the caller.
pub fn compare(base: &Report, new: &Report, top: usize) -> Diff {
    let mut notes = Vec::new();
    if base.run.command != new.run.command {
        notes.push(format!(
            "the recorded commands differ (base `{}`, new `{}`): processes are matched by \
             command and tree position",
            base.run.command.join(" "),
            new.run.command.join(" ")
        ));
    }
    if base.run.memtrack_version != new.run.memtrack_version {
        notes.push(format!(
            "recorded by different memtracks (base {}, new {})",
            base.run.memtrack_version, new.run.memtrack_version
        ));
    }
    for (feature, metric) in [("rss", "peak resident"), ("mappings", "peak mapped")] {
        let has = |r: &Report| r.run.features.iter().any(|f| f == feature);
        match (has(base), has(new)) {
            (true, false) => notes.push(format!(
                "only the base recorded {feature}: {metric} is not compared"
            )),
            (false, true) => notes.push(format!(
                "only the new recording recorded {feature}: {metric} is not compared"
            )),
            _ => {}
        }
    }
    for (name, r) in [("base", base), ("new", new)] {
        if !r.complete {
            notes.push(format!(
                "the {name} recording is incomplete ({}): its numbers may be wrong",
                r.incomplete_reasons.join("; ")
            ));
        }
    }
    let sites = match (&base.stacks, &new.stacks) {
        (Some(b), Some(n)) if b.recorded && n.recorded => Some(sites::compare(b, n, top)),
        (Some(b), Some(n)) => {
            let which = match (b.recorded, n.recorded) {
                (false, false) => "neither recording has",
                (false, true) => "the base recording has no",
                _ => "the new recording has no",
            };
            notes.push(format!(
                "{which} call stacks (record both without --no-stacks): sites are not compared"
            ));
            None
        }
        _ => None,
    };
    let resident_sites = match (resident_of(base), resident_of(new)) {
        (Some(b), Some(n)) => Some(resident::compare(b, n, top)),
        (None, None) => None,
        (b, _) => {
            let which = if b.is_some() { "base" } else { "new" };
            if sites.is_some() {
                notes.push(format!(
                    "only the {which} recording has the stacks of the pages it made resident: \
                     resident sites are not compared"
                ));
            }
            None
        }
    };
    Diff {
        schema_version: DIFF_SCHEMA_VERSION,
        base: Side::empty(),
        new: Side::empty(),
        notes,
        run: Change::all(Some(&base.totals), Some(&new.totals)),
        benchmarks: benchmarks(base, new),
        processes: processes(base, new),
        sites,
        resident_sites,
    }
}

/// `report`'s resident memory by site, when it has the stacks of its faults.
fn resident_of(report: &Report) -> Option<&crate::model::sites::ResidentSites> {
    report.stacks.as_ref()?.resident.as_ref()
}

impl Side {
    fn empty() -> Side {
        Side {
            file: String::new(),
            command: Vec::new(),
            format_version: 0,
            memtrack_version: String::new(),
            features: Vec::new(),
            complete: true,
            incomplete_reasons: Vec::new(),
            processes: 0,
        }
    }
}

/// Benchmarks by URI: matched in the new recording's order, then added, then removed.
fn benchmarks(base: &Report, new: &Report) -> Vec<BenchmarkDiff> {
    let find = |r: &Report, uri: &str| -> Option<Metrics> {
        r.benchmarks
            .iter()
            .find(|b| b.uri == uri)
            .map(|b| b.metrics.clone())
    };
    let mut matched = Vec::new();
    let mut added = Vec::new();
    for b in &new.benchmarks {
        match find(base, &b.uri) {
            Some(m) => matched.push(BenchmarkDiff {
                uri: b.uri.clone(),
                status: "matched",
                metrics: Change::all(Some(&m), Some(&b.metrics)),
            }),
            None => added.push(BenchmarkDiff {
                uri: b.uri.clone(),
                status: "added",
                metrics: Change::all(None, Some(&b.metrics)),
            }),
        }
    }
    let removed = base
        .benchmarks
        .iter()
        .filter(|b| find(new, &b.uri).is_none())
        .map(|b| BenchmarkDiff {
            uri: b.uri.clone(),
            status: "removed",
            metrics: Change::all(Some(&b.metrics), None),
        });
    matched
        .into_iter()
        .chain(added)
        .chain(removed.collect::<Vec<_>>())
        .collect()
}

/// Processes paired by `matching`, each with its own metrics.
fn processes(base: &Report, new: &Report) -> Vec<ProcessDiff> {
    let base_positions = matching::positions(&base.processes);
    let new_positions = matching::positions(&new.processes);
    let (base_names, new_names) = (
        ProcessNames::new(&base.processes),
        ProcessNames::new(&new.processes),
    );
    let describe =
        |r: &Report, positions: &[matching::Position], names: &ProcessNames, i: usize| {
            let p = &r.processes[i];
            ProcessSide {
                pid: p.pid,
                command: matching::command(p),
                argv: p.argv.clone(),
                name: names.name(p),
                position: matching::position_text(&positions[i]),
            }
        };
    let mut out: Vec<ProcessDiff> = matching::pair(&base.processes, &new.processes)
        .into_iter()
        .map(
            |Pairing {
                 base: b,
                 new: n,
                 rule,
             }| ProcessDiff {
                rule,
                status: match (b, n) {
                    (Some(_), Some(_)) => "matched",
                    (None, _) => "added",
                    (_, None) => "removed",
                },
                base: b.map(|i| describe(base, &base_positions, &base_names, i)),
                new: n.map(|j| describe(new, &new_positions, &new_names, j)),
                metrics: Change::all(
                    b.map(|i| &base.processes[i].own),
                    n.map(|j| &new.processes[j].own),
                ),
            },
        )
        .collect();
    let rank = |p: &ProcessDiff| match p.status {
        "matched" => 0,
        "added" => 1,
        _ => 2,
    };
    let top = |p: &ProcessDiff| p.metrics.first().map_or(-1.0, Change::magnitude);
    // Stable: ties keep the new recording's tree order.
    out.sort_by(|a, b| rank(a).cmp(&rank(b)).then(top(b).total_cmp(&top(a))));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::metric;
    use crate::testkit::{at, exec, exit, fork, free, malloc, run};

    /// A root that allocates `n` blocks of 100 bytes and frees them, leaks `leaks` blocks of
    /// 10, and forks `children` children that each allocate one block of 50 and exit.
    fn program(n: u64, leaks: u64, children: u32) -> Report {
        let mut events = Vec::new();
        let mut t = 1;
        let mut next = |pid: u32, e| {
            t += 1;
            at(t, pid, pid, e)
        };
        events.push(next(1, exec("/bin/prog")));
        for i in 0..n {
            events.push(next(1, malloc(0x1000 + i, 100)));
            events.push(next(1, free(0x1000 + i)));
        }
        for i in 0..leaks {
            events.push(next(1, malloc(0x9000 + i, 10)));
        }
        for c in 0..children {
            let pid = 10 + c;
            events.push(next(1, fork(pid)));
            events.push(next(pid, malloc(0x5000, 50)));
            events.push(next(pid, free(0x5000)));
            events.push(next(pid, exit(0)));
        }
        events.push(next(1, exit(0)));
        run(events)
    }

    fn change(changes: &[Change], metric: metric::Metric) -> &Change {
        changes.iter().find(|c| c.metric == metric).unwrap()
    }

    #[test]
    fn run_metrics_differ_by_what_the_program_did() {
        use metric::Metric::*;
        let d = compare(&program(10, 1, 1), &program(20, 2, 2), 0);
        assert_eq!(change(&d.run, Allocations).change, Some(10 + 1 + 1));
        assert_eq!(change(&d.run, BytesAllocated).change, Some(1000 + 10 + 50));
        assert_eq!(change(&d.run, LeakedBytes).change, Some(10));
        assert_eq!(change(&d.run, LeakedBlocks).relative_percent, Some(100.0));
        assert_eq!(change(&d.run, PeakResident).base, None);
    }

    #[test]
    fn processes_are_matched_and_the_added_child_listed() {
        let d = compare(&program(10, 1, 1), &program(20, 2, 2), 0);
        let got: Vec<(&str, Rule, Option<u32>, Option<u32>)> = d
            .processes
            .iter()
            .map(|p| {
                (
                    p.status,
                    p.rule,
                    p.base.as_ref().map(|s| s.pid),
                    p.new.as_ref().map(|s| s.pid),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("matched", Rule::TreePosition, Some(1), Some(1)),
                ("matched", Rule::TreePosition, Some(10), Some(10)),
                ("added", Rule::Unmatched, None, Some(11)),
            ]
        );
        assert_eq!(
            d.processes[2].new.as_ref().unwrap().position,
            "prog[0]/prog[1]"
        );
    }

    #[test]
    fn same_report_has_no_change_and_no_notes() {
        let d = compare(&program(3, 1, 1), &program(3, 1, 1), 0);
        assert!(d.run.iter().all(Change::unchanged));
        assert!(d.notes.is_empty(), "{:?}", d.notes);
    }

    #[test]
    fn different_commands_are_noted() {
        let mut new = program(3, 1, 1);
        new.run.command = vec!["other".into()];
        let d = compare(&program(3, 1, 1), &new, 0);
        assert!(
            d.notes[0].starts_with("the recorded commands differ"),
            "{:?}",
            d.notes
        );
    }

    #[test]
    fn benchmarks_by_uri() {
        use crate::model::metrics::{BenchmarkMetrics, MarkerCounts};
        let bench = |uri: &str, allocs: u64| BenchmarkMetrics {
            uri: uri.into(),
            pids: vec![0],
            windows: 1,
            measured_ns: 1,
            markers: MarkerCounts::default(),
            metrics: Metrics {
                heap: crate::model::metrics::HeapMetrics {
                    allocs,
                    ..Default::default()
                },
                ..Metrics::default()
            },
            stacks: None,
        };
        let mut base = program(1, 0, 0);
        let mut new = program(1, 0, 0);
        base.benchmarks = vec![bench("a", 10), bench("gone", 1)];
        new.benchmarks = vec![bench("fresh", 2), bench("a", 15)];
        let d = compare(&base, &new, 0);
        let got: Vec<(&str, &str)> = d
            .benchmarks
            .iter()
            .map(|b| (b.uri.as_str(), b.status))
            .collect();
        assert_eq!(
            got,
            vec![("a", "matched"), ("fresh", "added"), ("gone", "removed")]
        );
        assert_eq!(
            change(&d.benchmarks[0].metrics, metric::Metric::Allocations).relative_percent,
            Some(50.0)
        );
    }
}
