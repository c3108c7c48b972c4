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

use crate::error::Error;
use crate::format::{Event, EventKind, FormatError, Header, LostCount, Trailer, Writer};
use crate::record::decode::{self, LOST_CAUSES};
use crate::record::foreground::CommandGroup;
use crate::record::progress::{Counts, Progress};
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

/// The signals of [`HANDLED_SIGNALS`] that are passed on to the command's process group.
pub const FORWARDED_SIGNALS: [i32; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// Longest sleep between two drains while the ring is empty.
const POLL_INTERVAL: Duration = Duration::from_millis(4);
/// A killed recorder leaves a file readable up to its last chunk: write one at least this often.
const FLUSH_INTERVAL: Duration = Duration::from_secs(1);

/// What the loop needs; built by `record::run` once everything is loaded and spawned.
pub struct Session<'a> {
    pub ring: RingBuffer,
    pub lost: MapFd<'a>,
    pub signals: &'a SignalSet,
    pub root_pid: i32,
    pub output: &'a Path,
    /// The command's process group, which signals are passed on to.
    pub group: &'a CommandGroup,
    /// The status line on stderr (off unless stderr is a terminal).
    pub progress: Progress,
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
            if last_flush.elapsed() >= FLUSH_INTERVAL {
                self.push_lost(&mut writer, &mut lost_seen).map_err(werr)?;
                writer.flush_chunk().map_err(werr)?;
                last_flush = Instant::now();
            }
            if self.progress.due() {
                self.progress.draw(Counts {
                    events: writer.events_written(),
                    processes: pids.len(),
                    bytes_written: writer.bytes_written(),
                    lost: lost_seen.iter().sum(),
                });
            }
            let mut tree_gone = false;
            loop {
                match process::reap_one() {
                    Reaped::Child { pid, status } => {
                        if pid == self.root_pid {
                            root_status = Some(status);
                        }
                    }
                    Reaped::Stopped { pid, signal } => {
                        if pid == self.root_pid {
                            self.progress.clear();
                            self.group.stopped(signal);
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
                if let Some(got) = self.signals.wait(POLL_INTERVAL) {
                    // A terminal's ^C reaches the command's group directly when it holds the
                    // terminal, and then never us; whatever does reach us (kill(2), or ^C when
                    // the command does not hold the terminal) is passed on to its group. Either
                    // way we go on until the tree is gone, and finish the file.
                    if FORWARDED_SIGNALS.contains(&got.signal) {
                        self.group.signal(got.signal);
                    }
                }
            }
        }

        // Every process of the tree has ended: whatever they produced is in the ring now.
        self.drain_into(&mut writer, &mut pids, &mut undecodable, &mut write_error);
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
        self.progress.clear();
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
        })
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
