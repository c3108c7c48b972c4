//! `memtrack record`'s flags as typed and their `TryFrom` into `record::RecordOptions`: the
//! ring size, the control FIFO, the grace after the command ends, the allocator functions;
//! every conflict between them is caught here, before anything is loaded or spawned.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use argh::FromArgs;

use crate::error::Error;
use crate::record::{self, custom, guardian, RecordOptions};

use super::bad_value;

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
    /// walk the call stack of every allocation, so that report --stacks gives exact sites
    /// rather than estimates (about 0.5 µs more per allocation at ten frames;
    /// docs/PERFORMANCE.md)
    #[argh(switch)]
    pub stacks: bool,
    /// walk the stacks of a sample of the allocations, one per BYTES requested bytes on
    /// average (allocations of BYTES or more always), and estimate each site from them; every
    /// allocation is still counted exactly (default: 16KiB, which kept each site above 2 % of
    /// the bytes within 15 % on the bench's g++ and git; docs/PERFORMANCE.md)
    #[argh(option, from_str_fn(parse_sample))]
    pub stack_sample: Option<u64>,
    /// the seed of the sampled stacks' draws: the same seed and the same deterministic program
    /// sample the same allocations (default: 0)
    #[argh(option)]
    pub stack_seed: Option<u64>,
    /// do not walk any call stack, not even the default sample (wins over --stacks and
    /// --stack-sample)
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
fn parse_sample(value: &str) -> Result<u64, String> {
    let max = record::stacks::MAX_SAMPLE_BYTES;
    match crate::units::parse_size(value) {
        Ok(bytes) if (1..=max).contains(&bytes) => Ok(bytes),
        Ok(_) => Err(format!(
            "give a size from 1 byte to {} (e.g. 512KiB)",
            crate::units::format_bytes(max)
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// Which stacks `record` walks, from its flags: `--no-stacks` wins; `--stacks` and
/// `--stack-sample` contradict each other; with none, a sample, one walk per
/// [`DEFAULT_SAMPLE_BYTES`](record::stacks::DEFAULT_SAMPLE_BYTES) requested on average (issue
/// 32: the walker loads beside the command's start, so the sample costs little there).
fn stack_mode(a: &RecordArgs) -> Result<record::stacks::StackMode, Error> {
    use record::stacks::{StackMode, StackSample};
    if a.no_stacks {
        return Ok(StackMode::Off);
    }
    match (a.stacks, a.stack_sample) {
        (true, Some(_)) => Err(Error::Usage(
            "--stacks walks every stack and --stack-sample a sample: give one".into(),
        )),
        (true, None) => Ok(StackMode::All),
        (false, sample) => Ok(StackMode::Sampled(StackSample {
            mean_bytes: sample.unwrap_or(record::stacks::DEFAULT_SAMPLE_BYTES),
            seed: a.stack_seed.unwrap_or(0),
        })),
    }
}

fn parse_grace(value: &str) -> Result<Duration, String> {
    guardian::parse_duration(value)
        .ok_or_else(|| "give a duration such as 2s, 500ms or 1m (or --wait-all)".into())
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
        let stacks = stack_mode(&a)?;
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
            stacks,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::tests::{cli, refused, usage};
    use crate::cli::Command;

    fn record(args: &[&str]) -> Result<RecordOptions, Error> {
        match cli(&[&["record"], args].concat()).command {
            Some(Command::Record(a)) => a.try_into(),
            other => panic!("{other:?}"),
        }
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
}
