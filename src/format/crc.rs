//! CRC-32 (IEEE 802.3, the zlib/PNG/gzip polynomial) for the frames of a recording.
//!
//! The writer stamps every frame (header, chunk, trailer) with this checksum and the reader checks
//! it before trusting a single byte of the payload. It is written here rather than taken from a
//! crate because it is twenty lines and a table built at compile time.

/// The reflected IEEE polynomial.
const POLY: u32 = 0xEDB8_8320;

/// One entry per byte value: the CRC of that byte alone, so the loop does a byte at a time.
const TABLE: [u32; 256] = build_table();

const fn build_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut bit = 0;
        while bit < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            bit += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

/// A running CRC-32, for data that arrives in pieces (a frame head, then its payload).
#[derive(Clone, Copy, Debug)]
pub struct Crc32 {
    state: u32,
}

impl Default for Crc32 {
    fn default() -> Self {
        Crc32::new()
    }
}

impl Crc32 {
    /// A checksum of no bytes yet.
    pub const fn new() -> Crc32 {
        Crc32 { state: !0 }
    }

    /// Adds `data` to the checksum.
    pub fn update(&mut self, data: &[u8]) {
        let mut c = self.state;
        for &b in data {
            c = TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
        }
        self.state = c;
    }

    /// The checksum of everything added so far.
    pub const fn finish(self) -> u32 {
        !self.state
    }
}

/// The CRC-32 of `data` in one go.
pub fn crc32(data: &[u8]) -> u32 {
    let mut c = Crc32::new();
    c.update(data);
    c.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_value() {
        // The catalogue's check value for CRC-32/ISO-HDLC.
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn empty_is_zero() {
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn pieces_equal_whole() {
        let data = b"The quick brown fox jumps over the lazy dog";
        let mut c = Crc32::new();
        c.update(&data[..10]);
        c.update(&data[10..]);
        assert_eq!(c.finish(), crc32(data));
        assert_eq!(crc32(data), 0x414F_A339);
    }

    #[test]
    fn one_bit_changes_it() {
        assert_ne!(crc32(b"123456789"), crc32(b"123456788"));
    }
}
