//! The process table of the accounting pass: every process seen (one pid for one lifetime), the
//! pid index with its one-entry cache, and the running sums of the tree rooted at each process
//! (heap, raw mappings, resident memory) with the run's beside them.
//!
//! Flow: `accounting` finds an event's process here ([`ProcessTable::active`],
//! [`ProcessTable::lookup`]), changes the process's own state, and moves the change into the
//! sums of the process's tree and of every ancestor's tree ([`ProcessTable::for_trees_of`]),
//! O(depth) per event, so each tree's peak is the exact peak of its sum at one moment.
//! `bench` asks it which processes descend from a benchmark's pid; `assemble` reads it at
//! the end.

use std::ops::{Index, IndexMut};

use crate::format::Header;
use crate::intmap::IntMap;

use super::counters::{HeapCounters, LiveSum};
use super::mapped::{MappedSum, ProcMapped};
use super::resident::{ProcResident, ResidentSum, MEMBERS};

/// A process's place in the table: processes are numbered in the order they were first seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct ProcIdx(usize);

impl ProcIdx {
    /// The process numbered `i` (tests name processes by number).
    pub(super) const fn new(i: usize) -> ProcIdx {
        ProcIdx(i)
    }

    /// Its position in the table's vectors.
    #[inline]
    pub(super) fn get(self) -> usize {
        self.0
    }
}

/// One process: one pid for one lifetime.
#[derive(Debug)]
pub(super) struct Proc {
    pub(super) pid: u32,
    /// The program it runs: its last exec's, else its parent's, else the recorded command's.
    pub(super) exe: Option<String>,
    pub(super) argv: Vec<String>,
    /// Execs seen.
    pub(super) execs: u32,
    /// When it was first seen.
    pub(super) started_ns: u64,
    /// Kernel exit status and time, once it exited.
    pub(super) exit: Option<(i32, u64)>,
    /// Whether the process has done anything itself yet; until then, resident changes made by
    /// others (the parent filling its counters at fork) set its baseline.
    pub(super) acted: bool,
    /// Live blocks: address -> requested size.
    pub(super) live: IntMap<u64, u64>,
    /// Per thread, the address it allocated last, while that block is live and nothing else was
    /// allocated by the thread since: a free of it is a temporary allocation.
    pub(super) last_alloc: IntMap<u32, u64>,
    /// Its own heap counters.
    pub(super) heap: HeapCounters,
    /// Its resident counters, once one changed (boxed: most processes never have them).
    pub(super) resident: Option<Box<ProcResident>>,
    /// The ranges it mapped itself, once it made a mapping call.
    pub(super) mapped: Option<Box<ProcMapped>>,
    /// Its rmap accounting, once an rmap event named it (format version 6 on).
    pub(super) rmap: Option<Box<super::rmap::ProcRmap>>,
    /// Live blocks allocated inside a benchmark's window: address -> benchmark index.
    pub(super) bench_blocks: IntMap<u64, usize>,
    /// Whether its current image is `memtrack ctl`, a control client that belongs to no
    /// benchmark (see `accounting::is_control_client`).
    pub(super) control_client: bool,
    /// The leak scan of its current image, written before its exit (format version 5 on).
    pub(super) leak_scan: Option<Box<crate::format::LeakScan>>,
}

impl Proc {
    /// Whether it has not exited.
    #[inline]
    pub(super) fn is_alive(&self) -> bool {
        self.exit.is_none()
    }
}

/// How a pid stands in the table.
pub(super) enum Lookup {
    /// Its live process.
    Alive(ProcIdx),
    /// Its last process exited and no new one started.
    Exited,
    /// Never seen.
    Absent,
}

/// The running sums of the tree rooted at one process (or of the run), with the parent link
/// the ancestor walk follows. Kept apart from [`Proc`] so the walk touches little memory: the
/// parent and the heap sum, read on every allocator event, come first.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct TreeSums {
    /// `None` for a root (and for the run).
    parent: Option<ProcIdx>,
    /// Live heap bytes.
    pub(super) heap: LiveSum,
    /// Mapped bytes (all, anonymous).
    pub(super) mapped: MappedSum,
    /// Resident pages, per member and total.
    pub(super) resident: ResidentSum,
}

impl TreeSums {
    /// Takes in the sums of a tree that joins this one at `ts` (an adopted child's).
    fn absorb(&mut self, child: &TreeSums, ts: u64) {
        self.heap.grow(child.heap.live, ts);
        self.mapped.replace([0; 2], child.mapped.live, ts);
        self.resident
            .replace(&[0; MEMBERS + 1], &child.resident.live, ts);
    }
}

/// Every process of the recording, found by pid, with the sums of their trees and the run's.
#[derive(Debug)]
pub(super) struct ProcessTable {
    procs: Vec<Proc>,
    /// Parallel to `procs`.
    sums: Vec<TreeSums>,
    by_pid: IntMap<u32, ProcIdx>,
    /// The last pid looked up and its live process: consecutive events mostly share a pid.
    cached_pid: u32,
    cached: Option<ProcIdx>,
    /// The sums of every process: the run's.
    run: TreeSums,
    /// Whether any resident counter change was seen (benchmarks follow resident sums from then).
    resident_seen: bool,
    /// The recorded command's pid and argv, which a root process without an exec runs.
    root_pid: u32,
    root_argv: Vec<String>,
}

impl Index<ProcIdx> for ProcessTable {
    type Output = Proc;

    #[inline]
    fn index(&self, i: ProcIdx) -> &Proc {
        &self.procs[i.0]
    }
}

impl IndexMut<ProcIdx> for ProcessTable {
    #[inline]
    fn index_mut(&mut self, i: ProcIdx) -> &mut Proc {
        &mut self.procs[i.0]
    }
}

/// The walk from a process up to its root, nearest first ([`ProcessTable::ancestors`]).
pub(super) struct Ancestors<'a> {
    sums: &'a [TreeSums],
    next: Option<ProcIdx>,
}

impl Iterator for Ancestors<'_> {
    type Item = ProcIdx;

    #[inline]
    fn next(&mut self) -> Option<ProcIdx> {
        let k = self.next?;
        self.next = self.sums[k.0].parent;
        Some(k)
    }
}

impl ProcessTable {
    /// An empty table for the recording that starts with `header`.
    pub(super) fn new(header: &Header) -> ProcessTable {
        ProcessTable {
            procs: Vec::new(),
            sums: Vec::new(),
            by_pid: IntMap::default(),
            cached_pid: 0,
            cached: None,
            run: TreeSums::default(),
            resident_seen: false,
            root_pid: header.root_pid,
            root_argv: header.argv.clone(),
        }
    }

    /// Every process, in the order first seen.
    pub(super) fn procs(&self) -> &[Proc] {
        &self.procs
    }

    /// Every process, to change at the end of the pass.
    pub(super) fn procs_mut(&mut self) -> &mut [Proc] {
        &mut self.procs
    }

    /// The sums of the whole run (every process, whatever its tree).
    pub(super) fn run(&self) -> &TreeSums {
        &self.run
    }

    /// Notes that a resident counter change was seen, whether or not it changed a sum.
    pub(super) fn note_resident(&mut self) {
        self.resident_seen = true;
    }

    /// Whether any resident counter change was seen: until then there are no resident sums to
    /// follow.
    pub(super) fn has_resident(&self) -> bool {
        self.resident_seen
    }

    /// The sums of the tree rooted at `i`.
    pub(super) fn sums(&self, i: ProcIdx) -> &TreeSums {
        &self.sums[i.0]
    }

    /// The parent of `i`, if it has one.
    pub(super) fn parent(&self, i: ProcIdx) -> Option<ProcIdx> {
        self.sums[i.0].parent
    }

    /// `i`, its parent, its parent's parent, ... up to its root.
    #[inline]
    pub(super) fn ancestors(&self, i: ProcIdx) -> Ancestors<'_> {
        Ancestors {
            sums: &self.sums,
            next: Some(i),
        }
    }

    /// Whether `ancestor` is `node` or one of its ancestors.
    pub(super) fn is_ancestor(&self, ancestor: ProcIdx, node: ProcIdx) -> bool {
        self.ancestors(node).any(|k| k == ancestor)
    }

    /// Applies `change` to the sums of the tree of `i` and of every ancestor's tree: the one
    /// walk that writes (reading walks use [`ProcessTable::ancestors`]).
    #[inline]
    fn for_trees_of(&mut self, i: ProcIdx, mut change: impl FnMut(&mut TreeSums)) {
        let mut k = Some(i);
        while let Some(j) = k {
            let t = &mut self.sums[j.0];
            change(t);
            k = t.parent;
        }
    }

    /// Raises the live heap of process `i`, its trees and the run by `bytes`.
    #[inline]
    pub(super) fn grow_heap(&mut self, i: ProcIdx, bytes: u64, ts: u64) {
        self.procs[i.0].heap.grow_live(bytes, ts);
        self.for_trees_of(i, |t| t.heap.grow(bytes, ts));
        self.run.heap.grow(bytes, ts);
    }

    /// Lowers the live heap of process `i`, its trees and the run by `bytes`.
    #[inline]
    pub(super) fn shrink_heap(&mut self, i: ProcIdx, bytes: u64) {
        self.procs[i.0].heap.shrink_live(bytes);
        self.for_trees_of(i, |t| t.heap.shrink(bytes));
        self.run.heap.shrink(bytes);
    }

    /// Process `i`'s mapped bytes went from `old` to `new`: its trees and the run follow.
    pub(super) fn replace_mapped(&mut self, i: ProcIdx, old: [u64; 2], new: [u64; 2], ts: u64) {
        self.for_trees_of(i, |t| t.mapped.replace(old, new, ts));
        self.run.mapped.replace(old, new, ts);
    }

    /// Process `i`'s resident contribution went from `old` to `new`: its trees and the run
    /// follow.
    pub(super) fn replace_resident(
        &mut self,
        i: ProcIdx,
        old: &[u64; MEMBERS + 1],
        new: &[u64; MEMBERS + 1],
        ts: u64,
    ) {
        self.for_trees_of(i, |t| t.resident.replace(old, new, ts));
        self.run.resident.replace(old, new, ts);
    }

    /// The live process for `pid`, created if the pid is new or was reused, marked as having
    /// acted.
    #[inline]
    pub(super) fn active(&mut self, pid: u32, ts: u64) -> ProcIdx {
        if pid == self.cached_pid {
            if let Some(i) = self.cached {
                self.procs[i.0].acted = true;
                return i;
            }
        }
        let i = match self.lookup(pid) {
            Lookup::Alive(i) => i,
            Lookup::Exited | Lookup::Absent => self.spawn(pid, None, ts),
        };
        self.procs[i.0].acted = true;
        self.cached_pid = pid;
        self.cached = Some(i);
        i
    }

    /// How `pid` stands now.
    #[inline]
    pub(super) fn lookup(&self, pid: u32) -> Lookup {
        match self.by_pid.get(&pid) {
            Some(&i) if self.procs[i.0].is_alive() => Lookup::Alive(i),
            Some(_) => Lookup::Exited,
            None => Lookup::Absent,
        }
    }

    /// The process `pid` names last, alive or exited, if it was ever seen.
    pub(super) fn latest(&self, pid: u32) -> Option<ProcIdx> {
        self.by_pid.get(&pid).copied()
    }

    /// The live process of `pid`, if there is one.
    pub(super) fn alive(&self, pid: u32) -> Option<ProcIdx> {
        match self.lookup(pid) {
            Lookup::Alive(i) => Some(i),
            Lookup::Exited | Lookup::Absent => None,
        }
    }

    /// Starts a new process record for `pid` under `parent` (or none); it has not acted.
    pub(super) fn spawn(&mut self, pid: u32, parent: Option<ProcIdx>, ts: u64) -> ProcIdx {
        let i = ProcIdx(self.procs.len());
        let (exe, argv) = match parent {
            // A forked child runs its parent's program until it executes another.
            Some(p) => (self.procs[p.0].exe.clone(), self.procs[p.0].argv.clone()),
            None if pid == self.root_pid && !self.root_argv.is_empty() => {
                (self.root_argv.first().cloned(), self.root_argv.clone())
            }
            None => (None, Vec::new()),
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
            rmap: None,
            bench_blocks: IntMap::default(),
            control_client: false,
            leak_scan: None,
        });
        self.sums.push(TreeSums {
            parent,
            ..TreeSums::default()
        });
        self.by_pid.insert(pid, i);
        if self.cached_pid == pid {
            self.cached = None;
        }
        i
    }

    /// Process `parent_pid` forked `child`; returns false when the event is ignored (a fork of
    /// itself, of a process that already has a parent, or one that would make a cycle).
    pub(super) fn fork(&mut self, parent_pid: u32, child: u32, ts: u64) -> bool {
        let parent = self.active(parent_pid, ts);
        if child == parent_pid {
            return false;
        }
        match self.lookup(child) {
            Lookup::Alive(c) => {
                // The child's own events (or the kernel filling its counters) may come before
                // the fork event. Adopt it unless it already has a parent or adopting would
                // make a cycle.
                if self.sums[c.0].parent.is_none() && !self.is_ancestor(c, parent) {
                    self.adopt(c, parent, ts);
                    true
                } else {
                    false
                }
            }
            Lookup::Exited | Lookup::Absent => {
                self.spawn(child, Some(parent), ts);
                true
            }
        }
    }

    /// Makes the parentless process `c` a child of `parent`, carrying its tree's live sums up.
    fn adopt(&mut self, c: ProcIdx, parent: ProcIdx, ts: u64) {
        self.sums[c.0].parent = Some(parent);
        if self.procs[c.0].execs == 0 {
            self.procs[c.0].exe = self.procs[parent.0].exe.clone();
            self.procs[c.0].argv = self.procs[parent.0].argv.clone();
        }
        // The run already counts the child; only the new ancestors gain it.
        let carried = self.sums[c.0];
        self.for_trees_of(parent, |t| t.absorb(&carried, ts));
    }

    /// Process `i` exited with `status` at `ts`: its pid no longer finds it.
    pub(super) fn end(&mut self, i: ProcIdx, status: i32, ts: u64) {
        self.procs[i.0].exit = Some((status, ts));
        if self.cached == Some(i) {
            self.cached = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::model::metrics::Blocks;
    use crate::testkit::*;

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
}
