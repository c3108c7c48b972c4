//! `memtrack record`: load the BPF programs, start the command inside the tracked tree, drain
//! the ring buffer into the file until the whole tree is gone, and exit with the command's status.
//!
//! Flow: preflight (`preflight::for_record`, while the private library copies are made) →
//! guardian → load (`load::OBJECTS`, each on a thread: process.bpf.o's maps first, shared by
//! the others) → the probes on the system's C library and dynamic loader, once the allocator's
//! and discover's objects are loaded, while the others still load → attach the tracepoints
//! (lifecycle, rss, discovery, mappings) → open the output → control FIFOs (`--control`) →
//! spawn → drain loop (ring → decode → writer; discovery stops → scan, attach, continue;
//! control requests) → final drain → trailer.

pub mod attach;
mod core_btf;
pub mod decode;
pub mod discover;
pub mod drain;
pub mod file_key;
pub mod foreground;
pub mod guardian;
pub mod identity;
pub mod leakscan;
pub mod listen;
pub mod load;
pub mod names;
// The file `record -o` writes is made by the one output module every `-o` shares.
pub use crate::output;
pub mod pidns;
pub mod private;
pub mod progress;
pub mod resolve;
pub mod rmap;
pub mod spawn;
pub mod stacks;
pub mod table_builder;
pub mod walker;
mod warnings;

// `--allocator` specs are options of `record` (`RecordOptions::custom`); reading them against a
// binary is `binary`'s.
pub use crate::binary::custom;

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Instant;

use crate::error::Error;
use crate::format::{Header, FEATURE_CONTROL, FEATURE_CONTROL_RUNNING};
use crate::preflight::{Capabilities, UprobeLinks};
use crate::sys::bpf::{BpfError, LoadedObject};
use crate::sys::bpf_map::MapFd;
use crate::sys::mount::MountSteps;
use crate::sys::process::{self, BlockedSignals};
use crate::sys::raw;
use crate::sys::terminal::{Lease, Terminal};

/// The ring buffer size when `--ring-size` is not given, in MiB, for a machine with `cpus`
/// CPUs: 2 MiB per CPU, at least 16 and at most 256. The ring needs headroom for what every CPU
/// can produce while the recorder sleeps or is scheduled out; 16 MiB kept the 16-process storm
/// lossless on 2 CPUs with 8x to spare (it lost nothing down to 2 MiB), and a bigger ring costs
/// start-up time (creating and mapping it: 64 MiB took 13 ms more than 16) and resident memory.
pub fn default_ring_size_mib(cpus: usize) -> u32 {
    let per_cpu = (cpus.max(1) as u32).saturating_mul(2);
    per_cpu.next_power_of_two().clamp(16, 256)
}

/// A validated `record` invocation: `cli` builds it from the flags (`TryFrom<RecordArgs>`) and
/// refuses what cannot work before anything is loaded or spawned.
#[derive(Clone, Debug)]
pub struct RecordOptions {
    /// Where the recording goes.
    pub output: PathBuf,
    /// Size of the kernel ring buffer, bytes (a power of two, at least one page).
    pub ring_size_bytes: u64,
    /// The command and its arguments, exactly as given (not necessarily UTF-8).
    pub command: Vec<OsString>,
    /// Record resident memory (rss_stat) as well as allocations.
    pub rss: bool,
    /// Load the rmap hooks too, where the kernel allows them (not `--no-rmap`).
    pub rmap: bool,
    /// Attach empty programs at the allocator sites instead of the real ones (benchmarks).
    pub probe_floor: bool,
    /// Record raw mappings (mmap, munmap, mremap, brk) from the syscall tracepoints.
    pub mappings: bool,
    /// Print nothing but errors.
    pub quiet: bool,
    /// `--user`: run the command as this user (name or uid) instead of SUDO_UID's.
    pub user: Option<String>,
    /// The control FIFO to make for the harness (`--control`), an absolute path.
    pub control: Option<PathBuf>,
    /// With `control`: record allocations from the start instead of waiting for `start`.
    pub start_running: bool,
    /// How long to wait for what the command leaves running (`--grace`, `--wait-all`).
    pub ending: guardian::Ending,
    /// Allocator functions to probe besides the catalogue's (`--allocator`, `--python-objects`).
    pub custom: Vec<custom::Custom>,
    /// Which allocations' call stacks are walked (`--stacks`, `--stack-sample`, `--no-stacks`).
    pub stacks: stacks::StackMode,
    /// Write the symbols of the stacks' frames at the end (not `--no-symbols`).
    pub symbols: bool,
    /// Run the command with private copies of the allocator libraries, probed instead of the
    /// shared files (not `--no-private-libs`; `private.rs`).
    pub private_libs: bool,
    /// Scan each process for leaks at its normal exit (not `--no-leak-scan`; leakscan.rs).
    pub leak_scan: bool,
}

/// Turn a libbpf failure into the error a user can act on.
fn kernel_error(e: BpfError) -> Error {
    if let Some(log) = &e.verifier {
        return Error::Kernel(verifier_refusal(&e.what, log));
    }
    match e.errno {
        libc::EPERM | libc::EACCES => Error::Privilege(format!(
            "{e}; recording needs root or CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN (run it with sudo; \
             in a container, allow the bpf() syscall)"
        )),
        _ => Error::Kernel(format!("{e} (run with -v to see libbpf's log)")),
    }
}

/// A program the verifier refused: memtrack's fault on this kernel, never a privilege problem.
pub(crate) fn verifier_refusal(what: &str, log: &crate::sys::bpf::VerifierLog) -> String {
    format!(
        "{what}: the kernel's verifier (Linux {}) refused program {}: {}; this is memtrack's \
         bug on this kernel, please report it with `memtrack doctor`'s output (run with -v for \
         the verifier's whole log)",
        crate::sys::process::uname().0,
        log.program,
        log.reason()
    )
}

/// How long each step before the command runs took: `-v` logs it once the command is forked,
/// the fixed cost docs/PERFORMANCE.md breaks down (the command's exec, its discovery stops and
/// their probes come after, and `-v` says those).
struct StartClock {
    last: Instant,
    steps: Vec<(&'static str, std::time::Duration)>,
}

impl StartClock {
    fn new() -> StartClock {
        StartClock {
            last: Instant::now(),
            steps: Vec::new(),
        }
    }

    /// The step `name` ends now.
    fn step(&mut self, name: &'static str) {
        let now = Instant::now();
        self.steps.push((name, now - self.last));
        self.last = now;
    }

    fn log(&self) {
        let steps: Vec<String> = (self.steps.iter())
            .map(|(name, took)| format!("{name} {:.1} ms", took.as_secs_f64() * 1e3))
            .collect();
        log::info!("start-up: {}", steps.join(", "));
    }
}

/// Says at debug level how long `what`'s load took since `began` and, when it loaded, how many
/// instructions the verifier went through for each program, the most first: most of a load's
/// time is that, and it is where a load made shorter starts.
fn log_load(what: &str, began: Instant, loaded: Option<&LoadedObject>) {
    if !log::log_enabled!(log::Level::Debug) {
        return;
    }
    let ms = began.elapsed().as_secs_f64() * 1e3;
    let mut verified = loaded
        .map(LoadedObject::verified_instructions)
        .unwrap_or_default();
    verified.sort_by_key(|(name, n)| (std::cmp::Reverse(*n), name.clone()));
    let total: u64 = verified.iter().map(|(_, n)| u64::from(*n)).sum();
    let each: Vec<String> = verified
        .iter()
        .map(|(name, n)| format!("{name} {n}"))
        .collect();
    log::debug!(
        "{what} loaded in {ms:.1} ms; instructions verified: {total} ({})",
        each.join(", ")
    );
}

/// Record `opts.command` into `opts.output`, once preflight (`preflight::for_record`) finds the
/// machine able to; returns the command's exit code.
///
/// The order is the design: each step needs what the one before made, and the drops at the end
/// undo them in reverse (the file complete first, the probes next, the signals last).
pub fn run(opts: &RecordOptions) -> Result<i32, Error> {
    let (caps, prepared) = preflight_beside_copies(opts)?;
    let caps = &caps;
    let mut clock = StartClock::new();
    let identity = identity::resolve(opts.user.as_deref(), &identity::Context::from_system())?;
    let pidns = pidns::PidNamespace::of_self()?;
    if let Some(id) = &identity {
        log::info!(
            "the command runs as {} (uid {}, gid {})",
            id.name,
            id.uid,
            id.gid
        );
    }
    // Made before the guardian forks, which enters their namespace before it forks the command.
    clock.step("user and pid namespace");
    let (private, mounts) = private_libraries(prepared);
    clock.step("private library mounts");
    // The guardian is forked before anything is loaded, so that it holds no BPF object: when
    // the recorder dies, every probe goes with it (guardian.rs).
    let terminal = Terminal::foreground();
    let mut guardian = start_guardian(opts, identity.as_ref(), terminal.as_ref(), mounts)?;
    clock.step("guardian");

    // The probes on libc and the loader go on as soon as their objects are loaded: the first
    // uprobe waits for a kernel grace period, which passes while the other objects load.
    let objects = load::Loaded::start(opts, caps, &pidns)?;
    objects.wait_probes()?;
    clock.step("allocator and discovery objects' load");
    let mut discovered = Vec::new();
    let discovery = discovery(opts, caps, &objects, private.as_ref(), &mut discovered)?;
    clock.step("probes on libc and the loader");
    objects.wait_all()?;
    clock.step("other objects' load");
    let links = objects.attach()?;
    clock.step("tracepoint attach");
    // In table order, then the ones discovery adds (call stacks, the leak scan).
    let mut features = objects.features();
    features.extend(pidns.feature());
    features.extend(discovered);
    let process_obj = objects.process();
    let (tracked, lost, ring) = shared_maps(process_obj, opts)?;

    // Created before the command runs (a typo must not cost a whole run), under a temporary
    // name until it has started (a failed start keeps a previous recording at -o).
    let pending =
        output::PendingOutput::create(&opts.output, identity.as_ref().map(|id| (id.uid, id.gid)))?;
    let control = opts
        .control
        .as_deref()
        .map(|path| open_control(path, opts, identity.as_ref(), process_obj, &mut features))
        .transpose()?;
    let signals = Signals::block()?;
    // The guardian reaps the tree; should it die, the tree comes to us.
    process::become_subreaper().map_err(|e| {
        Error::Internal(format!(
            "cannot become the reaper of the command's tree: {e}"
        ))
    })?;

    // The guardian forks the command: its children are the tree's root. The child takes the
    // terminal before its exec, so from here on the lease takes it back should the start fail
    // (declared after the blocked signals, it is dropped before they are unblocked).
    let spawner = pidns.tracked_key(guardian.pid());
    tracked
        .update_u32(spawner, raw::tracked_state::TRACK_SPAWNER as u32)
        .map_err(kernel_error)?;
    let terminal = terminal.map(Lease::starting);
    let start_ns = (process::monotonic_ns(), process::wall_ns());
    let child = guardian.spawn(&opts.command[0]);
    tracked.delete_u32(spawner);
    let child = match child {
        Ok(c) => c,
        Err(e) => {
            drop(pending); // before the signals are unblocked, which a pending one may end
            return Err(e);
        }
    };
    let file = pending.commit();
    clock.step("ring, output and the command's fork");
    clock.log();
    // Held, so that the tree's last exit does not tear its namespace down (RCU grace periods,
    // some 10 ms, before the exit is reported): the last holder of this descriptor does, after
    // we exit (`process::close_fds_after_exit`). The command is held stopped at its exec for
    // discovery, so it is there to open.
    let _tree_namespace = private
        .as_ref()
        .and_then(|_| std::fs::File::open(format!("/proc/{child}/ns/mnt")).ok());
    let group = foreground::CommandGroup::new(child as i32, terminal);

    let header = header(opts, child, start_ns, features);
    let session = drain::Session {
        ring,
        lost,
        signals: &signals.handled,
        root_pid: child as i32,
        output: &opts.output,
        discovery,
        group: &group,
        progress: progress::Progress::for_stderr(opts.quiet),
        control,
        guardian: &guardian,
        symbols: opts.symbols,
        leak_scan: opts.leak_scan,
        objects: &objects,
        fault_walk: Vec::new(),
    };
    let result = session.run(file, &header);
    group.restore_terminal();
    let (summary, discovery) = result?;
    let ending = detach(discovery, links, &guardian);
    if !ending.left_running.is_empty() {
        guardian.release();
    }
    // A signal that came during the final drain is delivered here, with the file complete.
    drop(signals);
    ending.say(opts, &objects, &summary);
    Ok(summary.exit_code)
}

/// Preflight (`preflight::for_record`), with the private library copies (some 5 ms of copying
/// and a namespace tried in a child) made beside it; said only once preflight lets the
/// recording go on.
fn preflight_beside_copies(
    opts: &RecordOptions,
) -> Result<(Capabilities, Option<private::Prepared>), Error> {
    let (caps, prepared) = std::thread::scope(|scope| {
        let copies = opts.private_libs.then(|| scope.spawn(private::prepare));
        let caps = crate::preflight::for_record();
        let prepared = copies.map(|c| c.join().expect("the private copies panicked"));
        (caps, prepared)
    });
    Ok((caps?, prepared))
}

/// Fork the guardian, which forks the command later (guardian.rs), with the control FIFO's
/// path in the command's environment when there is one.
fn start_guardian(
    opts: &RecordOptions,
    identity: Option<&identity::Identity>,
    terminal: Option<&Terminal>,
    mounts: Option<MountSteps>,
) -> Result<guardian::Guardian, Error> {
    let env: Vec<(&str, &std::ffi::OsStr)> = opts
        .control
        .iter()
        .map(|p| (crate::control::ENV_VAR, p.as_os_str()))
        .collect();
    guardian::Guardian::start(&opts.command, &env, identity, terminal, opts.ending, mounts)
}

/// process.bpf.o's maps the recorder works on: the tracked processes, the lost-event counts
/// and the ring buffer, mapped.
fn shared_maps<'obj>(
    process_obj: &'obj LoadedObject,
    opts: &RecordOptions,
) -> Result<(MapFd<'obj>, MapFd<'obj>, crate::sys::ring::RingBuffer), Error> {
    let tracked = MapFd::of(process_obj, "tracked").map_err(kernel_error)?;
    let lost = MapFd::of(process_obj, "lost").map_err(kernel_error)?;
    let ring = crate::sys::ring::RingBuffer::map(
        MapFd::of(process_obj, "events").map_err(kernel_error)?.fd(),
        opts.ring_size_bytes as usize,
    )
    .map_err(|e| Error::Kernel(format!("cannot map the BPF ring buffer: {e}")))?;
    Ok((tracked, lost, ring))
}

/// What the closing lines say, gathered before the probes are detached.
struct Ending {
    allocators: String,
    not_found: Vec<String>,
    left_running: Vec<guardian::LeftRunning>,
}

/// After the file is complete: detach the probes (in the background when the tree is gone).
fn detach(
    discovery: discover::Discovery<'_>,
    links: Vec<crate::sys::bpf::Link<'_>>,
    guardian: &guardian::Guardian,
) -> Ending {
    let allocators = discovery.summary();
    let mut not_found = custom::not_found_warnings(&discovery.custom_not_found());
    not_found.extend_from_slice(discovery.custom_empty());
    let left_running = guardian.left_running();
    // Detaching the probes waits on kernel grace periods (about 0.15 s here): when the tree is
    // gone, a background child pays that after we exit, off the caller's clock. When processes
    // of the tree still run, detach now, then the guardian continues any that a probe stopped
    // meanwhile (nobody would, after we exit).
    if left_running.is_empty() && !process::close_fds_after_exit() {
        log::debug!("cannot fork; detaching the probes before exiting");
    }
    drop(discovery);
    drop(links);
    Ending {
        allocators,
        not_found,
        left_running,
    }
}

impl Ending {
    /// The closing lines on stderr, once the probes are gone, and the recorder's own cost
    /// (`-v`).
    fn say(&self, opts: &RecordOptions, objects: &load::Loaded, summary: &drain::Summary) {
        // Said with the closing lines, not at load: a command that cannot start fails with its
        // one error line alone.
        if let Some(line) = objects.rmap_unavailable().filter(|_| !opts.quiet) {
            eprintln!("memtrack: {line}");
        }
        // Even with -q: an allocator asked for and never seen is a mistake in the command line
        // (a misspelt symbol, a stripped file), not news; nor is a recording that saw nothing.
        let unseen = summary.unseen.iter().filter(|_| !opts.probe_floor);
        for warning in self.not_found.iter().chain(unseen) {
            eprintln!("memtrack: warning: {warning}");
        }
        if !opts.quiet && !self.left_running.is_empty() {
            eprintln!(
                "memtrack: {}",
                left_running_line(&self.left_running, opts.ending)
            );
        }
        if !opts.quiet {
            eprintln!("memtrack: {}", self.allocators);
            for warning in &summary.unexplained_growth {
                eprintln!("memtrack: warning: {warning}");
            }
            eprintln!("memtrack: {summary}");
        }
        let usage = process::self_usage();
        log::info!(
            "recorder: {:.3} s user, {:.3} s system CPU, peak resident {} (the ring's mapping \
             included)",
            usage.user.as_secs_f64(),
            usage.system.as_secs_f64(),
            crate::units::format_bytes(usage.peak_resident_bytes)
        );
    }
}

/// The private copies of the allocator libraries (`--no-private-libs` off) and the mount
/// steps the guardian takes into their namespace; neither when they cannot be made, after a
/// warning that says so (the recording then probes the shared files).
fn private_libraries(
    prepared: Option<private::Prepared>,
) -> (Option<private::PrivateLibs>, Option<MountSteps>) {
    let Some(private) = prepared.and_then(private::Prepared::said) else {
        return (None, None);
    };
    match private.steps() {
        Ok(mounts) => (Some(private), Some(mounts)),
        Err(e) => {
            let why = format!("cannot clone a mount ({e})");
            log::warn!("{}", private::fallback_warning(&why));
            (None, None)
        }
    }
}

/// What finds allocators in the files the tree maps, with call stacks' unwind tables when they
/// are recorded (adding their feature), the private copies in place of the shared files, and
/// the C library and loader probed already.
fn discovery<'obj>(
    opts: &RecordOptions,
    caps: &Capabilities,
    objects: &'obj load::Loaded,
    private: Option<&private::PrivateLibs>,
    features: &mut Vec<String>,
) -> Result<discover::Discovery<'obj>, Error> {
    let discovery = discover::Discovery::new(
        objects.allocator(),
        matches!(caps.uprobes, UprobeLinks::Classic(_)),
        objects.discover(),
    )
    .map_err(kernel_error)?;
    // Call stacks need the real allocator programs (not --probe-floor's empty ones).
    let stacks = !opts.probe_floor && opts.stacks.walks();
    if stacks {
        features.push(crate::format::FEATURE_STACKS.to_string());
    }
    // The walker loads meanwhile (walker.rs), and the tables of the files found until it is
    // in place are made then. A sample's draws go in now; every stack (`--stacks`) needs none.
    if let stacks::StackMode::Sampled(sample) = opts.stacks {
        if stacks {
            features.push(sample.feature());
            if opts.rss {
                features.push(sample.fault_feature());
            }
            stacks::fill_draws(objects.allocator(), sample).map_err(kernel_error)?;
        }
    }
    // The walk of writes to inherited pages loads with the walker where it can (walker.rs).
    if stacks && opts.rss && caps.touches.is_ok() {
        features.push(crate::format::FEATURE_INHERITED_WRITES.to_string());
    }
    let copies = private.iter().flat_map(|p| p.copies());
    if opts.leak_scan {
        features.push(crate::format::FEATURE_LEAK_SCAN.to_string());
    }
    probe_system_files(
        discovery
            .with_exit_hold(opts.leak_scan)
            .with_custom(opts.custom.clone())
            .with_tables_later(stacks)
            .with_copies(copies.clone().map(|c| (c.key, c.real.clone()))),
        copies.collect(),
    )
}

/// The signals blocked while recording, unblocked when dropped: `_background_writes` first,
/// then `handled` (fields drop in order), so a signal that came meanwhile is delivered last.
struct Signals {
    /// While the command's group holds the terminal we are in the background: with SIGTTOU
    /// blocked, our stderr lines and taking the terminal back never stop us.
    _background_writes: BlockedSignals,
    /// Taken synchronously by the drain loop; blocked before the child exists so none is
    /// missed, and unblocked around the spawn itself (`process::with_unblocked`).
    handled: BlockedSignals,
}

impl Signals {
    fn block() -> Result<Signals, Error> {
        let block = |set: &[i32]| {
            BlockedSignals::block(set)
                .map_err(|e| Error::Internal(format!("cannot block signals: {e}")))
        };
        let handled = block(&drain::HANDLED_SIGNALS)?;
        Ok(Signals {
            _background_writes: block(&[libc::SIGTTOU])?,
            handled,
        })
    }
}

/// The control FIFOs of `--control PATH`, owned by the user the command runs as, with the gate
/// closed unless `--start-running`; adds the feature the header names for that mode.
fn open_control<'obj>(
    path: &std::path::Path,
    opts: &RecordOptions,
    identity: Option<&identity::Identity>,
    process_obj: &'obj LoadedObject,
    features: &mut Vec<String>,
) -> Result<listen::Control<'obj>, Error> {
    let owner = identity.map_or_else(process::user_ids, |id| (id.uid, id.gid));
    let listener = listen::Listener::create(path, owner)?;
    let gate = MapFd::of(process_obj, "gate").map_err(kernel_error)?;
    let control = listen::Control::new(listener, gate);
    if opts.start_running {
        features.push(FEATURE_CONTROL_RUNNING.to_string());
    } else {
        control.set_gate(false).map_err(Error::Kernel)?;
        features.push(FEATURE_CONTROL.to_string());
    }
    Ok(control)
}

/// The file's header, for the command started as `root_pid` at `start_ns` (monotonic, wall).
fn header(
    opts: &RecordOptions,
    root_pid: u32,
    start_ns: (u64, u64),
    features: Vec<String>,
) -> Header {
    let (kernel_release, hostname) = process::uname();
    Header {
        memtrack_version: env!("CARGO_PKG_VERSION").to_string(),
        kernel_release,
        hostname,
        page_size_bytes: crate::sys::ring::page_size() as u32,
        argv: opts
            .command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        root_pid,
        start_monotonic_ns: start_ns.0,
        start_wall_ns: start_ns.1,
        ring_size_bytes: opts.ring_size_bytes,
        features,
    }
}

/// Probe the C library nearly every process maps now, rather than at each process's first
/// stop, and the dynamic loader, whose debugger hook reports each dlopen; other files are
/// probed as processes map them. Where the tree runs a private copy of one (`copies`), the copy
/// is probed instead.
fn probe_system_files<'obj>(
    mut discovery: discover::Discovery<'obj>,
    copies: Vec<&private::Copy>,
) -> Result<discover::Discovery<'obj>, Error> {
    let probe = |discovery: &mut discover::Discovery<'obj>, path: &std::path::Path| match copies
        .iter()
        .find(|c| c.real == path)
    {
        Some(c) => discovery.probe_copy(c.key, &c.path(), &c.real),
        None => discovery.probe_path(path),
    };
    match crate::binary::find_libc() {
        Some(libc) => {
            let probes = probe(&mut discovery, &libc).map_err(kernel_error)?;
            log::info!("{}: {probes} probes", libc.display());
        }
        None => log::info!("no glibc at the usual paths; allocators are found as files are mapped"),
    }
    match crate::binary::find_loader() {
        Some(loader) => {
            if let Err(e) = probe(&mut discovery, &loader) {
                log::warn!(
                    "cannot probe the dynamic loader {} ({e}); allocators of shared libraries \
                     will not be recorded",
                    loader.display()
                );
            }
        }
        None => log::warn!(
            "no dynamic loader at the usual paths; allocators of shared libraries are found only \
             in processes that execute a new loader"
        ),
    }
    Ok(discovery)
}

/// The line naming the processes `record` stopped waiting for.
fn left_running_line(left: &[guardian::LeftRunning], ending: guardian::Ending) -> String {
    let names: Vec<String> = left
        .iter()
        .map(|p| format!("{} ({})", p.pid, p.name))
        .collect();
    let after = match ending {
        guardian::Ending::Grace(g) => format!(" after {:.1} s", g.as_secs_f64()),
        guardian::Ending::WaitAll => String::new(),
    };
    format!(
        "the command ended; stopped waiting{after} for {} process{} it left running: {}; \
         recorded as still running at the end (--grace DURATION or --wait-all to wait longer)",
        left.len(),
        if left.len() == 1 { "" } else { "es" },
        names.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::default_ring_size_mib;

    #[test]
    fn default_ring_grows_with_cpus_within_bounds() {
        assert_eq!(default_ring_size_mib(0), 16);
        assert_eq!(default_ring_size_mib(2), 16);
        assert_eq!(default_ring_size_mib(8), 16);
        assert_eq!(default_ring_size_mib(12), 32);
        assert_eq!(default_ring_size_mib(64), 128);
        assert_eq!(default_ring_size_mib(96), 256);
        assert_eq!(default_ring_size_mib(100_000), 256);
        for cpus in 0..300 {
            assert!(default_ring_size_mib(cpus).is_power_of_two());
        }
    }
}
