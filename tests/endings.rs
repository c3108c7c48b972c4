//! How a recording ends, and what the command inherits (issue 13): the recorder's death never
//! changes what the command does, a daemon left behind does not hold memtrack, and the command
//! gets none of memtrack's privileges. Every test runs the real recorder.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

/// The Cap* lines of a `grep Cap /proc/self/status` the recorded command printed, as
/// (name, mask) pairs.
fn capability_lines(stdout: &str) -> Vec<(String, u64)> {
    stdout
        .lines()
        .filter_map(|l| {
            let (name, value) = l.split_once(':')?;
            let mask = u64::from_str_radix(value.trim(), 16).ok()?;
            name.starts_with("Cap").then(|| (name.to_string(), mask))
        })
        .collect()
}

/// Assert that the recorded command printed its capability sets and holds nothing in
/// CapInh, CapPrm, CapEff and CapAmb.
fn assert_no_capabilities(what: &str, run: &Run) {
    let caps = capability_lines(&run.stdout);
    assert_eq!(run.code(), 0, "{what}\n{}", run.describe());
    for set in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
        let mask = caps.iter().find(|(n, _)| n == set).map(|(_, m)| *m);
        assert_eq!(
            mask,
            Some(0),
            "{what}: {set} of the command\n{}",
            run.describe()
        );
    }
}

/// `setpriv` (util-linux), or why the test skips.
fn setpriv() -> Result<PathBuf, String> {
    ["/usr/bin/setpriv", "/bin/setpriv"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .ok_or_else(|| "setpriv is not installed (util-linux; scripts/setup.sh)".to_string())
}

/// A scratch directory anyone may write to, for a recorder that runs as `nobody`.
fn open_dir(name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch_dir().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    dir
}

/// The recorder as `nobody` with CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN as ambient
/// capabilities, the way a CI runner grants them without root: the command used to inherit all
/// three (issue 13, item 10).
#[test]
fn issue13_ambient_capabilities_do_not_reach_the_command() {
    let test = "issue13_ambient_capabilities_do_not_reach_the_command";
    if !can_record(test) || !is_root() {
        // setpriv must be root to hand the capabilities to nobody.
        return;
    }
    let Some(setpriv) = require(test, setpriv()) else {
        return;
    };
    let dir = open_dir("ambient");
    let path = dir.join("ambient.mt");
    let _ = std::fs::remove_file(&path);
    let caps = "+bpf,+perfmon,+sys_admin";
    let out = run_command(
        Command::new(&setpriv)
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
            .args(["--inh-caps", caps, "--ambient-caps", caps])
            .arg(memtrack())
            .args(["record", "-q", "-o"])
            .arg(&path)
            .args(["--", "grep", "Cap", "/proc/self/status"]),
    );
    assert_no_capabilities("memtrack as nobody with ambient capabilities", &out);
    let (header, _, _) = read_recording(&path);
    assert_eq!(header.argv, ["grep", "Cap", "/proc/self/status"]);
}

/// Root with an inheritable capability, dropping the command to another user with --user: the
/// drop cleared the permitted set but the command kept the inheritable one.
#[test]
fn issue13_user_drop_leaves_no_capabilities() {
    let test = "issue13_user_drop_leaves_no_capabilities";
    if !can_record(test) || !is_root() {
        return;
    }
    let Some(setpriv) = require(test, setpriv()) else {
        return;
    };
    let path = open_dir("user-drop").join("user.mt");
    let _ = std::fs::remove_file(&path);
    let record = ["record", "-q", "--user", "nobody", "-o"];
    let command = ["--", "grep", "Cap", "/proc/self/status"];
    let out = run_command(
        Command::new(&setpriv)
            .args(["--inh-caps", "+sys_admin"])
            .arg(memtrack())
            .args(record)
            .arg(&path)
            .args(command),
    );
    assert_no_capabilities("root with --user nobody", &out);
    // And plain root with --user, no capability games: nothing either.
    let out = run_command(
        Command::new(memtrack())
            .args(record)
            .arg(&path)
            .args(command),
    );
    assert_no_capabilities("root with --user nobody", &out);
    assert!(Path::new(&path).exists());
}

/// Processes whose state is T (stopped) and whose working directory is `dir`.
fn stopped_in(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let path = entry.path();
        if std::fs::read_link(path.join("cwd")).ok().as_deref() != Some(dir) {
            continue;
        }
        let stat = std::fs::read_to_string(path.join("stat")).unwrap_or_default();
        if common::proc_state(&stat).is_some_and(|(_, state)| state == 'T') {
            out.push(stat);
        }
    }
    out
}

/// Continue and kill what a failed run left in `dir`, so that one failure does not hang the
/// machine's other tests.
fn clean_up(dir: &Path) {
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if std::fs::read_link(entry.path().join("cwd")).ok().as_deref() == Some(dir) {
            if let Some(pid) = entry.file_name().to_str() {
                let _ = Command::new("kill").args(["-CONT", pid]).status();
                let _ = Command::new("kill").args(["-KILL", pid]).status();
            }
        }
    }
}

/// Moments to kill the recorder at, spread over the run and different on every run.
fn random_delays(n: usize, max_ms: u64) -> Vec<std::time::Duration> {
    let mut x = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            std::time::Duration::from_millis(x % max_ms)
        })
        .collect()
}

const ITERATIONS: usize = 300;

/// SIGKILL the recorder at random moments of a discovery-heavy tree (every `./tN` is a new
/// file, so every exec is stopped for discovery): the loop must run to its end, no process may
/// stay stopped, and the shell must not be hung up (it used to stay in state T forever, or,
/// in the command's own process group, die of the orphaned group's SIGHUP).
fn killed_recorder_leaves_the_tree_running(test: &str, setsid: bool) {
    skip_unless_recording!(test);
    let script = format!(
        "for i in $(seq {ITERATIONS}); do cp /bin/true t$i; ./t$i || exit 1; done; echo ok > done"
    );
    let mut command: Vec<&str> = Vec::new();
    if setsid {
        // --wait: the command lasts as long as the loop (setsid alone forks and exits at once,
        // and memtrack would stop waiting for the loop after --grace).
        command.extend(["setsid", "--wait"]);
    }
    command.extend(["sh", "-c", &script]);
    let mut landed = 0;
    for (round, delay) in random_delays(4, 800).into_iter().enumerate() {
        let dir = scratch_dir().join(format!("{test}-{round}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let dir = dir.canonicalize().unwrap();
        let mut rec = record_command(&dir.join("run.mt"), &["-q"], &command);
        rec.current_dir(&dir).stderr(std::process::Stdio::piped());
        let mut child = rec.spawn().expect("run memtrack");
        // Killed before it starts the command, memtrack never starts it: count from the first
        // iteration on.
        let start = std::time::Instant::now();
        while !dir.join("t1").exists() && start.elapsed() < std::time::Duration::from_secs(30) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        std::thread::sleep(delay);
        let killed = child.try_wait().unwrap().is_none();
        let _ = child.kill();
        let status = child.wait().unwrap();
        if killed {
            landed += 1;
            assert_eq!(status.signal(), Some(9), "{test}: {status}");
        }
        let done = dir.join("done");
        let start = std::time::Instant::now();
        while !done.exists() && start.elapsed() < std::time::Duration::from_secs(60) {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let stopped = stopped_in(&dir);
        let finished = std::fs::read_to_string(&done).unwrap_or_default();
        if finished != "ok\n" || !stopped.is_empty() {
            clean_up(&dir);
        }
        assert_eq!(
            finished, "ok\n",
            "{test}: round {round}, recorder killed after {delay:?} (status {status}): the \
             loop did not finish; stopped processes: {stopped:?}"
        );
        assert!(stopped.is_empty(), "{test}: stopped: {stopped:?}");
        let ran = (1..=ITERATIONS)
            .filter(|i| dir.join(format!("t{i}")).exists())
            .count();
        assert_eq!(
            ran, ITERATIONS,
            "{test}: round {round}: every iteration ran"
        );
    }
    assert!(landed > 0, "{test}: no kill landed while recording");
}

#[test]
fn issue13_sigkill_of_the_recorder_in_the_commands_group() {
    killed_recorder_leaves_the_tree_running(
        "issue13_sigkill_of_the_recorder_in_the_commands_group",
        false,
    );
}

#[test]
fn issue13_sigkill_of_the_recorder_with_a_setsid_command() {
    killed_recorder_leaves_the_tree_running(
        "issue13_sigkill_of_the_recorder_with_a_setsid_command",
        true,
    );
}

/// The pids a `record` run said it stopped waiting for ("... left running: PID (NAME), ...").
fn left_running(stderr: &str) -> Vec<(u32, String)> {
    let Some(line) = stderr.lines().find(|l| l.contains("it left running: ")) else {
        return Vec::new();
    };
    let list = line.split("it left running: ").nth(1).unwrap();
    let list = list.split(';').next().unwrap();
    list.split(", ")
        .filter_map(|item| {
            let (pid, name) = item.split_once(" (")?;
            Some((pid.parse().ok()?, name.trim_end_matches(')').to_string()))
        })
        .collect()
}

/// Kill the processes a test left running, by pid.
fn kill_pids(pids: &[(u32, String)]) {
    for (pid, _) in pids {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
}

/// The `exit` member of process `pid` in `memtrack report --format json`.
fn json_exit_of(path: &Path, pid: u32) -> Option<String> {
    let report = report_json(path, &[]);
    let process = report["processes"]
        .as_array()?
        .iter()
        .find(|p| p["pid"] == pid)?;
    Some(process.get("exit")?.to_string())
}

/// Record `sh -c` of a line that leaves a daemon (`sleep SECS`) behind and ends at once, as
/// sccache and Gradle start theirs. Returns the recording, how long memtrack took, and the
/// processes it said it left running, which are killed already.
fn record_leaving_a_daemon(
    name: &str,
    extra: &[&str],
    sleep_secs: u32,
) -> (Recording, std::time::Duration, Vec<(u32, String)>) {
    let line = format!("(setsid sleep {sleep_secs} <&- >/dev/null 2>&1 &); echo done");
    let start = std::time::Instant::now();
    let rec = record(name, extra, &["sh", "-c", &line]);
    let took = start.elapsed();
    let left = left_running(&rec.run.stderr);
    kill_pids(&left);
    (rec, took, left)
}

/// A daemon the command leaves behind (`(setsid sleep 60 <&- >/dev/null 2>&1 &)`, as sccache and Gradle start
/// theirs) used to hold memtrack for its whole life, deaf to SIGINT and SIGTERM.
#[test]
fn issue13_a_daemon_left_behind_does_not_hold_memtrack() {
    let test = "issue13_a_daemon_left_behind_does_not_hold_memtrack";
    skip_unless_recording!(test);
    let (rec, took, left) = record_leaving_a_daemon(test, &[], 60);
    check!(rec, rec.code() == 0, "the command's status");
    check!(
        rec,
        took < std::time::Duration::from_secs(2 + 5),
        "ended within the default 2 s grace (+5 s of slack), not after 60 s: {took:?}"
    );
    check!(
        rec,
        took >= std::time::Duration::from_secs(2),
        "waited the grace first: {took:?}"
    );
    check!(
        rec,
        left.len() == 1,
        "one process named on stderr: {left:?}"
    );
    let (daemon, name) = &left[0];
    check!(rec, name == "sleep", "the daemon is the sleep: {left:?}");
    check!(
        rec,
        rec.run.stderr.contains("after 2.0 s"),
        "says how long it waited"
    );
    check!(
        rec,
        matches!(rec.end, memtrack::format::ReadEnd::Complete(_)),
        "the file is finished"
    );
    check!(
        rec,
        rec.forks().iter().any(|&(_, child)| child == *daemon),
        "the daemon is part of the tree"
    );
    check!(
        rec,
        rec.execs()
            .iter()
            .any(|(pid, file, _)| pid == daemon && file.ends_with("sleep")),
        "its exec is recorded"
    );
    check!(
        rec,
        !rec.exits().iter().any(|&(pid, _)| pid == *daemon),
        "it did not exit while recorded"
    );
    check!(
        rec,
        rec.exits()
            .iter()
            .any(|&(pid, _)| pid == rec.header.root_pid),
        "the command did"
    );
    let exit = json_exit_of(&rec.path, *daemon);
    check!(
        rec,
        exit.as_deref() == Some("null"),
        "the report shows it running (exit null): {exit:?}"
    );
    let text = run(&["report", rec.path.to_str().unwrap()]).stdout;
    check!(
        rec,
        text.contains("still running when the recording ended"),
        "the text report says so:\n{text}"
    );
}

/// `--grace` sets the wait; `--wait-all` waits for everything; SIGTERM or SIGINT to memtrack
/// during the wait ends it at once.
#[test]
fn issue13_grace_wait_all_and_signals_end_the_wait() {
    let test = "issue13_grace_wait_all_and_signals_end_the_wait";
    skip_unless_recording!(test);
    let (rec, took, left) = record_leaving_a_daemon("grace-short", &["--grace", "300ms"], 60);
    check!(rec, rec.code() == 0, "status");
    check!(
        rec,
        took < std::time::Duration::from_millis(300 + 5000),
        "{took:?}"
    );
    check!(rec, left.len() == 1, "{left:?}");

    // --wait-all: the daemon's whole life is recorded, its exit included.
    let (rec, took, left) = record_leaving_a_daemon("wait-all", &["--wait-all"], 3);
    check!(rec, rec.code() == 0, "status");
    check!(rec, took >= std::time::Duration::from_secs(3), "{took:?}");
    check!(rec, left.is_empty(), "nobody left");
    let sleeper = rec
        .execs()
        .into_iter()
        .find(|(_, file, _)| file.ends_with("sleep"))
        .map(|(pid, _, _)| pid);
    check!(
        rec,
        sleeper.is_some_and(|pid| rec.exits().iter().any(|&(p, s)| p == pid && s == 0)),
        "the daemon's exit is recorded"
    );

    // --wait-all, then SIGTERM and SIGINT: each ends the wait, and memtrack still exits with the
    // command's status and a finished file.
    for signal in ["TERM", "INT"] {
        let path = scratch_file(format!("wait-all-{signal}.mt"));
        // The command ends once the daemon is in a session of its own (it made the mark): a
        // signal passed on to the command's group before that would end the daemon too (its
        // first allocation can hold it for the walker of sampled stacks for tens of ms).
        let mark = scratch_file(format!("wait-all-{signal}.daemon"));
        let script = format!(
            "echo $$; (setsid sh -c 'touch {m}; exec sleep 60' <&- >/dev/null 2>&1 &); \
             while [ ! -e {m} ]; do sleep 0.01; done; exit 7",
            m = mark.display()
        );
        let mut cmd = record_command(&path, &["--wait-all"], &["sh", "-c", &script]);
        cmd.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        // The signal comes once the command has ended (it said its pid, and that process is
        // gone: reaped), so it reaches the wait, not the command.
        let mut said = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut said,
        )
        .unwrap();
        let stat = format!("/proc/{}/stat", said.trim());
        let ended = std::time::Instant::now();
        while std::path::Path::new(&stat).exists() {
            assert!(
                ended.elapsed() < std::time::Duration::from_secs(60),
                "the command {said:?} did not end"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let sent = std::time::Instant::now();
        send_signal(signal, i64::from(child.id()));
        let status = wait_for(&mut child, std::time::Duration::from_secs(10));
        let err = read_pipe(child.stderr.take());
        let left = left_running(&err);
        kill_pids(&left);
        let status = status.unwrap_or_else(|| panic!("SIG{signal} did not end the wait: {err}"));
        assert!(
            sent.elapsed() < std::time::Duration::from_secs(5),
            "SIG{signal}: {:?}",
            sent.elapsed()
        );
        assert_eq!(
            status.code(),
            Some(7),
            "SIG{signal}: the command's status\n{err}"
        );
        assert_eq!(left.len(), 1, "SIG{signal}: {err}");
        let (_, _, end) = read_recording(&path);
        assert!(
            matches!(end, memtrack::format::ReadEnd::Complete(_)),
            "{end:?}"
        );
    }
}

/// On a terminal, the progress line says that memtrack waits for what the command left.
#[test]
fn issue13_progress_line_says_it_waits() {
    let test = "issue13_progress_line_says_it_waits";
    if !can_record(test) || require(test, script_works()).is_none() {
        return;
    }
    let path = scratch_dir().join("progress-waits.mt");
    // The line first shows after a second of recording: let the command live past that.
    let shell = format!(
        "{} record -o {} --grace 2s -- sh -c '(setsid sleep 60 <&- >/dev/null 2>&1 &); sleep 1.3'",
        memtrack(),
        path.display()
    );
    let (code, seen) = on_terminal(&shell, "", b"");
    kill_pids(&left_running(&seen));
    assert_eq!(code, 0, "terminal:\n{seen}");
    assert!(
        seen.contains("the command ended; waiting up to"),
        "the progress line says it waits:\n{seen}"
    );
    assert_eq!(left_running(&seen).len(), 1, "terminal:\n{seen}");
}

/// A daemon left behind that allocates without pause: memtrack still ends after the grace
/// (its last drain takes what the ring holds, not what the daemon keeps adding).
#[test]
fn issue13_a_busy_daemon_does_not_hold_the_last_drain() {
    let test = "issue13_a_busy_daemon_does_not_hold_the_last_drain";
    skip_unless_recording!(test);
    let churn = fixture("churn");
    let script = format!(
        "({} 100000000000 64 <&- >/dev/null 2>&1 &); echo started",
        churn.display()
    );
    let path = scratch_file("busy-daemon.mt");
    let mut cmd = record_command(&path, &["-q", "--grace", "1s"], &["sh", "-c", &script]);
    cmd.stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null());
    let start = std::time::Instant::now();
    let mut child = cmd.spawn().unwrap();
    let status = wait_for(&mut child, std::time::Duration::from_secs(30));
    let took = start.elapsed();
    // The daemon is ours to end, found by its exact command line.
    let mut daemons = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let mut want = churn.as_os_str().as_encoded_bytes().to_vec();
        want.extend_from_slice(b"\x00100000000000\x0064\x00");
        if cmdline == want {
            if let Some(pid) = entry.file_name().to_str().and_then(|p| p.parse().ok()) {
                daemons.push((pid, String::new()));
            }
        }
    }
    kill_pids(&daemons);
    assert_eq!(
        daemons.len(),
        1,
        "the daemon was still running: {daemons:?}"
    );
    let status = status.expect("memtrack ended, though its daemon keeps allocating");
    assert_eq!(status.code(), Some(0));
    assert!(took < std::time::Duration::from_secs(1 + 10), "{took:?}");
    let (_, events, end) = read_recording(&path);
    assert!(
        matches!(end, memtrack::format::ReadEnd::Complete(_)),
        "{end:?}"
    );
    let daemon = daemons[0].0;
    assert!(
        events.iter().any(|e| e.pid == daemon
            && matches!(e.kind, memtrack::format::EventKind::Alloc { size: 64, .. })),
        "the daemon's allocations until the end are recorded"
    );
}
