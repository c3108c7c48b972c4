//! The drain loop's handling of stopped processes: the stops discovery, the walker of call
//! stacks and the leak scan make (bpf/common.bpf.h's `stop`), each process held until every
//! stop it made is handled, then continued once.

use std::time::{Duration, Instant};

use super::{Session, Sink, BUSY_RECORD_WAIT};
use crate::format::{Event, EventKind};
use crate::record::decode::{Stop, StopWhy};
use crate::record::leakscan::{self, Held};
use crate::sys::process;

/// How long a stopped process's threads may take to stop after its stop's record was read
/// (continue_stopped): a few milliseconds at most, unless it sleeps uninterruptibly.
const STOP_WAIT: Duration = Duration::from_secs(1);

impl Session<'_> {
    /// Probe what each stopped process mapped, continue it, and write the coverage records of
    /// files seen for the first time.
    ///
    /// A stop's record can be read before its SIGSTOP has taken effect (milliseconds in the
    /// kernel matrix's guests), and the process may run on meanwhile into another stop, whose
    /// SIGSTOP merges with the first. A SIGCONT per stop then continued the process while a
    /// later stop still needed it held: in the 6.12 guest the loader's stop came twice, the
    /// first SIGCONT let the process run into a sampled malloc, and the second undid that
    /// malloc's stop for the walker, which it returned from before the walker was in place
    /// (its stack "[no stack]"). So each stopped process is waited for until all its threads
    /// have stopped, the ring is read up to then, every stop found is handled (the walker put in place
    /// first), and only then is each process continued, once.
    pub(super) fn continue_stopped(&mut self, sink: &mut Sink) {
        let mut coverage = Vec::new();
        // A leak scan drains the ring, which may find more stops: until none is left.
        while !sink.stops.is_empty() {
            // Exits are held by ptrace, which waits for every thread itself (leakscan). Once
            // the walker is in place (or will never be), a stop for it holds nothing: only
            // tests/sampled.rs's walks at the return stop then, thousands of times.
            let placed = !self.discovery.tables_waiting();
            let holds = |s: &&Stop| match s.why {
                StopWhy::Exit => false,
                StopWhy::Walker => !placed,
                StopWhy::Exec | StopWhy::Loader => true,
            };
            for stop in sink.stops.iter().filter(holds) {
                let waited = process::wait_until_stopped(stop.pid, stop.tid, STOP_WAIT);
                if waited > Duration::from_millis(1) {
                    log::debug!(
                        "pid {} ({:?}) stopped {} µs after its record was read",
                        stop.pid,
                        stop.why,
                        waited.as_micros()
                    );
                }
            }
            self.drain_records(sink);
            let stops = std::mem::take(&mut sink.stops);
            if stops.iter().any(|s| s.why == StopWhy::Walker) {
                // A sampled call waits, stopped, for the walker to walk it at its return
                // (bpf/alloc.bpf.c, "Sampled stacks").
                self.install_walker(sink, true);
            }
            let mut held = Vec::new();
            for stop in stops {
                match stop.why {
                    StopWhy::Exit => self.scan_for_leaks(stop, sink),
                    StopWhy::Exec | StopWhy::Loader => {
                        self.discovery.handle_stop(&stop, &mut coverage);
                        held.push(stop.pid);
                    }
                    StopWhy::Walker => {
                        self.discovery.walker_stop_handled(&stop);
                        held.push(stop.pid);
                    }
                }
            }
            held.sort_unstable();
            held.dedup();
            for pid in held {
                process::kill(pid as i32, libc::SIGCONT);
            }
        }
        for ev in self.discovery.take_module_events().iter().chain(&coverage) {
            sink.push(ev);
        }
    }

    /// A process stopped at `_exit`: hold its threads, drain what it recorded up to now, scan
    /// it, write the result before its `Exit`, and continue it. Whatever fails, it is
    /// continued (the holds detach when dropped, before SIGCONT).
    fn scan_for_leaks(&mut self, stop: Stop, sink: &mut Sink) {
        let pid = stop.pid;
        let fresh = sink.scanned.insert(pid);
        let scan = match &sink.heaps {
            Some(heaps) if fresh && heaps.has_own(pid) => match Held::hold(pid) {
                Ok(held) => {
                    // Every thread is stopped now: what they allocated is in the ring.
                    self.drain_pending(sink);
                    let heaps = sink.heaps.as_ref().expect("leak scan on");
                    Some(held.scan(heaps))
                }
                Err(failure) => Some(crate::format::LeakScan {
                    failure,
                    ..Default::default()
                }),
            },
            Some(_) if fresh => Some(leakscan::nothing_live()),
            _ => None,
        };
        process::kill(pid as i32, libc::SIGCONT);
        if let Some(scan) = scan {
            log::debug!(
                "pid {pid}: leak scan of {} threads in {} µs: {} blocks lost, {} reachable, {} \
                 bytes read {}",
                scan.threads,
                scan.duration_ns / 1000,
                scan.lost_blocks,
                scan.reachable_blocks,
                scan.scanned_bytes,
                scan.failure
            );
            sink.push(&Event {
                ts_ns: process::monotonic_ns(),
                pid,
                tid: stop.tid,
                kind: EventKind::LeakScan(scan),
            });
        }
    }

    /// Hand every ring record committed by now to the sink, stops included (left in
    /// `sink.stops`, not handled).
    fn drain_records(&mut self, sink: &mut Sink) {
        let target = self.ring.producer_position();
        let deadline = Instant::now() + BUSY_RECORD_WAIT;
        while !self.ring.consumed_through(target) && sink.write_error.is_none() {
            if Instant::now() >= deadline {
                log::debug!("a ring record stayed busy for {BUSY_RECORD_WAIT:?}; going on");
                return;
            }
            if self.drain_into(sink) == 0 {
                std::thread::yield_now();
            }
        }
    }
}
