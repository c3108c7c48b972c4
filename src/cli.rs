//! The command line as typed: one argh struct per subcommand. Doc comments are the --help text.
//! `main` turns these into the validated options each subcommand runs on.

use std::path::PathBuf;

use argh::FromArgs;

/// Record every heap allocation and resident-memory change of a command and all its
/// descendants with eBPF, and report on the recording.
#[derive(FromArgs, Debug)]
#[argh(
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
    #[argh(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(FromArgs, Debug)]
#[argh(subcommand)]
pub enum Command {
    Record(RecordArgs),
    Report(ReportArgs),
    Check(CheckArgs),
    Dump(DumpArgs),
    Doctor(DoctorArgs),
    Ctl(CtlArgs),
}

/// Run a command and record its allocations, and those of every process it starts, into a file.
/// Exits with the command's status (128+N if a signal N killed it), 127 if the command does not
/// exist, 125 if memtrack itself fails. Needs root (or CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN).
#[derive(FromArgs, Debug)]
#[argh(
    subcommand,
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
    /// size of the kernel ring buffer in MiB, a power of two (default: 2 per CPU, 16 to 256);
    /// raise it if events are lost
    #[argh(option)]
    pub ring_size: Option<u32>,
    /// do not record resident memory (rss_stat), only allocations and the process tree
    #[argh(switch)]
    pub no_rss: bool,
    /// do not record raw mappings (mmap, munmap, mremap, brk): their syscall tracepoints add
    /// about 0.25 µs to every syscall of every process on the machine while recording (without
    /// them, memtrack cannot warn about an allocator it did not find)
    #[argh(switch)]
    pub no_mappings: bool,
    /// benchmarks only: attach empty programs at the allocator sites and record no
    /// allocations, to measure the kernel's own cost of the probes (scripts/bench.sh)
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
    #[argh(option)]
    pub grace: Option<String>,
    /// wait for every process of the tree, however long it runs after the command ended
    #[argh(switch)]
    pub wait_all: bool,
    /// the command to record and its arguments (after --)
    #[argh(positional, greedy)]
    pub command: Vec<String>,
}

/// Summarise a recording: per run, per process tree and per process.
#[derive(FromArgs, Debug)]
#[argh(
    subcommand,
    name = "report",
    example = "memtrack report run.mt --format json"
)]
pub struct ReportArgs {
    /// the recording to read
    #[argh(positional)]
    pub file: PathBuf,
    /// output format: text (default) or json
    #[argh(option, default = "String::from(\"text\")")]
    pub format: String,
    /// only this process
    #[argh(option)]
    pub pid: Option<u32>,
    /// only this process and its descendants
    #[argh(option)]
    pub tree: Option<u32>,
    /// rows of the text form: process (default) or bench (one row per benchmark the harness
    /// named; JSON always has both)
    #[argh(option, default = "String::from(\"process\")")]
    pub by: String,
}

/// Fail (exit 1) when a recording exceeds memory limits; exit 0 when all hold, 2 on a bad file
/// or flag. SIZE takes plain bytes or units: 64MiB, 1.5GB, 512k.
#[derive(FromArgs, Debug)]
#[argh(
    subcommand,
    name = "check",
    example = "memtrack check run.mt --max-peak-heap 64MiB --max-leaked 0"
)]
pub struct CheckArgs {
    /// the recording to read
    #[argh(positional)]
    pub file: PathBuf,
    /// check only this process and its descendants (default: the whole run)
    #[argh(option)]
    pub tree: Option<u32>,
    /// check only this benchmark: its pid tree inside its measuring windows
    #[argh(option)]
    pub bench: Option<String>,
    /// highest allowed peak of live heap (SIZE)
    #[argh(option)]
    pub max_peak_heap: Option<String>,
    /// highest allowed number of allocations
    #[argh(option)]
    pub max_allocs: Option<u64>,
    /// highest allowed total of bytes allocated (SIZE)
    #[argh(option)]
    pub max_bytes: Option<String>,
    /// highest allowed heap still live when processes exit (SIZE)
    #[argh(option)]
    pub max_leaked: Option<String>,
    /// highest allowed peak resident memory, anon + file + shmem (SIZE)
    #[argh(option)]
    pub max_peak_rss: Option<String>,
}

/// Talk to a running `memtrack record --control PATH` from a harness: start or stop measuring,
/// name the benchmark and the pid it runs in, or mark a point of the harness's loop. Exits 0
/// when the recorder acknowledged, 1 when it refused or could not be reached, 2 on a bad flag.
#[derive(FromArgs, Debug)]
#[argh(
    subcommand,
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

/// Check that a recorder listens, and print its protocol version.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "hello")]
pub struct CtlHello {}

/// Start measuring: once this returns, allocator calls are recorded.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "start")]
pub struct CtlStart {}

/// Stop measuring: once this returns, allocator calls are not recorded.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "stop")]
pub struct CtlStop {}

/// Name the benchmark that runs from now on, and the pid it runs in (with its descendants).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "bench")]
pub struct CtlBench {
    /// the benchmark's URI (any text without control characters)
    #[argh(positional)]
    pub uri: String,
    /// the pid the benchmark runs in (default: the process that runs memtrack ctl, e.g. the
    /// harness shell; 0: every process)
    #[argh(option)]
    pub pid: Option<u32>,
}

/// Mark a point of the harness's loop: sample_start, sample_end, round_start or round_end.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "marker")]
pub struct CtlMarker {
    /// the kind of marker
    #[argh(positional)]
    pub kind: String,
}

/// Print every event of a recording as one JSON object per line.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "dump", example = "memtrack dump run.mt | head")]
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
    name = "doctor",
    example = "sudo memtrack doctor",
    note = "Each line is ok, missing, or unknown (not checked: it needs what is missing above),
with what a missing item disables. `record` runs the same checks and stops with the same
line when a required one is missing.",
    error_code(1, "record cannot work here")
)]
pub struct DoctorArgs {}
