//! The streaming accounting pass: one event at a time in, a [`Report`] out at the end.
//!
//! Flow: the reader yields events; [`Accounting::apply`] updates per-process state (live blocks,
//! counters, resident counters) and the running sums of every process tree the process belongs
//! to; [`Accounting::finish`] turns the state into `metrics` values. Memory grows with the live
//! blocks and the processes, never with the length of the file: a process's live blocks are
//! dropped when it exits.
//!
//! The rules (also in docs/report-schema.md):
//! - a block belongs to the process that allocated it; a child starts with no live blocks, so
//!   its frees of blocks its parent allocated before the fork are unknown frees;
//! - a realloc is one allocation of the new size plus, when the old block is live, one free of
//!   it (applied first, so a realloc in place never raises the peak by the old size);
//! - exec discards the live heap (`dropped_at_exec`), exit turns it into leaks;
//! - the tree peak is the peak of the sum of the live heaps of the tree's processes, kept
//!   exactly by updating the sum of every ancestor on each change (O(depth) per event).

use super::incomplete;
use crate::format::{Event, EventKind, Header, LostCount, ReadEnd, Skipped, FEATURE_CONTROL};
use crate::intmap::IntMap;

use super::bench::Benchmarks;
use super::mapped::{Calls, MappedSum, ProcMapped};
use super::metrics::{
    BenchmarkMetrics, Blocks, Damage, ExitInfo, FileCoverage, HeapMetrics, LostEvents, Metrics,
    ProcessMetrics, Report, RunInfo, Scope, SizeBucket, SCHEMA_VERSION,
};
use super::resident::{ProcResident, ResidentSum, MEMBERS};

/// Number of size buckets: 0, then one per bit length 1..=64.
const BUCKETS: usize = 65;

/// Histogram bucket of a size: 0 for 0, else its bit length (2-3 -> 2, 4-7 -> 3, ...).
fn bucket(size: u64) -> usize {
    (u64::BITS - size.leading_zeros()) as usize
}

/// Smallest and largest size of bucket `i`.
fn bucket_range(i: usize) -> (u64, u64) {
    match i {
        0 => (0, 0),
        64.. => (1 << 63, u64::MAX),
        _ => (1 << (i - 1), (1 << i) - 1),
    }
}

/// No process: the parent of a root, or an empty cache.
pub(super) const NONE: usize = usize::MAX;

/// Counters of one process's heap, also summed into trees and the run at the end; and of one
/// benchmark (`bench.rs`).
#[derive(Clone, Debug)]
pub(super) struct HeapCounters {
    pub(super) allocs: u64,
    pub(super) frees: u64,
    pub(super) bytes_allocated: u64,
    pub(super) bytes_freed: u64,
    pub(super) failed: u64,
    pub(super) temporary: u64,
    pub(super) reallocs: u64,
    pub(super) realloc_moves: u64,
    pub(super) unknown_frees: u64,
    pub(super) duplicate_allocs: u64,
    pub(super) live_bytes: u64,
    pub(super) peak_bytes: u64,
    pub(super) peak_ns: u64,
    pub(super) leaked: Blocks,
    pub(super) live_at_end: Blocks,
    pub(super) dropped_at_exec: Blocks,
    pub(super) histogram: [u64; BUCKETS],
}

impl Default for HeapCounters {
    fn default() -> Self {
        HeapCounters {
            allocs: 0,
            frees: 0,
            bytes_allocated: 0,
            bytes_freed: 0,
            failed: 0,
            temporary: 0,
            reallocs: 0,
            realloc_moves: 0,
            unknown_frees: 0,
            duplicate_allocs: 0,
            live_bytes: 0,
            peak_bytes: 0,
            peak_ns: 0,
            leaked: Blocks::default(),
            live_at_end: Blocks::default(),
            dropped_at_exec: Blocks::default(),
            histogram: [0; BUCKETS],
        }
    }
}

impl HeapCounters {
    /// Adds the additive counters of `other` (not live bytes or peaks, which trees keep apart).
    fn add(&mut self, other: &HeapCounters) {
        self.allocs = self.allocs.saturating_add(other.allocs);
        self.frees = self.frees.saturating_add(other.frees);
        self.bytes_allocated = self.bytes_allocated.saturating_add(other.bytes_allocated);
        self.bytes_freed = self.bytes_freed.saturating_add(other.bytes_freed);
        self.failed = self.failed.saturating_add(other.failed);
        self.temporary = self.temporary.saturating_add(other.temporary);
        self.reallocs = self.reallocs.saturating_add(other.reallocs);
        self.realloc_moves = self.realloc_moves.saturating_add(other.realloc_moves);
        self.unknown_frees = self.unknown_frees.saturating_add(other.unknown_frees);
        self.duplicate_allocs = self.duplicate_allocs.saturating_add(other.duplicate_allocs);
        self.leaked = self.leaked.plus(other.leaked);
        self.live_at_end = self.live_at_end.plus(other.live_at_end);
        self.dropped_at_exec = self.dropped_at_exec.plus(other.dropped_at_exec);
        for (a, b) in self.histogram.iter_mut().zip(other.histogram.iter()) {
            *a = a.saturating_add(*b);
        }
    }

    /// Raises the live heap by `bytes` at `ts`, and its peak with it.
    pub(super) fn grow_live(&mut self, bytes: u64, ts: u64) {
        self.live_bytes = self.live_bytes.saturating_add(bytes);
        if self.live_bytes > self.peak_bytes {
            self.peak_bytes = self.live_bytes;
            self.peak_ns = ts;
        }
    }

    /// Counts one allocation of `size` bytes.
    pub(super) fn count_alloc(&mut self, size: u64) {
        self.allocs += 1;
        self.bytes_allocated = self.bytes_allocated.saturating_add(size);
        self.histogram[bucket(size)] += 1;
    }

    /// The metrics form, with the peak of the scope (a process's own, or a tree's sum).
    pub(super) fn to_metrics(&self, peak: Peak, start_ns: u64) -> HeapMetrics {
        let average_alloc_bytes = if self.allocs == 0 {
            0.0
        } else {
            self.bytes_allocated as f64 / self.allocs as f64
        };
        HeapMetrics {
            allocs: self.allocs,
            frees: self.frees,
            bytes_allocated: self.bytes_allocated,
            bytes_freed: self.bytes_freed,
            average_alloc_bytes,
            failed_allocs: self.failed,
            temporary_allocs: self.temporary,
            reallocs: self.reallocs,
            realloc_moves: self.realloc_moves,
            unknown_frees: self.unknown_frees,
            duplicate_allocs: self.duplicate_allocs,
            peak_live_bytes: peak.value,
            peak_live_at_ns: peak.at(start_ns),
            leaked: self.leaked,
            live_at_end: self.live_at_end,
            dropped_at_exec: self.dropped_at_exec,
            size_histogram: self
                .histogram
                .iter()
                .enumerate()
                .filter(|(_, &count)| count > 0)
                .map(|(i, &count)| {
                    let (min_bytes, max_bytes) = bucket_range(i);
                    SizeBucket {
                        min_bytes,
                        max_bytes,
                        count,
                    }
                })
                .collect(),
        }
    }
}

/// A running sum and its peak: the live heap of a tree or of the run.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Peak {
    pub(super) value: u64,
    pub(super) at_ns: u64,
}

impl Peak {
    /// The time of the peak relative to the start, or `None` when nothing was ever counted.
    pub(super) fn at(self, start_ns: u64) -> Option<u64> {
        (self.value > 0).then(|| self.at_ns.saturating_sub(start_ns))
    }

    /// Raises the peak to `value` if it is higher, noting when.
    pub(super) fn raise(&mut self, value: u64, ts_ns: u64) {
        if value > self.value {
            self.value = value;
            self.at_ns = ts_ns;
        }
    }
}

/// The running live-heap sum of the tree rooted at one process, with the parent link the
/// ancestor walk follows. Kept apart from `Proc` so the walk touches little memory.
#[derive(Clone, Copy, Debug)]
struct TreeSum {
    parent: usize,
    live: u64,
    peak: Peak,
}

/// One process: one pid for one lifetime.
#[derive(Debug)]
struct Proc {
    pid: u32,
    exe: Option<String>,
    argv: Vec<String>,
    execs: u32,
    started_ns: u64,
    exit: Option<(i32, u64)>,
    /// Whether the process has done anything itself yet; until then, resident changes made by
    /// others (the parent filling its counters at fork) set its baseline.
    acted: bool,
    /// Live blocks: address -> requested size.
    live: IntMap<u64, u64>,
    /// Per thread, the address it allocated last, while that block is live and nothing else was
    /// allocated by the thread since: a free of it is a temporary allocation.
    last_alloc: IntMap<u32, u64>,
    heap: HeapCounters,
    resident: Option<Box<ProcResident>>,
    mapped: Option<Box<ProcMapped>>,
    /// Live blocks allocated inside a benchmark's window: address -> benchmark index.
    bench_blocks: IntMap<u64, usize>,
    /// Whether its current image is `memtrack ctl`, a control client that belongs to no
    /// benchmark (see `is_control_client`).
    control_client: bool,
}

impl Proc {
    fn is_alive(&self) -> bool {
        self.exit.is_none()
    }
}

/// What the file says was lost, per cause (the largest cumulative count seen).
fn note_lost(lost: &mut Vec<LostCount>, cause: &str, count: u64) {
    match lost.iter_mut().find(|l| l.cause == cause) {
        Some(l) => l.count = l.count.max(count),
        None => lost.push(LostCount {
            cause: cause.to_string(),
            count,
        }),
    }
}

/// How a pid stands in the accounting.
enum Lookup {
    Alive(usize),
    Exited,
    Absent,
}

/// The streaming state: feed it every event in file order, then call [`Accounting::finish`].
pub struct Accounting {
    header: Header,
    procs: Vec<Proc>,
    trees: Vec<TreeSum>,
    /// Empty until the first resident event; then parallel to `procs`.
    resident_trees: Vec<ResidentSum>,
    by_pid: IntMap<u32, usize>,
    /// The last pid looked up and its live process: consecutive events mostly share a pid.
    cached_pid: u32,
    cached_index: usize,
    run: TreeSum,
    run_resident: ResidentSum,
    /// Parallel to `procs`: the mapped bytes of each process's tree.
    mapped_trees: Vec<MappedSum>,
    run_mapped: MappedSum,
    files: Vec<FileCoverage>,
    lost: Vec<LostCount>,
    /// Damaged ranges the reader skipped (`note_skipped`).
    skipped: Vec<Skipped>,
    events: u64,
    ignored_events: u64,
    last_ts_ns: u64,
    benches: Benchmarks,
}

impl Accounting {
    /// A fresh pass over the recording that starts with `header`.
    pub fn new(header: &Header) -> Accounting {
        Accounting {
            header: header.clone(),
            procs: Vec::new(),
            trees: Vec::new(),
            resident_trees: Vec::new(),
            by_pid: IntMap::default(),
            cached_pid: 0,
            cached_index: NONE,
            run: TreeSum {
                parent: NONE,
                live: 0,
                peak: Peak::default(),
            },
            run_resident: ResidentSum::default(),
            mapped_trees: Vec::new(),
            run_mapped: MappedSum::default(),
            files: Vec::new(),
            lost: Vec::new(),
            skipped: Vec::new(),
            events: 0,
            ignored_events: 0,
            last_ts_ns: 0,
            benches: Benchmarks::new(!header.features.iter().any(|f| f == FEATURE_CONTROL)),
        }
    }

    /// Accounts one event.
    pub fn apply(&mut self, event: &Event) {
        self.events += 1;
        self.last_ts_ns = self.last_ts_ns.max(event.ts_ns);
        let (pid, tid, ts) = (event.pid, event.tid, event.ts_ns);
        match &event.kind {
            EventKind::Alloc { addr, size, .. } => {
                let i = self.active(pid, ts);
                self.procs[i].heap.count_alloc(*size);
                let bench = self.measured_in(i);
                if let Some(b) = bench {
                    self.benches.get(b).heap.count_alloc(*size);
                }
                let replaced = self.insert_block(i, tid, *addr, *size, ts);
                self.bench_insert(i, *addr, *size, ts, bench, replaced);
            }
            EventKind::Free { addr, .. } => {
                let i = match self.lookup(pid) {
                    Lookup::Alive(i) => i,
                    Lookup::Exited => {
                        self.ignored_events += 1;
                        return;
                    }
                    Lookup::Absent => self.active(pid, ts),
                };
                self.procs[i].acted = true;
                self.free(i, tid, *addr);
            }
            EventKind::Realloc {
                old_addr,
                addr,
                size,
                ..
            } => {
                let i = self.active(pid, ts);
                let bench = self.measured_in(i);
                let counters = std::iter::once(&mut self.procs[i].heap)
                    .chain(bench.map(|b| &mut self.benches.get(b).heap));
                for heap in counters {
                    heap.count_alloc(*size);
                    heap.reallocs += 1;
                    if addr != old_addr {
                        heap.realloc_moves += 1;
                    }
                }
                // The old block goes first, so a realloc never counts both blocks at once.
                let p = &mut self.procs[i];
                match p.live.remove(old_addr) {
                    Some(old_size) => {
                        p.heap.frees += 1;
                        p.heap.bytes_freed = p.heap.bytes_freed.saturating_add(old_size);
                        let owns = !p.bench_blocks.is_empty();
                        self.shrink(i, old_size);
                        if owns || bench.is_some() {
                            self.bench_free(i, *old_addr, old_size, false, bench);
                        }
                    }
                    None => {
                        p.heap.unknown_frees += 1;
                        if let Some(b) = bench {
                            self.benches.get(b).heap.unknown_frees += 1;
                        }
                    }
                }
                let replaced = self.insert_block(i, tid, *addr, *size, ts);
                self.bench_insert(i, *addr, *size, ts, bench, replaced);
            }
            EventKind::AllocFailed { .. } => {
                let i = self.active(pid, ts);
                self.procs[i].heap.failed += 1;
                if let Some(b) = self.measured_in(i) {
                    self.benches.get(b).heap.failed += 1;
                }
            }
            EventKind::Fork { child } => self.fork(pid, *child, ts),
            EventKind::Exec { filename, argv } => {
                let i = self.active(pid, ts);
                self.drop_mapped(i, ts);
                self.exec(i, filename, argv);
            }
            EventKind::Exit { status } => match self.lookup(pid) {
                Lookup::Alive(i) => self.exit(i, *status, ts),
                Lookup::Exited => self.ignored_events += 1,
                Lookup::Absent => {
                    let i = self.active(pid, ts);
                    self.exit(i, *status, ts);
                }
            },
            EventKind::Rss {
                member,
                delta_pages,
                value_pages,
                by_owner,
            } => {
                let i = match self.lookup(pid) {
                    Lookup::Alive(i) => i,
                    // Growth made by another task for a pid that exited is the kernel filling
                    // a new child that reuses the pid; anything else is the teardown of the
                    // exited process's memory.
                    Lookup::Exited if !*by_owner && *delta_pages > 0 => self.spawn(pid, NONE, ts),
                    Lookup::Exited => {
                        self.ignored_events += 1;
                        return;
                    }
                    Lookup::Absent => self.spawn(pid, NONE, ts),
                };
                if *by_owner {
                    self.procs[i].acted = true;
                }
                self.resident_change(i, *member as usize, *delta_pages, *value_pages, ts);
                if self.benches.window().is_some() {
                    self.follow_bench_resident(ts);
                }
            }
            EventKind::Lost { cause, total } => note_lost(&mut self.lost, cause, *total),
            EventKind::Mmap { .. }
            | EventKind::Munmap { .. }
            | EventKind::Mremap { .. }
            | EventKind::Brk { .. } => {
                let i = self.active(pid, ts);
                let page = match self.header.page_size_bytes {
                    0 => 4096,
                    n => u64::from(n),
                };
                let m = self.procs[i].mapped.get_or_insert_with(Box::default);
                let old = m.live;
                m.apply(&event.kind, page, ts);
                let new = m.live;
                self.set_mapped(i, old, new, ts);
            }
            EventKind::Coverage {
                path,
                allocator,
                probes,
            } => {
                if !self.files.iter().any(|f| f.path == *path) {
                    self.files.push(FileCoverage {
                        path: path.clone(),
                        allocator: allocator.clone(),
                        probes: *probes,
                    });
                }
            }
            EventKind::Control { command } => {
                let (by_pid, procs) = (&self.by_pid, &self.procs);
                let alive = |pid| match by_pid.get(&pid) {
                    Some(&i) if procs[i].is_alive() => i,
                    _ => NONE,
                };
                if self.benches.control(command, ts, alive) {
                    self.follow_bench_resident(ts);
                }
            }
        }
    }

    /// The benchmark whose window is open, if process `i` is measured in it: `i` is the
    /// benchmark's pid or descends from it, and is not a control client. Without an open
    /// window (every event of a recording without control commands) this is one check.
    #[inline(always)]
    fn measured_in(&mut self, i: usize) -> Option<usize> {
        let b = self.benches.window()?;
        self.measured_in_window(i, b)
    }

    #[inline(never)]
    fn measured_in_window(&mut self, i: usize, b: usize) -> Option<usize> {
        if self.procs[i].control_client {
            return None;
        }
        if self.benches.root_pid != 0 {
            let root = self.bench_root()?;
            if !self.is_ancestor(root, i) {
                return None;
            }
        }
        self.benches.count_process(b, i);
        Some(b)
    }

    /// The process of the current benchmark's pid, once it is known: a pid the harness named
    /// before any event of it arrived is looked up again later.
    fn bench_root(&mut self) -> Option<usize> {
        if self.benches.root == NONE {
            match self.lookup(self.benches.root_pid) {
                Lookup::Alive(r) => self.benches.root = r,
                Lookup::Exited | Lookup::Absent => return None,
            }
        }
        Some(self.benches.root)
    }

    /// Raises the open window's benchmark's resident peaks to its pid tree's sums now.
    fn follow_bench_resident(&mut self, ts: u64) {
        let Some(b) = self.benches.window() else {
            return;
        };
        if self.resident_trees.is_empty() {
            return; // no resident memory recorded (yet)
        }
        let live = if self.benches.root_pid == 0 {
            self.run_resident.live
        } else {
            match self.bench_root() {
                Some(root) => self.resident_trees[root].live,
                None => return,
            }
        };
        self.benches.get(b).follow_resident(&live, ts);
    }

    /// Process `i` released its live block `addr` of `size` bytes (`temporary` as the process
    /// counted it): the benchmark that owns the block counts the free; otherwise the benchmark
    /// measuring `i` now (`measured`), if any, counts an unknown free. Called only when `i`
    /// holds benchmark blocks or is measured.
    #[inline(never)]
    fn bench_free(
        &mut self,
        i: usize,
        addr: u64,
        size: u64,
        temporary: bool,
        measured: Option<usize>,
    ) {
        match (self.procs[i].bench_blocks.remove(&addr), measured) {
            (Some(b), _) => {
                let bench = self.benches.get(b);
                bench.heap.frees += 1;
                bench.heap.bytes_freed = bench.heap.bytes_freed.saturating_add(size);
                if temporary {
                    bench.heap.temporary += 1;
                }
                bench.shrink(size);
            }
            (None, Some(b)) => self.benches.get(b).heap.unknown_frees += 1,
            (None, None) => {}
        }
    }

    /// Process `i`'s live heap goes away (at exec, or at exit when `at_exit`): the blocks
    /// benchmarks own in it leave their live heaps as `dropped_at_exec` or `leaked`.
    fn drop_bench_blocks(&mut self, i: usize, at_exit: bool) {
        let p = &mut self.procs[i];
        if p.bench_blocks.is_empty() {
            return;
        }
        for (addr, b) in std::mem::take(&mut p.bench_blocks) {
            let bytes = p.live.get(&addr).copied().unwrap_or(0);
            let bench = self.benches.get(b);
            bench.shrink(bytes);
            let gone = if at_exit {
                &mut bench.heap.leaked
            } else {
                &mut bench.heap.dropped_at_exec
            };
            *gone = gone.plus(Blocks { blocks: 1, bytes });
        }
    }

    /// The live process for `pid`, created if the pid is new or was reused, marked as having
    /// acted.
    fn active(&mut self, pid: u32, ts: u64) -> usize {
        if pid == self.cached_pid && self.cached_index != NONE {
            let i = self.cached_index;
            self.procs[i].acted = true;
            return i;
        }
        let i = match self.lookup(pid) {
            Lookup::Alive(i) => i,
            Lookup::Exited | Lookup::Absent => self.spawn(pid, NONE, ts),
        };
        self.procs[i].acted = true;
        self.cached_pid = pid;
        self.cached_index = i;
        i
    }

    /// How `pid` stands now.
    fn lookup(&self, pid: u32) -> Lookup {
        match self.by_pid.get(&pid) {
            Some(&i) if self.procs[i].is_alive() => Lookup::Alive(i),
            Some(_) => Lookup::Exited,
            None => Lookup::Absent,
        }
    }

    /// Starts a new process record for `pid` under `parent` (or [`NONE`]); it has not acted.
    fn spawn(&mut self, pid: u32, parent: usize, ts: u64) -> usize {
        let i = self.procs.len();
        let (exe, argv) = if parent != NONE {
            // A forked child runs its parent's program until it executes another.
            (
                self.procs[parent].exe.clone(),
                self.procs[parent].argv.clone(),
            )
        } else if pid == self.header.root_pid && !self.header.argv.is_empty() {
            (self.header.argv.first().cloned(), self.header.argv.clone())
        } else {
            (None, Vec::new())
        };
        self.procs.push(Proc {
            pid,
            exe,
            argv,
            execs: 0,
            started_ns: ts,
            exit: None,
            acted: false,
            live: IntMap::default(),
            last_alloc: IntMap::default(),
            heap: HeapCounters::default(),
            resident: None,
            mapped: None,
            bench_blocks: IntMap::default(),
            control_client: false,
        });
        self.mapped_trees.push(MappedSum::default());
        self.trees.push(TreeSum {
            parent,
            live: 0,
            peak: Peak::default(),
        });
        if !self.resident_trees.is_empty() {
            self.resident_trees.push(ResidentSum::default());
        }
        self.by_pid.insert(pid, i);
        if self.cached_pid == pid {
            self.cached_index = NONE;
        }
        i
    }

    /// Adds a block at `addr` to process `i` as the thread's latest allocation; returns the
    /// size of the live block it replaced at the same address, if there was one. Inlined: the
    /// hot path of every allocation (measured: without it, the report of a recording without
    /// benchmarks ran 5% slower than before benchmark scoping).
    #[inline(always)]
    fn insert_block(&mut self, i: usize, tid: u32, addr: u64, size: u64, ts: u64) -> Option<u64> {
        let p = &mut self.procs[i];
        let replaced = p.live.insert(addr, size);
        p.last_alloc.insert(tid, addr);
        if let Some(old_size) = replaced {
            p.heap.duplicate_allocs += 1;
            self.shrink(i, old_size);
        }
        self.grow(i, size, ts);
        replaced
    }

    /// Process `i` allocated the block `addr` of `size` bytes, measured in benchmark `bench`
    /// (if any), replacing a live block of `replaced` bytes at the same address (if any): the
    /// replaced block leaves its benchmark, the new one joins `bench`.
    #[inline(always)]
    fn bench_insert(
        &mut self,
        i: usize,
        addr: u64,
        size: u64,
        ts: u64,
        bench: Option<usize>,
        replaced: Option<u64>,
    ) {
        if bench.is_some() || (replaced.is_some() && !self.procs[i].bench_blocks.is_empty()) {
            self.bench_block(i, addr, size, ts, bench, replaced);
        }
    }

    #[inline(never)]
    fn bench_block(
        &mut self,
        i: usize,
        addr: u64,
        size: u64,
        ts: u64,
        bench: Option<usize>,
        replaced: Option<u64>,
    ) {
        let owned = &mut self.procs[i].bench_blocks;
        if let Some(old_size) = replaced {
            // Its free was not seen; the older block leaves its benchmark's live heap.
            if let Some(old) = owned.remove(&addr) {
                self.benches.get(old).shrink(old_size);
            }
            if let Some(b) = bench {
                self.benches.get(b).heap.duplicate_allocs += 1;
            }
        }
        if let Some(b) = bench {
            self.procs[i].bench_blocks.insert(addr, b);
            self.benches.get(b).grow(size, ts);
        }
    }

    /// Releases `addr` in process `i`, or counts an unknown free.
    fn free(&mut self, i: usize, tid: u32, addr: u64) {
        let measured = self.measured_in(i);
        let p = &mut self.procs[i];
        match p.live.remove(&addr) {
            Some(size) => {
                p.heap.frees += 1;
                p.heap.bytes_freed = p.heap.bytes_freed.saturating_add(size);
                let temporary = p.last_alloc.get(&tid) == Some(&addr);
                if temporary {
                    p.heap.temporary += 1;
                    p.last_alloc.remove(&tid);
                }
                let owns = !p.bench_blocks.is_empty();
                self.shrink(i, size);
                if owns || measured.is_some() {
                    self.bench_free(i, addr, size, temporary, measured);
                }
            }
            None => {
                p.heap.unknown_frees += 1;
                if let Some(b) = measured {
                    self.benches.get(b).heap.unknown_frees += 1;
                }
            }
        }
    }

    /// Raises the live heap of process `i`, its trees and the run by `bytes`.
    fn grow(&mut self, i: usize, bytes: u64, ts: u64) {
        self.procs[i].heap.grow_live(bytes, ts);
        self.grow_trees_from(i, bytes, ts);
    }

    /// Raises the live sums of the tree of `i` and of all its ancestors' trees, and the run's.
    fn grow_trees_from(&mut self, i: usize, bytes: u64, ts: u64) {
        let mut k = i;
        while k != NONE {
            let t = &mut self.trees[k];
            t.live = t.live.saturating_add(bytes);
            t.peak.raise(t.live, ts);
            k = t.parent;
        }
        self.run.live = self.run.live.saturating_add(bytes);
        self.run.peak.raise(self.run.live, ts);
    }

    /// Lowers the live heap of process `i`, its trees and the run by `bytes`.
    fn shrink(&mut self, i: usize, bytes: u64) {
        let heap = &mut self.procs[i].heap;
        heap.live_bytes = heap.live_bytes.saturating_sub(bytes);
        let mut k = i;
        while k != NONE {
            let t = &mut self.trees[k];
            t.live = t.live.saturating_sub(bytes);
            k = t.parent;
        }
        self.run.live = self.run.live.saturating_sub(bytes);
    }

    /// Empties the live heap of process `i` (at exec or exit) and returns what it held.
    fn drop_live(&mut self, i: usize, keep_capacity: bool) -> Blocks {
        let p = &mut self.procs[i];
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
        self.shrink(i, held.bytes);
        held
    }

    /// Process `parent_pid` forked `child`.
    fn fork(&mut self, parent_pid: u32, child: u32, ts: u64) {
        let parent = self.active(parent_pid, ts);
        if child == parent_pid {
            self.ignored_events += 1;
            return;
        }
        match self.lookup(child) {
            Lookup::Alive(c) => {
                // The child's own events (or the kernel filling its counters) may come before
                // the fork event. Adopt it unless it already has a parent or adopting would
                // make a cycle.
                if self.trees[c].parent == NONE && !self.is_ancestor(c, parent) {
                    self.adopt(c, parent, ts);
                } else {
                    self.ignored_events += 1;
                }
            }
            Lookup::Exited | Lookup::Absent => {
                self.spawn(child, parent, ts);
            }
        }
    }

    /// Whether `ancestor` is `node` or one of its ancestors.
    fn is_ancestor(&self, ancestor: usize, node: usize) -> bool {
        let mut k = node;
        while k != NONE {
            if k == ancestor {
                return true;
            }
            k = self.trees[k].parent;
        }
        false
    }

    /// Makes the parentless process `c` a child of `parent`, carrying its tree's live sums up.
    fn adopt(&mut self, c: usize, parent: usize, ts: u64) {
        self.trees[c].parent = parent;
        if self.procs[c].execs == 0 {
            self.procs[c].exe = self.procs[parent].exe.clone();
            self.procs[c].argv = self.procs[parent].argv.clone();
        }
        let live = self.trees[c].live;
        // The run already counts the child; only the new ancestors gain it.
        let mut k = parent;
        while k != NONE {
            let t = &mut self.trees[k];
            t.live = t.live.saturating_add(live);
            t.peak.raise(t.live, ts);
            k = t.parent;
        }
        let carried = self.mapped_trees[c].live;
        let mut k = parent;
        while k != NONE {
            self.mapped_trees[k].replace([0; 2], carried, ts);
            k = self.trees[k].parent;
        }
        if !self.resident_trees.is_empty() {
            let carried = self.resident_trees[c].live;
            let mut k = parent;
            while k != NONE {
                self.resident_trees[k].replace(&[0; 5], &carried, ts);
                k = self.trees[k].parent;
            }
        }
    }

    /// Process `i` executed `filename`: its old heap and resident counters are gone.
    fn exec(&mut self, i: usize, filename: &str, argv: &[String]) {
        self.drop_bench_blocks(i, false);
        let dropped = self.drop_live(i, true);
        let p = &mut self.procs[i];
        p.heap.dropped_at_exec = p.heap.dropped_at_exec.plus(dropped);
        p.exe = Some(filename.to_string());
        p.argv = argv.to_vec();
        p.execs = p.execs.saturating_add(1);
        p.control_client = is_control_client(filename, argv);
        if let Some(r) = p.resident.as_deref_mut() {
            r.start_image();
            self.set_contribution(i, [0; 5], 0);
        }
    }

    /// Process `i` exited with `status`: what is live is leaked.
    fn exit(&mut self, i: usize, status: i32, ts: u64) {
        self.drop_mapped(i, ts);
        self.drop_bench_blocks(i, true);
        let leaked = self.drop_live(i, false);
        let p = &mut self.procs[i];
        p.heap.leaked = leaked;
        p.exit = Some((status, ts));
        if p.resident.is_some() {
            self.set_contribution(i, [0; 5], ts);
        }
        if self.cached_index == i {
            self.cached_index = NONE;
        }
    }

    /// One resident counter of process `i` changed.
    fn resident_change(&mut self, i: usize, member: usize, delta: i64, value: u64, ts: u64) {
        if member >= MEMBERS {
            return;
        }
        if self.resident_trees.is_empty() {
            self.resident_trees = vec![ResidentSum::default(); self.procs.len()];
        }
        let p = &mut self.procs[i];
        // Until the process does anything itself, changes come from the kernel filling its
        // counters at fork.
        let filling = !p.acted;
        let r = p.resident.get_or_insert_with(Box::default);
        r.change(member, delta, value, filling, ts);
        let wanted = r.wanted_contribution();
        self.set_contribution(i, wanted, ts);
    }

    /// Process `i`'s mapped bytes went from `old` to `new`: update its trees and the run.
    fn set_mapped(&mut self, i: usize, old: [u64; 2], new: [u64; 2], ts: u64) {
        if old == new {
            return;
        }
        let mut k = i;
        while k != NONE {
            self.mapped_trees[k].replace(old, new, ts);
            k = self.trees[k].parent;
        }
        self.run_mapped.replace(old, new, ts);
    }

    /// Process `i` lost its address space (exec or exit): its mappings leave the sums.
    fn drop_mapped(&mut self, i: usize, ts: u64) {
        if let Some(m) = self.procs[i].mapped.as_deref_mut() {
            let old = m.live;
            m.clear();
            self.set_mapped(i, old, [0; 2], ts);
        }
    }

    /// Changes what process `i` contributes to the resident sums of its trees and the run.
    fn set_contribution(&mut self, i: usize, wanted: [u64; 5], ts: u64) {
        let Some(r) = self.procs[i].resident.as_deref_mut() else {
            return;
        };
        let old = std::mem::replace(&mut r.contribution, wanted);
        if old == wanted {
            return;
        }
        let mut k = i;
        while k != NONE {
            self.resident_trees[k].replace(&old, &wanted, ts);
            k = self.trees[k].parent;
        }
        self.run_resident.replace(&old, &wanted, ts);
    }

    /// Records the damaged ranges the reader skipped, for the report to name them.
    pub fn note_skipped(&mut self, skipped: &[Skipped]) {
        self.skipped = skipped.to_vec();
    }

    /// Ends the pass: `end` is how reading ended (`None` when the caller does not know, as for
    /// synthetic streams; it is not taken as damage).
    pub fn finish(mut self, end: Option<&ReadEnd>) -> Report {
        let start = self.header.start_monotonic_ns;
        let page = match self.header.page_size_bytes {
            0 => 4096,
            n => u64::from(n),
        };
        for p in &mut self.procs {
            if p.is_alive() {
                p.heap.live_at_end = Blocks {
                    blocks: p.live.len() as u64,
                    bytes: p.heap.live_bytes,
                };
                // A benchmark's blocks that no recorded free released are its leaks, whether
                // or not their process is still running (bench.rs).
                for (addr, &b) in &p.bench_blocks {
                    let bytes = p.live.get(addr).copied().unwrap_or(0);
                    let leaked = &mut self.benches.get(b).heap.leaked;
                    *leaked = leaked.plus(Blocks { blocks: 1, bytes });
                }
            }
        }
        let end_ns = self.end_ns(end);
        self.benches.finish(end_ns);
        let benchmarks = self.benches.metrics(page, start);

        let order = self.tree_order();
        // Sum counters bottom-up: in reverse tree order every child comes before its parent.
        let mut tree_heap: Vec<HeapCounters> = self.procs.iter().map(|p| p.heap.clone()).collect();
        let mut tree_size = vec![1u64; self.procs.len()];
        let mut tree_beyond: Vec<[u64; 4]> = self
            .procs
            .iter()
            .map(|p| p.resident.as_ref().map_or([0; 4], |r| r.beyond))
            .collect();
        let mut tree_has_resident: Vec<bool> =
            self.procs.iter().map(|p| p.resident.is_some()).collect();
        let mut tree_calls: Vec<Option<Calls>> = self
            .procs
            .iter()
            .map(|p| p.mapped.as_ref().map(|m| m.calls))
            .collect();
        for &(i, _) in order.iter().rev() {
            let parent = self.trees[i].parent;
            if parent == NONE {
                continue;
            }
            let child = std::mem::take(&mut tree_heap[i]);
            tree_heap[parent].add(&child);
            tree_heap[i] = child;
            tree_size[parent] = tree_size[parent].saturating_add(tree_size[i]);
            let beyond = tree_beyond[i];
            for (a, b) in tree_beyond[parent].iter_mut().zip(beyond) {
                *a = a.saturating_add(b);
            }
            tree_has_resident[parent] |= tree_has_resident[i];
            if let Some(child) = tree_calls[i] {
                tree_calls[parent]
                    .get_or_insert_with(Calls::default)
                    .add(&child);
            }
        }
        let mut run_calls: Option<Calls> = None;
        for m in self.procs.iter().filter_map(|p| p.mapped.as_deref()) {
            run_calls.get_or_insert_with(Calls::default).add(&m.calls);
        }

        let mut run_heap = HeapCounters::default();
        let mut run_beyond = [0u64; 4];
        for p in &self.procs {
            run_heap.add(&p.heap);
            if let Some(r) = &p.resident {
                for (a, b) in run_beyond.iter_mut().zip(r.beyond) {
                    *a = a.saturating_add(b);
                }
            }
        }
        let any_resident = self.procs.iter().any(|p| p.resident.is_some());

        let mut processes = Vec::with_capacity(order.len());
        for &(i, depth) in &order {
            let p = &self.procs[i];
            let own_peak = Peak {
                value: p.heap.peak_bytes,
                at_ns: p.heap.peak_ns,
            };
            let own = Metrics {
                processes: 1,
                heap: p.heap.to_metrics(own_peak, start),
                resident: p.resident.as_deref().map(|r| r.metrics(page, start)),
                mapped: p.mapped.as_deref().map(|m| m.calls.metrics(m.peak, start)),
            };
            let tree = Metrics {
                processes: tree_size[i],
                heap: tree_heap[i].to_metrics(self.trees[i].peak, start),
                resident: tree_has_resident[i]
                    .then(|| self.resident_trees[i].metrics(&tree_beyond[i], page, start)),
                mapped: tree_calls[i].map(|c| c.metrics(self.mapped_trees[i].peak, start)),
            };
            let parent = self.trees[i].parent;
            processes.push(ProcessMetrics {
                pid: p.pid,
                parent_pid: (parent != NONE).then(|| self.procs[parent].pid),
                depth,
                executable: p.exe.clone(),
                argv: p.argv.clone(),
                execs: p.execs,
                started_at_ns: p.started_ns.saturating_sub(start),
                exit: p
                    .exit
                    .map(|(status, at)| ExitInfo::from_status(status, at.saturating_sub(start))),
                own,
                tree,
            });
        }
        let totals = Metrics {
            processes: self.procs.len() as u64,
            heap: run_heap.to_metrics(self.run.peak, start),
            resident: any_resident.then(|| self.run_resident.metrics(&run_beyond, page, start)),
            mapped: run_calls.map(|c| c.metrics(self.run_mapped.peak, start)),
        };

        self.completeness(end, totals, processes, benchmarks)
    }

    /// When the recording ended: the trailer's end time, or the last event's time without one.
    fn end_ns(&self, end: Option<&ReadEnd>) -> u64 {
        match end {
            Some(ReadEnd::Complete(t)) if t.end_monotonic_ns >= self.header.start_monotonic_ns => {
                t.end_monotonic_ns
            }
            _ => self.last_ts_ns,
        }
    }

    /// Processes in tree order (parents first, children in the order they appeared) with their
    /// depth. Iterative: a long chain of forks must not overflow the stack.
    fn tree_order(&self) -> Vec<(usize, u32)> {
        let n = self.procs.len();
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut roots = Vec::new();
        for (i, t) in self.trees.iter().enumerate() {
            if t.parent == NONE {
                roots.push(i);
            } else {
                children[t.parent].push(i);
            }
        }
        let mut order = Vec::with_capacity(n);
        let mut stack: Vec<(usize, u32)> = roots.iter().rev().map(|&r| (r, 0)).collect();
        while let Some((i, depth)) = stack.pop() {
            order.push((i, depth));
            for &c in children[i].iter().rev() {
                stack.push((c, depth.saturating_add(1)));
            }
        }
        order
    }

    /// Builds the report around the metrics: run facts, losses, damage, completeness.
    fn completeness(
        self,
        end: Option<&ReadEnd>,
        totals: Metrics,
        processes: Vec<ProcessMetrics>,
        benchmarks: Vec<BenchmarkMetrics>,
    ) -> Report {
        let start = self.header.start_monotonic_ns;
        let end_ns = self.end_ns(end);
        let mut lost = self.lost;
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
        if incomplete::is_probe_floor(&self.header) {
            reasons.push(incomplete::PROBE_FLOOR.to_string());
        }
        if !self.skipped.is_empty() {
            let written = trailer.map(|t| t.events);
            reasons.push(incomplete::skipped_reason(
                &self.skipped,
                written,
                self.events,
            ));
        }
        if let Some(d) = &damage {
            reasons.push(format!(
                "the file is damaged at byte offset {} ({}); only the events before it are counted",
                d.offset_bytes, d.reason
            ));
        }
        if lost_total > 0 {
            reasons.push(incomplete::loss_reason(&lost, lost_total));
        }

        let root_exit = processes
            .iter()
            .find(|p| p.pid == self.header.root_pid)
            .and_then(|p| p.exit)
            .map(|e| e.exit_code);
        let run = RunInfo {
            command: self.header.argv.clone(),
            root_pid: self.header.root_pid,
            memtrack_version: self.header.memtrack_version.clone(),
            kernel_release: self.header.kernel_release.clone(),
            hostname: self.header.hostname.clone(),
            start_wall_ns: self.header.start_wall_ns,
            duration_ns: end_ns.saturating_sub(start),
            exit_code: trailer.map(|t| t.exit_code).or(root_exit),
            processes: processes.len() as u64,
            events: self.events,
            ignored_events: self.ignored_events,
            features: self.header.features.clone(),
            files: self.files,
        };
        Report {
            schema_version: SCHEMA_VERSION,
            complete: reasons.is_empty(),
            incomplete_reasons: reasons,
            damage,
            skipped: self.skipped,
            lost_events: LostEvents {
                total: lost_total,
                by_cause: lost,
            },
            run,
            scope: Scope::Run,
            totals,
            processes,
            benchmarks,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{AllocFunc, RssMember, Trailer};
    use crate::testkit::*;

    // --- raw mappings -----------------------------------------------------------------------

    fn anon_mmap(addr: u64, len: u64) -> EventKind {
        EventKind::Mmap {
            addr,
            len,
            prot: 3,
            flags: 0x22,
        }
    }

    #[test]
    fn mapped_peaks_of_a_tree_are_peaks_of_the_sum() {
        let page = 4096;
        let events = vec![
            at(1, 1, 1, anon_mmap(0x10_0000, 8 * page)),
            at(2, 1, 1, fork(2)),
            at(3, 2, 2, anon_mmap(0x20_0000, 4 * page)),
            at(
                4,
                1,
                1,
                EventKind::Munmap {
                    addr: 0x10_0000,
                    len: 8 * page,
                },
            ),
            // The child unmaps what it inherited: not its own, nothing leaves its count.
            at(
                5,
                2,
                2,
                EventKind::Munmap {
                    addr: 0x10_0000,
                    len: 8 * page,
                },
            ),
            at(6, 2, 2, exit(0)),
            at(7, 1, 1, exit(0)),
        ];
        let report = analyze(&header(), events, None);
        let run = report.totals.mapped.as_ref().unwrap();
        assert_eq!((run.peak_bytes, run.peak_at_ns), (12 * page, Some(3)));
        assert_eq!(run.peak_anon_bytes, 12 * page);
        assert_eq!((run.mmaps, run.munmaps), (2, 2));
        let child = report.processes.iter().find(|p| p.pid == 2).unwrap();
        assert_eq!(child.own.mapped.as_ref().unwrap().peak_bytes, 4 * page);
        let root = &report.processes[0];
        assert_eq!(root.own.mapped.as_ref().unwrap().peak_bytes, 8 * page);
        assert_eq!(root.tree.mapped.as_ref().unwrap().peak_bytes, 12 * page);
    }

    #[test]
    fn coverage_records_list_each_file_once() {
        let cov = |path: &str, allocator: &str, probes| EventKind::Coverage {
            path: path.into(),
            allocator: allocator.into(),
            probes,
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

    #[test]
    fn no_mapping_events_no_mapped_metrics() {
        let report = analyze(&header(), seq(vec![malloc(0x10, 8)]), None);
        assert!(report.totals.mapped.is_none());
        assert!(report.processes[0].own.mapped.is_none());
    }

    #[test]
    fn exec_gives_a_new_address_space() {
        let events = seq(vec![
            anon_mmap(0x10_0000, 4096),
            exec("/bin/next"),
            anon_mmap(0x20_0000, 8192),
        ]);
        let report = analyze(&header(), events, None);
        let m = report.totals.mapped.as_ref().unwrap();
        assert_eq!(m.peak_bytes, 8192, "the old mapping left at exec");
    }

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

    // --- histogram --------------------------------------------------------------------------

    #[test]
    fn histogram_powers_of_two() {
        let sizes = [0u64, 1, 2, 3, 4, 7, 8];
        let r = run(seq(sizes
            .iter()
            .enumerate()
            .map(|(i, &s)| malloc(i as u64 + 1, s))
            .collect()));
        let got: Vec<(u64, u64, u64)> = own(&r, 1)
            .size_histogram
            .iter()
            .map(|b| (b.min_bytes, b.max_bytes, b.count))
            .collect();
        assert_eq!(
            got,
            vec![(0, 0, 1), (1, 1, 1), (2, 3, 2), (4, 7, 2), (8, 15, 1)]
        );
    }

    #[test]
    fn histogram_top_bucket() {
        let r = run(seq(vec![malloc(1, u64::MAX), malloc(2, 1 << 63)]));
        let b = &own(&r, 1).size_histogram;
        assert_eq!(b.len(), 1);
        assert_eq!(
            (b[0].min_bytes, b[0].max_bytes, b[0].count),
            (1 << 63, u64::MAX, 2)
        );
    }

    #[test]
    fn histogram_counts_reallocs() {
        let r = run(seq(vec![malloc(1, 4), realloc(1, 1, 1000)]));
        let b = &own(&r, 1).size_histogram;
        assert_eq!(b.iter().map(|b| b.count).sum::<u64>(), 2);
        assert_eq!(b[1].min_bytes, 512);
    }

    #[test]
    fn bucket_ranges_cover_every_size() {
        for i in 0..BUCKETS {
            let (lo, hi) = bucket_range(i);
            assert_eq!(bucket(lo), i);
            assert_eq!(bucket(hi), i);
        }
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
        assert_eq!(acc.procs[0].live.capacity(), 0);
        assert_eq!(acc.procs[0].last_alloc.capacity(), 0);
    }

    #[test]
    fn events_after_exit_are_ignored() {
        let r = run(seq(vec![malloc(1, 1), exit(0), free(1), exit(0)]));
        assert_eq!(r.run.ignored_events, 2);
        assert_eq!(r.processes.len(), 1);
    }

    #[test]
    fn alloc_after_exit_is_a_reused_pid() {
        let r = run(seq(vec![malloc(1, 1), exit(0), malloc(1, 5)]));
        assert_eq!(r.processes.len(), 2);
        assert_eq!(r.processes[1].own.heap.allocs, 1);
    }

    // --- fork and trees --------------------------------------------------------------------

    #[test]
    fn child_starts_with_empty_heap() {
        let r = run(vec![
            at(0, 1, 1, malloc(0xa, 100)),
            at(1, 1, 1, fork(2)),
            at(2, 2, 2, free(0xa)),
        ]);
        assert_eq!(own(&r, 2).unknown_frees, 1);
        assert_eq!(own(&r, 1).live_at_end.bytes, 100);
    }

    #[test]
    fn child_knows_parent_and_program() {
        let r = run(vec![at(0, 1, 1, exec("/bin/sh")), at(1, 1, 1, fork(2))]);
        let c = process(&r, 2);
        assert_eq!(c.parent_pid, Some(1));
        assert_eq!(c.executable.as_deref(), Some("/bin/sh"));
        assert_eq!(c.execs, 0);
        assert_eq!(c.started_at_ns, 1);
    }

    #[test]
    fn tree_peak_is_not_sum_of_peaks() {
        // Children 2 and 3 each peak at 100, at different times: the tree peaks at 100.
        let r = run(vec![
            at(0, 1, 1, fork(2)),
            at(1, 1, 1, fork(3)),
            at(10, 2, 2, malloc(1, 100)),
            at(20, 2, 2, free(1)),
            at(30, 3, 3, malloc(1, 100)),
            at(40, 3, 3, free(1)),
        ]);
        assert_eq!(own(&r, 2).peak_live_bytes, 100);
        assert_eq!(own(&r, 3).peak_live_bytes, 100);
        assert_eq!(tree(&r, 1).peak_live_bytes, 100);
        assert_eq!(tree(&r, 1).peak_live_at_ns, Some(10));
        assert_eq!(own(&r, 1).peak_live_bytes, 0);
    }

    #[test]
    fn tree_peak_sums_at_the_same_moment() {
        let r = run(vec![
            at(0, 1, 1, fork(2)),
            at(1, 1, 1, malloc(1, 50)),
            at(10, 2, 2, malloc(1, 100)),
            at(20, 1, 1, free(1)),
            at(30, 2, 2, malloc(2, 30)),
        ]);
        // Sum over time: 50, 150, 100, 130.
        assert_eq!(tree(&r, 1).peak_live_bytes, 150);
        assert_eq!(tree(&r, 1).peak_live_at_ns, Some(10));
        assert_eq!(tree(&r, 2).peak_live_bytes, 130);
    }

    #[test]
    fn tree_includes_grandchildren() {
        let r = run(vec![
            at(0, 1, 1, fork(2)),
            at(1, 2, 2, fork(3)),
            at(2, 3, 3, malloc(1, 70)),
            at(3, 2, 2, malloc(1, 5)),
        ]);
        assert_eq!(tree(&r, 1).peak_live_bytes, 75);
        assert_eq!(tree(&r, 1).allocs, 2);
        assert_eq!(process(&r, 1).tree.processes, 3);
        assert_eq!(tree(&r, 2).peak_live_bytes, 75);
        assert_eq!(tree(&r, 3).peak_live_bytes, 70);
    }

    #[test]
    fn exited_child_leaves_tree_sum() {
        let r = run(vec![
            at(0, 1, 1, fork(2)),
            at(1, 2, 2, malloc(1, 100)),
            at(2, 2, 2, exit(0)),
            at(3, 1, 1, malloc(1, 60)),
        ]);
        assert_eq!(tree(&r, 1).peak_live_bytes, 100);
        assert_eq!(
            tree(&r, 1).leaked,
            Blocks {
                blocks: 1,
                bytes: 100
            }
        );
        assert_eq!(r.totals.heap.peak_live_bytes, 100);
    }

    #[test]
    fn run_peak_spans_unrelated_processes() {
        let r = run(vec![at(0, 5, 5, malloc(1, 10)), at(1, 6, 6, malloc(1, 20))]);
        assert_eq!(r.totals.heap.peak_live_bytes, 30);
        assert_eq!(r.totals.heap.peak_live_at_ns, Some(1));
    }

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
    fn child_seen_before_its_fork_is_adopted() {
        let r = run(vec![
            at(0, 2, 2, malloc(1, 40)),
            at(1, 1, 1, malloc(1, 10)),
            at(2, 1, 1, fork(2)),
        ]);
        assert_eq!(process(&r, 2).parent_pid, Some(1));
        assert_eq!(tree(&r, 1).peak_live_bytes, 50);
        assert_eq!(tree(&r, 1).peak_live_at_ns, Some(2));
    }

    #[test]
    fn fork_cycle_is_refused() {
        let r = run(vec![at(0, 1, 1, fork(2)), at(1, 2, 2, fork(1))]);
        assert_eq!(process(&r, 1).parent_pid, None);
        assert_eq!(r.run.ignored_events, 1);
    }

    #[test]
    fn fork_of_self_is_ignored() {
        let r = run(vec![at(0, 1, 1, fork(1))]);
        assert_eq!(r.processes.len(), 1);
        assert_eq!(r.run.ignored_events, 1);
    }

    #[test]
    fn reused_pid_after_exit_is_a_new_process() {
        let r = run(vec![
            at(0, 1, 1, fork(2)),
            at(1, 2, 2, malloc(1, 10)),
            at(2, 2, 2, exit(0)),
            at(3, 1, 1, fork(2)),
            at(4, 2, 2, malloc(1, 20)),
        ]);
        let children: Vec<u64> = r
            .processes
            .iter()
            .filter(|p| p.pid == 2)
            .map(|p| p.own.heap.bytes_allocated)
            .collect();
        assert_eq!(children, vec![10, 20]);
        assert_eq!(r.run.processes, 3);
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
                        2 => ControlCommand::Bench {
                            uri: format!("b{}", rng.below(3)),
                            pid: rng.below(8) as u32,
                        },
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
        let hwm = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmHWM"))
                    .map(str::to_string)
            })
            .unwrap_or_default();
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
        let bench = ControlCommand::Bench {
            uri: "all".into(),
            pid: 1,
        };
        throughput_of(64, vec![control(bench), control(ControlCommand::Start)]);
    }

    /// The same with about 1.2 million live blocks, to see the cost of a large live set.
    #[test]
    #[ignore]
    fn report_throughput_many_live() {
        throughput(100_000);
    }
}
