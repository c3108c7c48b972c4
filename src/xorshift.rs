//! A small deterministic generator (xorshift64): the sampled stacks' draws
//! (`record::stacks::StackSample::draws`), and the unit tests that damage files and build random
//! event streams. Reproducible from a seed, without a crate: the draws must stay the same from
//! one build to the next for a seed to mean anything.

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

    #[cfg(test)]
    /// A value below `n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
