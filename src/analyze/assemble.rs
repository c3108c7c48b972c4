//! The end of the accounting pass: the state the stream left (the process table, the
//! benchmarks, the run's log) becomes one [`Report`].
//!
//! Flow: `accounting::Accounting::finish` hands its parts to [`report`], which counts what is
//! still live, rolls each tree's [`TreeTotals`] up from its children (in reverse tree order,
//! every child comes before its parent), pairs them with the running sums and peaks the table
//! kept, and adds the run facts, losses, damage and the reasons the report is incomplete.

use crate::format::{Coverage, Header, LostCount, ReadEnd, Skipped};

use super::bench::Benchmarks;
use super::counters::HeapCounters;
use super::incomplete;
use super::mapped::Calls;
use super::resident::MEMBERS;
use super::tree::{Proc, ProcIdx, ProcessTable, TreeSums};
use crate::model::metrics::{
    BenchmarkMetrics, Blocks, Damage, ExitInfo, LostEvents, Metrics, ProcessMetrics, Report,
    RunInfo, Scope, SCHEMA_VERSION,
};

/// What the stream said about the run itself, beside its processes: kept by `accounting` as
/// events pass, read here at the end.
#[derive(Debug, Default)]
pub(super) struct RunLog {
    /// The files the recorder probed, each once.
    pub(super) files: Vec<Coverage>,
    /// Losses per cause (the largest cumulative count seen).
    pub(super) lost: Vec<LostCount>,
    /// Damaged ranges the reader skipped (`Accounting::note_skipped`).
    pub(super) skipped: Vec<Skipped>,
    /// Events applied.
    pub(super) events: u64,
    /// Events that could not be applied (an event of an exited process, a fork cycle).
    pub(super) ignored_events: u64,
    /// The latest event time: the end of a recording without a trailer.
    pub(super) last_ts_ns: u64,
}

impl RunLog {
    /// `count` events of `cause` were lost so far (counts are cumulative: the largest wins).
    pub(super) fn note_lost(&mut self, cause: &str, count: u64) {
        note_lost(&mut self.lost, cause, count);
    }
}

/// Keeps the largest cumulative count seen for `cause`.
fn note_lost(lost: &mut Vec<LostCount>, cause: &str, count: u64) {
    match lost.iter_mut().find(|l| l.cause == cause) {
        Some(l) => l.count = l.count.max(count),
        None => lost.push(LostCount {
            cause: cause.to_string(),
            count,
        }),
    }
}

/// The additive counters of a tree (or of the run): its processes' own counters summed. Its
/// peaks are not sums of peaks; they come from the running [`TreeSums`].
#[derive(Clone, Debug, Default)]
struct TreeTotals {
    processes: u64,
    heap: HeapCounters,
    /// Resident pages removed beyond baselines, per member.
    beyond: [u64; MEMBERS],
    /// Whether any of its processes had resident memory recorded.
    resident: bool,
    /// Mapping calls, if any of its processes made one.
    calls: Option<Calls>,
}

impl TreeTotals {
    /// The totals of `p` alone.
    fn of(p: &Proc) -> TreeTotals {
        TreeTotals {
            processes: 1,
            heap: p.heap.clone(),
            beyond: p.resident.as_ref().map_or([0; MEMBERS], |r| r.beyond),
            resident: p.resident.is_some(),
            calls: p.mapped.as_ref().map(|m| m.calls),
        }
    }

    /// Adds the totals of a `child` tree (or of one more process of the run).
    fn add(&mut self, child: &TreeTotals) {
        self.processes = self.processes.saturating_add(child.processes);
        self.heap.add(&child.heap);
        for (a, b) in self.beyond.iter_mut().zip(child.beyond) {
            *a = a.saturating_add(b);
        }
        self.resident |= child.resident;
        if let Some(calls) = &child.calls {
            self.calls.get_or_insert_with(Calls::default).add(calls);
        }
    }

    /// The metrics of the scope, with the peaks of its running `sums`.
    fn metrics(&self, sums: &TreeSums, page: u64, start: u64) -> Metrics {
        Metrics {
            processes: self.processes,
            heap: self.heap.to_metrics(sums.heap.peak, start),
            resident: self
                .resident
                .then(|| sums.resident.metrics(&self.beyond, page, start)),
            mapped: self.calls.map(|c| c.metrics(sums.mapped.peak, start)),
        }
    }
}

/// The metrics of process `p` alone.
fn own_metrics(p: &Proc, page: u64, start: u64) -> Metrics {
    Metrics {
        processes: 1,
        heap: p.heap.to_metrics(p.heap.own_peak(), start),
        resident: p.resident.as_deref().map(|r| r.metrics(page, start)),
        mapped: p.mapped.as_deref().map(|m| m.calls.metrics(m.peak, start)),
    }
}

/// Ends the pass: `end` is how reading ended (`None` when the caller does not know, as for
/// synthetic streams; it is not taken as damage). `page` is the recording's page size.
pub(super) fn report(
    header: &Header,
    page: u64,
    mut table: ProcessTable,
    mut benches: Benchmarks,
    log: RunLog,
    end: Option<&ReadEnd>,
) -> Report {
    let start = header.start_monotonic_ns;
    let leak_scan = header
        .features
        .iter()
        .any(|f| f == crate::format::FEATURE_LEAK_SCAN);
    for p in table.procs_mut().iter_mut().filter(|p| p.is_alive()) {
        p.heap.live_at_end = Blocks {
            blocks: p.live.len() as u64,
            bytes: p.heap.live_bytes,
        };
        // A benchmark's blocks that no recorded free released are its leaks, whether or not
        // their process is still running (bench.rs).
        benches.leak_blocks(p, leak_scan);
    }
    let end_ns = end_ns(header, log.last_ts_ns, end);
    benches.finish(end_ns);
    let benchmarks = benches.metrics(page, start);

    let order = tree_order(&table);
    let mut trees: Vec<TreeTotals> = table.procs().iter().map(TreeTotals::of).collect();
    let mut run = TreeTotals::default();
    for t in &trees {
        run.add(t);
    }
    // Sum bottom-up: in reverse tree order every child comes before its parent.
    for &(i, _) in order.iter().rev() {
        if let Some(parent) = table.parent(i) {
            let child = std::mem::take(&mut trees[i.get()]);
            trees[parent.get()].add(&child);
            trees[i.get()] = child;
        }
    }

    let processes = order
        .iter()
        .map(|&(i, depth)| {
            let p = &table[i];
            ProcessMetrics {
                pid: p.pid,
                parent_pid: table.parent(i).map(|parent| table[parent].pid),
                depth,
                executable: p.exe.clone(),
                argv: p.argv.clone(),
                execs: p.execs,
                started_at_ns: p.started_ns.saturating_sub(start),
                exit: p
                    .exit
                    .map(|(status, at)| ExitInfo::from_status(status, at.saturating_sub(start))),
                own: own_metrics(p, page, start),
                tree: trees[i.get()].metrics(table.sums(i), page, start),
            }
        })
        .collect();
    let totals = run.metrics(table.run(), page, start);
    completeness(header, log, end_ns, end, totals, processes, benchmarks)
}

/// When the recording ended: the trailer's end time, or the last event's time without one.
pub(super) fn end_ns(header: &Header, last_ts_ns: u64, end: Option<&ReadEnd>) -> u64 {
    match end {
        Some(ReadEnd::Complete(t)) if t.end_monotonic_ns >= header.start_monotonic_ns => {
            t.end_monotonic_ns
        }
        _ => last_ts_ns,
    }
}

/// Processes in tree order (parents first, children in the order they appeared) with their
/// depth. Iterative: a long chain of forks must not overflow the stack.
fn tree_order(table: &ProcessTable) -> Vec<(ProcIdx, u32)> {
    let n = table.procs().len();
    let mut children: Vec<Vec<ProcIdx>> = vec![Vec::new(); n];
    let mut roots = Vec::new();
    for i in (0..n).map(ProcIdx::new) {
        match table.parent(i) {
            None => roots.push(i),
            Some(parent) => children[parent.get()].push(i),
        }
    }
    let mut order = Vec::with_capacity(n);
    let mut stack: Vec<(ProcIdx, u32)> = roots.iter().rev().map(|&r| (r, 0)).collect();
    while let Some((i, depth)) = stack.pop() {
        order.push((i, depth));
        for &c in children[i.get()].iter().rev() {
            stack.push((c, depth.saturating_add(1)));
        }
    }
    order
}

/// Builds the report around the metrics: run facts, losses, damage, completeness.
fn completeness(
    header: &Header,
    log: RunLog,
    end_ns: u64,
    end: Option<&ReadEnd>,
    totals: Metrics,
    processes: Vec<ProcessMetrics>,
    benchmarks: Vec<BenchmarkMetrics>,
) -> Report {
    let start = header.start_monotonic_ns;
    let mut lost = log.lost;
    let mut damage = None;
    let mut trailer = None;
    match end {
        Some(ReadEnd::Complete(t)) => {
            for l in &t.lost {
                note_lost(&mut lost, &l.cause, l.count);
            }
            trailer = Some(t);
        }
        Some(ReadEnd::Damaged { offset, reason }) => {
            damage = Some(Damage {
                offset_bytes: *offset,
                reason: reason.clone(),
            });
        }
        None => {}
    }
    lost.retain(|l| l.count > 0);
    lost.sort_by(|a, b| a.cause.cmp(&b.cause));
    let lost_total = lost.iter().fold(0u64, |acc, l| acc.saturating_add(l.count));

    let mut reasons = Vec::new();
    if incomplete::is_probe_floor(header) {
        reasons.push(incomplete::PROBE_FLOOR.to_string());
    }
    if !log.skipped.is_empty() {
        let written = trailer.map(|t| t.events);
        reasons.push(incomplete::skipped_reason(
            &log.skipped,
            written,
            log.events,
        ));
    }
    if let Some(d) = &damage {
        reasons.push(format!(
            "{}; only the events before it are counted",
            d.end_reason()
        ));
    }
    if lost_total > 0 {
        reasons.push(incomplete::loss_reason(&lost, lost_total));
    }
    let heap = &totals.heap;
    let calls = heap.allocs + heap.frees + heap.failed_allocs + heap.unknown_frees;
    reasons.extend(incomplete::unseen_reason(
        header,
        processes.len(),
        calls,
        &log.files,
    ));

    let root_exit = processes
        .iter()
        .find(|p| p.pid == header.root_pid)
        .and_then(|p| p.exit)
        .map(|e| e.exit_code);
    let run = RunInfo {
        command: header.argv.clone(),
        root_pid: header.root_pid,
        memtrack_version: header.memtrack_version.clone(),
        kernel_release: header.kernel_release.clone(),
        hostname: header.hostname.clone(),
        start_wall_ns: header.start_wall_ns,
        duration_ns: end_ns.saturating_sub(start),
        exit_code: trailer.map(|t| t.exit_code).or(root_exit),
        processes: processes.len() as u64,
        events: log.events,
        ignored_events: log.ignored_events,
        features: header.features.clone(),
        files: log.files,
    };
    Report {
        schema_version: SCHEMA_VERSION,
        complete: reasons.is_empty(),
        incomplete_reasons: reasons,
        damage,
        skipped: log.skipped,
        lost_events: LostEvents {
            total: lost_total,
            by_cause: lost,
        },
        run,
        scope: Scope::Run,
        totals,
        processes,
        benchmarks,
        stacks: None,
        functions: None,
        profile: None,
        timeline: None,
        suppressions: None,
        rmap: None,
    }
}

#[cfg(test)]
mod tests {
    use crate::format::{Coverage, Event, EventKind, LostCount, ReadEnd, Trailer};
    use crate::testkit::*;

    // --- tree order ---------------------------------------------------------------------

    #[test]
    fn tree_order_and_depth() {
        let r = run(vec![
            at(0, 1, 1, fork(2)),
            at(1, 1, 1, fork(4)),
            at(2, 2, 2, fork(3)),
            at(3, 9, 9, malloc(1, 1)),
        ]);
        let order: Vec<(u32, u32)> = r.processes.iter().map(|p| (p.pid, p.depth)).collect();
        assert_eq!(order, vec![(1, 0), (2, 1), (3, 2), (4, 1), (9, 0)]);
    }

    #[test]
    fn long_fork_chain_does_not_overflow_the_stack() {
        let events: Vec<Event> = (1..50_000u32)
            .map(|pid| at(u64::from(pid), pid, pid, fork(pid + 1)))
            .collect();
        let r = run(events);
        assert_eq!(r.processes.len(), 50_000);
        assert_eq!(r.processes[0].tree.processes, 50_000);
    }

    #[test]
    fn coverage_records_list_each_file_once() {
        let cov = |path: &str, allocator: &str, probes| {
            EventKind::Coverage(Coverage {
                path: path.into(),
                allocator: allocator.into(),
                probes,
            })
        };
        let events = seq(vec![
            cov("/lib/libc.so.6", "glibc", 17),
            cov("/bin/prog", "none", 0),
            cov("/lib/libc.so.6", "glibc", 17),
        ]);
        let report = analyze(&header(), events, None);
        let files: Vec<(&str, &str, u32)> = report
            .run
            .files
            .iter()
            .map(|f| (f.path.as_str(), f.allocator.as_str(), f.probes))
            .collect();
        assert_eq!(
            files,
            [("/lib/libc.so.6", "glibc", 17), ("/bin/prog", "none", 0)]
        );
    }

    // --- losses and damage -----------------------------------------------------------------

    #[test]
    fn complete_when_nothing_lost() {
        let end = ReadEnd::Complete(Trailer::default());
        let r = analyze(&header(), seq(vec![malloc(1, 1)]), Some(&end));
        assert!(r.complete);
        assert!(r.incomplete_reasons.is_empty());
    }

    #[test]
    fn lost_takes_max_per_cause() {
        let r = run(seq(vec![
            lost("ring_full", 3),
            lost("ring_full", 5),
            lost("ring_full", 4),
            lost("stack", 2),
        ]));
        assert_eq!(r.lost_events.total, 7);
        assert!(!r.complete);
        assert!(r.incomplete_reasons[0].contains("7 events were lost"));
    }

    #[test]
    fn trailer_losses_count() {
        let end = ReadEnd::Complete(Trailer {
            lost: vec![LostCount {
                cause: "ring_full".into(),
                count: 9,
            }],
            ..Trailer::default()
        });
        let r = analyze(&header(), seq(vec![lost("ring_full", 5)]), Some(&end));
        assert_eq!(r.lost_events.total, 9);
        assert!(!r.complete);
    }

    #[test]
    fn lost_events_do_not_create_processes() {
        let r = run(vec![at(0, 0, 0, lost("ring_full", 1))]);
        assert!(r.processes.is_empty());
    }

    #[test]
    fn damaged_end_is_incomplete_with_offset() {
        let end = ReadEnd::Damaged {
            offset: 1234,
            reason: "truncated chunk".into(),
        };
        let r = analyze(&header(), seq(vec![malloc(1, 1)]), Some(&end));
        assert!(!r.complete);
        assert_eq!(r.damage.as_ref().map(|d| d.offset_bytes), Some(1234));
        assert!(r.incomplete_reasons[0].contains("byte offset 1234"));
        assert_eq!(own(&r, 1).live_at_end.bytes, 1);
    }

    #[test]
    fn trailer_gives_duration_and_exit_code() {
        let end = ReadEnd::Complete(Trailer {
            end_monotonic_ns: START + 5_000,
            exit_code: 3,
            ..Trailer::default()
        });
        let r = analyze(&header(), seq(vec![malloc(1, 1)]), Some(&end));
        assert_eq!((r.run.duration_ns, r.run.exit_code), (5_000, Some(3)));
    }

    #[test]
    fn without_trailer_duration_is_last_event() {
        let r = run(vec![at(700, 1, 1, malloc(1, 1)), at(300, 1, 1, free(1))]);
        assert_eq!(r.run.duration_ns, 700);
        assert_eq!(r.run.exit_code, None);
    }

    #[test]
    fn exit_code_from_root_without_trailer() {
        let r = run(seq(vec![exit(9)]));
        assert_eq!(r.run.exit_code, Some(137));
    }

    #[test]
    fn run_counts_events() {
        let r = run(seq(vec![malloc(1, 1), free(1), lost("x", 0)]));
        assert_eq!(r.run.events, 3);
        assert_eq!(r.lost_events.total, 0);
        assert!(r.complete);
    }
}
