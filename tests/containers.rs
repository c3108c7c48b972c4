//! `memtrack record` inside containers (issue 30): the real recorder run in a new pid namespace
//! (`unshare --pid --fork --mount-proc`), in one nested inside another, and in a container made
//! the way runtimes make them (new pid, mount, uts and ipc namespaces, `pivot_root` into a
//! minimal root the test builds from the static memtrack, the fixture, busybox and the
//! libraries `ldd` names, /proc mounted fresh). Each recording of testdata/example.c must count
//! exactly what the host's does, process by process, and name the processes by the pids they
//! have in the container.
//!
//! No docker or podman engine runs here (the machine has no container runtime, and no registry
//! is reachable), so the containers are made with util-linux's `unshare` and `pivot_root`, as
//! runc makes them.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{
    fixture, memtrack, read_recording, report_json, run_command, scratch_dir, scratch_file, skip,
    static_memtrack,
};

/// busybox, statically linked: the shell that writes its own pid inside every kind of
/// container (and the only tool of the minimal root).
fn busybox(test: &str) -> Option<PathBuf> {
    let path = PathBuf::from("/usr/bin/busybox");
    let ok = path.is_file()
        && Command::new("unshare").arg("--version").output().is_ok()
        && Command::new("ldd")
            .arg(&path)
            .output()
            .is_ok_and(|o| !o.status.success() || o.stdout.starts_with(b"\tnot a dynamic"));
    if !ok {
        skip(
            test,
            "needs a static /usr/bin/busybox, unshare and ldd (apt-get install busybox-static \
             util-linux)",
        );
        return None;
    }
    Some(path)
}

/// What the report says of one process, without its pid: what must not change in a container.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Counted {
    depth: u64,
    executable: String,
    allocs: u64,
    frees: u64,
    bytes_allocated: u64,
    bytes_freed: u64,
    leaked_blocks: u64,
    exit_code: Option<i64>,
}

/// The report's processes, in a stable order, and their pids (in the report's order).
fn processes(path: &Path) -> (Vec<Counted>, Vec<u64>) {
    let json = report_json(path, &[]);
    let mut counted = Vec::new();
    let mut pids = Vec::new();
    for p in json["processes"].as_array().expect("processes") {
        let heap = &p["own"]["heap"];
        let n = |v: &serde_json::Value| v.as_u64().unwrap_or(u64::MAX);
        let exe = p["executable"].as_str().unwrap_or("");
        counted.push(Counted {
            depth: n(&p["depth"]),
            // The file name: the host and the container run it from different directories.
            executable: exe.rsplit('/').next().unwrap_or(exe).to_string(),
            allocs: n(&heap["allocs"]),
            frees: n(&heap["frees"]),
            bytes_allocated: n(&heap["bytes_allocated"]),
            bytes_freed: n(&heap["bytes_freed"]),
            leaked_blocks: n(&heap["leaked"]["blocks"]),
            exit_code: p["exit"]["exit_code"].as_i64(),
        });
        pids.push(n(&p["pid"]));
    }
    counted.sort();
    (counted, pids)
}

/// The shell command that writes its pid to `pid_file`, then becomes `program`: the root of the
/// recorded tree, whose pid the report must show.
fn pid_then(pid_file: &str, program: &str) -> String {
    format!("echo $$ > {pid_file}; exec {program}")
}

/// Check a recording of example.c (through `pid_then`) against the host's: the same processes
/// with the same counts, the root named by the pid it wrote, the worker's exact counts.
fn same_as_host(kind: &str, path: &Path, pid_file: &Path, host: &[Counted], stderr: &str) {
    let (counted, pids) = processes(path);
    assert_eq!(
        counted, host,
        "{kind}: per-process counts differ from the host's\n{stderr}"
    );
    let root: u64 = std::fs::read_to_string(pid_file)
        .unwrap_or_else(|e| panic!("{kind}: the wrapper wrote no pid ({e})\n{stderr}"))
        .trim()
        .parse()
        .unwrap();
    let (header, _, _) = read_recording(path);
    assert_eq!(
        u64::from(header.root_pid),
        root,
        "{kind}: the root is named by its pid in the container"
    );
    assert!(
        pids.contains(&root),
        "{kind}: report pids {pids:?} lack {root}"
    );
    // The worker (testdata/example.c): 50,000 blocks of 96 bytes and their table, all freed.
    let worker = Counted {
        depth: 1,
        executable: "example".into(),
        allocs: 50_001,
        frees: 50_001,
        bytes_allocated: 50_000 * 96 + 50_000 * 8,
        bytes_freed: 50_000 * 96 + 50_000 * 8,
        leaked_blocks: 0,
        exit_code: Some(0),
    };
    assert!(counted.contains(&worker), "{kind}: {counted:#?}");
    let total: u64 = counted.iter().map(|c| c.allocs).sum();
    assert!(total >= 60_015, "{kind}: {total} allocations");
}

/// Record example.c on the host, through the same wrapper: what every container must match.
fn host_recording(test: &str, busybox: &Path, extra: &[&str]) -> (PathBuf, Vec<Counted>) {
    let path = scratch_file(format!("{test}-host.mt"));
    let pid_file = scratch_file(format!("{test}-host.pid"));
    let example = fixture("example");
    let script = pid_then(pid_file.to_str().unwrap(), example.to_str().unwrap());
    let mut cmd = Command::new(memtrack());
    cmd.args(["record", "-o"]).arg(&path).args(extra);
    cmd.arg("--").arg(busybox).args(["sh", "-c", &script]);
    let run = run_command(&mut cmd).expect_code(0);
    let (counted, _) = processes(&path);
    same_as_host("host", &path, &pid_file, &counted, &run.describe());
    (path, counted)
}

/// `unshare --pid --fork --mount-proc`, `levels` times nested, then `memtrack record`.
fn in_pid_namespaces(levels: usize, path: &Path, extra: &[&str], command: &[&str]) -> Command {
    let mut cmd = Command::new("unshare");
    for level in 0..levels {
        if level > 0 {
            cmd.arg("unshare");
        }
        cmd.args(["--pid", "--fork", "--mount-proc"]);
    }
    cmd.arg(memtrack())
        .args(["record", "-o"])
        .arg(path)
        .args(extra);
    cmd.arg("--").args(command);
    cmd
}

#[test]
fn example_counts_inside_a_pid_namespace_and_a_nested_one_equal_the_hosts() {
    let test = "example_counts_inside_a_pid_namespace_and_a_nested_one_equal_the_hosts";
    skip_unless_recording!(test);
    let Some(bb) = busybox(test) else { return };
    let (_, host) = host_recording(test, &bb, &[]);
    let example = fixture("example");
    for levels in [1, 2] {
        let path = scratch_file(format!("{test}-{levels}.mt"));
        let pid_file = scratch_file(format!("{test}-{levels}.pid"));
        let script = pid_then(pid_file.to_str().unwrap(), example.to_str().unwrap());
        let bb = bb.to_str().unwrap();
        let run = run_command(&mut in_pid_namespaces(
            levels,
            &path,
            &[],
            &[bb, "sh", "-c", &script],
        ))
        .expect_code(0);
        let kind = format!("{levels} pid namespace(s)");
        same_as_host(&kind, &path, &pid_file, &host, &run.describe());
        let (header, _, _) = read_recording(&path);
        assert!(
            header
                .features
                .iter()
                .any(|f| f.starts_with(memtrack::record::pidns::FEATURE_PREFIX)),
            "{kind}: the header names the namespace: {:?}",
            header.features
        );
        // In a fresh pid namespace memtrack is pid 1 and the tree's pids are small; on this
        // host they are not (the check would fail with global pids, the defect of issue 30).
        let root = header.root_pid;
        assert!(root < 100, "{kind}: root pid {root}\n{}", run.describe());
        // check --tree takes the container's pid: the worker's tree holds exactly its 50,001.
        let (_, pids) = processes(&path);
        let p = path.to_str().unwrap();
        let worker = pids.iter().map(|pid| pid.to_string()).find(|pid| {
            common::run(&["check", p, "--tree", pid, "--max-allocs", "50001"]).code() == 0
                && common::run(&["check", p, "--tree", pid, "--max-allocs", "50000"]).code() == 1
        });
        assert!(
            worker.is_some(),
            "{kind}: no tree of {pids:?} has the worker's 50,001"
        );
    }
}

/// The minimal root of a container: the static memtrack, busybox, the example and /bin/true
/// (which it executes) with the libraries `ldd` names, and empty mount points.
fn container_root(test: &str, busybox: &Path) -> Option<PathBuf> {
    let bin = static_memtrack(test)?;
    let root = program_root(test, busybox);
    std::fs::copy(&bin, root.join("memtrack")).unwrap();
    Some(root)
}

/// The root of [`container_root`] without memtrack: busybox, the example, /bin/true and their
/// libraries, copies (other files, other inodes) of the host's.
fn program_root(test: &str, busybox: &Path) -> PathBuf {
    let root = scratch_dir().join(format!("{test}-root"));
    let _ = std::fs::remove_dir_all(&root);
    for dir in ["proc", "sys", "tmp", "out", "bin", "dev"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    let copy = |from: &Path, to: &str| {
        let dest = root.join(to.trim_start_matches('/'));
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(from, &dest)
            .unwrap_or_else(|e| panic!("copy {} to {}: {e}", from.display(), dest.display()));
    };
    copy(busybox, "/bin/busybox");
    let example = fixture("example");
    copy(&example, "/example");
    copy(Path::new("/bin/true"), "/bin/true");
    for program in [&example, Path::new("/bin/true")] {
        let out = Command::new("ldd").arg(program).output().unwrap();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or "/lib64/ld-linux... (0x...)"
            let lib = line
                .split("=>")
                .last()
                .and_then(|s| s.split_whitespace().next())
                .filter(|s| s.starts_with('/'));
            if let Some(lib) = lib {
                copy(Path::new(lib), lib);
            }
        }
    }
    root
}

/// `unshare` into new pid, mount, uts and ipc namespaces, then, as runc does: a private mount
/// tree, the root bind-mounted onto itself, /proc mounted fresh (of the new pid namespace),
/// /sys bound (BTF), the output directory bound at /out, `pivot_root . .` and the old root
/// detached; then `command` (paths of the new root).
fn in_container(root: &Path, out: &Path, command: &str) -> Command {
    let script = format!(
        "set -e\n\
         hostname memtrack-ct\n\
         mount --make-rprivate /\n\
         mount --bind {r} {r}\n\
         mount -t proc proc {r}/proc\n\
         mount --rbind /sys {r}/sys\n\
         mount -t tmpfs tmpfs {r}/tmp\n\
         mount --bind {o} {r}/out\n\
         cd {r}\n\
         pivot_root . .\n\
         /bin/busybox umount -l .\n\
         exec {command}\n",
        r = root.display(),
        o = out.display(),
    );
    let mut cmd = Command::new("unshare");
    cmd.args([
        "--pid", "--mount", "--uts", "--ipc", "--fork", "sh", "-c", &script,
    ]);
    cmd
}

#[test]
fn example_counts_inside_a_pivot_root_container_equal_the_hosts() {
    let test = "example_counts_inside_a_pivot_root_container_equal_the_hosts";
    skip_unless_recording!(test);
    let Some(bb) = busybox(test) else { return };
    let Some(root) = container_root(test, &bb) else {
        return;
    };
    let (host_path, host) = host_recording(test, &bb, &["--stacks"]);
    let out = scratch_dir().join(format!("{test}-out"));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    let command = format!(
        "/memtrack record -o /out/ct.mt --stacks -- /bin/busybox sh -c '{}'",
        pid_then("/out/pid", "/example")
    );
    let run = run_command(&mut in_container(&root, &out, &command)).expect_code(0);
    let path = out.join("ct.mt");
    same_as_host("container", &path, &out.join("pid"), &host, &run.describe());
    let (header, _, _) = read_recording(&path);
    assert_eq!(
        header.hostname, "memtrack-ct",
        "the container's uts namespace"
    );
    assert!(
        header.root_pid < 100,
        "the container's pids: {}",
        header.root_pid
    );

    // The frames name the container's files (/example), not the host's fixture path, and
    // every allocation site of example.c's own code is found, as on the host.
    let folded = |path: &Path| {
        let out = Command::new(memtrack())
            .arg("report")
            .arg(path)
            .args(["--format", "folded", "--view", "allocated"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let stacks = folded(&path);
    let host_stacks = folded(&host_path);
    let callers = |text: &str| -> Vec<String> {
        let mut v: Vec<String> = text
            .lines()
            .filter(|l| l.contains("table") || l.contains("main"))
            .map(|l| {
                l.split(';')
                    .filter(|f| f.starts_with("main") || f.starts_with("table"))
                    .collect::<Vec<_>>()
                    .join(";")
            })
            .collect();
        v.sort();
        v.dedup();
        v
    };
    assert!(
        !callers(&stacks).is_empty() && callers(&stacks) == callers(&host_stacks),
        "the container's stacks reach example.c's functions as the host's do:\n{stacks}\n---\n{host_stacks}"
    );
    // The files the stacks name are the container's: /example, not the host's fixture.
    let (_, events, _) = read_recording(&path);
    let modules: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.kind {
            memtrack::format::EventKind::Module(m) => Some(m.path.clone()),
            _ => None,
        })
        .collect();
    assert!(
        modules.iter().any(|m| m == "/example"),
        "the stacks' modules: {modules:?}"
    );
    let fixture_dir = fixture("example").parent().unwrap().display().to_string();
    assert!(
        !modules.iter().any(|m| m.starts_with(&fixture_dir)),
        "no module is the host's file: {modules:?}"
    );
}

#[test]
fn control_and_a_benchmark_pid_inside_a_pid_namespace() {
    let test = "control_and_a_benchmark_pid_inside_a_pid_namespace";
    skip_unless_recording!(test);
    let Some(bb) = busybox(test) else { return };
    let worker = fixture("control/worker");
    let ctl = scratch_file(format!("{test}.ctl"));
    scratch_file(format!("{test}.ctl.ack"));
    let pid_file = scratch_file(format!("{test}.pid"));
    let path = scratch_file(format!("{test}.mt"));
    // The shell names itself with --pid: its pid in the namespace, as `echo $$` gives it.
    let script = format!(
        "set -e\n\
         echo $$ > {p}\n\
         {m} ctl bench ns::worker --pid $$\n\
         {m} ctl start\n\
         {w} 4\n\
         {m} ctl stop\n",
        p = pid_file.display(),
        m = memtrack(),
        w = worker.display()
    );
    let run = run_command(&mut in_pid_namespaces(
        1,
        &path,
        &["--control", ctl.to_str().unwrap()],
        &[bb.to_str().unwrap(), "sh", "-c", &script],
    ))
    .expect_code(0);
    let shell: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let json = report_json(&path, &[]);
    let bench = json["benchmarks"]
        .as_array()
        .and_then(|b| b.iter().find(|b| b["uri"] == "ns::worker"))
        .unwrap_or_else(|| panic!("no benchmark ns::worker: {json}\n{}", run.describe()));
    assert_eq!(bench["pids"], serde_json::json!([shell]), "{bench}");
    // testdata/control/worker.c with 4: four blocks of 23,001 bytes and one of 23,003, exactly
    // what the same harness counts on the host (tests/control.rs).
    let heap = &bench["metrics"]["heap"];
    assert_eq!(
        (heap["allocs"].as_u64(), heap["bytes_allocated"].as_u64()),
        (Some(5), Some(4 * 23_001 + 23_003)),
        "the worker's allocations are the benchmark's: {bench}\n{}",
        run.describe()
    );
}

#[test]
fn a_recorder_killed_inside_a_pid_namespace_leaves_nothing_stopped() {
    let test = "a_recorder_killed_inside_a_pid_namespace_leaves_nothing_stopped";
    skip_unless_recording!(test);
    let Some(bb) = busybox(test) else { return };
    let sleeper = fixture("sleeper");
    let ready = scratch_file(format!("{test}.ready"));
    let path = scratch_file(format!("{test}.mt"));
    // Inside the namespace a shell (pid 1) starts the recorder, waits for the sleeper's
    // "ready" line, kills the recorder, then reports every process's state until none is
    // stopped; the sleepers are ended with SIGTERM.
    let script = format!(
        "{m} record -o {o} -- {s} > {r} &\n\
         rec=$!\n\
         until grep -q ready {r}; do sleep 0.01; done\n\
         kill -9 $rec\n\
         wait $rec; echo recorder $?\n\
         n=0\n\
         while grep -q '^State:.*T' /proc/[0-9]*/status 2>/dev/null; do\n\
           n=$((n+1)); [ $n -gt 1000 ] && {{ echo still stopped; grep -l '^State:.*T' /proc/[0-9]*/status; exit 1; }}\n\
           sleep 0.01\n\
         done\n\
         echo none stopped\n\
         kill -TERM -1\n",
        m = memtrack(),
        o = path.display(),
        s = sleeper.display(),
        r = ready.display(),
    );
    let mut cmd = Command::new("unshare");
    cmd.args(["--pid", "--fork", "--mount-proc"])
        .arg(&bb)
        .args(["sh", "-c", &script]);
    let run = run_command(&mut cmd);
    let stdout = run.stdout.clone();
    assert!(stdout.contains("recorder 137"), "{}", run.describe());
    assert!(stdout.contains("none stopped"), "{}", run.describe());
}

/// A recording that saw processes map a probed allocator but recorded no allocator call (here
/// truly: `true` allocates nothing) is not taken as complete: record warns, the report says
/// why, and `check` refuses it (exit 2) unless given --allow-incomplete.
#[test]
fn a_recording_without_one_allocator_call_is_refused_by_check() {
    let test = "a_recording_without_one_allocator_call_is_refused_by_check";
    skip_unless_recording!(test);
    let path = scratch_file(format!("{test}.mt"));
    let run = run_command(&mut in_pid_namespaces(1, &path, &[], &["/bin/true"])).expect_code(0);
    assert!(
        run.stderr
            .contains("memtrack: warning: not one allocator call was recorded"),
        "{}",
        run.describe()
    );
    let json = report_json(&path, &[]);
    assert_eq!(json["complete"], false, "{json}");
    let reasons = json["incomplete_reasons"].to_string();
    assert!(
        reasons.contains("no allocator call was recorded"),
        "{reasons}"
    );
    let p = path.to_str().unwrap();
    common::run(&["check", p, "--max-allocs", "1"]).expect_failure(
        2,
        &[
            "the recording is incomplete: no allocator call was recorded",
            "--allow-incomplete",
        ],
    );
    common::run(&["check", p, "--max-allocs", "1", "--allow-incomplete"]).expect_code(0);
}

/// `memtrack record -- docker run ...` records only the client. No docker engine runs here (the
/// machine has the client at most, no daemon, no registry), so `docker` is a stand-in that does
/// what the real client does: it asks a daemon started outside the recorded tree (here by the
/// test, as dockerd is by init) to run the program, and waits for it to end. The recording
/// must hold none of the program's allocations, and record must say what to do instead.
#[test]
fn recording_a_docker_client_says_to_record_inside_the_container() {
    let test = "recording_a_docker_client_says_to_record_inside_the_container";
    skip_unless_recording!(test);
    let Some(bb) = busybox(test) else { return };
    let dir = scratch_dir().join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    let (req, done, out) = (dir.join("req"), dir.join("done"), dir.join("out"));
    for fifo in [&req, &done] {
        assert!(Command::new("mkfifo").arg(fifo).status().unwrap().success());
    }
    let example = fixture("example");
    let mut daemon = Command::new(&bb)
        .args(["sh", "-c"])
        .arg(format!(
            "read r < {req}; {ex} > {out}; echo exited $? > {done}",
            req = req.display(),
            ex = example.display(),
            out = out.display(),
            done = done.display()
        ))
        .spawn()
        .unwrap();
    let docker = dir.join("bin/docker");
    std::fs::write(
        &docker,
        format!(
            "#!/bin/sh\necho \"$*\" > {}\nread r < {}\necho \"$r\"\n",
            req.display(),
            done.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&docker, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = scratch_file(format!("{test}.mt"));
    let mut cmd = common::record_command(&path, &[], &["docker", "run", "--rm", "img", "/example"]);
    let search = format!(
        "{}:{}",
        dir.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    cmd.env("PATH", search);
    let run = run_command(&mut cmd).expect_code(0);
    assert!(
        daemon.wait().unwrap().success(),
        "the stand-in daemon ran the program"
    );
    assert!(run.stdout.contains("exited 0"), "{}", run.describe());
    assert!(
        run.stderr.contains(
            "memtrack: warning: `docker run` runs the container's processes under the container \
             runtime, not under this command, so they were not recorded: run memtrack inside \
             the container instead"
        ),
        "{}",
        run.describe()
    );
    let (counted, _) = processes(&path);
    assert!(
        counted.iter().all(|c| c.executable != "example"),
        "the program ran outside the recorded tree: {counted:#?}"
    );
}

/// A command under another root (`chroot`), recorded from the host: its executables and
/// libraries are found, probed and named from the files it really maps (through
/// /proc/PID/map_files, by device and inode), the root's copies, never the host's files of
/// the same names. busybox's chroot is static and stripped (no allocator found in it), so the
/// counts are the example's alone and must equal the host's.
#[test]
fn a_command_under_another_root_is_probed_in_the_files_it_maps() {
    let test = "a_command_under_another_root_is_probed_in_the_files_it_maps";
    skip_unless_recording!(test);
    let Some(bb) = busybox(test) else { return };
    let root = program_root(test, &bb);
    std::fs::create_dir_all(root.join("out")).unwrap();
    let (_, host) = host_recording(test, &bb, &[]);
    let path = scratch_file(format!("{test}.mt"));
    let script = pid_then("/out/pid", "/example");
    let mut cmd = common::record_command(
        &path,
        &["--stacks"],
        &[
            bb.to_str().unwrap(),
            "chroot",
            root.to_str().unwrap(),
            "/bin/busybox",
            "sh",
            "-c",
            &script,
        ],
    );
    let run = run_command(&mut cmd).expect_code(0);
    same_as_host(
        "chroot",
        &path,
        &root.join("out/pid"),
        &host,
        &run.describe(),
    );
    let (_, events, _) = read_recording(&path);
    let probed: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.kind {
            memtrack::format::EventKind::Coverage(c) if c.probes > 0 && e.pid != 0 => {
                Some(c.path.clone())
            }
            _ => None,
        })
        .collect();
    let root_text = root.display().to_string();
    assert!(
        !probed.is_empty() && probed.iter().all(|p| p.starts_with(&root_text)),
        "the allocators probed for the tree are the root's files: {probed:?}\n{}",
        run.describe()
    );
}

/// A root on overlayfs, as Docker's overlay2 makes it: the files are probed through the
/// overlay, every allocation is counted as on the host, and every call stack is walked: the
/// mapping's file is the backing layer's, which bpf/common.bpf.h's file_key_of names by the
/// overlay inode user space stats (before, every frame was [unknown]).
#[test]
fn a_command_on_an_overlay_root_counts_what_the_host_counts() {
    let test = "a_command_on_an_overlay_root_counts_what_the_host_counts";
    skip_unless_recording!(test);
    let Some(bb) = busybox(test) else { return };
    let lower = program_root(test, &bb);
    let dir = scratch_dir().join(format!("{test}-overlay"));
    let _ = std::fs::remove_dir_all(&dir);
    for d in ["upper", "work", "merged"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    std::fs::create_dir_all(dir.join("upper/out")).unwrap();
    let (_, host) = host_recording(test, &bb, &["--stacks"]);
    let path = scratch_file(format!("{test}.mt"));
    let merged = dir.join("merged");
    let script = format!(
        "set -e\n\
         mount --make-rprivate /\n\
         mount -t overlay overlay -o lowerdir={l},upperdir={d}/upper,workdir={d}/work {m}\n\
         exec {mt} record -o {p} --stacks -- {bb} chroot {m} /bin/busybox sh -c '{s}'\n",
        l = lower.display(),
        d = dir.display(),
        m = merged.display(),
        mt = memtrack(),
        p = path.display(),
        bb = bb.display(),
        s = pid_then("/out/pid", "/example"),
    );
    let run = run_command(Command::new("unshare").args(["--mount", "sh", "-c", &script]));
    if run.code() != 0 && run.stderr.contains("overlay") {
        skip(
            test,
            &format!("cannot mount an overlay here: {}", run.stderr.trim()),
        );
        return;
    }
    let run = run.expect_code(0);
    same_as_host(
        "overlay",
        &path,
        &dir.join("upper/out/pid"),
        &host,
        &run.describe(),
    );
    let stacks = &report_json(&path, &["--stacks"])["stacks"];
    assert!(
        stacks["walks"].as_u64().unwrap_or(0) >= 60_015,
        "every allocation walked: {stacks}"
    );
    assert_eq!(
        stacks["unknown"], 0,
        "no walk unknown on overlayfs: {stacks}"
    );
    let functions: Vec<&str> = stacks["sites"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["frames"].as_array().into_iter().flatten())
        .filter_map(|f| f["function"].as_str())
        .collect();
    assert!(
        functions.contains(&"table") && functions.contains(&"main"),
        "the example's own functions in the overlay's frames: {functions:?}"
    );
}
