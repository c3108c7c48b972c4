//! Kernel records (the layouts of `bpf/event.h`, through bindgen) into [`Event`]s.
//!
//! Field positions come from the generated structs with `offset_of!`, so the layout is defined
//! once, in C; the bytes are read with bounds checks, so a short or unknown record is an error
//! the recorder counts, never undefined behaviour.

use std::mem::{offset_of, size_of};

use crate::format::{AllocFunc, Event, EventKind, Exec, RmapRegion, RssMember};
use crate::sys::raw::{
    alloc_event, event_header, event_kind, exec_event, exit_event, fault_event, fork_event,
    lost_cause, map_event, rmap_event, rmap_region_event, rss_event, stack_event, stop_event,
    stop_reason, STACK_MAX_DEPTH,
};

/// A record the decoder could not read.
#[derive(Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Shorter than its kind's layout.
    Short { kind: u32, len: usize },
    /// A kind or function number this memtrack does not know.
    Unknown { kind: u32 },
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_ne_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_ne_bytes(a)
}

const EV_ALLOC: u32 = event_kind::EV_ALLOC as u32;
const EV_FREE: u32 = event_kind::EV_FREE as u32;
const EV_REALLOC: u32 = event_kind::EV_REALLOC as u32;
const EV_ALLOC_FAILED: u32 = event_kind::EV_ALLOC_FAILED as u32;
const EV_FORK: u32 = event_kind::EV_FORK as u32;
const EV_EXEC: u32 = event_kind::EV_EXEC as u32;
const EV_EXIT: u32 = event_kind::EV_EXIT as u32;
const EV_RSS: u32 = event_kind::EV_RSS as u32;
const EV_STOP: u32 = event_kind::EV_STOP as u32;
const EV_MMAP: u32 = event_kind::EV_MMAP as u32;
const EV_MUNMAP: u32 = event_kind::EV_MUNMAP as u32;
const EV_MREMAP: u32 = event_kind::EV_MREMAP as u32;
const EV_BRK: u32 = event_kind::EV_BRK as u32;
const EV_STACK: u32 = event_kind::EV_STACK as u32;
const EV_RMAP: u32 = event_kind::EV_RMAP as u32;
const EV_FAULT: u32 = event_kind::EV_FAULT as u32;
const EV_RMAP_REGION: u32 = event_kind::EV_RMAP_REGION as u32;

/// A process the kernel side stopped for the recorder (bpf/discover.bpf.c, bpf/alloc.bpf.c),
/// which continues it once done. Not an event of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stop {
    /// When it was stopped (CLOCK_MONOTONIC ns).
    pub ts_ns: u64,
    /// The stopped process.
    pub pid: u32,
    /// The thread that was running.
    pub tid: u32,
    /// What the recorder is to do before it continues the process.
    pub why: StopWhy,
}

/// Why a process was stopped (`enum stop_reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopWhy {
    /// It executed a file not scanned yet: scan it.
    Exec,
    /// The dynamic loader mapped libraries: scan those not scanned yet.
    Loader,
    /// It is about to exit (the C library's `_exit`): held for the leak scan.
    Exit,
    /// A sampled allocator call found no walker: continue once the walker is in place.
    Walker,
}

/// The stop record `b`, if it is one.
pub fn stop(b: &[u8]) -> Option<Stop> {
    if b.len() < size_of::<stop_event>() || u32_at(b, offset_of!(event_header, kind)) != EV_STOP {
        return None;
    }
    Some(Stop {
        ts_ns: u64_at(b, offset_of!(event_header, ts_ns)),
        pid: u32_at(b, offset_of!(event_header, pid)),
        tid: u32_at(b, offset_of!(event_header, tid)),
        why: match u32_at(b, offset_of!(stop_event, reason)) {
            r if r == stop_reason::STOP_EXEC as u32 => StopWhy::Exec,
            r if r == stop_reason::STOP_EXIT as u32 => StopWhy::Exit,
            r if r == stop_reason::STOP_WALKER as u32 => StopWhy::Walker,
            _ => StopWhy::Loader,
        },
    })
}

/// A call stack the kernel side walked for the first time (bpf/stack.bpf.h). Not an event of
/// the file: the recorder interns it into the recording's stack trie.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelStack {
    /// When it was walked (CLOCK_MONOTONIC ns).
    pub ts_ns: u64,
    /// The id allocation records carry in `stack_id`, from 1.
    pub id: u32,
    /// How the walk ended (`enum stack_end`: 0 complete, else the `MARK_*` number).
    pub end: u32,
    /// Innermost first: module << 32 | file offset.
    pub frames: Vec<u64>,
}

/// The stack record `b`, if it is one; `Err` if it is one but damaged.
pub fn stack(b: &[u8]) -> Option<Result<KernelStack, DecodeError>> {
    let head = offset_of!(stack_event, frames);
    if b.len() < size_of::<event_header>() || u32_at(b, offset_of!(event_header, kind)) != EV_STACK
    {
        return None;
    }
    if b.len() < head {
        return Some(Err(DecodeError::Short {
            kind: EV_STACK,
            len: b.len(),
        }));
    }
    let depth = u32_at(b, offset_of!(stack_event, depth)) as usize;
    if depth > STACK_MAX_DEPTH as usize || b.len() < head + depth * 8 {
        return Some(Err(DecodeError::Short {
            kind: EV_STACK,
            len: b.len(),
        }));
    }
    Some(Ok(KernelStack {
        ts_ns: u64_at(b, offset_of!(event_header, ts_ns)),
        id: u32_at(b, offset_of!(stack_event, id)),
        end: u32_at(b, offset_of!(stack_event, end)),
        frames: (0..depth).map(|i| u64_at(b, head + i * 8)).collect(),
    }))
}

/// Decode one ring buffer record.
pub fn decode(b: &[u8]) -> Result<Event, DecodeError> {
    if b.len() < size_of::<event_header>() {
        return Err(DecodeError::Short {
            kind: 0,
            len: b.len(),
        });
    }
    let kind = u32_at(b, offset_of!(event_header, kind));
    let need = match kind {
        EV_ALLOC | EV_FREE | EV_REALLOC | EV_ALLOC_FAILED => size_of::<alloc_event>(),
        EV_FORK => size_of::<fork_event>(),
        EV_EXEC => size_of::<exec_event>(),
        EV_EXIT => size_of::<exit_event>(),
        EV_RSS => size_of::<rss_event>(),
        EV_RMAP => size_of::<rmap_event>(),
        EV_FAULT => size_of::<fault_event>(),
        EV_RMAP_REGION => size_of::<rmap_region_event>(),
        EV_MMAP | EV_MUNMAP | EV_MREMAP | EV_BRK => size_of::<map_event>(),
        _ => return Err(DecodeError::Unknown { kind }),
    };
    if b.len() < need {
        return Err(DecodeError::Short { kind, len: b.len() });
    }
    let kind = match kind {
        EV_ALLOC | EV_FREE | EV_REALLOC | EV_ALLOC_FAILED => {
            let func_no = u32_at(b, offset_of!(alloc_event, func));
            let func = u8::try_from(func_no)
                .ok()
                .and_then(AllocFunc::from_u8)
                .ok_or(DecodeError::Unknown { kind })?;
            let addr = u64_at(b, offset_of!(alloc_event, addr));
            let size = u64_at(b, offset_of!(alloc_event, size));
            let stack_id = u32_at(b, offset_of!(alloc_event, stack_id));
            match kind {
                EV_ALLOC => EventKind::Alloc {
                    func,
                    addr,
                    size,
                    stack_id,
                },
                EV_FREE => EventKind::Free { func, addr },
                EV_REALLOC => EventKind::Realloc {
                    func,
                    old_addr: u64_at(b, offset_of!(alloc_event, old_addr)),
                    addr,
                    size,
                    stack_id,
                },
                _ => EventKind::AllocFailed { func, size },
            }
        }
        EV_FORK => EventKind::Fork {
            child: u32_at(b, offset_of!(fork_event, child)),
        },
        EV_EXEC => EventKind::Exec(exec(b)),
        EV_EXIT => EventKind::Exit {
            status: u32_at(b, offset_of!(exit_event, status)) as i32,
        },
        EV_MMAP | EV_MUNMAP | EV_MREMAP | EV_BRK => {
            let addr = u64_at(b, offset_of!(map_event, addr));
            let len = u64_at(b, offset_of!(map_event, len));
            let old_addr = u64_at(b, offset_of!(map_event, old_addr));
            match kind {
                EV_MMAP => EventKind::Mmap {
                    addr,
                    len,
                    prot: u32_at(b, offset_of!(map_event, prot)),
                    flags: u32_at(b, offset_of!(map_event, flags)),
                },
                EV_MUNMAP => EventKind::Munmap { addr, len },
                EV_MREMAP => EventKind::Mremap {
                    old_addr,
                    old_len: u64_at(b, offset_of!(map_event, old_len)),
                    addr,
                    len,
                },
                _ => EventKind::Brk {
                    from: old_addr,
                    to: addr,
                },
            }
        }
        EV_RMAP_REGION => EventKind::RmapRegion(rmap_region(b)),
        EV_FAULT => fault(b).ok_or(DecodeError::Unknown { kind })?,
        EV_RMAP => {
            let member = u8::try_from(u32_at(b, offset_of!(rmap_event, kind)))
                .ok()
                .and_then(RssMember::from_u8)
                .ok_or(DecodeError::Unknown { kind })?;
            EventKind::Rmap {
                member,
                pages: u32_at(b, offset_of!(rmap_event, pages)) as i32,
                addr: u64_at(b, offset_of!(rmap_event, addr)),
            }
        }
        _ => {
            let member_no = u32_at(b, offset_of!(rss_event, member));
            let member = u8::try_from(member_no)
                .ok()
                .and_then(RssMember::from_u8)
                .ok_or(DecodeError::Unknown { kind })?;
            EventKind::Rss {
                member,
                delta_pages: u64_at(b, offset_of!(rss_event, delta_pages)) as i64,
                value_pages: u64_at(b, offset_of!(rss_event, value_pages)),
                by_owner: u32_at(b, offset_of!(rss_event, by_owner)) != 0,
            }
        }
    };
    Ok(Event {
        ts_ns: u64_at(b, offset_of!(event_header, ts_ns)),
        pid: u32_at(b, offset_of!(event_header, pid)),
        tid: u32_at(b, offset_of!(event_header, tid)),
        kind,
    })
}

/// The `Fault` of a `fault_event` of at least its size; `None` for a member of no number.
fn fault(b: &[u8]) -> Option<EventKind> {
    Some(EventKind::Fault {
        member: RssMember::from_u8(u8::try_from(u32_at(b, offset_of!(fault_event, member))).ok()?)?,
        pages: u32_at(b, offset_of!(fault_event, pages)),
        addr: u64_at(b, offset_of!(fault_event, addr)),
        stack_id: u32_at(b, offset_of!(fault_event, stack_id)),
    })
}

/// The program and arguments of an `exec_event` of at least its size, each cut at the length
/// the kernel side could copy.
fn exec(b: &[u8]) -> Exec {
    let flen = (u32_at(b, offset_of!(exec_event, filename_len)) as usize)
        .min(crate::sys::raw::EXEC_FILENAME_MAX as usize);
    let alen = (u32_at(b, offset_of!(exec_event, args_len)) as usize)
        .min(crate::sys::raw::EXEC_ARGS_MAX as usize);
    let fstart = offset_of!(exec_event, filename);
    let astart = offset_of!(exec_event, args);
    let filename = String::from_utf8_lossy(&b[fstart..fstart + flen]).into_owned();
    let args = &b[astart..astart + alen];
    let argv = args
        .strip_suffix(&[0])
        .unwrap_or(args)
        .split(|&c| c == 0)
        .filter(|_| alen > 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    Exec { filename, argv }
}

/// The region of an `rmap_region_event` of at least its size; the file's path is completed
/// later, while its process lives (`record::rmap::complete_path`).
fn rmap_region(b: &[u8]) -> RmapRegion {
    let len = (u32_at(b, offset_of!(rmap_region_event, name_len)) as usize)
        .min(crate::sys::raw::RMAP_NAME_MAX as usize);
    let at = offset_of!(rmap_region_event, name);
    let what = match u32_at(b, offset_of!(rmap_region_event, region)) {
        1 => "heap",
        2 => "stack",
        3 => "file",
        4 => "shmem",
        _ => "anon",
    };
    RmapRegion {
        start: u64_at(b, offset_of!(rmap_region_event, start)),
        end: u64_at(b, offset_of!(rmap_region_event, end)),
        what: what.to_string(),
        name: String::from_utf8_lossy(&b[at..at + len]).into_owned(),
    }
}

/// The name of each loss cause of the kernel side, indexed like the `lost` map.
pub const LOST_CAUSES: [(lost_cause, &str); 11] = [
    (lost_cause::LOST_RING_ALLOC, "ring_full_alloc"),
    (lost_cause::LOST_RING_LIFECYCLE, "ring_full_lifecycle"),
    (lost_cause::LOST_RING_RSS, "ring_full_rss"),
    (lost_cause::LOST_STATE_FULL, "call_state_full"),
    (lost_cause::LOST_TRACKED_FULL, "tracked_map_full"),
    (lost_cause::LOST_RING_MAP, "ring_full_mapping"),
    (lost_cause::LOST_STOP, "ring_full_discovery"),
    (lost_cause::LOST_RING_STACK, "ring_full_stack"),
    (lost_cause::LOST_RING_RMAP, "ring_full_rmap"),
    (lost_cause::LOST_SKIPPED_CALL, "skipped_mapping_call"),
    (lost_cause::LOST_RING_FAULT, "ring_full_fault"),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn header(kind: event_kind, pid: u32, tid: u32, ts: u64) -> event_header {
        event_header {
            ts_ns: ts,
            pid,
            tid,
            kind: kind as u32,
            _pad: 0,
        }
    }

    use crate::sys::raw::record_bytes as bytes;

    #[test]
    fn decodes_rmap_and_its_regions() {
        let e = rmap_event {
            h: header(event_kind::EV_RMAP, 7, 8, 5),
            addr: 0x7f00_0000_1000,
            pages: -512i32 as u32 as _,
            kind: RssMember::Shmem as u32,
        };
        let ev = decode(&bytes(&e)).unwrap();
        assert_eq!(
            ev.kind,
            EventKind::Rmap {
                member: RssMember::Shmem,
                pages: -512,
                addr: 0x7f00_0000_1000
            }
        );
        let bad = rmap_event { kind: 9, ..e };
        assert!(decode(&bytes(&bad)).is_err(), "kind 9 is no member");
        let f = fault_event {
            h: header(event_kind::EV_FAULT, 7, 9, 7),
            addr: 0x7f00_0000_2000,
            pages: 16,
            member: RssMember::File as u32,
            stack_id: 42,
            _pad: 0,
        };
        assert_eq!(
            decode(&bytes(&f)).unwrap().kind,
            EventKind::Fault {
                member: RssMember::File,
                pages: 16,
                addr: 0x7f00_0000_2000,
                stack_id: 42,
            }
        );
        assert!(decode(&bytes(&fault_event { member: 9, ..f })).is_err());
        let mut r = rmap_region_event {
            h: header(event_kind::EV_RMAP_REGION, 7, 8, 6),
            start: 0x1000,
            end: 0x5000,
            region: 3,
            name_len: 8,
            name: [0; crate::sys::raw::RMAP_NAME_MAX as usize],
        };
        for (d, s) in r.name.iter_mut().zip(b"data.bin") {
            *d = *s as _;
        }
        let region = |r: &rmap_region_event| match decode(&bytes(r)).unwrap().kind {
            EventKind::RmapRegion(region) => region,
            other => panic!("{other:?}"),
        };
        let got = region(&r);
        assert_eq!(
            (got.start, got.end, got.what.as_str(), got.name.as_str()),
            (0x1000, 0x5000, "file", "data.bin")
        );
        // A length past the buffer is cut to it; an unknown region number reads as anon.
        r.name_len = 1000;
        r.region = 77;
        let got = region(&r);
        assert_eq!((got.what.as_str(), got.name.len()), ("anon", 64));
    }

    #[test]
    fn decodes_alloc_free_realloc_failed() {
        let mut e = alloc_event {
            h: header(event_kind::EV_ALLOC, 10, 11, 123),
            addr: 0x5555_0000,
            size: 64,
            old_addr: 0,
            func: 1,
            stack_id: 0,
        };
        let ev = decode(&bytes(&e)).unwrap();
        assert_eq!((ev.ts_ns, ev.pid, ev.tid), (123, 10, 11));
        assert_eq!(
            ev.kind,
            EventKind::Alloc {
                func: AllocFunc::Calloc,
                addr: 0x5555_0000,
                size: 64,
                stack_id: 0
            }
        );
        e.h.kind = event_kind::EV_REALLOC as u32;
        e.old_addr = 0x1000;
        e.func = 2;
        assert!(matches!(
            decode(&bytes(&e)).unwrap().kind,
            EventKind::Realloc {
                old_addr: 0x1000,
                addr: 0x5555_0000,
                size: 64,
                ..
            }
        ));
        e.h.kind = event_kind::EV_FREE as u32;
        assert!(matches!(
            decode(&bytes(&e)).unwrap().kind,
            EventKind::Free {
                addr: 0x5555_0000,
                ..
            }
        ));
        e.h.kind = event_kind::EV_ALLOC_FAILED as u32;
        assert!(matches!(
            decode(&bytes(&e)).unwrap().kind,
            EventKind::AllocFailed { size: 64, .. }
        ));
    }

    #[test]
    fn rejects_short_and_unknown_records() {
        let e = alloc_event {
            h: header(event_kind::EV_ALLOC, 1, 1, 1),
            ..Default::default()
        };
        let b = bytes(&e);
        assert!(matches!(decode(&b[..20]), Err(DecodeError::Short { .. })));
        assert!(matches!(decode(&b[..30]), Err(DecodeError::Short { .. })));
        let mut bad = b.clone();
        bad[offset_of!(event_header, kind)] = 99;
        assert_eq!(decode(&bad), Err(DecodeError::Unknown { kind: 99 }));
        let mut bad_func = e;
        bad_func.func = 200;
        assert!(decode(&bytes(&bad_func)).is_err());
    }

    #[test]
    fn decodes_mappings() {
        let mut e = map_event {
            h: header(event_kind::EV_MMAP, 3, 4, 5),
            addr: 0x7f00_0000_0000,
            len: 8192,
            old_addr: 0,
            old_len: 0,
            prot: 3,
            flags: 0x22,
        };
        assert_eq!(
            decode(&bytes(&e)).unwrap().kind,
            EventKind::Mmap {
                addr: 0x7f00_0000_0000,
                len: 8192,
                prot: 3,
                flags: 0x22
            }
        );
        e.h.kind = event_kind::EV_MREMAP as u32;
        e.old_addr = 0x1000;
        e.old_len = 4096;
        assert_eq!(
            decode(&bytes(&e)).unwrap().kind,
            EventKind::Mremap {
                old_addr: 0x1000,
                old_len: 4096,
                addr: 0x7f00_0000_0000,
                len: 8192
            }
        );
        e.h.kind = event_kind::EV_BRK as u32;
        assert_eq!(
            decode(&bytes(&e)).unwrap().kind,
            EventKind::Brk {
                from: 0x1000,
                to: 0x7f00_0000_0000
            }
        );
        e.h.kind = event_kind::EV_MUNMAP as u32;
        assert!(matches!(
            decode(&bytes(&e)).unwrap().kind,
            EventKind::Munmap { len: 8192, .. }
        ));
        assert_eq!(stop(&bytes(&e)), None);
    }

    #[test]
    fn stop_records_are_not_events() {
        let e = stop_event {
            h: header(event_kind::EV_STOP, 7, 8, 9),
            reason: stop_reason::STOP_EXEC as u32,
            _pad: 0,
        };
        assert_eq!(
            stop(&bytes(&e)),
            Some(Stop {
                ts_ns: 9,
                pid: 7,
                tid: 8,
                why: StopWhy::Exec,
            })
        );
        assert!(decode(&bytes(&e)).is_err());
        assert_eq!(stop(&bytes(&e)[..10]), None);
    }

    #[test]
    fn decodes_exec_argv() {
        let mut e = exec_event {
            h: header(event_kind::EV_EXEC, 5, 5, 9),
            filename_len: 8,
            args_len: 12,
            filename: [0; 256],
            args: [0; 512],
        };
        for (i, c) in b"/bin/ls\0".iter().enumerate() {
            e.filename[i] = *c as _;
        }
        e.filename_len = 7;
        for (i, c) in b"ls\0-l\0/tmp\0".iter().enumerate() {
            e.args[i] = *c as _;
        }
        e.args_len = 11;
        let ev = decode(&bytes(&e)).unwrap();
        assert_eq!(
            ev.kind,
            EventKind::Exec(Exec {
                filename: "/bin/ls".into(),
                argv: vec!["ls".into(), "-l".into(), "/tmp".into()]
            })
        );
        e.args_len = 0;
        assert!(
            matches!(decode(&bytes(&e)).unwrap().kind, EventKind::Exec(Exec { ref argv, .. }) if argv.is_empty())
        );
        e.args_len = 100_000; // clamped, no panic
        decode(&bytes(&e)).unwrap();
    }

    /// `decode` turns the kernel's `enum alloc_func` (bpf/event.h) into `AllocFunc` (whose
    /// numbers are on disk) by number, so the two must pair up one to one with equal numbers.
    /// Both matches below are exhaustive: a value added on one side only fails to compile here.
    #[test]
    fn c_and_rust_alloc_func_numbers_agree() {
        use crate::sys::raw::alloc_func;
        macro_rules! pairs {
            ($($c:ident = $rust:ident,)*) => {
                fn rust_of(c: alloc_func) -> AllocFunc {
                    match c { $(alloc_func::$c => AllocFunc::$rust,)* }
                }
                fn c_of(rust: AllocFunc) -> alloc_func {
                    match rust { $(AllocFunc::$rust => alloc_func::$c,)* }
                }
                const PAIRS: usize = [$(stringify!($c)),*].len();
            };
        }
        pairs! {
            FUNC_MALLOC = Malloc,
            FUNC_CALLOC = Calloc,
            FUNC_REALLOC = Realloc,
            FUNC_REALLOCARRAY = Reallocarray,
            FUNC_ALIGNED_ALLOC = AlignedAlloc,
            FUNC_MEMALIGN = Memalign,
            FUNC_POSIX_MEMALIGN = PosixMemalign,
            FUNC_VALLOC = Valloc,
            FUNC_PVALLOC = Pvalloc,
            FUNC_FREE = Free,
            FUNC_NEW = New,
            FUNC_NEW_ARRAY = NewArray,
            FUNC_DELETE = Delete,
            FUNC_DELETE_ARRAY = DeleteArray,
            FUNC_MALLOCX = Mallocx,
            FUNC_RALLOCX = Rallocx,
            FUNC_DALLOCX = Dallocx,
            FUNC_ZALLOC = Zalloc,
            FUNC_CUSTOM_ALLOC = CustomAlloc,
            FUNC_CUSTOM_CALLOC = CustomCalloc,
            FUNC_CUSTOM_REALLOC = CustomRealloc,
            FUNC_CUSTOM_FREE = CustomFree,
        }
        // Every Rust function is in ALL (which `from_u8` reads), once.
        assert_eq!(AllocFunc::ALL.len(), PAIRS);
        for rust in AllocFunc::ALL {
            let c = c_of(rust);
            assert_eq!(c as u32, rust as u32, "{c:?} and {rust:?} differ in number");
            assert_eq!(rust_of(c), rust);
            // And the decoder itself reads the C number as its pair.
            let e = alloc_event {
                h: header(event_kind::EV_ALLOC, 1, 1, 1),
                func: c as u32,
                ..Default::default()
            };
            let kind = decode(&bytes(&e)).unwrap().kind;
            assert!(
                matches!(kind, EventKind::Alloc { func, .. } if func == rust),
                "{c:?} decodes as {kind:?}"
            );
        }
    }
}
