//! Unwind tables parsed while the walker loads, so that a process stopped for the walker waits
//! for its verification alone, not for its tables as well (issue 32).
//!
//! The walker's tables go into its own maps, so they could only be made once it had loaded:
//! the files discovered before then (the C library, the loader, the command's executable) were
//! parsed all at once when it was in place, while a process stopped at its first sampled
//! allocation waited. For a python run that was 16.5 of its 25 ms stop (python3.11's 64,575
//! rows). Parsing needs only the file, so each file discovery keeps for the tables is handed
//! to this builder's thread as it comes, and the parse runs beside the walker's verification
//! (on the core the stopped command leaves idle); what is left when the walker is in place is
//! copying rows into its maps (`Tables::add_prepared`).
//!
//! Flow: discovery → [`TableBuilder::submit`] (a descriptor of its own, so the file stays the
//! one that ran) → the thread's [`Prepared::of`] → [`TableBuilder::take`], in submission order,
//! when the walker is in place. Dropped (the walker will never come), the thread stops after
//! the file it is on.

use std::collections::HashMap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};

use crate::record::stacks::Prepared;
use crate::sys::sched::Lowered;

/// The builder's thread yields to the command (the walker's load takes the same nice): both
/// work on what the command leaves idle. Once a table is awaited, a process waits for it too,
/// and the thread gets the normal priority back ([`TableBuilder::take`]): on a busy machine,
/// nice 19 could leave it starved while the process stays stopped.
const NICE: i32 = 19;

/// What the thread sends back: the job's number and its table, or why there is none.
type Built = (u64, Result<Prepared, String>);

/// Parses the unwind tables of files on a thread of its own, in the order they are submitted.
pub struct TableBuilder {
    jobs: Sender<(u64, File)>,
    built: Receiver<Built>,
    /// Results that came in while another was awaited.
    early: HashMap<u64, Result<Prepared, String>>,
    next: u64,
    /// The thread's priority, given back once a table is awaited (it runs while the builder
    /// holds `jobs`).
    priority: Lowered,
    /// Whether it was.
    raised: bool,
}

impl TableBuilder {
    /// A builder whose thread has started; `None` when no thread can be started (the tables
    /// are then parsed when the walker is in place, as before).
    pub fn start() -> Option<TableBuilder> {
        let (jobs, received) = mpsc::channel::<(u64, File)>();
        let (sent, built) = mpsc::channel::<Built>();
        let priority = Lowered::default();
        let its_priority = priority.clone();
        let spawned = std::thread::Builder::new()
            .name("unwind tables".into())
            .spawn(move || {
                if let Err(e) = its_priority.lower(NICE) {
                    log::debug!("unwind tables are parsed at the normal priority: {e}");
                }
                for (job, file) in received {
                    let path = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
                    // The receiver gone: the walker will never be in place, stop here.
                    if sent.send((job, Prepared::of(&path))).is_err() {
                        break;
                    }
                }
            });
        match spawned {
            Ok(_) => Some(TableBuilder {
                jobs,
                built,
                early: HashMap::new(),
                next: 0,
                priority,
                raised: false,
            }),
            Err(e) => {
                log::debug!("unwind tables wait for the walker: no thread to parse them ({e})");
                None
            }
        }
    }

    /// Hands `file` to the thread: the number to [`Self::take`] its table by, or `None` when it
    /// cannot be (the caller parses it later itself).
    pub fn submit(&mut self, file: &File) -> Option<u64> {
        let own = file.try_clone().ok()?;
        let job = self.next;
        self.jobs.send((job, own)).ok()?;
        self.next += 1;
        Some(job)
    }

    /// The table of job `job`, a number [`Self::submit`] gave and not taken yet, waiting for the
    /// thread to finish it; `None` when the thread has gone without it.
    pub fn take(&mut self, job: u64) -> Option<Result<Prepared, String>> {
        if let Some(done) = self.early.remove(&job) {
            return Some(done);
        }
        loop {
            match self.built.try_recv() {
                Ok((n, done)) if n == job => return Some(done),
                Ok((n, done)) => {
                    self.early.insert(n, done);
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return None,
            }
        }
        self.raise();
        for (n, done) in self.built.iter() {
            if n == job {
                return Some(done);
            }
            self.early.insert(n, done);
        }
        None
    }

    /// The thread at the normal priority, once: what it parses is awaited now.
    fn raise(&mut self) {
        if self.raised {
            return;
        }
        self.raised = true;
        if let Err(e) = self.priority.raise() {
            log::debug!("the unwind tables' thread keeps nice {NICE}: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_come_back_in_any_order_as_parsed_here() {
        let Some(mut builder) = TableBuilder::start() else {
            panic!("a thread can be started");
        };
        let exe = File::open("/proc/self/exe").unwrap();
        let empty = tempfile_with(b"not an ELF file");
        let first = builder.submit(&exe).unwrap();
        let second = builder.submit(&empty).unwrap();
        // The second first: the first is kept until asked for.
        let refused = builder.take(second).expect("a result for the second file");
        assert!(refused.is_err(), "{refused:?}");
        let built = builder.take(first).expect("a result for the first file");
        let built = built.expect("the test binary has call frame information");
        let here = Prepared::of(std::path::Path::new("/proc/self/exe")).unwrap();
        assert_eq!(built.rows(), here.rows());
        assert!(builder.early.is_empty());
    }

    /// A file of `bytes`, unlinked: its descriptor is all that is left of it.
    fn tempfile_with(bytes: &[u8]) -> File {
        use std::io::Write;
        let dir = std::env::temp_dir();
        let path = dir.join(format!("memtrack-table-builder-{}", std::process::id()));
        let mut file = File::create(&path).unwrap();
        file.write_all(bytes).unwrap();
        let file = File::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        file
    }
}
