//! Memory over time, part of the accounting pass: the run's and each process's live heap and
//! resident memory as decimated series, with the process lifecycle, benchmark windows and
//! markers on the same time axis. Read by `report --format timeline-csv`, `timeline-json` and
//! `html` (created only for those: a report without it pays one branch per event).
//!
//! Flow: `accounting` calls [`TimelinePass::note`] after it applied each event that can change
//! memory (the sums it reads are then final for that event), [`TimelinePass::lifecycle`] on
//! fork, exec and exit, and [`TimelinePass::control`] around each control command;
//! [`TimelinePass::finish`] reads the peaks from the same counters the report's `peak_live_bytes`
//! and resident `peak_bytes` come from, and turns the buckets into a [`Timeline`].
//!
//! Decimation (docs/report-schema.md, "Timeline"): a series is a list of buckets of equal width
//! (a power of two of nanoseconds) from the start of the recording; each holds the largest, the
//! smallest and the last value the counter had during its time. The end of the recording is not
//! known while streaming, so when an event falls past the last bucket the width doubles and
//! neighbouring buckets merge in pairs (max of maxes, min of mins, the later last): max and min
//! stay exact over each bucket's time, so a peak is never drawn lower than it was, and a series
//! never holds more than its capacity ([`RUN_BUCKETS`], [`PROCESS_BUCKETS`]) whatever the file
//! length. Only buckets where something changed are kept (between them the value holds).
//!
//! Scope (`report --pid`, `--tree`): the first series is the scope's own, "pid N" (the process
//! alone) or "tree N" (the sum over the tree, the sums its report peak comes from), instead of
//! the run's; only the scope's processes get series and lifecycle events (a tree's members; a
//! process none but its own). Benchmark windows and markers stay, as the time axis. A benchmark
//! scope (`--bench`) draws the run, its windows marked.
//!
//! Many processes: every process keeps its own coarser series (at most [`PROCESS_BUCKETS`]
//! buckets, so memory follows the processes, as the rest of the report does). At the end the
//! [`TOP_PROCESSES`] with the highest heap peak and those with the highest resident peak are
//! drawn; the others are summed into one "others" series on the same buckets: its `last` is the
//! exact sum at each bucket's end, its max (min) the sum of their maxima (minima), a bound that
//! is never lower (higher) than the true sum was.

use crate::format::{Bench, ControlCommand, MarkerKind};

use crate::model::metrics::Scope;

use super::resident::TOTAL;
use super::tree::{ProcIdx, ProcessTable};
use crate::model::timeline::{
    LifecycleEvent, Marker, PeakMark, Timeline, TimelinePoint, TimelineSeries, Window,
    PROCESS_BUCKETS, RUN_BUCKETS, TOP_PROCESSES,
};

/// Fork, exec and exit events kept for the time axis; more are counted, not listed.
const MAX_LIFECYCLE: usize = 10_000;

/// Benchmark windows and markers kept; a harness may send one per sample.
const MAX_WINDOWS: usize = 2_000;
const MAX_MARKERS: usize = 2_000;

/// The largest, smallest and last value of a counter over a bucket's time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Range {
    max: u64,
    min: u64,
    last: u64,
}

impl Range {
    /// A bucket entered with the counter at `value` (what it held since the previous change).
    fn starting_at(value: u64) -> Range {
        Range {
            max: value,
            min: value,
            last: value,
        }
    }

    /// The counter is now `value`.
    fn note(&mut self, value: u64) {
        self.max = self.max.max(value);
        self.min = self.min.min(value);
        self.last = value;
    }

    /// Merges the bucket that follows this one.
    fn merge(&mut self, later: &Range) {
        self.max = self.max.max(later.max);
        self.min = self.min.min(later.min);
        self.last = later.last;
    }

    /// Adds another process's range of the same bucket (for the "others" sum).
    fn add(&mut self, other: &Range) {
        self.max = self.max.saturating_add(other.max);
        self.min = self.min.saturating_add(other.min);
        self.last = self.last.saturating_add(other.last);
    }
}

/// One bucket: `[index << shift, (index + 1) << shift)` ns from the start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Bucket {
    index: u64,
    heap: Range,
    resident: Range,
}

/// A decimated series of heap and resident bytes.
#[derive(Clone, Debug, Default)]
struct Series {
    /// Buckets are `1 << shift` ns wide.
    shift: u32,
    /// Buckets where something changed, in time order.
    buckets: Vec<Bucket>,
}

impl Series {
    /// At `t` ns from the start (bucket width `1 << shift`, never narrower than the series'
    /// own), the counters are `heap` and `resident` bytes.
    fn note(&mut self, shift: u32, t: u64, heap: u64, resident: u64) {
        self.widen(shift);
        let index = t >> self.shift;
        match self.buckets.last_mut() {
            // Times only move forward (the caller clamps them), so the bucket is the last one.
            Some(b) if b.index >= index => {
                b.heap.note(heap);
                b.resident.note(resident);
            }
            last => {
                let (h, r) = last.map_or((0, 0), |b| (b.heap.last, b.resident.last));
                let mut b = Bucket {
                    index,
                    heap: Range::starting_at(h),
                    resident: Range::starting_at(r),
                };
                b.heap.note(heap);
                b.resident.note(resident);
                self.buckets.push(b);
            }
        }
    }

    /// Makes the buckets `1 << shift` ns wide (if they are narrower), merging neighbours.
    fn widen(&mut self, shift: u32) {
        if shift <= self.shift {
            return;
        }
        let by = shift - self.shift;
        self.shift = shift;
        let mut kept = 0;
        for k in 0..self.buckets.len() {
            let mut b = self.buckets[k];
            b.index >>= by;
            if kept > 0 && self.buckets[kept - 1].index == b.index {
                let into = &mut self.buckets[kept - 1];
                into.heap.merge(&b.heap);
                into.resident.merge(&b.resident);
            } else {
                self.buckets[kept] = b;
                kept += 1;
            }
        }
        self.buckets.truncate(kept);
    }

    /// The largest heap and resident values of the series.
    fn maxima(&self) -> (u64, u64) {
        self.buckets.iter().fold((0, 0), |(h, r), b| {
            (h.max(b.heap.max), r.max(b.resident.max))
        })
    }
}

/// The smallest shift whose `capacity` buckets reach past `t`.
fn shift_for(t: u64, capacity: u64, mut shift: u32) -> u32 {
    while shift < 63 && (t >> shift) >= capacity {
        shift += 1;
    }
    shift
}

/// What the first series follows, and which processes get their own.
#[derive(Debug)]
enum Follow {
    /// Every process (also for a benchmark scope).
    Run,
    /// The first process with `pid`, once seen.
    Process { pid: u32, first: Option<ProcIdx> },
    /// The tree of the first process with `pid`, once seen.
    Tree { pid: u32, root: Option<ProcIdx> },
}

impl Follow {
    fn new(scope: &Scope) -> Follow {
        match scope {
            Scope::Run | Scope::Benchmark { .. } => Follow::Run,
            Scope::Process { pid } => Follow::Process {
                pid: *pid,
                first: None,
            },
            Scope::Tree { pid } => Follow::Tree {
                pid: *pid,
                root: None,
            },
        }
    }

    /// The scope's process (its root, for a tree) once the table has it; `None` for the run.
    /// A pid reused during the recording names its first process, as the report's scope does.
    fn root(&mut self, table: &ProcessTable) -> Option<ProcIdx> {
        let (pid, slot) = match self {
            Follow::Run => return None,
            Follow::Process { pid, first } => (*pid, first),
            Follow::Tree { pid, root } => (*pid, root),
        };
        if slot.is_none() && table.latest(pid).is_some() {
            let k = table.procs().iter().position(|p| p.pid == pid);
            *slot = k.map(ProcIdx::new);
        }
        *slot
    }

    /// Whether process `i` is in the scope: drawn on its own, its lifecycle on the axis.
    fn takes(&mut self, table: &ProcessTable, i: ProcIdx) -> bool {
        match (self.root(table), &*self) {
            (_, Follow::Run) => true,
            (Some(first), Follow::Process { .. }) => first == i,
            (Some(root), Follow::Tree { .. }) => table.is_ancestor(root, i),
            (None, _) => false,
        }
    }

    /// The scope's live heap and resident bytes now; `None` before its process appeared.
    fn values(&mut self, table: &ProcessTable, page_bytes: u64) -> Option<(u64, u64)> {
        let sums = match (self.root(table), &*self) {
            (_, Follow::Run) => table.run(),
            (Some(i), Follow::Process { .. }) => {
                let p = &table[i];
                return Some((p.heap.live_bytes, process_resident(table, i, page_bytes)));
            }
            (Some(root), Follow::Tree { .. }) => table.sums(root),
            (None, _) => return None,
        };
        Some((
            sums.heap.live,
            sums.resident.live[TOTAL].saturating_mul(page_bytes),
        ))
    }
}

/// Process `i`'s resident bytes now: an exited process holds none, whatever its last counters
/// said.
fn process_resident(table: &ProcessTable, i: ProcIdx, page_bytes: u64) -> u64 {
    let p = &table[i];
    match p.resident.as_deref() {
        Some(r) if p.is_alive() => r.resident_pages().saturating_mul(page_bytes),
        _ => 0,
    }
}

/// The streaming state of the timeline.
#[derive(Debug)]
pub(super) struct TimelinePass {
    start_ns: u64,
    /// The scope: what the first series sums, which processes are drawn.
    follow: Follow,
    page_bytes: u64,
    /// The latest event time seen, ns from the start: events of different CPUs can arrive a
    /// little out of order, and buckets only move forward.
    now: u64,
    run_shift: u32,
    process_shift: u32,
    run: Series,
    /// Per process (by `ProcIdx`), once it changed memory.
    processes: Vec<Option<Box<Series>>>,
    lifecycle: Vec<LifecycleEvent>,
    lifecycle_omitted: u64,
    windows: Vec<Window>,
    windows_omitted: u64,
    /// The open window: its benchmark and start, ns from the start.
    open: Option<(String, u64)>,
    markers: Vec<Marker>,
    markers_omitted: u64,
    /// The benchmark the harness named last, which markers belong to.
    current_uri: Option<String>,
}

impl TimelinePass {
    /// A fresh timeline of `scope` in a recording that started at `start_ns` with pages of
    /// `page_bytes`.
    pub(super) fn new(start_ns: u64, page_bytes: u64, scope: &Scope) -> TimelinePass {
        TimelinePass {
            start_ns,
            follow: Follow::new(scope),
            page_bytes,
            now: 0,
            run_shift: 0,
            process_shift: 0,
            run: Series::default(),
            processes: Vec::new(),
            lifecycle: Vec::new(),
            lifecycle_omitted: 0,
            windows: Vec::new(),
            windows_omitted: 0,
            open: None,
            markers: Vec::new(),
            markers_omitted: 0,
            current_uri: None,
        }
    }

    /// Moves the clock to event time `ts` (absolute ns) and returns it relative to the start.
    fn tick(&mut self, ts: u64) -> u64 {
        self.now = self.now.max(ts.saturating_sub(self.start_ns));
        self.run_shift = shift_for(self.now, RUN_BUCKETS, self.run_shift);
        self.process_shift = shift_for(self.now, PROCESS_BUCKETS, self.process_shift);
        self.now
    }

    /// An event at `ts` was applied and may have changed the memory of process `i` (if known)
    /// and so the scope's: note both as they are now.
    pub(super) fn note(&mut self, table: &ProcessTable, i: Option<ProcIdx>, ts: u64) {
        let t = self.tick(ts);
        if let Some((heap, resident)) = self.follow.values(table, self.page_bytes) {
            self.run.note(self.run_shift, t, heap, resident);
        }
        let Some(i) = i else {
            return;
        };
        // A process scope's series is the process's own: it needs no second one.
        if matches!(self.follow, Follow::Process { .. }) || !self.follow.takes(table, i) {
            return;
        }
        let p = &table[i];
        let resident = process_resident(table, i, self.page_bytes);
        let k = i.get();
        if self.processes.len() <= k {
            self.processes.resize_with(k + 1, || None);
        }
        self.processes[k].get_or_insert_with(Box::default).note(
            self.process_shift,
            t,
            p.heap.live_bytes,
            resident,
        );
    }

    /// Process `pid` forked `child`, executed a program, or exited, at `ts`. Only the scope's
    /// processes' are kept, and the fork that started the scope's process.
    pub(super) fn lifecycle(&mut self, table: &ProcessTable, ts: u64, pid: u32, what: Lifecycle) {
        let at_ns = self.tick(ts);
        let mut takes = |pid: u32| {
            table
                .latest(pid)
                .is_some_and(|i| self.follow.takes(table, i))
        };
        let in_scope = match what {
            Lifecycle::Fork { child } => takes(pid) || takes(child),
            _ => takes(pid),
        };
        if !in_scope {
            return;
        }
        if self.lifecycle.len() >= MAX_LIFECYCLE {
            self.lifecycle_omitted += 1;
            return;
        }
        let mut e = LifecycleEvent {
            kind: "",
            at_ns,
            pid,
            child: None,
            command: None,
            exit_code: None,
        };
        match what {
            Lifecycle::Fork { child } => {
                e.kind = "fork";
                e.child = Some(child);
            }
            Lifecycle::Exec { command } => {
                e.kind = "exec";
                e.command = Some(command);
            }
            Lifecycle::Exit { status } => {
                e.kind = "exit";
                e.exit_code =
                    Some(crate::model::metrics::ExitInfo::from_status(status, 0).exit_code);
            }
        }
        self.lifecycle.push(e);
    }

    /// A control command at `ts` was applied; `window` is the benchmark window open after it
    /// (its benchmark's URI and start, absolute ns), as `bench` says.
    pub(super) fn control(
        &mut self,
        command: &ControlCommand,
        ts: u64,
        window: Option<(&str, u64)>,
    ) {
        let t = self.tick(ts);
        let window = window.map(|(uri, start)| (uri, start.saturating_sub(self.start_ns)));
        let same = match (&self.open, window) {
            (Some((uri, start)), Some((u, s))) => uri == u && *start == s,
            (None, None) => true,
            _ => false,
        };
        if !same {
            self.close_window(t);
            self.open = window.map(|(uri, start)| (uri.to_string(), start));
        }
        match command {
            ControlCommand::Bench(Bench { uri, .. }) => self.current_uri = Some(uri.clone()),
            ControlCommand::Marker { kind } => {
                if self.markers.len() >= MAX_MARKERS {
                    self.markers_omitted += 1;
                } else {
                    self.markers.push(Marker {
                        kind: marker_name(*kind),
                        at_ns: t,
                        uri: self.current_uri.clone(),
                    });
                }
            }
            ControlCommand::Start | ControlCommand::Stop => {}
        }
    }

    /// Ends the open window, if any, at `t` ns from the start.
    fn close_window(&mut self, t: u64) {
        let Some((uri, start_ns)) = self.open.take() else {
            return;
        };
        if self.windows.len() >= MAX_WINDOWS {
            self.windows_omitted += 1;
            return;
        }
        self.windows.push(Window {
            uri,
            start_ns,
            end_ns: t,
        });
    }

    /// Ends the pass at `end_ns` (absolute): the peaks come from the counters of `table`, the
    /// same ones the report's peaks come from.
    pub(super) fn finish(mut self, table: &ProcessTable, end_ns: u64) -> Timeline {
        let end = self.tick(end_ns);
        self.close_window(end);
        let start = self.start_ns;
        let page = self.page_bytes;
        let resident_recorded = table.has_resident();
        let mut series = vec![series_data(
            self.scope_head(table, resident_recorded),
            &self.run,
            resident_recorded,
        )];

        // Every process with a series, with its report peaks; rank them.
        let shift = self.process_shift;
        let mut ranked: Vec<(usize, PeakMark, Option<PeakMark>)> = Vec::new();
        for (k, s) in self.processes.iter_mut().enumerate() {
            let Some(s) = s.as_deref_mut() else {
                continue;
            };
            s.widen(shift);
            let (heap, resident) = process_peaks(table, ProcIdx::new(k), page, start);
            ranked.push((k, heap, resident));
        }
        let mut drawn = vec![false; self.processes.len()];
        let mut by_heap: Vec<usize> = (0..ranked.len()).collect();
        by_heap.sort_by_key(|&r| std::cmp::Reverse(ranked[r].1.bytes));
        for &r in by_heap.iter().take(TOP_PROCESSES) {
            if ranked[r].1.bytes > 0 {
                drawn[ranked[r].0] = true;
            }
        }
        let mut by_resident: Vec<usize> = (0..ranked.len()).collect();
        by_resident.sort_by_key(|&r| std::cmp::Reverse(ranked[r].2.map_or(0, |m| m.bytes)));
        for &r in by_resident.iter().take(TOP_PROCESSES) {
            if ranked[r].2.is_some_and(|m| m.bytes > 0) {
                drawn[ranked[r].0] = true;
            }
        }

        let mut others = vec![None::<(Range, Range)>; PROCESS_BUCKETS as usize];
        let mut other_count = 0u64;
        for (k, heap, resident) in ranked {
            let Some(s) = self.processes[k].as_deref() else {
                continue;
            };
            if drawn[k] {
                let p = &table[ProcIdx::new(k)];
                series.push(series_data(
                    SeriesHead {
                        name: format!("pid {}", p.pid),
                        pid: Some(p.pid),
                        command: Some(command_of(&p.argv, p.exe.as_deref())),
                        processes: 1,
                        heap_peak: heap,
                        resident_peak: if resident_recorded {
                            Some(resident.unwrap_or_default())
                        } else {
                            None
                        },
                    },
                    s,
                    resident_recorded,
                ));
            } else {
                other_count += 1;
                add_to_others(&mut others, s);
            }
        }
        if other_count > 0 {
            let buckets: Vec<Bucket> = others
                .iter()
                .enumerate()
                .filter_map(|(index, r)| {
                    r.map(|(heap, resident)| Bucket {
                        index: index as u64,
                        heap,
                        resident,
                    })
                })
                .collect();
            let s = Series { shift, buckets };
            let (heap_max, resident_max) = s.maxima();
            let moment = |pick: fn(&Bucket) -> u64, max: u64| {
                s.buckets
                    .iter()
                    .find(|b| pick(b) == max && max > 0)
                    .map(|b| b.index << shift)
            };
            let heap_peak = PeakMark::new(heap_max, moment(|b| b.heap.max, heap_max));
            let resident_peak = resident_recorded
                .then(|| PeakMark::new(resident_max, moment(|b| b.resident.max, resident_max)));
            series.push(series_data(
                SeriesHead {
                    name: "others".to_string(),
                    pid: None,
                    command: None,
                    processes: other_count,
                    heap_peak,
                    resident_peak,
                },
                &s,
                resident_recorded,
            ));
        }

        Timeline {
            end_ns: end,
            bucket_ns: 1u64 << self.run_shift,
            process_bucket_ns: 1u64 << shift,
            resident_recorded,
            series,
            events: self.lifecycle,
            events_omitted: self.lifecycle_omitted,
            windows: self.windows,
            windows_omitted: self.windows_omitted,
            markers: self.markers,
            markers_omitted: self.markers_omitted,
        }
    }
}

impl TimelinePass {
    /// The head of the first series: the run's, or the scope's process or tree, with the
    /// peaks of the counters the report's come from.
    fn scope_head(&mut self, table: &ProcessTable, resident_recorded: bool) -> SeriesHead {
        let (start, page) = (self.start_ns, self.page_bytes);
        let root = self.follow.root(table);
        let sums = match (&self.follow, root) {
            (Follow::Process { .. }, Some(i)) => {
                let p = &table[i];
                let (heap_peak, resident) = process_peaks(table, i, page, start);
                return SeriesHead {
                    name: format!("pid {}", p.pid),
                    pid: Some(p.pid),
                    command: Some(command_of(&p.argv, p.exe.as_deref())),
                    processes: 1,
                    heap_peak,
                    resident_peak: resident_recorded.then(|| resident.unwrap_or_default()),
                };
            }
            (Follow::Tree { .. }, Some(root)) => table.sums(root),
            _ => table.run(),
        };
        let (name, pid, command, processes) = match root {
            Some(root) => {
                let p = &table[root];
                let members = (0..table.procs().len())
                    .filter(|&k| table.is_ancestor(root, ProcIdx::new(k)))
                    .count();
                (
                    format!("tree {}", p.pid),
                    Some(p.pid),
                    Some(command_of(&p.argv, p.exe.as_deref())),
                    members as u64,
                )
            }
            None => ("run".to_string(), None, None, table.procs().len() as u64),
        };
        let resident = sums.resident.metrics(&[0; 4], page, start);
        SeriesHead {
            name,
            pid,
            command,
            processes,
            heap_peak: PeakMark::new(sums.heap.peak.value, sums.heap.peak.at(start)),
            resident_peak: resident_recorded
                .then(|| PeakMark::new(resident.peak_bytes, resident.peak_at_ns)),
        }
    }
}

/// Process `i`'s heap and resident peaks, the report's own values for it.
fn process_peaks(
    table: &ProcessTable,
    i: ProcIdx,
    page: u64,
    start: u64,
) -> (PeakMark, Option<PeakMark>) {
    let p = &table[i];
    let heap = PeakMark::new(p.heap.peak_bytes, p.heap.own_peak().at(start));
    let resident = p.resident.as_deref().map(|r| {
        let m = r.metrics(page, start);
        PeakMark::new(m.peak_bytes, m.peak_at_ns)
    });
    (heap, resident)
}

/// Adds process series `s` (at the final process width) into the per-bucket sums `others`:
/// where it has no bucket, it held its last value (0 before it started and after it exited).
fn add_to_others(others: &mut [Option<(Range, Range)>], s: &Series) {
    let mut held = (0u64, 0u64);
    let mut next = s.buckets.iter().peekable();
    for (index, slot) in others.iter_mut().enumerate() {
        let (heap, resident) = match next.next_if(|b| b.index == index as u64) {
            Some(b) => {
                held = (b.heap.last, b.resident.last);
                (b.heap, b.resident)
            }
            None if held == (0, 0) => continue,
            None => (Range::starting_at(held.0), Range::starting_at(held.1)),
        };
        let sum = slot.get_or_insert_with(Default::default);
        sum.0.add(&heap);
        sum.1.add(&resident);
    }
}

/// What happened to a process, for [`TimelinePass::lifecycle`].
pub(super) enum Lifecycle {
    /// It forked `child`.
    Fork { child: u32 },
    /// It executed `command` (its argv joined, or the file).
    Exec { command: String },
    /// It exited with kernel status `status`.
    Exit { status: i32 },
}

/// The command line of a process, as one string.
pub(super) fn command_of(argv: &[String], exe: Option<&str>) -> String {
    if !argv.is_empty() {
        argv.join(" ")
    } else {
        exe.unwrap_or("?").to_string()
    }
}

fn marker_name(kind: MarkerKind) -> &'static str {
    match kind {
        MarkerKind::SampleStart => "sample_start",
        MarkerKind::SampleEnd => "sample_end",
        MarkerKind::RoundStart => "round_start",
        MarkerKind::RoundEnd => "round_end",
    }
}

/// The head of one series, before its points.
struct SeriesHead {
    name: String,
    pid: Option<u32>,
    command: Option<String>,
    processes: u64,
    heap_peak: PeakMark,
    resident_peak: Option<PeakMark>,
}

fn series_data(head: SeriesHead, s: &Series, resident: bool) -> TimelineSeries {
    let points = s
        .buckets
        .iter()
        .map(|b| TimelinePoint {
            at_ns: b.index << s.shift,
            heap_max: b.heap.max,
            heap_min: b.heap.min,
            heap_last: b.heap.last,
            resident_max: resident.then_some(b.resident.max),
            resident_min: resident.then_some(b.resident.min),
            resident_last: resident.then_some(b.resident.last),
        })
        .collect();
    TimelineSeries {
        name: head.name,
        pid: head.pid,
        command: head.command,
        processes: head.processes,
        bucket_ns: 1u64 << s.shift,
        heap_peak: head.heap_peak,
        resident_peak: head.resident_peak,
        points,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::accounting::Accounting;
    use crate::format::RssMember;
    use crate::model::metrics::{Report, Scope};
    use crate::testkit::*;

    /// The report of `events` with its timeline.
    fn timeline_of(events: Vec<crate::format::Event>) -> (Report, Timeline) {
        let mut a = Accounting::new(&header()).with_timeline();
        for e in &events {
            a.apply(e);
        }
        let mut r = a.finish(None);
        let t = r.timeline.take().expect("timeline");
        (r, t)
    }

    fn series<'a>(t: &'a Timeline, name: &str) -> &'a TimelineSeries {
        t.series
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no series {name}"))
    }

    // --- the bucket arithmetic ---------------------------------------------------------------

    #[test]
    fn widening_merges_pairs_exactly() {
        let mut s = Series::default();
        for (t, v) in [(0u64, 5u64), (1, 9), (2, 1), (3, 4)] {
            s.note(0, t, v, 0);
        }
        s.widen(1);
        let got: Vec<(u64, u64, u64, u64)> = s
            .buckets
            .iter()
            .map(|b| (b.index, b.heap.max, b.heap.min, b.heap.last))
            .collect();
        // Bucket 0 starts at 0 (nothing before), holds 5 then 9; bucket 1 enters at 9.
        assert_eq!(got, vec![(0, 9, 0, 9), (1, 9, 1, 4)]);
    }

    #[test]
    fn a_bucket_starts_at_the_value_held_before_it() {
        let mut s = Series::default();
        s.note(4, 0, 100, 0);
        s.note(4, 1000, 40, 0);
        let b = s.buckets[1];
        assert_eq!((b.heap.max, b.heap.min, b.heap.last), (100, 40, 40));
    }

    #[test]
    fn shift_grows_to_fit() {
        assert_eq!(shift_for(0, 4, 0), 0);
        assert_eq!(shift_for(3, 4, 0), 0);
        assert_eq!(shift_for(4, 4, 0), 1);
        assert_eq!(shift_for(u64::MAX, 4, 0), 62);
    }

    // --- a stream whose peak falls inside a bucket ------------------------------------------

    /// A spike of 1 MiB lasting 1 ns in the middle of a long run of small changes: the run's
    /// series must keep it exactly, at the report's value and moment.
    #[test]
    fn peak_inside_a_bucket_keeps_its_exact_value() {
        let mut events = Vec::new();
        let mut t = 0;
        for i in 0..100_000u64 {
            t = i * 1_000;
            events.push(at(t, 1, 1, malloc(0x1000 + i, 10)));
            events.push(at(t + 1, 1, 1, free(0x1000 + i)));
            if i == 61_234 {
                events.push(at(t + 2, 1, 1, malloc(0x10, 1 << 20)));
                events.push(at(t + 3, 1, 1, free(0x10)));
            }
        }
        events.push(at(t + 10, 1, 1, exit(0)));
        let (r, tl) = timeline_of(events);
        let run = series(&tl, "run");
        assert!(
            run.points.len() <= RUN_BUCKETS as usize,
            "{}",
            run.points.len()
        );
        assert!(run.points.len() > RUN_BUCKETS as usize / 2);
        let max = run.points.iter().map(|p| p.heap_max).max().unwrap();
        assert_eq!(max, 1 << 20);
        assert_eq!(max, r.totals.heap.peak_live_bytes);
        assert_eq!(run.heap_peak.bytes, r.totals.heap.peak_live_bytes);
        assert_eq!(run.heap_peak.at_ns, r.totals.heap.peak_live_at_ns);
        assert_eq!(run.heap_peak.at_ns, Some(61_234_000 + 2));
        // The bucket holding the peak contains its moment.
        let p = run.points.iter().find(|p| p.heap_max == max).unwrap();
        let at = run.heap_peak.at_ns.unwrap();
        assert!(p.at_ns <= at && at < p.at_ns + run.bucket_ns);
        // Drops show: the minimum of busy buckets is 0.
        assert!(run.points.iter().all(|p| p.heap_min == 0));
        let pid1 = series(&tl, "pid 1");
        assert!(pid1.points.len() <= PROCESS_BUCKETS as usize);
        assert_eq!(
            pid1.points.iter().map(|p| p.heap_max).max(),
            Some(r.totals.heap.peak_live_bytes)
        );
    }

    #[test]
    fn resident_peak_is_the_reports() {
        let events = vec![
            at(0, 1, 1, rss(RssMember::Anon, 10, 10, true)),
            at(5, 1, 1, rss(RssMember::File, 5, 5, true)),
            at(9, 1, 1, rss(RssMember::Anon, -8, 2, true)),
            at(20, 1, 1, exit(0)),
        ];
        let (r, tl) = timeline_of(events);
        let res = r.totals.resident.as_ref().unwrap();
        let run = series(&tl, "run");
        let peak = run.resident_peak.unwrap();
        assert_eq!((peak.bytes, peak.at_ns), (res.peak_bytes, res.peak_at_ns));
        assert_eq!(peak.bytes, 15 * 4096);
        let max = run.points.iter().filter_map(|p| p.resident_max).max();
        assert_eq!(max, Some(15 * 4096));
        let last = run.points.last().unwrap();
        assert_eq!(last.resident_last, Some(0));
    }

    // --- many processes ----------------------------------------------------------------------

    /// 30 children, child k allocating k KiB at its own time: the top 10 are drawn, the other
    /// 20 summed; "others" at each bucket's end is the exact sum of what they held.
    #[test]
    fn others_sum_the_processes_not_drawn() {
        let mut events = Vec::new();
        for k in 1..=30u32 {
            let pid = 100 + k;
            let t = u64::from(k) * 1_000_000;
            events.push(at(t, 1, 1, fork(pid)));
            events.push(at(t + 1, pid, pid, malloc(0x10, u64::from(k) * 1024)));
        }
        events.push(at(40_000_000, 1, 1, exit(0)));
        let (r, tl) = timeline_of(events);
        let drawn: Vec<u32> = tl.series.iter().filter_map(|s| s.pid).collect();
        assert_eq!(drawn, (121..=130).collect::<Vec<u32>>());
        let others = series(&tl, "others");
        assert_eq!(others.processes, 21); // children 1..20 and the root, which allocated nothing
        let sum: u64 = (1..=20u64).map(|k| k * 1024).sum();
        assert_eq!(others.points.last().unwrap().heap_last, sum);
        assert_eq!(others.heap_peak.bytes, sum);
        // The run is exact and is the sum of everything.
        assert_eq!(
            series(&tl, "run").heap_peak.bytes,
            r.totals.heap.peak_live_bytes
        );
        let all: u64 = (1..=30u64).map(|k| k * 1024).sum();
        assert_eq!(r.totals.heap.peak_live_bytes, all);
        let p = series(&tl, "pid 130");
        assert_eq!(p.heap_peak.bytes, 30 * 1024);
        assert_eq!(p.command.as_deref(), Some("/bin/root arg"));
    }

    #[test]
    fn lifecycle_windows_and_markers_are_on_the_axis() {
        let events = vec![
            at(0, 1, 1, malloc(0x10, 8)),
            at(10, 1, 1, fork(2)),
            at(20, 2, 2, exec("/bin/<child>")),
            // A recording without the control feature measures from the start: `bench` opens
            // the window and `start` changes nothing.
            bench(25, "bench://a", 0),
            start(30),
            marker(35, MarkerKind::SampleStart),
            stop(40),
            at(50, 2, 2, exit(3 << 8)),
            at(60, 1, 1, exit(0)),
        ];
        let (_, tl) = timeline_of(events);
        let kinds: Vec<(&str, u64, u32)> =
            tl.events.iter().map(|e| (e.kind, e.at_ns, e.pid)).collect();
        assert_eq!(
            kinds,
            vec![
                ("fork", 10, 1),
                ("exec", 20, 2),
                ("exit", 50, 2),
                ("exit", 60, 1)
            ]
        );
        assert_eq!(tl.events[0].child, Some(2));
        assert_eq!(tl.events[1].command.as_deref(), Some("/bin/<child> -x"));
        assert_eq!(tl.events[2].exit_code, Some(3));
        assert_eq!(
            tl.windows,
            vec![Window {
                uri: "bench://a".into(),
                start_ns: 25,
                end_ns: 40
            }]
        );
        assert_eq!(tl.markers.len(), 1);
        assert_eq!(
            (tl.markers[0].kind, tl.markers[0].at_ns),
            ("sample_start", 35)
        );
        assert_eq!(tl.markers[0].uri.as_deref(), Some("bench://a"));
        assert_eq!(tl.end_ns, 60);
    }

    #[test]
    fn an_open_window_ends_with_the_recording() {
        let events = vec![bench(5, "b", 0), at(70, 1, 1, malloc(1, 1))];
        let (_, tl) = timeline_of(events);
        assert_eq!((tl.windows[0].start_ns, tl.windows[0].end_ns), (5, 70));
    }

    #[test]
    fn the_default_report_has_no_timeline() {
        let r = run(seq(vec![malloc(1, 1)]));
        assert!(r.timeline.is_none());
        let json = serde_json::to_value(&r).unwrap();
        assert!(json.get("timeline").is_none());
    }

    // --- scope ------------------------------------------------------------------------------

    /// Process 1 forks 2, which forks 3; 1 also forks 4. Each allocates and holds its block
    /// while the next one does, so the tree of 2 peaks at 2's and 3's blocks together.
    fn family() -> Vec<crate::format::Event> {
        vec![
            at(0, 1, 1, malloc(0x10, 1000)),
            at(10, 1, 1, fork(2)),
            at(20, 2, 2, malloc(0x20, 200)),
            at(30, 2, 2, fork(3)),
            at(40, 3, 3, malloc(0x30, 30)),
            at(50, 3, 3, rss(RssMember::Anon, 3, 3, true)),
            at(60, 1, 1, fork(4)),
            at(70, 4, 4, malloc(0x40, 4000)),
            at(80, 3, 3, exit(0)),
            at(90, 2, 2, free(0x20)),
            at(100, 4, 4, exit(0)),
            at(110, 2, 2, exit(0)),
            at(120, 1, 1, exit(0)),
        ]
    }

    /// The timeline of `scope` and the report narrowed to it.
    fn scoped(scope: Scope) -> (Report, Timeline) {
        let mut a = Accounting::new(&header()).with_timeline_of(&scope);
        for e in &family() {
            a.apply(e);
        }
        let mut r = a.finish(None).narrow(scope).unwrap();
        let t = r.timeline.take().expect("timeline");
        (r, t)
    }

    #[test]
    fn a_tree_scope_draws_the_tree_and_its_members_only() {
        let (r, tl) = scoped(Scope::Tree { pid: 2 });
        let names: Vec<&str> = tl.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["tree 2", "pid 2", "pid 3"]);
        let tree = &tl.series[0];
        assert_eq!(tree.processes, 2);
        assert_eq!(tree.heap_peak.bytes, 230);
        assert_eq!(tree.heap_peak.bytes, r.totals.heap.peak_live_bytes);
        assert_eq!(tree.heap_peak.at_ns, r.totals.heap.peak_live_at_ns);
        let res = r.totals.resident.as_ref().unwrap();
        let peak = tree.resident_peak.unwrap();
        assert_eq!((peak.bytes, peak.at_ns), (res.peak_bytes, res.peak_at_ns));
        // 4000 bytes of pid 4 and 1000 of pid 1 are outside: the curve never holds them.
        assert_eq!(tree.points.iter().map(|p| p.heap_max).max(), Some(230));
        let events: Vec<(&str, u32)> = tl.events.iter().map(|e| (e.kind, e.pid)).collect();
        // The fork that started 2 is on the axis; 1's fork of 4 and the exits of 1 and 4 are not.
        assert_eq!(events, [("fork", 1), ("fork", 2), ("exit", 3), ("exit", 2)]);
    }

    #[test]
    fn a_process_scope_draws_the_process_alone() {
        let (r, tl) = scoped(Scope::Process { pid: 2 });
        assert_eq!(tl.series.len(), 1);
        let s = &tl.series[0];
        assert_eq!((s.name.as_str(), s.pid, s.processes), ("pid 2", Some(2), 1));
        assert_eq!(s.heap_peak.bytes, 200);
        assert_eq!(s.heap_peak.bytes, r.totals.heap.peak_live_bytes);
        assert_eq!(s.heap_peak.at_ns, r.totals.heap.peak_live_at_ns);
        assert_eq!(s.points.iter().map(|p| p.heap_max).max(), Some(200));
        assert_eq!(s.points.last().unwrap().heap_last, 0);
        let events: Vec<(&str, u32)> = tl.events.iter().map(|e| (e.kind, e.pid)).collect();
        assert_eq!(events, [("fork", 1), ("fork", 2), ("exit", 2)]);
    }

    #[test]
    fn a_scope_of_a_pid_not_recorded_draws_nothing_and_does_not_panic() {
        let mut a = Accounting::new(&header()).with_timeline_of(&Scope::Tree { pid: 99 });
        for e in &family() {
            a.apply(e);
        }
        let tl = a.finish(None).timeline.unwrap();
        assert_eq!(tl.series.len(), 1);
        assert!(tl.series[0].points.is_empty());
        assert!(tl.events.is_empty());
    }

    #[test]
    fn empty_recording_has_an_empty_run_series() {
        let (_, tl) = timeline_of(Vec::new());
        assert_eq!(tl.series.len(), 1);
        assert!(tl.series[0].points.is_empty());
        assert_eq!(tl.series[0].heap_peak.at_ns, None);
    }
}
