//! The harness every integration test shares: build the C fixtures of `testdata/`, run the real
//! `memtrack` binary, and read the recording back through the library. On failure it prints the
//! command, its status, stdout and stderr, so a stranger can debug a red run.
#![allow(dead_code)]

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use memtrack::format::{AllocFunc, Event, EventKind, Header, ReadEnd, Reader};

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

static BUILD_LOCK: Mutex<()> = Mutex::new(());

/// Compile `testdata/NAME.c` (once per test binary run) and return the executable's path.
/// NAME may name a subdirectory (`rss/anon`); the source's directory is on the include path.
/// A fixture is rebuilt when it, `testdata/fixture.h`, `testdata/rss/status.h` or
/// `include/memtrack_ctl.h` changes.
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
        let out = Command::new(compiler)
            .args(["-O2", "-g", "-Wall", "-Werror", "-pthread", "-o"])
            .arg(&exe)
            .arg("-I")
            .arg(src.parent().unwrap())
            .arg(&src)
            .args(flags)
            .output()
            .unwrap_or_else(|e| panic!("run {compiler} (scripts/setup.sh installs it): {e}"));
        if !out.status.success() {
            return Err(format!(
                "building {} with {compiler} {wanted_flags} failed:\n{}",
                src.display(),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        std::fs::write(&stamp, &wanted_flags).unwrap();
    }
    Ok(exe)
}

/// `thing`, or, when it is an error (a library or tool this machine lacks), `None` after
/// saying why `test` skips; under CI it fails instead, since CI installs everything
/// (scripts/setup.sh).
pub fn require<T>(test: &str, thing: Result<T, String>) -> Option<T> {
    match thing {
        Ok(t) => Some(t),
        Err(why) if std::env::var_os("CI").is_some() => {
            panic!("{test}: {why}; CI machines must have it (scripts/setup.sh)")
        }
        Err(why) => {
            eprintln!("skipped {test}: {why}");
            None
        }
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

/// A finished `memtrack record` run and what it wrote.
pub struct Recording {
    pub command: String,
    pub output: Output,
    pub path: PathBuf,
    pub header: Header,
    pub events: Vec<Event>,
    pub end: ReadEnd,
}

impl Recording {
    /// The recorder's exit code.
    pub fn code(&self) -> i32 {
        self.output.status.code().unwrap_or(-1)
    }

    /// Everything a failure message needs.
    pub fn describe(&self) -> String {
        format!(
            "command: {}\nstatus: {}\nstdout:\n{}\nstderr:\n{}\nread end: {:?}",
            self.command,
            self.output.status,
            String::from_utf8_lossy(&self.output.stdout),
            String::from_utf8_lossy(&self.output.stderr),
            self.end
        )
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
        self.events
            .iter()
            .filter_map(|e| match e.kind {
                EventKind::Exit { status } => Some((e.pid, status)),
                _ => None,
            })
            .collect()
    }

    /// Exec events as (pid, filename, argv).
    pub fn execs(&self) -> Vec<(u32, String, Vec<String>)> {
        self.events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::Exec { filename, argv } => Some((e.pid, filename.clone(), argv.clone())),
                _ => None,
            })
            .collect()
    }

    /// Coverage records as (pid, path, allocator, probes).
    pub fn coverage(&self) -> Vec<(u32, String, String, u32)> {
        self.events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::Coverage {
                    path,
                    allocator,
                    probes,
                } => Some((e.pid, path.clone(), allocator.clone(), *probes)),
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
                EventKind::Exec { .. } => {
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

/// Read a recording completely: header, every readable event, and how reading ended.
pub fn read_recording(path: &Path) -> (Header, Vec<Event>, ReadEnd) {
    let mut reader =
        Reader::open(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let events: Vec<Event> = reader.by_ref().collect();
    let end = reader.end().cloned().expect("reader says how it ended");
    (reader.header().clone(), events, end)
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

/// As [`record`], with extra environment variables for memtrack and so for the command.
pub fn record_with_env(
    name: &str,
    extra: &[&str],
    command: &[&str],
    env: &[(&str, &std::ffi::OsStr)],
) -> Recording {
    let path = scratch_dir().join(format!("{name}.mt"));
    let _ = std::fs::remove_file(&path);
    let mut cmd = record_command(&path, extra, command);
    cmd.envs(env.iter().copied());
    let command_line = format!("{cmd:?}");
    let output = cmd.output().expect("run memtrack");
    let (header, events, end) = match Reader::open(&path) {
        Ok(mut reader) => {
            let events: Vec<Event> = reader.by_ref().collect();
            let end = reader.end().cloned().expect("reader says how it ended");
            (reader.header().clone(), events, end)
        }
        Err(e) => panic!(
            "cannot read {}: {e}\ncommand: {command_line}\nstatus: {}\nstderr:\n{}",
            path.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ),
    };
    Recording {
        command: command_line,
        output,
        path,
        header,
        events,
        end,
    }
}

/// Assert `cond`, printing the recording's run on failure.
#[macro_export]
macro_rules! check {
    ($rec:expr, $cond:expr, $($msg:tt)+) => {
        assert!($cond, "{}\n{}", format!($($msg)+), $rec.describe())
    };
}
