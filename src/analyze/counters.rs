//! The counters every scope of the report keeps: a heap's [`HeapCounters`] (with its size
//! histogram) and a running sum's [`Peak`]. The leaf of the accounting pass: processes, trees,
//! the run and benchmarks all count in these types, and it imports nothing of the pass.

use crate::model::metrics::{Blocks, HeapMetrics, LeakMetrics, SizeBucket};

/// Number of size buckets: 0, then one per bit length 1..=64.
pub(super) const BUCKETS: usize = 65;

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
    /// `leaked` split by the leak scan (a recording made with it, format version 5 on).
    pub(super) leaks: Option<LeakMetrics>,
}

impl LeakMetrics {
    /// Moves `b` (at most what there is) from definitely lost to suppressed.
    pub(super) fn suppress(&mut self, b: Blocks) {
        let take = Blocks {
            blocks: b.blocks.min(self.definitely_lost.blocks),
            bytes: b.bytes.min(self.definitely_lost.bytes),
        };
        self.definitely_lost.blocks -= take.blocks;
        self.definitely_lost.bytes -= take.bytes;
        self.suppressed = self.suppressed.plus(take);
    }

    /// The two splits added, saturating.
    fn plus(&self, other: &LeakMetrics) -> LeakMetrics {
        LeakMetrics {
            definitely_lost: self.definitely_lost.plus(other.definitely_lost),
            still_reachable: self.still_reachable.plus(other.still_reachable),
            not_scanned: self.not_scanned.plus(other.not_scanned),
            suppressed: self.suppressed.plus(other.suppressed),
            scanned_processes: self
                .scanned_processes
                .saturating_add(other.scanned_processes),
            unscanned_processes: self
                .unscanned_processes
                .saturating_add(other.unscanned_processes),
        }
    }
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
            leaks: None,
        }
    }
}

impl HeapCounters {
    /// Adds the additive counters of `other` (not live bytes or peaks, which trees keep apart).
    pub(super) fn add(&mut self, other: &HeapCounters) {
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
        self.leaks = match (&self.leaks, &other.leaks) {
            (Some(a), Some(b)) => Some(a.plus(b)),
            (a, b) => a.clone().or_else(|| b.clone()),
        };
        for (a, b) in self.histogram.iter_mut().zip(other.histogram.iter()) {
            *a = a.saturating_add(*b);
        }
    }

    /// Raises the live heap by `bytes` at `ts`, and its peak with it.
    #[inline]
    pub(super) fn grow_live(&mut self, bytes: u64, ts: u64) {
        self.live_bytes = self.live_bytes.saturating_add(bytes);
        if self.live_bytes > self.peak_bytes {
            self.peak_bytes = self.live_bytes;
            self.peak_ns = ts;
        }
    }

    /// Lowers the live heap by `bytes`.
    #[inline]
    pub(super) fn shrink_live(&mut self, bytes: u64) {
        self.live_bytes = self.live_bytes.saturating_sub(bytes);
    }

    /// Counts one allocation of `size` bytes.
    #[inline]
    pub(super) fn count_alloc(&mut self, size: u64) {
        self.allocs += 1;
        self.bytes_allocated = self.bytes_allocated.saturating_add(size);
        self.histogram[bucket(size)] += 1;
    }

    /// Counts one free of a live block of `size` bytes (its live bytes leave apart).
    #[inline]
    pub(super) fn count_free(&mut self, size: u64) {
        self.frees += 1;
        self.bytes_freed = self.bytes_freed.saturating_add(size);
    }

    /// The peak of its own live heap.
    pub(super) fn own_peak(&self) -> Peak {
        Peak {
            value: self.peak_bytes,
            at_ns: self.peak_ns,
        }
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
            leaks: self.leaks.clone(),
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
    #[inline]
    pub(super) fn raise(&mut self, value: u64, ts_ns: u64) {
        if value > self.value {
            self.value = value;
            self.at_ns = ts_ns;
        }
    }
}

/// A running live sum and its peak: the heap of a tree or of the run.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct LiveSum {
    pub(super) live: u64,
    pub(super) peak: Peak,
}

impl LiveSum {
    /// Raises the sum by `bytes` at `ts`, and its peak with it.
    #[inline]
    pub(super) fn grow(&mut self, bytes: u64, ts: u64) {
        self.live = self.live.saturating_add(bytes);
        self.peak.raise(self.live, ts);
    }

    /// Lowers the sum by `bytes`.
    #[inline]
    pub(super) fn shrink(&mut self, bytes: u64) {
        self.live = self.live.saturating_sub(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::*;

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
}
