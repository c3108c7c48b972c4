//! Raw mappings in the report: the address ranges a process mapped itself with mmap, mremap
//! and brk (the `mappings` feature), kept apart from the allocator heap.
//!
//! Flow: `accounting` hands each mapping event of a process to its [`ProcMapped`], which keeps
//! the ranges the process mapped during the recording and so knows exactly how many bytes a
//! munmap or mremap released of them (a range mapped before the recording, or inherited at
//! fork, is not counted when it goes). The change of the process's mapped bytes goes into the
//! running [`MappedSum`] of every tree it belongs to and of the run (kept in the process table,
//! `tree`), each with its peak: peaks of sums at one moment, as for the heap.
//!
//! Two measures: all mapped bytes (files included: the program's libraries) and anonymous
//! bytes (MAP_ANONYMOUS mappings and the brk heap): what an allocator's own arenas take. mmap
//! and munmap lengths are rounded up to whole pages, as the kernel does; the break is counted
//! exactly as brk moved it.

use std::collections::BTreeMap;

use crate::format::{map_bits, EventKind};

use super::counters::Peak;
use crate::model::metrics::MappedMetrics;

/// Index of all mapped bytes in the `[u64; 2]` pairs.
pub(super) const ALL: usize = 0;
/// Index of anonymous bytes.
pub(super) const ANON: usize = 1;

/// How many mapping calls of each kind.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Calls {
    mmaps: u64,
    munmaps: u64,
    mremaps: u64,
    brks: u64,
}

impl Calls {
    /// Adds `other`'s counts, saturating.
    pub(super) fn add(&mut self, other: &Calls) {
        self.mmaps = self.mmaps.saturating_add(other.mmaps);
        self.munmaps = self.munmaps.saturating_add(other.munmaps);
        self.mremaps = self.mremaps.saturating_add(other.mremaps);
        self.brks = self.brks.saturating_add(other.brks);
    }

    /// The metrics form, with the peaks of the scope.
    pub(super) fn metrics(&self, peaks: [Peak; 2], start_ns: u64) -> MappedMetrics {
        MappedMetrics {
            mmaps: self.mmaps,
            munmaps: self.munmaps,
            mremaps: self.mremaps,
            brks: self.brks,
            peak_bytes: peaks[ALL].value,
            peak_at_ns: peaks[ALL].at(start_ns),
            peak_anon_bytes: peaks[ANON].value,
            peak_anon_at_ns: peaks[ANON].at(start_ns),
        }
    }
}

/// The mappings one process made during the recording.
#[derive(Debug, Default)]
pub(super) struct ProcMapped {
    /// start -> (end, anonymous), disjoint.
    ranges: BTreeMap<u64, (u64, bool)>,
    /// Mapped bytes now: all, anonymous.
    pub(super) live: [u64; 2],
    /// Peaks of `live`.
    pub(super) peak: [Peak; 2],
    /// Calls made.
    pub(super) calls: Calls,
}

/// `len` bytes rounded up to whole pages of `page` bytes, as the kernel maps and unmaps them.
pub(super) fn round_up(len: u64, page: u64) -> u64 {
    len.div_ceil(page).saturating_mul(page)
}

impl ProcMapped {
    /// Applies the mapping event `kind` (other kinds are ignored) at `ts`.
    pub(super) fn apply(&mut self, kind: &EventKind, page: u64, ts: u64) {
        match *kind {
            EventKind::Mmap {
                addr, len, flags, ..
            } => {
                self.calls.mmaps += 1;
                let end = addr.saturating_add(round_up(len, page));
                // MAP_FIXED over an earlier mapping replaces it.
                self.remove(addr, end);
                self.add(addr, end, flags & map_bits::MAP_ANONYMOUS != 0);
            }
            EventKind::Munmap { addr, len } => {
                self.calls.munmaps += 1;
                self.remove(addr, addr.saturating_add(round_up(len, page)));
            }
            EventKind::Mremap {
                old_addr,
                old_len,
                addr,
                len,
            } => {
                self.calls.mremaps += 1;
                let removed =
                    self.remove(old_addr, old_addr.saturating_add(round_up(old_len, page)));
                // What moved keeps its kind; a range mapped before the recording counts from now,
                // as anonymous when nothing says otherwise.
                let anon = removed[ALL] == 0 || removed[ANON] > 0;
                let end = addr.saturating_add(round_up(len, page));
                self.remove(addr, end);
                self.add(addr, end, anon);
            }
            EventKind::Brk { from, to } => {
                self.calls.brks += 1;
                if to > from {
                    self.add(from, to, true);
                } else {
                    self.remove(to, from);
                }
            }
            _ => return,
        }
        for (k, peak) in self.peak.iter_mut().enumerate() {
            peak.raise(self.live[k], ts);
        }
    }

    /// Forgets every range (exec gives the process a new address space; exit ends it).
    pub(super) fn clear(&mut self) {
        self.ranges.clear();
        self.live = [0; 2];
    }

    fn add(&mut self, start: u64, end: u64, anon: bool) {
        if end <= start {
            return;
        }
        self.ranges.insert(start, (end, anon));
        self.live[ALL] += end - start;
        if anon {
            self.live[ANON] += end - start;
        }
    }

    /// Removes `start..end` from the ranges; returns the bytes removed (all, anonymous).
    fn remove(&mut self, start: u64, end: u64) -> [u64; 2] {
        let mut removed = [0u64; 2];
        if end <= start {
            return removed;
        }
        // Ranges are disjoint and sorted: walking down from `end`, the first one that ends at or
        // before `start` ends the overlap.
        let hit: Vec<(u64, (u64, bool))> = self
            .ranges
            .range(..end)
            .rev()
            .take_while(|(_, &(e, _))| e > start)
            .map(|(&s, &v)| (s, v))
            .collect();
        for (s, (e, anon)) in hit {
            self.ranges.remove(&s);
            if s < start {
                self.ranges.insert(s, (start, anon));
            }
            if e > end {
                self.ranges.insert(end, (e, anon));
            }
            let gone = e.min(end) - s.max(start);
            removed[ALL] += gone;
            if anon {
                removed[ANON] += gone;
            }
        }
        self.live[ALL] -= removed[ALL];
        self.live[ANON] -= removed[ANON];
        removed
    }
}

/// The running mapped bytes of a tree or of the run, with their peaks.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct MappedSum {
    pub(super) live: [u64; 2],
    pub(super) peak: [Peak; 2],
}

impl MappedSum {
    /// One member process's contribution changed from `old` to `new` at `ts`.
    pub(super) fn replace(&mut self, old: [u64; 2], new: [u64; 2], ts: u64) {
        for k in 0..2 {
            self.live[k] = self.live[k].saturating_sub(old[k]).saturating_add(new[k]);
            self.peak[k].raise(self.live[k], ts);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: u64 = 4096;

    fn mmap(addr: u64, len: u64, anon: bool) -> EventKind {
        EventKind::Mmap {
            addr,
            len,
            prot: 3,
            flags: if anon { 0x22 } else { 0x2 },
        }
    }

    fn apply_all(events: &[EventKind]) -> ProcMapped {
        let mut m = ProcMapped::default();
        for (ts, e) in events.iter().enumerate() {
            m.apply(e, PAGE, ts as u64);
        }
        m
    }

    #[test]
    fn mmap_rounds_to_pages_and_munmap_splits() {
        let m = apply_all(&[
            mmap(0x10000, 5 * PAGE + 7, true),
            EventKind::Munmap {
                addr: 0x10000 + PAGE,
                len: PAGE,
            },
        ]);
        assert_eq!(m.live, [5 * PAGE, 5 * PAGE]);
        assert_eq!(m.peak[ALL].value, 6 * PAGE);
        assert_eq!(m.ranges.len(), 2);
        assert_eq!(m.calls.munmaps, 1);
    }

    #[test]
    fn unmapping_what_was_never_recorded_removes_nothing() {
        let m = apply_all(&[
            EventKind::Munmap {
                addr: 0x7000_0000,
                len: 1 << 20,
            },
            mmap(0x10000, PAGE, false),
            EventKind::Munmap {
                addr: 0x8000,
                len: 0x20000,
            },
        ]);
        assert_eq!(m.live, [0, 0]);
        assert_eq!(m.peak[ALL].value, PAGE);
        assert_eq!(m.peak[ANON].value, 0, "a file mapping is not anonymous");
    }

    #[test]
    fn mremap_moves_the_kind_and_grows() {
        let m = apply_all(&[
            mmap(0x10000, 2 * PAGE, true),
            EventKind::Mremap {
                old_addr: 0x10000,
                old_len: PAGE,
                addr: 0x90000,
                len: 7 * PAGE,
            },
        ]);
        assert_eq!(m.live, [8 * PAGE, 8 * PAGE]);
    }

    #[test]
    fn map_fixed_replaces_and_brk_counts_exactly() {
        let m = apply_all(&[
            mmap(0x10000, 4 * PAGE, false),
            mmap(0x11000, PAGE, true),
            EventKind::Brk {
                from: 0x5000_0000,
                to: 0x5000_0000 + 100_000,
            },
            EventKind::Brk {
                from: 0x5000_0000 + 100_000,
                to: 0x5000_0000 + 40_000,
            },
        ]);
        assert_eq!(m.live, [4 * PAGE + 40_000, PAGE + 40_000]);
        assert_eq!(m.peak[ANON].value, PAGE + 100_000);
        assert_eq!(m.calls.brks, 2);
    }

    #[test]
    fn sums_keep_peaks_of_the_moment() {
        let mut s = MappedSum::default();
        s.replace([0, 0], [10, 5], 1);
        s.replace([0, 0], [20, 0], 2);
        s.replace([10, 5], [0, 0], 3);
        assert_eq!(s.live, [20, 0]);
        assert_eq!((s.peak[ALL].value, s.peak[ALL].at_ns), (30, 2));
        assert_eq!(s.peak[ANON].value, 5);
    }
}

/// Raw mappings through the whole accounting pass: per process, per tree, per run.
#[cfg(test)]
mod stream_tests {
    use crate::format::EventKind;
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
}
