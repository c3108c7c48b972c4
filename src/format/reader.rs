//! Reads a recording back as a stream of absolute `Event`s, for `report`, `check` and `dump`.
//!
//! `Reader::new` checks the magic, the format version and the header, and fails with a
//! `FormatError` if the file cannot be read at all. Events are then decoded lazily, one chunk at
//! a time in a reused buffer, so memory does not grow with the file. A chunk's events are only
//! decoded once its checksum matched.
//!
//! Damage in the middle does not end reading: every chunk decodes alone, so the reader skips
//! the damaged bytes, looks for the next intact frame (a chunk or trailer tag, a plausible head,
//! a matching checksum: `chunk::probe_frame`) and reads on from there; `skipped()` lists each
//! range it skipped, with its offset, size and why. Reading ends early only where nothing
//! intact follows (a file cut short, a damaged trailer): then `end()` says where and why
//! (`ReadEnd::Damaged`), after every event before the damage was yielded.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use super::chunk::{
    probe_frame, read_frame, read_full, FrameFault, FrameProbe, FRAME_HEAD_BYTES, TAG_CHUNK,
    TAG_HEADER, TAG_TRAILER,
};
use super::error::FileError;
use super::event::{Event, Header, ReadEnd, Trailer};
use super::wire::{ChunkDecoder, DecodeFault};
use super::{FormatError, FORMAT_VERSION, MAGIC, OLDEST_FORMAT_VERSION};

/// The tags a frame after the header may carry.
const BODY_TAGS: [u8; 2] = [TAG_CHUNK, TAG_TRAILER];

/// A range of the file the reader skipped because it was damaged, and read on after.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Skipped {
    /// Byte offset in the file where the damaged range starts (a frame that failed its check).
    pub offset_bytes: u64,
    /// Bytes skipped, up to the next intact frame.
    pub size_bytes: u64,
    /// What was wrong at `offset_bytes`.
    pub reason: String,
}

/// The file, with room to give bytes back: after a frame fails its check, the bytes it took
/// are scanned again for the next intact frame. Reads come from the given-back bytes first.
struct Source<R> {
    inner: R,
    /// Bytes given back or read ahead; `buf[pos..]` is what comes next.
    buf: Vec<u8>,
    pos: usize,
    eof: bool,
}

impl<R: Read> Read for Source<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.pos < self.buf.len() {
            let n = out.len().min(self.buf.len() - self.pos);
            out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
            self.pos += n;
            if self.pos == self.buf.len() {
                self.buf.clear();
                self.pos = 0;
            }
            return Ok(n);
        }
        self.inner.read(out)
    }
}

impl<R: Read> Source<R> {
    fn new(inner: R) -> Self {
        Source {
            inner,
            buf: Vec::new(),
            pos: 0,
            eof: false,
        }
    }

    /// Puts `bytes` back in front of what comes next.
    fn give_back(&mut self, bytes: &[u8]) {
        let rest = self.buf.split_off(self.pos);
        self.buf.clear();
        self.pos = 0;
        self.buf.extend_from_slice(bytes);
        self.buf.extend_from_slice(&rest);
    }

    /// Reads ahead until `n` bytes come next; false when the input ends first.
    fn fill_to(&mut self, n: usize) -> io::Result<bool> {
        let have = self.buf.len() - self.pos;
        if have >= n {
            return Ok(true);
        }
        if self.eof {
            return Ok(false);
        }
        let want = (n - have).max(4096) as u64;
        let got = self.inner.by_ref().take(want).read_to_end(&mut self.buf)?;
        if (got as u64) < want {
            self.eof = true;
        }
        Ok(self.buf.len() - self.pos >= n)
    }

    /// Drops bytes until an intact frame with one of `tags` comes next; returns how many were
    /// dropped, or `None` when the input ends first (everything was dropped). Memory holds at
    /// most one frame ahead of the scan position.
    fn skip_to_frame(&mut self, tags: &[u8]) -> io::Result<Option<u64>> {
        let mut dropped = 0u64;
        loop {
            match probe_frame(&self.buf[self.pos..], tags) {
                FrameProbe::Frame(_) => return Ok(Some(dropped)),
                FrameProbe::NeedBytes(n) if self.fill_to(n)? => continue,
                FrameProbe::NeedBytes(_) if self.pos == self.buf.len() => return Ok(None),
                FrameProbe::No | FrameProbe::NeedBytes(_) => {
                    self.pos += 1;
                    dropped += 1;
                    if self.pos >= 1 << 20 {
                        self.buf.drain(..self.pos);
                        self.pos = 0;
                    }
                }
            }
        }
    }
}

/// Reads one recording from `R`, yielding its events in the order they were written.
pub struct Reader<R: Read> {
    src: Source<R>,
    version: u16,
    header: Header,
    /// Bytes consumed from `src`.
    offset: u64,
    /// The current chunk's payload; reused for every chunk.
    payload: Vec<u8>,
    /// Where the next record starts in `payload`.
    pos: usize,
    /// File offset of the current chunk's frame.
    chunk_start: u64,
    /// Event count the current chunk's frame claims, and how many are still to come.
    chunk_events: u32,
    chunk_events_left: u32,
    decoder: ChunkDecoder,
    events_read: u64,
    chunks_read: u64,
    /// The current frame's head as read, for giving it back when the frame is damaged.
    head_bytes: [u8; FRAME_HEAD_BYTES],
    skipped: Vec<Skipped>,
    end: Option<ReadEnd>,
}

impl Reader<BufReader<File>> {
    /// Opens the recording at `path` and reads its header. Fails with `FormatError::Io` if the
    /// file cannot be opened or read, `FormatError::StillBeingWritten` if its recorder still
    /// holds it (`record` locks it until the trailer is written, `sys::lock`, so a file without
    /// a trailer whose recorder still runs is not called damaged), and another `FormatError` if
    /// it is not a readable recording; each with the path.
    pub fn open(path: &Path) -> Result<Self, FileError> {
        let with_path = |error| FileError {
            path: path.to_path_buf(),
            error,
        };
        let file = File::open(path).map_err(|e| with_path(FormatError::Io(e)))?;
        if crate::sys::lock::is_locked_by_another(&file).unwrap_or(false) {
            return Err(with_path(FormatError::StillBeingWritten));
        }
        Reader::new(BufReader::with_capacity(1 << 16, file)).map_err(with_path)
    }
}

impl<R: Read> Reader<R> {
    /// Reads and checks the magic, the format version and the header from `src`.
    pub fn new(src: R) -> Result<Self, FormatError> {
        let mut src = Source::new(src);
        let mut offset = 0u64;
        let mut magic = [0u8; MAGIC.len()];
        let got = read_full(&mut src, &mut magic)?;
        offset += got as u64;
        if magic[..got] != MAGIC[..got] || got == 0 {
            return Err(FormatError::NotMemtrack {
                found: magic[..got].to_vec(),
            });
        }
        if got < MAGIC.len() {
            return Err(FormatError::Truncated {
                offset,
                what: "the magic",
            });
        }

        let mut version = [0u8; 2];
        let got = read_full(&mut src, &mut version)?;
        offset += got as u64;
        if got < version.len() {
            return Err(FormatError::Truncated {
                offset,
                what: "the format version",
            });
        }
        // Version 2 only appended record variants (control events) to version 1, so one decoding
        // reads both. A version that changes an existing layout adds its own decoding here and
        // keeps this one: files from every released version must stay readable.
        let version = u16::from_le_bytes(version);
        if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(FormatError::UnsupportedVersion { found: version });
        }

        let header_start = offset;
        let bad = |reason: String| FormatError::BadHeader {
            offset: header_start,
            reason,
        };
        let mut payload = Vec::new();
        let mut head_bytes = [0u8; FRAME_HEAD_BYTES];
        let head = match read_frame(
            &mut src,
            &[TAG_HEADER],
            &mut head_bytes,
            &mut payload,
            &mut offset,
        ) {
            Ok(Some(head)) => head,
            Ok(None) | Err(FrameFault::TornHead { .. } | FrameFault::TornPayload { .. }) => {
                return Err(FormatError::Truncated {
                    offset,
                    what: "the header",
                })
            }
            Err(FrameFault::Io(e)) => return Err(FormatError::Io(e)),
            Err(fault) => return Err(bad(fault.to_string())),
        };
        if head.event_count != 0 {
            return Err(bad(format!(
                "header frame claims {} events",
                head.event_count
            )));
        }
        let header = match postcard::take_from_bytes::<Header>(&payload) {
            Ok((header, [])) => header,
            Ok((_, rest)) => return Err(bad(format!("{} bytes after its fields", rest.len()))),
            Err(e) => return Err(bad(format!("undecodable ({e})"))),
        };
        payload.clear();

        Ok(Reader {
            src,
            version,
            header,
            offset,
            payload,
            pos: 0,
            chunk_start: offset,
            chunk_events: 0,
            chunk_events_left: 0,
            decoder: ChunkDecoder::default(),
            events_read: 0,
            chunks_read: 0,
            head_bytes,
            skipped: Vec::new(),
            end: None,
        })
    }

    /// The format version the file was written in.
    pub fn format_version(&self) -> u16 {
        self.version
    }

    /// The recording's header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// How reading ended: `Some` once iteration has returned `None`.
    pub fn end(&self) -> Option<&ReadEnd> {
        self.end.as_ref()
    }

    /// Bytes of the file consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Ends reading with damage at `offset`.
    fn damaged(&mut self, offset: u64, reason: String) {
        self.end = Some(ReadEnd::Damaged { offset, reason });
    }

    /// The damaged ranges skipped so far, in file order.
    pub fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }

    /// Skips the rest of the current chunk, whose frame is intact but whose records are not
    /// what its head claims (`why`, at byte `at`); reading goes on with the next frame.
    fn skip_rest_of_chunk(&mut self, why: String) {
        self.skipped.push(Skipped {
            offset_bytes: self.chunk_start,
            size_bytes: self.offset - self.chunk_start,
            reason: format!("chunk at byte {}: {why}", self.chunk_start),
        });
        self.pos = self.payload.len();
        self.chunk_events_left = 0;
    }

    /// Skips the rest of the current chunk because its records do not decode.
    fn damaged_chunk(&mut self, fault: DecodeFault) {
        let at = self.chunk_start + FRAME_HEAD_BYTES as u64 + self.pos as u64;
        let n = self.chunk_events;
        let k = n - self.chunk_events_left + 1;
        self.skip_rest_of_chunk(format!("{fault} at byte {at} (event {k} of {n})"));
    }

    /// Reads the next frame: a chunk becomes current, a trailer ends reading. A damaged frame
    /// is skipped up to the next intact one.
    ///
    /// Never inlined: it runs once per chunk, and inlined into `next`, which runs once per
    /// event, its register pressure made every event pay (callgrind on a 2 M-event report: 23
    /// more instructions per event, spilled at `next`'s entry).
    #[inline(never)]
    fn read_next_frame(&mut self) {
        loop {
            let start = self.offset;
            self.pos = 0;
            let fault = match read_frame(
                &mut self.src,
                &BODY_TAGS,
                &mut self.head_bytes,
                &mut self.payload,
                &mut self.offset,
            ) {
                Ok(Some(head)) if head.tag == TAG_CHUNK => {
                    self.chunk_start = start;
                    self.chunk_events = head.event_count;
                    self.chunk_events_left = head.event_count;
                    self.chunks_read += 1;
                    self.decoder.reset();
                    return;
                }
                Ok(Some(head)) => return self.read_trailer(start, head.event_count),
                Ok(None) => {
                    // The offset is the end's own: the reason does not repeat it.
                    let reason =
                        "the file ends without a trailer (the recording was cut short)".to_string();
                    return self.damaged(start, reason);
                }
                Err(fault) => fault,
            };
            let reason = match fault {
                // The file ends inside the frame: it was cut short, not damaged.
                FrameFault::TornHead { .. } | FrameFault::TornPayload { .. } => fault.to_string(),
                _ => format!("damaged frame: {fault}"),
            };
            if matches!(fault, FrameFault::Io(_) | FrameFault::TornHead { .. }) {
                // A read error, or fewer bytes left than a frame head: nothing to read on to.
                self.payload.clear();
                return self.damaged(start, reason);
            }
            // Give back what the frame took but its first byte, and look for the next intact
            // frame from there.
            let consumed = (self.offset - start) as usize;
            let head_len = consumed.min(FRAME_HEAD_BYTES);
            let mut taken = self.head_bytes[..head_len].to_vec();
            taken.extend_from_slice(&self.payload[..consumed - head_len]);
            self.payload.clear();
            self.src.give_back(&taken[1..]);
            self.offset = start + 1;
            match self.src.skip_to_frame(&BODY_TAGS) {
                Ok(Some(dropped)) => {
                    self.offset += dropped;
                    self.skipped.push(Skipped {
                        offset_bytes: start,
                        size_bytes: self.offset - start,
                        reason,
                    });
                }
                // A payload the file ends inside, with nothing intact after its start: the file
                // was cut short there (a damaged length read on would have found what follows).
                Ok(None) if matches!(fault, FrameFault::TornPayload { .. }) => {
                    return self.damaged(start, reason);
                }
                Ok(None) => {
                    let reason = format!("{reason}; no intact chunk or trailer after it");
                    return self.damaged(start, reason);
                }
                Err(e) => return self.damaged(start, format!("{reason}; then read error: {e}")),
            }
        }
    }

    /// Checks the trailer now in `payload` (frame at `start`) against what was read, and that
    /// nothing follows it.
    fn read_trailer(&mut self, start: u64, event_count: u32) {
        let what = format!("trailer at byte {start}");
        if event_count != 0 {
            return self.damaged(start, format!("{what} claims {event_count} events"));
        }
        let trailer = match postcard::take_from_bytes::<Trailer>(&self.payload) {
            Ok((trailer, [])) => trailer,
            Ok((_, rest)) => {
                let reason = format!("{what}: {} bytes after its fields", rest.len());
                return self.damaged(start, reason);
            }
            Err(e) => return self.damaged(start, format!("{what} is undecodable ({e})")),
        };
        self.payload.clear();
        // A chunk lost or repeated (say by a broken copy) keeps every checksum intact; only the
        // counts tell. After skipped damage, fewer were read than written.
        let counts_agree = if self.skipped.is_empty() {
            trailer.events == self.events_read && trailer.chunks == self.chunks_read
        } else {
            trailer.events >= self.events_read && trailer.chunks >= self.chunks_read
        };
        if !counts_agree {
            let reason = format!(
                "{what} says {} events in {} chunks, but the file holds {} in {}",
                trailer.events, trailer.chunks, self.events_read, self.chunks_read
            );
            return self.damaged(start, reason);
        }
        let after = self.offset;
        let mut probe = [0u8; 1];
        match read_full(&mut self.src, &mut probe) {
            Ok(0) => self.end = Some(ReadEnd::Complete(trailer)),
            Ok(n) => {
                self.offset += n as u64;
                self.damaged(
                    after,
                    format!("unexpected data after the trailer at byte {after}"),
                );
            }
            Err(e) => self.damaged(after, format!("read error at byte {after}: {e}")),
        }
    }
}

impl<R: Read> Iterator for Reader<R> {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        loop {
            if self.end.is_some() {
                return None;
            }
            if self.chunk_events_left > 0 {
                match self.decoder.next_event(&self.payload, &mut self.pos) {
                    Ok(ev) => {
                        self.chunk_events_left -= 1;
                        self.events_read += 1;
                        return Some(ev);
                    }
                    Err(fault) => {
                        self.damaged_chunk(fault);
                        continue;
                    }
                }
            }
            if self.pos < self.payload.len() {
                let why = format!(
                    "{} bytes left after its {} events",
                    self.payload.len() - self.pos,
                    self.chunk_events
                );
                self.skip_rest_of_chunk(why);
                continue;
            }
            self.read_next_frame();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::error::STILL_BEING_WRITTEN;
    use crate::format::event::{
        AllocFunc, Bench, ControlCommand, EventKind, Exec, Lost, LostCount, MarkerKind, Module,
        RssMember, StackWalks, Symbol,
    };
    use crate::format::writer::Writer;
    use crate::testkit::{ev, full_header, full_trailer};

    /// One event of every kind, with awkward values.
    fn every_kind() -> Vec<Event> {
        vec![
            ev(
                1_000_000_100,
                4242,
                4242,
                EventKind::Exec(Exec {
                    filename: "/usr/bin/cargo".into(),
                    argv: vec!["cargo".into(), "bench".into(), String::new()],
                }),
            ),
            ev(
                1_000_000_200,
                4242,
                4242,
                EventKind::Alloc {
                    func: AllocFunc::Malloc,
                    addr: 0x5555_5555_92a0,
                    size: 64,
                    stack_id: 0,
                },
            ),
            ev(
                1_000_000_150,
                4242,
                4243,
                EventKind::Alloc {
                    func: AllocFunc::PosixMemalign,
                    addr: u64::MAX,
                    size: u64::MAX,
                    stack_id: 7,
                },
            ),
            ev(
                1_000_000_300,
                4242,
                4242,
                EventKind::Realloc {
                    func: AllocFunc::Realloc,
                    old_addr: 0x5555_5555_92a0,
                    addr: 0x7f00_0000_0010,
                    size: 1 << 20,
                    stack_id: 0,
                },
            ),
            ev(
                1_000_000_400,
                4242,
                4242,
                EventKind::Free {
                    func: AllocFunc::Realloc,
                    addr: 0x7f00_0000_0010,
                },
            ),
            ev(
                1_000_000_500,
                4242,
                4242,
                EventKind::AllocFailed {
                    func: AllocFunc::Calloc,
                    size: u64::MAX,
                },
            ),
            ev(1_000_000_600, 4242, 4242, EventKind::Fork { child: 4250 }),
            ev(
                1_000_000_700,
                4250,
                4250,
                EventKind::Rss {
                    member: RssMember::Anon,
                    delta_pages: -8192,
                    value_pages: 0,
                    by_owner: false,
                },
            ),
            ev(
                1_000_000_705,
                4250,
                4250,
                EventKind::Fault {
                    member: RssMember::Anon,
                    pages: 512,
                    addr: 0x7f12_3400_0000,
                    stack_id: 7,
                },
            ),
            ev(
                1_000_000_710,
                4250,
                4250,
                EventKind::Rmap {
                    member: RssMember::Anon,
                    pages: -8192,
                    addr: 0x7f12_3400_0000,
                },
            ),
            ev(
                1_000_000_720,
                4250,
                4250,
                EventKind::Rmap {
                    member: RssMember::Shmem,
                    pages: i32::MAX,
                    addr: u64::MAX,
                },
            ),
            ev(
                1_000_000_800,
                4250,
                4250,
                EventKind::Lost(Lost {
                    cause: "ring_full".into(),
                    total: 3,
                }),
            ),
            ev(
                1_000_000_850,
                0,
                0,
                EventKind::Control {
                    command: ControlCommand::Bench(Bench {
                        uri: "suite::parse[ünïcödé input]".into(),
                        pid: 4250,
                    }),
                },
            ),
            ev(
                1_000_000_860,
                0,
                0,
                EventKind::Control {
                    command: ControlCommand::Marker {
                        kind: MarkerKind::RoundEnd,
                    },
                },
            ),
            ev(
                1_000_000_870,
                4250,
                0,
                EventKind::Module(Module {
                    id: 1,
                    path: "/usr/lib/x86_64-linux-gnu/libc.so.6".into(),
                    build_id: vec![0x8f, 0x2e, 0x01],
                    dev: 0xfe01,
                    ino: 1_234_567,
                }),
            ),
            ev(
                1_000_000_871,
                0,
                0,
                EventKind::StackNode {
                    id: 1,
                    parent: 0,
                    module: 1,
                    offset: 0x2_9d8f,
                },
            ),
            ev(
                1_000_000_872,
                4250,
                4250,
                EventKind::Alloc {
                    func: AllocFunc::Malloc,
                    addr: 0x5555_5555_9300,
                    size: 48,
                    stack_id: 1,
                },
            ),
            ev(
                1_000_000_880,
                0,
                0,
                EventKind::Symbol(Symbol {
                    module: 1,
                    offset: 0x2_9d8f,
                    frames: vec![crate::format::SymbolFrame {
                        function: "__libc_start_call_main".into(),
                        file: "../sysdeps/nptl/libc_start_call_main.h".into(),
                        line: 58,
                    }],
                }),
            ),
            ev(
                1_000_000_881,
                0,
                0,
                EventKind::StackStats(StackWalks {
                    walks: 1,
                    ..StackWalks::default()
                }),
            ),
            ev(
                1_000_000_890,
                4250,
                4251,
                EventKind::LeakScan(crate::format::LeakScan {
                    failure: String::new(),
                    threads: 2,
                    registers: 2,
                    lost_blocks: 2,
                    lost_bytes: 300,
                    reachable_blocks: 1,
                    reachable_bytes: 7,
                    scanned_bytes: 1 << 20,
                    duration_ns: 12345,
                    lost: vec![0x5555_0000_1000, 0x5555_0000_2000],
                }),
            ),
            ev(
                1_000_000_900,
                4250,
                4250,
                EventKind::Exit {
                    status: (1 << 8) | 9,
                },
            ),
            ev(
                0,
                0,
                0,
                EventKind::Free {
                    func: AllocFunc::Free,
                    addr: 1,
                },
            ),
        ]
    }

    /// A written recording and, per chunk, (file offset where it ends, events up to its end).
    struct Recording {
        bytes: Vec<u8>,
        chunk_ends: Vec<(u64, usize)>,
        header_end: u64,
    }

    impl Recording {
        /// Per chunk: (file offset of its frame, offset after it, its events' range).
        fn chunks(&self) -> Vec<(u64, u64, std::ops::Range<usize>)> {
            let mut start = (self.header_end, 0);
            self.chunk_ends
                .iter()
                .map(|&(end, n)| {
                    let c = (start.0, end, start.1..n);
                    start = (end, n);
                    c
                })
                .collect()
        }

        /// Where the trailer frame starts.
        fn trailer_start(&self) -> u64 {
            self.chunk_ends.last().map_or(self.header_end, |c| c.0)
        }

        /// The events a reader must yield around `skipped` ranges and before `end`'s damage:
        /// those of every chunk that lies wholly outside both.
        fn expected(&self, events: &[Event], skipped: &[Skipped], end: &ReadEnd) -> Vec<Event> {
            let stop = match end {
                ReadEnd::Damaged { offset, .. } => *offset,
                ReadEnd::Complete(_) => u64::MAX,
            };
            self.chunks()
                .into_iter()
                .filter(|(start, end, _)| {
                    *end <= stop
                        && skipped.iter().all(|k| {
                            k.offset_bytes + k.size_bytes <= *start || k.offset_bytes >= *end
                        })
                })
                .flat_map(|(_, _, range)| events[range].to_vec())
                .collect()
        }

        /// Events yielded before damage at `offset` (a frame start): those of earlier chunks.
        fn events_before(&self, offset: u64) -> usize {
            self.chunk_ends
                .iter()
                .take_while(|(end, _)| *end <= offset)
                .last()
                .map_or(0, |&(_, n)| n)
        }
    }

    /// Writes `events`, closing a chunk after every `per_chunk` events.
    fn record(events: &[Event], per_chunk: usize) -> Recording {
        let mut w = Writer::new(Vec::new(), &full_header()).unwrap();
        let header_end = w.bytes_written();
        let mut chunk_ends = Vec::new();
        for (i, e) in events.iter().enumerate() {
            w.push(e).unwrap();
            if (i + 1) % per_chunk == 0 {
                w.flush_chunk().unwrap();
                chunk_ends.push((w.bytes_written(), i + 1));
            }
        }
        w.flush_chunk().unwrap();
        if chunk_ends.last().map(|c| c.1) != Some(events.len()) && !events.is_empty() {
            chunk_ends.push((w.bytes_written(), events.len()));
        }
        let bytes = w.finish(&full_trailer()).unwrap();
        Recording {
            bytes,
            chunk_ends,
            header_end,
        }
    }

    fn read_all(bytes: &[u8]) -> Result<(Vec<Event>, ReadEnd), FormatError> {
        read_skipping(bytes).map(|(events, _, end)| (events, end))
    }

    /// Reads `bytes` to the end: the events, the skipped ranges and how reading ended.
    fn read_skipping(bytes: &[u8]) -> Result<(Vec<Event>, Vec<Skipped>, ReadEnd), FormatError> {
        let mut r = Reader::new(bytes)?;
        let events: Vec<Event> = r.by_ref().collect();
        let end = r.end().cloned().expect("end is known after None");
        // Iteration stays ended.
        assert!(r.next().is_none());
        Ok((events, r.skipped().to_vec(), end))
    }

    fn damaged_offset(end: &ReadEnd) -> u64 {
        match end {
            ReadEnd::Damaged { offset, .. } => *offset,
            ReadEnd::Complete(_) => panic!("expected damage, got {end:?}"),
        }
    }

    fn reason(end: &ReadEnd) -> &str {
        match end {
            ReadEnd::Damaged { reason, .. } => reason,
            ReadEnd::Complete(_) => panic!("expected damage, got {end:?}"),
        }
    }

    use crate::xorshift::XorShift;

    /// `n` malloc/free-like events from a few threads, for the damage tests.
    fn busy_events(n: usize) -> Vec<Event> {
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        (0..n)
            .map(|i| {
                let tid = 100 + rng.below(3) as u32;
                let addr = 0x5555_0000_0000 + rng.below(64) * 80;
                let kind = if i % 2 == 0 {
                    EventKind::Alloc {
                        func: AllocFunc::Malloc,
                        addr,
                        size: 64,
                        stack_id: 0,
                    }
                } else {
                    EventKind::Free {
                        func: AllocFunc::Free,
                        addr,
                    }
                };
                ev(1_000 + i as u64 * 3_000, 100, tid, kind)
            })
            .collect()
    }

    #[test]
    fn every_kind_round_trips() {
        let events = every_kind();
        let rec = record(&events, usize::MAX);
        let (read, end) = read_all(&rec.bytes).unwrap();
        assert_eq!(read, events);
        let expected = Trailer {
            events: events.len() as u64,
            chunks: 1,
            ..full_trailer()
        };
        assert_eq!(end, ReadEnd::Complete(expected));
    }

    #[test]
    fn every_kind_round_trips_one_event_per_chunk() {
        let events = every_kind();
        let rec = record(&events, 1);
        let (read, end) = read_all(&rec.bytes).unwrap();
        assert_eq!(read, events);
        assert!(matches!(end, ReadEnd::Complete(t) if t.chunks == events.len() as u64));
    }

    #[test]
    fn header_round_trips() {
        let rec = record(&every_kind(), 4);
        let r = Reader::new(&rec.bytes[..]).unwrap();
        assert_eq!(r.header(), &full_header());
        assert_eq!(r.offset(), rec.header_end);
        assert!(r.end().is_none());
    }

    #[test]
    fn empty_recording_is_complete() {
        let rec = record(&[], 1);
        let (read, end) = read_all(&rec.bytes).unwrap();
        assert!(read.is_empty());
        assert!(matches!(end, ReadEnd::Complete(t) if t.events == 0 && t.chunks == 0));
    }

    #[test]
    fn many_chunks_keep_order_and_values() {
        let events = busy_events(50_000);
        let mut w = Writer::new(Vec::new(), &full_header()).unwrap();
        for e in &events {
            w.push(e).unwrap();
        }
        let bytes = w.finish(&full_trailer()).unwrap();
        let mut r = Reader::new(&bytes[..]).unwrap();
        let mut n = 0;
        for (got, want) in r.by_ref().zip(&events) {
            assert_eq!(&got, want, "event {n}");
            n += 1;
        }
        assert_eq!(n, events.len());
        assert!(r.next().is_none());
        match r.end() {
            Some(ReadEnd::Complete(t)) => assert!(t.chunks > 1, "{t:?}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(r.offset(), bytes.len() as u64);
        // Streaming: the buffer holds one chunk, however long the file.
        assert!(r.payload.capacity() <= 2 * crate::format::CHUNK_TARGET_BYTES);
    }

    /// The simulated heap of one thread: recently freed blocks are reused first (like glibc's
    /// tcache), new ones come from the top of the thread's arena.
    struct SimThread {
        tid: u32,
        top: u64,
        free_list: Vec<u64>,
        live: Vec<u64>,
    }

    /// Bytes per event of 100,000 malloc(64)+free pairs from `threads`, whose turn to run is
    /// random per event (the worst case for the thread and address state).
    fn bytes_per_event(threads: usize) -> f64 {
        let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
        let bases = [0x5555_5556_a2a0u64, 0x7f3a_2400_0b70];
        let mut sim: Vec<SimThread> = (0..threads)
            .map(|i| SimThread {
                tid: 31_337 + i as u32,
                top: bases[i % 2] + i as u64 * 0x100_0000,
                free_list: Vec::new(),
                live: Vec::new(),
            })
            .collect();
        let mut w = Writer::new(Vec::new(), &full_header()).unwrap();
        let (mut mallocs, mut frees) = (0u32, 0u32);
        let mut ts = 5_000_000_000_000u64;
        while frees < 100_000 {
            let t = &mut sim[rng.below(threads as u64) as usize];
            ts += 2_500 + rng.below(1_000);
            // Events from different CPUs arrive slightly out of order.
            let ts_ns = ts - if rng.below(4) == 0 { rng.below(800) } else { 0 };
            let want_malloc = mallocs < 100_000 && (t.live.is_empty() || rng.below(2) == 0);
            let kind = if want_malloc && t.live.len() < 8 {
                let addr = t.free_list.pop().unwrap_or_else(|| {
                    t.top += 80;
                    t.top
                });
                t.live.push(addr);
                mallocs += 1;
                EventKind::Alloc {
                    func: AllocFunc::Malloc,
                    addr,
                    size: 64,
                    stack_id: 0,
                }
            } else if !t.live.is_empty() {
                let addr = t.live.swap_remove(rng.below(t.live.len() as u64) as usize);
                t.free_list.push(addr);
                frees += 1;
                EventKind::Free {
                    func: AllocFunc::Free,
                    addr,
                }
            } else {
                continue;
            };
            w.push(&ev(ts_ns, 31_337, t.tid, kind)).unwrap();
        }
        let events = w.events_written();
        assert_eq!(events, 200_000);
        let bytes = w.finish(&full_trailer()).unwrap();
        let (read, end) = read_all(&bytes).unwrap();
        assert_eq!(read.len() as u64, events);
        assert!(matches!(end, ReadEnd::Complete(_)));
        bytes.len() as f64 / events as f64
    }

    #[test]
    fn malloc_free_stream_is_compact() {
        let two = bytes_per_event(2);
        let one = bytes_per_event(1);
        println!("bytes per event: {two:.2} (2 threads interleaved), {one:.2} (1 thread)");
        assert!(two <= 8.0, "{two:.2} bytes per event");
        assert!(one <= two);
    }

    #[test]
    fn truncation_at_every_offset() {
        let events = every_kind();
        let rec = record(&events, 3);
        let len = rec.bytes.len();
        for cut in 0..=len {
            let bytes = &rec.bytes[..cut];
            let Ok((read, end)) = read_all(bytes) else {
                assert!((cut as u64) < rec.header_end, "cut {cut}: header was whole");
                continue;
            };
            assert!(cut as u64 >= rec.header_end, "cut {cut}: header accepted");
            if cut == len {
                assert!(matches!(end, ReadEnd::Complete(_)), "{end:?}");
                assert_eq!(read, events);
                continue;
            }
            let offset = damaged_offset(&end);
            assert!(offset <= cut as u64, "cut {cut}: {end:?}");
            assert_eq!(
                read.len(),
                rec.events_before(cut as u64),
                "cut {cut}: {end:?}"
            );
            assert_eq!(read[..], events[..read.len()], "cut {cut}");
        }
    }

    #[test]
    fn cut_at_chunk_boundary_says_cut_short() {
        let rec = record(&every_kind(), 3);
        let (cut, n) = rec.chunk_ends[1];
        let (read, end) = read_all(&rec.bytes[..cut as usize]).unwrap();
        assert_eq!(read.len(), n);
        assert_eq!(
            end,
            ReadEnd::Damaged {
                offset: cut,
                reason: "the file ends without a trailer (the recording was cut short)".to_string(),
            }
        );
    }

    #[test]
    fn random_byte_flips_never_pass_or_panic() {
        let events = busy_events(400);
        let rec = record(&events, 37);
        let mut rng = XorShift(0x1234_5678_9abc_def1);
        for case in 0..4000 {
            let mut bytes = rec.bytes.clone();
            let at = rng.below(bytes.len() as u64) as usize;
            let mask = 1 + rng.below(255) as u8;
            bytes[at] ^= mask;
            // A second flip in a fifth of the cases.
            if case % 5 == 0 {
                let at2 = rng.below(bytes.len() as u64) as usize;
                bytes[at2] ^= 1 + rng.below(255) as u8;
            }
            match read_skipping(&bytes) {
                Err(_) => assert!((at as u64) < rec.header_end || case % 5 == 0),
                Ok((read, skipped, end)) => {
                    // Every chunk clear of the damage is read, whatever came before it.
                    assert_eq!(read, rec.expected(&events, &skipped, &end), "case {case}");
                    if case % 5 != 0 {
                        assert!(skipped.len() <= 1, "case {case}: {skipped:?}");
                        if let ReadEnd::Damaged { offset, .. } = end {
                            assert!(offset <= at as u64, "case {case} at {at}: {end:?}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn every_single_byte_flip_is_caught() {
        let events = every_kind();
        let rec = record(&events, 4);
        let chunks = rec.chunks();
        for at in 0..rec.bytes.len() {
            let mut bytes = rec.bytes.clone();
            bytes[at] ^= 0x01;
            let at = at as u64;
            match read_skipping(&bytes) {
                Err(_) => assert!(at < rec.header_end, "byte {at}"),
                // The version field, which no checksum covers: version 3 with its low bit
                // flipped is version 2, which the same decoder reads (format/mod.rs).
                Ok((read, skipped, _)) if (8..10).contains(&at) => {
                    assert_eq!(read, events, "byte {at}");
                    assert!(skipped.is_empty(), "byte {at}: {skipped:?}");
                }
                Ok((read, skipped, end)) if at >= rec.trailer_start() => {
                    assert_eq!(read, events, "byte {at}");
                    assert!(skipped.is_empty(), "byte {at}: {skipped:?}");
                    assert_eq!(damaged_offset(&end), rec.trailer_start(), "byte {at}");
                }
                Ok((read, skipped, end)) => {
                    // Exactly the chunk holding the flipped byte is skipped.
                    let (start, stop, range) = chunks
                        .iter()
                        .find(|(s, e, _)| (*s..*e).contains(&at))
                        .cloned()
                        .unwrap();
                    assert_eq!(skipped.len(), 1, "byte {at}: {skipped:?}");
                    assert_eq!(
                        (skipped[0].offset_bytes, skipped[0].size_bytes),
                        (start, stop - start),
                        "byte {at}"
                    );
                    let mut expected = events[..range.start].to_vec();
                    expected.extend_from_slice(&events[range.end..]);
                    assert_eq!(read, expected, "byte {at}");
                    assert!(matches!(end, ReadEnd::Complete(_)), "byte {at}: {end:?}");
                }
            }
        }
    }

    #[test]
    fn corrupt_chunk_in_the_middle_is_skipped_and_the_rest_read() {
        let events = busy_events(5_000);
        let rec = record(&events, 500);
        let chunks = rec.chunks();
        let (start, stop, range) = chunks[4].clone();
        let mut bytes = rec.bytes.clone();
        bytes[(start + stop) as usize / 2] ^= 0x5a;
        let (read, skipped, end) = read_skipping(&bytes).unwrap();
        assert_eq!(
            skipped,
            vec![Skipped {
                offset_bytes: start,
                size_bytes: stop - start,
                reason: format!(
                    "damaged frame: {}",
                    skipped[0].reason.split_once(": ").unwrap().1
                ),
            }]
        );
        assert!(
            skipped[0].reason.contains("checksum mismatch"),
            "{skipped:?}"
        );
        assert_eq!(read.len(), events.len() - range.len());
        assert_eq!(read[..range.start], events[..range.start]);
        assert_eq!(read[range.start..], events[range.end..]);
        assert!(
            matches!(&end, ReadEnd::Complete(t) if t.events == 5_000),
            "{end:?}"
        );
    }

    #[test]
    fn garbage_between_chunks_is_skipped_and_nothing_lost() {
        let events = busy_events(2_000);
        let rec = record(&events, 500);
        let at = rec.chunk_ends[1].0 as usize;
        let mut bytes = rec.bytes[..at].to_vec();
        // Stray tag bytes and a plausible head among them must not fool the scan.
        let garbage: Vec<u8> = (0..3000u32)
            .map(|i| [b'C', b'T', 0, 7][i as usize % 4])
            .collect();
        bytes.extend_from_slice(&garbage);
        bytes.extend_from_slice(&rec.bytes[at..]);
        let (read, skipped, end) = read_skipping(&bytes).unwrap();
        assert_eq!(read, events);
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert_eq!(
            (skipped[0].offset_bytes, skipped[0].size_bytes),
            (at as u64, 3000)
        );
        assert!(matches!(end, ReadEnd::Complete(_)), "{end:?}");
    }

    #[test]
    fn length_that_swallows_the_rest_is_skipped() {
        let events = busy_events(2_000);
        let rec = record(&events, 500);
        let chunks = rec.chunks();
        let (start, stop, range) = chunks[1].clone();
        let mut bytes = rec.bytes.clone();
        // Longer than the rest of the file, within the limit: the payload read runs to the end.
        let len = (bytes.len() as u32) * 2;
        bytes[start as usize + 1..start as usize + 5].copy_from_slice(&len.to_le_bytes());
        let (read, skipped, end) = read_skipping(&bytes).unwrap();
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert_eq!(
            (skipped[0].offset_bytes, skipped[0].size_bytes),
            (start, stop - start)
        );
        assert!(skipped[0].reason.contains("the file ends"), "{skipped:?}");
        assert_eq!(read.len(), events.len() - range.len());
        assert_eq!(read[range.start..], events[range.end..]);
        assert!(matches!(end, ReadEnd::Complete(_)), "{end:?}");
    }

    #[test]
    fn damage_with_nothing_intact_after_it_ends_reading() {
        let events = busy_events(2_000);
        let rec = record(&events, 500);
        let chunks = rec.chunks();
        let (start, _, range) = chunks[2].clone();
        let mut bytes = rec.bytes[..rec.trailer_start() as usize].to_vec();
        for b in &mut bytes[start as usize + 20..] {
            *b ^= 0xff;
        }
        let (read, skipped, end) = read_skipping(&bytes).unwrap();
        assert_eq!(read, events[..range.start]);
        assert!(skipped.is_empty(), "{skipped:?}");
        assert_eq!(damaged_offset(&end), start);
        assert!(
            reason(&end).contains("no intact chunk or trailer after it"),
            "{end:?}"
        );
    }

    #[test]
    fn duplicated_chunk_yields_it_twice_then_counts_disagree() {
        let events = every_kind();
        let rec = record(&events, 4);
        let (first_end, n1) = rec.chunk_ends[0];
        let (second_end, n2) = rec.chunk_ends[1];
        let chunk = &rec.bytes[first_end as usize..second_end as usize];
        let mut bytes = rec.bytes[..second_end as usize].to_vec();
        bytes.extend_from_slice(chunk);
        bytes.extend_from_slice(&rec.bytes[second_end as usize..]);
        let (read, end) = read_all(&bytes).unwrap();
        let mut expected = events[..n2].to_vec();
        expected.extend_from_slice(&events[n1..n2]);
        expected.extend_from_slice(&events[n2..]);
        assert_eq!(read, expected);
        let says = format!(
            "says {} events in {} chunks",
            events.len(),
            rec.chunk_ends.len()
        );
        assert!(reason(&end).contains(&says), "{end:?}");
    }

    #[test]
    fn data_after_trailer_is_damage() {
        let mut bytes = record(&every_kind(), 4).bytes;
        let len = bytes.len() as u64;
        bytes.push(0);
        let (read, end) = read_all(&bytes).unwrap();
        assert_eq!(read, every_kind());
        assert_eq!(damaged_offset(&end), len);
    }

    #[test]
    fn bad_magic_names_what_was_found() {
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
        let err = Reader::new(&png[..]).err().unwrap();
        assert!(matches!(err, FormatError::NotMemtrack { .. }));
        assert!(
            err.to_string()
                .starts_with("not a memtrack recording (starts with 89 50 4e 47"),
            "{err}"
        );
    }

    #[test]
    fn newer_version_names_both_versions() {
        let mut bytes = record(&every_kind(), 4).bytes;
        bytes[8..10].copy_from_slice(&8u16.to_le_bytes());
        let err = Reader::new(&bytes[..]).err().unwrap();
        assert!(matches!(err, FormatError::UnsupportedVersion { found: 8 }));
        assert_eq!(
            err.to_string(),
            "format version 8 is newer than this memtrack reads (7); upgrade memtrack"
        );
    }

    #[test]
    fn version_zero_is_refused() {
        let mut bytes = record(&[], 1).bytes;
        bytes[8..10].copy_from_slice(&[0, 0]);
        let err = Reader::new(&bytes[..]).err().unwrap();
        assert!(matches!(err, FormatError::UnsupportedVersion { found: 0 }));
    }

    #[test]
    fn empty_file_is_not_a_recording() {
        let err = Reader::new(&[][..]).err().unwrap();
        assert!(matches!(&err, FormatError::NotMemtrack { found } if found.is_empty()));
    }

    #[test]
    fn only_magic_is_truncated() {
        let err = Reader::new(&b"MEMTRACK"[..]).err().unwrap();
        assert!(matches!(
            err,
            FormatError::Truncated {
                offset: 8,
                what: "the format version"
            }
        ));
    }

    #[test]
    fn part_of_magic_is_truncated() {
        let err = Reader::new(&b"MEMT"[..]).err().unwrap();
        assert!(
            matches!(err, FormatError::Truncated { offset: 4, .. }),
            "{err}"
        );
    }

    #[test]
    fn magic_and_version_without_header_is_truncated() {
        let err = Reader::new(&b"MEMTRACK\x01\x00"[..]).err().unwrap();
        assert!(matches!(
            err,
            FormatError::Truncated {
                offset: 10,
                what: "the header"
            }
        ));
    }

    #[test]
    fn chunk_where_header_belongs_is_bad_header() {
        let rec = record(&every_kind(), 4);
        let mut bytes = rec.bytes.clone();
        bytes[10] = TAG_CHUNK;
        let err = Reader::new(&bytes[..]).err().unwrap();
        assert!(
            matches!(err, FormatError::BadHeader { offset: 10, .. }),
            "{err}"
        );
    }

    /// A recording whose second chunk is `payload` with `count` events, correctly framed.
    fn with_crafted_chunk(payload: &[u8], count: u32) -> (Vec<u8>, usize, u64) {
        use crate::format::chunk::{write_frame, FrameHead};
        let events = every_kind();
        let rec = record(&events, 4);
        let (first_end, n) = rec.chunk_ends[0];
        let mut bytes = rec.bytes[..first_end as usize].to_vec();
        let head = FrameHead::for_payload(TAG_CHUNK, count, payload);
        write_frame(&mut bytes, head, payload).unwrap();
        (bytes, n, first_end)
    }

    #[test]
    fn undecodable_chunk_with_good_checksum_is_skipped() {
        // Thread 1/1, then an Alloc with allocator function 99.
        let (bytes, n, start) = with_crafted_chunk(&[0, 1, 1, 4, 0, 99, 0, 0, 0], 1);
        let (read, skipped, end) = read_skipping(&bytes).unwrap();
        assert_eq!(read.len(), n);
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert_eq!(skipped[0].offset_bytes, start);
        assert_eq!(skipped[0].size_bytes, bytes.len() as u64 - start);
        assert!(
            skipped[0]
                .reason
                .contains("unknown allocator function number 99"),
            "{skipped:?}"
        );
        // The crafted chunk was the last frame: the file then ends without a trailer.
        assert_eq!(damaged_offset(&end), bytes.len() as u64);
    }

    #[test]
    fn chunk_with_fewer_events_than_claimed_is_skipped() {
        // Thread 1/1, one Free.
        let (bytes, n, start) = with_crafted_chunk(&[0, 1, 1, 3, 0, 0], 2);
        let (read, skipped, _) = read_skipping(&bytes).unwrap();
        assert_eq!(read.len(), n + 1);
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert_eq!(skipped[0].offset_bytes, start);
        assert!(skipped[0].reason.contains("event 2 of 2"), "{skipped:?}");
    }

    #[test]
    fn chunk_with_more_records_than_claimed_is_skipped() {
        let (bytes, n, start) = with_crafted_chunk(&[0, 1, 1, 3, 0, 0, 3, 0, 0], 1);
        let (read, skipped, _) = read_skipping(&bytes).unwrap();
        assert_eq!(read.len(), n + 1);
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert_eq!(skipped[0].offset_bytes, start);
        assert!(skipped[0].reason.contains("3 bytes left"), "{skipped:?}");
    }

    #[test]
    fn absurd_chunk_length_is_skipped() {
        let events = every_kind();
        let rec = record(&events, 4);
        let chunks = rec.chunks();
        let (start, stop, range) = chunks[1].clone();
        let mut bytes = rec.bytes.clone();
        let at = start as usize + 1;
        bytes[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let (read, skipped, end) = read_skipping(&bytes).unwrap();
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert_eq!(
            (skipped[0].offset_bytes, skipped[0].size_bytes),
            (start, stop - start)
        );
        assert!(skipped[0].reason.contains("more than"), "{skipped:?}");
        let mut expected = events[..range.start].to_vec();
        expected.extend_from_slice(&events[range.end..]);
        assert_eq!(read, expected);
        assert!(matches!(end, ReadEnd::Complete(_)), "{end:?}");
    }

    #[test]
    fn unreadable_source_ends_with_damage() {
        /// Yields `data`, then fails.
        struct Failing<'a>(&'a [u8]);
        impl Read for Failing<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                if self.0.is_empty() {
                    return Err(std::io::Error::other("device gone"));
                }
                let n = buf.len().min(self.0.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let rec = record(&every_kind(), 4);
        let (first_end, n) = rec.chunk_ends[0];
        let mut r = Reader::new(Failing(&rec.bytes[..first_end as usize])).unwrap();
        assert_eq!(r.by_ref().count(), n);
        let end = r.end().unwrap();
        assert!(reason(end).contains("device gone"), "{end:?}");
    }

    #[test]
    fn open_missing_file_is_io_error_with_path() {
        let path = Path::new("/nonexistent/memtrack-test.mt");
        match Reader::open(path) {
            Err(FileError {
                path: p,
                error: FormatError::Io(_),
            }) => assert_eq!(p, path),
            Err(e) => panic!("expected Io, got {e:?}"),
            Ok(_) => panic!("opened a missing file"),
        }
    }

    #[test]
    fn open_bad_file_is_bad_file_with_path() {
        let path = std::env::temp_dir().join(format!("memtrack-bad-{}.mt", std::process::id()));
        std::fs::write(&path, b"\x89PNG\r\n\x1a\n").unwrap();
        let result = Reader::open(&path);
        std::fs::remove_file(&path).unwrap();
        match result {
            Err(FileError {
                path: p,
                error: error @ FormatError::NotMemtrack { .. },
            }) => {
                assert_eq!(p, path);
                assert!(error.to_string().contains("not a memtrack recording"));
            }
            Err(e) => panic!("expected NotMemtrack, got {e:?}"),
            Ok(_) => panic!("opened a PNG"),
        }
    }

    #[test]
    fn open_refuses_a_file_its_recorder_still_writes() {
        let path = std::env::temp_dir().join(format!("memtrack-live-{}.mt", std::process::id()));
        let file = File::create(&path).unwrap();
        assert!(crate::sys::lock::try_lock_exclusive(&file).unwrap());
        let mut w = Writer::new(file, &full_header()).unwrap();
        w.flush_chunk().unwrap();
        match Reader::open(&path) {
            Err(e) => {
                assert!(matches!(e.error, FormatError::StillBeingWritten), "{e:?}");
                assert_eq!(
                    e.to_string(),
                    format!("{}: {STILL_BEING_WRITTEN}", path.display())
                );
            }
            Ok(_) => panic!("read a file still being written"),
        }
        // Once the recorder is gone (finished or killed), the same bytes read as cut short.
        drop(w);
        let mut r = Reader::open(&path).unwrap();
        assert_eq!(r.by_ref().count(), 0);
        assert!(reason(r.end().unwrap()).contains("without a trailer"));
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn open_reads_a_written_file() {
        let path = std::env::temp_dir().join(format!("memtrack-ok-{}.mt", std::process::id()));
        let file = File::create(&path).unwrap();
        let mut w = Writer::new(file, &full_header()).unwrap();
        for e in every_kind() {
            w.push(&e).unwrap();
        }
        w.finish(&full_trailer()).unwrap();
        let mut r = Reader::open(&path).unwrap();
        let events: Vec<Event> = r.by_ref().collect();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(events, every_kind());
        assert!(matches!(r.end(), Some(ReadEnd::Complete(_))));
    }

    /// Decoding speed, for the report's 20 million events per second bar:
    /// `cargo test --release -- --ignored --nocapture decode_speed`.
    #[test]
    #[ignore]
    fn decode_speed() {
        let events = busy_events(2_000_000);
        let mut w = Writer::new(Vec::new(), &full_header()).unwrap();
        let t = std::time::Instant::now();
        for e in &events {
            w.push(e).unwrap();
        }
        let encode = t.elapsed();
        let bytes = w.finish(&full_trailer()).unwrap();
        let t = std::time::Instant::now();
        let n = Reader::new(&bytes[..]).unwrap().count();
        let decode = t.elapsed();
        assert_eq!(n, events.len());
        let rate = |d: std::time::Duration| n as f64 / d.as_secs_f64() / 1e6;
        println!(
            "encode {:.1} M events/s, decode {:.1} M events/s, {:.2} bytes/event",
            rate(encode),
            rate(decode),
            bytes.len() as f64 / n as f64
        );
    }

    /// A small format version 1 recording, byte for byte: magic, version, header, a chunk of three
    /// events from two threads, a chunk of two, the trailer. It must always read, and the writer
    /// must keep producing exactly it; if an intended change breaks the second test, the format
    /// changed and needs a new version (keep this sample, and add a sample of the new version).
    const V1_SAMPLE: &[u8] = &[
        0x4d, 0x45, 0x4d, 0x54, 0x52, 0x41, 0x43, 0x4b, 0x01, 0x00, 0x48, 0x24, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x34, 0xcd, 0xcf, 0x3b, 0x05, 0x30, 0x2e, 0x31, 0x2e, 0x30, 0x05,
        0x36, 0x2e, 0x38, 0x2e, 0x30, 0x01, 0x68, 0x80, 0x20, 0x01, 0x03, 0x2e, 0x2f, 0x61, 0x64,
        0xe8, 0x07, 0xd0, 0x0f, 0x80, 0x80, 0x40, 0x01, 0x05, 0x61, 0x6c, 0x6c, 0x6f, 0x63, 0x43,
        0x21, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x22, 0xf5, 0xf4, 0x64, 0x00, 0x64, 0x64,
        0x02, 0xb8, 0x17, 0x80, 0xc0, 0x80, 0x80, 0xa0, 0xd5, 0x2a, 0x40, 0x00, 0x64, 0x65, 0x03,
        0xc7, 0x01, 0xa0, 0x80, 0x80, 0x80, 0x80, 0xc0, 0x3f, 0x01, 0x00, 0x03, 0x90, 0x03, 0x00,
        0x43, 0x0e, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0xa5, 0x4d, 0xe4, 0xa8, 0x00, 0x64,
        0x64, 0x0b, 0xc8, 0x1a, 0x01, 0x00, 0x03, 0x18, 0x0a, 0xc8, 0x01, 0x00, 0x54, 0x11, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xfd, 0x5e, 0x5e, 0x2e, 0xec, 0x0e, 0x05, 0x02, 0x01,
        0x09, 0x72, 0x69, 0x6e, 0x67, 0x5f, 0x66, 0x75, 0x6c, 0x6c, 0x01, 0x00,
    ];

    fn v1_header() -> Header {
        Header {
            memtrack_version: "0.1.0".into(),
            kernel_release: "6.8.0".into(),
            hostname: "h".into(),
            page_size_bytes: 4096,
            argv: vec!["./a".into()],
            root_pid: 100,
            start_monotonic_ns: 1_000,
            start_wall_ns: 2_000,
            ring_size_bytes: 1 << 20,
            features: vec!["alloc".into()],
        }
    }

    /// The sample's chunks of events.
    fn v1_chunks() -> [Vec<Event>; 2] {
        [
            vec![
                ev(
                    1_500,
                    100,
                    100,
                    EventKind::Alloc {
                        func: AllocFunc::Malloc,
                        addr: 0x5555_0000_1000,
                        size: 64,
                        stack_id: 0,
                    },
                ),
                ev(
                    1_400,
                    100,
                    101,
                    EventKind::Free {
                        func: AllocFunc::Free,
                        addr: 0x7f00_0000_0010,
                    },
                ),
                ev(
                    1_600,
                    100,
                    100,
                    EventKind::Free {
                        func: AllocFunc::Free,
                        addr: 0x5555_0000_1000,
                    },
                ),
            ],
            vec![
                ev(
                    1_700,
                    100,
                    100,
                    EventKind::Rss {
                        member: RssMember::Anon,
                        delta_pages: -2,
                        value_pages: 10,
                        by_owner: false,
                    },
                ),
                ev(1_800, 100, 100, EventKind::Exit { status: 0 }),
            ],
        ]
    }

    fn v1_trailer() -> Trailer {
        Trailer {
            end_monotonic_ns: 1_900,
            events: 5,
            chunks: 2,
            lost: vec![LostCount {
                cause: "ring_full".into(),
                count: 1,
            }],
            exit_code: 0,
        }
    }

    #[test]
    fn format_v1_sample_reads() {
        let mut r = Reader::new(V1_SAMPLE).unwrap();
        assert_eq!(r.header(), &v1_header());
        let events: Vec<Event> = r.by_ref().collect();
        assert_eq!(events, v1_chunks().concat());
        assert_eq!(r.end(), Some(&ReadEnd::Complete(v1_trailer())));
    }

    #[test]
    fn format_v1_sample_reads_as_version_1() {
        assert_eq!(Reader::new(V1_SAMPLE).unwrap().format_version(), 1);
    }

    /// Versions 2 and 3 only appended record variants and function numbers: the same events
    /// written today differ from the version 1 sample in the version field alone (the checksums
    /// do not cover it).
    #[test]
    fn format_v1_sample_is_what_the_writer_writes_but_the_version() {
        let mut w = Writer::new(Vec::new(), &v1_header()).unwrap();
        for chunk in v1_chunks() {
            for e in &chunk {
                w.push(e).unwrap();
            }
            w.flush_chunk().unwrap();
        }
        let bytes = w.finish(&v1_trailer()).unwrap();
        let mut expected = V1_SAMPLE.to_vec();
        expected[8..10].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        assert_eq!(bytes, expected);
    }
}
