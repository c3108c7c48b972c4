//! The guardian: a small process between the recorder and the recorded command, so that the
//! recorder's death (SIGKILL, the OOM killer, a CI timeout) never changes what the command does.
//!
//! The recorder forks the guardian before it loads anything into the kernel, so the guardian
//! holds no BPF object, link or ring: when the recorder dies, every probe detaches with the
//! recorder's file descriptors and no process is stopped for discovery after that. The guardian
//! is the command's parent and the subreaper of its tree, in a process group of its own in the
//! recorder's session, and it blocks the signals meant for the recorder or the command
//! (a terminal's ^C and ^Z, a `kill` of the recorder's group). So:
//!
//! - the command's process group always has a parent outside it in the same session (the
//!   guardian), and never becomes orphaned when the recorder dies: no SIGHUP (a cargo build
//!   used to exit 129), and a group killed with the recorder's does not take the guardian;
//! - when the recorder is gone (end of file on the request pipe, which only the recorder holds,
//!   then its exit confirmed) the guardian continues every process of the tree that is stopped
//!   or has a SIGSTOP pending (a discovery stop sent just before the recorder died), over a
//!   short settling time with repeated passes, then waits for the command and exits; the
//!   command runs on to its end, unrecorded;
//! - the guardian reports the command's exit status and job-control stops, and "no children
//!   left", to the recorder over a pipe of fixed-size messages ([`Guardian::reap`] turns them
//!   into what `waitpid` gave the recorder when it was the parent itself).
//!
//! The ending (issue 13): when the command has ended but descendants it left behind (a daemon,
//! a build server) still run, the recorder waits for them only `--grace` (default 2 s; never
//! with `--wait-all`; SIGINT, SIGTERM, SIGHUP or SIGQUIT end the wait at once), names them,
//! finishes the file with them still running (no Exit event: reports show them as running),
//! detaches its probes and tells the guardian, which continues any of them that a probe
//! stopped meanwhile and leaves them to run on.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::ffi::{CStr, OsStr};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::record::identity::Identity;
use crate::record::progress::Waiting;
use crate::record::spawn;
use crate::sys::mount::MountSteps;
use crate::sys::process::{self, Reaped, SignalSet};
use crate::sys::terminal::Terminal;
use crate::sys::wait::{Trigger, Waiter};

/// The guardian's task name, for `ps`.
pub const GUARDIAN_NAME: &CStr = c"memtrack-guard";

/// How long the command's descendants are waited for after it ended, unless `--grace`.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(2);

/// Signals the guardian never takes: it must outlive whatever ends the recorder or the command
/// by a signal, and must not stop for job control (the recorder does that for the job).
const GUARDIAN_SIGNALS: [i32; 8] = [
    libc::SIGCHLD,
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGTSTP,
    libc::SIGTTIN,
    libc::SIGTTOU,
];

/// After the recorder is gone, stopped processes are looked for at least this long: a
/// probe that was running as the recorder died may still send its SIGSTOP (programs leave
/// within an RCU grace period, microseconds to a few milliseconds).
const SETTLE: Duration = Duration::from_millis(100);
/// Between two passes over the tree while settling.
const PASS_INTERVAL: Duration = Duration::from_millis(5);
/// The longest wait for the recorder to have exited after its pipe closed.
const EXIT_CONFIRM: Duration = Duration::from_secs(2);

/// Requests, recorder to guardian (one byte each).
const REQ_SPAWN: u8 = b'S';
const REQ_DETACHED: u8 = b'D';

/// Reports, guardian to recorder: `[kind, a, b]` as native-endian i32.
const REP_SPAWNED: i32 = 1;
const REP_SPAWN_FAILED: i32 = 2;
/// The third word of a `REP_SPAWN_FAILED` that failed entering the private libraries' mount
/// namespace, not starting the command.
const SPAWN_FAILED_NAMESPACE: i32 = 1;
const REP_EXITED: i32 = 3;
const REP_STOPPED: i32 = 4;
const REP_NO_CHILDREN: i32 = 5;
const REPORT_BYTES: usize = 12;

/// How the recording ends once the command has: `--grace` and `--wait-all`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// Wait this long for the descendants the command left running, then stop recording.
    Grace(Duration),
    /// Wait for every process of the tree (`--wait-all`).
    WaitAll,
}

impl Default for Ending {
    fn default() -> Ending {
        Ending::Grace(DEFAULT_GRACE)
    }
}

/// `500ms`, `2s`, `2.5s`, `1m`, or a bare number of seconds.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let value: f64 = number.parse().ok()?;
    let seconds = match unit.trim() {
        "ms" => value / 1000.0,
        "" | "s" => value,
        "m" | "min" => value * 60.0,
        _ => return None,
    };
    (seconds.is_finite() && (0.0..=86_400.0 * 365.0).contains(&seconds))
        .then(|| Duration::from_secs_f64(seconds))
}

/// A process the recorder stopped waiting for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeftRunning {
    pub pid: u32,
    /// Its task name (/proc/PID/comm).
    pub name: String,
}

/// The recorder's side of the guardian. Shared with the drain loop while the discovery
/// registry borrows the loaded objects, hence the cell.
pub struct Guardian {
    pid: i32,
    requests: Option<File>,
    reports: File,
    state: RefCell<State>,
}

/// What the recorder learns from the guardian as the recording goes.
struct State {
    pending: Vec<u8>,
    /// The command, once spawned.
    root: i32,
    /// The guardian said its tree is gone, or its pipe closed.
    guardian_done: bool,
    ending: Ending,
    root_ended: Option<Instant>,
    /// A signal asked us to stop waiting.
    interrupted: bool,
    /// Set when the recorder stopped waiting for processes still running.
    left_running: Option<Vec<LeftRunning>>,
}

/// What the guardian's child needs to start the command.
struct Plan<'a> {
    argv: &'a [std::ffi::OsString],
    env: &'a [(&'a str, &'a OsStr)],
    identity: Option<&'a Identity>,
    terminal: Option<&'a Terminal>,
    /// The private libraries' mounts: the guardian enters their namespace before it forks the
    /// command.
    mounts: Option<MountSteps>,
}

impl Guardian {
    /// Fork the guardian, which waits for [`Guardian::spawn`] to start `argv` (see
    /// `spawn::command` for `env`, `identity`, the terminal and `mounts`).
    pub fn start(
        argv: &[std::ffi::OsString],
        env: &[(&str, &OsStr)],
        identity: Option<&Identity>,
        terminal: Option<&Terminal>,
        ending: Ending,
        mounts: Option<MountSteps>,
    ) -> Result<Guardian, Error> {
        let internal = |what: &str, e: io::Error| {
            Error::Internal(format!("cannot start the guardian process ({what}: {e})"))
        };
        let (req_read, req_write) = process::pipe().map_err(|e| internal("pipe", e))?;
        let (rep_read, rep_write) = process::pipe().map_err(|e| internal("pipe", e))?;
        let recorder = process::getpid() as i32;
        match process::fork_single_threaded().map_err(|e| internal("fork", e))? {
            None => {
                drop(req_write);
                drop(rep_read);
                let plan = Plan {
                    argv,
                    env,
                    identity,
                    terminal,
                    mounts,
                };
                serve(plan, req_read, rep_write, recorder)
            }
            Some(pid) => {
                drop(req_read);
                drop(rep_write);
                process::set_nonblocking(rep_read.as_fd()).map_err(|e| internal("fcntl", e))?;
                Ok(Guardian {
                    pid,
                    requests: Some(req_write),
                    reports: rep_read,
                    state: RefCell::new(State {
                        pending: Vec::new(),
                        root: 0,
                        guardian_done: false,
                        ending,
                        root_ended: None,
                        interrupted: false,
                        left_running: None,
                    }),
                })
            }
        }
    }

    /// The guardian's pid: the process the kernel side must mark as spawner.
    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// Have the guardian start the command; returns its pid, or why it could not start.
    pub fn spawn(&mut self, program: &std::ffi::OsStr) -> Result<u32, Error> {
        let reports = &self.reports;
        let state = self.state.get_mut();
        let lost =
            || Error::Internal("the guardian process ended before the command started".into());
        self.requests
            .as_mut()
            .ok_or_else(lost)?
            .write_all(&[REQ_SPAWN])
            .map_err(|_| lost())?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match state.next_report(reports) {
                Some([REP_SPAWNED, pid, _]) => {
                    state.root = pid;
                    return Ok(pid as u32);
                }
                Some([REP_SPAWN_FAILED, errno, SPAWN_FAILED_NAMESPACE]) => {
                    return Err(Error::Internal(format!(
                        "cannot enter the mount namespace of the private libraries ({}), \
                         although the check before recording could: record with \
                         --no-private-libs",
                        io::Error::from_raw_os_error(errno)
                    )));
                }
                Some([REP_SPAWN_FAILED, errno, _]) => {
                    let e = if errno > 0 {
                        io::Error::from_raw_os_error(errno)
                    } else {
                        io::Error::new(io::ErrorKind::InvalidInput, "an argument holds a NUL byte")
                    };
                    return Err(spawn::spawn_error(program, e));
                }
                Some(_) => continue,
                None if state.guardian_done || Instant::now() > deadline => return Err(lost()),
                None => std::thread::sleep(Duration::from_micros(200)),
            }
        }
    }

    /// The fd that is readable when the guardian reports something, for the drain loop's wait.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.reports.as_fd()
    }

    /// What happened to the tree since the last call, without blocking, in the terms of
    /// `waitpid`: the command (`Child` of the root pid) ended or stopped; `NoChildren` once the
    /// whole tree is gone, or once the recorder stops waiting for what the command left
    /// running (see [`Guardian::left_running`]).
    pub fn reap(&self) -> Reaped {
        let mut st = self.state.borrow_mut();
        let st = &mut *st;
        if st.left_running.is_some() {
            return Reaped::NoChildren;
        }
        while let Some([kind, a, b]) = st.next_report(&self.reports) {
            match kind {
                REP_EXITED => return st.ended(a, b),
                REP_STOPPED => return Reaped::Stopped { pid: a, signal: b },
                REP_NO_CHILDREN => st.guardian_done = true,
                _ => {}
            }
        }
        // Our own children: the guardian, and, if it died, the tree it leaves us (we are a
        // subreaper too).
        loop {
            match process::reap_one() {
                Reaped::Child { pid, .. } if pid == self.pid => {
                    if !st.guardian_done {
                        log::warn!(
                            "the guardian process ended early; memtrack reaps the tree itself"
                        );
                    }
                    st.guardian_done = true;
                }
                Reaped::Child { pid, status } => return st.ended(pid, status),
                Reaped::Stopped { pid, .. } if pid == self.pid => {}
                stopped @ Reaped::Stopped { .. } => return stopped,
                Reaped::Running => break,
                Reaped::NoChildren if st.guardian_done => return Reaped::NoChildren,
                Reaped::NoChildren => break,
            }
        }
        if let (Some(at), Ending::Grace(grace)) = (st.root_ended, st.ending) {
            if st.interrupted || at.elapsed() >= grace {
                st.give_up(self.pid);
                return Reaped::NoChildren;
            }
        }
        if st.root_ended.is_some() && st.interrupted {
            st.give_up(self.pid);
            return Reaped::NoChildren;
        }
        Reaped::Running
    }

    /// The recorder received `signal`; SIGINT, SIGTERM, SIGHUP and SIGQUIT end the wait for
    /// the processes the command left behind (before the command has ended they are only
    /// passed on to it).
    pub fn signalled(&self, signal: i32) {
        let mut st = self.state.borrow_mut();
        if st.root_ended.is_some()
            && matches!(
                signal,
                libc::SIGINT | libc::SIGTERM | libc::SIGHUP | libc::SIGQUIT
            )
        {
            log::info!("signal {signal}: no longer waiting for the processes left running");
            st.interrupted = true;
        }
    }

    /// While waiting for what the command left running: what the progress line says.
    pub fn waiting(&self) -> Option<Waiting> {
        let st = self.state.borrow();
        let at = st.root_ended?;
        if st.left_running.is_some() || st.guardian_done {
            return None;
        }
        Some(Waiting {
            remaining: match st.ending {
                Ending::Grace(grace) => Some(grace.saturating_sub(at.elapsed())),
                Ending::WaitAll => None,
            },
        })
    }

    /// The processes the recorder stopped waiting for (empty when the tree ended by itself).
    pub fn left_running(&self) -> Vec<LeftRunning> {
        self.state.borrow().left_running.clone().unwrap_or_default()
    }

    /// The recorder's probes are detached: the guardian continues whatever they stopped and
    /// leaves the processes the recorder stopped waiting for to run on.
    pub fn release(mut self) {
        if let Some(mut w) = self.requests.take() {
            let _ = w.write_all(&[REQ_DETACHED]);
        }
    }
}

impl State {
    fn ended(&mut self, pid: i32, status: i32) -> Reaped {
        if pid == self.root {
            self.root_ended = Some(Instant::now());
        }
        Reaped::Child { pid, status }
    }

    fn give_up(&mut self, guardian: i32) {
        let me = process::getpid() as i32;
        let mut left: Vec<LeftRunning> = descendants(me)
            .into_iter()
            .filter(|p| p.pid != guardian && p.state != 'Z' && p.state != 'X')
            .map(|p| LeftRunning {
                pid: p.pid as u32,
                name: p.name,
            })
            .collect();
        left.sort_by_key(|p| p.pid);
        self.left_running = Some(left);
    }

    /// One report, if a whole one is readable.
    fn next_report(&mut self, reports: &File) -> Option<[i32; 3]> {
        if self.pending.len() < REPORT_BYTES {
            let mut buf = [0u8; 256];
            match { reports }.read(&mut buf) {
                Ok(0) => self.guardian_done = true,
                Ok(n) => self.pending.extend_from_slice(&buf[..n]),
                Err(_) => {} // EAGAIN: nothing yet
            }
        }
        if self.pending.len() < REPORT_BYTES {
            return None;
        }
        let word = |i: usize| {
            i32::from_ne_bytes(self.pending[i * 4..i * 4 + 4].try_into().expect("4 bytes"))
        };
        let report = [word(0), word(1), word(2)];
        self.pending.drain(..REPORT_BYTES);
        Some(report)
    }
}

/// The guardian process: start the command when asked, report on it, and look after the tree
/// when the recorder is gone. Never returns.
fn serve(plan: Plan<'_>, mut requests: File, reports: File, recorder: i32) -> ! {
    process::own_process_group();
    process::set_name(GUARDIAN_NAME);
    let Ok(signals) = SignalSet::block(&GUARDIAN_SIGNALS) else {
        process::exit_now(1);
    };
    if process::become_subreaper().is_err() {
        process::exit_now(1);
    }
    let report = |words: [i32; 3]| {
        let mut bytes = [0u8; REPORT_BYTES];
        for (i, w) in words.iter().enumerate() {
            bytes[i * 4..i * 4 + 4].copy_from_slice(&w.to_ne_bytes());
        }
        // After the recorder's death this fails (EPIPE; SIGPIPE is ignored): nobody to tell.
        let _ = (&reports).write_all(&bytes);
    };

    let mut byte = [0u8; 1];
    if !matches!(requests.read(&mut byte), Ok(1) if byte[0] == REQ_SPAWN) {
        process::exit_now(0); // the recorder gave up (or died) before starting the command
    }
    // The namespace is the guardian's own, entered before the command is forked, not by the
    // command's child between fork and exec: the child then runs none of memtrack's code before
    // its exec, whose pages (a copy of the guardian's) would count as the command's resident
    // memory from its first moment. Only the command's tree runs in it; the recorder does not.
    if let Some(m) = plan.mounts.as_ref().filter(|m| !m.is_empty()) {
        if let Err((_, errno)) = m.enter() {
            report([REP_SPAWN_FAILED, errno, SPAWN_FAILED_NAMESPACE]);
            process::exit_now(0);
        }
    }
    let spawned = spawn::command(
        plan.argv,
        plan.env,
        plan.identity,
        plan.terminal.map(Terminal::raw_fd),
    )
    .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
    .and_then(|mut cmd| process::with_unblocked(&GUARDIAN_SIGNALS, || cmd.spawn()).0);
    let root = match spawned {
        Ok(child) => child.id() as i32,
        Err(e) => {
            report([REP_SPAWN_FAILED, e.raw_os_error().unwrap_or(0), 0]);
            process::exit_now(0);
        }
    };
    report([REP_SPAWNED, root, 0]);
    // The command has the caller's stdin and stdout; we need neither. Stderr stays for the one
    // line said if the recorder dies.
    process::null_stdio(&[0, 1]);

    let Ok(waiter) = Waiter::new() else {
        process::exit_now(1);
    };
    const WAKE_REQUEST: u32 = 0;
    const WAKE_SIGNAL: u32 = 1;
    let _ = waiter.watch(requests.as_fd(), WAKE_REQUEST, Trigger::Readable);
    let _ = waiter.watch(signals.fd(), WAKE_SIGNAL, Trigger::Readable);
    let mut root_done = false;
    loop {
        loop {
            match process::reap_one() {
                Reaped::Child { pid, status } if pid == root => {
                    report([REP_EXITED, pid, status]);
                    root_done = true;
                }
                Reaped::Child { .. } => {}
                Reaped::Stopped { pid, signal } if pid == root => {
                    report([REP_STOPPED, pid, signal])
                }
                Reaped::Stopped { .. } => {}
                Reaped::Running => break,
                Reaped::NoChildren => {
                    report([REP_NO_CHILDREN, 0, 0]);
                    process::exit_now(0);
                }
            }
        }
        let ready = waiter.wait(Duration::from_secs(1));
        if ready & (1 << WAKE_SIGNAL) != 0 {
            while signals.take().is_some() {}
        }
        if ready & (1 << WAKE_REQUEST) != 0 {
            match requests.read(&mut byte) {
                Ok(1) if byte[0] == REQ_DETACHED => {
                    after_recorder(recorder, false, root, root_done)
                }
                Ok(1) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                _ => after_recorder(recorder, true, root, root_done),
            }
        }
    }
}

/// The recorder detached its probes (`died` false) or is gone: continue every process of the
/// tree the kernel side stopped, wait for the command if it still runs, and exit.
fn after_recorder(recorder: i32, died: bool, root: i32, root_done: bool) -> ! {
    if died {
        // The pipe closes as the recorder exits; its probes are gone once it has (exit
        // releases every file before the parent is told, and then our parent changes).
        let deadline = Instant::now() + EXIT_CONFIRM;
        while process::parent_pid() == recorder && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    if !died {
        // memtrack has said all it had to; a caller reading its stderr to the end must not
        // wait for us.
        process::null_stdio(&[2]);
    }
    let continued = continue_stopped(process::getpid() as i32);
    if died && (!root_done || continued > 0) {
        eprintln!(
            "memtrack: the recorder ended before the command (killed?); {continued} stopped \
             process{} continued; the command runs on, unrecorded",
            if continued == 1 { "" } else { "es" }
        );
    }
    process::null_stdio(&[2]);
    if !root_done {
        loop {
            match process::reap_wait() {
                Reaped::Child { pid, .. } if pid == root => break,
                Reaped::NoChildren => break,
                _ => {}
            }
        }
    }
    process::exit_now(0)
}

/// Send SIGCONT to every descendant of `me` that is stopped or has a SIGSTOP pending, pass
/// after pass for at least [`SETTLE`], until two passes in a row find none. Returns how many
/// processes were continued.
fn continue_stopped(me: i32) -> usize {
    let start = Instant::now();
    let mut continued = HashSet::new();
    let mut clean_passes = 0;
    loop {
        let mut found = 0;
        for p in descendants(me) {
            if p.state == 'T' || stop_pending(p.pid) {
                process::kill(p.pid, libc::SIGCONT);
                continued.insert(p.pid);
                found += 1;
            }
        }
        clean_passes = if found == 0 { clean_passes + 1 } else { 0 };
        if clean_passes >= 2 && start.elapsed() >= SETTLE {
            return continued.len();
        }
        std::thread::sleep(PASS_INTERVAL);
    }
}

/// Whether process `pid` has a SIGSTOP pending (shared or of its main thread): sent, not yet
/// acted on. SIGCONT discards it.
fn stop_pending(pid: i32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let bit = 1u64 << (libc::SIGSTOP - 1);
    status
        .lines()
        .filter_map(|l| {
            l.strip_prefix("ShdPnd:")
                .or_else(|| l.strip_prefix("SigPnd:"))
        })
        .filter_map(|v| u64::from_str_radix(v.trim(), 16).ok())
        .any(|mask| mask & bit != 0)
}

/// A process as /proc/PID/stat shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ProcStat {
    pid: i32,
    name: String,
    state: char,
    ppid: i32,
}

/// Parse one /proc/PID/stat line: `pid (comm) state ppid ...`, where comm may hold spaces and
/// parentheses (the last `)` ends it).
fn parse_stat(line: &str) -> Option<ProcStat> {
    let open = line.find('(')?;
    let close = line.rfind(')')?;
    let pid = line[..open].trim().parse().ok()?;
    let name = line.get(open + 1..close)?.to_string();
    let mut rest = line.get(close + 1..)?.split_whitespace();
    let state = rest.next()?.chars().next()?;
    let ppid = rest.next()?.parse().ok()?;
    Some(ProcStat {
        pid,
        name,
        state,
        ppid,
    })
}

/// Every descendant of `ancestor`, from one walk of /proc.
fn descendants(ancestor: i32) -> Vec<ProcStat> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut children: HashMap<i32, Vec<ProcStat>> = HashMap::new();
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        if let Some(p) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| parse_stat(&s))
        {
            children.entry(p.ppid).or_default().push(p);
        }
    }
    let mut out = Vec::new();
    let mut queue = vec![ancestor];
    while let Some(parent) = queue.pop() {
        for p in children.remove(&parent).unwrap_or_default() {
            queue.push(p.pid);
            out.push(p);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_names() {
        let p = parse_stat("123 (a b) c)) T 45 123 0 0").unwrap();
        assert_eq!(
            p,
            ProcStat {
                pid: 123,
                name: "a b) c)".into(),
                state: 'T',
                ppid: 45
            }
        );
        assert!(parse_stat("garbage").is_none());
        assert!(parse_stat("1 (x)").is_none());
    }

    #[test]
    fn our_own_children_are_our_descendants() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let me = std::process::id() as i32;
        let found = descendants(me);
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            found
                .iter()
                .any(|p| p.pid == child.id() as i32 && p.name == "sleep"),
            "{found:?}"
        );
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("2s"), Some(Duration::from_secs(2)));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("1m"), Some(Duration::from_secs(60)));
        assert_eq!(parse_duration("0"), Some(Duration::ZERO));
        assert_eq!(parse_duration("-1s"), None);
        assert_eq!(parse_duration("2 weeks"), None);
        assert_eq!(parse_duration(""), None);
    }
}
