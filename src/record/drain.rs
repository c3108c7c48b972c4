//! The recorder's one loop: drain the ring into the file, reap the tree, pass signals on, and
//! stop when the whole tree is gone.
//!
//! The BPF side submits records without wake-ups (a wake-up per event costs about 3 µs,
//! KERNEL-FACTS.md), so the loop polls: it drains until the ring is empty, then sleeps in
//! `sigtimedwait` for at most `POLL_INTERVAL`, waking at once for a child's exit or a signal.
//! Because memtrack is the subreaper of the tree, "no children left" means every process of the
//! tree has ended, and so has every record it could produce: one last drain then gets them all.

use std::collections::HashSet;
use std::fmt;
use std::fs::File;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::control::Request;
use crate::error::Error;
use crate::format::{
    ControlCommand, Event, EventKind, FormatError, Header, LostCount, Trailer, Writer,
};
use crate::record::decode::{self, LOST_CAUSES};
use crate::record::listen::Control;
use crate::sys::bpf::MapFd;
use crate::sys::process::{self, Reaped, SignalSet};
use crate::sys::ring::RingBuffer;

/// Signals the loop takes synchronously: a child ended, or someone asks us to stop.
pub const HANDLED_SIGNALS: [i32; 5] = [
    libc::SIGCHLD,
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
];

/// Longest sleep between two drains while the ring is empty.
const POLL_INTERVAL: Duration = Duration::from_millis(4);
/// A killed recorder leaves a file readable up to its last chunk: write one at least this often.
const FLUSH_INTERVAL: Duration = Duration::from_secs(1);
/// Before a control command is written, the ring is drained up to where the producer was; a
/// record still being written there is waited for this long at most (it takes microseconds).
const BUSY_RECORD_WAIT: Duration = Duration::from_millis(10);

/// What the loop needs; built by `record::run` once everything is loaded and spawned.
pub struct Session<'a> {
    pub ring: RingBuffer,
    pub lost: MapFd<'a>,
    pub signals: &'a SignalSet,
    pub root_pid: i32,
    pub output: &'a Path,
    /// The control channel, with `--control`.
    pub control: Option<Control<'a>>,
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

impl Session<'_> {
    /// Run until the tree is gone; write the file; return what happened.
    pub fn run(mut self, file: File, header: &Header) -> Result<Summary, Error> {
        let out = self.output.to_path_buf();
        let werr = |e: FormatError| Error::Internal(format!("cannot write {}: {e}", out.display()));
        let mut writer = Writer::new(file, header).map_err(werr)?;
        let mut lost_seen = [0u64; LOST_CAUSES.len()];
        let mut pids = HashSet::from([self.root_pid as u32]);
        let mut undecodable = 0u64;
        let mut write_error: Option<FormatError> = None;
        let mut root_status: Option<i32> = None;
        let mut last_flush = Instant::now();

        loop {
            let drained =
                self.drain_into(&mut writer, &mut pids, &mut undecodable, &mut write_error);
            if let Some(e) = write_error.take() {
                // The command goes on without us; the file holds what was written so far.
                return Err(werr(e));
            }
            self.serve_control(&mut writer, &mut pids, &mut undecodable, &mut write_error)
                .map_err(werr)?;
            if last_flush.elapsed() >= FLUSH_INTERVAL {
                self.push_lost(&mut writer, &mut lost_seen).map_err(werr)?;
                writer.flush_chunk().map_err(werr)?;
                last_flush = Instant::now();
            }
            let mut tree_gone = false;
            loop {
                match process::reap_one() {
                    Reaped::Child { pid, status } => {
                        if pid == self.root_pid {
                            root_status = Some(status);
                        }
                    }
                    Reaped::Running => break,
                    Reaped::NoChildren => {
                        tree_gone = true;
                        break;
                    }
                }
            }
            if tree_gone {
                break;
            }
            if drained == 0 {
                // A control request wakes the loop at once: the harness waits for its reply.
                let got = match &self.control {
                    Some(c) => self
                        .signals
                        .wait_or_readable(c.listener.fd(), POLL_INTERVAL),
                    None => self.signals.wait(POLL_INTERVAL),
                };
                if let Some(got) = got {
                    // A terminal's Ctrl-C already reached the command (it shares our process
                    // group); a kill(2) aimed at us is passed on. Either way we go on until the
                    // tree is gone, and finish the file.
                    if got.signal != libc::SIGCHLD && got.from_process {
                        log::info!(
                            "passing signal {} on to the command (pid {})",
                            got.signal,
                            self.root_pid
                        );
                        process::kill(self.root_pid, got.signal);
                    }
                }
            }
        }

        // Every process of the tree has ended: whatever they produced is in the ring now, and
        // whatever a client sent without waiting for its reply is in the control FIFO.
        self.drain_into(&mut writer, &mut pids, &mut undecodable, &mut write_error);
        self.serve_control(&mut writer, &mut pids, &mut undecodable, &mut write_error)
            .map_err(werr)?;
        if let Some(e) = write_error.take() {
            return Err(werr(e));
        }
        self.push_lost(&mut writer, &mut lost_seen).map_err(werr)?;
        let exit_code = root_status.map(process::exit_code_of).unwrap_or(128);
        let trailer = Trailer {
            end_monotonic_ns: process::monotonic_ns(),
            events: 0,
            chunks: 0,
            lost: LOST_CAUSES
                .iter()
                .zip(lost_seen)
                .filter(|(_, n)| *n > 0)
                .map(|((_, cause), count)| LostCount {
                    cause: cause.to_string(),
                    count,
                })
                .collect(),
            exit_code,
        };
        let events = writer.events_written();
        let file = writer.finish(&trailer).map_err(werr)?;
        let bytes = file
            .metadata()
            .map(|m| m.len())
            .map_err(|e| Error::io(self.output, e))?;
        Ok(Summary {
            events,
            processes: pids.len(),
            bytes,
            lost: lost_seen.iter().sum(),
            undecodable,
            exit_code,
            output: self.output.display().to_string(),
            control: self
                .control
                .as_ref()
                .map(|c| (c.listener.accepted, c.listener.refused)),
        })
    }

    /// Acts on every request the harness sent since the last call, in order
    /// (docs/control-protocol.md). A command is written into the file after every record the
    /// ring held when it was taken, stamped on the records' clock; `start` opens the gate before
    /// its reply, so when the harness reads `ok` the kernel records, and `stop` closes it first.
    fn serve_control(
        &mut self,
        writer: &mut Writer<File>,
        pids: &mut HashSet<u32>,
        undecodable: &mut u64,
        write_error: &mut Option<FormatError>,
    ) -> Result<(), FormatError> {
        let Some(mut control) = self.control.take() else {
            return Ok(());
        };
        let served = self.serve_requests(&mut control, writer, pids, undecodable, write_error);
        self.control = Some(control);
        served
    }

    fn serve_requests(
        &mut self,
        control: &mut Control<'_>,
        writer: &mut Writer<File>,
        pids: &mut HashSet<u32>,
        undecodable: &mut u64,
        write_error: &mut Option<FormatError>,
    ) -> Result<(), FormatError> {
        for received in control.listener.requests() {
            let command = match &received.request {
                Err(message) => {
                    control
                        .listener
                        .reply(&received.reply(Some(message.clone())));
                    continue;
                }
                Ok(Request::Hello { .. }) => {
                    control.listener.reply(&received.reply(None));
                    continue;
                }
                Ok(Request::Command(command)) => command.clone(),
            };
            let closed = match command {
                ControlCommand::Stop => control.set_gate(false),
                _ => Ok(()),
            };
            if let Err(message) = closed {
                control.listener.reply(&received.reply(Some(message)));
                continue;
            }
            self.drain_pending(writer, pids, undecodable, write_error);
            if let Some(e) = write_error.take() {
                return Err(e);
            }
            let ts_ns = process::monotonic_ns();
            let opened = match command {
                ControlCommand::Start => control.set_gate(true),
                _ => Ok(()),
            };
            if let Err(message) = opened {
                control.listener.reply(&received.reply(Some(message)));
                continue;
            }
            writer.push(&Event {
                ts_ns,
                pid: 0,
                tid: 0,
                kind: EventKind::Control { command },
            })?;
            control.listener.reply(&received.reply(None));
        }
        Ok(())
    }

    /// Drains every record the ring holds now, waiting briefly for one still being written, so
    /// that what is pushed next comes after all of them in the file.
    fn drain_pending(
        &mut self,
        writer: &mut Writer<File>,
        pids: &mut HashSet<u32>,
        undecodable: &mut u64,
        write_error: &mut Option<FormatError>,
    ) {
        let target = self.ring.producer_position();
        let deadline = Instant::now() + BUSY_RECORD_WAIT;
        loop {
            self.drain_into(writer, pids, undecodable, write_error);
            if self.ring.consumed_through(target) || write_error.is_some() {
                return;
            }
            if Instant::now() >= deadline {
                log::debug!("a ring record stayed busy for {BUSY_RECORD_WAIT:?}; going on");
                return;
            }
            std::thread::yield_now();
        }
    }

    fn drain_into(
        &mut self,
        writer: &mut Writer<File>,
        pids: &mut HashSet<u32>,
        undecodable: &mut u64,
        write_error: &mut Option<FormatError>,
    ) -> usize {
        self.ring.drain(|record| {
            if write_error.is_some() {
                return;
            }
            match decode::decode(record) {
                Ok(ev) => {
                    if let EventKind::Fork { child } = ev.kind {
                        pids.insert(child);
                    }
                    if let Err(e) = writer.push(&ev) {
                        *write_error = Some(e);
                    }
                }
                Err(e) => {
                    if *undecodable == 0 {
                        log::warn!(
                            "a kernel record could not be decoded ({e:?}); counting such records"
                        );
                    }
                    *undecodable += 1;
                }
            }
        })
    }

    /// Write a `Lost` event for each cause whose count grew since the last call.
    fn push_lost(
        &self,
        writer: &mut Writer<File>,
        seen: &mut [u64; LOST_CAUSES.len()],
    ) -> Result<(), FormatError> {
        for (i, (cause, name)) in LOST_CAUSES.iter().enumerate() {
            let total = match self.lost.lookup_u64(*cause as u32) {
                Ok(n) => n,
                Err(e) => {
                    log::warn!("cannot read lost-event counter {name}: {e}");
                    continue;
                }
            };
            if total > seen[i] {
                seen[i] = total;
                writer.push(&Event {
                    ts_ns: process::monotonic_ns(),
                    pid: self.root_pid as u32,
                    tid: 0,
                    kind: EventKind::Lost {
                        cause: name.to_string(),
                        total,
                    },
                })?;
            }
        }
        Ok(())
    }
}
