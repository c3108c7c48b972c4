//! How a recording ends, and what the command inherits (issue 13): the recorder's death never
//! changes what the command does, a daemon left behind does not hold memtrack, and the command
//! gets none of memtrack's privileges. Every test runs the real recorder.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

/// The Cap* lines of a `grep Cap /proc/self/status` the recorded command printed, as
/// (name, mask) pairs.
fn capability_lines(stdout: &[u8]) -> Vec<(String, u64)> {
    String::from_utf8_lossy(stdout)
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
fn assert_no_capabilities(what: &str, out: &std::process::Output) {
    let caps = capability_lines(&out.stdout);
    let describe = || {
        format!(
            "{what}: status {}\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    assert_eq!(out.status.code(), Some(0), "{}", describe());
    for set in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
        let mask = caps.iter().find(|(n, _)| n == set).map(|(_, m)| *m);
        assert_eq!(mask, Some(0), "{set} of the command\n{}", describe());
    }
}

/// Whether the tests run as root (effective uid 0).
fn is_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1).map(|e| e == "0"))
        .unwrap_or(false)
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
    let out = Command::new(&setpriv)
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .args(["--inh-caps", caps, "--ambient-caps", caps])
        .arg(memtrack())
        .args(["record", "-q", "-o"])
        .arg(&path)
        .args(["--", "grep", "Cap", "/proc/self/status"])
        .output()
        .expect("run setpriv");
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
    let out = Command::new(&setpriv)
        .args(["--inh-caps", "+sys_admin"])
        .arg(memtrack())
        .args(["record", "-q", "--user", "nobody", "-o"])
        .arg(&path)
        .args(["--", "grep", "Cap", "/proc/self/status"])
        .output()
        .expect("run setpriv");
    assert_no_capabilities("root with --user nobody", &out);
    // And plain root with --user, no capability games: nothing either.
    let out = Command::new(memtrack())
        .args(["record", "-q", "--user", "nobody", "-o"])
        .arg(&path)
        .args(["--", "grep", "Cap", "/proc/self/status"])
        .output()
        .expect("run memtrack");
    assert_no_capabilities("root with --user nobody", &out);
    assert!(Path::new(&path).exists());
}
