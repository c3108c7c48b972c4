//! The recording file: what `record` writes and `report`, `check` and `dump` read.
//!
//! Data flows recorder → `Writer` → file → `Reader` → accounting. `event` is the logical model
//! both sides share; `wire` is its compact encoding inside a chunk; `chunk` frames and checksums
//! (`crc`) the pieces; `writer` and `reader` put it together.
//!
//! Layout of format version 1 (all fixed-width integers little-endian):
//!
//! ```text
//! offset 0   magic           8 bytes  "MEMTRACK"
//! offset 8   format version  u16      1
//! offset 10  header frame    tag 'H'  payload: postcard Header
//! ...        chunk frames    tag 'C'  payload: postcard WireRecords, each chunk decodes alone
//! last       trailer frame   tag 'T'  payload: postcard Trailer
//! ```
//!
//! Every frame is `tag u8, payload_len u32, event_count u32, crc32 u32, payload`, with the
//! CRC-32 (IEEE) covering the first three fields and the payload (see `chunk`). A chunk is
//! written once its payload reaches `CHUNK_TARGET_BYTES` and whenever the recorder flushes; the
//! reader refuses frames above `chunk::MAX_PAYLOAD_BYTES`. The trailer repeats the number of
//! events and chunks, so a chunk that went missing or was repeated is noticed.
//!
//! To change the format: append `WireRecord` variants (the variant number is on disk) for new
//! event kinds. Changing `Header`, `Trailer` or an existing record needs a new `FORMAT_VERSION`,
//! with the reader keeping the old decoding; keep a sample file of every released version in
//! `testdata/` and test that it still reads.

pub mod chunk;
pub mod crc;
pub mod error;
pub mod event;
pub mod reader;
pub mod wire;
pub mod writer;

pub use error::FormatError;
pub use event::*;
pub use reader::Reader;
pub use writer::{Writer, CHUNK_TARGET_BYTES};

/// The first 8 bytes of every recording.
pub const MAGIC: [u8; 8] = *b"MEMTRACK";

/// The format version this memtrack writes (and the newest it reads).
pub const FORMAT_VERSION: u16 = 1;
