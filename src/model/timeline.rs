//! Memory over time, as the timeline pass leaves it and the html, timeline-csv and
//! timeline-json views draw it (docs/report-schema.md, "Timeline"): the decimated series of the
//! run and of the top processes, their peaks, and the lifecycle, benchmark windows and markers
//! on the time axis. Plain values; the pass that fills them is `analyze::timeline`.

use serde::Serialize;

/// Buckets of the run's series: each point is drawn as its max and min, so a few thousand
/// points.
pub const RUN_BUCKETS: u64 = 2048;

/// Buckets of each process's series: coarser, so 1,000 processes stay a few MiB.
pub const PROCESS_BUCKETS: u64 = 256;

/// Processes drawn by heap peak, and again by resident peak; the rest are "others".
pub const TOP_PROCESSES: usize = 10;

/// Memory over time (`report --format timeline-json`; docs/report-schema.md, "Timeline").
/// Times are nanoseconds since the start of the recording.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Timeline {
    /// The end of the recording (the report's `run.duration_ns`).
    pub end_ns: u64,
    /// Width of the run series' buckets.
    pub bucket_ns: u64,
    /// Width of the process and "others" series' buckets.
    pub process_bucket_ns: u64,
    /// Whether the recording has resident memory (else the resident fields are absent).
    pub resident_recorded: bool,
    /// The scope's (the run's, or the process's or tree's) first, then the drawn processes in
    /// the order first seen, then "others".
    pub series: Vec<TimelineSeries>,
    /// Forks, execs and exits, in time order.
    pub events: Vec<LifecycleEvent>,
    /// Lifecycle events past the first 10,000, not listed.
    pub events_omitted: u64,
    /// Benchmark measuring windows, in time order.
    pub windows: Vec<Window>,
    /// Windows past the first 2,000, not listed.
    pub windows_omitted: u64,
    /// Harness markers, in time order.
    pub markers: Vec<Marker>,
    /// Markers past the first 2,000, not listed.
    pub markers_omitted: u64,
}

/// One series: the run, one process, or the sum of the processes not drawn ("others").
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TimelineSeries {
    /// "run", "pid N" or "others"; the first series is the scope's: "run", "pid N" for
    /// `--pid`, "tree N" for `--tree`.
    pub name: String,
    /// The process, for a process series.
    pub pid: Option<u32>,
    /// Its command line, for a process series.
    pub command: Option<String>,
    /// Processes the series covers.
    pub processes: u64,
    /// Width of its buckets.
    pub bucket_ns: u64,
    /// Its heap peak: the report's `peak_live_bytes` and `peak_live_at_ns` of the same scope
    /// (for "others", the largest bucket maximum).
    pub heap_peak: PeakMark,
    /// Its resident peak, the report's resident `peak_bytes` and `peak_at_ns` (for a process,
    /// since its last exec, as the report has it); absent without resident memory.
    pub resident_peak: Option<PeakMark>,
    /// Its buckets where something changed, in time order; the value holds between them.
    pub points: Vec<TimelinePoint>,
}

/// A peak: its value and the moment it was first reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PeakMark {
    /// The value.
    pub bytes: u64,
    /// When it was first reached; absent when nothing was ever counted.
    pub at_ns: Option<u64>,
}

impl PeakMark {
    /// A peak of `bytes`, first reached at `at_ns`.
    pub fn new(bytes: u64, at_ns: Option<u64>) -> PeakMark {
        PeakMark { bytes, at_ns }
    }
}

/// One bucket of a series: the largest, smallest and last value over
/// `[at_ns, at_ns + bucket_ns)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TimelinePoint {
    /// Start of the bucket.
    pub at_ns: u64,
    /// Largest live heap in the bucket, bytes.
    pub heap_max: u64,
    /// Smallest live heap in the bucket.
    pub heap_min: u64,
    /// Live heap at the end of the bucket.
    pub heap_last: u64,
    /// Largest resident memory (anon + file + shmem) in the bucket.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resident_max: Option<u64>,
    /// Smallest resident memory in the bucket.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resident_min: Option<u64>,
    /// Resident memory at the end of the bucket.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resident_last: Option<u64>,
}

/// A fork, exec or exit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LifecycleEvent {
    /// "fork", "exec" or "exit".
    pub kind: &'static str,
    /// When.
    pub at_ns: u64,
    /// The process that forked, executed or exited.
    pub pid: u32,
    /// For a fork: the child.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub child: Option<u32>,
    /// For an exec: the new command line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// For an exit: the exit code a shell would show (128+N for signal N).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

/// One benchmark measuring window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Window {
    /// The benchmark.
    pub uri: String,
    /// When it opened.
    pub start_ns: u64,
    /// When it closed (the end of the recording if it never did).
    pub end_ns: u64,
}

/// One harness marker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Marker {
    /// "sample_start", "sample_end", "round_start" or "round_end".
    pub kind: &'static str,
    /// When.
    pub at_ns: u64,
    /// The benchmark current then, if one was named.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
}
