//! Writes a recording: magic, version and header at once, then events into chunks, then the
//! trailer.
//!
//! The recorder's drain loop calls `push` for every decoded event (millions per second), so
//! `push` only appends a few bytes to a reused buffer; every `CHUNK_TARGET_BYTES` of payload the
//! chunk is framed and written. The recorder also calls `flush_chunk` about once a second, so a
//! recorder killed without warning leaves a file the reader can use up to its last chunk.

use std::io::Write;

use super::chunk::{
    write_frame, FrameHead, FRAME_HEAD_BYTES, MAX_PAYLOAD_BYTES, TAG_CHUNK, TAG_HEADER, TAG_TRAILER,
};
use super::event::{
    Bench, ControlCommand, Event, EventKind, Exec, Header, Lost, Module, Symbol, Trailer,
};
use super::wire::{append, ChunkEncoder, MAX_THREADS_PER_CHUNK};
use super::{FormatError, FORMAT_VERSION, MAGIC};

/// A chunk is written out once its payload reaches this many bytes: large enough that the 13
/// bytes of framing and the chunk's first absolute values cost nothing, small enough that a torn
/// chunk loses little and the reader's buffer stays small.
pub const CHUNK_TARGET_BYTES: usize = 64 * 1024;

/// The most bytes of strings one event may carry (an exec's filename and argv, a loss cause).
/// The recorder shortens argv long before this; the limit keeps every chunk within
/// `MAX_PAYLOAD_BYTES`, which the reader enforces.
pub const MAX_EVENT_STRING_BYTES: usize = MAX_PAYLOAD_BYTES as usize / 2;

// A chunk holds less than CHUNK_TARGET_BYTES before its last event, and a Thread record takes at
// least 3 bytes: so the thread table stays below what the reader accepts...
const _: () = assert!(CHUNK_TARGET_BYTES / 3 + 1 < MAX_THREADS_PER_CHUNK);
// ...and the largest possible chunk (nearly full, then the largest event) stays readable.
const _: () =
    assert!(CHUNK_TARGET_BYTES + MAX_EVENT_STRING_BYTES + 1024 < MAX_PAYLOAD_BYTES as usize);

/// Writes one recording to `out`.
///
/// After an error from `out` the file is damaged from that point on (the reader will stop there);
/// stop writing and report it.
pub struct Writer<W: Write> {
    out: W,
    /// The open chunk's records.
    payload: Vec<u8>,
    encoder: ChunkEncoder,
    chunk_events: u32,
    events_written: u64,
    chunks_written: u64,
    bytes_written: u64,
}

impl<W: Write> Writer<W> {
    /// Starts a recording: writes the magic, `FORMAT_VERSION` and `header` to `out` right away.
    ///
    /// `out` should be unbuffered or flushed by `flush_chunk`: the writer already writes whole
    /// chunks at a time.
    pub fn new(mut out: W, header: &Header) -> Result<Self, FormatError> {
        let mut payload = Vec::new();
        append(&mut payload, header).map_err(|e| encode_error("the header", e))?;
        if payload.len() > MAX_PAYLOAD_BYTES as usize {
            return Err(FormatError::TooLarge {
                what: "the header",
                bytes: payload.len() as u64,
                max: u64::from(MAX_PAYLOAD_BYTES),
            });
        }
        let head = FrameHead::for_payload(TAG_HEADER, 0, &payload);
        let mut start = Vec::with_capacity(MAGIC.len() + 2 + FRAME_HEAD_BYTES + payload.len());
        start.extend_from_slice(&MAGIC);
        start.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        write_frame(&mut start, head, &payload)?;
        out.write_all(&start)?;
        payload.clear();
        // Room for a full chunk plus its last event, so the hot path never reallocates.
        payload.reserve(CHUNK_TARGET_BYTES + 4096);
        Ok(Writer {
            out,
            payload,
            encoder: ChunkEncoder::default(),
            chunk_events: 0,
            events_written: 0,
            chunks_written: 0,
            bytes_written: start.len() as u64,
        })
    }

    /// Appends `ev` to the open chunk, and writes the chunk out once it reaches
    /// `CHUNK_TARGET_BYTES`. An event with more than `MAX_EVENT_STRING_BYTES` of strings is
    /// refused with `FormatError::TooLarge` and nothing is written for it.
    #[inline]
    pub fn push(&mut self, ev: &Event) -> Result<(), FormatError> {
        if let Some(err) = too_large(ev) {
            return Err(err);
        }
        self.encoder
            .encode(ev, &mut self.payload)
            .map_err(|e| encode_error("an event", e))?;
        self.chunk_events += 1;
        self.events_written += 1;
        if self.payload.len() >= CHUNK_TARGET_BYTES {
            self.write_chunk()?;
        }
        Ok(())
    }

    /// Writes the open chunk (if it has events) and flushes `out`, so everything pushed so far
    /// is in the file.
    pub fn flush_chunk(&mut self) -> Result<(), FormatError> {
        self.write_chunk()?;
        self.out.flush()?;
        Ok(())
    }

    /// Ends the recording: writes the open chunk and `trailer`, with its `events` and `chunks`
    /// replaced by this writer's own counts, flushes and returns `out`.
    pub fn finish(mut self, trailer: &Trailer) -> Result<W, FormatError> {
        self.write_chunk()?;
        let trailer = Trailer {
            events: self.events_written,
            chunks: self.chunks_written,
            ..trailer.clone()
        };
        self.payload.clear();
        append(&mut self.payload, &trailer).map_err(|e| encode_error("the trailer", e))?;
        if self.payload.len() > MAX_PAYLOAD_BYTES as usize {
            return Err(FormatError::TooLarge {
                what: "the trailer",
                bytes: self.payload.len() as u64,
                max: u64::from(MAX_PAYLOAD_BYTES),
            });
        }
        let head = FrameHead::for_payload(TAG_TRAILER, 0, &self.payload);
        self.bytes_written += write_frame(&mut self.out, head, &self.payload)?;
        self.out.flush()?;
        Ok(self.out)
    }

    /// Events accepted by `push` so far, including those still in the open chunk.
    pub fn events_written(&self) -> u64 {
        self.events_written
    }

    /// Bytes handed to `out` so far (the open chunk is not counted until it is written).
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    /// The output, e.g. to sync the file.
    pub fn get_ref(&self) -> &W {
        &self.out
    }

    /// Frames and writes the open chunk, then starts a new one with fresh encoder state.
    fn write_chunk(&mut self) -> Result<(), FormatError> {
        if self.chunk_events == 0 {
            return Ok(());
        }
        let head = FrameHead::for_payload(TAG_CHUNK, self.chunk_events, &self.payload);
        let written = write_frame(&mut self.out, head, &self.payload);
        // Start afresh even after an error, so the writer never repeats half a chunk.
        self.payload.clear();
        self.encoder.reset();
        self.chunk_events = 0;
        self.bytes_written += written?;
        self.chunks_written += 1;
        Ok(())
    }
}

/// The error for an event whose strings exceed `MAX_EVENT_STRING_BYTES`, if it is one.
fn too_large(ev: &Event) -> Option<FormatError> {
    let (what, bytes) = match &ev.kind {
        // Each argv entry also costs a length varint of at most 5 bytes.
        EventKind::Exec(Exec { filename, argv }) => (
            "an exec event",
            argv.iter()
                .fold(filename.len(), |n, a| n.saturating_add(a.len() + 5)),
        ),
        EventKind::Lost(Lost { cause, .. }) => ("a lost-events event", cause.len()),
        EventKind::Module(Module { path, build_id, .. }) => {
            ("a module event", path.len().saturating_add(build_id.len()))
        }
        // Each frame also costs two length varints and a line, 15 bytes at most.
        EventKind::Symbol(Symbol { frames, .. }) => (
            "a symbol event",
            frames.iter().fold(0usize, |n, f| {
                n.saturating_add(f.function.len() + f.file.len() + 15)
            }),
        ),
        EventKind::Control {
            command: ControlCommand::Bench(Bench { uri, .. }),
        } => ("a bench control event", uri.len()),
        // Each address is a varint of 10 bytes at most.
        EventKind::LeakScan(s) => ("a leak scan event", s.failure.len() + s.lost.len() * 10),
        EventKind::RmapRegion(r) => ("an rmap region event", r.name.len()),
        _ => return None,
    };
    (bytes > MAX_EVENT_STRING_BYTES).then_some(FormatError::TooLarge {
        what,
        bytes: bytes as u64,
        max: MAX_EVENT_STRING_BYTES as u64,
    })
}

fn encode_error(what: &'static str, e: postcard::Error) -> FormatError {
    FormatError::Encode {
        what,
        message: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{ev, free, header, FailingOutput};
    use std::io;

    #[test]
    fn new_writes_magic_version_and_header_at_once() {
        let w = Writer::new(Vec::new(), &header()).unwrap();
        let out = w.get_ref();
        assert_eq!(&out[..8], b"MEMTRACK");
        assert_eq!(&out[8..10], &FORMAT_VERSION.to_le_bytes());
        assert_eq!(FORMAT_VERSION, 7);
        assert_eq!(out[10], TAG_HEADER);
        assert_eq!(w.bytes_written(), out.len() as u64);
    }

    #[test]
    fn push_buffers_until_flush() {
        let mut w = Writer::new(Vec::new(), &header()).unwrap();
        let start = w.bytes_written();
        w.push(&ev(1, 1, 1, free(0x10))).unwrap();
        assert_eq!(w.bytes_written(), start);
        assert_eq!(w.events_written(), 1);
        w.flush_chunk().unwrap();
        assert!(w.bytes_written() > start);
        assert_eq!(w.get_ref()[start as usize], TAG_CHUNK);
    }

    #[test]
    fn flush_of_empty_chunk_writes_nothing() {
        let mut w = Writer::new(Vec::new(), &header()).unwrap();
        let start = w.bytes_written();
        w.flush_chunk().unwrap();
        w.flush_chunk().unwrap();
        assert_eq!(w.bytes_written(), start);
    }

    #[test]
    fn chunk_is_written_when_full() {
        let mut w = Writer::new(Vec::new(), &header()).unwrap();
        let start = w.bytes_written();
        let mut n = 0u64;
        while w.bytes_written() == start {
            w.push(&ev(n * 1000, 1, 1, free(n * 64))).unwrap();
            n += 1;
        }
        let chunk = (w.bytes_written() - start) as usize - FRAME_HEAD_BYTES;
        assert!((CHUNK_TARGET_BYTES..CHUNK_TARGET_BYTES + 64).contains(&chunk));
        assert!(w.payload.capacity() < CHUNK_TARGET_BYTES + 8192);
    }

    #[test]
    fn finish_fills_counts_and_returns_output() {
        let mut w = Writer::new(Vec::new(), &header()).unwrap();
        for i in 0..5 {
            w.push(&ev(i, 1, 1, free(16))).unwrap();
        }
        w.flush_chunk().unwrap();
        w.push(&ev(9, 1, 1, free(16))).unwrap();
        let total = w.bytes_written();
        let trailer = Trailer {
            events: 999,
            chunks: 999,
            exit_code: 3,
            ..Trailer::default()
        };
        let out = w.finish(&trailer).unwrap();
        assert!(out.len() as u64 > total);
        // Trailer payload: end 0, events 6, chunks 2, no losses, exit code 3 (zigzag 6).
        let tail = &out[out.len() - 5..];
        assert_eq!(tail, [0, 6, 2, 0, 6]);
    }

    #[test]
    fn oversized_exec_is_refused_and_writer_stays_usable() {
        let mut w = Writer::new(Vec::new(), &header()).unwrap();
        let huge = Event {
            ts_ns: 1,
            pid: 1,
            tid: 1,
            kind: EventKind::Exec(Exec {
                filename: "f".into(),
                argv: vec!["a".repeat(MAX_EVENT_STRING_BYTES)],
            }),
        };
        let err = w.push(&huge).unwrap_err();
        assert!(matches!(err, FormatError::TooLarge { .. }), "{err}");
        assert_eq!(w.events_written(), 0);
        assert!(w.payload.is_empty());
        w.push(&ev(2, 1, 1, free(8))).unwrap();
        assert_eq!(w.events_written(), 1);
    }

    #[test]
    fn oversized_lost_cause_is_refused() {
        let mut w = Writer::new(Vec::new(), &header()).unwrap();
        let ev = Event {
            ts_ns: 1,
            pid: 1,
            tid: 1,
            kind: EventKind::Lost(Lost {
                cause: "c".repeat(MAX_EVENT_STRING_BYTES + 1),
                total: 1,
            }),
        };
        assert!(matches!(w.push(&ev), Err(FormatError::TooLarge { .. })));
    }

    #[test]
    fn oversized_symbol_is_refused() {
        use crate::format::SymbolFrame;
        let mut w = Writer::new(Vec::new(), &header()).unwrap();
        // Many small frames add up: the limit is on the whole event, not one string.
        let frame = SymbolFrame {
            function: "f".repeat(1000),
            file: String::new(),
            line: 1,
        };
        let count = MAX_EVENT_STRING_BYTES / 1000;
        let ev = Event {
            ts_ns: 1,
            pid: 0,
            tid: 0,
            kind: EventKind::Symbol(Symbol {
                module: 1,
                offset: 0x1000,
                frames: vec![frame; count],
            }),
        };
        assert!(matches!(w.push(&ev), Err(FormatError::TooLarge { .. })));
        assert_eq!(w.events_written(), 0);
    }

    #[test]
    fn oversized_header_is_refused() {
        let h = Header {
            argv: vec!["x".repeat(MAX_PAYLOAD_BYTES as usize)],
            ..Header::default()
        };
        assert!(matches!(
            Writer::new(Vec::new(), &h),
            Err(FormatError::TooLarge { .. })
        ));
    }

    #[test]
    fn output_errors_are_returned() {
        assert!(matches!(
            Writer::new(
                FailingOutput {
                    left: 0,
                    error: io::ErrorKind::Other,
                },
                &header()
            ),
            Err(FormatError::Io(_))
        ));
    }

    /// The encoder's speed in the recorder's hot loop, and the bytes it writes:
    /// `cargo test --release --lib -- --ignored --nocapture encode_speed`. 10 million
    /// malloc/free events (a 1 million event stream of 12 threads, pushed 10 times) into a
    /// `Vec`; the checksum of the bytes must not change when the encoder is reworked (its header
    /// is spelled out so that it does not change with the test kit's).
    #[test]
    #[ignore]
    fn encode_speed() {
        let events: Vec<Event> = crate::testkit::benchmark_events(1_000_000, 1_000).collect();
        let header = Header {
            memtrack_version: "0.1.0".into(),
            argv: vec!["true".into()],
            page_size_bytes: 4096,
            ..Header::default()
        };
        let mut w = Writer::new(Vec::with_capacity(128 << 20), &header).unwrap();
        let t = std::time::Instant::now();
        for _ in 0..10 {
            for e in &events {
                w.push(e).unwrap();
            }
        }
        let elapsed = t.elapsed();
        let n = w.events_written();
        let bytes = w.finish(&Trailer::default()).unwrap();
        let crc = crate::format::crc::crc32(&bytes);
        println!(
            "encode {:.1} M events/s ({:.2} ns/event), {:.3} bytes/event, {} bytes, crc32 {crc:08x}",
            n as f64 / elapsed.as_secs_f64() / 1e6,
            elapsed.as_nanos() as f64 / n as f64,
            bytes.len() as f64 / n as f64,
            bytes.len(),
        );
    }

    #[test]
    fn failed_chunk_write_is_an_error_and_does_not_panic_later() {
        let mut w = Writer::new(
            FailingOutput {
                left: 200,
                error: io::ErrorKind::Other,
            },
            &header(),
        )
        .unwrap();
        for i in 0..100 {
            w.push(&ev(i, 1, 1, free(i))).unwrap();
        }
        assert!(matches!(w.flush_chunk(), Err(FormatError::Io(_))));
        w.push(&ev(1, 1, 1, free(1))).unwrap();
        assert!(w.finish(&Trailer::default()).is_err());
    }
}
