//! Frames: the self-delimiting, checksummed units a recording is made of after its magic and
//! version.
//!
//! The writer wraps the header, every chunk of events and the trailer in a frame; the reader
//! reads one frame at a time into a reused buffer and trusts its payload only once the checksum
//! matches. A frame is a 13-byte head followed by the payload:
//!
//! ```text
//! tag          u8      b'H' header, b'C' chunk of events, b'T' trailer
//! payload_len  u32 LE  at most MAX_PAYLOAD_BYTES
//! event_count  u32 LE  events in a chunk; 0 for header and trailer
//! crc32        u32 LE  CRC-32 (IEEE) of tag, payload_len, event_count and the payload
//! payload      payload_len bytes
//! ```
//!
//! The checksum covers the head too, so a damaged length or count is caught like damaged data.

use std::fmt;
use std::io::{self, Read};

use super::crc::Crc32;

/// Tag of the header frame (once, right after the version).
pub const TAG_HEADER: u8 = b'H';
/// Tag of a chunk of events.
pub const TAG_CHUNK: u8 = b'C';
/// Tag of the trailer frame (once, last).
pub const TAG_TRAILER: u8 = b'T';

/// Bytes in a frame head.
pub const FRAME_HEAD_BYTES: usize = 13;

/// The largest payload a frame may carry. The writer closes chunks at 64 KiB and refuses events
/// above half of this, so anything larger is damage; the limit also bounds the reader's buffer.
pub const MAX_PAYLOAD_BYTES: u32 = 16 << 20;

/// A decoded frame head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHead {
    /// What the frame holds (`TAG_HEADER`, `TAG_CHUNK`, `TAG_TRAILER`).
    pub tag: u8,
    /// Bytes of payload after the head.
    pub payload_len: u32,
    /// Events in a chunk's payload; 0 for other frames.
    pub event_count: u32,
    /// The stored checksum.
    pub crc: u32,
}

impl FrameHead {
    /// The head for `payload`, with its checksum computed.
    pub fn for_payload(tag: u8, event_count: u32, payload: &[u8]) -> FrameHead {
        let payload_len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
        let mut head = FrameHead {
            tag,
            payload_len,
            event_count,
            crc: 0,
        };
        head.crc = head.checksum(payload);
        head
    }

    /// The head as it is stored.
    pub fn to_bytes(self) -> [u8; FRAME_HEAD_BYTES] {
        let mut b = [0u8; FRAME_HEAD_BYTES];
        b[0] = self.tag;
        b[1..5].copy_from_slice(&self.payload_len.to_le_bytes());
        b[5..9].copy_from_slice(&self.event_count.to_le_bytes());
        b[9..13].copy_from_slice(&self.crc.to_le_bytes());
        b
    }

    /// The head stored in `b`.
    pub fn from_bytes(b: &[u8; FRAME_HEAD_BYTES]) -> FrameHead {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        FrameHead {
            tag: b[0],
            payload_len: u32_at(1),
            event_count: u32_at(5),
            crc: u32_at(9),
        }
    }

    /// The checksum this head (apart from its stored `crc`) and `payload` should carry.
    pub fn checksum(&self, payload: &[u8]) -> u32 {
        let bytes = self.to_bytes();
        let mut c = Crc32::new();
        c.update(&bytes[..9]);
        c.update(payload);
        c.finish()
    }
}

/// Why a frame could not be read. The reader adds where the frame starts.
#[derive(Debug)]
pub enum FrameFault {
    /// Reading failed.
    Io(io::Error),
    /// The file ends `got` bytes into the head.
    TornHead { got: usize },
    /// The tag is not one this reader expects here.
    UnexpectedTag { tag: u8 },
    /// The head claims a payload longer than `MAX_PAYLOAD_BYTES`.
    TooLong { len: u32 },
    /// The file ends `got` bytes into a payload of `len`.
    TornPayload { len: u32, got: usize },
    /// The checksum does not match.
    BadChecksum { stored: u32, computed: u32 },
}

impl fmt::Display for FrameFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameFault::Io(e) => write!(f, "read error: {e}"),
            FrameFault::TornHead { got } => write!(
                f,
                "the file ends {got} bytes into a {FRAME_HEAD_BYTES}-byte frame head \
                 (the recording was cut short)"
            ),
            FrameFault::UnexpectedTag { tag } => {
                write!(f, "unexpected frame tag 0x{tag:02x}")?;
                if tag.is_ascii_graphic() {
                    write!(f, " ('{}')", char::from(*tag))?;
                }
                Ok(())
            }
            FrameFault::TooLong { len } => write!(
                f,
                "frame claims {len} payload bytes, more than the {MAX_PAYLOAD_BYTES} a frame \
                 may hold"
            ),
            FrameFault::TornPayload { len, got } => write!(
                f,
                "the file ends {got} bytes into a {len}-byte payload (the recording was cut short)"
            ),
            FrameFault::BadChecksum { stored, computed } => write!(
                f,
                "checksum mismatch (stored 0x{stored:08x}, computed 0x{computed:08x})"
            ),
        }
    }
}

/// Reads into `buf` until it is full or the input ends; returns how many bytes were read.
/// Unlike `read_exact`, a short read tells how far the file went, for the damage report.
pub fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Reads one frame: its head, then its payload into `payload` (cleared first, capacity kept).
///
/// Returns `Ok(None)` when the input ends exactly where a frame would start. `allowed` lists the
/// tags acceptable here. `consumed` grows by every byte taken from `r`, whatever the outcome;
/// those bytes are `head_bytes` (as far as they went) followed by `payload`, so a reader that
/// resynchronises after a fault can scan them again.
pub fn read_frame<R: Read>(
    r: &mut R,
    allowed: &[u8],
    head_bytes: &mut [u8; FRAME_HEAD_BYTES],
    payload: &mut Vec<u8>,
    consumed: &mut u64,
) -> Result<Option<FrameHead>, FrameFault> {
    payload.clear();
    let got = read_full(r, head_bytes).map_err(FrameFault::Io)?;
    *consumed += got as u64;
    if got == 0 {
        return Ok(None);
    }
    if got < FRAME_HEAD_BYTES {
        return Err(FrameFault::TornHead { got });
    }
    let head = FrameHead::from_bytes(head_bytes);
    if !allowed.contains(&head.tag) {
        return Err(FrameFault::UnexpectedTag { tag: head.tag });
    }
    if head.payload_len > MAX_PAYLOAD_BYTES {
        return Err(FrameFault::TooLong {
            len: head.payload_len,
        });
    }
    // `take` + `read_to_end` grows the buffer only as far as the file really goes, so a damaged
    // length in a short file does not allocate 16 MiB.
    let got = r
        .by_ref()
        .take(u64::from(head.payload_len))
        .read_to_end(payload)
        .map_err(FrameFault::Io)?;
    *consumed += got as u64;
    if got < head.payload_len as usize {
        return Err(FrameFault::TornPayload {
            len: head.payload_len,
            got,
        });
    }
    let computed = head.checksum(payload);
    if computed != head.crc {
        return Err(FrameFault::BadChecksum {
            stored: head.crc,
            computed,
        });
    }
    Ok(Some(head))
}

/// What the bytes at some position of a file are, to a reader looking for the next intact frame
/// after damage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameProbe {
    /// No intact frame of the wanted tags starts here.
    No,
    /// Perhaps one does; `bytes` from here are needed to tell.
    NeedBytes(usize),
    /// An intact frame starts here (its checksum matches).
    Frame(FrameHead),
}

/// Whether `window` starts with an intact frame whose tag is one of `tags`. A chunk must claim
/// between 1 and `payload_len` events (every record takes a byte at least) and a trailer none,
/// which rules out most stray tag bytes before any checksum is computed.
pub fn probe_frame(window: &[u8], tags: &[u8]) -> FrameProbe {
    let Some(first) = window.first() else {
        return FrameProbe::NeedBytes(FRAME_HEAD_BYTES);
    };
    if !tags.contains(first) {
        return FrameProbe::No;
    }
    let Some(head_bytes) = window.get(..FRAME_HEAD_BYTES) else {
        return FrameProbe::NeedBytes(FRAME_HEAD_BYTES);
    };
    let head = FrameHead::from_bytes(head_bytes.try_into().expect("13 bytes"));
    let plausible = head.payload_len <= MAX_PAYLOAD_BYTES
        && match head.tag {
            TAG_CHUNK => head.event_count >= 1 && head.event_count <= head.payload_len,
            _ => head.event_count == 0,
        };
    if !plausible {
        return FrameProbe::No;
    }
    let len = FRAME_HEAD_BYTES + head.payload_len as usize;
    match window.get(FRAME_HEAD_BYTES..len) {
        None => FrameProbe::NeedBytes(len),
        Some(payload) if head.checksum(payload) == head.crc => FrameProbe::Frame(head),
        Some(_) => FrameProbe::No,
    }
}

/// Writes `head` and `payload` to `out`; returns the bytes written.
pub fn write_frame<W: io::Write>(out: &mut W, head: FrameHead, payload: &[u8]) -> io::Result<u64> {
    out.write_all(&head.to_bytes())?;
    out.write_all(payload)?;
    Ok((FRAME_HEAD_BYTES + payload.len()) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: &[u8] = &[TAG_HEADER, TAG_CHUNK, TAG_TRAILER];

    fn framed(tag: u8, count: u32, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        write_frame(&mut v, FrameHead::for_payload(tag, count, payload), payload).unwrap();
        v
    }

    fn read(bytes: &[u8]) -> (Result<Option<FrameHead>, FrameFault>, Vec<u8>, u64) {
        let mut payload = Vec::new();
        let mut consumed = 0;
        let mut head = [0u8; FRAME_HEAD_BYTES];
        let r = read_frame(&mut &bytes[..], ALL, &mut head, &mut payload, &mut consumed);
        (r, payload, consumed)
    }

    #[test]
    fn head_round_trips() {
        let h = FrameHead {
            tag: TAG_CHUNK,
            payload_len: 0x0102_0304,
            event_count: u32::MAX,
            crc: 0xdead_beef,
        };
        assert_eq!(FrameHead::from_bytes(&h.to_bytes()), h);
    }

    #[test]
    fn head_is_little_endian() {
        let b = FrameHead {
            tag: TAG_CHUNK,
            payload_len: 1,
            event_count: 2,
            crc: 3,
        }
        .to_bytes();
        assert_eq!(b, [b'C', 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0]);
    }

    #[test]
    fn frame_round_trips() {
        let bytes = framed(TAG_CHUNK, 3, b"abc");
        let (r, payload, consumed) = read(&bytes);
        let head = r.unwrap().unwrap();
        assert_eq!((head.tag, head.event_count), (TAG_CHUNK, 3));
        assert_eq!(payload, b"abc");
        assert_eq!(consumed, bytes.len() as u64);
    }

    #[test]
    fn empty_input_is_none() {
        let (r, _, consumed) = read(&[]);
        assert!(matches!(r, Ok(None)));
        assert_eq!(consumed, 0);
    }

    #[test]
    fn torn_head() {
        let bytes = framed(TAG_CHUNK, 1, b"abc");
        let (r, _, consumed) = read(&bytes[..5]);
        assert!(matches!(r, Err(FrameFault::TornHead { got: 5 })));
        assert_eq!(consumed, 5);
    }

    #[test]
    fn torn_payload() {
        let bytes = framed(TAG_CHUNK, 1, b"abcdef");
        let (r, _, _) = read(&bytes[..bytes.len() - 2]);
        assert!(matches!(r, Err(FrameFault::TornPayload { len: 6, got: 4 })));
    }

    #[test]
    fn unexpected_tag() {
        let bytes = framed(b'Z', 0, b"");
        let (r, _, _) = read(&bytes);
        assert!(matches!(r, Err(FrameFault::UnexpectedTag { tag: b'Z' })));
    }

    #[test]
    fn absurd_length_is_refused_before_reading() {
        let mut bytes = framed(TAG_CHUNK, 1, b"x").to_vec();
        bytes[1..5].copy_from_slice(&u32::MAX.to_le_bytes());
        let (r, payload, _) = read(&bytes);
        assert!(matches!(r, Err(FrameFault::TooLong { len: u32::MAX })));
        assert!(payload.capacity() < 1024);
    }

    #[test]
    fn flipped_payload_byte_fails_checksum() {
        let mut bytes = framed(TAG_CHUNK, 1, b"payload");
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        let (r, _, _) = read(&bytes);
        assert!(matches!(r, Err(FrameFault::BadChecksum { .. })));
    }

    #[test]
    fn flipped_count_fails_checksum() {
        let mut bytes = framed(TAG_CHUNK, 1, b"payload");
        bytes[5] ^= 1;
        let (r, _, _) = read(&bytes);
        assert!(matches!(r, Err(FrameFault::BadChecksum { .. })));
    }

    #[test]
    fn probe_finds_an_intact_frame_and_says_how_much_it_needs() {
        let bytes = framed(TAG_CHUNK, 2, b"abcd");
        assert_eq!(
            probe_frame(&bytes, ALL),
            FrameProbe::Frame(FrameHead::for_payload(TAG_CHUNK, 2, b"abcd"))
        );
        assert_eq!(
            probe_frame(&bytes[..5], ALL),
            FrameProbe::NeedBytes(FRAME_HEAD_BYTES)
        );
        assert_eq!(
            probe_frame(&bytes[..15], ALL),
            FrameProbe::NeedBytes(bytes.len())
        );
        assert_eq!(probe_frame(&bytes, &[TAG_TRAILER]), FrameProbe::No);
        assert_eq!(probe_frame(&bytes[1..], ALL), FrameProbe::No);
        assert_eq!(
            probe_frame(&[], ALL),
            FrameProbe::NeedBytes(FRAME_HEAD_BYTES)
        );
    }

    #[test]
    fn probe_refuses_damage_and_implausible_heads() {
        let mut bytes = framed(TAG_CHUNK, 2, b"abcd");
        bytes[14] ^= 1;
        assert_eq!(probe_frame(&bytes, ALL), FrameProbe::No);
        // More events than payload bytes, a chunk of none, a trailer with some: all refused
        // before any checksum, however they are framed.
        assert_eq!(
            probe_frame(&framed(TAG_CHUNK, 5, b"abcd"), ALL),
            FrameProbe::No
        );
        assert_eq!(
            probe_frame(&framed(TAG_CHUNK, 0, b"abcd"), ALL),
            FrameProbe::No
        );
        assert_eq!(
            probe_frame(&framed(TAG_TRAILER, 1, b"abcd"), ALL),
            FrameProbe::No
        );
        let mut long = framed(TAG_CHUNK, 1, b"x");
        long[1..5].copy_from_slice(&(MAX_PAYLOAD_BYTES + 1).to_le_bytes());
        assert_eq!(probe_frame(&long, ALL), FrameProbe::No);
    }

    #[test]
    fn faults_display_on_one_line() {
        let faults = [
            FrameFault::TornHead { got: 3 },
            FrameFault::UnexpectedTag { tag: b'Z' },
            FrameFault::UnexpectedTag { tag: 0 },
            FrameFault::TooLong { len: 1 << 30 },
            FrameFault::TornPayload { len: 10, got: 2 },
            FrameFault::BadChecksum {
                stored: 1,
                computed: 2,
            },
        ];
        for f in faults {
            assert!(!f.to_string().contains('\n'));
        }
        assert_eq!(
            FrameFault::UnexpectedTag { tag: b'Z' }.to_string(),
            "unexpected frame tag 0x5a ('Z')"
        );
    }
}
