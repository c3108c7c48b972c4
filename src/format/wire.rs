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
//! carries the absolute timestamp as its delta. The most frequent events, `malloc` and `free`
//! without a call stack, have variants of their own without the function byte: a malloc/free
//! stream takes 5 to 6 bytes per event.

use crate::intmap::IntMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::event::{AllocFunc, ControlCommand, Event, EventKind, MarkerKind, RssMember};

/// The most threads one chunk may introduce. The writer closes a chunk at 64 KiB of payload and
/// a `Thread` record takes at least 3 bytes, so it never gets near this; the reader refuses more,
/// which bounds its table on damaged input.
pub const MAX_THREADS_PER_CHUNK: usize = 1 << 16;

/// One record of a chunk payload, as postcard writes it: the variant number as a varint, then
/// the fields in order (unsigned integers as varints, signed ones zigzag varints, `u8` and `bool`
/// as one byte, strings as a varint length and UTF-8 bytes).
///
/// The variant number is on disk: new variants go at the end only, and existing variants never
/// move, change their fields or disappear (files of every earlier format version must stay
/// readable). A change that cannot be an appended variant needs a new `FORMAT_VERSION`; so does
/// an appended variant, so that an older reader says "upgrade memtrack" instead of "damaged"
/// (version 2 appended 18 to 21).
///
/// `dt_ns` is always the delta from the previous event of the chunk; `daddr` the delta from the
/// current thread's previous address; `func` an `AllocFunc` number.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireRecord<'a> {
    /// 0: a thread not yet seen in this chunk; it becomes current and takes the next index.
    Thread { pid: u32, tid: u32 },
    /// 1: thread number `index` of this chunk's table becomes current again.
    Switch { index: u32 },
    /// 2: `Alloc` by malloc with no stack id.
    Malloc { dt_ns: i64, daddr: i64, size: u64 },
    /// 3: `Free` by free.
    Free { dt_ns: i64, daddr: i64 },
    /// 4: any other `Alloc`.
    Alloc {
        dt_ns: i64,
        func: u8,
        daddr: i64,
        size: u64,
        stack_id: u32,
    },
    /// 5: any other `Free` (e.g. realloc to size 0).
    Release { dt_ns: i64, func: u8, daddr: i64 },
    /// 6: `Realloc`: `dold_addr` from the thread's previous address, `daddr` from `old_addr`
    /// (so an in-place resize stores 0).
    Realloc {
        dt_ns: i64,
        func: u8,
        dold_addr: i64,
        daddr: i64,
        size: u64,
        stack_id: u32,
    },
    /// 7: `AllocFailed`.
    AllocFailed { dt_ns: i64, func: u8, size: u64 },
    /// 8: `Fork`.
    Fork { dt_ns: i64, child: u32 },
    /// 9: `Exec`.
    Exec {
        dt_ns: i64,
        filename: &'a str,
        #[serde(borrow)]
        argv: Vec<&'a str>,
    },
    /// 10: `Exit`.
    Exit { dt_ns: i64, status: i32 },
    /// 11: `Rss`: `member` is an `RssMember` number; `dvalue_pages` is `value_pages` minus the
    /// thread's previous value of this member plus `delta_pages`.
    Rss {
        dt_ns: i64,
        member: u8,
        by_owner: bool,
        delta_pages: i64,
        dvalue_pages: i64,
    },
    /// 12: `Lost`.
    Lost {
        dt_ns: i64,
        cause: &'a str,
        total: u64,
    },
    /// 13: `Mmap`. Mapping addresses have a previous address of their own per thread
    /// (`prev_map_addr`), apart from the heap's, so neither spoils the other's deltas.
    Mmap {
        dt_ns: i64,
        daddr: i64,
        len: u64,
        prot: u32,
        flags: u32,
    },
    /// 14: `Munmap`: `daddr` from the thread's previous mapping address.
    Munmap { dt_ns: i64, daddr: i64, len: u64 },
    /// 15: `Mremap`: `dold_addr` from the thread's previous mapping address, `daddr` from
    /// `old_addr`.
    Mremap {
        dt_ns: i64,
        dold_addr: i64,
        old_len: u64,
        daddr: i64,
        len: u64,
    },
    /// 16: `Brk`: `dfrom` from the thread's previous mapping address, `dto` from `from`.
    Brk { dt_ns: i64, dfrom: i64, dto: i64 },
    /// 17: `Coverage`.
    Coverage {
        dt_ns: i64,
        path: &'a str,
        allocator: &'a str,
        probes: u32,
    },
    /// 18: `Control` `Start` (format version 2 on, as are the variants below).
    ControlStart { dt_ns: i64 },
    /// 19: `Control` `Stop`.
    ControlStop { dt_ns: i64 },
    /// 20: `Control` `Bench`.
    ControlBench { dt_ns: i64, uri: &'a str, pid: u32 },
    /// 21: `Control` `Marker`: `kind` is a `MarkerKind` number.
    ControlMarker { dt_ns: i64, kind: u8 },
}

/// What one thread of the chunk's table remembers, identically on both sides.
#[derive(Clone, Copy, Debug)]
struct ThreadState {
    pid: u32,
    tid: u32,
    prev_addr: u64,
    prev_map_addr: u64,
    rss_pages: [u64; RssMember::ALL.len()],
}

impl ThreadState {
    fn new(pid: u32, tid: u32) -> ThreadState {
        ThreadState {
            pid,
            tid,
            prev_addr: 0,
            prev_map_addr: 0,
            rss_pages: [0; RssMember::ALL.len()],
        }
    }
}

/// The signed step from `from` to `to`. Wrapping both ways makes every pair of u64 values
/// round-trip exactly, however far apart.
fn delta(from: u64, to: u64) -> i64 {
    to.wrapping_sub(from) as i64
}

/// The value `d` steps from `from`; the inverse of `delta`.
fn apply(from: u64, d: i64) -> u64 {
    from.wrapping_add(d as u64)
}

/// Reads a record's fields in order, each exactly as postcard reads it; every read is `None`
/// where postcard would refuse the bytes, or they end.
struct Fields<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Fields<'_> {
    /// An unsigned varint of at most `max_bytes` bytes, the last of which may hold `last_max`
    /// at most.
    fn varint(&mut self, max_bytes: usize, last_max: u8) -> Option<u64> {
        let mut out = 0u64;
        for i in 0..max_bytes {
            let b = self.u8()?;
            out |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return (i + 1 < max_bytes || b <= last_max).then_some(out);
            }
        }
        None
    }

    fn u32(&mut self) -> Option<u32> {
        self.varint(5, 0x0f).map(|v| v as u32)
    }

    fn u64(&mut self) -> Option<u64> {
        self.varint(10, 0x01)
    }

    /// Zigzag: postcard's signed integers.
    fn i64(&mut self) -> Option<i64> {
        self.u64().map(|z| (z >> 1) as i64 ^ -((z & 1) as i64))
    }

    /// The byte itself.
    fn u8(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    /// One byte, 0 or 1; postcard refuses any other.
    fn bool(&mut self) -> Option<bool> {
        match self.u8()? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }
}

/// The records of allocations and resident memory (the thread records, the allocator records
/// and `Rss`: nearly all of a recording) read by hand, with their length; `None` for any other
/// record and for anything this cannot read, which then goes through postcard. Going through
/// serde for these was a third of the reader's time. Tests hold the two to the same results.
/// Each arm lists the fields in the variant's declared order, which is postcard's: a struct
/// expression evaluates its fields in the order written.
fn take_common(bytes: &[u8]) -> Option<(WireRecord<'static>, usize)> {
    let mut f = Fields { bytes, pos: 0 };
    let rec = match f.u32()? {
        0 => WireRecord::Thread {
            pid: f.u32()?,
            tid: f.u32()?,
        },
        1 => WireRecord::Switch { index: f.u32()? },
        2 => WireRecord::Malloc {
            dt_ns: f.i64()?,
            daddr: f.i64()?,
            size: f.u64()?,
        },
        3 => WireRecord::Free {
            dt_ns: f.i64()?,
            daddr: f.i64()?,
        },
        4 => WireRecord::Alloc {
            dt_ns: f.i64()?,
            func: f.u8()?,
            daddr: f.i64()?,
            size: f.u64()?,
            stack_id: f.u32()?,
        },
        5 => WireRecord::Release {
            dt_ns: f.i64()?,
            func: f.u8()?,
            daddr: f.i64()?,
        },
        6 => WireRecord::Realloc {
            dt_ns: f.i64()?,
            func: f.u8()?,
            dold_addr: f.i64()?,
            daddr: f.i64()?,
            size: f.u64()?,
            stack_id: f.u32()?,
        },
        7 => WireRecord::AllocFailed {
            dt_ns: f.i64()?,
            func: f.u8()?,
            size: f.u64()?,
        },
        11 => WireRecord::Rss {
            dt_ns: f.i64()?,
            member: f.u8()?,
            by_owner: f.bool()?,
            delta_pages: f.i64()?,
            dvalue_pages: f.i64()?,
        },
        _ => return None,
    };
    Some((rec, f.pos))
}

/// A postcard output that appends to a caller's reusable buffer, so encoding allocates nothing
/// once the buffer has grown to a chunk's size.
struct AppendFlavor<'a>(&'a mut Vec<u8>);

impl postcard::ser_flavors::Flavor for AppendFlavor<'_> {
    type Output = ();

    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        self.0.extend_from_slice(data);
        Ok(())
    }

    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.0.push(data);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<()> {
        Ok(())
    }
}

/// Appends the postcard encoding of `value` to `out`.
pub(crate) fn append<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> postcard::Result<()> {
    postcard::serialize_with_flavor(value, AppendFlavor(out))
}

/// The writer's side of a chunk's state.
#[derive(Default)]
pub(crate) struct ChunkEncoder {
    prev_ts_ns: u64,
    /// Index of the current thread; meaningful once `threads` is not empty.
    current: usize,
    threads: Vec<ThreadState>,
    /// (pid << 32 | tid) to its index in `threads`; looked up on every thread switch.
    index: IntMap<u64, u32>,
}

impl ChunkEncoder {
    /// Forgets everything, for a new chunk (keeps the allocations).
    pub(crate) fn reset(&mut self) {
        self.prev_ts_ns = 0;
        self.current = 0;
        self.threads.clear();
        self.index.clear();
    }

    /// Appends the records for `ev` to `out`: a `Thread` or `Switch` record if the thread
    /// changed, then the event's own record.
    pub(crate) fn encode(&mut self, ev: &Event, out: &mut Vec<u8>) -> postcard::Result<()> {
        let t = self.select_thread(ev.pid, ev.tid, out)?;
        let dt_ns = delta(self.prev_ts_ns, ev.ts_ns);
        self.prev_ts_ns = ev.ts_ns;
        let th = &mut self.threads[t];
        match &ev.kind {
            &EventKind::Alloc {
                func,
                addr,
                size,
                stack_id,
            } => {
                let daddr = delta(th.prev_addr, addr);
                th.prev_addr = addr;
                if func == AllocFunc::Malloc && stack_id == 0 {
                    append(out, &WireRecord::Malloc { dt_ns, daddr, size })
                } else {
                    let func = func as u8;
                    append(
                        out,
                        &WireRecord::Alloc {
                            dt_ns,
                            func,
                            daddr,
                            size,
                            stack_id,
                        },
                    )
                }
            }
            &EventKind::Free { func, addr } => {
                let daddr = delta(th.prev_addr, addr);
                th.prev_addr = addr;
                if func == AllocFunc::Free {
                    append(out, &WireRecord::Free { dt_ns, daddr })
                } else {
                    let func = func as u8;
                    append(out, &WireRecord::Release { dt_ns, func, daddr })
                }
            }
            &EventKind::Realloc {
                func,
                old_addr,
                addr,
                size,
                stack_id,
            } => {
                let dold_addr = delta(th.prev_addr, old_addr);
                let daddr = delta(old_addr, addr);
                th.prev_addr = addr;
                let func = func as u8;
                append(
                    out,
                    &WireRecord::Realloc {
                        dt_ns,
                        func,
                        dold_addr,
                        daddr,
                        size,
                        stack_id,
                    },
                )
            }
            &EventKind::AllocFailed { func, size } => {
                let func = func as u8;
                append(out, &WireRecord::AllocFailed { dt_ns, func, size })
            }
            &EventKind::Fork { child } => append(out, &WireRecord::Fork { dt_ns, child }),
            EventKind::Exec { filename, argv } => {
                // The one allocation per event the writer makes; execs are rare.
                let argv = argv.iter().map(String::as_str).collect();
                append(
                    out,
                    &WireRecord::Exec {
                        dt_ns,
                        filename,
                        argv,
                    },
                )
            }
            &EventKind::Exit { status } => append(out, &WireRecord::Exit { dt_ns, status }),
            &EventKind::Rss {
                member,
                delta_pages,
                value_pages,
                by_owner,
            } => {
                let last = &mut th.rss_pages[member as usize];
                let dvalue_pages = delta(apply(*last, delta_pages), value_pages);
                *last = value_pages;
                append(
                    out,
                    &WireRecord::Rss {
                        dt_ns,
                        member: member as u8,
                        by_owner,
                        delta_pages,
                        dvalue_pages,
                    },
                )
            }
            EventKind::Lost { cause, total } => append(
                out,
                &WireRecord::Lost {
                    dt_ns,
                    cause,
                    total: *total,
                },
            ),
            &EventKind::Mmap {
                addr,
                len,
                prot,
                flags,
            } => {
                let daddr = delta(th.prev_map_addr, addr);
                th.prev_map_addr = addr;
                append(
                    out,
                    &WireRecord::Mmap {
                        dt_ns,
                        daddr,
                        len,
                        prot,
                        flags,
                    },
                )
            }
            &EventKind::Munmap { addr, len } => {
                let daddr = delta(th.prev_map_addr, addr);
                th.prev_map_addr = addr;
                append(out, &WireRecord::Munmap { dt_ns, daddr, len })
            }
            &EventKind::Mremap {
                old_addr,
                old_len,
                addr,
                len,
            } => {
                let dold_addr = delta(th.prev_map_addr, old_addr);
                let daddr = delta(old_addr, addr);
                th.prev_map_addr = addr;
                append(
                    out,
                    &WireRecord::Mremap {
                        dt_ns,
                        dold_addr,
                        old_len,
                        daddr,
                        len,
                    },
                )
            }
            &EventKind::Brk { from, to } => {
                let dfrom = delta(th.prev_map_addr, from);
                let dto = delta(from, to);
                th.prev_map_addr = to;
                append(out, &WireRecord::Brk { dt_ns, dfrom, dto })
            }
            EventKind::Coverage {
                path,
                allocator,
                probes,
            } => append(
                out,
                &WireRecord::Coverage {
                    dt_ns,
                    path,
                    allocator,
                    probes: *probes,
                },
            ),
            EventKind::Control { command } => match command {
                ControlCommand::Start => append(out, &WireRecord::ControlStart { dt_ns }),
                ControlCommand::Stop => append(out, &WireRecord::ControlStop { dt_ns }),
                ControlCommand::Bench { uri, pid } => append(
                    out,
                    &WireRecord::ControlBench {
                        dt_ns,
                        uri,
                        pid: *pid,
                    },
                ),
                &ControlCommand::Marker { kind } => append(
                    out,
                    &WireRecord::ControlMarker {
                        dt_ns,
                        kind: kind as u8,
                    },
                ),
            },
        }
    }

    /// Makes (pid, tid) the current thread, appending the record that says so if it was not;
    /// returns its index.
    fn select_thread(&mut self, pid: u32, tid: u32, out: &mut Vec<u8>) -> postcard::Result<usize> {
        if let Some(cur) = self.threads.get(self.current) {
            if cur.pid == pid && cur.tid == tid {
                return Ok(self.current);
            }
        }
        let key = (u64::from(pid) << 32) | u64::from(tid);
        if let Some(&index) = self.index.get(&key) {
            append(out, &WireRecord::Switch { index })?;
            self.current = index as usize;
        } else {
            append(out, &WireRecord::Thread { pid, tid })?;
            let index = self.threads.len();
            self.threads.push(ThreadState::new(pid, tid));
            // The chunk size limit keeps this far below u32::MAX (see MAX_THREADS_PER_CHUNK).
            self.index.insert(key, index as u32);
            self.current = index;
        }
        Ok(self.current)
    }
}

/// Why a chunk payload that passed its checksum still does not decode. Only a writer bug or a
/// crafted file gets here.
#[derive(Debug)]
pub(crate) enum DecodeFault {
    /// postcard could not decode a record (cut short, unknown variant, bad varint, bad UTF-8).
    Record(postcard::Error),
    /// The payload ends before the next event.
    EndOfPayload,
    /// An event record comes before any `Thread` record.
    NoThread,
    /// `Switch` to an index the table does not have.
    BadThreadIndex { index: u32, known: usize },
    /// More `Thread` records than `MAX_THREADS_PER_CHUNK`.
    TooManyThreads,
    /// An `AllocFunc` number this reader does not know.
    UnknownFunc(u8),
    /// An `RssMember` number this reader does not know.
    UnknownMember(u8),
    /// A `MarkerKind` number this reader does not know.
    UnknownMarker(u8),
}

impl fmt::Display for DecodeFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeFault::Record(e) => write!(f, "undecodable record ({e})"),
            DecodeFault::EndOfPayload => f.write_str("the payload ends before the next event"),
            DecodeFault::NoThread => f.write_str("an event before any thread record"),
            DecodeFault::BadThreadIndex { index, known } => write!(
                f,
                "switch to thread {index} but the chunk has introduced only {known}"
            ),
            DecodeFault::TooManyThreads => write!(
                f,
                "more than {MAX_THREADS_PER_CHUNK} threads introduced in one chunk"
            ),
            DecodeFault::UnknownFunc(v) => write!(f, "unknown allocator function number {v}"),
            DecodeFault::UnknownMember(v) => write!(f, "unknown resident counter number {v}"),
            DecodeFault::UnknownMarker(v) => write!(f, "unknown marker kind number {v}"),
        }
    }
}

fn func(v: u8) -> Result<AllocFunc, DecodeFault> {
    AllocFunc::from_u8(v).ok_or(DecodeFault::UnknownFunc(v))
}

/// The reader's side of a chunk's state.
#[derive(Default)]
pub(crate) struct ChunkDecoder {
    prev_ts_ns: u64,
    current: Option<usize>,
    threads: Vec<ThreadState>,
}

impl ChunkDecoder {
    /// Forgets everything, for a new chunk (keeps the allocations).
    pub(crate) fn reset(&mut self) {
        self.prev_ts_ns = 0;
        self.current = None;
        self.threads.clear();
    }

    /// Decodes records from `payload[*pos..]` up to and including the next event, and returns
    /// it with absolute values. `*pos` moves past what was decoded; on a fault it is left at the
    /// start of the offending record, for the damage report.
    pub(crate) fn next_event(
        &mut self,
        payload: &[u8],
        pos: &mut usize,
    ) -> Result<Event, DecodeFault> {
        loop {
            let rest = payload.get(*pos..).unwrap_or_default();
            if rest.is_empty() {
                return Err(DecodeFault::EndOfPayload);
            }
            let (rec, record_len) = match take_common(rest) {
                Some(common) => common,
                None => {
                    let (rec, after) = postcard::take_from_bytes::<WireRecord<'_>>(rest)
                        .map_err(DecodeFault::Record)?;
                    (rec, rest.len() - after.len())
                }
            };
            let ev = self.apply(rec)?;
            *pos += record_len;
            if let Some(ev) = ev {
                return Ok(ev);
            }
        }
    }

    /// Applies one record to the state; returns the event if it was one.
    fn apply(&mut self, rec: WireRecord<'_>) -> Result<Option<Event>, DecodeFault> {
        let (dt_ns, kind) = match rec {
            WireRecord::Thread { pid, tid } => {
                if self.threads.len() >= MAX_THREADS_PER_CHUNK {
                    return Err(DecodeFault::TooManyThreads);
                }
                self.threads.push(ThreadState::new(pid, tid));
                self.current = Some(self.threads.len() - 1);
                return Ok(None);
            }
            WireRecord::Switch { index } => {
                if index as usize >= self.threads.len() {
                    return Err(DecodeFault::BadThreadIndex {
                        index,
                        known: self.threads.len(),
                    });
                }
                self.current = Some(index as usize);
                return Ok(None);
            }
            other => {
                let th = self
                    .current
                    .and_then(|i| self.threads.get_mut(i))
                    .ok_or(DecodeFault::NoThread)?;
                event_kind(th, other)?
            }
        };
        let Some(th) = self.current.and_then(|i| self.threads.get(i)) else {
            return Err(DecodeFault::NoThread);
        };
        let ts_ns = apply(self.prev_ts_ns, dt_ns);
        self.prev_ts_ns = ts_ns;
        Ok(Some(Event {
            ts_ns,
            pid: th.pid,
            tid: th.tid,
            kind,
        }))
    }
}

/// The timestamp delta and absolute event of an event record, updating `th`'s state.
fn event_kind(th: &mut ThreadState, rec: WireRecord<'_>) -> Result<(i64, EventKind), DecodeFault> {
    Ok(match rec {
        // Handled by the caller; listed so that a new variant must be thought about here.
        WireRecord::Thread { .. } | WireRecord::Switch { .. } => {
            return Err(DecodeFault::NoThread);
        }
        WireRecord::Malloc { dt_ns, daddr, size } => {
            th.prev_addr = apply(th.prev_addr, daddr);
            let kind = EventKind::Alloc {
                func: AllocFunc::Malloc,
                addr: th.prev_addr,
                size,
                stack_id: 0,
            };
            (dt_ns, kind)
        }
        WireRecord::Free { dt_ns, daddr } => {
            th.prev_addr = apply(th.prev_addr, daddr);
            let kind = EventKind::Free {
                func: AllocFunc::Free,
                addr: th.prev_addr,
            };
            (dt_ns, kind)
        }
        WireRecord::Alloc {
            dt_ns,
            func: f,
            daddr,
            size,
            stack_id,
        } => {
            let func = func(f)?;
            th.prev_addr = apply(th.prev_addr, daddr);
            let kind = EventKind::Alloc {
                func,
                addr: th.prev_addr,
                size,
                stack_id,
            };
            (dt_ns, kind)
        }
        WireRecord::Release {
            dt_ns,
            func: f,
            daddr,
        } => {
            let func = func(f)?;
            th.prev_addr = apply(th.prev_addr, daddr);
            let kind = EventKind::Free {
                func,
                addr: th.prev_addr,
            };
            (dt_ns, kind)
        }
        WireRecord::Realloc {
            dt_ns,
            func: f,
            dold_addr,
            daddr,
            size,
            stack_id,
        } => {
            let func = func(f)?;
            let old_addr = apply(th.prev_addr, dold_addr);
            let addr = apply(old_addr, daddr);
            th.prev_addr = addr;
            let kind = EventKind::Realloc {
                func,
                old_addr,
                addr,
                size,
                stack_id,
            };
            (dt_ns, kind)
        }
        WireRecord::AllocFailed {
            dt_ns,
            func: f,
            size,
        } => (
            dt_ns,
            EventKind::AllocFailed {
                func: func(f)?,
                size,
            },
        ),
        WireRecord::Fork { dt_ns, child } => (dt_ns, EventKind::Fork { child }),
        WireRecord::Exec {
            dt_ns,
            filename,
            argv,
        } => {
            let kind = EventKind::Exec {
                filename: filename.to_owned(),
                argv: argv.into_iter().map(str::to_owned).collect(),
            };
            (dt_ns, kind)
        }
        WireRecord::Exit { dt_ns, status } => (dt_ns, EventKind::Exit { status }),
        WireRecord::Rss {
            dt_ns,
            member,
            by_owner,
            delta_pages,
            dvalue_pages,
        } => {
            let m = RssMember::from_u8(member).ok_or(DecodeFault::UnknownMember(member))?;
            let last = &mut th.rss_pages[m as usize];
            let value_pages = apply(apply(*last, delta_pages), dvalue_pages);
            *last = value_pages;
            let kind = EventKind::Rss {
                member: m,
                delta_pages,
                value_pages,
                by_owner,
            };
            (dt_ns, kind)
        }
        WireRecord::Lost {
            dt_ns,
            cause,
            total,
        } => {
            let kind = EventKind::Lost {
                cause: cause.to_owned(),
                total,
            };
            (dt_ns, kind)
        }
        WireRecord::Mmap {
            dt_ns,
            daddr,
            len,
            prot,
            flags,
        } => {
            th.prev_map_addr = apply(th.prev_map_addr, daddr);
            let kind = EventKind::Mmap {
                addr: th.prev_map_addr,
                len,
                prot,
                flags,
            };
            (dt_ns, kind)
        }
        WireRecord::Munmap { dt_ns, daddr, len } => {
            th.prev_map_addr = apply(th.prev_map_addr, daddr);
            let kind = EventKind::Munmap {
                addr: th.prev_map_addr,
                len,
            };
            (dt_ns, kind)
        }
        WireRecord::Mremap {
            dt_ns,
            dold_addr,
            old_len,
            daddr,
            len,
        } => {
            let old_addr = apply(th.prev_map_addr, dold_addr);
            let addr = apply(old_addr, daddr);
            th.prev_map_addr = addr;
            let kind = EventKind::Mremap {
                old_addr,
                old_len,
                addr,
                len,
            };
            (dt_ns, kind)
        }
        WireRecord::Brk { dt_ns, dfrom, dto } => {
            let from = apply(th.prev_map_addr, dfrom);
            let to = apply(from, dto);
            th.prev_map_addr = to;
            (dt_ns, EventKind::Brk { from, to })
        }
        WireRecord::Coverage {
            dt_ns,
            path,
            allocator,
            probes,
        } => {
            let kind = EventKind::Coverage {
                path: path.to_owned(),
                allocator: allocator.to_owned(),
                probes,
            };
            (dt_ns, kind)
        }
        WireRecord::ControlStart { dt_ns } => (dt_ns, control(ControlCommand::Start)),
        WireRecord::ControlStop { dt_ns } => (dt_ns, control(ControlCommand::Stop)),
        WireRecord::ControlBench { dt_ns, uri, pid } => {
            let uri = uri.to_owned();
            (dt_ns, control(ControlCommand::Bench { uri, pid }))
        }
        WireRecord::ControlMarker { dt_ns, kind } => {
            let kind = MarkerKind::from_u8(kind).ok_or(DecodeFault::UnknownMarker(kind))?;
            (dt_ns, control(ControlCommand::Marker { kind }))
        }
    })
}

fn control(command: ControlCommand) -> EventKind {
    EventKind::Control { command }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xorshift::XorShift;

    /// A value spread over every varint length, the extremes included.
    fn spread(rng: &mut XorShift) -> u64 {
        match rng.below(4) {
            0 => rng.below(300),
            1 => [0, 1, u64::MAX, u64::MAX - 1, 1 << 63, i64::MAX as u64][rng.below(6) as usize],
            _ => rng.next() >> rng.below(64),
        }
    }

    #[test]
    fn hand_decoded_records_equal_postcard_s() {
        let mut rng = XorShift(0x5eed);
        for _ in 0..20_000 {
            let (a, b, c) = (spread(&mut rng), spread(&mut rng), spread(&mut rng));
            let (d, f) = (spread(&mut rng), rng.below(256) as u8);
            let rec = match rng.below(10) {
                0 => WireRecord::Thread {
                    pid: a as u32,
                    tid: b as u32,
                },
                1 => WireRecord::Switch { index: a as u32 },
                2 => WireRecord::Malloc {
                    dt_ns: a as i64,
                    daddr: b as i64,
                    size: c,
                },
                3 => WireRecord::Free {
                    dt_ns: a as i64,
                    daddr: b as i64,
                },
                4 => WireRecord::Alloc {
                    dt_ns: a as i64,
                    func: f,
                    daddr: b as i64,
                    size: c,
                    stack_id: d as u32,
                },
                5 => WireRecord::Release {
                    dt_ns: a as i64,
                    func: f,
                    daddr: b as i64,
                },
                6 => WireRecord::Realloc {
                    dt_ns: a as i64,
                    func: f,
                    dold_addr: b as i64,
                    daddr: c as i64,
                    size: d,
                    stack_id: a as u32,
                },
                7 => WireRecord::AllocFailed {
                    dt_ns: a as i64,
                    func: f,
                    size: b,
                },
                8 => WireRecord::Rss {
                    dt_ns: a as i64,
                    member: f,
                    by_owner: c & 1 == 1,
                    delta_pages: b as i64,
                    dvalue_pages: d as i64,
                },
                _ => WireRecord::Exit {
                    dt_ns: a as i64,
                    status: b as i32,
                },
            };
            let mut bytes = Vec::new();
            append(&mut bytes, &rec).unwrap();
            bytes.extend_from_slice(b"next");
            let by_hand = take_common(&bytes);
            if matches!(rec, WireRecord::Exit { .. }) {
                assert_eq!(by_hand, None, "only the common records are read by hand");
                continue;
            }
            assert_eq!(by_hand, Some((rec, bytes.len() - 4)));
        }
    }

    #[test]
    fn hand_decoding_accepts_nothing_postcard_refuses() {
        // Random bytes, biased to the common tags and to long and overlong varints: whatever
        // the hand decoder reads, postcard reads the same way, to the same length.
        let mut rng = XorShift(0xbad);
        let mut read = [0u32; 12];
        for _ in 0..200_000 {
            let len = 1 + rng.below(24) as usize;
            let mut bytes: Vec<u8> = (0..len)
                .map(|_| match rng.below(3) {
                    0 => 0x80 | rng.below(128) as u8,
                    1 => [0x00, 0x01, 0x02, 0x0f, 0x10, 0x7f, 0xff][rng.below(7) as usize],
                    _ => rng.below(256) as u8,
                })
                .collect();
            bytes[0] = [0, 1, 2, 3, 4, 5, 6, 7, 11, 10][rng.below(10) as usize];
            if let Some((rec, n)) = take_common(&bytes) {
                read[bytes[0] as usize] += 1;
                let (theirs, rest) = postcard::take_from_bytes::<WireRecord<'_>>(&bytes)
                    .expect("postcard refuses what the hand decoder read");
                assert_eq!((theirs, bytes.len() - rest.len()), (rec, n), "{bytes:02x?}");
            }
        }
        for tag in [0, 1, 2, 3, 4, 5, 6, 7, 11] {
            assert!(
                read[tag] > 500,
                "too few reads of tag {tag} to test: {read:?}"
            );
        }
        assert_eq!(read[10], 0, "tag 10 (Exit) is postcard's");
    }

    #[test]
    fn varints_at_their_limits() {
        fn fields(bytes: &[u8]) -> Fields<'_> {
            Fields { bytes, pos: 0 }
        }
        let read = |bytes: &[u8]| fields(bytes).u32();
        assert_eq!(read(&[0xff, 0xff, 0xff, 0xff, 0x0f]), Some(u32::MAX));
        assert_eq!(read(&[0xff, 0xff, 0xff, 0xff, 0x10]), None); // 33 bits
        assert_eq!(read(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x00]), None); // six bytes
        assert_eq!(read(&[0x80]), None); // ends inside
        let mut max = vec![0xff; 9];
        max.push(0x01);
        assert_eq!(fields(&max).u64(), Some(u64::MAX));
        *max.last_mut().unwrap() = 0x02;
        assert_eq!(fields(&max).u64(), None); // 65 bits
        assert_eq!(fields(&[0x03]).i64(), Some(-2));
        assert_eq!(fields(&[0x04]).i64(), Some(2));
    }

    fn ev(ts_ns: u64, pid: u32, tid: u32, kind: EventKind) -> Event {
        Event {
            ts_ns,
            pid,
            tid,
            kind,
        }
    }

    fn malloc(addr: u64, size: u64) -> EventKind {
        EventKind::Alloc {
            func: AllocFunc::Malloc,
            addr,
            size,
            stack_id: 0,
        }
    }

    fn free(addr: u64) -> EventKind {
        EventKind::Free {
            func: AllocFunc::Free,
            addr,
        }
    }

    fn encode_all(events: &[Event]) -> Vec<u8> {
        let mut enc = ChunkEncoder::default();
        let mut out = Vec::new();
        for e in events {
            enc.encode(e, &mut out).unwrap();
        }
        out
    }

    fn decode_all(payload: &[u8]) -> Result<Vec<Event>, DecodeFault> {
        let mut dec = ChunkDecoder::default();
        let mut pos = 0;
        let mut events = Vec::new();
        while pos < payload.len() {
            events.push(dec.next_event(payload, &mut pos)?);
        }
        Ok(events)
    }

    fn round_trip(events: &[Event]) {
        let payload = encode_all(events);
        assert_eq!(decode_all(&payload).unwrap(), events);
    }

    fn record_bytes(rec: &WireRecord<'_>) -> Vec<u8> {
        let mut v = Vec::new();
        append(&mut v, rec).unwrap();
        v
    }

    #[test]
    fn variant_numbers_are_pinned() {
        // These numbers are on disk; this test fails if a variant is moved or inserted.
        let cases: [(WireRecord<'_>, u8); 22] = [
            (WireRecord::Thread { pid: 0, tid: 0 }, 0),
            (WireRecord::Switch { index: 0 }, 1),
            (
                WireRecord::Malloc {
                    dt_ns: 0,
                    daddr: 0,
                    size: 0,
                },
                2,
            ),
            (WireRecord::Free { dt_ns: 0, daddr: 0 }, 3),
            (
                WireRecord::Alloc {
                    dt_ns: 0,
                    func: 0,
                    daddr: 0,
                    size: 0,
                    stack_id: 0,
                },
                4,
            ),
            (
                WireRecord::Release {
                    dt_ns: 0,
                    func: 0,
                    daddr: 0,
                },
                5,
            ),
            (
                WireRecord::Realloc {
                    dt_ns: 0,
                    func: 0,
                    dold_addr: 0,
                    daddr: 0,
                    size: 0,
                    stack_id: 0,
                },
                6,
            ),
            (
                WireRecord::AllocFailed {
                    dt_ns: 0,
                    func: 0,
                    size: 0,
                },
                7,
            ),
            (WireRecord::Fork { dt_ns: 0, child: 0 }, 8),
            (
                WireRecord::Exec {
                    dt_ns: 0,
                    filename: "",
                    argv: vec![],
                },
                9,
            ),
            (
                WireRecord::Exit {
                    dt_ns: 0,
                    status: 0,
                },
                10,
            ),
            (
                WireRecord::Rss {
                    dt_ns: 0,
                    member: 0,
                    by_owner: false,
                    delta_pages: 0,
                    dvalue_pages: 0,
                },
                11,
            ),
            (
                WireRecord::Lost {
                    dt_ns: 0,
                    cause: "",
                    total: 0,
                },
                12,
            ),
            (
                WireRecord::Mmap {
                    dt_ns: 0,
                    daddr: 0,
                    len: 0,
                    prot: 0,
                    flags: 0,
                },
                13,
            ),
            (
                WireRecord::Munmap {
                    dt_ns: 0,
                    daddr: 0,
                    len: 0,
                },
                14,
            ),
            (
                WireRecord::Mremap {
                    dt_ns: 0,
                    dold_addr: 0,
                    old_len: 0,
                    daddr: 0,
                    len: 0,
                },
                15,
            ),
            (
                WireRecord::Brk {
                    dt_ns: 0,
                    dfrom: 0,
                    dto: 0,
                },
                16,
            ),
            (
                WireRecord::Coverage {
                    dt_ns: 0,
                    path: "",
                    allocator: "",
                    probes: 0,
                },
                17,
            ),
            (WireRecord::ControlStart { dt_ns: 0 }, 18),
            (WireRecord::ControlStop { dt_ns: 0 }, 19),
            (
                WireRecord::ControlBench {
                    dt_ns: 0,
                    uri: "",
                    pid: 0,
                },
                20,
            ),
            (WireRecord::ControlMarker { dt_ns: 0, kind: 0 }, 21),
        ];
        for (rec, n) in cases {
            assert_eq!(record_bytes(&rec)[0], n, "{rec:?}");
        }
    }

    #[test]
    fn exact_record_bytes() {
        // dt 3000 ns -> zigzag 6000 -> varint f0 2e; daddr -80 -> zigzag 159 -> 9f 01.
        let rec = WireRecord::Malloc {
            dt_ns: 3000,
            daddr: -80,
            size: 64,
        };
        assert_eq!(record_bytes(&rec), [2, 0xf0, 0x2e, 0x9f, 0x01, 64]);
        let rec = WireRecord::Free {
            dt_ns: -1,
            daddr: 0,
        };
        assert_eq!(record_bytes(&rec), [3, 1, 0]);
    }

    #[test]
    fn malloc_then_free_of_same_block_is_small() {
        let payload = encode_all(&[
            ev(1_000, 7, 7, malloc(0x5555_5555_9000, 64)),
            ev(4_000, 7, 7, free(0x5555_5555_9000)),
            ev(7_000, 7, 7, malloc(0x5555_5555_9000, 64)),
        ]);
        let first = encode_all(&[ev(1_000, 7, 7, malloc(0x5555_5555_9000, 64))]);
        // The second and third events cost tag + 2-byte dt + 1-byte daddr (+ size).
        assert_eq!(payload.len() - first.len(), 4 + 5);
    }

    #[test]
    fn malloc_and_free_round_trip() {
        round_trip(&[
            ev(10, 1, 1, malloc(0x5555_0000_1000, 64)),
            ev(20, 1, 1, free(0x5555_0000_1000)),
        ]);
    }

    #[test]
    fn every_alloc_func_round_trips() {
        let mut events = Vec::new();
        for (i, func) in AllocFunc::ALL.into_iter().enumerate() {
            let i = i as u64;
            events.push(ev(
                i,
                1,
                2,
                EventKind::Alloc {
                    func,
                    addr: 0x1000 + i,
                    size: i,
                    stack_id: i as u32,
                },
            ));
            events.push(ev(i, 1, 2, EventKind::Free { func, addr: 0x1000 }));
            events.push(ev(i, 1, 2, EventKind::AllocFailed { func, size: !i }));
        }
        round_trip(&events);
    }

    #[test]
    fn extreme_addresses_round_trip() {
        round_trip(&[
            ev(0, 1, 1, malloc(u64::MAX, u64::MAX)),
            ev(0, 1, 1, free(1)),
            ev(0, 1, 1, malloc(u64::MAX, 0)),
            ev(0, 1, 1, free(0)),
            ev(
                0,
                1,
                1,
                EventKind::Realloc {
                    func: AllocFunc::Realloc,
                    old_addr: u64::MAX,
                    addr: 1,
                    size: u64::MAX,
                    stack_id: u32::MAX,
                },
            ),
            ev(
                0,
                1,
                1,
                EventKind::Realloc {
                    func: AllocFunc::Reallocarray,
                    old_addr: 1,
                    addr: 1,
                    size: 0,
                    stack_id: 0,
                },
            ),
            ev(0, 1, 1, malloc(1 << 63, 1)),
        ]);
    }

    #[test]
    fn extreme_and_out_of_order_timestamps_round_trip() {
        round_trip(&[
            ev(u64::MAX, 1, 1, free(8)),
            ev(0, 1, 1, free(8)),
            ev(1 << 63, 1, 1, free(8)),
            ev((1 << 63) - 1, 1, 1, free(8)),
            ev(1_000_000, 1, 1, free(8)),
            ev(999_500, 1, 1, free(8)),
        ]);
    }

    #[test]
    fn thread_switches_round_trip() {
        round_trip(&[
            ev(1, 10, 10, free(1)),
            ev(2, 10, 11, free(2)),
            ev(3, 20, 20, free(3)),
            ev(4, 10, 10, free(4)),
            ev(5, 10, 11, free(5)),
            ev(6, u32::MAX, u32::MAX, free(6)),
            ev(7, 0, 0, free(7)),
            ev(8, 10, 10, free(8)),
        ]);
    }

    #[test]
    fn addresses_are_tracked_per_thread() {
        let payload = encode_all(&[
            ev(0, 1, 1, malloc(0x5555_0000_0000, 64)),
            ev(0, 1, 2, malloc(0x7f00_0000_0000, 64)),
            ev(0, 1, 1, free(0x5555_0000_0000)),
        ]);
        // Last record: Switch (2 bytes) then Free with daddr 0 (3 bytes).
        assert_eq!(&payload[payload.len() - 5..], [1, 0, 3, 0, 0]);
    }

    #[test]
    fn lifecycle_round_trips() {
        round_trip(&[
            ev(1, 100, 100, EventKind::Fork { child: 101 }),
            ev(
                2,
                101,
                101,
                EventKind::Exec {
                    filename: "/usr/bin/true".into(),
                    argv: vec!["true".into(), "".into(), "ünïcödé".into()],
                },
            ),
            ev(
                3,
                101,
                101,
                EventKind::Exec {
                    filename: String::new(),
                    argv: vec![],
                },
            ),
            ev(
                4,
                101,
                101,
                EventKind::Exec {
                    filename: "x".repeat(100_000),
                    argv: vec!["y".repeat(70_000); 3],
                },
            ),
            ev(5, 101, 101, EventKind::Exit { status: i32::MIN }),
            ev(6, 100, 100, EventKind::Exit { status: i32::MAX }),
            ev(7, 100, 100, EventKind::Exit { status: 9 }),
            ev(8, 100, 100, EventKind::Fork { child: u32::MAX }),
        ]);
    }

    #[test]
    fn rss_round_trips_with_negative_and_inconsistent_deltas() {
        let rss = |member, delta_pages, value_pages, by_owner| EventKind::Rss {
            member,
            delta_pages,
            value_pages,
            by_owner,
        };
        round_trip(&[
            ev(1, 5, 5, rss(RssMember::Anon, 10, 10, true)),
            ev(2, 5, 5, rss(RssMember::Anon, -4, 6, true)),
            // Inherited pages: removes beyond what was added, never clamped.
            ev(3, 5, 5, rss(RssMember::Anon, -100, 0, false)),
            ev(4, 5, 5, rss(RssMember::File, i64::MIN, u64::MAX, false)),
            ev(5, 5, 5, rss(RssMember::Shmem, i64::MAX, 0, true)),
            ev(6, 5, 6, rss(RssMember::SwapEntries, 1, 1, true)),
            ev(7, 5, 5, rss(RssMember::File, 1, 0, true)),
        ]);
    }

    #[test]
    fn predicted_rss_value_costs_one_byte() {
        let payload = encode_all(&[
            ev(
                1,
                5,
                5,
                EventKind::Rss {
                    member: RssMember::Anon,
                    delta_pages: 1,
                    value_pages: 25_600,
                    by_owner: true,
                },
            ),
            ev(
                2,
                5,
                5,
                EventKind::Rss {
                    member: RssMember::Anon,
                    delta_pages: 1,
                    value_pages: 25_601,
                    by_owner: true,
                },
            ),
        ]);
        assert_eq!(&payload[payload.len() - 6..], [11, 2, 1, 1, 2, 0]);
    }

    #[test]
    fn lost_round_trips() {
        round_trip(&[
            ev(
                1,
                0,
                0,
                EventKind::Lost {
                    cause: "ring_full".into(),
                    total: u64::MAX,
                },
            ),
            ev(
                2,
                0,
                0,
                EventKind::Lost {
                    cause: String::new(),
                    total: 0,
                },
            ),
        ]);
    }

    #[test]
    fn mappings_and_coverage_round_trip() {
        round_trip(&[
            ev(1, 9, 9, malloc(0x5555_0000_1000, 64)),
            ev(
                2,
                9,
                9,
                EventKind::Mmap {
                    addr: 0x7f00_0000_0000,
                    len: 1 << 20,
                    prot: 3,
                    flags: 0x22,
                },
            ),
            ev(3, 9, 9, free(0x5555_0000_1000)),
            ev(
                4,
                9,
                9,
                EventKind::Mremap {
                    old_addr: 0x7f00_0000_0000,
                    old_len: 1 << 20,
                    addr: 0x7e00_0000_0000,
                    len: 2 << 20,
                },
            ),
            ev(
                5,
                9,
                10,
                EventKind::Munmap {
                    addr: u64::MAX,
                    len: u64::MAX,
                },
            ),
            ev(
                6,
                9,
                9,
                EventKind::Brk {
                    from: 0x5555_0002_0000,
                    to: 0x5555_0004_1000,
                },
            ),
            ev(
                7,
                9,
                9,
                EventKind::Brk {
                    from: u64::MAX,
                    to: 0,
                },
            ),
            ev(
                8,
                9,
                9,
                EventKind::Coverage {
                    path: "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2".into(),
                    allocator: "jemalloc+c++".into(),
                    probes: 31,
                },
            ),
        ]);
    }

    #[test]
    fn mapping_addresses_do_not_disturb_heap_deltas() {
        let with_mmap = encode_all(&[
            ev(0, 1, 1, malloc(0x5555_0000_0000, 64)),
            ev(
                0,
                1,
                1,
                EventKind::Mmap {
                    addr: 0x7f00_0000_0000,
                    len: 4096,
                    prot: 3,
                    flags: 0x22,
                },
            ),
            ev(0, 1, 1, free(0x5555_0000_0000)),
        ]);
        // The free still costs tag + dt + a one-byte zero delta.
        assert_eq!(&with_mmap[with_mmap.len() - 3..], [3, 0, 0]);
    }

    #[test]
    fn control_round_trips() {
        let control = |command| EventKind::Control { command };
        let mut events = vec![
            ev(1, 0, 0, control(ControlCommand::Stop)),
            ev(
                2,
                0,
                0,
                control(ControlCommand::Bench {
                    uri: "suite::bench[size 64]".into(),
                    pid: 4242,
                }),
            ),
            ev(
                3,
                0,
                0,
                control(ControlCommand::Bench {
                    uri: String::new(),
                    pid: u32::MAX,
                }),
            ),
            ev(4, 0, 0, control(ControlCommand::Start)),
            ev(5, 7, 7, malloc(0x10, 1)),
        ];
        for (i, kind) in MarkerKind::ALL.into_iter().enumerate() {
            events.push(ev(
                6 + i as u64,
                0,
                0,
                control(ControlCommand::Marker { kind }),
            ));
        }
        round_trip(&events);
    }

    #[test]
    fn unknown_marker_is_a_fault() {
        let mut payload = record_bytes(&WireRecord::Thread { pid: 0, tid: 0 });
        payload.extend(record_bytes(&WireRecord::ControlMarker {
            dt_ns: 0,
            kind: 4,
        }));
        assert!(matches!(fault(&payload), DecodeFault::UnknownMarker(4)));
    }

    #[test]
    fn reset_makes_chunk_self_contained() {
        let mut enc = ChunkEncoder::default();
        let mut first = Vec::new();
        enc.encode(&ev(5_000, 3, 4, malloc(0x7f00, 32)), &mut first)
            .unwrap();
        enc.reset();
        let mut second = Vec::new();
        enc.encode(&ev(6_000, 3, 4, malloc(0x7f40, 32)), &mut second)
            .unwrap();
        assert_eq!(
            decode_all(&second).unwrap(),
            [ev(6_000, 3, 4, malloc(0x7f40, 32))]
        );
    }

    fn fault(payload: &[u8]) -> DecodeFault {
        decode_all(payload).unwrap_err()
    }

    #[test]
    fn event_before_thread_is_a_fault() {
        let payload = record_bytes(&WireRecord::Free { dt_ns: 1, daddr: 1 });
        assert!(matches!(fault(&payload), DecodeFault::NoThread));
    }

    #[test]
    fn switch_to_unknown_thread_is_a_fault() {
        let mut payload = record_bytes(&WireRecord::Thread { pid: 1, tid: 1 });
        payload.extend(record_bytes(&WireRecord::Switch { index: 1 }));
        assert!(matches!(
            fault(&payload),
            DecodeFault::BadThreadIndex { index: 1, known: 1 }
        ));
    }

    #[test]
    fn unknown_func_is_a_fault() {
        let mut payload = record_bytes(&WireRecord::Thread { pid: 1, tid: 1 });
        payload.extend(record_bytes(&WireRecord::AllocFailed {
            dt_ns: 0,
            func: 200,
            size: 1,
        }));
        assert!(matches!(fault(&payload), DecodeFault::UnknownFunc(200)));
    }

    #[test]
    fn unknown_member_is_a_fault() {
        let mut payload = record_bytes(&WireRecord::Thread { pid: 1, tid: 1 });
        payload.extend(record_bytes(&WireRecord::Rss {
            dt_ns: 0,
            member: 4,
            by_owner: true,
            delta_pages: 1,
            dvalue_pages: 0,
        }));
        assert!(matches!(fault(&payload), DecodeFault::UnknownMember(4)));
    }

    #[test]
    fn unknown_variant_is_a_fault() {
        let payload = [0, 1, 1, 99, 0];
        assert!(matches!(fault(&payload), DecodeFault::Record(_)));
    }

    #[test]
    fn bad_utf8_is_a_fault() {
        // Thread, then Lost { dt 0, cause: 2 bytes "\xff\xfe", total 0 }.
        let payload = [0, 1, 1, 12, 0, 2, 0xff, 0xfe, 0];
        assert!(matches!(fault(&payload), DecodeFault::Record(_)));
    }

    #[test]
    fn bad_bool_is_a_fault() {
        let payload = [0, 1, 1, 11, 0, 1, 2, 0, 0];
        assert!(matches!(fault(&payload), DecodeFault::Record(_)));
    }

    #[test]
    fn absurd_string_length_is_a_fault() {
        // Exec with a filename claiming u32::MAX bytes.
        let payload = [0, 1, 1, 9, 0, 0xff, 0xff, 0xff, 0xff, 0x0f];
        assert!(matches!(fault(&payload), DecodeFault::Record(_)));
    }

    #[test]
    fn absurd_argv_count_is_a_fault_without_huge_allocation() {
        // Exec, empty filename, argv claiming u32::MAX entries.
        let payload = [0, 1, 1, 9, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f];
        assert!(matches!(fault(&payload), DecodeFault::Record(_)));
    }

    #[test]
    fn overlong_varint_is_a_fault() {
        let payload = [0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1];
        assert!(matches!(fault(&payload), DecodeFault::Record(_)));
    }

    #[test]
    fn trailing_thread_record_without_event_is_end_of_payload() {
        let mut payload = encode_all(&[ev(1, 1, 1, free(1))]);
        payload.extend(record_bytes(&WireRecord::Thread { pid: 2, tid: 2 }));
        assert!(matches!(fault(&payload), DecodeFault::EndOfPayload));
    }

    #[test]
    fn too_many_threads_is_a_fault() {
        let mut payload = Vec::new();
        for i in 0..=MAX_THREADS_PER_CHUNK as u32 {
            payload.extend(record_bytes(&WireRecord::Thread { pid: i, tid: i }));
        }
        payload.extend(record_bytes(&WireRecord::Free { dt_ns: 0, daddr: 0 }));
        assert!(matches!(fault(&payload), DecodeFault::TooManyThreads));
    }

    #[test]
    fn fault_leaves_pos_at_the_bad_record() {
        let mut payload = encode_all(&[ev(1, 1, 1, free(1))]);
        let good = payload.len();
        payload.push(99);
        let mut dec = ChunkDecoder::default();
        let mut pos = 0;
        dec.next_event(&payload, &mut pos).unwrap();
        assert!(dec.next_event(&payload, &mut pos).is_err());
        assert_eq!(pos, good);
    }

    #[test]
    fn faults_display_on_one_line() {
        let faults = [
            DecodeFault::EndOfPayload,
            DecodeFault::NoThread,
            DecodeFault::BadThreadIndex { index: 3, known: 1 },
            DecodeFault::TooManyThreads,
            DecodeFault::UnknownFunc(77),
            DecodeFault::UnknownMember(9),
            DecodeFault::UnknownMarker(9),
            DecodeFault::Record(postcard::Error::DeserializeUnexpectedEnd),
        ];
        for f in faults {
            assert!(!f.to_string().contains('\n'), "{f}");
        }
    }
}
