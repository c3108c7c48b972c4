//! The streaming accounting pass: one event at a time in, a [`Report`] out at the end.
//!
//! Flow: the reader yields events; [`Accounting::apply`], the one dispatcher over events,
//! updates the process's own state (live blocks, counters, resident counters, mappings) and,
//! through the process table (`tree`), the running sums of every process tree the process
//! belongs to; benchmarks (`bench`) count what falls in their windows; [`Accounting::finish`]
//! hands the state to `assemble`, which turns it into `metrics` values. Memory grows with the
//! live blocks and the processes, never with the length of the file: a process's live blocks
//! are dropped when it exits.
//!
//! The rules (also in docs/report-schema.md):
//! - a block belongs to the process that allocated it; a child starts with no live blocks, so
//!   its frees of blocks its parent allocated before the fork are unknown frees;
//! - a realloc is one allocation of the new size plus, when the old block is live, one free of
//!   it (applied first, so a realloc in place never raises the peak by the old size);
//! - exec discards the live heap (`dropped_at_exec`), exit turns it into leaks;
//! - the tree peak is the peak of the sum of the live heaps of the tree's processes, kept
//!   exactly by updating the sum of every ancestor on each change (O(depth) per event).

use crate::format::{
    ControlCommand, Event, EventKind, Exec, Header, Lost, ReadEnd, RmapRegion, RssMember, Skipped,
    FEATURE_CONTROL, FEATURE_LEAK_SCAN,
};
use crate::intmap::IntMap;

use super::assemble::{self, RunLog};
use super::bench::BenchSplit;
use super::bench::Benchmarks;
use super::resident::MEMBERS;
use super::stacks::{SiteOptions, StackPass};
use super::suppress::Suppressions;
use super::timeline::{command_of, Lifecycle, TimelinePass};
use super::tree::{Lookup, ProcIdx, ProcessTable};
use crate::model::metrics::Scope;
use crate::model::metrics::{Blocks, LeakMetrics, Report};
use crate::model::rmap::RmapReport;

/// What [`Accounting::apply`] did with one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The event is in the sums (or rightly changed nothing, such as a free of a block never
    /// seen while measuring is paused); the timeline follows it.
    Accounted,
    /// The event was left out: counted in the run's `ignored_events`, and not shown to the
    /// timeline, since the sums it would read did not change.
    Ignored(IgnoredBecause),
}

/// Why an event was left out of the accounting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IgnoredBecause {
    /// An event of a process that had exited, whose pid no new process took.
    AfterExit,
    /// A fork the process table refused: of the process itself, of a child that has a parent
    /// already, or one that would make a cycle.
    RefusedFork,
}

/// The streaming state: feed it every event in file order, then call [`Accounting::finish`].
pub struct Accounting {
    header: Header,
    /// The recording's page size (4 KiB when the header does not say).
    page_bytes: u64,
    table: ProcessTable,
    benches: Benchmarks,
    log: RunLog,
    /// The allocation sites, when the report asks for them (`--stacks`); boxed and optional so
    /// a report without them pays one branch per allocator event.
    stacks: Option<Box<StackPass>>,
    /// Memory over time, when a format draws it (`timeline-csv`, `timeline-json`, `html`);
    /// boxed and optional like the sites.
    timeline: Option<Box<TimelinePass>>,
    /// Whether the recording scanned processes for leaks at their exit (`LeakScan` records).
    leak_scan: bool,
    /// Leak suppression rules (`--suppress`), applied to the sites' lost blocks at the end;
    /// they need the sites (`with_sites`).
    suppressions: Option<Suppressions>,
}

impl Accounting {
    /// A fresh pass over the recording that starts with `header`.
    pub fn new(header: &Header) -> Accounting {
        Accounting {
            header: header.clone(),
            page_bytes: match header.page_size_bytes {
                0 => 4096,
                n => u64::from(n),
            },
            table: ProcessTable::new(header),
            benches: Benchmarks::new(!header.features.iter().any(|f| f == FEATURE_CONTROL)),
            log: RunLog::default(),
            stacks: None,
            timeline: None,
            leak_scan: header.features.iter().any(|f| f == FEATURE_LEAK_SCAN),
            suppressions: None,
        }
    }

    /// Also applies leak suppression rules to the definitely lost blocks, by the stacks that
    /// allocated them: the pass must find sites (`with_sites`), or nothing can match.
    pub fn with_suppressions(mut self, suppressions: Suppressions) -> Accounting {
        self.suppressions = Some(suppressions);
        self
    }

    /// Also follows memory over time (the report's `timeline`) of the whole run.
    pub fn with_timeline(self) -> Accounting {
        self.with_timeline_of(&Scope::Run)
    }

    /// Also follows memory over time of `scope` (`report --pid`, `--tree`; a benchmark's is
    /// the run's, its windows marked).
    pub fn with_timeline_of(mut self, scope: &Scope) -> Accounting {
        self.timeline = Some(Box::new(TimelinePass::new(
            self.header.start_monotonic_ns,
            self.page_bytes,
            scope,
        )));
        self
    }

    /// A fresh pass that also finds the allocation sites of `scope`.
    pub fn with_sites(header: &Header, scope: &Scope, options: SiteOptions) -> Accounting {
        Accounting {
            stacks: Some(Box::new(StackPass::new(scope, options, header))),
            ..Accounting::new(header)
        }
    }

    /// Accounts one event: the one dispatcher over events, then the timeline (if asked for),
    /// which reads the sums once the event changed them and never sees an ignored event.
    #[inline]
    pub fn apply(&mut self, event: &Event) -> Outcome {
        let outcome = self.account(event);
        match outcome {
            Outcome::Accounted if self.timeline.is_some() => self.follow_time(event),
            Outcome::Accounted => {}
            Outcome::Ignored(_) => self.log.ignored_events += 1,
        }
        outcome
    }

    /// Hands an applied event to the timeline: memory changes, lifecycle and control.
    fn follow_time(&mut self, event: &Event) {
        let Some(timeline) = self.timeline.as_deref_mut() else {
            return;
        };
        let (pid, ts) = (event.pid, event.ts_ns);
        match &event.kind {
            EventKind::Alloc { .. }
            | EventKind::Free { .. }
            | EventKind::Realloc { .. }
            | EventKind::Rss { .. } => timeline.note(&self.table, self.table.latest(pid), ts),
            EventKind::Exec(_) => {
                let i = self.table.latest(pid);
                timeline.note(&self.table, i, ts);
                let command = i.map_or_else(String::new, |i| {
                    let p = &self.table[i];
                    command_of(&p.argv, p.exe.as_deref())
                });
                timeline.lifecycle(&self.table, ts, pid, Lifecycle::Exec { command });
            }
            EventKind::Exit { status } => {
                timeline.note(&self.table, self.table.latest(pid), ts);
                timeline.lifecycle(&self.table, ts, pid, Lifecycle::Exit { status: *status });
            }
            EventKind::Fork { child } => {
                timeline.lifecycle(&self.table, ts, pid, Lifecycle::Fork { child: *child })
            }
            EventKind::Control { command } => {
                timeline.control(command, ts, self.benches.open_window_of())
            }
            _ => {}
        }
    }

    /// Accounts one event: the one dispatcher over events. Each kind goes to the passes that
    /// follow it (heap, resident memory, raw mappings, benchmarks, the run's log); a new
    /// per-event pass (call stacks, timelines) plugs in here beside them.
    fn account(&mut self, event: &Event) -> Outcome {
        self.log.events += 1;
        self.log.last_ts_ns = self.log.last_ts_ns.max(event.ts_ns);
        let (pid, tid, ts) = (event.pid, event.tid, event.ts_ns);
        match &event.kind {
            EventKind::Alloc {
                addr,
                size,
                stack_id,
                ..
            } => {
                let i = self.table.active(pid, ts);
                self.table[i].heap.count_alloc(*size);
                let bench = self.benches.measured_in(&self.table, i);
                if let Some(b) = bench {
                    self.benches.heap(b).count_alloc(*size);
                }
                self.insert_block(i, tid, *addr, *size, ts, bench, *stack_id);
            }
            EventKind::Free { addr, .. } => {
                // Frees are recorded while measuring is paused too (bpf/alloc.bpf.c), for the
                // blocks allocated while measuring; one of a block never seen allocated then is
                // the harness's own, not an unknown free.
                let paused = !self.benches.measuring();
                let i = match self.table.lookup(pid) {
                    Lookup::Alive(i) if paused && !self.table[i].live.contains_key(addr) => {
                        return Outcome::Accounted
                    }
                    Lookup::Alive(i) => i,
                    Lookup::Exited | Lookup::Absent if paused => return Outcome::Accounted,
                    Lookup::Exited => return Outcome::Ignored(IgnoredBecause::AfterExit),
                    Lookup::Absent => self.table.active(pid, ts),
                };
                self.table[i].acted = true;
                let measured = self.benches.measured_in(&self.table, i);
                self.release(i, *addr, Some(tid), measured);
            }
            EventKind::Realloc {
                old_addr,
                addr,
                size,
                stack_id,
                ..
            } => {
                let i = self.table.active(pid, ts);
                let bench = self.benches.measured_in(&self.table, i);
                let counters = std::iter::once(&mut self.table[i].heap)
                    .chain(bench.map(|b| self.benches.heap(b)));
                for heap in counters {
                    heap.count_alloc(*size);
                    heap.reallocs += 1;
                    if addr != old_addr {
                        heap.realloc_moves += 1;
                    }
                }
                // The old block goes first, so a realloc never counts both blocks at once.
                self.release(i, *old_addr, None, bench);
                self.insert_block(i, tid, *addr, *size, ts, bench, *stack_id);
            }
            EventKind::AllocFailed { .. } => {
                let i = self.table.active(pid, ts);
                self.table[i].heap.failed += 1;
                if let Some(b) = self.benches.measured_in(&self.table, i) {
                    self.benches.heap(b).failed += 1;
                }
            }
            EventKind::Fork { child } => {
                if !self.table.fork(pid, *child, ts) {
                    return Outcome::Ignored(IgnoredBecause::RefusedFork);
                }
            }
            EventKind::Exec(Exec { filename, argv }) => {
                let i = self.table.active(pid, ts);
                self.drop_mapped(i, ts);
                self.exec(i, filename, argv);
            }
            EventKind::Exit { status } => return self.exit_of(pid, *status, ts),
            &EventKind::Rss {
                member,
                delta_pages,
                value_pages,
                by_owner,
            } => return self.rss(pid, ts, member as usize, delta_pages, value_pages, by_owner),
            &EventKind::Rmap {
                member,
                pages,
                addr,
            } => return self.rmap(pid, ts, member, pages, addr),
            EventKind::RmapRegion(region) => return self.rmap_region(pid, ts, region),
            EventKind::Lost(Lost { cause, total }) => self.log.note_lost(cause, *total),
            EventKind::Mmap { .. }
            | EventKind::Munmap { .. }
            | EventKind::Mremap { .. }
            | EventKind::Brk { .. } => self.mapping(pid, &event.kind, ts),
            EventKind::Coverage(file) => {
                if !self.log.files.iter().any(|f| f.path == file.path) {
                    self.log.files.push(file.clone());
                }
            }
            EventKind::Control { command } => self.control(command, ts),
            // The stack trie and its names: only the sites pass reads them.
            EventKind::Module(_)
            | EventKind::StackNode { .. }
            | EventKind::Symbol(_)
            | EventKind::StackStats { .. } => {
                if let Some(stacks) = self.stacks.as_deref_mut() {
                    stacks.note(&event.kind);
                }
            }
            // Pages made resident, by the stack that did: only the sites pass reads them.
            EventKind::Fault { .. } => self.fault(pid, &event.kind),
            EventKind::LeakScan(scan) => {
                if let Some(i) = self.table.latest(event.pid) {
                    self.table[i].leak_scan = Some(Box::new(scan.clone()));
                }
            }
        }
        Outcome::Accounted
    }

    /// `pid` made pages resident with a stack (`EventKind::Fault`): for the sites pass.
    fn fault(&mut self, pid: u32, kind: &EventKind) {
        let &EventKind::Fault {
            member,
            pages,
            addr,
            stack_id,
        } = kind
        else {
            return;
        };
        if let (Some(stacks), Lookup::Alive(i)) =
            (self.stacks.as_deref_mut(), self.table.lookup(pid))
        {
            stacks.fault(&self.table, i, member, pages, addr, stack_id);
        }
    }

    /// A resident counter of `pid` changed (`EventKind::Rss`): by `delta_pages` of `member`,
    /// to `value_pages`, by the process itself when `by_owner`.
    fn rss(
        &mut self,
        pid: u32,
        ts: u64,
        member: usize,
        delta_pages: i64,
        value_pages: u64,
        by_owner: bool,
    ) -> Outcome {
        let i = match self.table.lookup(pid) {
            Lookup::Alive(i) => i,
            // Growth made by another task for a pid that exited is the kernel filling a new
            // child that reuses the pid; anything else is the teardown of the exited process's
            // memory.
            Lookup::Exited if !by_owner && delta_pages > 0 => self.table.spawn(pid, None, ts),
            Lookup::Exited => return Outcome::Ignored(IgnoredBecause::AfterExit),
            Lookup::Absent => self.table.spawn(pid, None, ts),
        };
        if by_owner {
            self.table[i].acted = true;
        }
        if let (Some(stacks), Ok(pages), Some(m)) = (
            self.stacks.as_deref_mut(),
            u64::try_from(delta_pages),
            RssMember::from_u8(member as u8),
        ) {
            // Another task's before the process acted: the kernel filling a new child's
            // counters at fork, what it inherited.
            if by_owner || !self.table[i].acted {
                stacks.made_resident(&self.table, i, m, pages, !by_owner);
            }
        }
        self.resident_change(i, member, delta_pages, value_pages, ts);
        if self.benches.window().is_some() {
            self.benches.follow_resident(&self.table, ts);
        }
        Outcome::Accounted
    }

    /// Process `pid` exited with `status`; ignored when it had exited already.
    fn exit_of(&mut self, pid: u32, status: i32, ts: u64) -> Outcome {
        let i = match self.table.lookup(pid) {
            Lookup::Alive(i) => i,
            Lookup::Exited => return Outcome::Ignored(IgnoredBecause::AfterExit),
            Lookup::Absent => self.table.active(pid, ts),
        };
        self.exit(i, status, ts);
        Outcome::Accounted
    }

    /// `pages` of `member` at `addr` of `pid` changed (`EventKind::Rmap`, `record --rmap`).
    fn rmap(&mut self, pid: u32, ts: u64, member: RssMember, pages: i32, addr: u64) -> Outcome {
        let Some(i) = self.alive_or_new(pid, ts) else {
            return Outcome::Ignored(IgnoredBecause::AfterExit);
        };
        let page = self.page_bytes;
        let p = &mut self.table[i];
        let rss = p.resident.as_deref().map_or([0; MEMBERS], |r| r.values());
        let r = p.rmap.get_or_insert_with(Box::default);
        r.inherited.get_or_insert(rss);
        r.apply(member, pages, addr, page, ts);
        Outcome::Accounted
    }

    /// `pid`'s memory has `region` (`EventKind::RmapRegion`, `record --rmap`).
    fn rmap_region(&mut self, pid: u32, ts: u64, region: &RmapRegion) -> Outcome {
        let Some(i) = self.alive_or_new(pid, ts) else {
            return Outcome::Ignored(IgnoredBecause::AfterExit);
        };
        let r = self.table[i].rmap.get_or_insert_with(Box::default);
        r.note_region(region.start, region.end, &region.what, &region.name);
        Outcome::Accounted
    }

    /// The harness sent `command` (`--control`): benchmark windows open and close.
    fn control(&mut self, command: &ControlCommand, ts: u64) {
        if self
            .benches
            .control(command, ts, |pid| self.table.alive(pid))
        {
            self.benches.follow_resident(&self.table, ts);
        }
    }

    /// The process `pid` names, made if it was never seen; `None` once it exited, when an
    /// event of its memory is the teardown of the exited process's.
    fn alive_or_new(&mut self, pid: u32, ts: u64) -> Option<ProcIdx> {
        match self.table.lookup(pid) {
            Lookup::Alive(i) => Some(i),
            Lookup::Exited => None,
            Lookup::Absent => Some(self.table.spawn(pid, None, ts)),
        }
    }

    /// A mapping of `pid` changed (`kind` is an `Mmap`, `Munmap`, `Mremap` or `Brk`).
    fn mapping(&mut self, pid: u32, kind: &EventKind, ts: u64) {
        let i = self.table.active(pid, ts);
        let m = self.table[i].mapped.get_or_insert_with(Box::default);
        let old = m.live;
        m.apply(kind, self.page_bytes, ts);
        let new = m.live;
        self.set_mapped(i, old, new, ts);
        if let Some(stacks) = self.stacks.as_deref_mut() {
            stacks.mapping(i, kind);
        }
    }

    /// Adds a block at `addr` to process `i` as the thread's latest allocation, in benchmark
    /// `bench` (if it measures `i`); a live block at the same address is replaced. Inlined: the
    /// hot path of every allocation (measured: without it, the report of a recording without
    /// benchmarks ran 5% slower than before benchmark scoping).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn insert_block(
        &mut self,
        i: ProcIdx,
        tid: u32,
        addr: u64,
        size: u64,
        ts: u64,
        bench: Option<usize>,
        stack_id: u32,
    ) {
        let p = &mut self.table[i];
        let replaced = p.live.insert(addr, size);
        p.last_alloc.insert(tid, addr);
        if let Some(old_size) = replaced {
            p.heap.duplicate_allocs += 1;
            self.table.shrink_heap(i, old_size);
        }
        self.table.grow_heap(i, size, ts);
        self.benches
            .insert(&mut self.table[i], addr, size, ts, bench, replaced);
        if let Some(stacks) = self.stacks.as_deref_mut() {
            let benches = &self.benches;
            stacks.insert(
                &self.table,
                i,
                addr,
                size,
                stack_id,
                ts,
                bench,
                replaced,
                |b| benches.uri(b),
            );
        }
    }

    /// Releases `addr` in process `i`, measured in benchmark `measured` (if any), or counts an
    /// unknown free: a free by thread `tid`, or with `None` the old block of a realloc, which
    /// is never a temporary allocation.
    #[inline(always)]
    fn release(&mut self, i: ProcIdx, addr: u64, tid: Option<u32>, measured: Option<usize>) {
        let p = &mut self.table[i];
        match p.live.remove(&addr) {
            Some(size) => {
                p.heap.count_free(size);
                let temporary = match tid {
                    Some(tid) if p.last_alloc.get(&tid) == Some(&addr) => {
                        p.heap.temporary += 1;
                        p.last_alloc.remove(&tid);
                        true
                    }
                    _ => false,
                };
                let owns = !p.bench_blocks.is_empty();
                if let Some(stacks) = self.stacks.as_deref_mut() {
                    stacks.release(i, addr, size, temporary);
                }
                self.table.shrink_heap(i, size);
                if owns || measured.is_some() {
                    let p = &mut self.table[i];
                    self.benches.free(p, addr, size, temporary, measured);
                }
            }
            None => {
                p.heap.unknown_frees += 1;
                if let Some(b) = measured {
                    self.benches.heap(b).unknown_frees += 1;
                }
            }
        }
    }

    /// Empties the live heap of process `i` (at exec or exit) and returns what it held.
    fn drop_live(&mut self, i: ProcIdx, keep_capacity: bool) -> Blocks {
        let p = &mut self.table[i];
        if let Some(stacks) = self.stacks.as_deref_mut() {
            // Only exit gives the memory back; exec keeps the capacity for the new image.
            stacks.drop_process(i, &p.live, !keep_capacity);
        }
        let held = Blocks {
            blocks: p.live.len() as u64,
            bytes: p.heap.live_bytes,
        };
        if keep_capacity {
            p.live.clear();
            p.last_alloc.clear();
        } else {
            // A process that is gone gives its memory back: report memory follows live
            // processes, not every process ever seen.
            p.live = IntMap::default();
            p.last_alloc = IntMap::default();
        }
        self.table.shrink_heap(i, held.bytes);
        held
    }

    /// Process `i` executed `filename`: its old heap and resident counters are gone.
    fn exec(&mut self, i: ProcIdx, filename: &str, argv: &[String]) {
        self.benches.drop_blocks(&mut self.table[i], false, None);
        let dropped = self.drop_live(i, true);
        let p = &mut self.table[i];
        p.heap.dropped_at_exec = p.heap.dropped_at_exec.plus(dropped);
        p.exe = Some(filename.to_string());
        p.argv = argv.to_vec();
        p.execs = p.execs.saturating_add(1);
        p.control_client = is_control_client(filename, argv);
        if let Some(r) = p.rmap.as_deref_mut() {
            r.start_image();
        }
        if let Some(r) = p.resident.as_deref_mut() {
            r.start_image();
            self.set_contribution(i, [0; MEMBERS + 1], 0);
        }
    }

    /// Process `i` exited with `status`: what is live is leaked.
    fn exit(&mut self, i: ProcIdx, status: i32, ts: u64) {
        self.drop_mapped(i, ts);
        // A benchmark's blocks are split by this process's scan, whenever it exits (bench.rs).
        let split = self
            .leak_scan
            .then(|| BenchSplit::of(self.table[i].leak_scan.as_deref()));
        self.benches
            .drop_blocks(&mut self.table[i], true, split.as_ref());
        if self.leak_scan {
            self.split_leaks(i);
        }
        let leaked = self.drop_live(i, false);
        self.table[i].heap.leaked = leaked;
        self.table.end(i, status, ts);
        if self.table[i].resident.is_some() {
            self.set_contribution(i, [0; MEMBERS + 1], ts);
        }
    }

    /// Process `i` exits: split what it leaves live into definitely lost and still reachable
    /// by its leak scan, or count it as not scanned. Lost blocks are those the scan listed that
    /// are still live now (the scan's counts when it listed fewer than it found); the rest of
    /// what is live is reachable.
    fn split_leaks(&mut self, i: ProcIdx) {
        let p = &mut self.table[i];
        let leaked = Blocks {
            blocks: p.live.len() as u64,
            bytes: p.heap.live_bytes,
        };
        let mut split = LeakMetrics::default();
        match p.leak_scan.take() {
            Some(scan) if scan.failure.is_empty() => {
                let mut lost = Blocks::default();
                for addr in &scan.lost {
                    if let Some(&size) = p.live.get(addr) {
                        lost = lost.plus(Blocks {
                            blocks: 1,
                            bytes: size,
                        });
                    }
                }
                if scan.lost_blocks > scan.lost.len() as u64 {
                    lost = Blocks {
                        blocks: scan.lost_blocks.min(leaked.blocks),
                        bytes: scan.lost_bytes.min(leaked.bytes),
                    };
                }
                if let Some(stacks) = self.stacks.as_deref_mut() {
                    stacks.lost(i, &p.live, &scan.lost);
                }
                split.definitely_lost = lost;
                split.still_reachable = Blocks {
                    blocks: leaked.blocks - lost.blocks,
                    bytes: leaked.bytes.saturating_sub(lost.bytes),
                };
                split.scanned_processes = 1;
            }
            _ => {
                split.not_scanned = leaked;
                split.unscanned_processes = 1;
            }
        }
        p.heap.leaks = Some(split);
    }

    /// One resident counter of process `i` changed.
    fn resident_change(&mut self, i: ProcIdx, member: usize, delta: i64, value: u64, ts: u64) {
        if member >= MEMBERS {
            return;
        }
        self.table.note_resident();
        let p = &mut self.table[i];
        // Until the process does anything itself, changes come from the kernel filling its
        // counters at fork.
        let filling = !p.acted;
        let r = p.resident.get_or_insert_with(Box::default);
        r.change(member, delta, value, filling, ts);
        let wanted = r.wanted_contribution();
        self.set_contribution(i, wanted, ts);
    }

    /// Changes what process `i` contributes to the resident sums of its trees and the run.
    fn set_contribution(&mut self, i: ProcIdx, wanted: [u64; MEMBERS + 1], ts: u64) {
        let Some(r) = self.table[i].resident.as_deref_mut() else {
            return;
        };
        let old = std::mem::replace(&mut r.contribution, wanted);
        if old != wanted {
            self.table.replace_resident(i, &old, &wanted, ts);
            if let Some(stacks) = self.stacks.as_deref_mut() {
                let pages = [wanted[0], wanted[1], wanted[2], wanted[3]];
                stacks.resident(&self.table, i, pages, ts);
            }
        }
    }

    /// Process `i`'s mapped bytes went from `old` to `new`: update its trees and the run.
    fn set_mapped(&mut self, i: ProcIdx, old: [u64; 2], new: [u64; 2], ts: u64) {
        if old != new {
            self.table.replace_mapped(i, old, new, ts);
        }
    }

    /// Process `i` lost its address space (exec or exit): its mappings leave the sums.
    fn drop_mapped(&mut self, i: ProcIdx, ts: u64) {
        if let Some(stacks) = self.stacks.as_deref_mut() {
            stacks.drop_resident(i);
        }
        if let Some(m) = self.table[i].mapped.as_deref_mut() {
            let old = m.live;
            m.clear();
            self.set_mapped(i, old, [0; 2], ts);
        }
    }

    /// Records the damaged ranges the reader skipped, for the report to name them.
    pub fn note_skipped(&mut self, skipped: &[Skipped]) {
        self.log.skipped = skipped.to_vec();
    }

    /// Ends the pass: `end` is how reading ended (`None` when the caller does not know, as for
    /// synthetic streams; it is not taken as damage).
    pub fn finish(mut self, end: Option<&ReadEnd>) -> Report {
        let start_ns = self.header.start_monotonic_ns;
        // Names before anything reads frames: a cut-short recording has none of its own.
        if let Some(stacks) = self.stacks.as_deref_mut() {
            stacks.name_missing();
        }
        // Suppressions first: they move lost blocks of the sites and of their processes'
        // splits, which the sites' order and the sums below read.
        let suppressed = match (&self.suppressions, self.stacks.as_deref_mut()) {
            (Some(s), Some(stacks)) => Some(stacks.suppress(s, &mut self.table, &mut self.benches)),
            (Some(s), None) => Some(super::suppress::empty_report(s)),
            _ => None,
        };
        let benches = &self.benches;
        let stacks = self
            .stacks
            .map(|s| s.finish(&self.table, start_ns, |b| Some(benches.uri(b).to_string())));
        let end_ns = assemble::end_ns(&self.header, self.log.last_ts_ns, end);
        let timeline = self.timeline.map(|t| t.finish(&self.table, end_ns));
        let rmap = rmap_report(&self.table, self.page_bytes, start_ns);
        let mut report = assemble::report(
            &self.header,
            self.page_bytes,
            self.table,
            self.benches,
            self.log,
            end,
        );
        report.timeline = timeline;
        report.suppressions = suppressed;
        report.rmap = rmap;
        if let Some(super::stacks::Finished {
            scope,
            benches,
            profile,
            functions,
        }) = stacks
        {
            report.stacks = Some(scope);
            report.profile = profile;
            report.functions = functions;
            // Benchmarks are listed in the order they were first named: by their index.
            for (b, sites) in benches {
                if let Some(bench) = report.benchmarks.get_mut(b) {
                    bench.stacks = Some(sites);
                }
            }
        }
        report
    }
}

/// The rmap accounting of every process that has some, in table order; None when the
/// recording has no rmap events.
fn rmap_report(table: &ProcessTable, page: u64, start_ns: u64) -> Option<RmapReport> {
    let processes: Vec<_> = table
        .procs()
        .iter()
        .filter_map(|p| {
            let r = p.rmap.as_deref()?;
            let rss = p.resident.as_deref().map(|r| r.values());
            let command = command_of(&p.argv, p.exe.as_deref());
            Some(r.metrics(p.pid, command, rss, page, start_ns))
        })
        .collect();
    (!processes.is_empty()).then(|| RmapReport {
        sources: "rmap_resident_pages: rss_stat's baseline (fork or exec) plus the rmap net; \
                  rss_stat_pages: the kernel's counters"
            .into(),
        processes,
    })
}

/// Whether an exec of `filename` with `argv` runs `memtrack ctl`: a control client of the
/// harness, which belongs to no benchmark. A shell harness runs `memtrack ctl stop` as a child
/// of the benchmark's pid while measuring, and the client's own start-up allocations must not
/// count in the benchmark.
fn is_control_client(filename: &str, argv: &[String]) -> bool {
    crate::control::is_client_exec(filename, argv)
}

/// Runs the whole pass over `events`: the pure core of `report` and `check`.
pub fn analyze<I: IntoIterator<Item = Event>>(
    header: &Header,
    events: I,
    end: Option<&ReadEnd>,
) -> Report {
    let mut accounting = Accounting::new(header);
    for event in events {
        accounting.apply(&event);
    }
    accounting.finish(end)
}

/// [`analyze`] that also finds the allocation sites of `scope`.
pub fn analyze_sites<I: IntoIterator<Item = Event>>(
    header: &Header,
    events: I,
    end: Option<&ReadEnd>,
    scope: &Scope,
    options: SiteOptions,
) -> Report {
    let mut accounting = Accounting::with_sites(header, scope, options);
    for event in events {
        accounting.apply(&event);
    }
    accounting.finish(end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{AllocFunc, Bench};
    use crate::model::metrics::Scope;
    use crate::testkit::*;

    // --- counts -----------------------------------------------------------------------------

    #[test]
    fn one_alloc_is_counted() {
        let r = run(seq(vec![malloc(0x10, 100)]));
        let h = own(&r, 1);
        assert_eq!((h.allocs, h.bytes_allocated, h.frees), (1, 100, 0));
    }

    #[test]
    fn alloc_then_free() {
        let r = run(seq(vec![malloc(0x10, 100), free(0x10)]));
        let h = own(&r, 1);
        assert_eq!((h.frees, h.bytes_freed), (1, 100));
        assert_eq!(h.live_at_end, Blocks::default());
    }

    #[test]
    fn average_size() {
        let r = run(seq(vec![malloc(1, 10), malloc(2, 20), malloc(3, 33)]));
        assert!((own(&r, 1).average_alloc_bytes - 21.0).abs() < 1e-9);
    }

    #[test]
    fn average_of_nothing_is_zero() {
        let r = run(seq(vec![failed(1)]));
        assert_eq!(own(&r, 1).average_alloc_bytes, 0.0);
    }

    #[test]
    fn failed_allocs_are_not_allocs() {
        let failed = EventKind::AllocFailed {
            func: AllocFunc::Calloc,
            size: 1 << 40,
        };
        let r = run(seq(vec![failed.clone(), failed, malloc(1, 8)]));
        let h = own(&r, 1);
        assert_eq!((h.failed_allocs, h.allocs, h.bytes_allocated), (2, 1, 8));
    }

    #[test]
    fn totals_sum_processes() {
        let r = run(vec![
            at(0, 1, 1, malloc(1, 10)),
            at(1, 2, 2, malloc(1, 20)),
            at(2, 2, 2, free(1)),
        ]);
        let t = &r.totals.heap;
        assert_eq!((t.allocs, t.bytes_allocated, t.frees), (2, 30, 1));
        assert_eq!(r.totals.processes, 2);
    }

    // --- peaks ------------------------------------------------------------------------------

    #[test]
    fn peak_is_highest_live() {
        let r = run(seq(vec![
            malloc(1, 100),
            malloc(2, 50),
            free(1),
            malloc(3, 60),
        ]));
        assert_eq!(own(&r, 1).peak_live_bytes, 150);
    }

    #[test]
    fn peak_time_is_first_reached_relative_to_start() {
        let r = run(vec![
            at(10, 1, 1, malloc(1, 100)),
            at(20, 1, 1, free(1)),
            at(30, 1, 1, malloc(2, 100)),
        ]);
        assert_eq!(own(&r, 1).peak_live_at_ns, Some(10));
    }

    #[test]
    fn no_peak_time_without_allocations() {
        let r = run(seq(vec![exit(0)]));
        assert_eq!(own(&r, 1).peak_live_at_ns, None);
    }

    #[test]
    fn event_before_start_does_not_underflow() {
        let events = vec![Event {
            ts_ns: 5,
            pid: 1,
            tid: 1,
            kind: malloc(1, 1),
        }];
        let r = run(events);
        assert_eq!(own(&r, 1).peak_live_at_ns, Some(0));
    }

    // --- temporary allocations ------------------------------------------------------------

    #[test]
    fn free_right_after_alloc_is_temporary() {
        let r = run(seq(vec![malloc(1, 8), free(1)]));
        assert_eq!(own(&r, 1).temporary_allocs, 1);
    }

    #[test]
    fn free_after_another_alloc_is_not_temporary() {
        let r = run(seq(vec![malloc(1, 8), malloc(2, 8), free(1)]));
        assert_eq!(own(&r, 1).temporary_allocs, 0);
    }

    #[test]
    fn last_of_several_is_temporary() {
        let r = run(seq(vec![malloc(1, 8), malloc(2, 8), free(1), free(2)]));
        assert_eq!(own(&r, 1).temporary_allocs, 1);
    }

    #[test]
    fn other_threads_allocations_do_not_matter() {
        let r = run(vec![
            at(0, 1, 1, malloc(1, 8)),
            at(1, 1, 2, malloc(2, 8)),
            at(2, 1, 1, free(1)),
        ]);
        assert_eq!(own(&r, 1).temporary_allocs, 1);
    }

    #[test]
    fn free_by_another_thread_is_not_temporary() {
        let r = run(vec![at(0, 1, 1, malloc(1, 8)), at(1, 1, 2, free(1))]);
        assert_eq!(own(&r, 1).temporary_allocs, 0);
    }

    #[test]
    fn realloc_release_is_not_temporary() {
        let r = run(seq(vec![malloc(1, 8), realloc(1, 2, 16)]));
        assert_eq!(own(&r, 1).temporary_allocs, 0);
    }

    #[test]
    fn free_right_after_realloc_is_temporary() {
        let r = run(seq(vec![malloc(1, 8), realloc(1, 2, 16), free(2)]));
        assert_eq!(own(&r, 1).temporary_allocs, 1);
    }

    #[test]
    fn address_reused_is_temporary_once() {
        let r = run(seq(vec![malloc(1, 8), free(1), free(1)]));
        let h = own(&r, 1);
        assert_eq!((h.temporary_allocs, h.unknown_frees), (1, 1));
    }

    // --- realloc ----------------------------------------------------------------------------

    #[test]
    fn realloc_chain() {
        // malloc 10 at A; grow in place to 20; move to B at 40; free B.
        let r = run(seq(vec![
            malloc(0xa, 10),
            realloc(0xa, 0xa, 20),
            realloc(0xa, 0xb, 40),
            free(0xb),
        ]));
        let h = own(&r, 1);
        assert_eq!((h.allocs, h.bytes_allocated), (3, 70));
        assert_eq!((h.frees, h.bytes_freed), (3, 70));
        assert_eq!((h.reallocs, h.realloc_moves), (2, 1));
        assert_eq!(h.peak_live_bytes, 40);
        assert_eq!(h.unknown_frees, 0);
        assert_eq!(h.live_at_end, Blocks::default());
    }

    #[test]
    fn realloc_in_place_does_not_double_the_peak() {
        let r = run(seq(vec![malloc(1, 100), realloc(1, 1, 100)]));
        assert_eq!(own(&r, 1).peak_live_bytes, 100);
    }

    #[test]
    fn realloc_of_unknown_block() {
        let r = run(seq(vec![realloc(0x1, 0x2, 50)]));
        let h = own(&r, 1);
        assert_eq!((h.allocs, h.frees, h.unknown_frees), (1, 0, 1));
        assert_eq!(
            h.live_at_end,
            Blocks {
                blocks: 1,
                bytes: 50
            }
        );
    }

    #[test]
    fn realloc_shrink_lowers_live() {
        let r = run(seq(vec![malloc(1, 100), realloc(1, 1, 10), exit(0)]));
        assert_eq!(
            own(&r, 1).leaked,
            Blocks {
                blocks: 1,
                bytes: 10
            }
        );
    }

    // --- unknown and duplicate ------------------------------------------------------------

    #[test]
    fn unknown_free_is_counted_apart() {
        let r = run(seq(vec![malloc(1, 8), free(2)]));
        let h = own(&r, 1);
        assert_eq!((h.frees, h.unknown_frees), (0, 1));
        assert_eq!(h.live_at_end.blocks, 1);
    }

    #[test]
    fn first_event_a_free_creates_the_process() {
        let r = run(vec![at(0, 9, 9, free(5))]);
        assert_eq!(own(&r, 9).unknown_frees, 1);
    }

    #[test]
    fn duplicate_alloc_replaces_block() {
        let r = run(seq(vec![malloc(1, 100), malloc(1, 30), exit(0)]));
        let h = own(&r, 1);
        assert_eq!(h.duplicate_allocs, 1);
        assert_eq!(
            h.leaked,
            Blocks {
                blocks: 1,
                bytes: 30
            }
        );
        assert_eq!(h.peak_live_bytes, 100);
    }

    // --- exit, exec -------------------------------------------------------------------------

    #[test]
    fn live_at_exit_is_leaked() {
        let r = run(seq(vec![malloc(1, 10), malloc(2, 20), free(1), exit(0)]));
        let h = own(&r, 1);
        assert_eq!(
            h.leaked,
            Blocks {
                blocks: 1,
                bytes: 20
            }
        );
        assert_eq!(h.live_at_end, Blocks::default());
    }

    #[test]
    fn exit_info_is_kept() {
        let r = run(vec![at(42, 1, 1, exit(2 << 8))]);
        let e = process(&r, 1).exit.unwrap();
        assert_eq!((e.at_ns, e.exit_code, e.signal), (42, 2, None));
    }

    #[test]
    fn no_exit_means_live_at_end() {
        let r = run(seq(vec![malloc(1, 10)]));
        let p = process(&r, 1);
        assert!(p.exit.is_none());
        assert_eq!(
            p.own.heap.live_at_end,
            Blocks {
                blocks: 1,
                bytes: 10
            }
        );
        assert_eq!(p.own.heap.leaked, Blocks::default());
    }

    #[test]
    fn exec_drops_live_heap() {
        let r = run(seq(vec![malloc(1, 10), exec("/bin/x"), free(1), exit(0)]));
        let h = own(&r, 1);
        assert_eq!(
            h.dropped_at_exec,
            Blocks {
                blocks: 1,
                bytes: 10
            }
        );
        assert_eq!(h.unknown_frees, 1);
        assert_eq!(h.leaked, Blocks::default());
    }

    #[test]
    fn exec_sets_program() {
        let r = run(seq(vec![exec("/bin/a"), exec("/bin/b")]));
        let p = process(&r, 1);
        assert_eq!(p.executable.as_deref(), Some("/bin/b"));
        assert_eq!(p.argv, vec!["/bin/b".to_string(), "-x".into()]);
        assert_eq!(p.execs, 2);
    }

    #[test]
    fn root_without_exec_uses_header_command() {
        let r = run(seq(vec![malloc(1, 1)]));
        assert_eq!(process(&r, 1).executable.as_deref(), Some("/bin/root"));
    }

    #[test]
    fn exited_process_frees_its_memory() {
        let mut acc = Accounting::new(&header());
        for e in seq(vec![malloc(1, 1), malloc(2, 2), exit(0)]) {
            acc.apply(&e);
        }
        assert_eq!(acc.table.procs()[0].live.capacity(), 0);
        assert_eq!(acc.table.procs()[0].last_alloc.capacity(), 0);
    }

    #[test]
    fn events_after_exit_are_ignored() {
        let r = run(seq(vec![malloc(1, 1), exit(0), free(1), exit(0)]));
        assert_eq!(r.run.ignored_events, 2);
        assert_eq!(r.processes.len(), 1);
    }

    #[test]
    fn apply_says_what_it_ignored_and_why() {
        let mut acc = Accounting::new(&header()).with_timeline();
        let outcomes: Vec<Outcome> = seq(vec![malloc(1, 1), exit(0), free(1)])
            .iter()
            .map(|e| acc.apply(e))
            .collect();
        assert_eq!(
            outcomes,
            [
                Outcome::Accounted,
                Outcome::Accounted,
                Outcome::Ignored(IgnoredBecause::AfterExit)
            ]
        );
        assert_eq!(acc.log.ignored_events, 1);
    }

    #[test]
    fn alloc_after_exit_is_a_reused_pid() {
        let r = run(seq(vec![malloc(1, 1), exit(0), malloc(1, 5)]));
        assert_eq!(r.processes.len(), 2);
        assert_eq!(r.processes[1].own.heap.allocs, 1);
    }

    // --- robustness ------------------------------------------------------------------------

    #[test]
    fn huge_sizes_saturate() {
        let r = run(seq(vec![
            malloc(1, u64::MAX),
            malloc(2, u64::MAX),
            free(1),
            exit(0),
        ]));
        let h = own(&r, 1);
        assert_eq!(h.bytes_allocated, u64::MAX);
        assert_eq!(h.peak_live_bytes, u64::MAX);
    }

    #[test]
    fn extreme_rss_values_do_not_panic() {
        let r = run(seq(vec![
            rss(RssMember::Anon, i64::MIN, u64::MAX, true),
            rss(RssMember::Anon, i64::MIN, u64::MAX, true),
            rss(RssMember::File, i64::MAX, u64::MAX, true),
            rss(RssMember::File, i64::MAX, u64::MAX, false),
        ]));
        assert!(process(&r, 1).own.resident.is_some());
    }

    use crate::xorshift::XorShift as Random;

    fn random_event(rng: &mut Random, t: u64) -> Event {
        let pid = rng.below(8) as u32;
        let addr = rng.below(16) * 16;
        let size = match rng.below(4) {
            0 => rng.next(),
            _ => rng.below(64),
        };
        let kind = match rng.below(12) {
            0..=3 => malloc(addr, size),
            4..=6 => free(addr),
            7 => realloc(addr, rng.below(16) * 16, size),
            8 => fork(rng.below(8) as u32),
            9 => match rng.below(3) {
                0 => exit(rng.next() as i32),
                1 => exec("/bin/r"),
                _ => lost("ring_full", rng.below(100)),
            },
            10 => EventKind::AllocFailed {
                func: AllocFunc::Malloc,
                size,
            },
            _ => rss(
                RssMember::ALL[rng.below(4) as usize],
                rng.next() as i64 % 1000,
                rng.next(),
                rng.below(2) == 0,
            ),
        };
        Event {
            ts_ns: t.wrapping_add(rng.below(3)),
            pid,
            tid: pid + rng.below(2) as u32,
            kind,
        }
    }

    #[test]
    fn random_streams_do_not_panic_and_stay_consistent() {
        for seed in 1..200u64 {
            let mut rng = Random(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
            let events: Vec<Event> = (0..400).map(|t| random_event(&mut rng, t)).collect();
            let end = ReadEnd::Damaged {
                offset: seed,
                reason: "cut".into(),
            };
            let r = analyze(&header(), events, Some(&end));
            let own_allocs: u64 = r.processes.iter().map(|p| p.own.heap.allocs).sum();
            assert_eq!(own_allocs, r.totals.heap.allocs, "seed {seed}");
            let root_trees: u64 = r
                .processes
                .iter()
                .filter(|p| p.depth == 0)
                .map(|p| p.tree.processes)
                .sum();
            assert_eq!(root_trees, r.processes.len() as u64, "seed {seed}");
            for p in &r.processes {
                assert!(p.tree.heap.peak_live_bytes >= p.own.heap.peak_live_bytes);
                assert!(r.totals.heap.peak_live_bytes >= p.tree.heap.peak_live_bytes);
            }
            let _ = r.narrow(Scope::Tree { pid: 3 });
        }
    }

    #[test]
    fn random_streams_with_control_commands_stay_consistent() {
        use crate::format::{ControlCommand, MarkerKind};
        for seed in 1..200u64 {
            let mut rng = Random(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
            let events: Vec<Event> = (0..400)
                .map(|t| {
                    if rng.below(8) > 0 {
                        return random_event(&mut rng, t);
                    }
                    let command = match rng.below(4) {
                        0 => ControlCommand::Start,
                        1 => ControlCommand::Stop,
                        2 => ControlCommand::Bench(Bench {
                            uri: format!("b{}", rng.below(3)),
                            pid: rng.below(8) as u32,
                        }),
                        _ => ControlCommand::Marker {
                            kind: MarkerKind::ALL[rng.below(4) as usize],
                        },
                    };
                    at(t, 0, 0, EventKind::Control { command })
                })
                .collect();
            let r = analyze(&header(), events, None);
            let bench_allocs: u64 = r.benchmarks.iter().map(|b| b.metrics.heap.allocs).sum();
            assert!(bench_allocs <= r.totals.heap.allocs, "seed {seed}");
            for b in &r.benchmarks {
                let h = &b.metrics.heap;
                let ended = h.frees + h.leaked.blocks + h.dropped_at_exec.blocks;
                assert!(ended <= h.allocs, "seed {seed}: {b:?}");
                assert!(
                    h.peak_live_bytes <= r.totals.heap.peak_live_bytes,
                    "seed {seed}"
                );
                assert!(b.metrics.processes <= r.totals.processes, "seed {seed}");
            }
        }
    }

    // --- benchmark -------------------------------------------------------------------------

    /// 10 million synthetic events through `analyze` (see `synthetic::benchmark_events`).
    fn throughput(live: u64) {
        throughput_of(live, Vec::new());
    }

    /// [`throughput`] with `prelude` (e.g. control events) before the benchmark's events.
    fn throughput_of(live: u64, prelude: Vec<Event>) {
        const EVENTS: u64 = 10_000_000;
        let events = prelude.into_iter().chain(benchmark_events(EVENTS, live));
        let started = std::time::Instant::now();
        let report = analyze(&Header::default(), events, None);
        let elapsed = started.elapsed().as_secs_f64();
        let hwm = crate::testkit::peak_resident();
        println!(
            "{EVENTS} events, ~{} live blocks: {elapsed:.3} s, {:.1} M events/s; {hwm}; \
             peak {} B; benchmark allocations {:?}",
            12 * live,
            EVENTS as f64 / elapsed / 1e6,
            report.totals.heap.peak_live_bytes,
            report.benchmarks.first().map(|b| b.metrics.heap.allocs)
        );
    }

    /// `cargo test --release -- --ignored --nocapture report_throughput`: the benchmark of the
    /// issue (few live blocks), printing events per second and peak resident memory (VmHWM).
    #[test]
    #[ignore]
    fn report_throughput_few_live() {
        throughput(64);
    }

    /// The same, every event inside the window of a benchmark of the whole tree: the most
    /// benchmark scoping can cost.
    #[test]
    #[ignore]
    fn report_throughput_few_live_in_a_benchmark() {
        use crate::format::ControlCommand;
        let control = |command| Event {
            ts_ns: START,
            pid: 0,
            tid: 0,
            kind: EventKind::Control { command },
        };
        let bench = ControlCommand::Bench(Bench {
            uri: "all".into(),
            pid: 1,
        });
        throughput_of(64, vec![control(bench), control(ControlCommand::Start)]);
    }

    /// The same with the sites pass (`report --stacks`; every allocation without a stack, so
    /// the cost of the pass's bookkeeping itself).
    #[test]
    #[ignore]
    fn report_throughput_few_live_with_sites() {
        const EVENTS: u64 = 10_000_000;
        let started = std::time::Instant::now();
        let report = analyze_sites(
            &Header::default(),
            benchmark_events(EVENTS, 64),
            None,
            &Scope::Run,
            SiteOptions::default(),
        );
        let elapsed = started.elapsed().as_secs_f64();
        println!(
            "{EVENTS} events with sites: {elapsed:.3} s, {:.1} M events/s; {}; {} sites",
            EVENTS as f64 / elapsed / 1e6,
            crate::testkit::peak_resident(),
            report.stacks.map_or(0, |s| s.sites_total)
        );
    }

    /// The same with about 1.2 million live blocks, to see the cost of a large live set.
    #[test]
    #[ignore]
    fn report_throughput_many_live() {
        throughput(100_000);
    }
}
