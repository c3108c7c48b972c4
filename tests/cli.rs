//! The command line itself (issue 13, items 3 and 11): a bad flag exits 2 (125 for `record`)
//! with one line that says what to do, `--help`, `-h` and `--version` print on stdout and exit
//! 0, and the recorded command's arguments reach it byte for byte, UTF-8 or not.

mod common;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::process::Command;

use common::{memtrack, run, run_command, scratch_dir};

fn sample() -> &'static str {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/testdata/compat/v1-malloc_free.mt"
    )
}

/// Asserts that `args` fails with `code` and one stderr line containing each of `want`.
fn assert_bad(args: &[&str], code: i32, want: &[&str]) {
    let run = run(args).expect_failure(code, want);
    assert_eq!(run.stdout, "", "nothing on stdout\n{}", run.describe());
}

#[test]
fn bad_flags_exit_2_with_one_line_that_says_what_to_do() {
    let s = sample();
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["check", s, "--max-allocs", "1.5k"],
            &[
                "--max-allocs 1.5k",
                "give a whole number",
                "memtrack check --help",
            ],
        ),
        (
            &["check", s, "--bogus", "--max-allocs", "1"],
            &["unknown argument '--bogus'", "memtrack check --help"],
        ),
        (
            &["check", s, "--max-allocs", "1", "--max-allocs", "2"],
            &["--max-allocs was given twice", "give it once"],
        ),
        (
            &["check", s, "--tree", "x", "--max-allocs", "1"],
            &["--tree x", "process id"],
        ),
        (&["report"], &["missing file", "memtrack report --help"]),
        (&["report", s, "--pid", "-1"], &["process id"]),
        (&["report", s, "--nope"], &["unknown argument '--nope'"]),
        (&["dump"], &["missing file", "memtrack dump --help"]),
        (&["dump", s, "extra"], &["unknown argument 'extra'"]),
        (
            &["doctor", "--x"],
            &["unknown argument '--x'", "memtrack doctor --help"],
        ),
        (
            &["ctl"],
            &["give one of: hello, start, stop, bench, marker"],
        ),
        (
            &["ctl", "bench", "u", "--pid", "me"],
            &["--pid me", "memtrack ctl --help"],
        ),
        (&["ctl", "frob"], &["unknown argument 'frob'"]),
        (&[], &["give a command: record, report"]),
        (&["frob"], &["unknown argument 'frob'", "memtrack --help"]),
    ];
    for (args, want) in cases {
        assert_bad(args, 2, want);
    }
}

/// Every typed value (issue 14, item 3) is refused where argh parses it, with the flag, the
/// value and the choices on one line, exit 2.
/// A missing positional says the usage and an example (issue 34, item 6): on main, `memtrack
/// diff one.mt` answered only "missing new".
#[test]
fn a_missing_recording_says_the_usage() {
    for (args, want) in [
        (
            &["diff", "one.mt"][..],
            "memtrack: missing new: usage: memtrack diff [options] <base> <new>, e.g. memtrack \
             diff main.mt branch.mt; `memtrack diff --help` lists what it takes\n",
        ),
        (
            &["dump"][..],
            "memtrack: missing file: usage: memtrack dump <file>, e.g. memtrack dump run.mt | \
             head; `memtrack dump --help` lists what it takes\n",
        ),
    ] {
        let r = run(args).expect_code(2);
        assert_eq!(r.stderr, want, "{}", r.describe());
        assert_eq!(r.stdout, "");
    }
}

#[test]
fn bad_typed_values_exit_2_naming_the_choices() {
    let s = sample();
    let report = "memtrack report --help";
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["report", s, "--format", "xml"],
            &["--format xml: give text, json, markdown, html", report],
        ),
        (
            &["report", s, "--by", "frob"],
            &["--by frob: give process or bench", report],
        ),
        (
            &["report", s, "--sort", "size"],
            &[
                "--sort size: give peak, allocated, count, leaked or rss",
                report,
            ],
        ),
        (
            &["report", s, "--stacks-by", "size"],
            &["--stacks-by size: give peak, allocated, count", report],
        ),
        (
            &["report", s, "--format", "folded", "--view", "live"],
            &["--view live: give peak, allocated, leaked, temporary, resident or faulted"],
        ),
        (
            &["report", s, "--format", "pprof", "--weight", "kg"],
            &["--weight kg: give bytes or count"],
        ),
        (
            &["check", s, "--max-peak-heap", "12XB"],
            &[
                "--max-peak-heap 12XB: invalid size '12XB'",
                "memtrack check --help",
            ],
        ),
        (
            &["check", s, "--baseline", s, "--max-increase", "5"],
            &["--max-increase 5: give a per cent", "e.g. 5% or 2.5%"],
        ),
        (
            &["check", s, "--max-allocs", "1", "--by", "tree"],
            &["--by tree: give run or bench"],
        ),
        (
            &["diff", s, s, "--format", "xml"],
            &[
                "--format xml: give text, json, folded or flamegraph",
                "memtrack diff --help",
            ],
        ),
        (
            &["ctl", "marker", "frob"],
            &["kind frob: give sample_start, sample_end, round_start or round_end"],
        ),
    ];
    for (args, want) in cases {
        assert_bad(args, 2, want);
    }
    let record: &[(&[&str], &[&str])] = &[
        (
            &["record", "--grace", "soon", "--", "true"],
            &[
                "--grace soon: give a duration such as 2s",
                "memtrack record --help",
            ],
        ),
        (
            &["record", "--allocator", "pool", "--", "true"],
            &["--allocator 'pool': no '=' between the symbol"],
        ),
    ];
    for (args, want) in record {
        assert_bad(args, 125, want);
    }
}

/// 1 is "a limit was exceeded" for `check`, and a command's own status for `record`: a bad
/// flag must never look like either.
#[test]
fn bad_record_flags_exit_125() {
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["record", "--bogus", "--", "true"],
            &["unknown argument '--bogus'", "memtrack record --help"],
        ),
        (
            &["record", "--ring-size", "x", "--", "true"],
            &["--ring-size x", "power of two"],
        ),
        (
            &["record", "--ring-size", "3", "--", "true"],
            &["--ring-size 3", "power of two"],
        ),
        (
            &["record", "-o", "a.mt", "-o", "b.mt", "--", "true"],
            &["-o was given twice"],
        ),
        (
            &["-v", "record", "--user"],
            &["--user", "memtrack record --help"],
        ),
    ];
    for (args, want) in cases {
        assert_bad(args, 125, want);
    }
}

#[test]
fn help_and_version_print_on_stdout_and_exit_0() {
    for args in [
        &["--help"][..],
        &["-h"],
        &["help"],
        &["record", "--help"],
        &["record", "-h"],
        &["check", "-h"],
        &["report", "-h"],
        &["dump", "-h"],
        &["doctor", "-h"],
        &["ctl", "-h"],
        &["ctl", "hello", "-h"],
        &["ctl", "bench", "--help"],
    ] {
        let run = run(args).expect_code(0);
        assert!(
            run.stdout.starts_with("Usage: memtrack"),
            "{}",
            run.describe()
        );
        assert_eq!(run.stderr, "", "{}", run.describe());
    }
    let top = run(&["--help"]).stdout;
    assert!(top.contains("--version"), "{top}");
    assert!(top.contains("-h, --help"), "{top}");
    for args in [&["--version"][..], &["-V"]] {
        let run = run(args).expect_code(0);
        assert_eq!(
            run.stdout,
            format!("memtrack {}\n", env!("CARGO_PKG_VERSION"))
        );
    }
}

/// `memtrack report --help | head -1`: the reader closes its end before memtrack writes (the
/// pipe's read end is closed before memtrack starts, so the write always meets EPIPE, not the
/// pipe's buffer): memtrack ends quietly with exit 0, as ripgrep does, where it panicked.
#[test]
fn help_into_a_closed_pipe_ends_quietly() {
    for args in [
        &["report", "--help"][..],
        &["check", "--help"],
        &["record", "--help"],
        &["--help"],
        &["--version"],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let run = run_command(Command::new(memtrack()).args(args).stdout(writer));
        assert_eq!(run.code(), 0, "{}", run.describe());
        assert_eq!(run.stderr, "", "{}", run.describe());
    }
}

#[test]
fn a_non_utf8_flag_of_memtrack_is_refused_in_one_line() {
    run(&[OsStr::new("report"), OsStr::from_bytes(b"run-\xff.mt")])
        .expect_failure(2, &["not valid UTF-8"]);
}

/// The recorded command gets its arguments byte for byte: 0xff is not UTF-8, and argh's own
/// `from_env` refused the whole command line for it (exit 1).
#[test]
fn non_utf8_arguments_reach_the_recorded_command_untouched() {
    skip_unless_recording!("non_utf8_arguments_reach_the_recorded_command_untouched");
    let dir = scratch_dir();
    let rec = dir.join("cli-non-utf8.mt");
    let out = dir.join("cli-non-utf8.out");
    let _ = std::fs::remove_file(&out);
    let arg = b"a\xffb\xc3(";
    let script = format!("printf '%s' \"$1\" > '{}'", out.display());
    run_command(
        Command::new(memtrack())
            .args(["record", "-q", "-o"])
            .arg(&rec)
            .args(["--", "sh", "-c", &script, "sh"])
            .arg(OsStr::from_bytes(arg)),
    )
    .expect_code(0);
    assert_eq!(std::fs::read(&out).unwrap(), arg);
    // The header keeps a readable form of the command line.
    let header = memtrack::format::Reader::open(&rec)
        .unwrap()
        .header()
        .clone();
    assert_eq!(header.argv[..4], ["sh", "-c", script.as_str(), "sh"]);
    assert_eq!(header.argv[4], "a\u{fffd}b\u{fffd}(");
}

/// A record that cannot start keeps the previous recording at `-o` (issue 13, item 8), and
/// says on one line what went wrong and what to do.
#[test]
fn a_failed_record_keeps_the_previous_recording() {
    skip_unless_recording!("a_failed_record_keeps_the_previous_recording");
    let dir = scratch_dir().join("cli-keep");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("run.mt");
    std::fs::write(&path, b"the previous recording").unwrap();
    let script = dir.join("script.sh");
    std::fs::write(&script, b"#!/nonexistent/interpreter\necho hi\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let p = path.to_str().unwrap();
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["record", "-q", "-o", p, "--", "/nonexistent/command-xyz"],
            127,
            "command not found: /nonexistent/command-xyz",
        ),
        (
            &["record", "-q", "-o", p, "--", script.to_str().unwrap()],
            126,
            "its interpreter /nonexistent/interpreter (from its #! line) does not exist; install \
             it or fix the #! line",
        ),
    ];
    for (args, code, want) in cases {
        run(args).expect_failure(*code, &[want]);
        assert_eq!(
            std::fs::read(&path).unwrap(),
            b"the previous recording",
            "{args:?}"
        );
        // No temporary file left behind either.
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }
    // A command that starts replaces it.
    run(&["record", "-q", "-o", p, "--", "true"]).expect_code(0);
    assert!(memtrack::format::Reader::open(&path).is_ok());
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
}

#[test]
fn bad_output_and_control_paths_are_one_line_errors() {
    let missing = scratch_dir().join("cli-no-such-dir/x.mt");
    let missing = missing.to_str().unwrap();
    let dir = scratch_dir();
    let dir = dir.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["record", "-o", missing, "--", "true"], "the directory"),
        (
            &["record", "-o", dir, "--", "true"],
            "that is a directory; give a file name",
        ),
        (
            &["record", "--control", "", "--", "true"],
            "--control needs a path for the FIFO",
        ),
        (
            &["record", "--control", missing, "--", "true"],
            "does not exist; create it first",
        ),
    ];
    for (args, want) in cases {
        assert_bad(args, 125, &[want]);
    }
    let run = run(&["record", "-o", missing, "--", "true"]);
    assert!(
        run.stderr.contains("does not exist; create it first"),
        "{}",
        run.describe()
    );
}

/// A recording still being written is not "damaged": report, check and dump say to wait; once
/// the recorder has finished, the same file reads in full (issue 13, item 8).
#[test]
fn a_recording_still_being_written_says_to_wait() {
    skip_unless_recording!("a_recording_still_being_written_says_to_wait");
    let dir = scratch_dir();
    let path = dir.join("cli-live.mt");
    let go = dir.join("cli-live.go");
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&go);
    let script = format!("while [ ! -e '{}' ]; do sleep 0.02; done", go.display());
    let mut recorder = Command::new(memtrack())
        .args(["record", "-q", "-o"])
        .arg(&path)
        .args(["--", "sh", "-c", &script])
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while !path.exists() {
        assert!(
            started.elapsed().as_secs() < 20,
            "the recording never appeared at -o"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let p = path.to_str().unwrap();
    for args in [
        &["report", p][..],
        &["check", p, "--max-allocs", "1"],
        &["dump", p],
    ] {
        let run = run(args).expect_failure(
            2,
            &[
                "the recording is still being written",
                "wait for memtrack record to finish",
            ],
        );
        assert!(!run.stderr.contains("damaged"), "{}", run.describe());
    }
    std::fs::write(&go, b"").unwrap();
    assert!(recorder.wait().unwrap().success());
    let stdout = run(&["report", p, "--format", "json"])
        .expect_code(0)
        .stdout;
    assert!(
        stdout.contains("\"complete\":true") || stdout.contains("\"complete\": true"),
        "{stdout}"
    );
}

/// `--ring-size` takes what its help and the README say: a power of two from 1 to 1024.
#[test]
fn ring_size_range_is_what_the_help_says() {
    let help = run(&["record", "--help"]).stdout;
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(help.contains("a power of two from 1 to 1024"), "{help}");
    for bad in ["0", "2048", "3"] {
        assert_bad(
            &["record", "--ring-size", bad, "--", "true"],
            125,
            &["power of two between 1 and 1024"],
        );
    }
}

/// docs/dump-format.md names every event type and field `memtrack dump` prints (issue 13,
/// item 11): one event of every kind, serialised as dump does.
#[test]
fn the_dump_format_doc_names_every_field() {
    use memtrack::format::{
        AllocFunc, Bench, ControlCommand, Coverage, Event, EventKind, Exec, Header, Lost,
        MarkerKind, RssMember, Skipped, Trailer,
    };
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/dump-format.md"))
        .unwrap();
    let f = AllocFunc::Malloc;
    let kinds = vec![
        EventKind::Alloc {
            func: f,
            addr: 1,
            size: 2,
            stack_id: 0,
        },
        EventKind::Free { func: f, addr: 1 },
        EventKind::Realloc {
            func: f,
            old_addr: 1,
            addr: 2,
            size: 3,
            stack_id: 0,
        },
        EventKind::AllocFailed { func: f, size: 1 },
        EventKind::Fork { child: 2 },
        EventKind::Exec(Exec {
            filename: "x".into(),
            argv: vec![],
        }),
        EventKind::Exit { status: 0 },
        EventKind::Rss {
            member: RssMember::Anon,
            delta_pages: 1,
            value_pages: 1,
            by_owner: true,
        },
        EventKind::Lost(Lost {
            cause: "ring_full_alloc".into(),
            total: 1,
        }),
        EventKind::Mmap {
            addr: 1,
            len: 2,
            prot: 3,
            flags: 4,
        },
        EventKind::Munmap { addr: 1, len: 2 },
        EventKind::Mremap {
            old_addr: 1,
            old_len: 2,
            addr: 3,
            len: 4,
        },
        EventKind::Brk { from: 1, to: 2 },
        EventKind::Coverage(Coverage {
            path: "p".into(),
            allocator: "glibc".into(),
            probes: 1,
        }),
        EventKind::Control {
            command: ControlCommand::Start,
        },
        EventKind::Control {
            command: ControlCommand::Stop,
        },
        EventKind::Control {
            command: ControlCommand::Bench(Bench {
                uri: "u".into(),
                pid: 0,
            }),
        },
        EventKind::Control {
            command: ControlCommand::Marker {
                kind: MarkerKind::RoundEnd,
            },
        },
    ];
    let mut missing = Vec::new();
    let mut want = |name: &str| {
        if !doc.contains(&format!("`{name}`")) && !doc.contains(&format!("\"{name}\"")) {
            missing.push(name.to_string());
        }
    };
    fn keys(v: &serde_json::Value, out: &mut Vec<String>) {
        if let Some(map) = v.as_object() {
            for (k, v) in map {
                out.push(k.clone());
                keys(v, out);
            }
        }
    }
    let mut names = Vec::new();
    for kind in kinds {
        let v = serde_json::to_value(Event {
            ts_ns: 1,
            pid: 1,
            tid: 1,
            kind,
        })
        .unwrap();
        names.push(v["kind"]["type"].as_str().unwrap().to_string());
        if let Some(name) = v["kind"]["command"]["name"].as_str() {
            names.push(name.to_string());
        }
        keys(&v, &mut names);
    }
    keys(
        &serde_json::to_value(Header::default()).unwrap(),
        &mut names,
    );
    keys(
        &serde_json::to_value(Trailer::default()).unwrap(),
        &mut names,
    );
    let skipped = Skipped {
        offset_bytes: 1,
        size_bytes: 2,
        reason: "r".into(),
    };
    keys(&serde_json::to_value(skipped).unwrap(), &mut names);
    for f in AllocFunc::ALL {
        names.push(
            serde_json::to_value(f)
                .unwrap()
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    for m in RssMember::ALL {
        names.push(
            serde_json::to_value(m)
                .unwrap()
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    for k in MarkerKind::ALL {
        names.push(k.name().to_string());
    }
    names.sort();
    names.dedup();
    for n in &names {
        want(n);
    }
    assert!(
        missing.is_empty(),
        "docs/dump-format.md does not name: {missing:?}"
    );
}

/// The kinds of file `-o` may name, each made fresh in its own scratch directory (issue 34,
/// item 1): a regular file, a character device like /dev/null (1, 3, made with mknod: never
/// the machine's own), a FIFO with a reader, and a symbolic link to a regular file.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Regular,
    Device,
    Fifo,
    Link,
}

const KINDS: [Kind; 4] = [Kind::Regular, Kind::Device, Kind::Fifo, Kind::Link];

/// A `-o` target of `kind` for `command`, and what it was before.
struct Target {
    dir: std::path::PathBuf,
    path: std::path::PathBuf,
    inode: u64,
    reader: Option<std::thread::JoinHandle<Vec<u8>>>,
}

impl Target {
    /// Makes the target, or `None` (after saying why) where mknod is not allowed.
    fn make(test: &str, command: &str, kind: Kind) -> Option<Target> {
        use std::os::unix::fs::MetadataExt;
        let dir = scratch_dir().join(format!("output-{command}-{kind:?}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out");
        match kind {
            Kind::Regular => std::fs::write(&path, "previous").unwrap(),
            Kind::Device | Kind::Fifo => {
                let mut cmd = Command::new(if matches!(kind, Kind::Device) {
                    "mknod"
                } else {
                    "mkfifo"
                });
                cmd.arg(&path);
                if matches!(kind, Kind::Device) {
                    cmd.args(["c", "1", "3"]);
                }
                let made = run_command(&mut cmd);
                if made.code() != 0 {
                    common::skip(
                        test,
                        &format!("cannot make a {kind:?}: {}", made.stderr.trim()),
                    );
                    return None;
                }
            }
            Kind::Link => {
                std::fs::write(dir.join("target"), "previous").unwrap();
                std::os::unix::fs::symlink("target", &path).unwrap();
            }
        }
        let inode = std::fs::metadata(&path).unwrap().ino();
        // The FIFO's reader: opening it for reading waits for the writer, then reads to its end.
        let reader = matches!(kind, Kind::Fifo).then(|| {
            let path = path.clone();
            std::thread::spawn(move || std::fs::read(path).unwrap())
        });
        Some(Target {
            dir,
            path,
            inode,
            reader,
        })
    }

    /// Asserts that the target is still of its kind, holds (or passed on) exactly `want` when
    /// given, and that no temporary file is left; returns the bytes written.
    fn written(self, kind: Kind, what: &str) -> Vec<u8> {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let meta = std::fs::symlink_metadata(&self.path).unwrap();
        let kind_kept = match kind {
            Kind::Regular => meta.is_file() && meta.ino() != self.inode,
            Kind::Device => meta.file_type().is_char_device() && meta.rdev() == libc_makedev(1, 3),
            Kind::Fifo => meta.file_type().is_fifo(),
            Kind::Link => meta.file_type().is_symlink(),
        };
        assert!(kind_kept, "{what}: -o {kind:?} became {meta:?}");
        let mut names: Vec<String> = std::fs::read_dir(&self.dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let expected: &[&str] = match kind {
            Kind::Link => &["out", "target"],
            _ => &["out"],
        };
        assert_eq!(names, expected, "{what}: -o {kind:?} left other files");
        let bytes = match kind {
            Kind::Regular => std::fs::read(&self.path).unwrap(),
            Kind::Device => Vec::new(),
            Kind::Fifo => self.reader.unwrap().join().unwrap(),
            Kind::Link => std::fs::read(self.dir.join("target")).unwrap(),
        };
        std::fs::remove_dir_all(&self.dir).unwrap();
        bytes
    }
}

/// The device number of (major, minor) as `stat` gives it (glibc's encoding).
fn libc_makedev(major: u64, minor: u64) -> u64 {
    ((major & 0xfffff000) << 32)
        | ((major & 0xfff) << 8)
        | ((minor & 0xffffff00) << 12)
        | (minor & 0xff)
}

/// `report -o` and `diff -o` replace a regular file atomically, write a device or FIFO in
/// place, and follow a symbolic link, each with exactly what they print on standard output.
/// On main, `report -o DEV` replaced the device with a 460-byte regular file, and diff had no
/// `-o`.
#[test]
fn report_and_diff_write_every_kind_of_output_as_it_is() {
    let test = "report_and_diff_write_every_kind_of_output_as_it_is";
    let s = sample();
    let commands: [(&str, Vec<&str>); 3] = [
        ("report", vec!["report", s]),
        ("report-json", vec!["report", s, "--format", "json"]),
        ("diff", vec!["diff", s, s]),
    ];
    for (name, args) in commands {
        let stdout = run(&args).expect_code(0).stdout;
        assert!(!stdout.is_empty(), "{name} prints something");
        for kind in KINDS {
            let Some(target) = Target::make(test, name, kind) else {
                return;
            };
            let mut with_o = args.clone();
            let path = target.path.to_str().unwrap().to_string();
            with_o.extend(["-o", &path]);
            let r = run(&with_o).expect_code(0);
            assert_eq!(r.stdout, "", "{name} -o {kind:?} prints nothing");
            let bytes = target.written(kind, name);
            if !matches!(kind, Kind::Device) {
                assert_eq!(
                    String::from_utf8(bytes).unwrap(),
                    stdout,
                    "{name} -o {kind:?} holds what it prints"
                );
            }
        }
    }
}

/// `record -o` does the same with a recording: a new file replaces a regular one (after the
/// command started), a device or FIFO is written in place, a link is followed.
#[test]
fn record_writes_every_kind_of_output_as_it_is() {
    let test = "record_writes_every_kind_of_output_as_it_is";
    skip_unless_recording!(test);
    for kind in KINDS {
        let Some(target) = Target::make(test, "record", kind) else {
            return;
        };
        let path = target.path.to_str().unwrap().to_string();
        run(&["record", "-q", "-o", &path, "--", "true"]).expect_code(0);
        let bytes = target.written(kind, "record");
        if matches!(kind, Kind::Device) {
            continue;
        }
        let copy = common::scratch_file(format!("output-record-{kind:?}.mt"));
        std::fs::write(&copy, &bytes).unwrap();
        let (header, _, end) = common::read_recording(&copy);
        assert_eq!(header.argv, ["true"], "-o {kind:?}: a recording of true");
        assert!(
            matches!(end, memtrack::format::ReadEnd::Complete(_)),
            "-o {kind:?}: a complete recording: {end:?}"
        );
    }
}
