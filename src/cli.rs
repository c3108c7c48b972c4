//! The command line, in two steps (as ripgrep's lowargs and hiargs): first the flags as typed,
//! one argh struct per subcommand whose doc comments are the --help text; then one `TryFrom`
//! per subcommand into the validated options it runs on (`record::RecordOptions`,
//! `report::ReportOptions`, `report::CheckOptions`, `control::CtlOptions`). Every flag value is
//! parsed once, at the argh edge (`from_str_fn`: formats, orders, sizes, per cents, durations,
//! allocator specs, marker kinds become their types there, and argh's "Error parsing option"
//! becomes our one line in `argh_message`); every conflict between flags is caught in the
//! `TryFrom`s, before anything is read, loaded or spawned. `main` only dispatches.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use argh::FromArgs;

use crate::analyze::stacks::DEFAULT_TOP;
use crate::analyze::stacks::{SiteOptions, SiteOrder};
use crate::check::{self, CheckOptions};
use crate::control::{self, CtlOptions, Request};
use crate::diff::{DiffFormat, DiffOptions};
use crate::error::{Error, Subcommand};
use crate::format::{Bench, ControlCommand, MarkerKind};
use crate::model::metrics::Scope;
use crate::model::profile::{View, Weight};
use crate::record::{self, custom, guardian, RecordOptions};
use crate::report::ReportOptions;
use crate::units;
use crate::views::rows::DEFAULT_TOP_ROWS;
use crate::views::rows::{RowOptions, Rows, SortKey};
use crate::views::{self, Format, Sites};

/// Record every heap allocation and resident-memory change of a command and all its
/// descendants with eBPF, and report on the recording.
#[derive(FromArgs, Debug)]
#[argh(
    help_triggers("-h", "--help", "help"),
    example = "sudo memtrack doctor",
    example = "sudo memtrack record -o run.mt -- cargo bench",
    example = "memtrack report run.mt",
    note = "On a new machine, start with `sudo memtrack doctor`. `memtrack <command> --help`
describes each command; README.md has examples and troubleshooting."
)]
pub struct Cli {
    /// print more (repeat for libbpf's own log); RUST_LOG overrides
    #[argh(switch, short = 'v')]
    pub verbose: u8,
    /// print memtrack's version and exit
    #[argh(switch, short = 'V')]
    pub version: bool,
    #[argh(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
// Parsed once per run: the size of `check`'s many limit flags costs nothing, and argh's
// subcommand enum takes the argument structs themselves, not boxes.
#[allow(clippy::large_enum_variant)]
#[derive(FromArgs, Debug)]
#[argh(subcommand)]
pub enum Command {
    /// `memtrack record`
    Record(RecordArgs),
    /// `memtrack report`
    Report(ReportArgs),
    /// `memtrack check`
    Check(CheckArgs),
    /// `memtrack dump`
    Dump(DumpArgs),
    /// `memtrack doctor`
    Doctor(DoctorArgs),
    /// `memtrack ctl`
    Ctl(CtlArgs),
    /// `memtrack diff`
    Diff(DiffArgs),
}

impl Command {
    /// Which subcommand this is, for the exit code of its errors.
    pub fn subcommand(&self) -> Subcommand {
        match self {
            Command::Record(_) => Subcommand::Record,
            _ => Subcommand::Other,
        }
    }
}

/// Run a command and record its allocations, and those of every process it starts, into a file.
/// Exits with the command's status (128+N if a signal N killed it), 127 if the command does not
/// exist, 126 if it cannot be executed, 125 if memtrack itself fails or a flag is wrong. Needs
/// root (or CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN).
#[derive(FromArgs, Debug)]
#[argh(
    subcommand,
    help_triggers("-h", "--help", "help"),
    name = "record",
    example = "sudo memtrack record -o run.mt -- cargo bench",
    example = "sudo memtrack record -q --user ci -o run.mt -- make -j8",
    note = "Runs the checks of `memtrack doctor` first.
Under sudo the command runs as the invoking user (SUDO_UID, SUDO_GID, their groups, HOME,
USER, LOGNAME), and the recording belongs to them.
The command runs in its own process group: SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to
memtrack go to that group, and on a terminal the group holds the terminal (Ctrl-C and
Ctrl-Z reach it). memtrack waits for the whole tree, but once the command has ended only
--grace for what it left running (those are named on stderr and recorded as running), then
finishes the file; SIGINT or SIGTERM during that wait ends it. If memtrack is killed, the
file is readable up to its last chunk (written at least every second), and the command runs
on, unrecorded: no process is left stopped.
On a terminal, one progress line is kept on stderr (-q: none).",
    error_code(125, "memtrack itself failed (the message says why and what to do)"),
    error_code(126, "the command cannot be executed"),
    error_code(127, "the command does not exist")
)]
pub struct RecordArgs {
    /// the recording to write (default: memtrack.mt)
    #[argh(option, short = 'o', default = "PathBuf::from(\"memtrack.mt\")")]
    pub output: PathBuf,
    /// size of the kernel ring buffer in MiB, a power of two from 1 to 1024 (default: 2 per
    /// CPU, at least 16 and at most 256); raise it if events are lost
    #[argh(option, from_str_fn(parse_ring_size))]
    pub ring_size: Option<u32>,
    /// do not record resident memory (rss_stat), only allocations and the process tree
    #[argh(switch)]
    pub no_rss: bool,
    /// do not load the rmap hooks (fentry on the kernel's rmap functions, where the kernel
    /// allows them): resident memory from rss_stat alone, without the per-process rmap
    /// accounting and the by-mapping view
    #[argh(switch)]
    pub no_rmap: bool,
    /// do not record raw mappings (mmap, munmap, mremap, brk): their syscall tracepoints add
    /// about 0.25 µs to every syscall of every process on the machine while recording (without
    /// them, memtrack cannot warn about an allocator it did not find)
    #[argh(switch)]
    pub no_mappings: bool,
    /// record the call stack of every allocation, for report --stacks (off by default: about
    /// 0.5 µs more per allocation at ten frames; docs/PERFORMANCE.md)
    #[argh(switch)]
    pub stacks: bool,
    /// do not record call stacks (the default; wins over --stacks)
    #[argh(switch)]
    pub no_stacks: bool,
    /// do not write the symbols of the stacks' frames at the end of the recording (faster;
    /// reports then name frames by file and offset)
    #[argh(switch)]
    pub no_symbols: bool,
    /// probe the machine's shared allocator libraries instead of private copies that only the
    /// recorded tree runs (the copies are the default: they spare every other process on the
    /// machine the probes' cost; README, "What the recorded command sees")
    #[argh(switch)]
    pub no_private_libs: bool,
    /// do not scan each process's memory at its exit to tell definitely lost blocks from
    /// still reachable ones (the scan reads the live heap once per exiting process)
    #[argh(switch)]
    pub no_leak_scan: bool,
    /// benchmarks only: attach empty programs at the allocator sites and record no
    /// allocations, to measure the kernel's own cost of the probes (scripts/bench.sh); every
    /// report of the file says so, and check refuses it
    #[argh(switch)]
    pub probe_floor: bool,
    /// under sudo the command runs as the invoking user (SUDO_UID); run it as this user
    /// (name or uid) instead, `root` to keep root
    #[argh(option)]
    pub user: Option<String>,
    /// print nothing but errors: no progress line, no summary
    #[argh(switch, short = 'q')]
    pub quiet: bool,
    /// print more (repeat for libbpf's own log); RUST_LOG overrides
    #[argh(switch, short = 'v')]
    pub verbose: u8,
    /// make a control FIFO at PATH (and PATH.ack) for a benchmark harness, passed to the command
    /// in $MEMTRACK_CONTROL; allocations are then recorded only between the harness's start and
    /// stop (docs/control-protocol.md)
    #[argh(option)]
    pub control: Option<PathBuf>,
    /// with --control: record allocations from the start, until the harness says stop
    #[argh(switch)]
    pub start_running: bool,
    /// once the command has ended, wait this long (e.g. 500ms, 10s, 1m; default 2s) for the
    /// processes it left running (daemons, build servers), then finish the file without them
    #[argh(option, from_str_fn(parse_grace))]
    pub grace: Option<Duration>,
    /// wait for every process of the tree, however long it runs after the command ended
    #[argh(switch)]
    pub wait_all: bool,
    /// probe a program's own allocator function too, in every file of the tree that defines
    /// it (repeat for each): [FAMILY:]SYMBOL=alloc(size=argN), calloc(n=argN,size=argM),
    /// realloc(ptr=argN,size=argM) or free(ptr=argN), N and M from 1 to 6, e.g.
    /// 'pool:pool_alloc=alloc(size=arg1)' (README, "Troubleshooting")
    #[argh(option, from_str_fn(parse_allocator))]
    pub allocator: Vec<AllocatorFlag>,
    /// probe CPython's object allocator too (PyObject_Malloc/Calloc/Realloc/Free and the PyMem_
    /// ones, family "python"), which serves most of a Python program's objects from its own
    /// arenas; costs more than the malloc view (docs/PERFORMANCE.md)
    #[argh(switch)]
    pub python_objects: bool,
    /// the command to record and its arguments (after --)
    #[argh(positional, greedy)]
    pub command: Vec<OsString>,
}

/// Summarise a recording: per run, per process tree and per process.
#[derive(FromArgs, Debug)]
#[argh(
    subcommand,
    help_triggers("-h", "--help", "help"),
    name = "report",
    example = "memtrack report run.mt --format json",
    example = "memtrack report run.mt --stacks --stacks-by leaked",
    example = "memtrack report run.mt --top 5 --sort leaked",
    example = "memtrack report run.mt --format markdown >> \"$GITHUB_STEP_SUMMARY\"",
    example = "memtrack report run.mt --format flamegraph --view leaked -o leaks.svg",
    example = "memtrack report run.mt --format pprof -o heap.pb.gz",
    note = "The text form fits the width of the terminal ($COLUMNS overrides it; 80 when not a
terminal): narrow, it drops the least important columns and shortens commands. Rows: with no
--sort, the process tree (benchmarks as named) when every row fits --top, else the top ones by
peak heap; the rows left out are summed in one line. JSON always lists every row, so --top,
--all and --sort are refused with --format json."
)]
pub struct ReportArgs {
    /// the recording to read
    #[argh(positional)]
    pub file: PathBuf,
    /// output format: text (default), json, markdown (a summary for CI job summaries and
    /// pull-request comments), html (one self-contained page: memory over time, the process
    /// tree, flame graphs with --stacks), timeline-csv or timeline-json (memory over time as
    /// data), or a stack format of every allocation site (recorded with --stacks): folded
    /// (flamegraph.pl / inferno input), flamegraph (SVG), pprof (gzipped profile.proto for `go
    /// tool pprof`) or speedscope (JSON)
    #[argh(option, default = "Default::default()", from_str_fn(parse_format))]
    pub format: &'static Format,
    /// only this process
    #[argh(option, from_str_fn(parse_pid))]
    pub pid: Option<u32>,
    /// only this process and its descendants
    #[argh(option, from_str_fn(parse_pid))]
    pub tree: Option<u32>,
    /// only this benchmark: its pid tree inside its measuring windows
    #[argh(option)]
    pub bench: Option<String>,
    /// rows of the text and markdown forms: process (default) or bench (one row per benchmark
    /// the harness named; JSON always has both)
    #[argh(option, default = "Rows::Processes", from_str_fn(parse_rows))]
    pub by: Rows,
    /// also list the top allocation sites (call stacks) of the scope: live bytes at its heap
    /// peak, bytes and count allocated, leaked, temporary, and each site's frames
    #[argh(switch)]
    pub stacks: bool,
    /// sort the sites by peak (live bytes at the heap peak, default), allocated, count, leaked
    /// or temporary; implies --stacks
    #[argh(option, from_str_fn(parse_site_order))]
    pub stacks_by: Option<SiteOrder>,
    /// how many sites to list (default 10, 0 for all); implies --stacks
    #[argh(option, from_str_fn(parse_count))]
    pub stacks_top: Option<u64>,
    /// write the report to this file instead of standard output (a file is replaced only once
    /// the report is complete; a device or FIFO is written in place)
    #[argh(option, short = 'o')]
    pub output: Option<PathBuf>,
    /// rows of the process (or --by bench) table of text and markdown: the top N, the rest
    /// summed in one row (default 20)
    #[argh(option, from_str_fn(parse_count))]
    pub top: Option<u64>,
    /// every row of the process (or --by bench) table, none summed
    #[argh(switch)]
    pub all: bool,
    /// sort the rows, biggest first, by peak (own peak heap), allocs, bytes (allocated),
    /// leaked or rss (peak resident); default: see below
    #[argh(option, from_str_fn(parse_sort))]
    pub sort: Option<SortKey>,
    /// what the stack formats weigh: peak (live at the scope's heap peak, default), allocated,
    /// leaked or temporary; pprof and speedscope carry every view and open on this one
    #[argh(option, from_str_fn(parse_view))]
    pub view: Option<View>,
    /// what the stack formats weigh blocks by: bytes (default) or count
    #[argh(option, from_str_fn(parse_weight))]
    pub weight: Option<Weight>,
    /// leak suppressions: a file of leak:PATTERN lines (LeakSanitizer's syntax, # comments)
    /// matched against the stacks of definitely lost blocks; what they match is counted as
    /// suppressed, not lost (needs a recording made with --stacks)
    #[argh(option)]
    pub suppress: Option<PathBuf>,
}

/// Fail (exit 1) when a recording exceeds memory limits; exit 0 when all hold, 2 on a bad file
/// or flag, and 2 on a recording that lost events or is damaged (its numbers may be wrong
/// either way) unless --allow-incomplete, or a limit fails that more events could not make
/// pass. SIZE takes plain bytes or units: 64MiB, 1.5GB, 512k.
#[derive(FromArgs, Debug)]
#[argh(
    subcommand,
    help_triggers("-h", "--help", "help"),
    name = "check",
    example = "memtrack check run.mt --max-peak-heap 64MiB --max-leaked 0"
)]
pub struct CheckArgs {
    /// the recording to read
    #[argh(positional)]
    pub file: PathBuf,
    /// check only this process and its descendants (default: the whole run)
    #[argh(option, from_str_fn(parse_pid))]
    pub tree: Option<u32>,
    /// check only this benchmark: its pid tree inside its measuring windows
    #[argh(option)]
    pub bench: Option<String>,
    /// highest allowed peak of live heap (SIZE)
    #[argh(option, from_str_fn(parse_size))]
    pub max_peak_heap: Option<u64>,
    /// highest allowed number of allocations
    #[argh(option, from_str_fn(parse_count))]
    pub max_allocs: Option<u64>,
    /// highest allowed total of bytes allocated (SIZE)
    #[argh(option, from_str_fn(parse_size))]
    pub max_bytes: Option<u64>,
    /// highest allowed heap leaked when processes exit (SIZE): with the leak scan (recordings
    /// since format version 5), the bytes definitely lost, plus all the leaked bytes of
    /// processes that could not be scanned; in older recordings, every byte still live
    #[argh(option, from_str_fn(parse_size))]
    pub max_leaked: Option<u64>,
    /// highest allowed heap still reachable when processes exit (SIZE), by the leak scan
    #[argh(option, from_str_fn(parse_size))]
    pub max_reachable: Option<u64>,
    /// highest allowed peak resident memory, anon + file + shmem (SIZE)
    #[argh(option, from_str_fn(parse_size))]
    pub max_peak_rss: Option<u64>,
    /// check a recording that lost events or is damaged on what it holds (by default it is
    /// refused with exit 2, since its numbers may be wrong either way)
    #[argh(switch)]
    pub allow_incomplete: bool,
    /// compare with this recording (e.g. main's): the --max-*-increase limits are increases
    /// over it, for the same scope (the run, or --bench by URI)
    #[argh(option)]
    pub baseline: Option<PathBuf>,
    /// highest allowed increase over --baseline of every metric both recordings have, in per
    /// cent (e.g. 5%); any increase from 0 fails it
    #[argh(option, from_str_fn(parse_percent))]
    pub max_increase: Option<u64>,
    /// highest allowed increase over --baseline of every metric in bytes (SIZE), a limit of
    /// its own beside the per cent ones
    #[argh(option, from_str_fn(parse_size))]
    pub max_increase_bytes: Option<u64>,
    /// highest allowed increase of the peak heap over --baseline, in per cent (replaces
    /// --max-increase for it; likewise the flags below)
    #[argh(option, from_str_fn(parse_percent))]
    pub max_peak_heap_increase: Option<u64>,
    /// highest allowed increase of the number of allocations, in per cent
    #[argh(option, from_str_fn(parse_percent))]
    pub max_allocs_increase: Option<u64>,
    /// highest allowed increase of the bytes allocated, in per cent
    #[argh(option, from_str_fn(parse_percent))]
    pub max_bytes_increase: Option<u64>,
    /// highest allowed increase of the leaked bytes, in per cent
    #[argh(option, from_str_fn(parse_percent))]
    pub max_leaked_increase: Option<u64>,
    /// highest allowed increase of the leaked blocks, in per cent
    #[argh(option, from_str_fn(parse_percent))]
    pub max_leaked_blocks_increase: Option<u64>,
    /// highest allowed increase of the temporary allocations, in per cent
    #[argh(option, from_str_fn(parse_percent))]
    pub max_temporary_increase: Option<u64>,
    /// highest allowed increase of the peak resident memory, in per cent
    #[argh(option, from_str_fn(parse_percent))]
    pub max_peak_rss_increase: Option<u64>,
    /// highest allowed increase of the peak mapped bytes, in per cent
    #[argh(option, from_str_fn(parse_percent))]
    pub max_peak_mapped_increase: Option<u64>,
    /// what the limits apply to: run (default: the run, or --bench) or bench (each benchmark
    /// of the recording, one line per limit and benchmark)
    #[argh(option, long = "by", default = "false", from_str_fn(parse_check_by))]
    pub by_bench: bool,
    /// leak suppressions: a file of leak:PATTERN lines (LeakSanitizer's syntax, # comments)
    /// matched against the stacks of definitely lost blocks, which --max-leaked then leaves
    /// out (needs a recording made with --stacks)
    #[argh(option)]
    pub suppress: Option<PathBuf>,
}

/// Compare two recordings (e.g. main's and a pull request's): the whole run, each benchmark (by
/// URI), each process (matched by command and position in the tree, since pids differ) and,
/// with --stacks, the allocation sites (matched by function and module). Every metric with both
/// values, the change and the relative change, largest relative change first. Exits 0, or 2 on
/// a bad file or flag; `memtrack check NEW --baseline BASE` turns the comparison into a verdict.
#[derive(FromArgs, Debug)]
#[argh(
    subcommand,
    help_triggers("-h", "--help", "help"),
    name = "diff",
    example = "memtrack diff main.mt branch.mt",
    example = "memtrack diff main.mt branch.mt --stacks --format json",
    example = "memtrack diff main.mt branch.mt --format flamegraph > diff.svg",
    note = "--format folded and flamegraph compare the call stacks of two recordings made with
--stacks, frames named by function and module so that two builds line up: folded prints
`stack base new` per stack (the input of inferno-flamegraph and flamegraph.pl, as
inferno-diff-folded and difffolded.pl write it), flamegraph draws it (widths from the new
recording, red where it has more than the base, blue where less). They weigh allocated bytes
unless --view and --weight say otherwise."
)]
pub struct DiffArgs {
    /// the recording to compare against (e.g. main's)
    #[argh(positional)]
    pub base: PathBuf,
    /// the recording to compare (e.g. the branch's)
    #[argh(positional)]
    pub new: PathBuf,
    /// output format: text (default), json, or, for two recordings with call stacks, folded
    /// (differential folded stacks) or flamegraph (a differential flame graph SVG)
    #[argh(option, default = "DiffFormat::Text", from_str_fn(parse_diff_format))]
    pub format: DiffFormat,
    /// also compare the allocation sites (both recordings need call stacks: record --stacks)
    #[argh(switch)]
    pub stacks: bool,
    /// how many changed sites to list (default 10, 0 for all); implies --stacks
    #[argh(option, from_str_fn(parse_count))]
    pub top: Option<u64>,
    /// what folded and flamegraph weigh: allocated (default), peak (live at each recording's
    /// heap peak), leaked or temporary
    #[argh(option, from_str_fn(parse_view))]
    pub view: Option<View>,
    /// what folded and flamegraph weigh blocks by: bytes (default) or count
    #[argh(option, from_str_fn(parse_weight))]
    pub weight: Option<Weight>,
    /// draw the flame graph's widths from the base recording, so stacks the new one no longer
    /// has show (the hues stay: red is more in the new recording)
    #[argh(switch)]
    pub base_widths: bool,
    /// write the comparison to this file instead of standard output (a file is replaced only
    /// once it is complete; a device or FIFO is written in place)
    #[argh(option, short = 'o')]
    pub output: Option<PathBuf>,
}

/// Talk to a running `memtrack record --control PATH` from a harness: check that it listens
/// (hello), start or stop measuring, name the benchmark and the pid it runs in, or mark a point
/// of the harness's loop. Exits 0 when the recorder acknowledged, 1 when it refused or could not
/// be reached, 2 on a bad flag or when no control FIFO is given.
#[derive(FromArgs, Debug)]
#[argh(
    subcommand,
    help_triggers("-h", "--help", "help"),
    name = "ctl",
    example = "memtrack ctl bench 'parse::small' --pid $$ && memtrack ctl start",
    example = "memtrack ctl stop"
)]
pub struct CtlArgs {
    /// the control FIFO (default: $MEMTRACK_CONTROL, which `record --control` sets)
    #[argh(option)]
    pub control: Option<PathBuf>,
    #[argh(subcommand)]
    pub action: CtlAction,
}

/// What `memtrack ctl` sends.
#[derive(FromArgs, Debug)]
#[argh(subcommand)]
pub enum CtlAction {
    Hello(CtlHello),
    Start(CtlStart),
    Stop(CtlStop),
    Bench(CtlBench),
    Marker(CtlMarker),
}

/// Check that a recorder listens and speaks this memtrack's protocol; prints `memtrack control
/// protocol N`.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "hello", help_triggers("-h", "--help", "help"))]
pub struct CtlHello {}

/// Start measuring: once this returns, allocator calls are recorded.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "start", help_triggers("-h", "--help", "help"))]
pub struct CtlStart {}

/// Stop measuring: once this returns, allocator calls are not recorded.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "stop", help_triggers("-h", "--help", "help"))]
pub struct CtlStop {}

/// Name the benchmark that runs from now on, and the pid it runs in (with its descendants).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "bench", help_triggers("-h", "--help", "help"))]
pub struct CtlBench {
    /// the benchmark's URI (any text without control characters)
    #[argh(positional)]
    pub uri: String,
    /// the pid the benchmark runs in (default: the process that runs memtrack ctl, e.g. the
    /// harness shell; 0: every process)
    #[argh(option, from_str_fn(parse_pid))]
    pub pid: Option<u32>,
}

/// Mark a point of the harness's loop: sample_start, sample_end, round_start or round_end.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "marker", help_triggers("-h", "--help", "help"))]
pub struct CtlMarker {
    /// the kind of marker
    #[argh(positional, from_str_fn(parse_marker))]
    pub kind: MarkerKind,
}

/// Print every event of a recording as one JSON object per line: the header, the events (times
/// are absolute CLOCK_MONOTONIC ns), then the trailer or where the damage is
/// (docs/dump-format.md lists every field and its unit).
#[derive(FromArgs, Debug)]
#[argh(
    subcommand,
    name = "dump",
    help_triggers("-h", "--help", "help"),
    example = "memtrack dump run.mt | head"
)]
pub struct DumpArgs {
    /// the recording to read
    #[argh(positional)]
    pub file: PathBuf,
}

/// Check what recording needs against this machine: kernel, BTF, privileges, BPF features.
/// Prints one table; exits 0 when `record` can work here, 1 when it cannot (and says why).
#[derive(FromArgs, Debug)]
#[argh(
    subcommand,
    help_triggers("-h", "--help", "help"),
    name = "doctor",
    example = "sudo memtrack doctor",
    note = "Each line is ok, missing, or unknown (not checked: it needs what is missing above),
with what a missing item disables. `record` runs the same checks and stops with the same
line when a required one is missing.",
    error_code(1, "record cannot work here")
)]
pub struct DoctorArgs {}

/// `--max-allocs N`: a plain count.
fn parse_count(value: &str) -> Result<u64, String> {
    value.parse().map_err(|_| {
        "give a whole number, e.g. 1500 (unit suffixes such as 1.5k are for the SIZE flags)".into()
    })
}

/// `--pid`, `--tree`: a process id.
fn parse_pid(value: &str) -> Result<u32, String> {
    value
        .parse()
        .map_err(|_| "give a process id (a whole number, as `memtrack report FILE` lists)".into())
}

/// `--ring-size`: MiB; `RecordOptions::try_from` checks the range.
fn parse_ring_size(value: &str) -> Result<u32, String> {
    value
        .parse()
        .map_err(|_| "give a power of two between 1 and 1024 (MiB), e.g. 64".into())
}

/// One `record --allocator` value: the CPython preset, or one function.
#[derive(Clone, Copy, Debug)]
pub enum AllocatorFlag {
    /// `--allocator python`: the `--python-objects` preset.
    Python,
    /// `--allocator [FAMILY:]SYMBOL=KIND(ARGS)`.
    Function(custom::Custom),
}

/// `record --allocator`: a spec (`custom::parse` names the flag in its message) or `python`.
fn parse_allocator(value: &str) -> Result<AllocatorFlag, String> {
    if value == "python" {
        return Ok(AllocatorFlag::Python);
    }
    custom::parse(value).map(AllocatorFlag::Function)
}

/// `record --grace`: a duration; `RecordOptions::try_from` checks it against `--wait-all`.
fn parse_grace(value: &str) -> Result<Duration, String> {
    guardian::parse_duration(value)
        .ok_or_else(|| "give a duration such as 2s, 500ms or 1m (or --wait-all)".into())
}

/// The value `names` gives `value`, else `choices` as the error ("give a, b or c").
fn named<T: Copy>(names: &[(&str, T)], value: &str, choices: &str) -> Result<T, String> {
    names
        .iter()
        .find(|(n, _)| *n == value)
        .map(|&(_, v)| v)
        .ok_or_else(|| choices.into())
}

/// `report --format`.
fn parse_format(value: &str) -> Result<&'static Format, String> {
    views::format(value).ok_or_else(|| format!("give {}", views::names(views::FORMATS)))
}

/// `report --by`.
fn parse_rows(value: &str) -> Result<Rows, String> {
    let names = [("process", Rows::Processes), ("bench", Rows::Benchmarks)];
    named(&names, value, "give process or bench")
}

/// `report --stacks-by`.
fn parse_site_order(value: &str) -> Result<SiteOrder, String> {
    let choices = "give peak, allocated, count, leaked or temporary";
    named(&SiteOrder::NAMES, value, choices)
}

/// `report --sort`.
fn parse_sort(value: &str) -> Result<SortKey, String> {
    named(
        &SortKey::NAMES,
        value,
        "give peak, allocs, bytes, leaked or rss",
    )
}

/// `report --view`.
fn parse_view(value: &str) -> Result<View, String> {
    let choices = "give peak, allocated, leaked or temporary";
    value.parse().map_err(|()| choices.into())
}

/// `report --weight`.
fn parse_weight(value: &str) -> Result<Weight, String> {
    value.parse().map_err(|()| "give bytes or count".into())
}

/// The SIZE flags of `check` (`--max-peak-heap 64MiB`), in bytes.
fn parse_size(value: &str) -> Result<u64, String> {
    units::parse_size(value).map_err(|e| e.to_string())
}

/// `check --by`: whether the limits apply to each benchmark.
fn parse_check_by(value: &str) -> Result<bool, String> {
    named(
        &[("run", false), ("bench", true)],
        value,
        "give run or bench",
    )
}

/// `diff --format`.
fn parse_diff_format(value: &str) -> Result<DiffFormat, String> {
    let names = [
        ("text", DiffFormat::Text),
        ("json", DiffFormat::Json),
        ("folded", DiffFormat::Folded),
        ("flamegraph", DiffFormat::Flamegraph),
    ];
    named(&names, value, "give text, json, folded or flamegraph")
}

/// `ctl marker KIND`.
fn parse_marker(value: &str) -> Result<MarkerKind, String> {
    MarkerKind::from_name(value)
        .ok_or_else(|| "give sample_start, sample_end, round_start or round_end".into())
}

/// What the command line asks for, once parsed.
// Made once per run and moved once: the size of the `Run` variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Parsed {
    /// Run a subcommand. For `record`, `RecordArgs::command` is the recorded command exactly as
    /// given (any bytes, not only UTF-8).
    Run(Cli),
    /// Print this on stdout and exit 0 (`--help`, `-h`, `help`, `--version`).
    Print(String),
    /// Print this one line on stderr and exit with `code`: 2, or 125 for `record`.
    Fail { message: String, code: u8 },
}

/// The name of the subcommand `args` (without the program name) asks for, if any: the first
/// argument that is not a flag. Top-level flags take no value, so nothing else can come first.
fn subcommand_of(args: &[String]) -> Option<&str> {
    args.iter()
        .map(String::as_str)
        .find(|a| !a.starts_with('-'))
}

/// Parses `argv` (program name first). Every argument but the recorded command's must be UTF-8;
/// the recorded command's are passed through untouched.
pub fn parse(argv: &[OsString]) -> Parsed {
    let args: Vec<String> = argv
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let sub = subcommand_of(&args).map(str::to_string);
    let code = if sub.as_deref() == Some("record") {
        EXIT_RECORD_USAGE
    } else {
        EXIT_USAGE
    };
    let help = match &sub {
        Some(s) if is_subcommand(s) => format!("`memtrack {s} --help`"),
        _ => "`memtrack --help`".to_string(),
    };
    let fail = |what: String| Parsed::Fail {
        message: format!("memtrack: {what}; {help} lists what it takes"),
        code,
    };
    let strs: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cli = match Cli::from_args(&["memtrack"], &strs) {
        Ok(cli) => cli,
        Err(early) if early.status.is_ok() => return Parsed::Print(early.output),
        Err(early) => {
            let mut what = argh_message(&early.output);
            // A missing positional: say the usage and an example, not only its name.
            if early
                .output
                .starts_with("Required positional arguments not provided")
            {
                if let Some(usage) = sub.as_deref().and_then(usage_of) {
                    what = format!("{what}: {usage}");
                }
            }
            return fail(what);
        }
    };
    if cli.version {
        return Parsed::Print(format!("memtrack {}", env!("CARGO_PKG_VERSION")));
    }
    let tail = match &cli.command {
        Some(Command::Record(r)) => r.command.len(),
        Some(_) => 0,
        None => {
            return fail(
                "give a command: record, report, check, diff, dump, doctor or ctl".to_string(),
            )
        }
    };
    // A greedy positional takes every argument after its first, so the recorded command is
    // exactly the last `tail` arguments.
    let rest = argv.get(1..).unwrap_or_default();
    let (flags, command) = rest.split_at(rest.len() - tail);
    if let Some(bad) = flags.iter().find(|a| a.to_str().is_none()) {
        return fail(format!(
            "argument '{}' is not valid UTF-8: memtrack's own flags and file names must be \
             (the recorded command's arguments, after --, may be any bytes)",
            bad.to_string_lossy()
        ));
    }
    if let Some(Command::Record(r)) = &mut cli.command {
        r.command = command.to_vec();
    }
    Parsed::Run(cli)
}

/// Exit code of a bad flag of `report`, `check`, `dump`, `ctl` and `doctor`.
const EXIT_USAGE: u8 = 2;
/// Exit code of a bad flag of `record`, whose other codes are the command's.
const EXIT_RECORD_USAGE: u8 = 125;

fn is_subcommand(name: &str) -> bool {
    ["record", "report", "check", "diff", "dump", "doctor", "ctl"].contains(&name)
}

/// The short usage of subcommand `sub` from its help ("usage: memtrack diff [options] <base>
/// <new>"), with its first example, if it has one.
fn usage_of(sub: &str) -> Option<String> {
    let help = match Cli::from_args(&["memtrack"], &[sub, "--help"]) {
        Err(early) if early.status.is_ok() => early.output,
        _ => return None,
    };
    let mut lines = help.lines().map(str::trim);
    let full = lines
        .find_map(|l| l.strip_prefix("Usage: "))?
        .replace(" [--]", "");
    // "memtrack diff [--format <format>] ... [--] <base> <new>": the options in one word.
    let usage = match (full.find(" ["), full.rfind("] ")) {
        (Some(first), Some(last)) => {
            format!("{} [options] {}", &full[..first], &full[last + 2..])
        }
        _ => full.to_string(),
    };
    let example = help
        .lines()
        .skip_while(|l| !l.starts_with("Examples:"))
        .nth(1)
        .map(str::trim);
    Some(match example {
        Some(e) => format!("usage: {usage}, e.g. {e}"),
        None => format!("usage: {usage}"),
    })
}

/// argh's error text on one line, in our words where we know its form.
fn argh_message(output: &str) -> String {
    let lines: Vec<&str> = output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let first = lines.first().copied().unwrap_or("bad arguments");
    if let Some(rest) = first.strip_prefix("Error parsing option '") {
        // "Error parsing option '--max-allocs' with value '1.5k': invalid digit found in string"
        if let Some((flag, rest)) = rest.split_once("' with value '") {
            if let Some((value, why)) = rest.split_once("': ") {
                if why == "duplicate values provided" {
                    return format!(
                        "{flag} was given twice ({value} the second time); give it once"
                    );
                }
                // A parser whose message names the flag itself (`--allocator`) says it all.
                if why.starts_with(flag) {
                    return why.to_string();
                }
                return format!("{flag} {value}: {why}");
            }
        }
    }
    if let Some(rest) = first.strip_prefix("Error parsing positional argument '") {
        // "Error parsing positional argument 'kind' with value 'frob': give sample_start, ..."
        if let Some((name, rest)) = rest.split_once("' with value '") {
            if let Some((value, why)) = rest.split_once("': ") {
                return format!("{name} {value}: {why}");
            }
        }
    }
    if let Some(arg) = first.strip_prefix("Unrecognized argument: ") {
        let hint = lines
            .get(1)
            .map(|l| format!(" ({})", l.trim_end_matches('?').to_lowercase() + "?"))
            .unwrap_or_default();
        return format!("unknown argument '{arg}'{hint}");
    }
    if first.starts_with("Required positional arguments not provided")
        || first.starts_with("Required options not provided")
    {
        return format!("missing {}", lines[1..].join(", "));
    }
    if first.starts_with("One of the following subcommands must be present") {
        let names: Vec<&str> = lines[1..]
            .iter()
            .copied()
            .filter(|l| *l != "help")
            .collect();
        return format!("give one of: {}", names.join(", "));
    }
    lines.join(" ")
}

/// The usage error for `value` given to `flag`: "FLAG VALUE: WHY", as every flag checked after
/// argh says it.
fn bad_value(flag: &str, value: &str, why: impl fmt::Display) -> Error {
    Error::Usage(format!("{flag} {value}: {why}"))
}

/// The per cent flags of `check` (`--max-increase 5%`): "5%", "2.5%", "0.25%" in hundredths
/// of a per cent (500, 250, 25).
fn parse_percent(value: &str) -> Result<u64, String> {
    parse_hundredths(value).map_err(String::from)
}

fn parse_hundredths(value: &str) -> Result<u64, &'static str> {
    const WHY: &str = "give a per cent with at most two decimals, e.g. 5% or 2.5%";
    let number = value.trim().strip_suffix('%').ok_or(WHY)?;
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || fraction.len() > 2 || !(fraction.is_empty() || digits(fraction)) {
        return Err(WHY);
    }
    let whole: u64 = whole.parse().map_err(|_| WHY)?;
    let fraction: u64 = format!("{fraction:0<2}").parse().map_err(|_| WHY)?;
    whole
        .checked_mul(100)
        .and_then(|w| w.checked_add(fraction))
        .ok_or(WHY)
}

impl TryFrom<RecordArgs> for RecordOptions {
    type Error = Error;

    /// Checks what can be checked before anything is loaded or spawned, in this order: the
    /// command, `-o`, `--ring-size`, `--control` with `--start-running`, `--grace` with
    /// `--wait-all`, then the allocator functions.
    fn try_from(a: RecordArgs) -> Result<RecordOptions, Error> {
        if a.command.is_empty() {
            return Err(Error::Usage(
                "no command given; usage: memtrack record [-o FILE] -- CMD [ARGS...]".into(),
            ));
        }
        crate::output::validate(&a.output)?;
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let ring_size_mib = a
            .ring_size
            .unwrap_or_else(|| record::default_ring_size_mib(cpus));
        if ring_size_mib == 0 || !ring_size_mib.is_power_of_two() || ring_size_mib > 1024 {
            return Err(bad_value(
                "--ring-size",
                &ring_size_mib.to_string(),
                "give a power of two between 1 and 1024 (MiB)",
            ));
        }
        let control = control_fifo(a.control, a.start_running)?;
        let ending = match (a.grace, a.wait_all) {
            (Some(_), true) => {
                return Err(Error::Usage(
                    "--grace and --wait-all contradict each other: give one".into(),
                ))
            }
            (Some(grace), false) => guardian::Ending::Grace(grace),
            (None, true) => guardian::Ending::WaitAll,
            (None, false) => guardian::Ending::default(),
        };
        let mut custom = Vec::new();
        let mut python = false;
        for flag in &a.allocator {
            match *flag {
                AllocatorFlag::Python => {
                    python = true;
                    custom.extend(custom::python());
                }
                AllocatorFlag::Function(c) => custom.push(c),
            }
        }
        if a.python_objects && !python {
            custom.extend(custom::python());
        }
        custom::check_unique(&custom).map_err(Error::Usage)?;
        Ok(RecordOptions {
            output: a.output,
            ring_size_bytes: u64::from(ring_size_mib) << 20,
            command: a.command,
            rss: !a.no_rss,
            rmap: !a.no_rss && !a.no_rmap,
            probe_floor: a.probe_floor,
            mappings: !a.no_mappings,
            quiet: a.quiet,
            user: a.user,
            control,
            start_running: a.start_running,
            ending,
            custom,
            stacks: a.stacks && !a.no_stacks,
            symbols: !a.no_symbols,
            private_libs: !a.no_private_libs,
            leak_scan: !a.no_leak_scan && !a.probe_floor,
        })
    }
}

/// `record --control PATH` made absolute (the command may change directory before it opens
/// the FIFO), in a directory that exists; `--start-running` only with it.
fn control_fifo(control: Option<PathBuf>, start_running: bool) -> Result<Option<PathBuf>, Error> {
    let Some(path) = control else {
        if start_running {
            return Err(Error::Usage(
                "--start-running only means something with --control PATH (without it, \
                 everything is recorded)"
                    .into(),
            ));
        }
        return Ok(None);
    };
    if path.as_os_str().is_empty() {
        return Err(Error::Usage(
            "--control needs a path for the FIFO, e.g. --control /tmp/bench.ctl; an empty one \
             names no file"
                .into(),
        ));
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    if let Some(dir) = dir.filter(|d| !d.is_dir()) {
        return Err(Error::Usage(format!(
            "--control {}: the directory {} does not exist; create it first, or give a path in \
             an existing directory",
            path.display(),
            dir.display()
        )));
    }
    std::path::absolute(&path)
        .map(Some)
        .map_err(|e| Error::io(&path, e))
}

impl TryFrom<ReportArgs> for ReportOptions {
    type Error = Error;

    fn try_from(a: ReportArgs) -> Result<ReportOptions, Error> {
        let format = a.format;
        let rows = a.by;
        let scope =
            match (a.pid, a.tree, a.bench) {
                (Some(_), Some(_), _) => return Err(Error::Usage(
                    "--pid and --tree cannot be used together: --pid shows one process, --tree \
                     a process and its descendants"
                        .into(),
                )),
                (Some(_), None, Some(_)) | (None, Some(_), Some(_)) => return Err(Error::Usage(
                    "--bench cannot be used with --pid or --tree: --bench already names the pid \
                     tree the harness gave the benchmark"
                        .into(),
                )),
                (Some(pid), None, None) => Scope::Process { pid },
                (None, Some(pid), None) => Scope::Tree { pid },
                (None, None, Some(uri)) => Scope::Benchmark { uri },
                (None, None, None) => Scope::Run,
            };
        let order = a.stacks_by;
        let top =
            match a.stacks_top {
                Some(n) => Some(usize::try_from(n).map_err(|_| {
                    bad_value("--stacks-top", &n.to_string(), "give a count of sites")
                })?),
                None => None,
            };
        let view = a.view.unwrap_or_default();
        let weight = a.weight.unwrap_or_default();
        let stack_format = format.is_stack_format();
        if !stack_format && (a.view.is_some() || a.weight.is_some()) {
            return Err(Error::Usage(format!(
                "--view and --weight choose what a stack format weighs: give them with \
                 --format {}",
                views::names(views::stack_formats())
            )));
        }
        if stack_format && (order.is_some() || top.is_some()) {
            return Err(Error::Usage(format!(
                "--stacks-by and --stacks-top choose the sites text and json list; --format {} \
                 takes every site: drop them (--view and --weight choose what it weighs)",
                format.name
            )));
        }
        // A stack format needs every site of the scope, per process, with its frames (the
        // profile); so do the page's flame graphs (when the recording has stacks). The report's
        // own list of sites, which these formats do not show, stays at its default length.
        let profile = |order| SiteOptions {
            order,
            top: DEFAULT_TOP,
            profile: true,
        };
        let stacks = match format.needs.sites {
            Sites::Profile => Some(profile(SiteOrder::default())),
            // The page lists the sites of definitely lost blocks, the most lost first.
            Sites::ProfileLostFirst => Some(profile(SiteOrder::Leaked)),
            Sites::AsAsked => (a.stacks || order.is_some() || top.is_some()).then(|| SiteOptions {
                order: order.unwrap_or_default(),
                top: top.unwrap_or(DEFAULT_TOP),
                profile: false,
            }),
        };
        if let Some(path) = &a.output {
            crate::output::validate_output(path, "report.txt")?;
        }
        let row_options = row_options(a.top, a.all, a.sort, format)?;
        let output = a.output;
        Ok(ReportOptions {
            file: a.file,
            format,
            scope,
            rows,
            stacks,
            output,
            row_options,
            width: None,
            view,
            weight,
            suppress: a.suppress.as_deref().map(load_suppressions).transpose()?,
        })
    }
}

/// Reads and parses the suppression file of `--suppress`; a bad line is a usage error naming
/// its line.
fn load_suppressions(
    path: &std::path::Path,
) -> Result<crate::analyze::suppress::Suppressions, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::Usage(format!(
            "--suppress {}: cannot read it ({e}); give a file of leak:PATTERN lines",
            path.display()
        ))
    })?;
    crate::analyze::suppress::Suppressions::parse(&path.display().to_string(), &text)
        .map_err(|e| Error::Usage(format!("--suppress {e}")))
}

/// `report --top N`, `--all` and `--sort KEY` as the rows of the text and markdown tables.
fn row_options(
    top: Option<u64>,
    all: bool,
    sort: Option<SortKey>,
    format: &Format,
) -> Result<RowOptions, Error> {
    if format.needs.every_row && (top.is_some() || all || sort.is_some()) {
        return Err(Error::Usage(format!(
            "--top, --all and --sort choose the rows of the text and markdown tables; --format \
             {} always lists every process and benchmark: drop them, or sort with jq",
            format.name
        )));
    }
    if all && top.is_some() {
        return Err(Error::Usage(
            "--top and --all cannot be used together: --top N shows N rows, --all every row".into(),
        ));
    }
    let top = match top {
        Some(0) => {
            return Err(bad_value(
                "--top",
                "0",
                "give at least 1 row, or --all for every row",
            ))
        }
        Some(n) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
        None if all => None,
        None => Some(DEFAULT_TOP_ROWS),
    };
    Ok(RowOptions { top, sort })
}

impl TryFrom<CheckArgs> for CheckOptions {
    type Error = Error;

    fn try_from(a: CheckArgs) -> Result<CheckOptions, Error> {
        let mut opts = CheckOptions {
            file: a.file,
            scope: Scope::Run,
            max_peak_heap: a.max_peak_heap,
            max_allocs: a.max_allocs,
            max_bytes: a.max_bytes,
            max_leaked: a.max_leaked,
            max_reachable: a.max_reachable,
            max_peak_rss: a.max_peak_rss,
            allow_incomplete: a.allow_incomplete,
            baseline: a.baseline,
            max_increase: a.max_increase,
            metric_increases: Vec::new(),
            max_increase_bytes: a.max_increase_bytes,
            by_bench: a.by_bench,
            suppress: a.suppress.as_deref().map(load_suppressions).transpose()?,
        };
        let per_metric = [
            a.max_peak_heap_increase,
            a.max_allocs_increase,
            a.max_bytes_increase,
            a.max_leaked_increase,
            a.max_leaked_blocks_increase,
            a.max_temporary_increase,
            a.max_peak_rss_increase,
            a.max_peak_mapped_increase,
        ];
        for ((metric, _), value) in check::METRIC_INCREASE_FLAGS.into_iter().zip(per_metric) {
            if let Some(limit) = value {
                opts.metric_increases.push((metric, limit));
            }
        }
        if opts.has_no_limit() {
            return Err(Error::Usage(format!(
                "memtrack check needs at least one limit: {}; or, with --baseline FILE, {}",
                check::LIMIT_FLAGS,
                check::INCREASE_FLAGS
            )));
        }
        match (&opts.baseline, opts.has_increase_limit()) {
            (None, true) => {
                return Err(Error::Usage(
                    "the --max-*-increase limits need --baseline FILE, the recording they \
                     compare with (e.g. main's)"
                        .into(),
                ))
            }
            (Some(_), false) => {
                return Err(Error::Usage(format!(
                    "--baseline needs a limit on the increase: {}",
                    check::INCREASE_FLAGS
                )))
            }
            _ => {}
        }
        if opts.baseline.is_some() && a.tree.is_some() {
            return Err(Error::Usage(
                "--tree cannot be used with --baseline: pids differ between recordings; check \
                 the run, or a benchmark with --bench (`memtrack diff` matches processes)"
                    .into(),
            ));
        }
        if opts.by_bench && (a.tree.is_some() || a.bench.is_some()) {
            return Err(Error::Usage(
                "--by bench checks every benchmark: drop --tree and --bench".into(),
            ));
        }
        opts.scope =
            match (a.tree, a.bench) {
                (Some(_), Some(_)) => return Err(Error::Usage(
                    "--tree and --bench cannot be used together: --bench already names the pid \
                     tree the harness gave the benchmark"
                        .into(),
                )),
                (Some(pid), None) => Scope::Tree { pid },
                (None, Some(uri)) => Scope::Benchmark { uri },
                (None, None) => Scope::Run,
            };
        Ok(opts)
    }
}

impl TryFrom<DiffArgs> for DiffOptions {
    type Error = Error;

    fn try_from(a: DiffArgs) -> Result<DiffOptions, Error> {
        let format = a.format;
        let stack_format = matches!(format, DiffFormat::Folded | DiffFormat::Flamegraph);
        if !stack_format && (a.view.is_some() || a.weight.is_some()) {
            return Err(Error::Usage(
                "--view and --weight choose what --format folded and flamegraph weigh: give \
                 them with one of those (text and json list every value of each site)"
                    .into(),
            ));
        }
        if a.base_widths && format != DiffFormat::Flamegraph {
            return Err(Error::Usage(
                "--base-widths chooses the widths of the flame graph: give it with --format \
                 flamegraph"
                    .into(),
            ));
        }
        if stack_format && a.top.is_some() {
            return Err(Error::Usage(format!(
                "--top chooses how many changed sites text and json list; --format {} has \
                 every stack: drop it",
                if format == DiffFormat::Folded {
                    "folded"
                } else {
                    "flamegraph"
                }
            )));
        }
        // The diff's question is what a change made a program do, so allocated is its default
        // view, where report's is the peak.
        let view = a.view.unwrap_or(View::Allocated);
        let weight = a.weight.unwrap_or_default();
        let top = match a.top {
            Some(n) => usize::try_from(n)
                .map_err(|_| bad_value("--top", &n.to_string(), "give a count of sites"))?,
            None => DEFAULT_TOP,
        };
        if let Some(path) = &a.output {
            crate::output::validate_output(path, "diff.txt")?;
        }
        Ok(DiffOptions {
            base: a.base,
            new: a.new,
            format,
            stacks: a.stacks || a.top.is_some(),
            top,
            view,
            weight,
            base_widths: a.base_widths,
            output: a.output,
        })
    }
}

impl TryFrom<CtlArgs> for CtlOptions {
    type Error = Error;

    /// The request first, then the FIFO: `--control PATH`, or `$MEMTRACK_CONTROL` without it.
    fn try_from(a: CtlArgs) -> Result<CtlOptions, Error> {
        let command = match a.action {
            CtlAction::Hello(_) => None,
            CtlAction::Start(_) => Some(ControlCommand::Start),
            CtlAction::Stop(_) => Some(ControlCommand::Stop),
            CtlAction::Bench(b) => Some(ControlCommand::Bench(Bench {
                uri: b.uri,
                pid: b.pid.unwrap_or_else(std::os::unix::process::parent_id),
            })),
            CtlAction::Marker(m) => Some(ControlCommand::Marker { kind: m.kind }),
        };
        let from_env = std::env::var_os(control::ENV_VAR).map(PathBuf::from);
        let fifo = a.control.or(from_env).ok_or_else(|| {
            Error::Usage(format!(
                "no control FIFO: give --control PATH, or run under `memtrack record --control \
                 PATH`, which sets ${}",
                control::ENV_VAR
            ))
        })?;
        let request = match command {
            Some(command) => Request::Command(command),
            None => Request::Hello {
                version: control::PROTOCOL_VERSION,
            },
        };
        Ok(CtlOptions { fifo, request })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `Cli` of `args` (without the program name), which must parse.
    fn cli(args: &[&str]) -> Cli {
        let argv: Vec<OsString> = std::iter::once("memtrack")
            .chain(args.iter().copied())
            .map(OsString::from)
            .collect();
        match parse(&argv) {
            Parsed::Run(cli) => cli,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    fn report(args: &[&str]) -> Result<ReportOptions, Error> {
        match cli(&[&["report", "run.mt"], args].concat()).command {
            Some(Command::Report(a)) => a.try_into(),
            other => panic!("{other:?}"),
        }
    }

    fn check(args: &[&str]) -> Result<CheckOptions, Error> {
        match cli(&[&["check", "run.mt"], args].concat()).command {
            Some(Command::Check(a)) => a.try_into(),
            other => panic!("{other:?}"),
        }
    }

    fn diff(args: &[&str]) -> Result<DiffOptions, Error> {
        match cli(&[&["diff", "a.mt", "b.mt"], args].concat()).command {
            Some(Command::Diff(a)) => a.try_into(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn diff_stack_formats_weigh_allocated_bytes_unless_told() {
        let opts = diff(&["--format", "folded"]).unwrap();
        assert_eq!(
            (opts.format, opts.view, opts.weight, opts.base_widths),
            (DiffFormat::Folded, View::Allocated, Weight::Bytes, false)
        );
        let opts = diff(&[
            "--format",
            "flamegraph",
            "--view",
            "leaked",
            "--weight",
            "count",
            "--base-widths",
        ])
        .unwrap();
        assert_eq!(
            (opts.format, opts.view, opts.weight, opts.base_widths),
            (DiffFormat::Flamegraph, View::Leaked, Weight::Count, true)
        );
    }

    #[test]
    fn diff_flags_that_do_not_fit_the_format_are_usage() {
        assert_eq!(
            refused(&["diff", "a.mt", "b.mt", "--format", "svg"]),
            (
                "memtrack: --format svg: give text, json, folded or flamegraph; `memtrack diff \
                 --help` lists what it takes"
                    .to_string(),
                2
            )
        );
        let e = usage(diff(&["--view", "peak"]));
        assert!(e.starts_with("--view and --weight choose"), "{e}");
        let e = usage(diff(&["--format", "folded", "--base-widths"]));
        assert!(e.starts_with("--base-widths chooses"), "{e}");
        let e = usage(diff(&["--format", "folded", "--top", "3"]));
        assert!(e.starts_with("--top chooses"), "{e}");
        assert_eq!(
            refused(&["diff", "a.mt", "b.mt", "--format", "folded", "--view", "live"]).0,
            "memtrack: --view live: give peak, allocated, leaked or temporary; `memtrack diff \
             --help` lists what it takes"
        );
    }

    fn record(args: &[&str]) -> Result<RecordOptions, Error> {
        match cli(&[&["record"], args].concat()).command {
            Some(Command::Record(a)) => a.try_into(),
            other => panic!("{other:?}"),
        }
    }

    fn ctl(args: &[&str]) -> Result<CtlOptions, Error> {
        match cli(&[&["ctl"], args].concat()).command {
            Some(Command::Ctl(a)) => a.try_into(),
            other => panic!("{other:?}"),
        }
    }

    /// The line and exit code of a value argh's parsers refuse (program name not included).
    fn refused(args: &[&str]) -> (String, u8) {
        let argv: Vec<OsString> = std::iter::once("memtrack")
            .chain(args.iter().copied())
            .map(OsString::from)
            .collect();
        match parse(&argv) {
            Parsed::Fail { message, code } => (message, code),
            other => panic!("{args:?} parsed: {other:?}"),
        }
    }

    /// `refused`'s line for a flag of `report run.mt`, which exits 2.
    fn report_refuses(args: &[&str]) -> String {
        let (message, code) = refused(&[&["report", "run.mt"], args].concat());
        assert_eq!(code, 2, "{message}");
        message
    }

    /// The message of a usage error.
    fn usage<T: fmt::Debug>(result: Result<T, Error>) -> String {
        match result {
            Err(Error::Usage(m)) => m,
            other => panic!("not a usage error: {other:?}"),
        }
    }

    #[test]
    fn report_options_from_flags() {
        let opts = report(&["--format", "json", "--tree", "7", "--by", "bench"]).unwrap();
        assert_eq!(opts.file, PathBuf::from("run.mt"));
        assert_eq!(opts.format.name, "json");
        assert_eq!(opts.scope, Scope::Tree { pid: 7 });
        assert_eq!(opts.rows, Rows::Benchmarks);
        assert_eq!(
            report(&["--pid", "3"]).unwrap().scope,
            Scope::Process { pid: 3 }
        );
        assert_eq!(
            report(&[]).unwrap(),
            ReportOptions {
                file: "run.mt".into(),
                ..ReportOptions::default()
            }
        );
    }

    #[test]
    fn row_flags() {
        let opts = report(&["--top", "5", "--sort", "leaked"]).unwrap();
        assert_eq!(
            opts.row_options,
            RowOptions {
                top: Some(5),
                sort: Some(SortKey::Leaked)
            }
        );
        assert_eq!(report(&["--all"]).unwrap().row_options.top, None);
        assert_eq!(report(&[]).unwrap().row_options, RowOptions::default());
        let md = report(&["--format", "markdown", "--top", "3"]).unwrap();
        assert_eq!(md.format.name, "markdown");
        assert_eq!(md.row_options.top, Some(3));
    }

    #[test]
    fn bad_row_flags_are_usage() {
        assert!(usage(report(&["--top", "3", "--all"])).contains("cannot be used together"));
        assert!(usage(report(&["--top", "0"])).contains("or --all for every row"));
        assert_eq!(
            report_refuses(&["--sort", "size"]),
            "memtrack: --sort size: give peak, allocs, bytes, leaked or rss; `memtrack report \
             --help` lists what it takes"
        );
        for flags in [&["--top", "3"][..], &["--all"], &["--sort", "peak"]] {
            let mut args = vec!["--format", "json"];
            args.extend(flags);
            assert!(
                usage(report(&args)).contains("--format json always lists every process"),
                "{flags:?}"
            );
        }
    }

    #[test]
    fn stacks_flags() {
        assert_eq!(report(&[]).unwrap().stacks, None);
        assert_eq!(
            report(&["--stacks"]).unwrap().stacks,
            Some(SiteOptions {
                order: SiteOrder::Peak,
                top: 10,
                profile: false,
            })
        );
        // Choosing an order or a count asks for the sites too.
        assert_eq!(
            report(&["--stacks-by", "leaked", "--stacks-top", "0"])
                .unwrap()
                .stacks,
            Some(SiteOptions {
                order: SiteOrder::Leaked,
                top: 0,
                profile: false,
            })
        );
        assert_eq!(
            report_refuses(&["--stacks-by", "size"]),
            "memtrack: --stacks-by size: give peak, allocated, count, leaked or temporary; \
             `memtrack report --help` lists what it takes"
        );
    }

    #[test]
    fn stack_format_flags() {
        use crate::model::profile::{View, Weight};
        let opts = report(&[
            "--format", "folded", "--view", "leaked", "--weight", "count",
        ])
        .unwrap();
        assert_eq!(opts.format.name, "folded");
        assert_eq!((opts.view, opts.weight), (View::Leaked, Weight::Count));
        // Every site in the profile; the report's own list as by default.
        assert_eq!(
            opts.stacks,
            Some(SiteOptions {
                order: SiteOrder::Peak,
                top: DEFAULT_TOP,
                profile: true,
            })
        );
        let opts = report(&["--format", "pprof"]).unwrap();
        assert_eq!((opts.view, opts.weight), (View::Peak, Weight::Bytes));
        assert!(usage(report(&["--view", "leaked"])).starts_with("--view and --weight choose"));
        assert!(usage(report(&["--format", "json", "--weight", "count"]))
            .starts_with("--view and --weight choose"));
        assert_eq!(
            report_refuses(&["--format", "folded", "--view", "live"]),
            "memtrack: --view live: give peak, allocated, leaked or temporary; `memtrack report \
             --help` lists what it takes"
        );
        assert_eq!(
            report_refuses(&["--format", "flamegraph", "--weight", "kg"]),
            "memtrack: --weight kg: give bytes or count; `memtrack report --help` lists what it \
             takes"
        );
        assert!(
            usage(report(&["--format", "speedscope", "--stacks-top", "3"]))
                .starts_with("--stacks-by and --stacks-top choose the sites text and json list")
        );
    }

    #[test]
    fn report_of_a_benchmark() {
        assert_eq!(
            report(&["--bench", "parse::small"]).unwrap().scope,
            Scope::Benchmark {
                uri: "parse::small".into()
            }
        );
        let e = usage(report(&["--bench", "b", "--tree", "1"]));
        assert!(
            e.starts_with("--bench cannot be used with --pid or --tree"),
            "{e}"
        );
    }

    #[test]
    fn pid_and_tree_together_is_usage() {
        let e = usage(report(&["--pid", "1", "--tree", "1"]));
        assert!(
            e.starts_with("--pid and --tree cannot be used together"),
            "{e}"
        );
    }

    #[test]
    fn bad_format_and_rows_name_the_choices() {
        assert_eq!(
            report_refuses(&["--format", "xml"]),
            "memtrack: --format xml: give text, json, markdown, html, timeline-csv, \
             timeline-json, folded, flamegraph, pprof or speedscope; `memtrack report --help` \
             lists what it takes"
        );
        assert_eq!(
            report_refuses(&["--by", "frob"]),
            "memtrack: --by frob: give process or bench; `memtrack report --help` lists what it \
             takes"
        );
        // A bad value is refused before any conflict between flags, as before.
        let e = report_refuses(&["--format", "xml", "--pid", "1", "--tree", "1"]);
        assert!(e.starts_with("memtrack: --format xml"), "{e}");
    }

    #[test]
    fn check_options_from_flags() {
        let opts = check(&[
            "--max-peak-heap",
            "64MiB",
            "--max-allocs",
            "5",
            "--bench",
            "b",
        ]);
        let opts = opts.unwrap();
        assert_eq!(opts.max_peak_heap, Some(64 << 20));
        assert_eq!(opts.max_allocs, Some(5));
        assert_eq!(opts.scope, Scope::Benchmark { uri: "b".into() });
        assert!(!opts.allow_incomplete);
    }

    #[test]
    fn check_without_limit_is_usage() {
        let e = usage(check(&[]));
        assert!(e.contains("--max-peak-heap"), "{e}");
    }

    #[test]
    fn tree_and_bench_together_is_usage() {
        let e = usage(check(&["--tree", "1", "--bench", "x", "--max-allocs", "1"]));
        assert!(
            e.starts_with("--tree and --bench cannot be used together"),
            "{e}"
        );
    }

    #[test]
    fn a_bad_size_names_its_flag() {
        let (e, code) = refused(&["check", "run.mt", "--max-leaked", "12XB"]);
        assert!(
            e.starts_with("memtrack: --max-leaked 12XB: invalid size '12XB'"),
            "{e}"
        );
        assert!(
            e.ends_with("; `memtrack check --help` lists what it takes"),
            "{e}"
        );
        assert_eq!(code, 2);
        assert_eq!(
            check(&[
                "--max-increase-bytes",
                "1.5k",
                "--baseline",
                "b",
                "--max-increase",
                "0%"
            ])
            .unwrap()
            .max_increase_bytes,
            Some(1536)
        );
    }

    #[test]
    fn check_against_a_baseline() {
        use crate::model::metric::Metric;
        let opts = check(&[
            "--baseline",
            "main.mt",
            "--max-increase",
            "5%",
            "--max-peak-heap-increase",
            "2.5%",
            "--max-increase-bytes",
            "1MiB",
            "--by",
            "bench",
        ])
        .unwrap();
        assert_eq!(opts.baseline, Some(PathBuf::from("main.mt")));
        assert_eq!(opts.max_increase, Some(500));
        assert_eq!(opts.metric_increases, vec![(Metric::PeakHeap, 250)]);
        assert_eq!(opts.max_increase_bytes, Some(1 << 20));
        assert!(opts.by_bench);
    }

    #[test]
    fn increase_limits_need_a_baseline_and_the_other_way_round() {
        let e = usage(check(&["--max-increase", "5%"]));
        assert!(
            e.starts_with("the --max-*-increase limits need --baseline"),
            "{e}"
        );
        let e = usage(check(&["--baseline", "b.mt", "--max-allocs", "3"]));
        assert!(
            e.starts_with("--baseline needs a limit on the increase"),
            "{e}"
        );
        let e = usage(check(&[
            "--baseline",
            "b.mt",
            "--max-increase",
            "1%",
            "--tree",
            "4",
        ]));
        assert!(
            e.starts_with("--tree cannot be used with --baseline"),
            "{e}"
        );
        let e = usage(check(&[
            "--max-allocs",
            "3",
            "--by",
            "bench",
            "--bench",
            "x",
        ]));
        assert!(e.starts_with("--by bench checks every benchmark"), "{e}");
    }

    #[test]
    fn percentages_parse_exactly() {
        assert_eq!(parse_percent("5%"), Ok(500));
        assert_eq!(parse_percent("2.5%"), Ok(250));
        assert_eq!(parse_percent("0.01%"), Ok(1));
        assert_eq!(parse_percent("0%"), Ok(0));
        for bad in [
            "5",
            "-1%",
            "1.234%",
            "%",
            ".5%",
            "1e3%",
            "x%",
            "99999999999999999999%",
        ] {
            assert!(parse_percent(bad).is_err(), "{bad}");
        }
        assert_eq!(
            refused(&["check", "run.mt", "--baseline", "b", "--max-increase", "5"]),
            (
                "memtrack: --max-increase 5: give a per cent with at most two decimals, e.g. 5% \
                 or 2.5%; `memtrack check --help` lists what it takes"
                    .to_string(),
                2
            )
        );
        let (e, _) = refused(&["check", "run.mt", "--max-leaked-increase", "x"]);
        assert!(
            e.starts_with("memtrack: --max-leaked-increase x: give a per cent"),
            "{e}"
        );
        let (e, _) = refused(&["check", "run.mt", "--max-allocs", "1", "--by", "tree"]);
        assert!(
            e.starts_with("memtrack: --by tree: give run or bench;"),
            "{e}"
        );
    }

    #[test]
    fn record_needs_a_command() {
        assert!(usage(record(&[])).starts_with("no command given"));
    }

    #[test]
    fn record_options_from_flags() {
        let opts = record(&[
            "-o",
            "x.mt",
            "--ring-size",
            "64",
            "--no-rss",
            "--",
            "ls",
            "-l",
        ]);
        let opts = opts.unwrap();
        assert_eq!(opts.output, PathBuf::from("x.mt"));
        assert_eq!(opts.ring_size_bytes, 64 << 20);
        assert_eq!(opts.command, ["ls", "-l"].map(OsString::from));
        assert!(!opts.rss && opts.mappings && !opts.probe_floor);
        assert_eq!(opts.ending, guardian::Ending::default());
    }

    #[test]
    fn ring_size_must_be_a_power_of_two() {
        let e = usage(record(&["--ring-size", "3", "--", "true"]));
        assert_eq!(
            e,
            "--ring-size 3: give a power of two between 1 and 1024 (MiB)"
        );
        assert!(record(&["--ring-size", "2048", "--", "true"]).is_err());
    }

    #[test]
    fn start_running_needs_control() {
        let e = usage(record(&["--start-running", "--", "true"]));
        assert!(
            e.starts_with("--start-running only means something with --control"),
            "{e}"
        );
    }

    #[test]
    fn control_fifo_is_made_absolute() {
        let opts = record(&["--control", "bench.ctl", "--", "true"]).unwrap();
        let fifo = opts.control.unwrap();
        assert!(
            fifo.is_absolute() && fifo.ends_with("bench.ctl"),
            "{fifo:?}"
        );
    }

    #[test]
    fn grace_and_wait_all_contradict() {
        let e = usage(record(&["--grace", "1s", "--wait-all", "--", "true"]));
        assert!(e.contains("contradict"), "{e}");
        let opts = record(&["--grace", "500ms", "--", "true"]).unwrap();
        assert_eq!(
            opts.ending,
            guardian::Ending::Grace(Duration::from_millis(500))
        );
        let opts = record(&["--wait-all", "--", "true"]).unwrap();
        assert_eq!(opts.ending, guardian::Ending::WaitAll);
        assert_eq!(
            refused(&["record", "--grace", "soon", "--", "true"]),
            (
                "memtrack: --grace soon: give a duration such as 2s, 500ms or 1m (or --wait-all); \
                 `memtrack record --help` lists what it takes"
                    .to_string(),
                125
            )
        );
    }

    #[test]
    fn a_bad_allocator_spec_names_the_flag_once() {
        let (e, code) = refused(&["record", "--allocator", "pool", "--", "true"]);
        assert!(
            e.starts_with("memtrack: --allocator 'pool': no '=' between the symbol"),
            "{e}"
        );
        assert_eq!(code, 125);
    }

    #[test]
    fn python_is_probed_once() {
        let once = record(&["--python-objects", "--", "true"]).unwrap();
        let both = record(&["--allocator", "python", "--python-objects", "--", "true"]).unwrap();
        assert!(!once.custom.is_empty());
        assert_eq!(once.custom.len(), both.custom.len());
    }

    #[test]
    fn ctl_marker_kind_is_checked_before_the_fifo() {
        let (e, code) = refused(&["ctl", "marker", "frob"]);
        assert_eq!(
            e,
            "memtrack: kind frob: give sample_start, sample_end, round_start or round_end; \
             `memtrack ctl --help` lists what it takes"
        );
        assert_eq!(code, 2);
        let opts = ctl(&["--control", "/tmp/c", "marker", "round_end"]).unwrap();
        assert_eq!(
            opts.request,
            Request::Command(ControlCommand::Marker {
                kind: MarkerKind::RoundEnd
            })
        );
    }

    #[test]
    fn ctl_options_from_flags() {
        let opts = ctl(&["--control", "/tmp/c", "bench", "u", "--pid", "0"]).unwrap();
        assert_eq!(opts.fifo, PathBuf::from("/tmp/c"));
        assert_eq!(
            opts.request,
            Request::Command(ControlCommand::Bench(Bench {
                uri: "u".into(),
                pid: 0
            }))
        );
        let hello = ctl(&["--control", "/tmp/c", "hello"]).unwrap();
        assert!(matches!(hello.request, Request::Hello { .. }));
    }

    #[test]
    fn the_recorded_command_is_kept_byte_for_byte() {
        use std::os::unix::ffi::OsStrExt;
        let arg = OsString::from(std::ffi::OsStr::from_bytes(b"a\xffb"));
        let argv = ["memtrack", "record", "--", "echo"]
            .map(OsString::from)
            .into_iter()
            .chain([arg.clone()])
            .collect::<Vec<_>>();
        let Parsed::Run(Cli {
            command: Some(Command::Record(r)),
            ..
        }) = parse(&argv)
        else {
            panic!("record did not parse")
        };
        assert_eq!(r.command, [OsString::from("echo"), arg]);
    }
}
