//! The recorder's one loop: drain the ring into the file, reap the tree, pass signals on, and
//! stop when the whole tree is gone.
//!
//! The BPF side submits records without wake-ups (a wake-up per event costs about 3 µs,
//! docs/kernel-facts.md), so the loop polls: it drains what the ring holds, then sleeps for
//! `POLL_INTERVAL`, waking at once for a signal (a child's exit among them), a control request,
//! or a discovery stop (the one record submitted with a wake-up). It sleeps even when records
//! keep coming: draining on the producer's heels cost a CPU and made every record dearer to the
//! program being recorded (sys/wait.rs). Only a stopped process or a ring filling faster than
//! the timer empties it keeps it awake. Once the command runs, the loop's thread takes a low
//! real-time priority (`raise_drain_priority`), so the threads it records cannot starve it.
//! The guardian (guardian.rs) is the command's parent and the subreaper of the tree, and says
//! when the command ends and when no process of the tree is left: every record they could
//! produce is then in the ring, and one last drain gets them all. When the command has ended
//! but left processes running, the loop ends after `--grace`, and they run on unrecorded.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::fs::File;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::control::Request;
use crate::error::Error;
use crate::format::{
    ControlCommand, Event, EventKind, Exec, FormatError, Header, Lost, LostCount, Trailer, Writer,
};
use crate::record::decode::{self, Stop, LOST_CAUSES};
use crate::record::discover::Discovery;
use crate::record::foreground::CommandGroup;
use crate::record::guardian::Guardian;
use crate::record::leakscan::Heaps;
use crate::record::listen::Control;
use crate::record::load::Loaded;
use crate::record::progress::{Counts, Progress};
use crate::record::stacks::{self, Interner};
use crate::record::warnings::{Growth, Seen};
use crate::sys::bpf::Link;
use crate::sys::bpf_map::MapFd;
use crate::sys::process::{self, Reaped, SignalSet};
use crate::sys::ring::RingBuffer;
use crate::sys::sched::{self, Priority};
use crate::sys::wait::{Trigger, Waiter};

mod stops;

/// Signals the loop takes synchronously: a child ended, or someone asks us to stop.
pub const HANDLED_SIGNALS: [i32; 5] = [
    libc::SIGCHLD,
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
];

/// The signals of [`HANDLED_SIGNALS`] that are passed on to the command's process group.
pub const FORWARDED_SIGNALS: [i32; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// Sleep between two drains. At a few million records a second this is a few MiB of ring.
const POLL_INTERVAL: Duration = Duration::from_millis(4);
/// The sleep after a pass that found more than 1/`FAST_SHARE` of the ring unread: the machine
/// produces faster than the default sleep is safe for.
const FAST_POLL_INTERVAL: Duration = Duration::from_millis(1);
const FAST_SHARE: u64 = 32;
/// The tokens of what wakes the loop (sys/wait.rs).
const WAKE_SIGNAL: u32 = 0;
const WAKE_RING: u32 = 1;
const WAKE_CONTROL: u32 = 2;
const WAKE_GUARDIAN: u32 = 3;
/// Drain again at once, without sleeping, while more than this share of the ring is unread.
const BACKLOG_SHARE: u64 = 8;
/// A killed recorder leaves a file readable up to its last chunk: write one at least this often.
const FLUSH_INTERVAL: Duration = Duration::from_secs(1);
/// Before a control command is written, the ring is drained up to where the producer was; a
/// record still being written there is waited for this long at most (it takes microseconds).
const BUSY_RECORD_WAIT: Duration = Duration::from_millis(10);

/// The priorities tried for the drain thread, in order. Without one, 16 threads in tight malloc
/// loops on 2 CPUs left the recorder less CPU than draining takes, and the ring overflowed; a
/// real-time priority (the lowest) lets it drain as soon as it wakes, and since it sleeps
/// between drains it takes no more CPU than before (docs/PERFORMANCE.md, "Levers measured").
/// Set after the command is started and never inherited (sys/sched.rs): the command and
/// everything it starts run at their own priority.
const DRAIN_PRIORITIES: [Priority; 2] = [Priority::Fifo(1), Priority::Nice(-10)];

/// Raises the calling thread, the drain thread, to the first of [`DRAIN_PRIORITIES`] allowed.
fn raise_drain_priority() {
    for priority in DRAIN_PRIORITIES {
        match sched::set_thread_priority(priority) {
            Ok(()) => {
                log::info!("drain thread: {priority}");
                return;
            }
            Err(e) => log::debug!("drain thread: cannot set {priority}: {e}"),
        }
    }
    log::info!(
        "drain thread: normal priority (no CAP_SYS_NICE); with more allocating threads than \
         CPUs, events may be lost"
    );
}

/// What the loop needs; built by `record::run` once everything is loaded and spawned.
pub struct Session<'a> {
    pub ring: RingBuffer,
    pub lost: MapFd<'a>,
    pub signals: &'a SignalSet,
    pub root_pid: i32,
    pub output: &'a Path,
    /// Probes the files processes map when the kernel side stops them.
    pub discovery: Discovery<'a>,
    /// The command's process group, which signals are passed on to.
    pub group: &'a CommandGroup,
    /// The status line on stderr (off unless stderr is a terminal).
    pub progress: Progress,
    /// The control channel, with `--control`.
    pub control: Option<Control<'a>>,
    /// With call stacks: whether the symbols of their frames are written (named as they come).
    pub symbols: bool,
    /// The command's parent, which reports on the tree (guardian.rs).
    pub guardian: &'a Guardian,
    /// Whether processes are held at `_exit` for the leak scan (leakscan.rs).
    pub leak_scan: bool,
    /// The loaded programs, whose runs the kernel skipped are counted as lost at the end.
    pub objects: &'a Loaded,
    /// The walker's fault walk and the programs that give it addresses (walker.rs), attached.
    pub fault_walk: Vec<Link<'a>>,
}

/// The trailer's lost cause for runs of memtrack's programs the kernel skipped
/// (`Loaded::skipped_runs`).
pub const SKIPPED_RUNS: &str = "skipped_runs";

/// Where drained records go, and what the loop learns from them on the way: the loop's mutable
/// state, in one place.
struct Sink {
    writer: Writer<File>,
    /// Every process seen in the tree (the root and each Fork's child).
    pids: HashSet<u32>,
    /// Kernel records that could not be decoded.
    undecodable: u64,
    /// The first write failure; drained records are dropped after it, stops still handled.
    write_error: Option<FormatError>,
    /// Processes stopped by the kernel side for discovery, waiting for `continue_stopped`.
    stops: Vec<Stop>,
    /// Memory growth per process, of its current image, for the unknown-allocator warning.
    growth: HashMap<u32, Growth>,
    /// Warnings about images that ended (by exec or exit): pid and warning.
    warned: Vec<(u32, String)>,
    /// Last loss totals written, per cause.
    lost_seen: [u64; LOST_CAUSES.len()],
    /// With `--control`: processes whose current image is `memtrack ctl`, the harness's control
    /// client. None of their allocator calls is written: a client runs inside the measuring
    /// window it opens or closes (a shell harness's `memtrack ctl stop` allocates from its exec
    /// until its request is served), and it is never part of what is measured.
    clients: HashSet<u32>,
    /// Allocator records of clients left out.
    client_records: u64,
    /// The recording's call-stack trie.
    stacks: Interner,
    /// Scratch for the nodes one kernel stack creates.
    nodes: Vec<Event>,
    /// What was written, for the warning of a recording that saw nothing (`Seen::warning`).
    seen: Seen,
    /// With the leak scan: every process's live blocks.
    heaps: Option<Heaps>,
    /// Processes whose current image was scanned already (a second thread calling `_exit`).
    scanned: HashSet<u32>,
}

impl Sink {
    /// Write `ev` unless a write already failed; keep the first failure.
    fn push(&mut self, ev: &Event) {
        self.seen.note(&ev.kind);
        if self.write_error.is_none() {
            if let Err(e) = self.writer.push(ev) {
                self.write_error = Some(e);
            }
        }
    }

    /// Ends the growth count of `pid`'s current image, keeping its warning if it has one.
    fn end_growth(&mut self, pid: u32) {
        if let Some(w) = self.growth.remove(&pid).and_then(|g| g.warning(pid)) {
            self.warned.push((pid, w));
        }
    }

    /// Count a kernel record that could not be decoded, warning at the first.
    fn undecodable(&mut self, e: decode::DecodeError) {
        if self.undecodable == 0 {
            log::warn!("a kernel record could not be decoded ({e:?}); counting such records");
        }
        self.undecodable += 1;
    }

    /// The first write failure, if any, as the loop's error.
    fn failed(&mut self) -> Result<(), FormatError> {
        self.write_error.take().map_or(Ok(()), Err)
    }
}

/// What a recording amounted to, for the closing line.
#[derive(Debug)]
pub struct Summary {
    pub events: u64,
    pub processes: usize,
    pub bytes: u64,
    pub lost: u64,
    pub undecodable: u64,
    pub exit_code: i32,
    pub output: String,
    /// One warning per process whose memory grew with no allocator event at all.
    pub unexplained_growth: Vec<String>,
    /// Why the recording saw nothing where it should have, if it did not.
    pub unseen: Option<String>,
    /// Control commands accepted and requests refused, with `--control`.
    pub control: Option<(u64, u64)>,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let per_event = if self.events > 0 {
            self.bytes as f64 / self.events as f64
        } else {
            0.0
        };
        write!(
            f,
            "recorded {} events from {} process{} into {} ({}, {:.1} bytes/event)",
            self.events,
            self.processes,
            if self.processes == 1 { "" } else { "es" },
            self.output,
            crate::units::format_bytes(self.bytes),
            per_event
        )?;
        if self.lost > 0 {
            write!(
                f,
                "; LOST {} events (see `memtrack report`; try a larger --ring-size)",
                self.lost
            )?;
        }
        if self.undecodable > 0 {
            write!(f, "; {} records could not be decoded", self.undecodable)?;
        }
        if let Some((accepted, refused)) = self.control {
            write!(f, "; {accepted} control commands")?;
            if refused > 0 {
                write!(f, " ({refused} malformed requests refused)")?;
            }
        }
        Ok(())
    }
}

/// The cause of a failed write to the file, as the loop's error.
fn write_failed(output: &Path, e: FormatError) -> Error {
    Error::Internal(format!("cannot write {}: {e}", output.display()))
}

/// Says what the kernel's skipped runs of memtrack's programs (`Loaded::skipped_runs`) mean:
/// `skipped` that nothing made up for, `by_program` each program's count.
fn warn_skipped_runs(skipped: u64, by_program: &str) {
    if skipped == 0 && !by_program.is_empty() {
        log::info!(
            "the kernel skipped runs of memtrack's programs ({by_program}): copies attached \
             after them ran in their place, or the programs counted the tree's missed calls \
             as lost"
        );
    }
    if skipped > 0 {
        log::warn!(
            "the kernel skipped {skipped} runs of memtrack's programs that no copy ran in \
             place of (a run already under way on that CPU had been preempted; each \
             program's skips: {by_program}): events of the tree may be missing, and the \
             report says so"
        );
    }
}

/// The trailer: the loss totals per cause that are not 0, and the command's exit code.
fn trailer(lost_seen: [u64; LOST_CAUSES.len()], skipped: u64, exit_code: i32) -> Trailer {
    Trailer {
        end_monotonic_ns: process::monotonic_ns(),
        events: 0,
        chunks: 0,
        lost: LOST_CAUSES
            .iter()
            .map(|(_, cause)| *cause)
            .zip(lost_seen)
            .chain([(SKIPPED_RUNS, skipped)])
            .filter(|(_, n)| *n > 0)
            .map(|(cause, count)| LostCount {
                cause: cause.to_string(),
                count,
            })
            .collect(),
        exit_code,
    }
}

impl<'a> Session<'a> {
    /// Run until the tree is gone; write the file; return what happened, and the discovery
    /// registry (its links keep the probes attached until the caller drops it).
    pub fn run(mut self, file: File, header: &Header) -> Result<(Summary, Discovery<'a>), Error> {
        let output = self.output;
        let werr = |e| write_failed(output, e);
        let mut sink = Sink {
            writer: Writer::new(file, header).map_err(werr)?,
            pids: HashSet::from([self.root_pid as u32]),
            undecodable: 0,
            write_error: None,
            stops: Vec::new(),
            growth: HashMap::new(),
            warned: Vec::new(),
            lost_seen: [0; LOST_CAUSES.len()],
            clients: HashSet::new(),
            client_records: 0,
            stacks: Interner::new(self.symbols),
            nodes: Vec::new(),
            seen: Seen::default(),
            heaps: self.leak_scan.then(Heaps::default),
            scanned: HashSet::new(),
        };
        // Modules of the files scanned before the command ran (the C library, the loader);
        // every later one comes with the stop that scanned it (`continue_stopped`).
        for ev in self.discovery.take_module_events() {
            sink.push(&ev);
        }
        let mut root_status: Option<i32> = None;
        let mut last_flush = Instant::now();
        raise_drain_priority();
        let waiter = self.waiter().map_err(|e| {
            Error::Internal(format!(
                "cannot wait for the ring, signals and control: {e}"
            ))
        })?;

        loop {
            let found = self.ring.unread_bytes();
            self.drain_into(&mut sink);
            // Without waiting: a process that needs the walker stops for it.
            self.install_walker(&mut sink, false);
            sink.stacks.feed_names(self.discovery.tables());
            // Stopped processes first: they wait for us, whatever else went wrong. A stop
            // pauses the drain, so the rest of the ring is read right after.
            let paused_at_stop = !sink.stops.is_empty();
            self.continue_stopped(&mut sink);
            // On a write failure the command goes on without us; the file holds what was
            // written so far.
            sink.failed().map_err(werr)?;
            self.serve_control(&mut sink).map_err(werr)?;
            if last_flush.elapsed() >= FLUSH_INTERVAL {
                self.push_lost(&mut sink);
                sink.failed().map_err(werr)?;
                sink.writer.flush_chunk().map_err(werr)?;
                last_flush = Instant::now();
            }
            if self.progress.due() {
                self.progress.draw(Counts {
                    events: sink.writer.events_written(),
                    processes: sink.pids.len(),
                    bytes_written: sink.writer.bytes_written(),
                    lost: sink.lost_seen.iter().sum(),
                    waiting: self.guardian.waiting(),
                });
            }
            if self.reap(&mut root_status) {
                break;
            }
            let backlog = self.ring.unread_bytes() > self.ring.capacity() / BACKLOG_SHARE;
            if paused_at_stop || backlog {
                continue;
            }
            // A terminal's ^C reaches the command's group directly when it holds the terminal,
            // and then never us; whatever does reach us (kill(2), or ^C when the command does
            // not hold the terminal) is passed on to its group. Either way we go on until the
            // tree is gone, and finish the file.
            let sleep = if found > self.ring.capacity() / FAST_SHARE {
                FAST_POLL_INTERVAL
            } else {
                POLL_INTERVAL
            };
            if waiter.wait(sleep) & (1 << WAKE_SIGNAL) != 0 {
                self.pass_signals_on();
            }
        }
        self.finish(sink, root_status)
    }

    /// Reaps every child that changed state, noting the command's status in `root_status` and
    /// passing a stop of the command on to the terminal's job control; true once no process of
    /// the tree is left.
    fn reap(&mut self, root_status: &mut Option<i32>) -> bool {
        loop {
            match self.guardian.reap() {
                Reaped::Child { pid, status } => {
                    if pid == self.root_pid {
                        *root_status = Some(status);
                    }
                }
                Reaped::Stopped { pid, signal } => {
                    if pid == self.root_pid {
                        self.progress.clear();
                        self.group.stopped(signal);
                    }
                }
                Reaped::Running => return false,
                Reaped::NoChildren => return true,
            }
        }
    }

    /// Tells the guardian of every signal taken, and passes the forwarded ones on to the
    /// command's group.
    fn pass_signals_on(&self) {
        while let Some(got) = self.signals.take() {
            self.guardian.signalled(got.signal);
            if FORWARDED_SIGNALS.contains(&got.signal) {
                self.group.signal(got.signal);
            }
        }
    }

    /// Once the tree is gone: the last drain, the symbols, the trailer, and the summary.
    fn finish(
        mut self,
        mut sink: Sink,
        root_status: Option<i32>,
    ) -> Result<(Summary, Discovery<'a>), Error> {
        let output = self.output;
        let werr = |e| write_failed(output, e);
        // Every process of the tree has ended: whatever they produced is in the ring now
        // (drain_into pauses at each stop record, so drain until nothing is left). Processes
        // left running after --grace go on producing: drain only what the ring holds now, or
        // a busy one would keep us here.
        let end = self.ring.producer_position();
        while self.drain_into(&mut sink) > 0 {
            self.continue_stopped(&mut sink);
            if self.ring.consumed_through(end) {
                break;
            }
        }
        // And whatever a client sent without waiting for its reply is in the control FIFO.
        self.serve_control(&mut sink).map_err(werr)?;
        self.push_lost(&mut sink);
        if let Some(tables) = self.discovery.tables() {
            log::info!("{}; {} stack nodes", tables.summary(), sink.stacks.nodes());
            for ev in stacks::finish(tables, &mut sink.stacks) {
                sink.push(&ev);
            }
        } else if self.discovery.tables_waiting() || self.objects.walker.gave_up() {
            sink.push(&stacks::no_walks());
        }
        sink.failed().map_err(werr)?;
        if sink.client_records > 0 {
            log::info!(
                "left out {} allocator records of memtrack ctl clients",
                sink.client_records
            );
        }
        let Sink {
            writer,
            pids,
            undecodable,
            growth,
            mut warned,
            lost_seen,
            seen,
            ..
        } = sink;
        let exit_code = root_status.map(process::exit_code_of).unwrap_or(128);
        // Read once everything is drained: a skipped run leaves no trace in the ring.
        let (skipped, by_program) = self.objects.skipped_runs();
        warn_skipped_runs(skipped, &by_program);
        let trailer = trailer(lost_seen, skipped, exit_code);
        let events = writer.events_written();
        let file = writer.finish(&trailer).map_err(werr)?;
        self.progress.clear();
        let bytes = file
            .metadata()
            .map(|m| m.len())
            .map_err(|e| Error::io(self.output, e))?;
        warned.extend(
            growth
                .iter()
                .filter_map(|(&pid, g)| g.warning(pid).map(|w| (pid, w))),
        );
        warned.sort();
        let summary = Summary {
            events,
            processes: pids.len(),
            bytes,
            lost: lost_seen.iter().sum::<u64>() + skipped,
            undecodable,
            exit_code,
            output: self.output.display().to_string(),
            unexplained_growth: warned.into_iter().map(|(_, w)| w).collect(),
            unseen: seen.warning(self.control.is_some()),
            control: self
                .control
                .as_ref()
                .map(|c| (c.listener.accepted, c.listener.refused)),
        };
        Ok((summary, self.discovery))
    }

    /// What the loop sleeps on: signals, discovery stops (the ring's wake-ups), and control
    /// requests.
    fn waiter(&self) -> std::io::Result<Waiter> {
        let waiter = Waiter::new()?;
        waiter.watch(self.signals.fd(), WAKE_SIGNAL, Trigger::Readable)?;
        waiter.watch(self.ring.fd(), WAKE_RING, Trigger::WakeUp)?;
        // Edge-triggered: once the guardian has exited its pipe stays readable (end of file).
        waiter.watch(self.guardian.fd(), WAKE_GUARDIAN, Trigger::WakeUp)?;
        if let Some(c) = &self.control {
            waiter.watch(c.listener.fd(), WAKE_CONTROL, Trigger::Readable)?;
        }
        Ok(waiter)
    }

    /// With call stacks: the walker in place once loaded (walker.rs), unless it is (or will
    /// never be), waiting for it when `wait` says so; the modules of its tables go to `sink`.
    fn install_walker(&mut self, sink: &mut Sink, wait: bool) {
        let walker = &self.objects.walker;
        if !self.discovery.tables_waiting() {
            // In place: its walks of faults follow once they have loaded.
            self.fault_walk.extend(walker.attach_faults());
            return;
        }
        let links = walker.put_in_place(self.objects.allocator(), &mut self.discovery, wait);
        self.fault_walk.extend(links);
        for ev in self.discovery.take_module_events() {
            sink.push(&ev);
        }
    }

    /// Hand every committed ring record to the sink; returns how many were drained.
    fn drain_into(&mut self, sink: &mut Sink) -> usize {
        let control = self.control.as_ref();
        self.ring.drain_while(|record| {
            // Stops are handled even after a write error: a process must never stay stopped.
            // And at once: the rest of a busy ring can wait, the stopped process cannot.
            if let Some(stop) = decode::stop(record) {
                sink.stops.push(stop);
                return false;
            }
            if sink.write_error.is_some() {
                return true;
            }
            if let Some(stack) = decode::stack(record) {
                match stack {
                    Ok(stack) => {
                        let mut nodes = std::mem::take(&mut sink.nodes);
                        sink.stacks.add(&stack, &mut nodes);
                        for ev in nodes.drain(..) {
                            sink.push(&ev);
                        }
                        sink.nodes = nodes;
                    }
                    Err(e) => sink.undecodable(e),
                }
                return true;
            }
            match decode::decode(record) {
                Ok(mut ev) => {
                    // The kernel's stack ids become the recording's trie leaves.
                    let mut nodes = std::mem::take(&mut sink.nodes);
                    sink.stacks.to_leaf(&mut ev, &mut nodes);
                    for node in nodes.drain(..) {
                        sink.push(&node);
                    }
                    sink.nodes = nodes;
                    // A mapped file's path, read while its process lives (the kernel sends
                    // only its name).
                    if let EventKind::RmapRegion(region) = &mut ev.kind {
                        crate::record::rmap::complete_path(ev.pid, region);
                    }
                    match &ev.kind {
                        EventKind::Fork { child } => {
                            sink.pids.insert(*child);
                        }
                        // A process's records after its Exec come after the Exec in the ring:
                        // exec leaves it one thread, which reserves every later record.
                        EventKind::Exec(Exec { filename, argv }) => {
                            // The warning is about an image: what the process allocated
                            // before (a shell's child between fork and exec) explains nothing
                            // of the new one.
                            sink.end_growth(ev.pid);
                            if control.is_some() && crate::control::is_client_exec(filename, argv) {
                                sink.clients.insert(ev.pid);
                            } else {
                                sink.clients.remove(&ev.pid);
                            }
                        }
                        EventKind::Exit { .. } => {
                            sink.clients.remove(&ev.pid);
                        }
                        EventKind::Alloc { .. }
                        | EventKind::Free { .. }
                        | EventKind::Realloc { .. }
                        | EventKind::AllocFailed { .. }
                            if !sink.clients.is_empty() && sink.clients.contains(&ev.pid) =>
                        {
                            sink.client_records += 1;
                            return true;
                        }
                        _ => {}
                    }
                    if sink.clients.is_empty() || !sink.clients.contains(&ev.pid) {
                        let measuring = control.is_none_or(Control::gate_open);
                        sink.growth
                            .entry(ev.pid)
                            .or_default()
                            .note(&ev.kind, measuring);
                    }
                    if matches!(ev.kind, EventKind::Exit { .. }) {
                        sink.end_growth(ev.pid);
                    }
                    if let Some(heaps) = &mut sink.heaps {
                        heaps.note(&ev);
                        if matches!(ev.kind, EventKind::Exit { .. } | EventKind::Exec(_)) {
                            sink.scanned.remove(&ev.pid);
                        }
                    }
                    sink.push(&ev);
                }
                Err(e) => sink.undecodable(e),
            }
            true
        })
    }

    /// Acts on every request the harness sent since the last call, in order
    /// (docs/control-protocol.md). A command is written into the file after every record the
    /// ring held when it was taken, stamped on the records' clock; `start` opens the gate before
    /// its reply, so when the harness reads `ok` the kernel records, and `stop` closes it first.
    fn serve_control(&mut self, sink: &mut Sink) -> Result<(), FormatError> {
        let Some(control) = self.control.as_mut() else {
            return Ok(());
        };
        for received in control.listener.requests() {
            let reply = |s: &Self, refusal| s.control().listener.reply(&received.reply(refusal));
            let command = match &received.request {
                Err(message) => {
                    reply(self, Some(message.clone()));
                    continue;
                }
                Ok(Request::Hello { .. }) => {
                    reply(self, None);
                    continue;
                }
                Ok(Request::Command(command)) => command.clone(),
            };
            if command == ControlCommand::Stop {
                if let Err(message) = self.control().set_gate(false) {
                    reply(self, Some(message));
                    continue;
                }
            }
            self.drain_pending(sink);
            sink.failed()?;
            let ts_ns = process::monotonic_ns();
            if command == ControlCommand::Start {
                if let Err(message) = self.control().set_gate(true) {
                    reply(self, Some(message));
                    continue;
                }
            }
            sink.push(&Event {
                ts_ns,
                pid: 0,
                tid: 0,
                kind: EventKind::Control { command },
            });
            sink.failed()?;
            reply(self, None);
        }
        Ok(())
    }

    /// The control channel; only called while serving it.
    fn control(&self) -> &Control<'a> {
        self.control.as_ref().expect("serving control requests")
    }

    /// Drains every record the ring holds now, waiting briefly for one still being written, so
    /// that what is pushed next comes after all of them in the file.
    fn drain_pending(&mut self, sink: &mut Sink) {
        let target = self.ring.producer_position();
        let deadline = Instant::now() + BUSY_RECORD_WAIT;
        loop {
            self.drain_into(sink);
            // A process stopped for discovery waits for us; so does the harness.
            self.continue_stopped(sink);
            if self.ring.consumed_through(target) || sink.write_error.is_some() {
                return;
            }
            if Instant::now() >= deadline {
                log::debug!("a ring record stayed busy for {BUSY_RECORD_WAIT:?}; going on");
                return;
            }
            std::thread::yield_now();
        }
    }

    /// Write a `Lost` event for each cause whose count grew since the last call.
    fn push_lost(&self, sink: &mut Sink) {
        for (i, (cause, name)) in LOST_CAUSES.iter().enumerate() {
            let total = match self.lost.lookup_u64(*cause as u32) {
                Ok(n) => n,
                Err(e) => {
                    log::warn!("cannot read lost-event counter {name}: {e}");
                    continue;
                }
            };
            if total > sink.lost_seen[i] {
                sink.lost_seen[i] = total;
                sink.push(&Event {
                    ts_ns: process::monotonic_ns(),
                    pid: self.root_pid as u32,
                    tid: 0,
                    kind: EventKind::Lost(Lost {
                        cause: name.to_string(),
                        total,
                    }),
                });
            }
        }
    }
}
