//! The one hasher for integer keys (addresses, pids, tids, thread keys) that the recorder's
//! encoder and the report's accounting index by on every event.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A hasher for integer keys (addresses, pids, tids): one 64x64->128 multiply folded to 64
/// bits. Much cheaper than SipHash on the hot path; the inputs are not chosen to collide by
/// anyone who gains from it, and a collision only costs time.
#[derive(Clone, Copy, Default)]
pub struct IntHasher(u64);

/// Odd constant from the golden ratio, spreading consecutive keys over the whole word.
const MIX: u64 = 0x9e37_79b9_7f4a_7c15;

impl Hasher for IntHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        // Folding both halves of the product mixes high input bits into the low bits the table
        // indexes with, and low bits (alignment zeros of addresses) into the high ones.
        let product = u128::from(self.0 ^ n) * u128::from(MIX);
        self.0 = (product as u64) ^ ((product >> 64) as u64);
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map keyed by integers with [`IntHasher`].
pub type IntMap<K, V> = HashMap<K, V, BuildHasherDefault<IntHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hasher_spreads_aligned_addresses() {
        use std::hash::BuildHasher;
        let build = BuildHasherDefault::<IntHasher>::default();
        let mut low_bits = std::collections::HashSet::new();
        for i in 0..1024u64 {
            low_bits.insert(build.hash_one(0x5555_0000_0000 + i * 16) & 1023);
        }
        // A good spread fills most of the 1024 slots (a bad one leaves 1/16 of them).
        assert!(low_bits.len() > 600, "{}", low_bits.len());
    }

    #[test]
    fn hasher_differs_for_pids() {
        use std::hash::BuildHasher;
        let build = BuildHasherDefault::<IntHasher>::default();
        assert_ne!(build.hash_one(1u32), build.hash_one(2u32));
    }
}
