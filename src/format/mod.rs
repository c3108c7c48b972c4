//! The recording file: what `record` writes and `report`, `check` and `dump` read.
//!
//! Data flows recorder → `Writer` → file → `Reader` → accounting. `event` is the logical model
//! both sides share; `wire` is its compact encoding inside a chunk; `chunk` frames and checksums
//! (`crc`) the pieces; `writer` and `reader` put it together.
//!
//! Layout of format version 4 (all fixed-width integers little-endian):
//!
//! ```text
//! offset 0   magic           8 bytes  "MEMTRACK"
//! offset 8   format version  u16      4
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
//! Versions: 1 is the first (its records 13 to 17, mappings and coverage, were appended
//! within it); 2 appended the `Control` records (`WireRecord` 18 to 21: the harness's start,
//! stop, bench and marker commands) and changed nothing else, so the reader decodes both with
//! one decoder, and a version 1 file is exactly a version 2 file without control events; 3
//! appended the `AllocFunc` numbers 18 to 21 (allocators named with `record --allocator`), and a
//! version 2 file is exactly a version 3 file without them; 4 appended call stacks
//! (`WireRecord` 22 to 25: the modules, the stack trie's nodes, the symbols and the stack-walk
//! counters) and `MallocStack` (26: a malloc with a stack id, the compact `Malloc` with one
//! more varint), and a version 3 file is exactly a version 4 file without them (every
//! `stack_id` 0).
//!
//! Version 5 appends `LeakScan` (27: the reachability scan of a process at its exit,
//! src/record/leakscan.rs); a version 4 file is a version 5 file without it, whose processes
//! read as not scanned.
//!
//! Version 6 appends `Rmap` (28: pages mapped into or unmapped from a process, from the
//! kernel's rmap functions) and `RmapRegion` (29: the mapping they fall into); a version 5
//! file is a version 6 file without them, and its report has no rmap section.
//!
//! Version 7 appends `Fault` (30: pages a process's own code made resident, with the stack that
//! did, issue 35); a version 6 file is a version 7 file without them.
//!
//! To change the format: append `WireRecord` variants (the variant number is on disk) for new
//! event kinds, and bump `FORMAT_VERSION` so that an older memtrack refuses the file by naming
//! both versions ("upgrade memtrack") instead of calling it damaged at the first new record.
//! Changing `Header`, `Trailer` or an existing record needs a new version too, with the reader
//! keeping the old decoding. Keep a sample file of every released version in `testdata/compat/`
//! and test that it still reads (tests/compat.rs).

pub mod chunk;
pub mod crc;
pub mod error;
pub mod event;
pub mod reader;
pub mod wire;
pub mod writer;

pub use error::{FileError, FormatError};
pub use event::*;
pub use reader::{Reader, Skipped};
pub use writer::{Writer, CHUNK_TARGET_BYTES};

/// The first 8 bytes of every recording.
pub const MAGIC: [u8; 8] = *b"MEMTRACK";

/// The format version this memtrack writes (and the newest it reads).
pub const FORMAT_VERSION: u16 = 7;

/// The oldest format version this memtrack reads.
pub const OLDEST_FORMAT_VERSION: u16 = 1;
