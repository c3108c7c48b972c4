//! The harness every integration test shares: build the C fixtures of `testdata/`, run the real
//! `memtrack` binary ([`run`], [`record`]), and read the recording back through the library. On
//! failure it prints the command, its status, stdout and stderr, so a stranger can debug a red
//! run. What the tests take from `src/report` is re-exported here, so a move there is fixed once.
// Each test binary uses a part of the harness: the rest is not dead, only unused there.
#![allow(dead_code, unused_imports)]

use std::collections::HashSet;
use std::ffi::OsStr;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use memtrack::format::{AllocFunc, Coverage, Event, EventKind, Exec, Header, ReadEnd, Reader};

// What the tests take from `src/report`, named once: a move there (issue 14 splits the
// accounting into parts) is then fixed in this one place.
pub use memtrack::analyze::{analyze, Accounting};
pub use memtrack::model::metrics::{BenchmarkMetrics, Blocks};
pub use memtrack::model::metrics::{MemberResident, ProcessMetrics, Report};

/// The memtrack binary under test.
pub fn memtrack() -> &'static str {
    env!("CARGO_BIN_EXE_memtrack")
}

/// A scratch directory for this test binary.
pub fn scratch_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("memtrack-tests");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The path `name` in the scratch directory, with whatever an earlier run left there removed.
pub fn scratch_file(name: impl AsRef<Path>) -> PathBuf {
    let path = scratch_dir().join(name);
    let _ = std::fs::remove_file(&path);
    path
}

/// Whether this machine lets us record (root or the BPF capabilities, and BTF). When it does
/// not, the test says why and returns early; under CI it fails instead, since CI machines can.
pub fn can_record(test: &str) -> bool {
    let why = if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        Some("the kernel exposes no BTF")
    } else if !memtrack::preflight::missing_capabilities().is_empty() {
        Some("not running as root (recording needs CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN)")
    } else {
        None
    };
    match why {
        None => true,
        Some(why) if std::env::var_os("CI").is_some() => {
            panic!("{test}: cannot record here: {why}; CI machines must be able to")
        }
        Some(why) => {
            eprintln!("skipped {test}: {why}");
            false
        }
    }
}

/// Whether the tests run as root (effective uid 0).
pub fn is_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1).map(|e| e == "0"))
        .unwrap_or(false)
}

/// Say why `test` skips; under CI fail instead, since CI machines install and allow
/// everything (scripts/setup.sh).
pub fn skip(test: &str, why: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("{test}: {why}; CI machines must have it (scripts/setup.sh)");
    }
    eprintln!("skipped {test}: {why}");
}

/// The static binary scripts/test.sh builds with scripts/build-static.sh and names in
/// MEMTRACK_STATIC_BIN: what ships, optimized. None, after saying why (or failing under CI),
/// when the variable is unset or names no file.
pub fn static_memtrack(test: &str) -> Option<PathBuf> {
    match std::env::var_os("MEMTRACK_STATIC_BIN") {
        Some(p) if Path::new(&p).is_file() => Some(PathBuf::from(p)),
        Some(p) => {
            skip(test, &format!("MEMTRACK_STATIC_BIN={p:?} is not a file"));
            None
        }
        None => {
            skip(
                test,
                "MEMTRACK_STATIC_BIN is not set to the static memtrack (scripts/test.sh builds \
                 it with scripts/build-static.sh and sets it)",
            );
            None
        }
    }
}

static BUILD_LOCK: Mutex<()> = Mutex::new(());

/// Compile `testdata/NAME.c` (once per test binary run) and return the executable's path.
/// NAME may name a subdirectory (`rss/anon`); the source's directory is on the include path.
/// A fixture is rebuilt when it, `testdata/fixture.h`, `testdata/rss/status.h`, the headers of
/// `testdata/stacks/` or `include/memtrack_ctl.h` changes.
pub fn fixture(name: &str) -> PathBuf {
    build_fixture(&format!("{name}.c"), &name.replace('/', "_"), &[])
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Compile `testdata/SRC` (C, or C++ when it ends in `.cpp`) into the executable `OUT` of the
/// fixtures directory, with `flags` after the source (defines, `-static`, libraries), once per
/// test binary run unless the source changed. An error says why the build failed (a missing
/// library or static archive, typically), for the test to skip or fail on.
pub fn build_fixture(src: &str, out: &str, flags: &[&str]) -> Result<PathBuf, String> {
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(src);
    let dir = scratch_dir().join("fixtures");
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join(out);
    let stamp = dir.join(format!("{out}.flags"));
    let wanted_flags = flags.join(" ");
    let fresh = |exe: &Path| -> bool {
        let (Ok(e), Ok(s)) = (exe.metadata(), src.metadata()) else {
            return false;
        };
        if std::fs::read_to_string(&stamp).ok().as_deref() != Some(wanted_flags.as_str()) {
            return false;
        }
        let headers = [
            "testdata/fixture.h",
            "testdata/rss/status.h",
            "testdata/stacks/stacks.h",
            "testdata/stacks/chainlib.h",
            "include/memtrack_ctl.h",
        ]
        .map(|h| Path::new(env!("CARGO_MANIFEST_DIR")).join(h));
        let newest_src = std::iter::once(s.modified().ok())
            .chain(
                headers
                    .iter()
                    .map(|h| h.metadata().and_then(|m| m.modified()).ok()),
            )
            .flatten()
            .max();
        e.modified().ok() >= newest_src
    };
    if !fresh(&exe) {
        let cxx = src.extension().is_some_and(|e| e == "cpp");
        let compiler = if cxx { "c++" } else { "cc" };
        let mut build = Command::new(compiler);
        build
            .args(["-O2", "-g", "-Wall", "-Werror", "-pthread", "-o"])
            .arg(&exe)
            .arg("-I")
            .arg(src.parent().unwrap())
            .arg(&src)
            .args(flags);
        run_build(
            build,
            &format!("{} with {compiler} {wanted_flags}", src.display()),
        )?;
        std::fs::write(&stamp, &wanted_flags).unwrap();
    }
    Ok(exe)
}

/// Build the cargo project `testdata/PROJECT` (a workspace of its own, with crates from the
/// registry) with `cargo build --bins`, optimized with `release`, into a target directory of the
/// test run; its binaries' directory, or why the build failed (no registry, no C compiler).
pub fn cargo_fixture(project: &str, release: bool) -> Result<PathBuf, String> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(project)
        .join("Cargo.toml");
    let target = scratch_dir().join(format!("{project}-target"));
    let mut build = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    build
        .args(["build", "--quiet", "--bins", "--manifest-path"])
        .arg(&manifest)
        .args(release.then_some("--release"))
        .env("CARGO_TARGET_DIR", &target);
    run_build(
        build,
        &format!(
            "{} (it needs its crates from the registry)",
            manifest.display()
        ),
    )?;
    Ok(target.join(if release { "release" } else { "debug" }))
}

/// Runs a fixture's build; `Err` says why it failed (the tool missing, or what it printed),
/// for the test to skip or fail on. `what` names the build in that message.
pub fn run_build(mut build: Command, what: &str) -> Result<(), String> {
    let tool = build.get_program().to_string_lossy().into_owned();
    let out = build
        .output()
        .map_err(|e| format!("cannot run {tool} (scripts/setup.sh installs it): {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "building {what} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// `thing`, or, when it is an error (a library or tool this machine lacks), `None` after
/// saying why `test` skips; under CI it fails instead, since CI installs everything
/// (scripts/setup.sh).
pub fn require<T>(test: &str, thing: Result<T, String>) -> Option<T> {
    thing.map_err(|why| skip(test, &why)).ok()
}

/// [`build_fixture`], or `None` after saying why `test` skips (see [`require`]).
pub fn require_fixture(test: &str, src: &str, out: &str, flags: &[&str]) -> Option<PathBuf> {
    require(test, build_fixture(src, out, flags))
}

/// Whether script(1) can give a command a terminal here, or why not.
pub fn script_works() -> Result<(), String> {
    let ok = Command::new("script")
        .args(["-q", "-e", "-c", "true", "/dev/null"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        Ok(())
    } else {
        Err("script(1) cannot open a pseudo-terminal here (bsdutils)".to_string())
    }
}

/// The path of the shared library `name` (e.g. `libjemalloc.so.2`) in the system's library
/// directories.
pub fn system_library(name: &str) -> Result<PathBuf, String> {
    [
        "/usr/lib/x86_64-linux-gnu",
        "/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
    ]
    .iter()
    .map(|d| Path::new(d).join(name))
    .find(|p| p.exists())
    .ok_or_else(|| format!("{name} is not installed (scripts/setup.sh installs it)"))
}

/// A finished run of a command (memtrack itself, or a tool a test needs): what it said and how
/// it ended, with the command line for the failure message.
pub struct Run {
    pub command: String,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// What `output` of `command` said, as text.
    pub fn new(command: String, output: Output) -> Run {
        Run {
            command,
            status: output.status,
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// The exit code, or -1 when a signal ended the command.
    pub fn code(&self) -> i32 {
        self.status.code().unwrap_or(-1)
    }

    /// Everything a failure message needs.
    pub fn describe(&self) -> String {
        format!(
            "command: {}\nstatus: {}\nstdout:\n{}\nstderr:\n{}",
            self.command, self.status, self.stdout, self.stderr
        )
    }

    /// This run, after asserting that it exited with `code` (printing the run otherwise).
    #[track_caller]
    pub fn expect_code(self, code: i32) -> Run {
        assert_eq!(self.code(), code, "exit code\n{}", self.describe());
        self
    }

    /// This run, after asserting that its stderr contains `want`.
    #[track_caller]
    pub fn expect_stderr(self, want: &str) -> Run {
        assert!(
            self.stderr.contains(want),
            "{want:?} missing\n{}",
            self.describe()
        );
        self
    }

    /// This run, after asserting that it failed with `code` and said so in one line of stderr
    /// that contains each of `want`.
    #[track_caller]
    pub fn expect_failure(self, code: i32, want: &[&str]) -> Run {
        let run = self.expect_code(code);
        assert_eq!(
            run.stderr.lines().count(),
            1,
            "one line on stderr\n{}",
            run.describe()
        );
        for w in want {
            assert!(run.stderr.contains(w), "{w:?} missing\n{}", run.describe());
        }
        run
    }
}

/// Run the memtrack binary with `args` and wait for it.
pub fn run<S: AsRef<OsStr>>(args: &[S]) -> Run {
    run_command(Command::new(memtrack()).args(args))
}

/// Run `cmd` (its stdout and stderr captured) and wait for it.
pub fn run_command(cmd: &mut Command) -> Run {
    let command = format!("{cmd:?}");
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("run {command}: {e}"));
    Run::new(command, output)
}

/// `memtrack report --format json PATH [extra...]`, asserted to succeed, as JSON.
#[track_caller]
pub fn report_json(path: impl AsRef<OsStr>, extra: &[&str]) -> serde_json::Value {
    let mut cmd = Command::new(memtrack());
    cmd.arg("report")
        .arg(path)
        .args(["--format", "json"])
        .args(extra);
    let run = run_command(&mut cmd).expect_code(0);
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e})\n{}", run.describe()))
}

/// `memtrack report PATH ARGS...` with `COLUMNS` set to `columns` (or unset), asserted to
/// succeed: its standard output.
#[track_caller]
pub fn report_text(path: impl AsRef<OsStr>, args: &[&str], columns: Option<&str>) -> String {
    let mut cmd = Command::new(memtrack());
    cmd.arg("report").arg(path).args(args);
    match columns {
        Some(c) => cmd.env("COLUMNS", c),
        None => cmd.env_remove("COLUMNS"),
    };
    run_command(&mut cmd).expect_code(0).stdout
}

/// Everything left to read from a child's captured stdout or stderr.
pub fn read_pipe(pipe: Option<impl Read>) -> String {
    let mut text = String::new();
    pipe.expect("the pipe was captured")
        .read_to_string(&mut text)
        .expect("read the child's output");
    text
}

/// A finished `memtrack record` run and what it wrote.
pub struct Recording {
    pub run: Run,
    pub path: PathBuf,
    pub header: Header,
    pub events: Vec<Event>,
    pub end: ReadEnd,
}

impl Recording {
    /// The recorder's exit code.
    pub fn code(&self) -> i32 {
        self.run.code()
    }

    /// Everything a failure message needs.
    pub fn describe(&self) -> String {
        format!("{}\nread end: {:?}", self.run.describe(), self.end)
    }

    /// Successful allocations (Alloc, Realloc) of exactly `size` bytes.
    pub fn allocs_of_size(&self, size: u64) -> Vec<&Event> {
        self.events
            .iter()
            .filter(|e| match e.kind {
                EventKind::Alloc { size: s, .. } | EventKind::Realloc { size: s, .. } => s == size,
                _ => false,
            })
            .collect()
    }

    /// Frees (Free events, and realloc(p, 0)) of any address in `addrs` by process `pid`.
    pub fn frees_in(&self, pid: u32, addrs: &HashSet<u64>) -> usize {
        self.events
            .iter()
            .filter(|e| {
                e.pid == pid
                    && matches!(e.kind, EventKind::Free { addr, .. } if addrs.contains(&addr))
            })
            .count()
    }

    /// Whether the block `alloc` (an Alloc or Realloc event of this recording) is released by
    /// its process before that address is handed out again.
    pub fn is_freed(&self, alloc: &Event) -> bool {
        let addr = match alloc.kind {
            EventKind::Alloc { addr, .. } | EventKind::Realloc { addr, .. } => addr,
            _ => return false,
        };
        let Some(at) = self.events.iter().position(|e| std::ptr::eq(e, alloc)) else {
            return false;
        };
        for e in self.events[at + 1..].iter().filter(|e| e.pid == alloc.pid) {
            match e.kind {
                EventKind::Free { addr: a, .. } | EventKind::Realloc { old_addr: a, .. }
                    if a == addr =>
                {
                    return true
                }
                EventKind::Alloc { addr: a, .. } if a == addr => return false,
                _ => {}
            }
        }
        false
    }

    /// Failed allocation calls of `func`.
    pub fn failures(&self, func: AllocFunc) -> Vec<u64> {
        self.events
            .iter()
            .filter_map(|e| match e.kind {
                EventKind::AllocFailed { func: f, size } if f == func => Some(size),
                _ => None,
            })
            .collect()
    }

    /// The pids of processes created by Fork events.
    pub fn forks(&self) -> Vec<(u32, u32)> {
        self.events
            .iter()
            .filter_map(|e| match e.kind {
                EventKind::Fork { child } => Some((e.pid, child)),
                _ => None,
            })
            .collect()
    }

    /// Exit events as (pid, status).
    pub fn exits(&self) -> Vec<(u32, i32)> {
        exits(&self.events)
    }

    /// Exec events as (pid, filename, argv).
    pub fn execs(&self) -> Vec<(u32, String, Vec<String>)> {
        self.events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::Exec(Exec { filename, argv }) => {
                    Some((e.pid, filename.clone(), argv.clone()))
                }
                _ => None,
            })
            .collect()
    }

    /// Coverage records as (pid, path, allocator, probes).
    pub fn coverage(&self) -> Vec<(u32, String, String, u32)> {
        self.events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::Coverage(Coverage {
                    path,
                    allocator,
                    probes,
                }) => Some((e.pid, path.clone(), allocator.clone(), *probes)),
                _ => None,
            })
            .collect()
    }

    /// How often each block of `pid` is released: for every address, whether each allocation
    /// of it is followed by at most one free before the address is allocated again. Returns
    /// the number of releases of an address that was not live (a double count), and of
    /// releases of addresses never allocated in the recording (unknown, allowed).
    pub fn release_balance(&self, pid: u32) -> (usize, usize) {
        let mut live: HashSet<u64> = HashSet::new();
        let mut known: HashSet<u64> = HashSet::new();
        let (mut double, mut unknown) = (0, 0);
        let mut release = |addr: u64, live: &mut HashSet<u64>, known: &HashSet<u64>| {
            if !live.remove(&addr) {
                if known.contains(&addr) {
                    double += 1;
                } else {
                    unknown += 1;
                }
            }
        };
        for e in self.events.iter().filter(|e| e.pid == pid) {
            match e.kind {
                EventKind::Alloc { addr, .. } => {
                    live.insert(addr);
                    known.insert(addr);
                }
                EventKind::Realloc { old_addr, addr, .. } => {
                    release(old_addr, &mut live, &known);
                    live.insert(addr);
                    known.insert(addr);
                }
                EventKind::Free { addr, .. } => release(addr, &mut live, &known),
                EventKind::Exec(_) => {
                    live.clear();
                    known.clear();
                }
                _ => {}
            }
        }
        (double, unknown)
    }

    /// Total of Lost events' last totals, and the trailer's count.
    pub fn lost(&self) -> u64 {
        match &self.end {
            ReadEnd::Complete(t) => t.lost.iter().map(|l| l.count).sum(),
            ReadEnd::Damaged { .. } => u64::MAX,
        }
    }
}

/// Exit events of `events` as (pid, status).
pub fn exits(events: &[Event]) -> Vec<(u32, i32)> {
    events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Exit { status } => Some((e.pid, status)),
            _ => None,
        })
        .collect()
}

/// The sizes of the Alloc events of `events`, in order.
pub fn alloc_sizes(events: &[Event]) -> Vec<u64> {
    events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Alloc { size, .. } => Some(size),
            _ => None,
        })
        .collect()
}

/// Read a recording completely: header, every readable event, and how reading ended.
pub fn read_recording(path: &Path) -> (Header, Vec<Event>, ReadEnd) {
    read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn read(path: &Path) -> Result<(Header, Vec<Event>, ReadEnd), String> {
    let mut reader = Reader::open(path).map_err(|e| e.to_string())?;
    let events: Vec<Event> = reader.by_ref().collect();
    let end = reader.end().cloned().expect("reader says how it ended");
    Ok((reader.header().clone(), events, end))
}

/// Run `shell_command` on a fresh pseudo-terminal with script(1); `input` is typed into the
/// terminal once `ready` appears in its output (at once when `ready` is empty). Returns the
/// exit code and everything the terminal showed.
pub fn on_terminal(shell_command: &str, ready: &str, input: &[u8]) -> (i32, String) {
    let mut child = Command::new("script")
        .args(["-q", "-e", "-f", "-c", shell_command, "/dev/null"])
        .env("SHELL", "/bin/sh")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run script(1)");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ready.is_empty()
        && !String::from_utf8_lossy(&seen).contains(ready)
        && Instant::now() < deadline
    {
        if let Ok(chunk) = rx.recv_timeout(Duration::from_millis(50)) {
            seen.extend(chunk);
        }
    }
    stdin.write_all(input).unwrap();
    stdin.flush().unwrap();
    let status = wait_for(&mut child, Duration::from_secs(30));
    drop(stdin);
    while let Ok(chunk) = rx.recv_timeout(Duration::from_millis(500)) {
        seen.extend(chunk);
    }
    let seen = String::from_utf8_lossy(&seen).into_owned();
    let code = status.and_then(|s| s.code()).unwrap_or_else(|| {
        panic!("{shell_command}: still running on the terminal after 30 s; it showed:\n{seen}")
    });
    (code, seen)
}

/// Wait up to `limit` for `child`; kill it and return `None` if it is still running then.
pub fn wait_for(child: &mut std::process::Child, limit: Duration) -> Option<ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(status) = child.try_wait().expect("wait for child") {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// The first line (with its newline) a child writes on its captured standard output, which
/// is taken from it: the line a fixture says when it has reached the point a test waits for.
pub fn first_line(child: &mut std::process::Child) -> String {
    use std::io::BufRead;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout was captured"))
        .read_line(&mut line)
        .unwrap();
    line
}

/// Waits until the file a running recorder writes at `path` holds an event `wanted` takes
/// (`what` names it), reading past the recorder's lock (`Reader::open` says to wait for it):
/// chunks are flushed at least every second, however long a loaded machine takes to get
/// there. Fails after 60 s.
pub fn wait_for_event(path: &Path, what: &str, wanted: impl Fn(&EventKind) -> bool) {
    let flushed = || {
        let file = std::fs::File::open(path).map(std::io::BufReader::new);
        file.ok()
            .and_then(|f| Reader::new(f).ok())
            .is_some_and(|mut reader| reader.by_ref().any(|e| wanted(&e.kind)))
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !flushed() {
        assert!(
            Instant::now() < deadline,
            "{what} was not flushed to {} in 60 s",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Send `signal` (a name such as "TERM") to `pid`, or to process group `-pid`, with kill(1).
pub fn send_signal(signal: &str, pid: i64) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg("--")
        .arg(pid.to_string())
        .status()
        .expect("run kill(1)");
    assert!(status.success(), "kill -{signal} -- {pid} failed");
}

/// `memtrack record -o PATH [extra...] -- <command...>`, not yet run.
pub fn record_command(path: &Path, extra: &[&str], command: &[&str]) -> Command {
    let mut cmd = Command::new(memtrack());
    cmd.arg("record")
        .arg("-o")
        .arg(path)
        .args(extra)
        .arg("--")
        .args(command);
    cmd
}

/// Run `memtrack record -o <scratch>/<name>.mt [extra...] -- <command...>` and read the file.
pub fn record(name: &str, extra: &[&str], command: &[&str]) -> Recording {
    record_with_env(name, extra, command, &[])
}

/// Waits until no `memtrack-detach` process is left: a recorder that has exited leaves one
/// holding its links (its uprobes too) while the kernel's grace periods pass
/// (docs/PERFORMANCE.md, "Fixed cost"), and a debugger, Valgrind or a process that checks its
/// own code for probes must not run beside them. A zombie holds none (its files closed before
/// it exited) and may wait long for its reaper: this machine's init takes some 1.4 s.
pub fn wait_for_detaching_recorders() -> Result<(), String> {
    let detaching = || {
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
            .any(|stat| {
                proc_state(&stat)
                    .is_some_and(|(name, state)| name == "memtrack-detach" && state != 'Z')
            })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while detaching() {
        if std::time::Instant::now() > deadline {
            return Err(
                "a memtrack-detach process is still holding a recorder's uprobes after \
                        30 s: gdb would not see libraries load beside them"
                    .to_string(),
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// The name and state letter of a `/proc/PID/stat` line ("pid (comm) state ..."). The name
/// ends at the last ") ", not the first: a comm may itself hold ") " or spaces, and nothing
/// after the state letter does.
pub fn proc_state(stat: &str) -> Option<(&str, char)> {
    let (_, rest) = stat.split_once(" (")?;
    let (name, rest) = rest.rsplit_once(") ")?;
    Some((name, rest.chars().next()?))
}

/// The recording of `testdata/example.c` with call stacks, made once per test binary (under
/// `name`) and shared by its tests; None, after saying why, when this machine cannot record.
pub fn example_with_stacks(test: &str, name: &str) -> Option<&'static Path> {
    static PATH: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    if !can_record(test) {
        return None;
    }
    PATH.get_or_init(|| {
        let r = record_fixture(name, &["--stacks"], "example", &[]);
        assert_eq!(r.run.code(), 0, "{}", r.run.describe());
        Some(r.path)
    })
    .as_deref()
}

/// Build the fixture `testdata/FIXTURE.c` and [`record`] it with `args` under `name`.
pub fn record_fixture(name: &str, extra: &[&str], fixture_name: &str, args: &[&str]) -> Recording {
    let exe = fixture(fixture_name);
    let mut command = vec![exe.to_str().unwrap()];
    command.extend_from_slice(args);
    record(name, extra, &command)
}

/// As [`record`], with extra environment variables for memtrack and so for the command.
pub fn record_with_env(
    name: &str,
    extra: &[&str],
    command: &[&str],
    env: &[(&str, &std::ffi::OsStr)],
) -> Recording {
    let path = scratch_file(format!("{name}.mt"));
    let mut cmd = record_command(&path, extra, command);
    cmd.envs(env.iter().copied());
    let run = run_command(&mut cmd);
    recording(run, path)
}

/// The recording `run` wrote at `path`, read back through the library.
pub fn recording(run: Run, path: PathBuf) -> Recording {
    let (header, events, end) = read(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}\n{}", path.display(), run.describe()));
    Recording {
        run,
        path,
        header,
        events,
        end,
    }
}

/// Return from the test `$test` (a name) when this machine cannot record: [`can_record`] says
/// why, or fails the test under CI.
#[macro_export]
macro_rules! skip_unless_recording {
    ($test:expr) => {
        if !$crate::common::can_record($test) {
            return;
        }
    };
}

/// Assert `cond`, printing the recording's run on failure.
#[macro_export]
macro_rules! check {
    ($rec:expr, $cond:expr, $($msg:tt)+) => {
        assert!($cond, "{}\n{}", format!($($msg)+), $rec.describe())
    };
}

/// The value of `metric` in the JSON list of metrics `memtrack diff` writes: (base, new, change).
pub fn diff_metric(list: &serde_json::Value, name: &str) -> (u64, u64, i64) {
    let m = list
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == name)
        .unwrap_or_else(|| panic!("no {name} in {list}"));
    (
        m["base"].as_u64().unwrap(),
        m["new"].as_u64().unwrap(),
        m["change"].as_i64().unwrap(),
    )
}
