//! The logical event model: what happened in the recorded process tree, with absolute values.
//!
//! The recorder decodes kernel records into these; the writer encodes them compactly (see
//! `wire`); the reader decodes them back; `report` and `dump` consume them. Nothing here knows
//! about BPF or about the on-disk encoding.

use serde::{Deserialize, Serialize};

/// One thing that happened, stamped with CLOCK_MONOTONIC nanoseconds and the thread that did it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Event {
    /// CLOCK_MONOTONIC, nanoseconds (the same clock as `Header::start_monotonic_ns`).
    pub ts_ns: u64,
    /// Process id (the kernel's tgid).
    pub pid: u32,
    /// Thread id (the kernel's pid).
    pub tid: u32,
    /// What happened.
    pub kind: EventKind,
}

/// The allocator entry point that produced an allocation event.
///
/// The discriminants are on disk: new functions go at the end, old ones keep their number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[repr(u8)]
pub enum AllocFunc {
    Malloc = 0,
    Calloc = 1,
    Realloc = 2,
    Reallocarray = 3,
    AlignedAlloc = 4,
    Memalign = 5,
    PosixMemalign = 6,
    Valloc = 7,
    Pvalloc = 8,
    Free = 9,
    /// C++ `operator new`, every non-array variant (nothrow, aligned), in any allocator.
    New = 10,
    /// C++ `operator new[]`, every variant.
    NewArray = 11,
    /// C++ `operator delete`, every non-array variant (sized, aligned, nothrow).
    Delete = 12,
    /// C++ `operator delete[]`, every variant.
    DeleteArray = 13,
    /// jemalloc `mallocx`.
    Mallocx = 14,
    /// jemalloc `rallocx`.
    Rallocx = 15,
    /// jemalloc `dallocx` and `sdallocx`.
    Dallocx = 16,
    /// mimalloc `mi_zalloc` and its aligned forms.
    Zalloc = 17,
    /// An allocating function named with `record --allocator SYMBOL=alloc(...)` or a preset
    /// (format version 3 on, as are the variants below). Which allocator it is, is the
    /// family the coverage record of its file names.
    CustomAlloc = 18,
    /// A `--allocator SYMBOL=calloc(...)` function.
    CustomCalloc = 19,
    /// A `--allocator SYMBOL=realloc(...)` function.
    CustomRealloc = 20,
    /// A `--allocator SYMBOL=free(...)` function.
    CustomFree = 21,
}

impl AllocFunc {
    /// Every function, in discriminant order.
    pub const ALL: [AllocFunc; 22] = [
        AllocFunc::Malloc,
        AllocFunc::Calloc,
        AllocFunc::Realloc,
        AllocFunc::Reallocarray,
        AllocFunc::AlignedAlloc,
        AllocFunc::Memalign,
        AllocFunc::PosixMemalign,
        AllocFunc::Valloc,
        AllocFunc::Pvalloc,
        AllocFunc::Free,
        AllocFunc::New,
        AllocFunc::NewArray,
        AllocFunc::Delete,
        AllocFunc::DeleteArray,
        AllocFunc::Mallocx,
        AllocFunc::Rallocx,
        AllocFunc::Dallocx,
        AllocFunc::Zalloc,
        AllocFunc::CustomAlloc,
        AllocFunc::CustomCalloc,
        AllocFunc::CustomRealloc,
        AllocFunc::CustomFree,
    ];

    /// The C name of the function.
    pub fn name(self) -> &'static str {
        match self {
            AllocFunc::Malloc => "malloc",
            AllocFunc::Calloc => "calloc",
            AllocFunc::Realloc => "realloc",
            AllocFunc::Reallocarray => "reallocarray",
            AllocFunc::AlignedAlloc => "aligned_alloc",
            AllocFunc::Memalign => "memalign",
            AllocFunc::PosixMemalign => "posix_memalign",
            AllocFunc::Valloc => "valloc",
            AllocFunc::Pvalloc => "pvalloc",
            AllocFunc::Free => "free",
            AllocFunc::New => "operator new",
            AllocFunc::NewArray => "operator new[]",
            AllocFunc::Delete => "operator delete",
            AllocFunc::DeleteArray => "operator delete[]",
            AllocFunc::Mallocx => "mallocx",
            AllocFunc::Rallocx => "rallocx",
            AllocFunc::Dallocx => "dallocx",
            AllocFunc::Zalloc => "mi_zalloc",
            AllocFunc::CustomAlloc => "custom alloc",
            AllocFunc::CustomCalloc => "custom calloc",
            AllocFunc::CustomRealloc => "custom realloc",
            AllocFunc::CustomFree => "custom free",
        }
    }

    /// The function with this on-disk number, if it is one we know.
    pub fn from_u8(v: u8) -> Option<AllocFunc> {
        AllocFunc::ALL.get(v as usize).copied()
    }
}

/// A resident-memory counter of an mm, as the kernel's `rss_stat` tracepoint names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[repr(u8)]
pub enum RssMember {
    File = 0,
    Anon = 1,
    SwapEntries = 2,
    Shmem = 3,
}

impl RssMember {
    /// Every member, in the kernel's order (MM_FILEPAGES, MM_ANONPAGES, MM_SWAPENTS, MM_SHMEMPAGES).
    pub const ALL: [RssMember; 4] = [
        RssMember::File,
        RssMember::Anon,
        RssMember::SwapEntries,
        RssMember::Shmem,
    ];

    /// The member with this kernel number, if it is one we know.
    pub fn from_u8(v: u8) -> Option<RssMember> {
        RssMember::ALL.get(v as usize).copied()
    }

    /// Lower-case name used in reports and JSON.
    pub fn name(self) -> &'static str {
        match self {
            RssMember::File => "file",
            RssMember::Anon => "anon",
            RssMember::SwapEntries => "swap",
            RssMember::Shmem => "shmem",
        }
    }
}

/// What an event says happened.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    /// A successful allocation of `size` requested bytes at `addr`. `realloc(NULL, n)` is an
    /// `Alloc` with `func: Realloc`. `stack_id` is the leaf `StackNode` id of its call
    /// stack, 0 when none was recorded (`record --no-stacks`, files before version 4).
    Alloc {
        func: AllocFunc,
        addr: u64,
        size: u64,
        stack_id: u32,
    },
    /// A release of `addr` (never 0: `free(NULL)` is not recorded). `realloc(p, 0)` that frees is
    /// a `Free` with `func: Realloc`.
    Free { func: AllocFunc, addr: u64 },
    /// A successful resize of the block at `old_addr` (both non-zero) to `size` bytes at `addr`,
    /// which may equal `old_addr`.
    Realloc {
        func: AllocFunc,
        old_addr: u64,
        addr: u64,
        size: u64,
        stack_id: u32,
    },
    /// An allocation call that returned failure (NULL, or non-zero from posix_memalign).
    AllocFailed { func: AllocFunc, size: u64 },
    /// The event's process created process `child` (fork, vfork or clone without CLONE_THREAD).
    Fork { child: u32 },
    /// The event's process executed a file.
    Exec(Exec),
    /// The event's process ended. `status` is the kernel's exit code: `(code << 8) | signal`,
    /// the form `waitpid` reports.
    Exit { status: i32 },
    /// A change of one resident counter of the process's mm: `delta_pages` signed, never
    /// clamped; `value_pages` the exact new absolute value. `by_owner` is false when another
    /// task made the change (a parent filling a child's counters at fork, reclaim, ...).
    Rss {
        member: RssMember,
        delta_pages: i64,
        value_pages: u64,
        by_owner: bool,
    },
    /// `pages` pages of one folio mapped into (positive) or unmapped from (negative) the
    /// process's page tables at user address `addr`, seen at the kernel's rmap functions
    /// (format version 6 on; bpf/rmap.bpf.c). `member` is File, Anon or Shmem. Pages a child
    /// inherits at fork are never added under its pid, so its sums may go negative.
    Rmap {
        member: RssMember,
        pages: i32,
        addr: u64,
    },
    /// `pages` pages of `member` (File, Anon or Shmem) made resident by a thread of the process in
    /// its own context (a page fault, or a syscall touching its memory), whose user stack was
    /// walked (format version 7 on; bpf/walk.bpf.c's fault_walk): `stack_id` the leaf node of
    /// that stack (the faulting instruction, or the syscall's caller; 0 if it could not be
    /// walked), `addr` the faulting address (0 where it is not known). Follows the `Rss` event of
    /// the same increase. With sampled stacks only some increases have one, each picked with
    /// probability `1 - exp(-pages * page size / R)`, as allocations are.
    ///
    /// A `Fault` of 0 `pages` (member Anon) is a write to a page the process inherited at fork
    /// and shares still (copy-on-write, which changes no counter: no `Rss` event), with the
    /// write's stack: from then on that page is the process's own (header feature
    /// `inherited_writes`).
    Fault {
        member: RssMember,
        pages: u32,
        addr: u64,
        stack_id: u32,
    },
    /// The mapping [start, end) of the process that the following `Rmap` events at its
    /// addresses fall into (format version 6 on), sent the first time one does.
    RmapRegion(RmapRegion),
    /// Events lost so far for one cause.
    Lost(Lost),
    /// A successful `mmap` of `len` bytes (as requested, not rounded to pages) at `addr`, with
    /// its `PROT_*` and `MAP_*` bits.
    Mmap {
        addr: u64,
        len: u64,
        prot: u32,
        flags: u32,
    },
    /// A successful `munmap` of `len` bytes at `addr`.
    Munmap { addr: u64, len: u64 },
    /// A successful `mremap` of `old_len` bytes at `old_addr` to `len` bytes at `addr`.
    Mremap {
        old_addr: u64,
        old_len: u64,
        addr: u64,
        len: u64,
    },
    /// `brk` moved the program break from `from` to `to`.
    Brk { from: u64, to: u64 },
    /// The recorder scanned an executable file the event's process mapped.
    Coverage(Coverage),
    /// A command the benchmark harness sent on the control FIFO (docs/control-protocol.md),
    /// stamped when the recorder acted on it, and written after every event the ring held by
    /// then. pid and tid are 0: the recorder wrote it, not a process of the tree.
    Control { command: ControlCommand },
    /// An executable file the recorder built an unwind table for, which stack frames name
    /// (format version 4 on, as are the kinds below).
    Module(Module),
    /// One node of the recording's call-stack trie. `parent` 0 is the root. Nodes go from the
    /// outermost frame (near main/_start) down to the innermost (the allocator's own frame, the
    /// leaf). `offset` is a file offset in module `module` that lies INSIDE the instruction of
    /// interest: the allocator entry site for the leaf, and (return address - 1), i.e. inside
    /// the call instruction, for every caller frame; so symbolizing `offset` as is gives the
    /// right line. Written before the first event that refers to it. pid/tid 0.
    StackNode {
        id: u32,
        parent: u32,
        module: u32,
        offset: u64,
    },
    /// What one offset of a module is: its functions, files and lines.
    Symbol(Symbol),
    /// Stack-walk counters from the kernel, written at the end of `record` (cumulative, the
    /// last one wins).
    StackStats(StackWalks),
    /// The reachability scan of the event's process, held at the C library's `_exit` before
    /// its memory went away (format version 5 on): written before its `Exit`.
    LeakScan(LeakScan),
}

// The records below are the fields of the event kinds that carry text or lists, each stated
// once: the event holds the struct, and so does its record on disk (`wire::WireRecord`, which
// the writer fills with a borrowed one and the reader with one it owns). postcard writes a
// struct as its fields in order, exactly as it wrote the struct variants these replaced, so
// the field order is on disk: fields never move, and new ones never go here (tests in
// `wire::record` hold each to the old variant's bytes).

/// `EventKind::Exec`: the event's process executed `filename` with `argv` (possibly cut short
/// by the recorder).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exec {
    pub filename: String,
    pub argv: Vec<String>,
}

/// `EventKind::RmapRegion`: the mapping [start, end), what it is (`what`: "anon", "heap",
/// "stack", "file" or "shmem") and, for a file or shmem mapping, the file's path as
/// `/proc/PID/map_files` gave it while the process lived, or else (format 6 files of memtrack
/// before it read the path, a process gone before the record was drained) the file's name, its
/// last path component as the kernel's dentry holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RmapRegion {
    pub start: u64,
    pub end: u64,
    pub what: String,
    pub name: String,
}

/// `EventKind::Lost`: the cumulative count of events lost for `cause` so far (written when it
/// changes, so a file cut short still says what was lost before the cut).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lost {
    pub cause: String,
    pub total: u64,
}

/// `EventKind::Coverage`: the recorder scanned the executable file `path` when the event's
/// process mapped it: the allocators it found there (`allocator`, e.g. "glibc", "jemalloc",
/// "c++", several joined by `+`, or "none") and how many probes it attached to the file (0 when
/// none, or when attaching failed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coverage {
    pub path: String,
    pub allocator: String,
    pub probes: u32,
}

/// `EventKind::Module`: an executable file the recorder scanned and built an unwind table for;
/// stack frames name it by `id` (ids from 1; 0 and `MODULE_MARK` are reserved). `build_id` is
/// its GNU build id (empty when it has none; hex in `memtrack dump`), `dev` and `ino` the
/// file's identity (`dev` the kernel's internal form, major << 20 | minor, as
/// `record::discover` keys files). pid/tid of the event: the process that mapped it first,
/// tid 0.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Module {
    pub id: u32,
    pub path: String,
    #[serde(serialize_with = "build_id")]
    pub build_id: Vec<u8>,
    pub dev: u32,
    pub ino: u64,
}

/// `EventKind::Symbol`: what `offset` of `module` is, written at the end of `record` for every
/// (module, offset) some `StackNode` uses (unless `record --no-symbols`): `frames` innermost
/// first, i.e. the inlined function first and the function it was inlined into last; empty
/// when nothing is known.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Symbol {
    pub module: u32,
    pub offset: u64,
    pub frames: Vec<SymbolFrame>,
}

/// The most lost blocks whose addresses one `LeakScan` lists; the rest are counted only.
pub const LEAK_SCAN_MAX_LISTED: usize = 2048;

/// `EventKind::LeakScan`: what the recorder found when it scanned a process's memory at its
/// exit, conservatively (any aligned word pointing into a live block, interior pointers
/// included, reaches it), from the roots (writable mappings without heap blocks, each thread's
/// stack from its stack pointer up, registers). Blocks counted are the process's own (those it
/// allocated and had not freed, the report's "leaked at exit"). The field order is on disk.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeakScan {
    /// "" when the scan ran; else why it could not, and the process counts as not scanned.
    pub failure: String,
    /// Threads of the process at the scan.
    pub threads: u32,
    /// Threads whose registers were read (ptrace); the others' stacks were scanned whole.
    pub registers: u32,
    /// Blocks no root reaches, directly or through other blocks: definitely lost.
    pub lost_blocks: u64,
    pub lost_bytes: u64,
    /// Blocks some root reaches: still reachable.
    pub reachable_blocks: u64,
    pub reachable_bytes: u64,
    /// Bytes of memory read: roots and reached blocks.
    pub scanned_bytes: u64,
    /// From the stop to the end of the scan, ns.
    pub duration_ns: u64,
    /// Addresses of lost blocks, at most `LEAK_SCAN_MAX_LISTED`, lowest first.
    pub lost: Vec<u64>,
}

/// How the kernel's stack walks ended, over the whole recording (`EventKind::StackStats`): the
/// field order is on disk (postcard writes a struct as its fields in order, exactly as it wrote
/// the struct variant this replaced), so fields never move and new ones never go here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackWalks {
    /// Walks made (one per new call of an outermost allocator).
    pub walks: u64,
    /// Walks that reached the depth limit: the stack is cut, marked `[truncated]`.
    pub truncated: u64,
    /// Walks that ended at a pc no unwind table covers: marked `[unknown]`.
    pub unknown: u64,
    /// Walks that ended at unwind rules the walk cannot compute: marked `[unsupported]`.
    pub unsupported: u64,
    /// Stack hash collisions detected.
    pub collisions: u64,
    /// Stacks sent without deduplication because the kernel's stack map was full.
    pub uncached: u64,
}

/// One function of a symbolized stack frame (see `Symbol`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SymbolFrame {
    /// The function's name, demangled (C++, Rust); "" when unknown.
    pub function: String,
    /// The source file; "" when unknown.
    pub file: String,
    /// The source line; 0 when unknown.
    pub line: u32,
}

/// Module id of the pseudo-frame that ends a walk that did not reach the outermost frame; its
/// `offset` says why: `MARK_TRUNCATED` depth limit reached, `MARK_UNKNOWN` a pc no unwind table
/// covers, `MARK_UNSUPPORTED` CFI the walk cannot compute. It is the outermost frame of such a
/// stack (first child of the root), so a flame graph shows "[truncated]" on top.
pub const MODULE_MARK: u32 = u32::MAX;
/// `offset` of a `MODULE_MARK` frame: the walk reached its depth limit.
pub const MARK_TRUNCATED: u64 = 1;
/// `offset` of a `MODULE_MARK` frame: the walk ended at a pc no unwind table covers.
pub const MARK_UNKNOWN: u64 = 2;
/// `offset` of a `MODULE_MARK` frame: the walk ended at CFI it cannot compute.
pub const MARK_UNSUPPORTED: u64 = 3;
/// `offset` of a `MODULE_MARK` frame, the only frame of its stack: the allocation's stack was
/// sampled but could not be taken (the ring was full, no memory for the walk).
pub const MARK_NO_STACK: u64 = 4;

/// A build id as lower-case hex in JSON (`memtrack dump`): what `file` and `readelf -n`
/// print, not an array of numbers. On disk (postcard, not human-readable) it is a byte string,
/// as before.
fn build_id<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    if !s.is_human_readable() {
        return s.serialize_bytes(bytes);
    }
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    s.serialize_str(&out)
}

/// `PROT_EXEC`, `MAP_SHARED`, `MAP_ANONYMOUS` as Linux numbers them (the same on every
/// architecture memtrack supports), for reading `EventKind::Mmap` flags.
pub mod map_bits {
    /// Pages may be executed.
    pub const PROT_EXEC: u32 = 0x4;
    /// Changes are shared with other mappings of the object.
    pub const MAP_SHARED: u32 = 0x1;
    /// Not backed by a file.
    pub const MAP_ANONYMOUS: u32 = 0x20;
}

/// What a harness told the recorder (format version 2 on).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "name", rename_all = "snake_case")]
pub enum ControlCommand {
    /// Measuring starts: allocator calls are recorded from this moment (the gate is open).
    Start,
    /// Measuring stops: allocator calls are not recorded from this moment (the gate is closed).
    Stop,
    /// A benchmark runs from now on.
    Bench(Bench),
    /// A point in the harness's own loop.
    Marker { kind: MarkerKind },
}

/// `ControlCommand::Bench`: benchmark `uri` runs in process `pid` (and its descendants) from
/// now on; `pid` 0 means "every process of the recording".
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bench {
    pub uri: String,
    pub pid: u32,
}

/// The points of a harness's loop a marker can name.
///
/// The discriminants are on disk: new kinds go at the end, old ones keep their number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum MarkerKind {
    SampleStart = 0,
    SampleEnd = 1,
    RoundStart = 2,
    RoundEnd = 3,
}

impl MarkerKind {
    /// Every kind, in discriminant order.
    pub const ALL: [MarkerKind; 4] = [
        MarkerKind::SampleStart,
        MarkerKind::SampleEnd,
        MarkerKind::RoundStart,
        MarkerKind::RoundEnd,
    ];

    /// The kind with this on-disk number, if it is one we know.
    pub fn from_u8(v: u8) -> Option<MarkerKind> {
        MarkerKind::ALL.get(v as usize).copied()
    }

    /// The name used by the control protocol and in JSON ("sample_start", ...).
    pub fn name(self) -> &'static str {
        match self {
            MarkerKind::SampleStart => "sample_start",
            MarkerKind::SampleEnd => "sample_end",
            MarkerKind::RoundStart => "round_start",
            MarkerKind::RoundEnd => "round_end",
        }
    }

    /// The kind named `name`, as [`MarkerKind::name`] spells it.
    pub fn from_name(name: &str) -> Option<MarkerKind> {
        MarkerKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// `Header::features` entry of a recording made with a control FIFO whose measuring gate was
/// closed at the start (`record --control`): allocator events are recorded between the
/// harness's `start` and `stop` only.
pub const FEATURE_CONTROL: &str = "control";

/// `Header::features` entry of a recording with call stacks (not `record --no-stacks`).
pub const FEATURE_STACKS: &str = "stacks";

/// `Header::features` entry of a recording whose stacks were sampled (`record
/// --stack-sample`, the default): `stack_sample:MEAN:SEED`, MEAN the mean requested bytes between
/// two walked allocations and SEED the draws' seed. Allocations then carry stack id 0 when their
/// stack was not walked, and the sites' values are estimates (docs/PERFORMANCE.md, "Sampled stacks"). Without it, every
/// allocation's stack was walked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackSampleFeature {
    pub mean_bytes: u64,
    pub seed: u64,
}

impl StackSampleFeature {
    const PREFIX: &'static str = "stack_sample:";

    /// The sampling a recording's header states, if any.
    pub fn of(features: &[String]) -> Option<StackSampleFeature> {
        features.iter().find_map(|f| {
            let (mean, seed) = f.strip_prefix(Self::PREFIX)?.split_once(':')?;
            Some(StackSampleFeature {
                mean_bytes: mean.parse().ok().filter(|&m| m > 0)?,
                seed: seed.parse().ok()?,
            })
        })
    }
}

impl std::fmt::Display for StackSampleFeature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}:{}", Self::PREFIX, self.mean_bytes, self.seed)
    }
}

/// `Header::features` entry of a recording that sampled the stacks of the pages its processes
/// made resident (format version 7 on): `fault_sample:MEAN`, the mean bytes made resident between
/// two walked increases. Without it, a recording that sampled its stacks sampled its faults
/// with the allocations' mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultSampleFeature {
    pub mean_bytes: u64,
}

impl FaultSampleFeature {
    const PREFIX: &'static str = "fault_sample:";

    /// The sampling of faults a recording's header states, if any.
    pub fn of(features: &[String]) -> Option<FaultSampleFeature> {
        features.iter().find_map(|f| {
            let mean = f
                .strip_prefix(Self::PREFIX)?
                .parse()
                .ok()
                .filter(|&m| m > 0)?;
            Some(FaultSampleFeature { mean_bytes: mean })
        })
    }
}

impl std::fmt::Display for FaultSampleFeature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", Self::PREFIX, self.mean_bytes)
    }
}

/// `Header::features` entry of a recording that scanned each process for leaks at its normal
/// exit (format version 5 on, not `record --no-leak-scan`): a process that ended without a
/// `LeakScan` record was not scanned (killed, exec, a static program without symbols).
pub const FEATURE_LEAK_SCAN: &str = "leak_scan";

/// `Header::features` entry of a recording that walked the stacks of its processes' writes to
/// pages they inherited at fork (`Fault` events of 0 pages; format version 7, memtrack 0.1 after
/// issue 35's fork support): without it, a child's "[inherited]" resident pages are all it got
/// at fork, written or not.
pub const FEATURE_INHERITED_WRITES: &str = "inherited_writes";

/// `Header::features` entry of a recording made with a control FIFO whose gate was open at the
/// start (`record --control --start-running`).
pub const FEATURE_CONTROL_RUNNING: &str = "control_running";

/// What a recording says about itself at its start.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// Version of the memtrack that wrote the file (CARGO_PKG_VERSION).
    pub memtrack_version: String,
    /// `uname -r` of the recording machine.
    pub kernel_release: String,
    /// Host name of the recording machine.
    pub hostname: String,
    /// Page size in bytes (for converting resident pages).
    pub page_size_bytes: u32,
    /// The recorded command line.
    pub argv: Vec<String>,
    /// Pid of the recorded command (the root of the tree).
    pub root_pid: u32,
    /// CLOCK_MONOTONIC at the start, nanoseconds.
    pub start_monotonic_ns: u64,
    /// Wall clock at the start, nanoseconds since the Unix epoch.
    pub start_wall_ns: u64,
    /// Size of the kernel ring buffer, bytes.
    pub ring_size_bytes: u64,
    /// What was recorded, e.g. "alloc", "rss"; a report can say what it cannot know.
    pub features: Vec<String>,
}

/// A count of lost events for one cause.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LostCount {
    /// Why the events were lost (e.g. "ring_full").
    pub cause: String,
    /// How many.
    pub count: u64,
}

/// What a recording says about itself at its end.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trailer {
    /// CLOCK_MONOTONIC at the end, nanoseconds.
    pub end_monotonic_ns: u64,
    /// Events written to the file.
    pub events: u64,
    /// Chunks written to the file.
    pub chunks: u64,
    /// Events lost while recording, per cause (only causes with a non-zero count).
    pub lost: Vec<LostCount>,
    /// The recorded command's exit code as memtrack returned it (128+N for signal N).
    pub exit_code: i32,
}

/// How reading a recording ended, known once the reader has yielded its last event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadEnd {
    /// Every chunk and the trailer were read and checked.
    Complete(Trailer),
    /// Reading stopped early at byte `offset`: a torn or corrupt chunk, or no trailer (the
    /// recorder was killed). Every event before `offset` was yielded.
    Damaged { offset: u64, reason: String },
}
