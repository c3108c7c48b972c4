//! The report: plain values the accounting pass produces and every view reads, the top of
//! the JSON schema (its sites are in `sites`, its call-stack profile in `profile`, memory over
//! time in `timeline`, the rmap accounting in `rmap`).
//!
//! Flow: `accounting` streams events into its state and, at the end, `assemble` builds a
//! [`Report`]; `Report::narrow` cuts it to one process, tree or benchmark; the views and
//! `check` only read it.
//! Field names and units here are the JSON schema (docs/report-schema.md): renaming or removing
//! a field changes [`SCHEMA_VERSION`], adding one does not.

use serde::Serialize;

use crate::format::{Coverage, LostCount, Skipped};

/// Version of the JSON schema. Additive fields keep it; renames, removals and changes of meaning
/// bump it.
pub const SCHEMA_VERSION: u32 = 1;

/// Everything a report says about a recording, for the scope it was narrowed to.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// Version of this structure's JSON form, [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// False when the numbers may be wrong: events were lost, the file is damaged, or it was
    /// recorded with `--probe-floor` (no allocations).
    pub complete: bool,
    /// Why the report is incomplete, one sentence each; empty when complete.
    pub incomplete_reasons: Vec<String>,
    /// Where and why reading stopped early, if it did.
    pub damage: Option<Damage>,
    /// Damaged ranges of the file that were skipped, reading on after each (their events are
    /// not counted); empty for an intact file.
    pub skipped: Vec<Skipped>,
    /// Events the recorder could not write, per cause.
    pub lost_events: LostEvents,
    /// What was recorded, where and how it ended.
    pub run: RunInfo,
    /// What the `totals` and `processes` cover.
    pub scope: Scope,
    /// Metrics of the scope: the whole run, one process, or one process tree.
    pub totals: Metrics,
    /// The processes of the scope in tree order (each parent before its children, children in
    /// the order they appeared).
    pub processes: Vec<ProcessMetrics>,
    /// One entry per benchmark URI the harness named, in the order they were first named; empty
    /// for a recording without control commands. Not narrowed by `--pid` / `--tree`.
    pub benchmarks: Vec<BenchmarkMetrics>,
    /// The top allocation sites of the scope (`report --stacks`); absent without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stacks: Option<super::sites::StackReport>,
    /// The top allocating functions of the scope (`report --functions`); absent without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub functions: Option<super::functions::FunctionReport>,
    /// Every site of the scope per process and benchmark, for the stack formats (`report
    /// --format folded|flamegraph|pprof|speedscope`); absent otherwise, and never in the JSON.
    #[serde(skip)]
    pub profile: Option<super::profile::Profile>,
    /// Memory over time for the whole run (`report --format timeline-json`, `timeline-csv`,
    /// `html`); absent otherwise, so the JSON report stays as it was. Not narrowed by the scope.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeline: Option<super::timeline::Timeline>,
    /// What `--suppress FILE` suppressed of the definitely lost blocks, per rule; absent
    /// without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suppressions: Option<SuppressionReport>,
    /// Resident memory from the kernel's rmap events per process (format version 6 on, where
    /// the kernel allowed the rmap hooks); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rmap: Option<super::rmap::RmapReport>,
}

/// Where reading a damaged file stopped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Damage {
    /// Byte offset in the file where reading stopped; every event before it was counted.
    pub offset_bytes: u64,
    /// What was wrong there, as the reader said it.
    pub reason: String,
}

impl Damage {
    /// The words for where reading stopped, as the reader gave them: a file that ends inside a
    /// frame or before its trailer is cut short (truncated), anything else there is damaged.
    /// The offset is said once.
    pub fn end_reason(&self) -> String {
        let offset = self.offset_bytes;
        match self.reason.strip_suffix(CUT_SHORT) {
            Some(what) => {
                let what = what.strip_prefix("the file ").unwrap_or(what);
                format!("the file is cut short (truncated) at byte offset {offset}: it {what}")
            }
            None => format!(
                "the file is damaged at byte offset {offset} ({})",
                self.reason
            ),
        }
    }
}

/// How the reader ends the reason of a file that ends early.
const CUT_SHORT: &str = " (the recording was cut short)";

/// Events lost while recording.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LostEvents {
    /// Sum over causes.
    pub total: u64,
    /// Per cause, the largest count the file states (cumulative `Lost` events and the trailer).
    pub by_cause: Vec<LostCount>,
}

/// Facts about the recording as a whole; not narrowed by the scope.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RunInfo {
    /// The recorded command line.
    pub command: Vec<String>,
    /// Pid of the recorded command.
    pub root_pid: u32,
    /// Version of the memtrack that recorded the file.
    pub memtrack_version: String,
    /// Kernel release of the recording machine.
    pub kernel_release: String,
    /// Host name of the recording machine.
    pub hostname: String,
    /// Wall clock at the start, nanoseconds since the Unix epoch.
    pub start_wall_ns: u64,
    /// From the start to the trailer's end time, or to the last event when there is no trailer.
    pub duration_ns: u64,
    /// The command's exit code (128+N for signal N), when the file or the root's exit says it.
    pub exit_code: Option<i32>,
    /// Processes seen in the whole recording (a reused pid counts again).
    pub processes: u64,
    /// Events read from the file.
    pub events: u64,
    /// Events that could not be attributed: frees, resident changes and exits naming a process
    /// that had already exited, and forks of a process onto itself, onto its own ancestor, or
    /// of a child that already has a parent.
    pub ignored_events: u64,
    /// What the recorder captured (e.g. "alloc", "rss"), as the header says.
    pub features: Vec<String>,
    /// Each executable file the recorded processes mapped, once, with the allocator the
    /// recorder found in it and the probes it attached there: its first coverage record.
    pub files: Vec<Coverage>,
}

/// What a report covers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Scope {
    /// Every process of the recording.
    #[default]
    Run,
    /// One process, without its children.
    Process {
        /// The process id.
        pid: u32,
    },
    /// One process and all its descendants.
    Tree {
        /// The pid at the root of the tree.
        pid: u32,
    },
    /// One benchmark: its pid trees inside its measuring windows (`check --bench`).
    Benchmark {
        /// The benchmark's URI.
        uri: String,
    },
}

/// Heap and resident metrics of one scope: a process alone, a process tree, or the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Metrics {
    /// Processes the metrics cover.
    pub processes: u64,
    /// Heap allocations.
    pub heap: HeapMetrics,
    /// Resident memory; absent when the scope saw no resident-memory events.
    pub resident: Option<ResidentMetrics>,
    /// Raw mappings (mmap, munmap, mremap, brk), apart from the heap; absent when the scope
    /// saw no mapping events.
    pub mapped: Option<MappedMetrics>,
}

/// Raw mapping metrics (`mappings` feature): what processes mapped with syscalls themselves,
/// allocators' own arenas included, apart from the heap. Only ranges mapped during the
/// recording count; lengths are rounded up to pages, the break is counted as brk moved it. For
/// a tree or the run, peaks are peaks of the sum at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MappedMetrics {
    /// Successful mmap calls.
    pub mmaps: u64,
    /// Successful munmap calls.
    pub munmaps: u64,
    /// Successful mremap calls.
    pub mremaps: u64,
    /// brk calls that moved the break.
    pub brks: u64,
    /// Highest mapped bytes (files and anonymous).
    pub peak_bytes: u64,
    /// When `peak_bytes` was first reached.
    pub peak_at_ns: Option<u64>,
    /// Highest anonymous mapped bytes (MAP_ANONYMOUS mappings and the brk heap).
    pub peak_anon_bytes: u64,
    /// When `peak_anon_bytes` was first reached.
    pub peak_anon_at_ns: Option<u64>,
}

/// Heap allocation metrics. Counts are events, sizes bytes, times nanoseconds since the start of
/// the recording. For a tree or the run, counts and sizes are sums over its processes; the peak
/// is the peak of the sum at one moment, not the sum of the processes' peaks.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HeapMetrics {
    /// Successful allocations, reallocs included (a realloc is one allocation of its new size).
    pub allocs: u64,
    /// Releases of known blocks: frees, and the old block of each realloc whose old address was
    /// live.
    pub frees: u64,
    /// Bytes requested by `allocs`.
    pub bytes_allocated: u64,
    /// Bytes released by `frees`.
    pub bytes_freed: u64,
    /// `bytes_allocated / allocs`, 0 when there were none.
    pub average_alloc_bytes: f64,
    /// Allocation calls that returned failure (not counted in `allocs`).
    pub failed_allocs: u64,
    /// Allocations freed by the thread that made them before that thread allocated anything
    /// else.
    pub temporary_allocs: u64,
    /// Realloc calls that resized a block (included in `allocs`).
    pub reallocs: u64,
    /// Reallocs whose new address differs from the old one.
    pub realloc_moves: u64,
    /// Frees (and reallocs) of addresses not live in the process: allocated before recording,
    /// by the parent before a fork, or whose allocation event was lost. Not counted in `frees`.
    pub unknown_frees: u64,
    /// Allocations at an address that was already live (its free was not seen); the older block
    /// leaves the live heap.
    pub duplicate_allocs: u64,
    /// Highest live heap, bytes.
    pub peak_live_bytes: u64,
    /// When `peak_live_bytes` was first reached; absent when nothing was ever live.
    pub peak_live_at_ns: Option<u64>,
    /// Blocks live when their process exited.
    pub leaked: Blocks,
    /// Blocks live at the end of the recording in processes that had not exited.
    pub live_at_end: Blocks,
    /// Blocks live when their process called exec, which discards the old heap; not leaks of
    /// the program that runs after it.
    pub dropped_at_exec: Blocks,
    /// `leaked` split by the leak scan at each process's exit; absent when the recording has
    /// no scans (`record --no-leak-scan`, files before format version 5).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leaks: Option<LeakMetrics>,
    /// Allocation sizes in power-of-two buckets, only non-empty ones, smallest first.
    pub size_histogram: Vec<SizeBucket>,
}

/// What the leak scans found among the blocks `leaked` counts: `definitely_lost` plus
/// `still_reachable` plus `not_scanned` is `leaked`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LeakMetrics {
    /// Blocks nothing pointed to at exit, directly or through reachable blocks (memcheck's
    /// definitely plus indirectly lost).
    pub definitely_lost: Blocks,
    /// Blocks some root (globals, stacks, registers, TLS) still pointed to, also through an
    /// interior pointer.
    pub still_reachable: Blocks,
    /// Leaked blocks of processes that were not scanned (killed by a signal, a scan that
    /// failed, no C library `_exit` to hold them at).
    pub not_scanned: Blocks,
    /// Definitely lost blocks a suppression rule matched (`--suppress FILE`); not in
    /// `definitely_lost`, so `definitely_lost + suppressed + still_reachable + not_scanned` is
    /// `leaked`. Zero without suppressions.
    pub suppressed: Blocks,
    /// Processes that exited and were scanned.
    pub scanned_processes: u64,
    /// Processes that exited without a scan.
    pub unscanned_processes: u64,
}

/// A number of heap blocks and their bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Blocks {
    /// How many blocks.
    pub blocks: u64,
    /// Their requested sizes summed.
    pub bytes: u64,
}

impl Blocks {
    /// The two counts added, saturating.
    pub fn plus(self, other: Blocks) -> Blocks {
        Blocks {
            blocks: self.blocks.saturating_add(other.blocks),
            bytes: self.bytes.saturating_add(other.bytes),
        }
    }
}

/// Allocations whose size lies in `min_bytes..=max_bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SizeBucket {
    /// Smallest size in the bucket (0, then powers of two).
    pub min_bytes: u64,
    /// Largest size in the bucket.
    pub max_bytes: u64,
    /// Allocations (reallocs included) in the bucket.
    pub count: u64,
}

/// Resident memory metrics, from the kernel's resident counters (`rss` feature).
///
/// A process's resident memory is its baseline (what the kernel copied into it at fork; zero
/// after exec) plus the signed sum of the changes charged to it since. For a process, peaks are
/// since its last exec, as the kernel's VmHWM is; for a tree or the run they are peaks of the
/// sum over the processes alive at the same moment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ResidentMetrics {
    /// Highest anon + file + shmem resident bytes.
    pub peak_bytes: u64,
    /// When `peak_bytes` was first reached.
    pub peak_at_ns: Option<u64>,
    /// Removed bytes beyond what the process was known to hold (all members), summed over the
    /// scope's processes; non-zero means a baseline was missed (see the schema).
    pub removes_beyond_baseline_bytes: u64,
    /// Per counter: anon, file, shmem, swap.
    pub members: Vec<MemberResident>,
}

/// One resident counter of [`ResidentMetrics`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MemberResident {
    /// "anon", "file", "shmem" or "swap" (swap entries, not resident, not in the total).
    pub member: String,
    /// Highest value, bytes.
    pub peak_bytes: u64,
    /// When `peak_bytes` was first reached.
    pub peak_at_ns: Option<u64>,
    /// For a process: the value it started its last image with (filled by the kernel at fork;
    /// 0 after exec). Absent for trees and the run.
    pub baseline_bytes: Option<u64>,
    /// Value at exit or at the end of the recording, bytes; signed because an estimate that
    /// missed its baseline can fall below zero. Absent for trees and the run.
    pub end_bytes: Option<i64>,
    /// For a process: the lowest value of its last image if that went below zero, else 0.
    /// Negative only if removes exceeded what the process was known to hold.
    /// Absent for trees and the run.
    pub min_bytes: Option<i64>,
    /// Bytes removed while the estimate was already at or below zero.
    pub removes_beyond_baseline_bytes: u64,
}

/// One benchmark: a URI the harness named with `bench URI PID`, measured in its pid and that
/// pid's descendants inside its windows (from `start`, or from the `bench` command while
/// measuring, to `stop` or to the next `bench`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BenchmarkMetrics {
    /// The URI, as the harness sent it.
    pub uri: String,
    /// The pids named for it, in the order they were named; 0 means every process.
    pub pids: Vec<u32>,
    /// How many measuring windows it had.
    pub windows: u64,
    /// Time spent inside its windows, nanoseconds. A window still open at the end of the
    /// recording (the harness never sent `stop`) ends with the recording.
    pub measured_ns: u64,
    /// Markers the harness sent while it was the current benchmark.
    pub markers: MarkerCounts,
    /// Heap and resident metrics inside its windows. `processes` counts the processes whose
    /// allocator events were counted; see docs/report-schema.md for what `leaked` means here.
    pub metrics: Metrics,
    /// Its own top allocation sites (`report --stacks`): the blocks it owns, its heap peak;
    /// absent without `--stacks` or when it allocated nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stacks: Option<super::sites::StackReport>,
}

/// How many markers of each kind a benchmark received.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MarkerCounts {
    /// `marker sample_start`.
    pub sample_start: u64,
    /// `marker sample_end`.
    pub sample_end: u64,
    /// `marker round_start`.
    pub round_start: u64,
    /// `marker round_end`.
    pub round_end: u64,
}

/// One process (one pid for one lifetime; a reused pid is another process).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProcessMetrics {
    /// Process id.
    pub pid: u32,
    /// Pid of the process that forked it, when the fork was recorded.
    pub parent_pid: Option<u32>,
    /// Nesting level in this listing: 0 for the listing's roots.
    pub depth: u32,
    /// The file it last executed; for a forked child that never executed, its parent's.
    pub executable: Option<String>,
    /// Arguments of that execution (possibly cut short by the recorder).
    pub argv: Vec<String>,
    /// How many times it executed a program.
    pub execs: u32,
    /// When it was first seen (its fork, or its first event).
    pub started_at_ns: u64,
    /// How it ended; absent when it had not exited by the end of the recording.
    pub exit: Option<ExitInfo>,
    /// The process alone.
    pub own: Metrics,
    /// The process and all its descendants.
    pub tree: Metrics,
}

/// How a process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ExitInfo {
    /// When, nanoseconds since the start.
    pub at_ns: u64,
    /// The kernel's exit status, `(code << 8) | signal`, as `waitpid` reports it.
    pub status: i32,
    /// The exit code a shell would show: the code, or 128+N when killed by signal N.
    pub exit_code: i32,
    /// The signal that killed it, if one did.
    pub signal: Option<i32>,
}

impl ExitInfo {
    /// Decodes the kernel's exit status of a process that ended at `at_ns`.
    pub fn from_status(status: i32, at_ns: u64) -> ExitInfo {
        let signal = status & 0x7f;
        let code = (status >> 8) & 0xff;
        if signal != 0 {
            ExitInfo {
                at_ns,
                status,
                exit_code: 128 + signal,
                signal: Some(signal),
            }
        } else {
            ExitInfo {
                at_ns,
                status,
                exit_code: code,
                signal: None,
            }
        }
    }
}

/// A scope that names nothing in the recording.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unknown {
    /// A `--pid` or `--tree` that names no process.
    Pid(u32),
    /// A `--bench` that names no benchmark.
    Benchmark(String),
}

/// What the suppressions did in the report's scope.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SuppressionReport {
    /// The suppression file.
    pub file: String,
    /// Definitely lost blocks the rules suppressed, all rules together.
    pub suppressed: Blocks,
    /// Every rule, in file order, with what it suppressed; a rule with 0 blocks is unused.
    pub rules: Vec<RuleUse>,
    /// Definitely lost blocks whose allocation has no call stack in the scope (allocated
    /// outside it, or stack-less), which no rule could match: still lost.
    pub unmatchable: Blocks,
}

/// One rule and what it suppressed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RuleUse {
    /// Its line in the file.
    pub line: usize,
    /// `leak:` and its pattern, as written.
    pub rule: String,
    /// The blocks it suppressed (the first matching rule takes a block).
    pub suppressed: Blocks,
}

impl SuppressionReport {
    /// Rules that suppressed something.
    pub fn used(&self) -> usize {
        self.rules
            .iter()
            .filter(|r| r.suppressed.blocks > 0)
            .count()
    }
}

impl Report {
    /// The report cut to the benchmark `uri`: `totals` become its metrics, `benchmarks` lists
    /// only it and `processes` is empty (a benchmark's numbers are not per process).
    fn narrow_to_benchmark(mut self, uri: String) -> Result<Report, Unknown> {
        let Some(i) = self.benchmarks.iter().position(|b| b.uri == uri) else {
            return Err(Unknown::Benchmark(uri));
        };
        let bench = self.benchmarks.swap_remove(i);
        self.totals = bench.metrics.clone();
        self.benchmarks = vec![bench];
        self.processes = Vec::new();
        self.scope = Scope::Benchmark { uri };
        Ok(self)
    }

    /// The report cut to `scope`: `totals` become the process's (or tree's) metrics and
    /// `processes` lists only it (or its tree, depths counted from its root). A pid reused
    /// during the recording names its first process. For a benchmark, see
    /// `narrow_to_benchmark`.
    pub fn narrow(mut self, scope: Scope) -> Result<Report, Unknown> {
        let pid = match scope {
            Scope::Run => {
                self.scope = Scope::Run;
                return Ok(self);
            }
            Scope::Benchmark { uri } => return self.narrow_to_benchmark(uri),
            Scope::Process { pid } | Scope::Tree { pid } => pid,
        };
        let start = self
            .processes
            .iter()
            .position(|p| p.pid == pid)
            .ok_or(Unknown::Pid(pid))?;
        let processes = std::mem::take(&mut self.processes);
        let root_depth = processes[start].depth;
        let end = match scope {
            // In tree order a subtree is the run of entries after its root that are deeper.
            Scope::Tree { .. } => processes[start + 1..]
                .iter()
                .position(|p| p.depth <= root_depth)
                .map_or(processes.len(), |n| start + 1 + n),
            _ => start + 1,
        };
        let mut kept: Vec<ProcessMetrics> = processes
            .into_iter()
            .skip(start)
            .take(end - start)
            .collect();
        for p in &mut kept {
            p.depth = p.depth.saturating_sub(root_depth);
        }
        self.totals = match scope {
            Scope::Tree { .. } => kept[0].tree.clone(),
            _ => kept[0].own.clone(),
        };
        self.processes = kept;
        self.scope = scope;
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(pid: u32, depth: u32, allocs: u64) -> ProcessMetrics {
        let own = Metrics {
            processes: 1,
            heap: HeapMetrics {
                allocs,
                ..HeapMetrics::default()
            },
            resident: None,
            mapped: None,
        };
        ProcessMetrics {
            pid,
            parent_pid: None,
            depth,
            executable: None,
            argv: Vec::new(),
            execs: 0,
            started_at_ns: 0,
            exit: None,
            own: own.clone(),
            tree: Metrics {
                processes: 9,
                ..own
            },
        }
    }

    fn report() -> Report {
        Report {
            schema_version: SCHEMA_VERSION,
            complete: true,
            incomplete_reasons: Vec::new(),
            damage: None,
            skipped: Vec::new(),
            lost_events: LostEvents::default(),
            run: RunInfo::default(),
            scope: Scope::Run,
            totals: Metrics::default(),
            processes: vec![
                process(1, 0, 10),
                process(2, 1, 20),
                process(3, 2, 30),
                process(4, 1, 40),
                process(5, 0, 50),
            ],
            benchmarks: vec![bench("a", 7), bench("b b", 8)],
            stacks: None,
            functions: None,
            profile: None,
            timeline: None,
            suppressions: None,
            rmap: None,
        }
    }

    fn bench(uri: &str, allocs: u64) -> BenchmarkMetrics {
        BenchmarkMetrics {
            uri: uri.to_string(),
            pids: vec![1],
            windows: 1,
            measured_ns: 5,
            markers: MarkerCounts::default(),
            metrics: Metrics {
                processes: 1,
                heap: HeapMetrics {
                    allocs,
                    ..HeapMetrics::default()
                },
                resident: None,
                mapped: None,
            },
            stacks: None,
        }
    }

    fn pids(r: &Report) -> Vec<(u32, u32)> {
        r.processes.iter().map(|p| (p.pid, p.depth)).collect()
    }

    #[test]
    fn narrow_run_keeps_everything() {
        let r = report().narrow(Scope::Run).unwrap();
        assert_eq!(r.processes.len(), 5);
    }

    #[test]
    fn narrow_process_keeps_one_row() {
        let r = report().narrow(Scope::Process { pid: 2 }).unwrap();
        assert_eq!(pids(&r), vec![(2, 0)]);
        assert_eq!(r.totals.heap.allocs, 20);
        assert_eq!(r.totals.processes, 1);
    }

    #[test]
    fn narrow_tree_keeps_descendants_only() {
        let r = report().narrow(Scope::Tree { pid: 2 }).unwrap();
        assert_eq!(pids(&r), vec![(2, 0), (3, 1)]);
        assert_eq!(r.totals.processes, 9);
    }

    #[test]
    fn narrow_tree_of_root_stops_at_next_root() {
        let r = report().narrow(Scope::Tree { pid: 1 }).unwrap();
        assert_eq!(pids(&r), vec![(1, 0), (2, 1), (3, 2), (4, 1)]);
    }

    #[test]
    fn narrow_tree_of_last_leaf() {
        let r = report().narrow(Scope::Tree { pid: 5 }).unwrap();
        assert_eq!(pids(&r), vec![(5, 0)]);
    }

    #[test]
    fn narrow_unknown_pid() {
        assert_eq!(
            report().narrow(Scope::Tree { pid: 99 }),
            Err(Unknown::Pid(99))
        );
    }

    #[test]
    fn narrow_records_scope() {
        let r = report().narrow(Scope::Process { pid: 4 }).unwrap();
        assert_eq!(r.scope, Scope::Process { pid: 4 });
    }

    fn benchmark(uri: &str) -> Scope {
        Scope::Benchmark {
            uri: uri.to_string(),
        }
    }

    #[test]
    fn narrow_to_benchmark_takes_its_metrics() {
        let r = report().narrow(benchmark("b b")).unwrap();
        assert_eq!(r.totals.heap.allocs, 8);
        assert_eq!(r.benchmarks.len(), 1);
        assert!(r.processes.is_empty());
        assert_eq!(r.scope, benchmark("b b"));
    }

    #[test]
    fn narrow_to_unknown_benchmark() {
        assert_eq!(
            report().narrow(benchmark("c")),
            Err(Unknown::Benchmark("c".to_string()))
        );
    }

    #[test]
    fn narrow_to_process_keeps_benchmarks() {
        let r = report().narrow(Scope::Process { pid: 2 }).unwrap();
        assert_eq!(r.benchmarks.len(), 2);
    }

    #[test]
    fn exit_info_normal() {
        let e = ExitInfo::from_status(3 << 8, 5);
        assert_eq!((e.exit_code, e.signal, e.at_ns), (3, None, 5));
    }

    #[test]
    fn exit_info_signal() {
        let e = ExitInfo::from_status(9, 0);
        assert_eq!((e.exit_code, e.signal), (137, Some(9)));
    }

    #[test]
    fn exit_info_core_dump_flag_ignored() {
        let e = ExitInfo::from_status(0x80 | 11, 0);
        assert_eq!((e.exit_code, e.signal), (139, Some(11)));
    }

    #[test]
    fn exit_info_any_status_does_not_panic() {
        for s in [i32::MIN, -1, i32::MAX, 0x7fff] {
            let _ = ExitInfo::from_status(s, 0);
        }
    }

    #[test]
    fn blocks_plus_saturates() {
        let a = Blocks {
            blocks: u64::MAX,
            bytes: 1,
        };
        assert_eq!(a.plus(a).blocks, u64::MAX);
    }

    #[test]
    fn scope_serializes_with_kind() {
        let s = serde_json::to_string(&Scope::Tree { pid: 7 }).unwrap();
        assert_eq!(s, r#"{"kind":"tree","pid":7}"#);
    }
}
