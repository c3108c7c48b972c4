//! Issue 8, "ship it": what a user meets first. `doctor` and `record` say the same words about
//! a machine; under sudo the command runs as the invoking user (or `--user`) and the file is
//! theirs; SIGTERM and ^C reach the command's whole process group and the file is finished,
//! while a SIGKILLed recorder leaves a file readable up to its last chunk; the progress line is
//! drawn on terminals only; the static binary has no dynamic dependencies and records from an
//! empty directory; and every flag of every `--help` is in the README.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use common::{
    alloc_sizes, can_record, exits, first_line, fixture, is_root, memtrack, on_terminal, read_pipe,
    read_recording, require, run, run_command, scratch_dir, scratch_file, script_works,
    send_signal, skip, static_memtrack, wait_for, wait_for_event,
};
use memtrack::format::{EventKind, ReadEnd};

/// The rows of `memtrack doctor`'s checks, in order.
const DOCTOR_ROWS: [&str; 15] = [
    "kernel",
    "BTF",
    "privileges",
    "bpf syscall",
    "ring buffer",
    "uprobes",
    "BPF helpers",
    "tp_btf",
    "fentry",
    "tracefs",
    "pid namespace",
    "root file system",
    "probe sites",
    "private libraries",
    "BPF objects",
];

// ---------------------------------------------------------------------------------------------
// doctor

#[test]
fn doctor_lists_every_check_and_says_record_can_work() {
    skip_unless_recording!("doctor_lists_every_check_and_says_record_can_work");
    let out = run(&["doctor"]).expect_code(0).stdout;
    // The checks' table ends where the kernel features' begins.
    let (checks, features) = out
        .split_once("\nkernel features (probed, not read from the version):\n")
        .unwrap_or_else(|| panic!("no kernel features table:\n{out}"));
    let rows: Vec<&str> = checks
        .lines()
        .filter(|l| DOCTOR_ROWS.iter().any(|r| l.starts_with(r)))
        .collect();
    assert_eq!(rows.len(), DOCTOR_ROWS.len(), "one row per check:\n{out}");
    let row = |name: &str| -> &str {
        let i = DOCTOR_ROWS.iter().position(|r| *r == name).unwrap();
        assert!(rows[i].starts_with(name), "{name} in its place:\n{out}");
        rows[i]
    };
    for (row, name) in rows.iter().zip(DOCTOR_ROWS) {
        let status = row[name.len()..].split_whitespace().next().unwrap_or("");
        assert!(
            status == "ok" || status == "missing",
            "{name}: status {status:?}\n{out}"
        );
    }
    assert!(
        row("fentry").ends_with("rmap hooks; forked children's writes to inherited pages (resident memory uses rss_stat)"),
        "{out}"
    );
    // The real objects load here, as record loads them.
    assert!(row("BPF objects").contains(" ok "), "{out}");
    // Issue 12: where the probes would go in the allocator libraries, and what single-steps.
    let sites = row("probe sites");
    assert!(sites.contains("allocator libraries"), "{out}");
    if let Some((_, stepped)) = sites.split_once("single-stepped: ") {
        let stepped = stepped.split("  ").next().unwrap_or("");
        assert_eq!(stepped, "reallocarray in libc.so.6", "{out}");
    }
    assert!(
        sites.ends_with("a single-stepped site costs about 10x an emulated one per call"),
        "{out}"
    );
    // A row per kernel feature, each answered on this kernel, and the verdict last.
    for f in memtrack::preflight::KERNEL_FEATURES {
        let line = features
            .lines()
            .find(|l| l.starts_with(f.name))
            .unwrap_or_else(|| panic!("no row for {}:\n{out}", f.name));
        let here = line[f.name.len()..].split_whitespace().nth(1).unwrap_or("");
        assert!(here == "yes" || here == "no", "{}: {here:?}\n{out}", f.name);
    }
    assert!(out.contains("\nrecord can work here"), "{out}");
    assert!(out
        .trim_end()
        .lines()
        .last()
        .unwrap_or("")
        .starts_with("record can work here"));
}

/// The binary, copied where any user may run it (the build tree may not be); the copy goes
/// when this is dropped.
struct WorldRunnableCopy(PathBuf);

impl WorldRunnableCopy {
    fn new() -> WorldRunnableCopy {
        let dir = std::env::temp_dir().join(format!("memtrack-ship-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let bin = dir.join("memtrack");
        std::fs::copy(memtrack(), &bin).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        WorldRunnableCopy(dir)
    }

    fn path(&self) -> PathBuf {
        self.0.join("memtrack")
    }
}

impl Drop for WorldRunnableCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn without_privileges_doctor_and_record_say_the_same_line() {
    if !is_root() {
        return skip(
            "without_privileges_doctor_and_record_say_the_same_line",
            "needs root to run memtrack as nobody",
        );
    }
    let copy = WorldRunnableCopy::new();
    let bin = copy.path();
    let as_nobody = |args: &[&str]| {
        let mut cmd = Command::new(&bin);
        cmd.args(args).uid(65534).gid(65534).current_dir("/");
        run_command(&mut cmd)
    };
    let out = as_nobody(&["doctor"]).expect_code(1).stdout;
    let verdict = out
        .split("record cannot work here:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no verdict:\n{out}"));
    let line = verdict.lines().next().unwrap().trim();
    assert!(
        line.starts_with("privileges: uid 65534 lacks CAP_BPF") && line.contains("sudo"),
        "{out}"
    );
    assert_eq!(verdict.lines().count(), 1, "only the cause:\n{out}");

    let err = as_nobody(&["record", "-o", "/tmp/never.mt", "--", "true"])
        .expect_code(125)
        .stderr;
    assert_eq!(
        err.trim_end(),
        format!("memtrack: {line} (`memtrack doctor` lists every check)"),
        "record says what doctor says"
    );
}

// ---------------------------------------------------------------------------------------------
// privileges

/// A system user for the privilege tests and one supplementary group of theirs.
struct TestUser {
    name: &'static str,
    uid: u32,
    gid: u32,
    extra_gid: u32,
    home: &'static str,
}

const TEST_USER: &str = "memtrack-ci";
const TEST_GROUP: &str = "memtrack-ci-extra";
const TEST_HOME: &str = "/var/lib/memtrack-ci";

fn id_of(database: &str, name: &str) -> Option<u32> {
    let out = Command::new("getent")
        .args([database, name])
        .output()
        .ok()?;
    let line = String::from_utf8_lossy(&out.stdout).into_owned();
    line.split(':').nth(2)?.trim().parse().ok()
}

/// The test user, created on first use (useradd; root is available here and in CI).
fn test_user(test: &str) -> Option<&'static TestUser> {
    static USER: OnceLock<Result<TestUser, String>> = OnceLock::new();
    let user = USER.get_or_init(|| {
        if !is_root() {
            return Err("needs root to create a user and switch to it".into());
        }
        if id_of("group", TEST_GROUP).is_none() {
            let run = run_command(Command::new("groupadd").args(["--system", TEST_GROUP]));
            if run.code() != 0 {
                return Err(format!("groupadd {TEST_GROUP} failed: {}", run.stderr));
            }
        }
        if id_of("passwd", TEST_USER).is_none() {
            let run = run_command(Command::new("useradd").args([
                "--system",
                "--user-group",
                "--no-create-home",
                "--home-dir",
                TEST_HOME,
                "--shell",
                "/usr/sbin/nologin",
                "--groups",
                TEST_GROUP,
                TEST_USER,
            ]));
            if run.code() != 0 {
                return Err(format!("useradd {TEST_USER} failed: {}", run.stderr));
            }
        }
        let uid = id_of("passwd", TEST_USER).ok_or("no uid after useradd")?;
        let out = Command::new("id")
            .args(["-g", TEST_USER])
            .output()
            .map_err(|e| e.to_string())?;
        let gid = String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .map_err(|_| "id -g gave no number".to_string())?;
        Ok(TestUser {
            name: TEST_USER,
            uid,
            gid,
            extra_gid: id_of("group", TEST_GROUP).ok_or("no gid after groupadd")?,
            home: TEST_HOME,
        })
    });
    match user {
        Ok(u) => Some(u),
        Err(why) => {
            skip(test, why);
            None
        }
    }
}

/// What the recorded `sh` says about itself: uid, gid, groups, HOME, USER, LOGNAME.
const WHO_AM_I: &str = "echo \"$(id -u) $(id -g) [$(id -G)] $HOME $USER $LOGNAME\"";

/// Record `sh -c WHO_AM_I` as if run with `sudo` by `sudo_as`, with `extra` flags.
fn record_under_sudo(name: &str, sudo_as: &TestUser, extra: &[&str]) -> (PathBuf, String) {
    let path = scratch_file(format!("{name}.mt"));
    let mut cmd = Command::new(memtrack());
    cmd.args(["record", "-q", "-o"])
        .arg(&path)
        .args(extra)
        .args(["--", "/bin/sh", "-c", WHO_AM_I])
        .env("SUDO_UID", sudo_as.uid.to_string())
        .env("SUDO_GID", sudo_as.gid.to_string())
        .env("SUDO_USER", sudo_as.name)
        .env("HOME", "/root")
        .env("USER", "root")
        .env("LOGNAME", "root");
    let out = run_command(&mut cmd).expect_code(0).stdout;
    let (_, events, end) = read_recording(&path);
    assert!(matches!(end, ReadEnd::Complete(_)), "{end:?}");
    assert!(
        events.iter().any(|e| matches!(e.kind, EventKind::Exec(_))),
        "the command's exec is recorded"
    );
    (path, out)
}

#[test]
fn under_sudo_the_command_runs_as_the_invoking_user_and_owns_the_file() {
    let test = "under_sudo_the_command_runs_as_the_invoking_user_and_owns_the_file";
    skip_unless_recording!(test);
    let Some(user) = test_user(test) else { return };
    let (path, out) = record_under_sudo("sudo_user", user, &[]);
    let words: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(words[0], user.uid.to_string(), "uid: {out}");
    assert_eq!(words[1], user.gid.to_string(), "gid: {out}");
    let groups = &out[out.find('[').unwrap() + 1..out.find(']').unwrap()];
    let groups: Vec<&str> = groups.split_whitespace().collect();
    assert!(
        groups.contains(&user.extra_gid.to_string().as_str()),
        "supplementary group {}: {out}",
        user.extra_gid
    );
    assert!(!groups.contains(&"0"), "no root group left: {out}");
    assert!(
        out.trim_end()
            .ends_with(&format!("{} {} {}", user.home, user.name, user.name)),
        "HOME, USER, LOGNAME: {out}"
    );
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(
        (meta.uid(), meta.gid()),
        (user.uid, user.gid),
        "the recording belongs to the user"
    );
}

#[test]
fn user_flag_overrides_sudo_and_root_keeps_root() {
    let test = "user_flag_overrides_sudo_and_root_keeps_root";
    skip_unless_recording!(test);
    let Some(user) = test_user(test) else { return };
    let (path, out) = record_under_sudo("user_nobody", user, &["--user", "nobody"]);
    assert!(out.starts_with("65534 65534 "), "--user nobody: {out}");
    assert_eq!(std::fs::metadata(&path).unwrap().uid(), 65534);

    let (path, out) = record_under_sudo("user_root", user, &["--user", "root"]);
    assert!(out.starts_with("0 0 "), "--user root: {out}");
    assert_eq!(std::fs::metadata(&path).unwrap().uid(), 0);
}

#[test]
fn unknown_user_is_a_one_line_error_before_anything_runs() {
    skip_unless_recording!("unknown_user_is_a_one_line_error_before_anything_runs");
    let path = scratch_file("unknown_user.mt");
    let err = run_command(
        Command::new(memtrack())
            .args(["record", "--user", "no-such-user-xyz", "-o"])
            .arg(&path)
            .args(["--", "true"]),
    )
    .expect_failure(125, &[])
    .stderr;
    assert!(
        err.starts_with("memtrack: --user no-such-user-xyz: no such user"),
        "{err}"
    );
    assert!(!path.exists(), "no file for a run that never started");
}

// ---------------------------------------------------------------------------------------------
// signals

/// Start `memtrack record [extra] -- sleeper` and wait until the sleeper and its child exist;
/// returns memtrack, the recording's path and the sleeper's child pid.
fn start_sleeper(name: &str, extra: &[&str]) -> (std::process::Child, PathBuf, u32) {
    let exe = fixture("sleeper");
    let path = scratch_file(format!("{name}.mt"));
    let mut child = Command::new(memtrack())
        .args(["record", "-o"])
        .arg(&path)
        .args(extra)
        .arg("--")
        .arg(&exe)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run memtrack");
    let line = first_line(&mut child);
    let grandchild = line
        .strip_prefix("ready ")
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("sleeper said {line:?}"));
    (child, path, grandchild)
}

#[test]
fn sigterm_reaches_the_whole_command_group_and_the_file_is_finished() {
    skip_unless_recording!("sigterm_reaches_the_whole_command_group_and_the_file_is_finished");
    let (mut child, path, grandchild) = start_sleeper("sigterm", &[]);
    send_signal("TERM", i64::from(child.id()));
    let Some(status) = wait_for(&mut child, Duration::from_secs(20)) else {
        panic!("memtrack still runs 20 s after SIGTERM: the signal missed part of the tree");
    };
    let err = read_pipe(child.stderr.take());
    assert_eq!(status.code(), Some(143), "128 + SIGTERM\nstderr:\n{err}");

    let (header, events, end) = read_recording(&path);
    assert!(
        matches!(end, ReadEnd::Complete(_)),
        "complete file: {end:?}"
    );
    let exits = exits(&events);
    assert!(
        exits.contains(&(header.root_pid, libc::SIGTERM)),
        "the command died by SIGTERM: {exits:?}"
    );
    assert!(
        exits.contains(&(grandchild, libc::SIGTERM)),
        "its child too (same process group): {exits:?}"
    );
    let sizes = alloc_sizes(&events);
    assert!(
        sizes.contains(&15000) && sizes.contains(&15001),
        "both allocations"
    );
}

#[test]
fn sigkill_leaves_a_file_readable_up_to_the_last_chunk() {
    skip_unless_recording!("sigkill_leaves_a_file_readable_up_to_the_last_chunk");
    let (mut child, path, _) = start_sleeper("sigkill_recorder", &[]);
    // Killed once the chunk with the sleeper's allocation is in the file.
    wait_for_event(&path, "the sleeper's allocation", |kind| {
        matches!(kind, EventKind::Alloc { size: 15000, .. })
    });
    send_signal("KILL", i64::from(child.id()));
    let status = wait_for(&mut child, Duration::from_secs(10)).expect("SIGKILL ends memtrack");
    assert_eq!(status.code(), None, "killed by a signal");

    let (header, events, end) = read_recording(&path);
    // The sleepers outlive the recorder: end their group.
    send_signal("KILL", -i64::from(header.root_pid));
    assert!(
        matches!(end, ReadEnd::Damaged { .. }),
        "no trailer, so damaged: {end:?}"
    );
    let allocs = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Alloc { size: 15000, .. }))
        .count();
    assert_eq!(allocs, 1, "the allocation made before the kill was flushed");
}

#[test]
fn ctrl_c_on_a_terminal_reaches_the_command_and_the_file_is_finished() {
    let test = "ctrl_c_on_a_terminal_reaches_the_command_and_the_file_is_finished";
    if !can_record(test) || require(test, script_works()).is_none() {
        return;
    }
    let exe = fixture("sleeper");
    let path = scratch_file("ctrl_c.mt");
    let shell = format!(
        "{} record -q -o {} -- {}",
        memtrack(),
        path.display(),
        exe.display()
    );
    // ^C typed on the terminal: the line discipline signals the foreground process group.
    let (code, seen) = on_terminal(&shell, "ready", b"\x03");
    assert_eq!(
        code,
        128 + libc::SIGINT,
        "^C ends the command; terminal:\n{seen}"
    );
    let (header, events, end) = read_recording(&path);
    assert!(matches!(end, ReadEnd::Complete(_)), "{end:?}");
    let interrupted: Vec<u32> = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Exit { status } if status == libc::SIGINT))
        .map(|e| e.pid)
        .collect();
    assert_eq!(
        interrupted.len(),
        2,
        "the sleeper and its child died by SIGINT: {interrupted:?}"
    );
    assert!(interrupted.contains(&header.root_pid));
}

#[test]
fn the_command_owns_the_terminal_and_can_read_it() {
    let test = "the_command_owns_the_terminal_and_can_read_it";
    if !can_record(test) || require(test, script_works()).is_none() {
        return;
    }
    let path = scratch_dir().join("terminal_read.mt");
    let shell = format!(
        "{} record -q -o {} -- /bin/sh -c 'read answer; echo got-$answer'",
        memtrack(),
        path.display()
    );
    // Outside the foreground group the read would stop the command (SIGTTIN) for good.
    let (code, seen) = on_terminal(&shell, "", b"hello\n");
    assert_eq!(code, 0, "terminal:\n{seen}");
    assert!(seen.contains("got-hello"), "terminal:\n{seen}");
}

// ---------------------------------------------------------------------------------------------
// progress

#[test]
fn progress_line_only_on_a_terminal() {
    let test = "progress_line_only_on_a_terminal";
    if !can_record(test) || require(test, script_works()).is_none() {
        return;
    }
    let path = scratch_dir().join("progress.mt");
    let shell = format!("{} record -o {} -- sleep 2", memtrack(), path.display());
    let (code, seen) = on_terminal(&shell, "", b"");
    assert_eq!(code, 0, "terminal:\n{seen}");
    assert!(
        seen.contains("events/s") && seen.contains("\x1b[K"),
        "a progress line on the terminal:\n{seen}"
    );

    let err = run_command(
        Command::new(memtrack())
            .args(["record", "-o"])
            .arg(&path)
            .args(["--", "sleep", "1.5"]),
    )
    .expect_code(0)
    .stderr;
    assert!(!err.contains("events/s") && !err.contains('\r'), "{err:?}");
    // The allocators found (issue 6), then the summary; where the kernel refuses fentry, first
    // the one line that says the rmap hooks are unavailable (issue 37).
    let err = match err.split_once('\n') {
        Some((first, rest)) if first.starts_with("memtrack: rmap hooks unavailable") => {
            rest.to_string()
        }
        _ => err,
    };
    assert_eq!(
        err.lines().count(),
        2,
        "only the two closing lines: {err:?}"
    );
    assert!(err.starts_with("memtrack: allocators: "), "{err:?}");
    assert!(
        err.lines()
            .nth(1)
            .unwrap()
            .starts_with("memtrack: recorded "),
        "{err:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// the static binary

#[test]
fn static_binary_has_no_dynamic_dependencies_and_records_from_an_empty_directory() {
    let test = "static_binary_has_no_dynamic_dependencies_and_records_from_an_empty_directory";
    let Some(bin) = static_memtrack(test) else {
        return;
    };
    let headers = run_command(Command::new("readelf").args(["-lW"]).arg(&bin))
        .expect_code(0)
        .stdout;
    assert!(
        !headers.contains("INTERP"),
        "no program interpreter:\n{headers}"
    );
    let dynamic = run_command(Command::new("readelf").args(["-dW"]).arg(&bin)).stdout;
    assert!(
        !dynamic.contains("(NEEDED)"),
        "no shared libraries:\n{dynamic}"
    );
    assert!(headers.contains("DYN"), "position independent (static-pie)");

    skip_unless_recording!(test);
    let dir = scratch_dir().join("static-empty-dir");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(&bin, dir.join("memtrack")).unwrap();
    let exe = fixture("malloc_free");
    run_command(
        Command::new("./memtrack")
            .current_dir(&dir)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .args(["record", "-o", "run.mt", "--"])
            .arg(&exe)
            .arg("10"),
    )
    .expect_code(0);
    let (_, events, end) = read_recording(&dir.join("run.mt"));
    assert!(matches!(end, ReadEnd::Complete(_)), "{end:?}");
    let blocks = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Alloc { size: 10007, .. }))
        .count();
    assert_eq!(blocks, 10, "the fixture's ten blocks");
    run_command(Command::new("./memtrack").current_dir(&dir).arg("doctor")).expect_code(0);
    let out = run_command(
        Command::new("./memtrack")
            .current_dir(&dir)
            .args(["report", "run.mt"]),
    )
    .expect_code(0)
    .stdout;
    assert!(out.contains("allocations"), "{out}");
}

// ---------------------------------------------------------------------------------------------
// help and README

/// The `--flags` a help text names.
fn flags_in(help: &str) -> Vec<String> {
    let mut flags: Vec<String> = help
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| w.starts_with("--") && w.len() > 2 && *w != "--help")
        .map(String::from)
        .collect();
    flags.sort();
    flags.dedup();
    flags
}

#[test]
fn every_subcommand_and_flag_in_help_is_in_the_readme() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let top = run(&["--help"]).stdout;
    let commands: Vec<&str> = top
        .split("Commands:")
        .nth(1)
        .expect("a Commands section")
        .split("\n\n")
        .next()
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("  "))
        .filter(|l| !l.starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(commands.contains(&"doctor"), "{top}");
    let mut missing = Vec::new();
    for flag in flags_in(&top) {
        if !readme.contains(&flag) {
            missing.push(format!("memtrack {flag}"));
        }
    }
    for sub in &commands {
        if !readme.contains(&format!("memtrack {sub}")) {
            missing.push(format!("memtrack {sub}"));
        }
        let help = run(&[sub, "--help"]).expect_code(0).stdout;
        for flag in flags_in(&help) {
            if !readme.contains(&flag) {
                missing.push(format!("memtrack {sub} {flag}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "README.md does not mention: {missing:?}"
    );
}
