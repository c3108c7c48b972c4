//! The bucket index of a file's rows, which narrows the BPF walk's search for a frame's row to
//! a few rows (bpf/stack.bpf.h, `find_row`; the layout is `struct unwind_file`'s, bpf/event.h).
//!
//! A binary search over all of a large file's rows (cc1plus: some 600,000) takes 20 halvings,
//! each two map lookups, and g++'s deep, varied stacks miss the walk's row cache often: that
//! search was a quarter of what `--stacks` added to `g++ -O2 -c` (perf). The index cuts the
//! file's offsets into buckets of `1 << shift` bytes, sized for about [`ROWS_PER_BUCKET`] rows
//! each, and keeps, for every bucket, how many rows start before it. The walk reads the two
//! words around its offset and searches only between them.

/// The rows a bucket holds on average, by the choice of its width: fewer would make the index
/// bigger (a word per bucket) for a halving or two less.
pub const ROWS_PER_BUCKET: u64 = 8;

/// A file's bucket index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowIndex {
    /// The first row's offset: bucket 0 starts there.
    pub base: u32,
    /// log2 of a bucket's width in bytes.
    pub shift: u32,
    /// Word b: the rows that start before `base + (b << shift)`, for b in 0..=buckets; the last
    /// is every row.
    pub words: Vec<u32>,
}

impl RowIndex {
    /// The index of rows starting at `pcs` (sorted), or None without rows.
    pub fn of(pcs: &[u32]) -> Option<RowIndex> {
        let (&base, &last) = (pcs.first()?, pcs.last()?);
        let span = u64::from(last - base) + 1;
        let width = (span * ROWS_PER_BUCKET / pcs.len() as u64).max(1);
        let shift = width.ilog2();
        let buckets = (span - 1) >> shift;
        let words = (0..=buckets + 1)
            .map(|b| {
                let start = u64::from(base) + (b << shift);
                pcs.partition_point(|&pc| u64::from(pc) < start) as u32
            })
            .collect();
        Some(RowIndex { base, shift, words })
    }

    /// The buckets (one word fewer than the index has).
    pub fn buckets(&self) -> u32 {
        self.words.len() as u32 - 1
    }

    /// The index as the rows array holds it: three words to a row's 12 bytes, the last row
    /// padded with zeros.
    pub fn rows(&self) -> Vec<[u8; 12]> {
        self.words
            .chunks(3)
            .map(|words| {
                let mut row = [0u8; 12];
                for (i, w) in words.iter().enumerate() {
                    row[i * 4..i * 4 + 4].copy_from_slice(&w.to_ne_bytes());
                }
                row
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xorshift::XorShift;

    /// The rows find_row searches for offset `off` among `count`: (lo, hi), every row before lo
    /// starting at or before `off` and none from hi on; None before the first row.
    fn range(index: &RowIndex, off: u32, count: u32) -> Option<(u32, u32)> {
        let bucket = u64::from(off.checked_sub(index.base)?) >> index.shift;
        Some(
            match index.words.get(bucket as usize..=bucket as usize + 1) {
                Some(&[lo, hi]) => (lo, hi.min(count)),
                _ => (count, count),
            },
        )
    }

    /// The row find_row answers for `off`: the last starting at or before it, searched between
    /// the index's words as the BPF code does.
    fn find(pcs: &[u32], index: &RowIndex, off: u32) -> Option<usize> {
        let (lo, hi) = range(index, off, pcs.len() as u32)?;
        let (lo, hi) = (lo as usize, hi as usize);
        let within = pcs[lo..hi].partition_point(|&pc| pc <= off);
        (lo + within).checked_sub(1)
    }

    fn check(pcs: &[u32]) {
        let index = RowIndex::of(pcs).unwrap();
        let (first, last) = (pcs[0], *pcs.last().unwrap());
        let offs = (first.saturating_sub(3)..=last.saturating_add(300)).chain([
            0,
            u32::MAX,
            last.saturating_add(1 << 20),
        ]);
        for off in offs {
            let whole = pcs.partition_point(|&pc| pc <= off).checked_sub(1);
            assert_eq!(find(pcs, &index, off), whole, "offset {off:#x} of {pcs:x?}");
        }
        assert_eq!(*index.words.last().unwrap() as usize, pcs.len());
        let buckets = u64::from(index.buckets());
        assert!(
            buckets <= pcs.len() as u64 / (ROWS_PER_BUCKET / 2) + 1,
            "{index:?}"
        );
    }

    #[test]
    fn every_offset_finds_the_row_the_whole_search_finds() {
        check(&[0x1000]);
        check(&[0x1000, 0x1000, 0x1004]);
        check(&[0, 1, 2, 3]);
        check(&[5, 0x40_0000]);
        let mut rng = XorShift(0x5eed);
        for _ in 0..200 {
            let n = 1 + rng.below(400) as usize;
            let mut pc = rng.below(1 << 20) as u32;
            let mut pcs = Vec::with_capacity(n);
            for _ in 0..n {
                // Mostly dense code, now and then a gap: buckets from empty to crowded.
                pc += match rng.below(10) {
                    0 => rng.below(1 << 14) as u32,
                    1 => 0,
                    _ => 1 + rng.below(64) as u32,
                };
                pcs.push(pc);
            }
            check(&pcs);
        }
    }

    #[test]
    fn the_rows_hold_three_words_each() {
        let index = RowIndex {
            base: 0,
            shift: 4,
            words: vec![0, 1, 2, 3, 4],
        };
        let rows = index.rows();
        assert_eq!(rows.len(), 2);
        assert_eq!(&rows[1][..4], &3u32.to_ne_bytes());
        assert_eq!(&rows[1][4..8], &4u32.to_ne_bytes());
        assert_eq!(&rows[1][8..], &[0; 4]);
    }

    #[test]
    fn no_rows_no_index() {
        assert_eq!(RowIndex::of(&[]), None);
    }
}
