//! One record of a chunk payload: the `WireRecord` enum with its pinned variant numbers, and its
//! bytes both ways (postcard out, a hand reader for the common records in, postcard for the
//! rest).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::super::event::{
    Bench, Coverage, Exec, LeakScan, Lost, Module, RmapRegion, StackWalks, Symbol,
};

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
/// (version 2 appended 18 to 21, version 4 22 to 26).
///
/// `dt_ns` is always the delta from the previous event of the chunk; `daddr` the delta from the
/// current thread's previous address; `func` an `AllocFunc` number. The records with text carry
/// the event's own struct after `dt_ns` (postcard writes its fields in order, as the flat
/// variants of earlier versions did; tested below): borrowed when the writer encodes an event,
/// owned when the reader decodes one (`Text`), so neither side converts or restates them.
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
    Exec { dt_ns: i64, exec: Text<'a, Exec> },
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
    Lost { dt_ns: i64, lost: Text<'a, Lost> },
    /// 13: `Mmap`. Mapping addresses have a previous address of their own per thread
    /// (`ThreadState::map`), apart from the heap's, so neither spoils the other's deltas.
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
        coverage: Text<'a, Coverage>,
    },
    /// 18: `Control` `Start` (format version 2 on, as are the variants below).
    ControlStart { dt_ns: i64 },
    /// 19: `Control` `Stop`.
    ControlStop { dt_ns: i64 },
    /// 20: `Control` `Bench`.
    ControlBench { dt_ns: i64, bench: Text<'a, Bench> },
    /// 21: `Control` `Marker`: `kind` is a `MarkerKind` number.
    ControlMarker { dt_ns: i64, kind: u8 },
    /// 22: `Module` (format version 4 on, as are the variants below).
    Module {
        dt_ns: i64,
        module: Text<'a, Module>,
    },
    /// 23: `StackNode`: `did` is `id` minus the chunk's previous node id plus one (0 for the
    /// next id, as the trie hands them out), `dparent` is `id` minus `parent` (1 for a child
    /// created right after its parent); see `delta::NodeIds`.
    StackNode {
        dt_ns: i64,
        did: i32,
        dparent: i32,
        module: u32,
        offset: u64,
    },
    /// 24: `Symbol`.
    Symbol {
        dt_ns: i64,
        symbol: Text<'a, Symbol>,
    },
    /// 25: `StackStats`.
    StackStats { dt_ns: i64, walks: StackWalks },
    /// 26: `Alloc` by malloc with a stack id: nearly every malloc once stacks are recorded, so
    /// it costs the stack id's varint more than `Malloc`, not the function byte as well.
    MallocStack {
        dt_ns: i64,
        daddr: i64,
        size: u64,
        stack_id: u32,
    },
    /// 27: `LeakScan` (format version 5 on).
    LeakScan {
        dt_ns: i64,
        scan: Text<'a, LeakScan>,
    },
    /// 28: `Rmap` (format version 6 on): `member` an `RssMember` number, `daddr` from the
    /// thread's previous rmap address (a fault run maps page after page: 2 bytes each).
    Rmap {
        dt_ns: i64,
        member: u8,
        pages: i32,
        daddr: i64,
    },
    /// 29: `RmapRegion` (format version 6 on).
    RmapRegion {
        dt_ns: i64,
        region: Text<'a, RmapRegion>,
    },
    /// 30: `Fault` (format version 7 on): `member` an `RssMember` number, `daddr` from the
    /// thread's previous rmap address.
    Fault {
        dt_ns: i64,
        member: u8,
        pages: u32,
        daddr: i64,
        stack_id: u32,
    },
}

/// The event's own struct inside a record: borrowed from the event the writer encodes, or
/// owned (boxed) by the record the reader decodes. Either way it is the struct's bytes on disk.
/// Two words, not a `Cow`: the reader moves a record per event, and records are as small as
/// their common variants only if the rare ones with text hold a pointer (a `Cow` of `Module`
/// made every record 80 bytes and the reader 13% more instructions).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Text<'a, T> {
    Borrowed(&'a T),
    Owned(Box<T>),
}

impl<T: Clone> Text<'_, T> {
    /// The struct itself: moved out of its box, or cloned from what it borrowed.
    pub fn into_owned(self) -> T {
        match self {
            Text::Borrowed(t) => t.clone(),
            Text::Owned(t) => *t,
        }
    }
}

impl<T: Serialize> Serialize for Text<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Text::Borrowed(t) => t.serialize(s),
            Text::Owned(t) => t.serialize(s),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Text<'_, T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Box::<T>::deserialize(d).map(Text::Owned)
    }
}

/// The record at the start of `bytes` and its length: the common records by hand, any other
/// through postcard.
#[inline]
pub(super) fn take(bytes: &[u8]) -> postcard::Result<(WireRecord<'_>, usize)> {
    match take_common(bytes) {
        Some(common) => Ok(common),
        None => take_rare(bytes),
    }
}

/// Any other record, through postcard: out of line, so that its code (a deserializer for every
/// variant) stays out of the reader's loop over allocations.
#[cold]
#[inline(never)]
fn take_rare(bytes: &[u8]) -> postcard::Result<(WireRecord<'_>, usize)> {
    let (rec, after) = postcard::take_from_bytes::<WireRecord<'_>>(bytes)?;
    Ok((rec, bytes.len() - after.len()))
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

/// The records of allocations and resident memory (the thread records, the allocator records,
/// `MallocStack` and `Rss`: nearly all of a recording) read by hand, with their length; `None` for
/// any other record and for anything this cannot read, which then goes through postcard. Going
/// through serde for these was a third of the reader's time. Tests hold the two to the same
/// results. Each arm lists the fields in the variant's declared order, which is postcard's: a
/// struct expression evaluates its fields in the order written.
///
/// Always inlined (into `take`, and so into the decoder's loop): returned through memory, the
/// record was copied twice before the decoder read it (callgrind on a 2 M-event report: 1.496 G
/// instructions out of line, 1.420 G inlined).
#[inline(always)]
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
        26 => WireRecord::MallocStack {
            dt_ns: f.i64()?,
            daddr: f.i64()?,
            size: f.u64()?,
            stack_id: f.u32()?,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::event::SymbolFrame;
    use crate::testkit::record_bytes;
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
            let rec = match rng.below(11) {
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
                9 => WireRecord::MallocStack {
                    dt_ns: a as i64,
                    daddr: b as i64,
                    size: c,
                    stack_id: d as u32,
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
        let mut read = [0u32; 27];
        for _ in 0..200_000 {
            let len = 1 + rng.below(24) as usize;
            let mut bytes: Vec<u8> = (0..len)
                .map(|_| match rng.below(3) {
                    0 => 0x80 | rng.below(128) as u8,
                    1 => [0x00, 0x01, 0x02, 0x0f, 0x10, 0x7f, 0xff][rng.below(7) as usize],
                    _ => rng.below(256) as u8,
                })
                .collect();
            bytes[0] = [0, 1, 2, 3, 4, 5, 6, 7, 11, 26, 10][rng.below(11) as usize];
            if let Some((rec, n)) = take_common(&bytes) {
                read[bytes[0] as usize] += 1;
                let (theirs, rest) = postcard::take_from_bytes::<WireRecord<'_>>(&bytes)
                    .expect("postcard refuses what the hand decoder read");
                assert_eq!((theirs, bytes.len() - rest.len()), (rec, n), "{bytes:02x?}");
            }
        }
        for tag in [0, 1, 2, 3, 4, 5, 6, 7, 11, 26] {
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

    #[test]
    fn variant_numbers_are_pinned() {
        // These numbers are on disk; this test fails if a variant is moved or inserted.
        let cases: [(WireRecord<'_>, u8); 30] = [
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
                    exec: owned(Exec {
                        filename: String::new(),
                        argv: vec![],
                    }),
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
                    lost: owned(Lost {
                        cause: String::new(),
                        total: 0,
                    }),
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
                    coverage: owned(Coverage {
                        path: String::new(),
                        allocator: String::new(),
                        probes: 0,
                    }),
                },
                17,
            ),
            (WireRecord::ControlStart { dt_ns: 0 }, 18),
            (WireRecord::ControlStop { dt_ns: 0 }, 19),
            (
                WireRecord::ControlBench {
                    dt_ns: 0,
                    bench: owned(Bench {
                        uri: String::new(),
                        pid: 0,
                    }),
                },
                20,
            ),
            (WireRecord::ControlMarker { dt_ns: 0, kind: 0 }, 21),
            (
                WireRecord::Module {
                    dt_ns: 0,
                    module: owned(Module {
                        id: 0,
                        path: String::new(),
                        build_id: vec![],
                        dev: 0,
                        ino: 0,
                    }),
                },
                22,
            ),
            (
                WireRecord::StackNode {
                    dt_ns: 0,
                    did: 0,
                    dparent: 0,
                    module: 0,
                    offset: 0,
                },
                23,
            ),
            (
                WireRecord::Symbol {
                    dt_ns: 0,
                    symbol: owned(Symbol {
                        module: 0,
                        offset: 0,
                        frames: vec![],
                    }),
                },
                24,
            ),
            (
                WireRecord::StackStats {
                    dt_ns: 0,
                    walks: StackWalks::default(),
                },
                25,
            ),
            (
                WireRecord::MallocStack {
                    dt_ns: 0,
                    daddr: 0,
                    size: 0,
                    stack_id: 0,
                },
                26,
            ),
            (
                WireRecord::Rmap {
                    dt_ns: 0,
                    member: 0,
                    pages: 0,
                    daddr: 0,
                },
                28,
            ),
            (
                WireRecord::RmapRegion {
                    dt_ns: 0,
                    region: owned(RmapRegion {
                        start: 0,
                        end: 0,
                        what: String::new(),
                        name: String::new(),
                    }),
                },
                29,
            ),
            (
                WireRecord::Fault {
                    dt_ns: 0,
                    member: 0,
                    pages: 0,
                    daddr: 0,
                    stack_id: 0,
                },
                30,
            ),
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
        // The same malloc with stack 300 (varint ac 02): two bytes more, no function byte.
        let rec = WireRecord::MallocStack {
            dt_ns: 3000,
            daddr: -80,
            size: 64,
            stack_id: 300,
        };
        assert_eq!(
            record_bytes(&rec),
            [26, 0xf0, 0x2e, 0x9f, 0x01, 64, 0xac, 0x02]
        );
        // A build id is its length and its bytes, as postcard writes a byte string.
        let rec = WireRecord::Module {
            dt_ns: 0,
            module: owned(Module {
                id: 1,
                path: "/a".into(),
                build_id: vec![0xde, 0xad],
                dev: 2,
                ino: 3,
            }),
        };
        assert_eq!(
            record_bytes(&rec),
            [22, 0, 1, 2, b'/', b'a', 2, 0xde, 0xad, 2, 3]
        );
    }

    /// A string of a length near a varint boundary of its length prefix, some of it not ASCII.
    fn text(rng: &mut XorShift) -> String {
        let len = [0, 1, 2, 127, 128, 300, 16_384][rng.below(7) as usize];
        (0..len)
            .map(|_| if rng.below(9) == 0 { 'ü' } else { 'a' })
            .collect()
    }

    /// `rec`'s bytes are `old`'s: variant number `tag` then the old flat variant's fields, as
    /// postcard wrote them; and the reader takes them back to `rec`.
    fn owned<T>(t: T) -> Text<'static, T> {
        Text::Owned(Box::new(t))
    }

    fn same_bytes<T: Serialize>(tag: u8, old: &T, rec: WireRecord<'_>) {
        let mut flat = vec![tag];
        append(&mut flat, old).unwrap();
        assert_eq!(record_bytes(&rec), flat, "{rec:?}");
        assert_eq!(take(&flat).unwrap(), (rec, flat.len()));
    }

    #[test]
    fn shared_structs_write_the_bytes_of_the_flat_variants() {
        // Format versions up to 4 wrote these records as struct variants with their fields
        // inline; carrying the event's own struct instead must give the same bytes, or files
        // already written would misread. The old shapes are spelled here as they were declared
        // (postcard writes a struct variant as its number, then its fields in order).
        #[derive(Serialize)]
        struct FlatExec<'a> {
            dt_ns: i64,
            filename: &'a str,
            argv: Vec<&'a str>,
        }
        #[derive(Serialize)]
        struct FlatLost<'a> {
            dt_ns: i64,
            cause: &'a str,
            total: u64,
        }
        #[derive(Serialize)]
        struct FlatCoverage<'a> {
            dt_ns: i64,
            path: &'a str,
            allocator: &'a str,
            probes: u32,
        }
        #[derive(Serialize)]
        struct FlatBench<'a> {
            dt_ns: i64,
            uri: &'a str,
            pid: u32,
        }
        #[derive(Serialize)]
        struct FlatModule<'a> {
            dt_ns: i64,
            id: u32,
            path: &'a str,
            build_id: &'a [u8],
            dev: u32,
            ino: u64,
        }
        #[derive(Serialize)]
        struct FlatFrame<'a> {
            function: &'a str,
            file: &'a str,
            line: u32,
        }
        #[derive(Serialize)]
        struct FlatSymbol<'a> {
            dt_ns: i64,
            module: u32,
            offset: u64,
            frames: Vec<FlatFrame<'a>>,
        }
        #[derive(Serialize)]
        struct FlatStackStats {
            dt_ns: i64,
            walks: u64,
            truncated: u64,
            unknown: u64,
            unsupported: u64,
            collisions: u64,
            uncached: u64,
        }
        let mut rng = XorShift(0x57a7);
        for _ in 0..2_000 {
            let dt_ns = spread(&mut rng) as i64;
            let (a, b) = (spread(&mut rng), spread(&mut rng));
            let (s, t) = (text(&mut rng), text(&mut rng));
            let list: Vec<String> = (0..rng.below(4)).map(|_| text(&mut rng)).collect();

            let exec = Exec {
                filename: s.clone(),
                argv: list.clone(),
            };
            let old = FlatExec {
                dt_ns,
                filename: &s,
                argv: list.iter().map(String::as_str).collect(),
            };
            same_bytes(
                9,
                &old,
                WireRecord::Exec {
                    dt_ns,
                    exec: owned(exec),
                },
            );

            let lost = Lost {
                cause: s.clone(),
                total: a,
            };
            let old = FlatLost {
                dt_ns,
                cause: &s,
                total: a,
            };
            same_bytes(
                12,
                &old,
                WireRecord::Lost {
                    dt_ns,
                    lost: owned(lost),
                },
            );

            let coverage = Coverage {
                path: s.clone(),
                allocator: t.clone(),
                probes: b as u32,
            };
            let old = FlatCoverage {
                dt_ns,
                path: &s,
                allocator: &t,
                probes: b as u32,
            };
            let coverage = owned(coverage);
            same_bytes(17, &old, WireRecord::Coverage { dt_ns, coverage });

            let bench = Bench {
                uri: t.clone(),
                pid: a as u32,
            };
            let old = FlatBench {
                dt_ns,
                uri: &t,
                pid: a as u32,
            };
            let bench = owned(bench);
            same_bytes(20, &old, WireRecord::ControlBench { dt_ns, bench });

            let build_id: Vec<u8> = (0..rng.below(3) * 10).map(|i| (i * 37) as u8).collect();
            let module = Module {
                id: a as u32,
                path: s.clone(),
                build_id: build_id.clone(),
                dev: b as u32,
                ino: b,
            };
            let old = FlatModule {
                dt_ns,
                id: a as u32,
                path: &s,
                build_id: &build_id,
                dev: b as u32,
                ino: b,
            };
            let module = owned(module);
            same_bytes(22, &old, WireRecord::Module { dt_ns, module });

            let frames: Vec<SymbolFrame> = list
                .iter()
                .map(|f| SymbolFrame {
                    function: f.clone(),
                    file: t.clone(),
                    line: a as u32,
                })
                .collect();
            let symbol = Symbol {
                module: b as u32,
                offset: a,
                frames,
            };
            let old = FlatSymbol {
                dt_ns,
                module: b as u32,
                offset: a,
                frames: list
                    .iter()
                    .map(|f| FlatFrame {
                        function: f,
                        file: &t,
                        line: a as u32,
                    })
                    .collect(),
            };
            let symbol = owned(symbol);
            same_bytes(24, &old, WireRecord::Symbol { dt_ns, symbol });

            let mut v = || spread(&mut rng);
            let old = FlatStackStats {
                dt_ns,
                walks: v(),
                truncated: v(),
                unknown: v(),
                unsupported: v(),
                collisions: v(),
                uncached: v(),
            };
            let walks = StackWalks {
                walks: old.walks,
                truncated: old.truncated,
                unknown: old.unknown,
                unsupported: old.unsupported,
                collisions: old.collisions,
                uncached: old.uncached,
            };
            same_bytes(25, &old, WireRecord::StackStats { dt_ns, walks });
        }
    }
}
