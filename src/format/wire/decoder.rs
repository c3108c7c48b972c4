//! The reader's side of a chunk: records back into absolute events, with the thread table and
//! the delta codecs (`delta`) advanced exactly as the encoder advanced them, and every way a
//! payload that passed its checksum can still be wrong named as a `DecodeFault`.
//!
//! This runs once per event of every report, so the common records are read by hand
//! (`record::take`) and nothing is allocated but an event's own strings.

use std::fmt;

use super::super::event::{AllocFunc, ControlCommand, Event, EventKind, MarkerKind, RssMember};
use super::delta::{Delta, NodeIds, ThreadState};
use super::record::{take, WireRecord, MAX_THREADS_PER_CHUNK};

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
    time: Delta,
    nodes: NodeIds,
    current: Option<usize>,
    threads: Vec<ThreadState>,
}

impl ChunkDecoder {
    /// Forgets everything, for a new chunk (keeps the allocations).
    pub(crate) fn reset(&mut self) {
        self.time = Delta::default();
        self.nodes = NodeIds::default();
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
            let (rec, record_len) = take(rest).map_err(DecodeFault::Record)?;
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
                event_kind(th, &mut self.nodes, other)?
            }
        };
        let Some(th) = self.current.and_then(|i| self.threads.get(i)) else {
            return Err(DecodeFault::NoThread);
        };
        Ok(Some(Event {
            ts_ns: self.time.decode(dt_ns),
            pid: th.pid,
            tid: th.tid,
            kind,
        }))
    }
}

/// The timestamp delta and absolute event of an event record, updating `th`'s state (and the
/// chunk's `nodes` for a stack node).
fn event_kind(
    th: &mut ThreadState,
    nodes: &mut NodeIds,
    rec: WireRecord<'_>,
) -> Result<(i64, EventKind), DecodeFault> {
    Ok(match rec {
        // Handled by the caller; listed so that a new variant must be thought about here.
        WireRecord::Thread { .. } | WireRecord::Switch { .. } => {
            return Err(DecodeFault::NoThread);
        }
        WireRecord::Malloc { dt_ns, daddr, size } => {
            let kind = EventKind::Alloc {
                func: AllocFunc::Malloc,
                addr: th.heap.decode(daddr),
                size,
                stack_id: 0,
            };
            (dt_ns, kind)
        }
        WireRecord::MallocStack {
            dt_ns,
            daddr,
            size,
            stack_id,
        } => {
            let kind = EventKind::Alloc {
                func: AllocFunc::Malloc,
                addr: th.heap.decode(daddr),
                size,
                stack_id,
            };
            (dt_ns, kind)
        }
        WireRecord::Free { dt_ns, daddr } => {
            let kind = EventKind::Free {
                func: AllocFunc::Free,
                addr: th.heap.decode(daddr),
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
            let kind = EventKind::Alloc {
                func: func(f)?,
                addr: th.heap.decode(daddr),
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
            let kind = EventKind::Free {
                func: func(f)?,
                addr: th.heap.decode(daddr),
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
            let (old_addr, addr) = th.heap.decode_move(dold_addr, daddr);
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
        WireRecord::Exec { dt_ns, exec } => (dt_ns, EventKind::Exec(exec.into_owned())),
        WireRecord::Exit { dt_ns, status } => (dt_ns, EventKind::Exit { status }),
        WireRecord::Rss {
            dt_ns,
            member,
            by_owner,
            delta_pages,
            dvalue_pages,
        } => {
            let m = RssMember::from_u8(member).ok_or(DecodeFault::UnknownMember(member))?;
            let kind = EventKind::Rss {
                member: m,
                delta_pages,
                value_pages: th.rss[m as usize].decode(delta_pages, dvalue_pages),
                by_owner,
            };
            (dt_ns, kind)
        }
        WireRecord::Lost { dt_ns, lost } => (dt_ns, EventKind::Lost(lost.into_owned())),
        WireRecord::RmapRegion { dt_ns, region } => {
            (dt_ns, EventKind::RmapRegion(region.into_owned()))
        }
        WireRecord::Fault {
            dt_ns,
            member,
            pages,
            daddr,
            stack_id,
        } => {
            let m = RssMember::from_u8(member).ok_or(DecodeFault::UnknownMember(member))?;
            let kind = EventKind::Fault {
                member: m,
                pages,
                addr: th.rmap.decode(daddr),
                stack_id,
            };
            (dt_ns, kind)
        }
        WireRecord::Rmap {
            dt_ns,
            member,
            pages,
            daddr,
        } => {
            let m = RssMember::from_u8(member).ok_or(DecodeFault::UnknownMember(member))?;
            let kind = EventKind::Rmap {
                member: m,
                pages,
                addr: th.rmap.decode(daddr),
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
            let kind = EventKind::Mmap {
                addr: th.map.decode(daddr),
                len,
                prot,
                flags,
            };
            (dt_ns, kind)
        }
        WireRecord::Munmap { dt_ns, daddr, len } => {
            let kind = EventKind::Munmap {
                addr: th.map.decode(daddr),
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
            let (old_addr, addr) = th.map.decode_move(dold_addr, daddr);
            let kind = EventKind::Mremap {
                old_addr,
                old_len,
                addr,
                len,
            };
            (dt_ns, kind)
        }
        WireRecord::Brk { dt_ns, dfrom, dto } => {
            let (from, to) = th.map.decode_move(dfrom, dto);
            (dt_ns, EventKind::Brk { from, to })
        }
        WireRecord::Coverage { dt_ns, coverage } => {
            (dt_ns, EventKind::Coverage(coverage.into_owned()))
        }
        WireRecord::ControlStart { dt_ns } => (dt_ns, control(ControlCommand::Start)),
        WireRecord::ControlStop { dt_ns } => (dt_ns, control(ControlCommand::Stop)),
        WireRecord::ControlBench { dt_ns, bench } => {
            (dt_ns, control(ControlCommand::Bench(bench.into_owned())))
        }
        WireRecord::ControlMarker { dt_ns, kind } => {
            let kind = MarkerKind::from_u8(kind).ok_or(DecodeFault::UnknownMarker(kind))?;
            (dt_ns, control(ControlCommand::Marker { kind }))
        }
        WireRecord::Module { dt_ns, module } => (dt_ns, EventKind::Module(module.into_owned())),
        WireRecord::StackNode {
            dt_ns,
            did,
            dparent,
            module,
            offset,
        } => {
            let (id, parent) = nodes.decode(did, dparent);
            let kind = EventKind::StackNode {
                id,
                parent,
                module,
                offset,
            };
            (dt_ns, kind)
        }
        WireRecord::Symbol { dt_ns, symbol } => (dt_ns, EventKind::Symbol(symbol.into_owned())),
        WireRecord::StackStats { dt_ns, walks } => (dt_ns, EventKind::StackStats(walks)),
        WireRecord::LeakScan { dt_ns, scan } => (dt_ns, EventKind::LeakScan(scan.into_owned())),
    })
}

fn control(command: ControlCommand) -> EventKind {
    EventKind::Control { command }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::event::{Bench, Coverage, Exec, Lost};
    use crate::testkit::{decode_chunk, encode_chunk, ev, free, malloc, record_bytes};

    fn round_trip(events: &[Event]) {
        let payload = encode_chunk(events);
        assert_eq!(decode_chunk(&payload).unwrap(), events);
    }

    fn fault(payload: &[u8]) -> DecodeFault {
        decode_chunk(payload).unwrap_err()
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
    fn lifecycle_round_trips() {
        round_trip(&[
            ev(1, 100, 100, EventKind::Fork { child: 101 }),
            ev(
                2,
                101,
                101,
                EventKind::Exec(Exec {
                    filename: "/usr/bin/true".into(),
                    argv: vec!["true".into(), "".into(), "ünïcödé".into()],
                }),
            ),
            ev(
                3,
                101,
                101,
                EventKind::Exec(Exec {
                    filename: String::new(),
                    argv: vec![],
                }),
            ),
            ev(
                4,
                101,
                101,
                EventKind::Exec(Exec {
                    filename: "x".repeat(100_000),
                    argv: vec!["y".repeat(70_000); 3],
                }),
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
    fn lost_round_trips() {
        round_trip(&[
            ev(
                1,
                0,
                0,
                EventKind::Lost(Lost {
                    cause: "ring_full".into(),
                    total: u64::MAX,
                }),
            ),
            ev(
                2,
                0,
                0,
                EventKind::Lost(Lost {
                    cause: String::new(),
                    total: 0,
                }),
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
                EventKind::Coverage(Coverage {
                    path: "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2".into(),
                    allocator: "jemalloc+c++".into(),
                    probes: 31,
                }),
            ),
        ]);
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
                control(ControlCommand::Bench(Bench {
                    uri: "suite::bench[size 64]".into(),
                    pid: 4242,
                })),
            ),
            ev(
                3,
                0,
                0,
                control(ControlCommand::Bench(Bench {
                    uri: String::new(),
                    pid: u32::MAX,
                })),
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
    fn stacks_round_trip() {
        use crate::format::event::{
            Module, StackWalks, Symbol, SymbolFrame, MARK_TRUNCATED, MODULE_MARK,
        };
        let node = |id, parent, module, offset| EventKind::StackNode {
            id,
            parent,
            module,
            offset,
        };
        let frame = |function: &str, file: &str, line| SymbolFrame {
            function: function.into(),
            file: file.into(),
            line,
        };
        round_trip(&[
            ev(
                1,
                7,
                0,
                EventKind::Module(Module {
                    id: 1,
                    path: "/usr/lib/x86_64-linux-gnu/libc.so.6".into(),
                    build_id: (0..20).collect(),
                    dev: 0xfe01,
                    ino: u64::MAX,
                }),
            ),
            ev(
                2,
                7,
                0,
                EventKind::Module(Module {
                    id: u32::MAX - 1,
                    path: String::new(),
                    build_id: vec![],
                    dev: u32::MAX,
                    ino: 0,
                }),
            ),
            ev(3, 0, 0, node(1, 0, 1, 0x2_9d90)),
            ev(3, 0, 0, node(2, 1, 1, 0x2_7249)),
            ev(3, 0, 0, node(3, 2, 1, u64::MAX)),
            ev(4, 0, 0, node(4, 1, 2, 0)),
            ev(5, 0, 0, node(17, 3, MODULE_MARK, MARK_TRUNCATED)),
            ev(6, 0, 0, node(5, 0, 1, 1)),
            ev(7, 0, 0, node(u32::MAX, u32::MAX, 0, 0)),
            ev(8, 0, 0, node(0, u32::MAX, 0, 0)),
            ev(
                9,
                7,
                7,
                EventKind::Alloc {
                    func: AllocFunc::Malloc,
                    addr: 0x5555_0000_1000,
                    size: 24,
                    stack_id: 3,
                },
            ),
            ev(
                10,
                7,
                7,
                EventKind::Alloc {
                    func: AllocFunc::Malloc,
                    addr: 0x5555_0000_1020,
                    size: 24,
                    stack_id: u32::MAX,
                },
            ),
            ev(11, 7, 7, malloc(0x5555_0000_1040, 8)),
            ev(
                12,
                0,
                0,
                EventKind::Symbol(Symbol {
                    module: 1,
                    offset: 0x2_7249,
                    frames: vec![
                        frame(
                            "std::vector<int>::push_back",
                            "/usr/include/c++/12/bits/stl_vector.h",
                            1287,
                        ),
                        frame("main", "main.cc", 12),
                        frame("", "", 0),
                    ],
                }),
            ),
            ev(
                13,
                0,
                0,
                EventKind::Symbol(Symbol {
                    module: MODULE_MARK,
                    offset: 0,
                    frames: vec![],
                }),
            ),
            ev(
                14,
                0,
                0,
                EventKind::StackStats(StackWalks {
                    walks: 1_000_000,
                    truncated: 3,
                    unknown: 2,
                    unsupported: 1,
                    collisions: 0,
                    uncached: u64::MAX,
                }),
            ),
        ]);
    }

    #[test]
    fn a_new_stack_s_nodes_cost_little() {
        // Three nodes of a new chain after the first: tag, dt, did 0, dparent 1, module, and
        // the offset's varint (3 bytes here).
        let nodes = |n: u32| {
            let events: Vec<Event> = (1..=n)
                .map(|id| {
                    let kind = EventKind::StackNode {
                        id,
                        parent: id - 1,
                        module: 1,
                        offset: 0x1_0000 + u64::from(id),
                    };
                    ev(0, 0, 0, kind)
                })
                .collect();
            encode_chunk(&events).len()
        };
        assert_eq!(nodes(4) - nodes(1), 3 * 8);
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
        let mut payload = encode_chunk(&[ev(1, 1, 1, free(1))]);
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
        let mut payload = encode_chunk(&[ev(1, 1, 1, free(1))]);
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
