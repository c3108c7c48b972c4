//! A small deterministic generator (xorshift64) for the unit tests that damage files and build
//! random event streams: reproducible from a seed, without a crate.

/// xorshift64; the seed must not be zero.
pub struct XorShift(pub u64);

impl XorShift {
    /// The next value.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A value below `n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
