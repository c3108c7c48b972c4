//! Bystanders (issue 19): while memtrack records, processes outside the recorded tree run the
//! machine's allocator libraries untouched, because the tree runs private copies and only
//! those carry the probes; with `--no-private-libs` the probes are on the shared files.
//!
//! Each test records testdata/bystander.c, which compares its own allocator code with the
//! file it was mapped from (a uprobe's breakpoint shows in memory, never in the file) and then
//! waits until the test has run another process outside the tree; so the outside process runs
//! while every probe of the recording is attached. Each test asserts both modes, so neither
//! can pass because nothing was probed at all.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use common::*;

/// The two modes and what a process outside the tree must see in each: probes on the shared
/// files (`differs`) or not.
const MODES: [(&str, bool); 2] = [("", false), ("--no-private-libs", true)];

/// What happened during one recording of the bystander fixture.
struct Beside {
    /// The recording (its run's status is the inside fixture's).
    rec: Recording,
    /// The process run outside the tree while the recording ran.
    outside: Output,
}

/// Held by each test while it records: a process outside the tree must see only the probes of
/// its own test's recording, so a `--no-private-libs` recording of another test (they run on
/// threads at once) or one still detaching must not be beside it.
fn alone() -> MutexGuard<'static, ()> {
    static MACHINE: Mutex<()> = Mutex::new(());
    MACHINE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Record the bystander fixture (waiting inside the tree) with `mode`, run `outside` beside it
/// once the fixture inside has made its check, then let the fixture end. The caller holds
/// [`alone`].
fn beside_a_recording(name: &str, mode: &str, outside: &mut Command) -> Beside {
    common::wait_for_detaching_recorders().unwrap_or_else(|e| panic!("{name}: {e}"));
    let exe = fixture("bystander");
    let ready = scratch_file(format!("{name}.ready"));
    let go = scratch_file(format!("{name}.go"));
    let path = scratch_file(format!("{name}.mt"));
    let extra: Vec<&str> = ["-q", mode].into_iter().filter(|m| !m.is_empty()).collect();
    let mut cmd = record_command(
        &path,
        &extra,
        &[
            exe.to_str().unwrap(),
            ready.to_str().unwrap(),
            go.to_str().unwrap(),
        ],
    );
    let shown = format!("{cmd:?}");
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start memtrack record");
    let started = Instant::now();
    while !ready.exists() {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            panic!(
                "{shown} ended ({status}) before the fixture was ready:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{shown}: never ready"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let outside = outside.output().expect("run the bystander");
    std::fs::write(&go, b"").unwrap();
    let output = child.wait_with_output().unwrap();
    Beside {
        rec: recording(Run::new(shown, output), path),
        outside,
    }
}

fn describe(b: &Beside) -> String {
    format!(
        "{}\noutside: {}\n{}{}",
        b.rec.describe(),
        b.outside.status,
        String::from_utf8_lossy(&b.outside.stdout),
        String::from_utf8_lossy(&b.outside.stderr)
    )
}

/// The fixture's exit codes (testdata/bystander.c).
const IDENTICAL: i32 = 0;
const DIFFERS: i32 = 1;

#[test]
fn a_bystander_runs_unprobed_code_with_private_libraries_and_probed_code_without() {
    skip_unless_recording!("bystander_code");
    let _alone = alone();
    let exe = fixture("bystander");
    for (mode, shared) in MODES {
        let b = beside_a_recording("bystander-code", mode, &mut Command::new(&exe));
        let text = describe(&b);
        // Inside the tree, every function carries its probe, libstdc++'s dlopened one too.
        assert_eq!(b.rec.code(), DIFFERS, "inside, {mode:?}: {text}");
        let inside = &b.rec.run.stdout;
        for f in ["malloc", "free", "calloc", "realloc", "operator new"] {
            assert!(
                inside.contains(&format!("{f}: differs")),
                "{f} inside, {mode:?}: {text}"
            );
        }
        let want = if shared { DIFFERS } else { IDENTICAL };
        assert_eq!(
            b.outside.status.code(),
            Some(want),
            "outside, {mode:?}: {text}"
        );
        // Discovery found libstdc++ in both modes, under its real path.
        assert!(
            b.rec.coverage().iter().any(|(_, path, alloc, probes)| {
                path.contains("libstdc++.so.6") && alloc == "c++" && *probes > 0
            }),
            "{mode:?}: {:?}\n{text}",
            b.rec.coverage()
        );
    }
}

#[test]
fn the_allocators_line_names_the_shared_files_that_carry_probes() {
    skip_unless_recording!("shared_files_line");
    let _alone = alone();
    let exe = fixture("bystander");
    for (mode, shared) in MODES {
        let path = scratch_file("bystander-line.mt");
        let extra: Vec<&str> = [mode].into_iter().filter(|m| !m.is_empty()).collect();
        let run = run_command(&mut record_command(&path, &extra, &[exe.to_str().unwrap()]));
        let line = run
            .stderr
            .lines()
            .find(|l| l.contains("allocators: "))
            .unwrap_or_else(|| panic!("no allocators line: {}", run.describe()))
            .to_string();
        let named = line.contains("probes on shared files");
        assert_eq!(named, shared, "{mode:?}: {line}");
        if shared {
            let (_, files) = line.split_once("uses them): ").unwrap();
            for lib in ["libc.so.6", "ld-linux-x86-64.so.2", "libstdc++.so.6"] {
                assert!(files.contains(lib), "{lib} in {line}");
            }
        }
    }
}

/// The exact counts of the bundled example (testdata/example.c): 10,000 words of 48 bytes in
/// the parent, 50,000 of 96 in its first child, a realloc doubling from 1 KiB to 1 MiB.
#[test]
fn exact_counts_are_the_same_with_and_without_private_libraries() {
    skip_unless_recording!("private_exact_counts");
    let _alone = alone();
    let mut heaps = Vec::new();
    for (mode, _) in MODES {
        let extra: Vec<&str> = [mode].into_iter().filter(|m| !m.is_empty()).collect();
        let rec = record_fixture("private-example", &extra, "example", &[]);
        assert_eq!(rec.code(), 0, "{}", rec.describe());
        assert_eq!(rec.lost(), 0, "{}", rec.describe());
        let words: Vec<u32> = rec.allocs_of_size(48).iter().map(|e| e.pid).collect();
        let child_words: Vec<u32> = rec.allocs_of_size(96).iter().map(|e| e.pid).collect();
        assert_eq!(words.len(), 10_000, "{mode:?}: {}", rec.describe());
        assert_eq!(child_words.len(), 50_000, "{mode:?}: {}", rec.describe());
        assert!(
            words.iter().all(|&p| p == rec.header.root_pid),
            "{mode:?}: the words are the root's"
        );
        let json = report_json(&rec.path, &[]);
        let mut per_process: Vec<(String, serde_json::Value)> = json["processes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let mut heap = p["own"]["heap"].clone();
                heap.as_object_mut().unwrap().remove("peak_live_at_ns");
                (format!("{} {}", p["depth"], p["argv"]), heap)
            })
            .collect();
        per_process.sort_by(|a, b| a.0.cmp(&b.0));
        heaps.push(per_process);
    }
    assert_eq!(
        heaps[0], heaps[1],
        "every process's heap, private libraries (left) and shared (right)"
    );
}

/// A program under Valgrind runs its guest code, the dynamic loader's included, from what it
/// reads of the files' mappings: a uprobe's breakpoint there is a SIGTRAP that kills it.
#[test]
fn valgrind_beside_a_recording_runs_with_private_libraries() {
    skip_unless_recording!("valgrind_beside");
    let _alone = alone();
    let Some(valgrind) = installed("valgrind_beside", "valgrind") else {
        return;
    };
    let exe = fixture("bystander");
    for (mode, shared) in MODES {
        let mut vg = Command::new(&valgrind);
        vg.args(["-q", "--tool=none"]).arg(&exe);
        let b = beside_a_recording("bystander-valgrind", mode, &mut vg);
        let text = describe(&b);
        use std::os::unix::process::ExitStatusExt;
        if shared {
            // Valgrind re-raises the guest's fatal signal on itself.
            assert_eq!(
                b.outside.status.signal(),
                Some(libc::SIGTRAP),
                "{mode:?}: {text}"
            );
        } else {
            assert_eq!(b.outside.status.code(), Some(IDENTICAL), "{mode:?}: {text}");
        }
        assert_eq!(b.rec.code(), DIFFERS, "inside, {mode:?}: {text}");
    }
}

/// gdb learns of library loads from its breakpoint in the dynamic loader (`_dl_debug_state`),
/// where memtrack's own probe sees `dlopen`; so a gdb beside a recording whose probe is on the
/// shared loader may miss a load, and never set a breakpoint pending in the library (the
/// README's troubleshooting, checked here too). With private libraries the probe is on the
/// tree's copy, and a gdb outside the tree stops in a library its program loads later, as it
/// does alone.
#[test]
fn gdb_beside_a_recording_stops_in_a_library_loaded_later() {
    skip_unless_recording!("gdb_beside");
    let _alone = alone();
    let Some(gdb) = installed("gdb_beside", "gdb") else {
        return;
    };
    let flags = ["-g", "-O1", "-fno-inline"];
    let lib = build_fixture(
        "stacks/dlopen_lib.c",
        "libbystander_dlopen.so",
        &[&flags[..], &["-shared", "-fPIC"]].concat(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let exe = build_fixture(
        "stacks/dlopen_main.c",
        "bystander_dlopen_main",
        &[&flags[..], &["-ldl"]].concat(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let gdb_command = || {
        let mut cmd = Command::new(&gdb);
        cmd.args(["-nx", "-batch"])
            .args(["-ex", "set breakpoint pending on"])
            .args(["-ex", "break dl_inner"])
            .args(["-ex", "run"])
            .arg("--args")
            .arg(&exe)
            .arg(&lib);
        cmd
    };
    let stopped =
        |out: &Output| String::from_utf8_lossy(&out.stdout).contains("Breakpoint 1, dl_inner");
    // Alone first: what gdb shows when nothing else runs, so the test asks of the gdb beside
    // a recording only what this gdb does.
    common::wait_for_detaching_recorders().unwrap_or_else(|e| panic!("{e}"));
    let alone = gdb_command().output().expect("run gdb");
    assert!(
        stopped(&alone),
        "gdb alone did not stop in dl_inner:\n{}{}",
        String::from_utf8_lossy(&alone.stdout),
        String::from_utf8_lossy(&alone.stderr)
    );
    for (mode, shared) in MODES {
        let b = beside_a_recording("bystander-gdb", mode, &mut gdb_command());
        let text = describe(&b);
        assert_eq!(b.rec.code(), DIFFERS, "inside, {mode:?}: {text}");
        // With the probe on the shared loader this machine's gdb (Debian 12's gdb 13) misses
        // the load, as the README says; if a gdb stops here, that entry must name the gdbs
        // that miss it, and this test which gdb it ran.
        assert_eq!(stopped(&b.outside), !shared, "{mode:?}: {text}");
    }
}

/// Program `name` on $PATH, or None after `test` says it skips.
fn installed(test: &str, name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file());
    if found.is_none() {
        let why = format!("{name} is not installed (scripts/setup.sh installs it)");
        skip(test, &why);
    }
    found
}

/// `doctor` tries the namespace as `record` will, and says so in its own row.
#[test]
fn doctor_says_the_private_libraries_work_here() {
    skip_unless_recording!("doctor_private_libraries");
    let out = run(&["doctor"]).expect_code(0).stdout;
    let row = out
        .lines()
        .find(|l| l.starts_with("private libraries"))
        .unwrap_or_else(|| panic!("no private libraries row:\n{out}"));
    let status = row["private libraries".len()..].split_whitespace().next();
    assert_eq!(status, Some("ok"), "{out}");
    assert!(
        row.contains("allocator libraries copied") && row.contains("namespace works"),
        "{row}"
    );
}

/// Where the namespace cannot be made (here unshare fails with EPERM under a seccomp filter,
/// testdata/no_unshare.c, as in a container whose profile refuses it), the recording probes
/// the shared files after one warning line, and records exactly what it records otherwise.
#[test]
fn without_a_namespace_the_recording_probes_the_shared_files_after_one_warning() {
    skip_unless_recording!("private_fallback");
    let _alone = alone();
    let jail = fixture("no_unshare");
    let exe = fixture("example");
    let path = scratch_file("private-fallback.mt");
    let mut cmd = Command::new(&jail);
    cmd.arg(memtrack())
        .args(["record", "-o"])
        .arg(&path)
        .arg("--")
        .arg(&exe);
    let rec = recording(run_command(&mut cmd), path);
    assert_eq!(rec.code(), 0, "{}", rec.describe());
    let warnings: Vec<&str> = rec
        .run
        .stderr
        .lines()
        .filter(|l| l.contains("cannot give the command private copies"))
        .collect();
    assert_eq!(warnings.len(), 1, "one warning line: {}", rec.describe());
    assert!(
        warnings[0].contains("Operation not permitted")
            && warnings[0].contains("--no-private-libs"),
        "why, and the flag: {}",
        warnings[0]
    );
    assert!(
        rec.run.stderr.contains("probes on shared files") && rec.run.stderr.contains("libc.so.6"),
        "the allocators line names the shared files: {}",
        rec.describe()
    );
    assert_eq!(rec.lost(), 0, "{}", rec.describe());
    assert_eq!(rec.allocs_of_size(48).len(), 10_000, "{}", rec.describe());
    assert_eq!(rec.allocs_of_size(96).len(), 50_000, "{}", rec.describe());
}
