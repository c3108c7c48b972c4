//! Benchmark scoping, part of the accounting pass: whether the harness is measuring, which
//! benchmark is current and in which pid, and each benchmark's own counters.
//!
//! Flow: `accounting` hands every `Control` event to [`Benchmarks::control`]; for each
//! allocator event it asks [`Benchmarks::measured_in`] which benchmark (if any) measures the
//! event's process (a window is open and the process descends from the benchmark's pid in the
//! [`ProcessTable`]), counts the event in that benchmark's [`Bench`] as well as in the process,
//! and lets the benchmark follow its blocks ([`Benchmarks::insert`], [`Benchmarks::free`],
//! [`Benchmarks::drop_blocks`]). At the end, [`Benchmarks::metrics`] turns them into
//! `metrics::BenchmarkMetrics`.
//!
//! The rules (also in docs/report-schema.md, "Benchmarks"):
//! - a benchmark is a URI; `bench URI PID` makes it current, in PID and its descendants through
//!   recorded forks (forks are recorded while paused too, so a child forked before `start` still
//!   counts). PID 0 means every process;
//! - a window is a stretch of the stream where measuring is on (between `start` and `stop`) and
//!   the benchmark is current: `bench` while measuring ends the previous benchmark's window and
//!   opens one for the new one; a window still open at the end ends with the recording;
//! - a block allocated inside a window belongs to that benchmark until a recorded free releases
//!   it (whenever that free comes); a free inside a window of a block the benchmark does not own
//!   is one of its `unknown_frees`;
//! - frees are recorded while paused too (allocations are not), so a benchmark's `leaked`
//!   blocks are those still live when their process exited, wherever they were freed; a
//!   paused free of a block never seen allocated is the harness's own and counts nowhere;
//! - with leak scans, a benchmark's leaked blocks are split by the scan of their process at
//!   its exit, whenever that comes (a process outliving the window is judged at its end, for
//!   every benchmark that left blocks in it); blocks of a process not scanned or still running
//!   at the end are `not_scanned` ([`BenchSplit`]).

use std::collections::{HashMap, HashSet};

use crate::format::{self, ControlCommand, MarkerKind};

use super::counters::HeapCounters;
use super::resident::{ResidentSum, MEMBERS};
use super::tree::{Proc, ProcIdx, ProcessTable};
use crate::model::metrics::{BenchmarkMetrics, Blocks, MarkerCounts, Metrics};

/// How a process's exit splits the leaked blocks benchmarks own in it: by its leak scan's
/// lost addresses, or not at all (killed, no `_exit`, a failed scan, or a scan whose list of
/// lost addresses was cut short, which cannot tell the benchmarks' blocks apart).
#[derive(Debug)]
pub(super) enum BenchSplit {
    /// Scanned: the addresses of its definitely lost blocks.
    Scanned(HashSet<u64>),
    /// Not scanned.
    NotScanned,
}

impl BenchSplit {
    /// The split of a process whose scan is `scan` (`None`: it has none).
    pub(super) fn of(scan: Option<&format::LeakScan>) -> BenchSplit {
        match scan {
            Some(s) if s.failure.is_empty() && s.lost_blocks <= s.lost.len() as u64 => {
                BenchSplit::Scanned(s.lost.iter().copied().collect())
            }
            _ => BenchSplit::NotScanned,
        }
    }
}

/// One benchmark's counters.
#[derive(Debug, Default)]
pub(super) struct Bench {
    uri: String,
    pids: Vec<u32>,
    windows: u64,
    measured_ns: u64,
    markers: MarkerCounts,
    /// Heap counters inside its windows; `live_bytes` and the peak are those of its own blocks.
    pub(super) heap: HeapCounters,
    /// Processes whose allocator events were counted.
    counted: HashSet<ProcIdx>,
    /// Its pid tree's resident sums, followed while a window is open; `None` until resident
    /// memory was seen inside a window.
    resident: Option<ResidentSum>,
}

impl Bench {
    /// Its pid tree's resident sums are `live` (pages, per member and total) at `ts`.
    fn follow_resident(&mut self, live: &[u64; MEMBERS + 1], ts: u64) {
        self.resident
            .get_or_insert_with(ResidentSum::default)
            .follow(live, ts);
    }
}

/// The scoping state of the stream and every benchmark seen so far.
#[derive(Debug)]
pub(super) struct Benchmarks {
    list: Vec<Bench>,
    by_uri: HashMap<String, usize>,
    /// Whether the harness is measuring (the gate is open).
    measuring: bool,
    /// Index of the current benchmark, `None` before the first `bench`.
    current: Option<usize>,
    /// The pid the current benchmark runs in (0: every process).
    root_pid: u32,
    /// The process of `root_pid`, `None` until it is known.
    root: Option<ProcIdx>,
    /// When the open window started, if one is open.
    window_start_ns: Option<u64>,
    /// The (benchmark, process) last passed to `count_process`: consecutive events mostly
    /// share them.
    last_counted: Option<(usize, ProcIdx)>,
}

impl Benchmarks {
    /// Whether the harness is measuring now (the gate is open).
    pub(super) fn measuring(&self) -> bool {
        self.measuring
    }

    /// No benchmark yet; `measuring` is the gate at the start of the recording.
    pub(super) fn new(measuring: bool) -> Benchmarks {
        Benchmarks {
            list: Vec::new(),
            by_uri: HashMap::new(),
            measuring,
            current: None,
            root_pid: 0,
            root: None,
            window_start_ns: None,
            last_counted: None,
        }
    }

    /// Notes that process `i` had an event counted in benchmark `b`.
    #[inline]
    fn count_process(&mut self, b: usize, i: ProcIdx) {
        if self.last_counted != Some((b, i)) {
            self.last_counted = Some((b, i));
            self.list[b].counted.insert(i);
        }
    }

    /// The benchmark whose window is open, if one is.
    #[inline]
    pub(super) fn window(&self) -> Option<usize> {
        self.window_start_ns.and(self.current)
    }

    /// The open window's benchmark URI and start (absolute ns), if one is open (the timeline
    /// draws the windows).
    pub(super) fn open_window_of(&self) -> Option<(&str, u64)> {
        let b = self.window()?;
        Some((self.list[b].uri.as_str(), self.window_start_ns?))
    }

    /// The benchmark whose window is open, if process `i` is measured in it: `i` is the
    /// benchmark's pid or descends from it, and is not a control client. Without an open
    /// window (every event of a recording without control commands) this is one check.
    #[inline(always)]
    pub(super) fn measured_in(&mut self, table: &ProcessTable, i: ProcIdx) -> Option<usize> {
        let b = self.window()?;
        self.measured_in_window(table, i, b)
    }

    #[inline(never)]
    fn measured_in_window(&mut self, table: &ProcessTable, i: ProcIdx, b: usize) -> Option<usize> {
        if table[i].control_client {
            return None;
        }
        if self.root_pid != 0 {
            let root = self.root(table)?;
            if !table.is_ancestor(root, i) {
                return None;
            }
        }
        self.count_process(b, i);
        Some(b)
    }

    /// The process of the current benchmark's pid, once it is known: a pid the harness named
    /// before any event of it arrived is looked up again later.
    fn root(&mut self, table: &ProcessTable) -> Option<ProcIdx> {
        if self.root.is_none() {
            self.root = table.alive(self.root_pid);
        }
        self.root
    }

    /// Raises the open window's benchmark's resident peaks to its pid tree's sums now.
    pub(super) fn follow_resident(&mut self, table: &ProcessTable, ts: u64) {
        let Some(b) = self.window() else {
            return;
        };
        if !table.has_resident() {
            return; // no resident memory recorded (yet)
        }
        let live = if self.root_pid == 0 {
            table.run().resident.live
        } else {
            match self.root(table) {
                Some(root) => table.sums(root).resident.live,
                None => return,
            }
        };
        self.list[b].follow_resident(&live, ts);
    }

    /// Process `p` allocated the block `addr` of `size` bytes, measured in benchmark `bench`
    /// (if any), replacing a live block of `replaced` bytes at the same address (if any): the
    /// replaced block leaves its benchmark, the new one joins `bench`.
    #[inline(always)]
    pub(super) fn insert(
        &mut self,
        p: &mut Proc,
        addr: u64,
        size: u64,
        ts: u64,
        bench: Option<usize>,
        replaced: Option<u64>,
    ) {
        if bench.is_some() || (replaced.is_some() && !p.bench_blocks.is_empty()) {
            self.insert_block(p, addr, size, ts, bench, replaced);
        }
    }

    #[inline(never)]
    fn insert_block(
        &mut self,
        p: &mut Proc,
        addr: u64,
        size: u64,
        ts: u64,
        bench: Option<usize>,
        replaced: Option<u64>,
    ) {
        if let Some(old_size) = replaced {
            // Its free was not seen; the older block leaves its benchmark's live heap.
            if let Some(old) = p.bench_blocks.remove(&addr) {
                self.list[old].heap.shrink_live(old_size);
            }
            if let Some(b) = bench {
                self.list[b].heap.duplicate_allocs += 1;
            }
        }
        if let Some(b) = bench {
            p.bench_blocks.insert(addr, b);
            self.list[b].heap.grow_live(size, ts);
        }
    }

    /// Process `p` released its live block `addr` of `size` bytes (`temporary` as the process
    /// counted it): the benchmark that owns the block counts the free; otherwise the benchmark
    /// measuring `p` now (`measured`), if any, counts an unknown free. Call it only when `p`
    /// holds benchmark blocks or is measured.
    #[inline(never)]
    pub(super) fn free(
        &mut self,
        p: &mut Proc,
        addr: u64,
        size: u64,
        temporary: bool,
        measured: Option<usize>,
    ) {
        match (p.bench_blocks.remove(&addr), measured) {
            (Some(b), _) => {
                let heap = &mut self.list[b].heap;
                heap.count_free(size);
                if temporary {
                    heap.temporary += 1;
                }
                heap.shrink_live(size);
            }
            (None, Some(b)) => self.list[b].heap.unknown_frees += 1,
            (None, None) => {}
        }
    }

    /// Process `p`'s live heap goes away (at exec, or at exit when `at_exit`): the blocks
    /// benchmarks own in it leave their live heaps as `dropped_at_exec` or `leaked`. At an
    /// exit of a recording with leak scans, `split` is the process's scan: each benchmark's
    /// leaked blocks are split by it into definitely lost and still reachable, or not scanned.
    pub(super) fn drop_blocks(&mut self, p: &mut Proc, at_exit: bool, split: Option<&BenchSplit>) {
        if p.bench_blocks.is_empty() {
            return;
        }
        let mut touched: Vec<usize> = Vec::new();
        for (addr, b) in std::mem::take(&mut p.bench_blocks) {
            let bytes = p.live.get(&addr).copied().unwrap_or(0);
            let heap = &mut self.list[b].heap;
            heap.shrink_live(bytes);
            let block = Blocks { blocks: 1, bytes };
            let gone = if at_exit {
                &mut heap.leaked
            } else {
                &mut heap.dropped_at_exec
            };
            *gone = gone.plus(block);
            if let (true, Some(split)) = (at_exit, split) {
                let l = heap.leaks.get_or_insert_with(Default::default);
                match split {
                    BenchSplit::Scanned(lost) if lost.contains(&addr) => {
                        l.definitely_lost = l.definitely_lost.plus(block)
                    }
                    BenchSplit::Scanned(_) => l.still_reachable = l.still_reachable.plus(block),
                    BenchSplit::NotScanned => l.not_scanned = l.not_scanned.plus(block),
                }
                if !touched.contains(&b) {
                    touched.push(b);
                }
            }
        }
        // Each benchmark counts the processes whose exit split its blocks.
        for b in touched {
            if let Some(l) = self.list[b].heap.leaks.as_mut() {
                match split {
                    Some(BenchSplit::Scanned(_)) => l.scanned_processes += 1,
                    _ => l.unscanned_processes += 1,
                }
            }
        }
    }

    /// At the end of the recording, the blocks benchmarks own in the live process `p` are their
    /// leaks: no recorded free released them. In a recording with leak scans (`leak_scan`),
    /// they are not scanned: their process had not exited.
    pub(super) fn leak_blocks(&mut self, p: &Proc, leak_scan: bool) {
        let mut touched: Vec<usize> = Vec::new();
        for (addr, &b) in &p.bench_blocks {
            let bytes = p.live.get(addr).copied().unwrap_or(0);
            let block = Blocks { blocks: 1, bytes };
            let heap = &mut self.list[b].heap;
            heap.leaked = heap.leaked.plus(block);
            if leak_scan {
                let l = heap.leaks.get_or_insert_with(Default::default);
                l.not_scanned = l.not_scanned.plus(block);
                if !touched.contains(&b) {
                    touched.push(b);
                    l.unscanned_processes += 1;
                }
            }
        }
    }

    /// The URI of benchmark `b`.
    pub(super) fn uri(&self, b: usize) -> &str {
        &self.list[b].uri
    }

    /// The heap counters of benchmark `b`.
    #[inline]
    pub(super) fn heap(&mut self, b: usize) -> &mut HeapCounters {
        &mut self.list[b].heap
    }

    /// Applies a control command seen at `ts`. `alive` gives the live process of a pid, if
    /// there is one. Returns whether a window opened, so the caller can take the benchmark's
    /// resident memory at its start.
    pub(super) fn control(
        &mut self,
        command: &ControlCommand,
        ts: u64,
        alive: impl FnOnce(u32) -> Option<ProcIdx>,
    ) -> bool {
        match command {
            ControlCommand::Start => {
                if self.measuring {
                    return false;
                }
                self.measuring = true;
                self.open_window(ts)
            }
            ControlCommand::Stop => {
                self.close_window(ts);
                self.measuring = false;
                false
            }
            ControlCommand::Bench(format::Bench { uri, pid }) => {
                self.close_window(ts);
                let b = match self.by_uri.get(uri) {
                    Some(&b) => b,
                    None => {
                        self.list.push(Bench {
                            uri: uri.clone(),
                            ..Bench::default()
                        });
                        self.by_uri.insert(uri.clone(), self.list.len() - 1);
                        self.list.len() - 1
                    }
                };
                let bench = &mut self.list[b];
                if !bench.pids.contains(pid) {
                    bench.pids.push(*pid);
                }
                self.current = Some(b);
                self.root_pid = *pid;
                self.root = if *pid == 0 { None } else { alive(*pid) };
                self.measuring && self.open_window(ts)
            }
            ControlCommand::Marker { kind } => {
                if let Some(b) = self.current {
                    let m = &mut self.list[b].markers;
                    let n = match kind {
                        MarkerKind::SampleStart => &mut m.sample_start,
                        MarkerKind::SampleEnd => &mut m.sample_end,
                        MarkerKind::RoundStart => &mut m.round_start,
                        MarkerKind::RoundEnd => &mut m.round_end,
                    };
                    *n = n.saturating_add(1);
                }
                false
            }
        }
    }

    /// Opens a window for the current benchmark at `ts`, if there is one.
    fn open_window(&mut self, ts: u64) -> bool {
        let Some(b) = self.current else {
            return false;
        };
        self.list[b].windows += 1;
        self.window_start_ns = Some(ts);
        true
    }

    /// Closes the open window, if any, at `ts`.
    fn close_window(&mut self, ts: u64) {
        if let (Some(start), Some(b)) = (self.window_start_ns.take(), self.current) {
            let bench = &mut self.list[b];
            bench.measured_ns = bench.measured_ns.saturating_add(ts.saturating_sub(start));
        }
    }

    /// Ends the pass at `end_ns`: a window still open (no `stop` ever came) ends there.
    pub(super) fn finish(&mut self, end_ns: u64) {
        self.close_window(end_ns);
    }

    /// The metrics of every benchmark, in the order they were first named.
    pub(super) fn metrics(&self, page_bytes: u64, start_ns: u64) -> Vec<BenchmarkMetrics> {
        self.list
            .iter()
            .map(|b| {
                BenchmarkMetrics {
                    uri: b.uri.clone(),
                    pids: b.pids.clone(),
                    windows: b.windows,
                    measured_ns: b.measured_ns,
                    markers: b.markers,
                    metrics: Metrics {
                        processes: b.counted.len() as u64,
                        heap: b.heap.to_metrics(b.heap.own_peak(), start_ns),
                        resident: b
                            .resident
                            .as_ref()
                            .map(|r| r.metrics(&[0; MEMBERS], page_bytes, start_ns)),
                        // Raw mappings are not scoped to benchmarks (yet).
                        mapped: None,
                    },
                    // Filled in by the sites pass, when there is one.
                    stacks: None,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bench(uri: &str, pid: u32) -> ControlCommand {
        ControlCommand::Bench(format::Bench {
            uri: uri.into(),
            pid,
        })
    }

    fn apply(b: &mut Benchmarks, command: ControlCommand, ts: u64) -> bool {
        b.control(&command, ts, |_| None)
    }

    #[test]
    fn no_window_before_a_bench() {
        let mut b = Benchmarks::new(false);
        assert!(!apply(&mut b, ControlCommand::Start, 1));
        assert_eq!(b.window(), None);
        assert!(apply(&mut b, bench("a", 5), 2));
        assert_eq!(b.window(), Some(0));
    }

    #[test]
    fn start_stop_opens_and_closes() {
        let mut b = Benchmarks::new(false);
        apply(&mut b, bench("a", 5), 1);
        assert_eq!(b.window(), None);
        assert!(apply(&mut b, ControlCommand::Start, 10));
        assert!(!apply(&mut b, ControlCommand::Start, 15));
        apply(&mut b, ControlCommand::Stop, 30);
        apply(&mut b, ControlCommand::Stop, 40);
        assert_eq!(b.window(), None);
        let m = b.metrics(4096, 0);
        assert_eq!((m[0].windows, m[0].measured_ns), (1, 20));
    }

    #[test]
    fn bench_while_measuring_switches_windows() {
        let mut b = Benchmarks::new(true);
        apply(&mut b, bench("a", 5), 10);
        apply(&mut b, bench("b", 6), 25);
        assert_eq!(b.window(), Some(1));
        apply(&mut b, bench("a", 7), 30);
        b.finish(100);
        let m = b.metrics(4096, 0);
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].windows, m[0].measured_ns), (2, 15 + 70));
        assert_eq!(m[0].pids, vec![5, 7]);
        assert_eq!((m[1].windows, m[1].measured_ns), (1, 5));
        assert_eq!(b.root_pid, 7);
    }

    #[test]
    fn open_window_ends_with_the_recording() {
        let mut b = Benchmarks::new(false);
        apply(&mut b, bench("a", 5), 10);
        apply(&mut b, ControlCommand::Start, 20);
        b.finish(50);
        assert_eq!(b.metrics(4096, 0)[0].measured_ns, 30);
    }

    #[test]
    fn markers_count_for_the_current_benchmark() {
        let mut b = Benchmarks::new(false);
        let marker = |kind| ControlCommand::Marker { kind };
        apply(&mut b, marker(MarkerKind::RoundStart), 1);
        apply(&mut b, bench("a", 5), 2);
        apply(&mut b, marker(MarkerKind::SampleStart), 3);
        apply(&mut b, marker(MarkerKind::SampleEnd), 4);
        apply(&mut b, marker(MarkerKind::SampleStart), 5);
        apply(&mut b, marker(MarkerKind::RoundEnd), 6);
        let m = b.metrics(4096, 0)[0].markers;
        assert_eq!(
            m,
            MarkerCounts {
                sample_start: 2,
                sample_end: 1,
                round_start: 0,
                round_end: 1,
            }
        );
    }

    #[test]
    fn root_is_resolved_at_the_bench_command() {
        let mut b = Benchmarks::new(false);
        b.control(&bench("a", 5), 1, |pid| {
            Some(ProcIdx::new(pid as usize * 10))
        });
        assert_eq!((b.root_pid, b.root), (5, Some(ProcIdx::new(50))));
        b.control(&bench("all", 0), 2, |_| panic!("pid 0 names no process"));
        assert_eq!((b.root_pid, b.root), (0, None));
    }
}

/// The rules on synthetic streams through the whole accounting pass.
#[cfg(test)]
mod stream_tests {
    use crate::format::{EventKind, Exec, Header, MarkerKind, RssMember, FEATURE_CONTROL};
    use crate::model::metrics::{BenchmarkMetrics, Blocks, Report};
    use crate::testkit::*;

    /// A header of a `record --control` recording: measuring starts paused.
    fn paused() -> Header {
        Header {
            features: vec!["alloc".into(), FEATURE_CONTROL.into()],
            ..header()
        }
    }

    fn report(events: Vec<crate::format::Event>) -> Report {
        analyze(&paused(), events, None)
    }

    fn bench_of<'a>(r: &'a Report, uri: &str) -> &'a BenchmarkMetrics {
        r.benchmarks
            .iter()
            .find(|b| b.uri == uri)
            .unwrap_or_else(|| panic!("no benchmark {uri} in {:?}", r.benchmarks))
    }

    /// (allocs, bytes_allocated, frees, bytes_freed) of benchmark `uri`.
    fn counts(r: &Report, uri: &str) -> (u64, u64, u64, u64) {
        let h = &bench_of(r, uri).metrics.heap;
        (h.allocs, h.bytes_allocated, h.frees, h.bytes_freed)
    }

    #[test]
    fn only_allocations_inside_the_window_count() {
        let r = report(vec![
            bench(0, "a", 1),
            at(1, 1, 1, malloc(0x10, 5)),
            start(2),
            at(3, 1, 1, malloc(0x20, 100)),
            at(4, 1, 1, malloc(0x30, 10)),
            at(5, 1, 1, free(0x30)),
            stop(6),
            at(7, 1, 1, malloc(0x40, 7)),
        ]);
        assert_eq!(counts(&r, "a"), (2, 110, 1, 10));
        let b = bench_of(&r, "a");
        assert_eq!((b.windows, b.measured_ns, b.pids.clone()), (1, 4, vec![1]));
        assert_eq!(b.metrics.processes, 1);
        // The run and the process still count everything in the file.
        assert_eq!(r.totals.heap.allocs, 4);
    }

    /// Issue 13, item 6: a shell harness allocates a job entry for `ctl stop` inside the window
    /// and frees it after; the free is recorded while paused, so the benchmark leaks nothing.
    #[test]
    fn a_block_of_the_window_freed_after_stop_is_not_leaked() {
        let r = report(vec![
            bench(0, "a", 1),
            start(1),
            at(2, 1, 1, malloc(0x20, 16)),
            stop(3),
            at(4, 1, 1, free(0x20)),
            // Allocated while paused, so never seen: the harness's own, counted nowhere.
            at(5, 1, 1, free(0x90)),
            at(6, 1, 1, exit(0)),
        ]);
        let b = bench_of(&r, "a");
        assert_eq!(b.metrics.heap.leaked, Blocks::default());
        assert_eq!(counts(&r, "a"), (1, 16, 1, 16));
        assert_eq!(b.metrics.heap.unknown_frees, 0);
        assert_eq!(r.totals.heap.unknown_frees, 0);
        assert_eq!(r.totals.heap.leaked, Blocks::default());
    }

    #[test]
    fn processes_outside_the_pid_tree_are_excluded_while_measuring() {
        // Root 1 forks the benchmark process 2 and a noise process 3, its sibling.
        let r = report(vec![
            at(0, 1, 1, fork(2)),
            at(1, 1, 1, fork(3)),
            bench(2, "a", 2),
            start(3),
            at(4, 2, 2, malloc(0x10, 100)),
            at(5, 3, 3, malloc(0x10, 13001)),
            at(6, 1, 1, malloc(0x10, 13002)),
            at(7, 3, 3, free(0x10)),
            stop(8),
        ]);
        assert_eq!(counts(&r, "a"), (1, 100, 0, 0));
        assert_eq!(bench_of(&r, "a").metrics.processes, 1);
    }

    #[test]
    fn child_forked_while_paused_counts() {
        let r = report(vec![
            bench(0, "b", 2),
            at(1, 2, 2, fork(3)),
            at(2, 3, 3, fork(4)),
            start(3),
            at(4, 3, 3, malloc(0x10, 22001)),
            at(5, 4, 4, malloc(0x10, 22002)),
            stop(6),
        ]);
        assert_eq!(counts(&r, "b"), (2, 44003, 0, 0));
        assert_eq!(bench_of(&r, "b").metrics.processes, 2);
    }

    #[test]
    fn exec_in_a_child_counts_and_drops_its_blocks() {
        let r = report(vec![
            bench(0, "c", 2),
            start(1),
            at(2, 2, 2, fork(3)),
            at(3, 3, 3, malloc(0x10, 40)),
            at(4, 3, 3, exec("/bin/worker")),
            at(5, 3, 3, malloc(0x10, 23001)),
            at(6, 3, 3, exit(0)),
            stop(7),
        ]);
        assert_eq!(counts(&r, "c"), (2, 23041, 0, 0));
        let h = &bench_of(&r, "c").metrics.heap;
        assert_eq!(
            h.dropped_at_exec,
            Blocks {
                blocks: 1,
                bytes: 40
            }
        );
        assert_eq!(
            h.leaked,
            Blocks {
                blocks: 1,
                bytes: 23001
            }
        );
    }

    #[test]
    fn leaked_is_live_at_the_end_of_the_windows() {
        let r = report(vec![
            bench(0, "a", 1),
            start(1),
            at(2, 1, 1, malloc(0x10, 100)),
            at(3, 1, 1, malloc(0x20, 200)),
            at(4, 1, 1, malloc(0x30, 300)),
            stop(5),
            // Freed while paused: the recorder never sees it, so the report cannot either.
            start(6),
            at(7, 1, 1, free(0x20)), // a later window of the same benchmark frees it
            stop(8),
        ]);
        let h = &bench_of(&r, "a").metrics.heap;
        assert_eq!(
            h.leaked,
            Blocks {
                blocks: 2,
                bytes: 400
            }
        );
        assert_eq!(h.live_at_end, Blocks::default());
        assert_eq!((h.frees, h.bytes_freed), (1, 200));
        assert_eq!(h.peak_live_bytes, 600);
        assert_eq!(bench_of(&r, "a").windows, 2);
    }

    #[test]
    fn leaks_at_exit_are_leaked_too() {
        let r = report(vec![
            bench(0, "a", 2),
            at(1, 1, 1, fork(2)),
            start(2),
            at(3, 2, 2, malloc(0x10, 100)),
            stop(4),
            at(5, 2, 2, exit(0)),
        ]);
        let h = &bench_of(&r, "a").metrics.heap;
        assert_eq!(
            h.leaked,
            Blocks {
                blocks: 1,
                bytes: 100
            }
        );
    }

    #[test]
    fn freeing_older_blocks_inside_a_window_is_an_unknown_free() {
        let r = analyze(
            &header(), // measuring from the start: setup allocations are recorded
            vec![
                at(0, 1, 1, malloc(0x10, 64)),
                stop(1),
                bench(2, "a", 1),
                start(3),
                at(4, 1, 1, free(0x10)),
                at(5, 1, 1, free(0x99)),
                stop(6),
            ],
            None,
        );
        let h = &bench_of(&r, "a").metrics.heap;
        assert_eq!((h.frees, h.unknown_frees), (0, 2));
        assert_eq!(r.totals.heap.frees, 1);
    }

    #[test]
    fn bench_while_measuring_splits_the_window() {
        let r = report(vec![
            at(0, 1, 1, fork(2)),
            at(1, 1, 1, fork(3)),
            start(2),
            bench(3, "a", 2),
            at(4, 2, 2, malloc(0x10, 10)),
            at(5, 3, 3, malloc(0x10, 20)),
            bench(6, "b", 3),
            at(7, 2, 2, malloc(0x20, 30)),
            at(8, 3, 3, malloc(0x20, 40)),
            at(9, 3, 3, free(0x10)),
            stop(10),
        ]);
        assert_eq!(counts(&r, "a"), (1, 10, 0, 0));
        // b's free of a block it did not allocate is unknown to it.
        assert_eq!(counts(&r, "b"), (1, 40, 0, 0));
        assert_eq!(bench_of(&r, "b").metrics.heap.unknown_frees, 1);
    }

    #[test]
    fn a_block_freed_in_another_benchmark_window_leaves_its_owner() {
        let r = report(vec![
            start(0),
            bench(1, "a", 1),
            at(2, 1, 1, malloc(0x10, 10)),
            bench(3, "b", 1),
            at(4, 1, 1, free(0x10)),
            stop(5),
        ]);
        let a = &bench_of(&r, "a").metrics.heap;
        assert_eq!((a.frees, a.leaked.blocks), (1, 0));
        assert_eq!(bench_of(&r, "b").metrics.heap.unknown_frees, 0);
    }

    #[test]
    fn pid_zero_means_every_process() {
        let r = report(vec![
            bench(0, "all", 0),
            start(1),
            at(2, 5, 5, malloc(0x10, 1)),
            at(3, 6, 6, malloc(0x10, 2)),
            stop(4),
        ]);
        assert_eq!(counts(&r, "all"), (2, 3, 0, 0));
        assert_eq!(bench_of(&r, "all").metrics.heap.peak_live_bytes, 3);
    }

    #[test]
    fn pid_named_before_its_first_event_is_found_later() {
        let r = report(vec![
            bench(0, "a", 7),
            start(1),
            at(2, 7, 7, malloc(0x10, 70)),
            stop(3),
        ]);
        assert_eq!(counts(&r, "a"), (1, 70, 0, 0));
    }

    #[test]
    fn a_reused_pid_is_not_the_benchmark() {
        let r = report(vec![
            at(0, 1, 1, fork(2)),
            bench(1, "a", 2),
            start(2),
            at(3, 2, 2, malloc(0x10, 10)),
            at(4, 2, 2, exit(0)),
            at(5, 1, 1, fork(2)), // another process, same pid, not a descendant of the first
            at(6, 2, 2, malloc(0x10, 20)),
            stop(7),
        ]);
        assert_eq!(counts(&r, "a"), (1, 10, 0, 0));
    }

    #[test]
    fn memtrack_ctl_clients_belong_to_no_benchmark() {
        let ctl = EventKind::Exec(Exec {
            filename: "/usr/local/bin/memtrack".into(),
            argv: vec!["memtrack".into(), "ctl".into(), "stop".into()],
        });
        let r = report(vec![
            bench(0, "a", 1),
            start(1),
            at(2, 1, 1, malloc(0x10, 10)),
            at(3, 1, 1, fork(2)),
            at(4, 2, 2, ctl),
            at(5, 2, 2, malloc(0x10, 999)),
            stop(6),
            at(7, 2, 2, exit(0)),
        ]);
        assert_eq!(counts(&r, "a"), (1, 10, 0, 0));
    }

    #[test]
    fn the_peak_is_of_the_tree_sum_inside_windows() {
        let r = report(vec![
            bench(0, "a", 1),
            at(1, 1, 1, fork(2)),
            start(2),
            at(3, 1, 1, malloc(0x10, 50)),
            at(4, 2, 2, malloc(0x10, 100)),
            at(5, 1, 1, free(0x10)),
            at(6, 2, 2, malloc(0x20, 30)),
            stop(7),
        ]);
        let h = &bench_of(&r, "a").metrics.heap;
        assert_eq!(h.peak_live_bytes, 150);
        assert_eq!(h.peak_live_at_ns, Some(4));
    }

    #[test]
    fn without_the_control_feature_measuring_starts_on() {
        let r = analyze(
            &header(),
            vec![bench(0, "a", 1), at(1, 1, 1, malloc(0x10, 10)), stop(2)],
            None,
        );
        assert_eq!(counts(&r, "a"), (1, 10, 0, 0));
    }

    #[test]
    fn with_the_control_feature_measuring_starts_paused() {
        let r = report(vec![bench(0, "a", 1), at(1, 1, 1, malloc(0x10, 10))]);
        assert_eq!(counts(&r, "a"), (0, 0, 0, 0));
        assert_eq!(bench_of(&r, "a").windows, 0);
    }

    #[test]
    fn a_window_never_stopped_ends_with_the_recording() {
        let r = report(vec![
            bench(0, "a", 1),
            start(10),
            at(15, 1, 1, malloc(0x10, 10)),
            at(40, 1, 1, exit(0)),
        ]);
        let b = bench_of(&r, "a");
        assert_eq!((b.windows, b.measured_ns), (1, 30));
        assert_eq!(b.metrics.heap.leaked.bytes, 10);
    }

    #[test]
    fn realloc_moves_ownership() {
        let r = report(vec![
            bench(0, "a", 1),
            start(1),
            at(2, 1, 1, malloc(0x10, 10)),
            at(3, 1, 1, realloc(0x10, 0x20, 30)),
            stop(4),
            start(5),
            at(6, 1, 1, free(0x20)),
            stop(7),
        ]);
        let h = &bench_of(&r, "a").metrics.heap;
        assert_eq!((h.allocs, h.reallocs, h.realloc_moves), (2, 1, 1));
        assert_eq!((h.frees, h.bytes_freed), (2, 40));
        assert_eq!(h.leaked, Blocks::default());
        assert_eq!(h.peak_live_bytes, 30);
    }

    #[test]
    fn temporary_and_failed_allocations_count() {
        let r = report(vec![
            bench(0, "a", 1),
            start(1),
            at(2, 1, 1, malloc(0x10, 10)),
            at(3, 1, 1, free(0x10)),
            at(4, 1, 1, failed(1 << 40)),
            stop(5),
        ]);
        let h = &bench_of(&r, "a").metrics.heap;
        assert_eq!((h.temporary_allocs, h.failed_allocs), (1, 1));
    }

    #[test]
    fn markers_and_order_of_benchmarks() {
        let r = report(vec![
            bench(0, "z", 1),
            marker(1, MarkerKind::RoundStart),
            bench(2, "a", 1),
            marker(3, MarkerKind::SampleEnd),
        ]);
        let uris: Vec<&str> = r.benchmarks.iter().map(|b| b.uri.as_str()).collect();
        assert_eq!(uris, ["z", "a"]);
        assert_eq!(bench_of(&r, "z").markers.round_start, 1);
        assert_eq!(bench_of(&r, "a").markers.sample_end, 1);
    }

    #[test]
    fn resident_peak_of_the_pid_tree_inside_windows() {
        let r = report(vec![
            at(0, 1, 1, fork(2)),
            at(1, 1, 1, fork(3)),
            at(2, 2, 2, rss(RssMember::Anon, 10, 10, true)),
            bench(3, "a", 2),
            at(4, 2, 2, rss(RssMember::Anon, 20, 30, true)), // paused: not a peak of a
            at(5, 2, 2, rss(RssMember::Anon, -25, 5, true)),
            start(6),
            at(7, 2, 2, rss(RssMember::Anon, 3, 8, true)),
            at(8, 3, 3, rss(RssMember::Anon, 500, 500, true)), // noise
            stop(9),
            at(10, 2, 2, rss(RssMember::Anon, 100, 108, true)),
        ]);
        let res = bench_of(&r, "a").metrics.resident.as_ref().unwrap();
        assert_eq!(res.peak_bytes, 8 * 4096);
        assert_eq!(res.peak_at_ns, Some(7));
    }

    #[test]
    fn no_resident_events_means_no_benchmark_resident() {
        let r = report(vec![bench(0, "a", 1), start(1), at(2, 1, 1, malloc(1, 1))]);
        assert!(bench_of(&r, "a").metrics.resident.is_none());
    }

    #[test]
    fn a_file_without_control_events_has_no_benchmarks() {
        let r = analyze(&header(), vec![at(0, 1, 1, malloc(1, 1))], None);
        assert!(r.benchmarks.is_empty());
    }
}
