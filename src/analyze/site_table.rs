//! The sites of one scope as the sites pass (`stacks`) counts them: each site's blocks and
//! bytes, allocated, live, at the scope's heap peak, leaked, and the scope's live heap with its
//! peak. With every stack walked the counts are exact; with sampled stacks each walked block
//! stands for its weight (the estimator below) and the blocks not walked count only toward the
//! scope's live heap, which stays exact, so the peak the sites are taken at is the real one.
//!
//! The estimator (docs/PERFORMANCE.md, "Sampled stacks"): the recorder walks an allocation of `s`
//! bytes with probability `p(s) = 1 - exp(-s/R)` (always when `s >= R`, a zero-byte one counted
//! as one byte), R the mean bytes between walks. A walked block then counts `1/p(s)` blocks and
//! `s/p(s)` bytes, the Horvitz-Thompson estimator, unbiased for every sum over blocks: a site's
//! allocations and bytes, its live bytes at any moment, its leaks. It is what Go's heap profile
//! and the OpenTelemetry eBPF profiler's memory design use for the same Poisson sampling.

use crate::intmap::IntMap;

use super::counters::Peak;
use crate::model::metrics::Blocks;

/// Blocks and their bytes, exact or estimated: sums of weights, rounded only when reported.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Amount {
    pub(super) blocks: f64,
    pub(super) bytes: f64,
}

impl Amount {
    pub(super) fn plus(self, o: Amount) -> Amount {
        Amount {
            blocks: self.blocks + o.blocks,
            bytes: self.bytes + o.bytes,
        }
    }

    /// Less `o`, never below zero (an estimate's sums can round a hair past it).
    fn minus(self, o: Amount) -> Amount {
        Amount {
            blocks: (self.blocks - o.blocks).max(0.0),
            bytes: (self.bytes - o.bytes).max(0.0),
        }
    }

    /// As the report states it, rounded to whole blocks and bytes.
    pub(super) fn rounded(self) -> Blocks {
        Blocks {
            blocks: self.blocks.round() as u64,
            bytes: self.bytes.round() as u64,
        }
    }
}

/// How much one block counts for its site: 1 with every stack walked, its estimator weight with
/// sampled stacks (see the module's doc).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Weigher {
    /// R, the mean bytes between walked allocations; `None`: every stack was walked.
    mean_bytes: Option<f64>,
}

impl Weigher {
    pub(super) fn exact() -> Weigher {
        Weigher { mean_bytes: None }
    }

    pub(super) fn sampled(mean_bytes: u64) -> Weigher {
        Weigher {
            mean_bytes: Some(mean_bytes.max(1) as f64),
        }
    }

    /// What a block of `size` bytes of site `leaf` counts for; `None` for a block whose stack
    /// was not walked (leaf 0 in a sampled recording), which belongs to no site.
    pub(super) fn weigh(self, leaf: u32, size: u64) -> Option<Amount> {
        let Some(mean) = self.mean_bytes else {
            return Some(Amount {
                blocks: 1.0,
                bytes: size as f64,
            });
        };
        if leaf == 0 {
            return None;
        }
        let s = size.max(1) as f64;
        // -expm1(-x) is 1 - exp(-x) without the cancellation of small x.
        let p = if s >= mean {
            1.0
        } else {
            -(-s / mean).exp_m1()
        };
        Some(Amount {
            blocks: 1.0 / p,
            bytes: size as f64 / p,
        })
    }
}

/// One site's counters in the scope.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Site {
    /// Its allocations and their bytes (a realloc counts its new size).
    pub(super) allocated: Amount,
    pub(super) temporary: Amount,
    /// Blocks live now.
    pub(super) live: Amount,
    pub(super) leaked: Amount,
    /// Of `leaked`, what the leak scan found definitely lost (less what a suppression took).
    pub(super) lost: Amount,
    /// Of the lost blocks, those a suppression rule matched (`--suppress`).
    pub(super) suppressed: Amount,
    pub(super) live_at_end: Amount,
    /// Live blocks at the latest scope peak, when `changed_at` is at or after that peak (else
    /// `live` has not changed since and is the value).
    at_peak: Amount,
    /// The table's clock at the last change of `live`.
    changed_at: u64,
}

/// How a live block stops being live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ending {
    /// Freed, or the old block of a realloc, or replaced by a block at the same address.
    Released { temporary: bool },
    /// Its process exited.
    Leaked,
    /// Its process called exec, which discards the heap.
    Dropped,
    /// Its process was still running at the end of the recording.
    LiveAtEnd,
}

/// The sites of one scope and the scope's live heap with its peak.
///
/// The peak-moment values come from a lazy snapshot: a logical clock ticks at every change of
/// a site, and a new peak of the scope marks the clock; a site changing for the first time
/// since the mark saves its live bytes first, since they are what it held at the peak. So a
/// new peak costs O(1), however many sites there are.
#[derive(Debug, Default)]
pub(super) struct SiteTable<K> {
    pub(super) sites: IntMap<K, Site>,
    weigher: Weigher,
    /// The scope's live bytes, every block's, walked or not: exact.
    live_bytes: u64,
    pub(super) peak: Peak,
    clock: u64,
    /// The clock at the latest peak: sites changed before it still hold their peak value.
    peak_mark: u64,
    /// The scope's allocations, and of them those whose stack was walked.
    pub(super) allocations: u64,
    pub(super) walked: u64,
}

impl<K: Copy + Eq + std::hash::Hash> SiteTable<K> {
    pub(super) fn new(weigher: Weigher) -> SiteTable<K> {
        SiteTable {
            sites: IntMap::default(),
            weigher,
            live_bytes: 0,
            peak: Peak::default(),
            clock: 0,
            peak_mark: 0,
            allocations: 0,
            walked: 0,
        }
    }

    /// The site `key`, about to change: it saves its live bytes if the scope peaked since its
    /// last change.
    #[inline]
    fn changing(&mut self, key: K) -> &mut Site {
        let site = self.sites.entry(key).or_default();
        if site.changed_at < self.peak_mark {
            site.at_peak = site.live;
        }
        site.changed_at = self.clock;
        self.clock += 1;
        site
    }

    /// A block of `size` bytes allocated at `ts` by site `key` of stack `leaf`.
    pub(super) fn allocate(&mut self, key: K, leaf: u32, size: u64, ts: u64) {
        self.allocations += 1;
        if let Some(w) = self.weigher.weigh(leaf, size) {
            self.walked += u64::from(leaf != 0);
            let site = self.changing(key);
            site.allocated = site.allocated.plus(w);
            site.live = site.live.plus(w);
        }
        self.live_bytes = self.live_bytes.saturating_add(size);
        if self.live_bytes > self.peak.value {
            self.peak.raise(self.live_bytes, ts);
            // Every change so far is before the peak: their sites hold their peak values now.
            self.peak_mark = self.clock;
        }
    }

    /// A live block of `size` bytes of site `key` of stack `leaf` ended as `how`.
    pub(super) fn end(&mut self, key: K, leaf: u32, size: u64, how: Ending) {
        self.live_bytes = self.live_bytes.saturating_sub(size);
        let Some(w) = self.weigher.weigh(leaf, size) else {
            return;
        };
        let site = self.changing(key);
        site.live = site.live.minus(w);
        match how {
            Ending::Released { temporary: true } => site.temporary = site.temporary.plus(w),
            Ending::Released { temporary: false } | Ending::Dropped => {}
            Ending::Leaked => site.leaked = site.leaked.plus(w),
            Ending::LiveAtEnd => site.live_at_end = site.live_at_end.plus(w),
        }
    }

    /// Of site `key`'s leaks, a block of `size` bytes the leak scan found definitely lost.
    pub(super) fn lost(&mut self, key: K, leaf: u32, size: u64) {
        let Some(w) = self.weigher.weigh(leaf, size) else {
            return;
        };
        if let Some(site) = self.sites.get_mut(&key) {
            site.lost = site.lost.plus(w);
        }
    }

    /// What site `s` held at the scope's peak.
    pub(super) fn at_peak(&self, s: &Site) -> Amount {
        if s.changed_at < self.peak_mark {
            s.live
        } else {
            s.at_peak
        }
    }

    pub(super) fn weigher(&self) -> Weigher {
        self.weigher
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_weighs_every_block_once() {
        let w = Weigher::exact().weigh(0, 100).unwrap();
        assert_eq!((w.blocks, w.bytes), (1.0, 100.0));
    }

    #[test]
    fn a_sampled_block_stands_for_the_inverse_of_its_chance() {
        let r = 1000;
        let weigher = Weigher::sampled(r);
        assert_eq!(weigher.weigh(0, 100), None, "not walked: no site");
        // At or past R a block is always walked: it stands for itself.
        assert_eq!(weigher.weigh(7, 1000).unwrap().bytes, 1000.0);
        assert_eq!(weigher.weigh(7, 5000).unwrap().blocks, 1.0);
        let w = weigher.weigh(7, 100).unwrap();
        let p = 1.0 - (-0.1f64).exp();
        assert!((w.blocks - 1.0 / p).abs() < 1e-9);
        assert!((w.bytes - 100.0 / p).abs() < 1e-9);
        // A zero-byte allocation is drawn as one byte, and weighs 0 bytes.
        let z = weigher.weigh(7, 0).unwrap();
        assert!((z.blocks - 1.0 / (1.0 - (-0.001f64).exp())).abs() < 1e-6);
        assert_eq!(z.bytes, 0.0);
    }

    /// The estimator's promise, checked by simulation: sampling many blocks the way the recorder
    /// does (each walked with probability p) and weighing the walked ones gives back the true
    /// count and bytes, within the spread the binomial predicts.
    #[test]
    fn weighed_samples_add_up_to_the_truth() {
        let weigher = Weigher::sampled(4096);
        let mut rng = crate::xorshift::XorShift(0x5eed);
        let (mut blocks, mut bytes, mut true_bytes) = (0.0, 0.0, 0u64);
        let n = 200_000u64;
        for i in 0..n {
            let size = 16 + (i % 97) * 8;
            true_bytes += size;
            let p = -(-(size as f64) / 4096.0).exp_m1();
            let u = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
            if u < p {
                let w = weigher.weigh(1, size).unwrap();
                blocks += w.blocks;
                bytes += w.bytes;
            }
        }
        // About n * mean(p) = 23,000 walks: the relative error's sd is well under 1 %.
        assert!(
            (blocks / n as f64 - 1.0).abs() < 0.03,
            "{blocks} blocks for {n}"
        );
        assert!(
            (bytes / true_bytes as f64 - 1.0).abs() < 0.03,
            "{bytes} for {true_bytes}"
        );
    }

    #[test]
    fn unwalked_blocks_move_the_peak_and_no_site() {
        let mut t: SiteTable<u32> = SiteTable::new(Weigher::sampled(1 << 20));
        t.allocate(1, 0, 500, 10);
        t.allocate(2, 9, 2 << 20, 20);
        assert_eq!(t.peak.value, 500 + (2 << 20));
        assert_eq!(t.sites.len(), 1, "only the walked block has a site");
        assert_eq!((t.allocations, t.walked), (2, 1));
        t.end(1, 0, 500, Ending::Released { temporary: false });
        t.end(2, 9, 2 << 20, Ending::Leaked);
        assert_eq!(t.sites[&2].leaked.rounded().bytes, 2 << 20);
    }
}
