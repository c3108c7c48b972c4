//! The compact encoding of events inside one chunk: what the writer appends per event and the
//! reader decodes back into absolute `Event`s.
//!
//! A logical `Event` carries absolute values (a 64-bit timestamp, pid, tid, 64-bit addresses)
//! that would take 30 bytes or more each. Inside a chunk both sides keep the same small state
//! instead, and records carry only what changed:
//!
//! - time: a signed (zigzag varint) delta from the previous event's timestamp, since events from
//!   several CPUs reach the ring buffer slightly out of order;
//! - thread: a table of the threads seen so far in the chunk. `Thread { pid, tid }` adds one and
//!   makes it current, `Switch { index }` makes an earlier one current; events belong to the
//!   current thread. Threads of a busy process interleave finely, so switching back costs two
//!   bytes rather than repeating both ids;
//! - addresses: a signed delta from the previous address of the same thread (each thread tends to
//!   allocate from its own arena, so its addresses are close together);
//! - resident pages: the new value is predicted as the thread's last value of that counter plus
//!   the delta, and only the (usually zero) error is stored.
//!
//! The state starts from zero at every chunk, so each chunk decodes on its own: its first event
//! carries the absolute timestamp as its delta. The most frequent events, `malloc` and `free`,
//! have variants of their own without the function byte: a malloc/free stream takes 5 to 6
//! bytes per event, and a malloc with a call stack (`MallocStack`) 1 to 3 more for its stack
//! id. Call-stack trie nodes take their ids as steps from the chunk's previous node (one byte
//! each for a new stack's nodes, written parents first).
//!
//! The parts: `record` is the record enum with its pinned variant numbers and its bytes;
//! `delta` the codecs both sides share (one rule per field: which stream, and what it is a
//! delta from); `encoder` and `decoder` the two sides' chunk state, each one arm per record.

mod decoder;
mod delta;
mod encoder;
mod record;

pub(crate) use decoder::{ChunkDecoder, DecodeFault};
pub(crate) use encoder::ChunkEncoder;
pub(crate) use record::append;
pub use record::{WireRecord, MAX_THREADS_PER_CHUNK};
