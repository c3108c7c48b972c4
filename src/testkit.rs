//! The unit tests' kit: short builders for headers and events so each test reads as the story it
//! checks, and lookups into the resulting report. Every module's tests build their synthetic
//! streams here rather than each writing its own.
//!
//! Test-only (`#[cfg(test)]` in `lib.rs`); nothing outside the tests sees it.

use crate::format::{
    AllocFunc, Bench, ControlCommand, Event, EventKind, Exec, Header, Lost, MarkerKind, Module,
    RssMember, StackWalks, Symbol, SymbolFrame,
};

pub use crate::analyze::accounting::analyze;
use crate::model::metrics::{HeapMetrics, Metrics, ProcessMetrics, Report};
use crate::model::sites::{SiteFrame, StackSampling};

/// Start of the synthetic recordings (CLOCK_MONOTONIC ns); event times are relative to it.
pub const START: u64 = 1_000_000;

/// A site's frame: `function` in `/bin/p`, from source `file` (line 1; 0 without a file).
pub fn site_frame(function: &str, file: &str) -> SiteFrame {
    SiteFrame {
        function: function.to_string(),
        file: file.to_string(),
        line: if file.is_empty() { 0 } else { 1 },
        module: "/bin/p".to_string(),
        offset: 0x10,
        inlined: false,
    }
}

/// How a recording that sampled its stacks says so (issue 32): 1 walk per 512 KiB on average,
/// 1200 of 52000 allocations walked, for the views' marks of estimated values.
pub fn stack_sampling() -> StackSampling {
    StackSampling {
        mean_bytes: 512 * 1024,
        seed: 7,
        sampled_allocations: 1200,
        allocations: 52000,
    }
}

/// How the views mark [`stack_sampling`]'s values (`views::words::estimates`).
pub const SAMPLED: &str =
    "estimates: values estimated from 1200 sampled allocations of 52000, 1 per 512.0 KiB";

/// [`SAMPLED`] with what to do for exact values (`views::words::estimates_note`).
pub const SAMPLED_NOTE: &str = "estimates: values estimated from 1200 sampled allocations of \
     52000, 1 per 512.0 KiB; record with --stacks for exact values";

/// `text` with `line` inserted right after the first `after` in it: a view's output with a
/// mark added, for tests that the mark is all that changed.
pub fn inserted_after(text: &str, after: &str, line: &str) -> String {
    let at = text.find(after).expect(after) + after.len();
    format!("{}{line}{}", &text[..at], &text[at..])
}

/// A header whose root is pid 1 running `/bin/root arg`, 4 KiB pages.
pub fn header() -> Header {
    Header {
        root_pid: 1,
        argv: vec!["/bin/root".into(), "arg".into()],
        start_monotonic_ns: START,
        page_size_bytes: 4096,
        ..Header::default()
    }
}

/// An event `t` ns after the start, by thread `tid` of process `pid`.
pub fn at(t: u64, pid: u32, tid: u32, kind: EventKind) -> Event {
    Event {
        ts_ns: START + t,
        pid,
        tid,
        kind,
    }
}

/// Events of process 1, thread 1, one nanosecond apart from the start.
pub fn seq(kinds: Vec<EventKind>) -> Vec<Event> {
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, k)| at(i as u64, 1, 1, k))
        .collect()
}

/// `malloc` returning `addr`.
pub fn malloc(addr: u64, size: u64) -> EventKind {
    EventKind::Alloc {
        func: AllocFunc::Malloc,
        addr,
        size,
        stack_id: 0,
    }
}

/// `free(addr)`.
pub fn free(addr: u64) -> EventKind {
    EventKind::Free {
        func: AllocFunc::Free,
        addr,
    }
}

/// `realloc(old_addr, size)` returning `addr`.
pub fn realloc(old_addr: u64, addr: u64, size: u64) -> EventKind {
    EventKind::Realloc {
        func: AllocFunc::Realloc,
        old_addr,
        addr,
        size,
        stack_id: 0,
    }
}

/// `malloc` returning `addr`, called from the stack whose leaf node is `stack`.
pub fn malloc_from(stack: u32, addr: u64, size: u64) -> EventKind {
    EventKind::Alloc {
        func: AllocFunc::Malloc,
        addr,
        size,
        stack_id: stack,
    }
}

/// `realloc(old_addr, size)` returning `addr`, called from the stack whose leaf is `stack`.
pub fn realloc_from(stack: u32, old_addr: u64, addr: u64, size: u64) -> EventKind {
    EventKind::Realloc {
        func: AllocFunc::Realloc,
        old_addr,
        addr,
        size,
        stack_id: stack,
    }
}

/// The executable file `path` as stack module `id`.
pub fn module(id: u32, path: &str) -> EventKind {
    EventKind::Module(Module {
        id,
        path: path.into(),
        build_id: vec![0xab, 0xcd],
        dev: 8,
        ino: u64::from(id) + 100,
    })
}

/// Stack trie node `id` under `parent` (0: the root): file offset `offset` of module `module`.
pub fn stack_node(id: u32, parent: u32, module: u32, offset: u64) -> EventKind {
    EventKind::StackNode {
        id,
        parent,
        module,
        offset,
    }
}

/// The symbols of `offset` in `module`: `frames` as (function, file, line), innermost first.
pub fn symbol(module: u32, offset: u64, frames: &[(&str, &str, u32)]) -> EventKind {
    EventKind::Symbol(Symbol {
        module,
        offset,
        frames: frames
            .iter()
            .map(|&(function, file, line)| SymbolFrame {
                function: function.into(),
                file: file.into(),
                line,
            })
            .collect(),
    })
}

/// Stack-walk counters: walks, truncated, unknown, unsupported, collisions, uncached.
pub fn stack_stats(counts: [u64; 6]) -> EventKind {
    let [walks, truncated, unknown, unsupported, collisions, uncached] = counts;
    EventKind::StackStats(StackWalks {
        walks,
        truncated,
        unknown,
        unsupported,
        collisions,
        uncached,
    })
}

/// A process at `depth` running `argv`, its executable argv[0], with no metrics.
pub fn process_running(pid: u32, depth: u32, argv: &[&str]) -> ProcessMetrics {
    ProcessMetrics {
        pid,
        parent_pid: None,
        depth,
        executable: argv.first().map(|a| a.to_string()),
        argv: argv.iter().map(|a| a.to_string()).collect(),
        execs: 1,
        started_at_ns: 0,
        exit: None,
        own: Metrics::default(),
        tree: Metrics::default(),
    }
}

/// A trie of two stacks below main: leaf 2 is malloc called by make_a, leaf 4 malloc called by
/// make_b, inlined into main; libc is module 1, the program module 2.
pub fn two_sites_trie() -> Vec<EventKind> {
    vec![
        module(1, "/usr/lib/x86_64-linux-gnu/libc.so.6"),
        module(2, "/work/app"),
        stack_node(1, 0, 2, 0x1100),
        stack_node(2, 1, 1, 0x9a1b0),
        stack_node(3, 0, 2, 0x1200),
        stack_node(4, 3, 1, 0x9a1b0),
    ]
}

/// The report of [`two_sites_trie`]'s sites, of the sites pass with `options`: process 1 (the
/// header's `/bin/root arg`) allocates 64 bytes from leaf 2 and 32 from leaf 4, then exits
/// with both.
pub fn two_sites_report(options: crate::analyze::stacks::SiteOptions) -> Report {
    let mut events = stack_prelude(two_sites_trie());
    events.extend(seq(vec![
        malloc_from(2, 0x10, 64),
        malloc_from(4, 0x20, 32),
        exit(0),
    ]));
    let scope = crate::model::metrics::Scope::Run;
    crate::analyze::accounting::analyze_sites(&header(), events, None, &scope, options)
}

/// Makes one block of `bytes` at the first site of `report` definitely lost, as a recording
/// with leak scans has it: in the site and in the totals the leak limits and pages read.
pub fn lost_at_first_site(report: &mut Report, bytes: u64) {
    let lost = crate::model::metrics::Blocks { blocks: 1, bytes };
    report.totals.heap.leaks = Some(crate::model::metrics::LeakMetrics {
        definitely_lost: lost,
        ..Default::default()
    });
    let site = &mut report.stacks.as_mut().expect("sites").sites[0];
    (site.lost_blocks, site.lost_bytes) = (lost.blocks, lost.bytes);
}

/// Stack events at the start of a recording (pid/tid 0, as the recorder writes them).
pub fn stack_prelude(kinds: Vec<EventKind>) -> Vec<Event> {
    kinds.into_iter().map(|k| at(0, 0, 0, k)).collect()
}

/// A failed `malloc(size)`.
pub fn failed(size: u64) -> EventKind {
    EventKind::AllocFailed {
        func: AllocFunc::Malloc,
        size,
    }
}

/// The event's process forked `child`.
pub fn fork(child: u32) -> EventKind {
    EventKind::Fork { child }
}

/// The event's process exited with kernel status `status`.
pub fn exit(status: i32) -> EventKind {
    EventKind::Exit { status }
}

/// The event's process executed `file` with arguments `file -x`.
pub fn exec(file: &str) -> EventKind {
    EventKind::Exec(Exec {
        filename: file.into(),
        argv: vec![file.into(), "-x".into()],
    })
}

/// A resident counter change.
pub fn rss(member: RssMember, delta_pages: i64, value_pages: u64, by_owner: bool) -> EventKind {
    EventKind::Rss {
        member,
        delta_pages,
        value_pages,
        by_owner,
    }
}

/// Cumulative loss count for `cause`.
pub fn lost(cause: &str, total: u64) -> EventKind {
    EventKind::Lost(Lost {
        cause: cause.into(),
        total,
    })
}

/// A control command as the recorder writes it: at `t`, from pid 0.
pub fn control(t: u64, command: ControlCommand) -> Event {
    at(t, 0, 0, EventKind::Control { command })
}

/// `start` at `t`.
pub fn start(t: u64) -> Event {
    control(t, ControlCommand::Start)
}

/// `stop` at `t`.
pub fn stop(t: u64) -> Event {
    control(t, ControlCommand::Stop)
}

/// `bench URI PID` at `t`.
pub fn bench(t: u64, uri: &str, pid: u32) -> Event {
    control(
        t,
        ControlCommand::Bench(Bench {
            uri: uri.into(),
            pid,
        }),
    )
}

/// `marker KIND` at `t`.
pub fn marker(t: u64, kind: MarkerKind) -> Event {
    control(t, ControlCommand::Marker { kind })
}

/// The report of `events` under [`header`], with no end information.
pub fn run(events: Vec<Event>) -> Report {
    analyze(&header(), events, None)
}

/// The first process with `pid`.
pub fn process(report: &Report, pid: u32) -> &ProcessMetrics {
    report
        .processes
        .iter()
        .find(|p| p.pid == pid)
        .unwrap_or_else(|| panic!("no process {pid} in the report"))
}

/// The heap metrics of `pid` alone.
pub fn own(report: &Report, pid: u32) -> &HeapMetrics {
    &process(report, pid).own.heap
}

/// The heap metrics of the tree of `pid`.
pub fn tree(report: &Report, pid: u32) -> &HeapMetrics {
    &process(report, pid).tree.heap
}

/// `count` events for benchmarks: a fork tree of 3 processes with 4 threads each, taking turns
/// in runs of 64 allocation/free pairs; each thread frees the block it allocated `live` pairs
/// earlier, so about 12 x `live` blocks stay live.
pub fn benchmark_events(count: u64, live: u64) -> impl Iterator<Item = Event> {
    let live = live.max(1);
    let mut next_block = [0u64; 12];
    (0..count).map(move |i| {
        let ts_ns = START + i * 10;
        if i < 2 {
            return Event {
                ts_ns,
                pid: 1,
                tid: 10,
                kind: fork(2 + i as u32),
            };
        }
        let pair = i / 2;
        let thread = (pair / 64 % 12) as usize;
        let pid = 1 + thread as u32 / 4;
        let tid = pid * 10 + thread as u32 % 4;
        let base = 0x7f00_0000_0000 + ((thread as u64) << 32);
        let k = next_block[thread];
        let kind = if i % 2 == 0 {
            malloc(base + (k % live) * 48, 16 + (i % 200))
        } else {
            next_block[thread] += 1;
            // The slot the thread's next allocation reuses: allocated `live` - 1 pairs ago.
            free(base + ((k + 1) % live) * 48)
        };
        Event {
            ts_ns,
            pid,
            tid,
            kind,
        }
    })
}

// --- format: the recording's own builders (headers and trailers with every field set, events at
// absolute times, chunk payloads encoded and decoded, outputs that fail) for format/* and dump.

use std::io;

use crate::format::wire::{append, ChunkDecoder, ChunkEncoder, DecodeFault, WireRecord};
use crate::format::{LostCount, Trailer};

/// An event at `ts_ns` itself (not relative to [`START`]), by thread `tid` of process `pid`.
pub fn ev(ts_ns: u64, pid: u32, tid: u32, kind: EventKind) -> Event {
    Event {
        ts_ns,
        pid,
        tid,
        kind,
    }
}

/// A header with every field set, strings included, for round trips through the file.
pub fn full_header() -> Header {
    Header {
        memtrack_version: "0.1.0".into(),
        kernel_release: "6.8.0-test".into(),
        hostname: "runner".into(),
        page_size_bytes: 4096,
        argv: vec!["cargo".into(), "bench".into()],
        root_pid: 4242,
        start_monotonic_ns: 1_000_000_000,
        start_wall_ns: 1_700_000_000_000_000_000,
        ring_size_bytes: 64 << 20,
        features: vec!["alloc".into(), "rss".into()],
    }
}

/// A trailer with a loss count (its event and chunk counts are the writer's to fill in).
pub fn full_trailer() -> Trailer {
    Trailer {
        end_monotonic_ns: 9_000_000_000,
        events: 0,
        chunks: 0,
        lost: vec![LostCount {
            cause: "ring_full".into(),
            count: 3,
        }],
        exit_code: 0,
    }
}

/// `events` encoded as one chunk payload.
pub fn encode_chunk(events: &[Event]) -> Vec<u8> {
    let mut enc = ChunkEncoder::default();
    let mut out = Vec::new();
    for e in events {
        enc.encode(e, &mut out).unwrap();
    }
    out
}

/// Every event of one chunk payload, or the first fault.
pub fn decode_chunk(payload: &[u8]) -> Result<Vec<Event>, DecodeFault> {
    let mut dec = ChunkDecoder::default();
    let mut pos = 0;
    let mut events = Vec::new();
    while pos < payload.len() {
        events.push(dec.next_event(payload, &mut pos)?);
    }
    Ok(events)
}

/// The bytes of one record.
pub fn record_bytes(rec: &WireRecord<'_>) -> Vec<u8> {
    let mut v = Vec::new();
    append(&mut v, rec).unwrap();
    v
}

/// An output that accepts `left` bytes, then fails every write with `error`.
pub struct FailingOutput {
    /// Bytes still accepted.
    pub left: usize,
    /// What the writes after those fail with.
    pub error: io::ErrorKind,
}

impl io::Write for FailingOutput {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Err(io::Error::from(self.error));
        }
        let n = b.len().min(self.left);
        self.left -= n;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// This process's peak resident memory, as the `VmHWM:` line of /proc/self/status (empty when
/// unreadable): what the throughput benchmarks print beside their speed.
pub fn peak_resident() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM"))
                .map(str::to_string)
        })
        .unwrap_or_default()
}

/// A recording on disk, removed when dropped.
pub struct TempRecording(pub std::path::PathBuf);

impl Drop for TempRecording {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Bytes of a real recording (written by `format::Writer`): root 1 allocates 100 and 50
/// bytes, frees the 50, forks 2, which allocates 3000 bytes and exits with them; 1 exits.
pub fn recording_bytes() -> Vec<u8> {
    use crate::format::{Trailer, Writer};
    let events = [
        at(10, 1, 1, malloc(0x10, 100)),
        at(20, 1, 1, malloc(0x20, 50)),
        at(30, 1, 1, free(0x20)),
        at(40, 1, 1, fork(2)),
        at(50, 2, 2, malloc(0x30, 3000)),
        at(60, 2, 2, exit(0)),
        at(70, 1, 1, exit(0)),
    ];
    let mut w = Writer::new(Vec::new(), &header()).unwrap();
    for (i, e) in events.iter().enumerate() {
        w.push(e).unwrap();
        // Several chunks, so a cut can fall between them.
        if i % 2 == 1 {
            w.flush_chunk().unwrap();
        }
    }
    w.finish(&Trailer::default()).unwrap()
}

/// `bytes` written to a recording in the temporary directory, named after `name` and this
/// process, so tests running at once do not share one.
pub fn temp_recording(name: &str, bytes: &[u8]) -> TempRecording {
    let path =
        std::env::temp_dir().join(format!("memtrack-report-{}-{name}.mt", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    TempRecording(path)
}
