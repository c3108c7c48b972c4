//! The writer's side of a chunk: each event becomes its record, with the thread table and the
//! delta codecs (`delta`) advanced exactly as the decoder will advance them.
//!
//! This runs in the recorder's hot loop (millions of events per second): it appends straight to
//! the writer's reused buffer and allocates nothing.

use crate::intmap::IntMap;

use super::super::event::{AllocFunc, ControlCommand, Event, EventKind};
use super::delta::{Delta, NodeIds, ThreadState};
use super::record::{append, Text::Borrowed, WireRecord};

/// The writer's side of a chunk's state.
#[derive(Default)]
pub(crate) struct ChunkEncoder {
    time: Delta,
    nodes: NodeIds,
    /// Index of the current thread; meaningful once `threads` is not empty.
    current: usize,
    threads: Vec<ThreadState>,
    /// (pid << 32 | tid) to its index in `threads`; looked up on every thread switch.
    index: IntMap<u64, u32>,
}

impl ChunkEncoder {
    /// Forgets everything, for a new chunk (keeps the allocations).
    pub(crate) fn reset(&mut self) {
        self.time = Delta::default();
        self.nodes = NodeIds::default();
        self.current = 0;
        self.threads.clear();
        self.index.clear();
    }

    /// Appends the records for `ev` to `out`: a `Thread` or `Switch` record if the thread
    /// changed, then the event's own record.
    pub(crate) fn encode(&mut self, ev: &Event, out: &mut Vec<u8>) -> postcard::Result<()> {
        let t = self.select_thread(ev.pid, ev.tid, out)?;
        let dt_ns = self.time.encode(ev.ts_ns);
        let th = &mut self.threads[t];
        let rec = match &ev.kind {
            &EventKind::Alloc {
                func,
                addr,
                size,
                stack_id,
            } => {
                let daddr = th.heap.encode(addr);
                if func == AllocFunc::Malloc && stack_id == 0 {
                    WireRecord::Malloc { dt_ns, daddr, size }
                } else if func == AllocFunc::Malloc {
                    WireRecord::MallocStack {
                        dt_ns,
                        daddr,
                        size,
                        stack_id,
                    }
                } else {
                    let func = func as u8;
                    WireRecord::Alloc {
                        dt_ns,
                        func,
                        daddr,
                        size,
                        stack_id,
                    }
                }
            }
            &EventKind::Free { func, addr } => {
                let daddr = th.heap.encode(addr);
                if func == AllocFunc::Free {
                    WireRecord::Free { dt_ns, daddr }
                } else {
                    let func = func as u8;
                    WireRecord::Release { dt_ns, func, daddr }
                }
            }
            &EventKind::Realloc {
                func,
                old_addr,
                addr,
                size,
                stack_id,
            } => {
                let (dold_addr, daddr) = th.heap.encode_move(old_addr, addr);
                let func = func as u8;
                WireRecord::Realloc {
                    dt_ns,
                    func,
                    dold_addr,
                    daddr,
                    size,
                    stack_id,
                }
            }
            &EventKind::AllocFailed { func, size } => {
                let func = func as u8;
                WireRecord::AllocFailed { dt_ns, func, size }
            }
            &EventKind::Fork { child } => WireRecord::Fork { dt_ns, child },
            EventKind::Exec(exec) => WireRecord::Exec {
                dt_ns,
                exec: Borrowed(exec),
            },
            &EventKind::Exit { status } => WireRecord::Exit { dt_ns, status },
            &EventKind::Rss {
                member,
                delta_pages,
                value_pages,
                by_owner,
            } => WireRecord::Rss {
                dt_ns,
                member: member as u8,
                by_owner,
                delta_pages,
                dvalue_pages: th.rss[member as usize].encode(delta_pages, value_pages),
            },
            &EventKind::Rmap {
                member,
                pages,
                addr,
            } => WireRecord::Rmap {
                dt_ns,
                member: member as u8,
                pages,
                daddr: th.rmap.encode(addr),
            },
            &EventKind::Fault {
                member,
                pages,
                addr,
                stack_id,
            } => WireRecord::Fault {
                dt_ns,
                member: member as u8,
                pages,
                daddr: th.rmap.encode(addr),
                stack_id,
            },
            EventKind::RmapRegion(region) => WireRecord::RmapRegion {
                dt_ns,
                region: Borrowed(region),
            },
            EventKind::Lost(lost) => WireRecord::Lost {
                dt_ns,
                lost: Borrowed(lost),
            },
            &EventKind::Mmap {
                addr,
                len,
                prot,
                flags,
            } => WireRecord::Mmap {
                dt_ns,
                daddr: th.map.encode(addr),
                len,
                prot,
                flags,
            },
            &EventKind::Munmap { addr, len } => WireRecord::Munmap {
                dt_ns,
                daddr: th.map.encode(addr),
                len,
            },
            &EventKind::Mremap {
                old_addr,
                old_len,
                addr,
                len,
            } => {
                let (dold_addr, daddr) = th.map.encode_move(old_addr, addr);
                WireRecord::Mremap {
                    dt_ns,
                    dold_addr,
                    old_len,
                    daddr,
                    len,
                }
            }
            &EventKind::Brk { from, to } => {
                let (dfrom, dto) = th.map.encode_move(from, to);
                WireRecord::Brk { dt_ns, dfrom, dto }
            }
            EventKind::Coverage(coverage) => WireRecord::Coverage {
                dt_ns,
                coverage: Borrowed(coverage),
            },
            EventKind::Control { command } => match command {
                ControlCommand::Start => WireRecord::ControlStart { dt_ns },
                ControlCommand::Stop => WireRecord::ControlStop { dt_ns },
                ControlCommand::Bench(bench) => WireRecord::ControlBench {
                    dt_ns,
                    bench: Borrowed(bench),
                },
                &ControlCommand::Marker { kind } => WireRecord::ControlMarker {
                    dt_ns,
                    kind: kind as u8,
                },
            },
            EventKind::Module(module) => WireRecord::Module {
                dt_ns,
                module: Borrowed(module),
            },
            &EventKind::StackNode {
                id,
                parent,
                module,
                offset,
            } => {
                let (did, dparent) = self.nodes.encode(id, parent);
                WireRecord::StackNode {
                    dt_ns,
                    did,
                    dparent,
                    module,
                    offset,
                }
            }
            EventKind::Symbol(symbol) => WireRecord::Symbol {
                dt_ns,
                symbol: Borrowed(symbol),
            },
            &EventKind::StackStats(walks) => WireRecord::StackStats { dt_ns, walks },
            EventKind::LeakScan(scan) => WireRecord::LeakScan {
                dt_ns,
                scan: Borrowed(scan),
            },
        };
        append(out, &rec)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::event::RssMember;
    use crate::testkit::{decode_chunk, encode_chunk, ev, free, malloc};

    #[test]
    fn malloc_then_free_of_same_block_is_small() {
        let payload = encode_chunk(&[
            ev(1_000, 7, 7, malloc(0x5555_5555_9000, 64)),
            ev(4_000, 7, 7, free(0x5555_5555_9000)),
            ev(7_000, 7, 7, malloc(0x5555_5555_9000, 64)),
        ]);
        let first = encode_chunk(&[ev(1_000, 7, 7, malloc(0x5555_5555_9000, 64))]);
        // The second and third events cost tag + 2-byte dt + 1-byte daddr (+ size).
        assert_eq!(payload.len() - first.len(), 4 + 5);
    }

    #[test]
    fn malloc_with_a_stack_costs_only_the_stack_id_more() {
        let with_stack = |stack_id| {
            let kind = EventKind::Alloc {
                func: AllocFunc::Malloc,
                addr: 0x5555_5555_9000,
                size: 64,
                stack_id,
            };
            encode_chunk(&[ev(1_000, 7, 7, kind)]).len()
        };
        let plain = encode_chunk(&[ev(1_000, 7, 7, malloc(0x5555_5555_9000, 64))]).len();
        assert_eq!(with_stack(0), plain);
        assert_eq!(with_stack(100), plain + 1);
        assert_eq!(with_stack(100_000), plain + 3);
    }

    #[test]
    fn addresses_are_tracked_per_thread() {
        let payload = encode_chunk(&[
            ev(0, 1, 1, malloc(0x5555_0000_0000, 64)),
            ev(0, 1, 2, malloc(0x7f00_0000_0000, 64)),
            ev(0, 1, 1, free(0x5555_0000_0000)),
        ]);
        // Last record: Switch (2 bytes) then Free with daddr 0 (3 bytes).
        assert_eq!(&payload[payload.len() - 5..], [1, 0, 3, 0, 0]);
    }

    #[test]
    fn predicted_rss_value_costs_one_byte() {
        let payload = encode_chunk(&[
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
    fn mapping_addresses_do_not_disturb_heap_deltas() {
        let with_mmap = encode_chunk(&[
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
            decode_chunk(&second).unwrap(),
            [ev(6_000, 3, 4, malloc(0x7f40, 32))]
        );
    }
}
