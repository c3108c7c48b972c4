//! The stack formats (`report --format folded|flamegraph|pprof|speedscope`) on a real recording
//! of testdata/example.c with --stacks: every format's numbers equal the JSON report's sites
//! (`--stacks --stacks-top 0`) and what the fixture did; and their stacks start at the
//! allocator's caller unless `--allocator-frames` (testdata/stacks/template_new.cpp). Run under
//! the BPF lock:
//! `flock /tmp/memtrack-bpf.lock cargo test --test views_stacks -- --test-threads=1`.

mod common;

use std::io::Read;
use std::path::Path;
use std::process::Command;

use common::*;
use prost::Message;

/// The recording of example.c with stacks, made once; None when this machine cannot record.
fn recording(test: &str) -> Option<&'static Path> {
    example_with_stacks(test, "views_stacks")
}

/// The folded lines of `--view VIEW --weight WEIGHT`.
fn folded(path: &Path, view: &str, weight: &str) -> Vec<(String, u64)> {
    folded_with(path, view, weight, &[])
}

/// The folded lines of `--view VIEW --weight WEIGHT` with `extra` flags.
fn folded_with(path: &Path, view: &str, weight: &str, extra: &[&str]) -> Vec<(String, u64)> {
    let file = path.to_str().unwrap();
    let args = [
        "report", file, "--format", "folded", "--view", view, "--weight", weight,
    ];
    let run = run(&[&args[..], extra].concat()).expect_code(0);
    run.stdout
        .lines()
        .map(|l| {
            let (stack, value) = l.rsplit_once(' ').expect("stack value");
            (stack.to_string(), value.parse().expect("a count"))
        })
        .collect()
}

/// The sum of `field` over the JSON report's sites.
fn json_sum(path: &Path, field: &str) -> u64 {
    let v = report_json(path, &["--stacks", "--stacks-top", "0"]);
    v["stacks"]["sites"]
        .as_array()
        .expect("sites")
        .iter()
        .map(|s| s[field].as_u64().expect(field))
        .sum()
}

/// (view, weight, the JSON sites' field it must add up to).
const CHECKED: [(&str, &str, &str); 6] = [
    ("peak", "bytes", "peak_live_bytes"),
    ("allocated", "bytes", "allocated_bytes"),
    ("allocated", "count", "allocations"),
    ("leaked", "bytes", "leaked_bytes"),
    ("leaked", "count", "leaked_blocks"),
    ("temporary", "count", "temporary"),
];

#[test]
fn folded_totals_equal_the_json_sites() {
    let Some(path) = recording("folded_totals_equal_the_json_sites") else {
        return;
    };
    for (view, weight, field) in CHECKED {
        let total: u64 = folded(path, view, weight).iter().map(|l| l.1).sum();
        assert_eq!(total, json_sum(path, field), "{view} {weight}");
    }
    let v = report_json(path, &[]);
    let peak = v["totals"]["heap"]["peak_live_bytes"].as_u64().unwrap();
    let lines = folded(path, "peak", "bytes");
    assert_eq!(lines.iter().map(|l| l.1).sum::<u64>(), peak);
    // At the peak the child holds its table (50000 x 96 + 400000 of calloc) while the parent
    // holds its own (10000 x 48 + 80000): all of it in main -> table, root first, table the
    // innermost frame (malloc's and calloc's frames left out).
    let table: u64 = lines
        .iter()
        .filter(|(s, _)| s.ends_with(";main;table"))
        .map(|l| l.1)
        .sum();
    assert_eq!(table, 50000 * 96 + 50000 * 8 + 10000 * 48 + 10000 * 8);
    assert_eq!(table, peak);
    // The leak on purpose: one 4096-byte block from main itself.
    let leaks = folded(path, "leaked", "bytes");
    assert!(
        leaks
            .iter()
            .any(|(s, v)| s.ends_with(";main") && *v == 4096),
        "{leaks:?}"
    );
    // 11 reallocs of the growing buffer, 1 KiB to 1 MiB: realloc's own frame is there with
    // --allocator-frames, and the stacks are the same but for the allocator's frames.
    let allocated = folded_with(path, "allocated", "bytes", &["--allocator-frames"]);
    assert_eq!(
        allocated.iter().map(|l| l.1).sum::<u64>(),
        json_sum(path, "allocated_bytes")
    );
    assert!(
        allocated
            .iter()
            .all(|(s, _)| s.rsplit(';').next().unwrap().contains("alloc")),
        "the allocator is every leaf: {allocated:?}"
    );
    let grow: u64 = allocated
        .iter()
        .filter(|(s, _)| s.contains("realloc"))
        .map(|l| l.1)
        .sum();
    assert_eq!(grow, (1u64 << 21) - 1024);
}

#[test]
fn flamegraph_svg_names_frames_with_their_values() {
    let Some(path) = recording("flamegraph_svg_names_frames_with_their_values") else {
        return;
    };
    let svg = scratch_file("views_stacks.svg");
    run(&[
        "report",
        path.to_str().unwrap(),
        "--format",
        "flamegraph",
        "-o",
        svg.to_str().unwrap(),
    ])
    .expect_code(0);
    let text = std::fs::read_to_string(&svg).unwrap();
    // Well-formed XML (python3 is in scripts/setup.sh).
    let parsed = Command::new("python3")
        .args([
            "-c",
            "import sys, xml.etree.ElementTree as t; t.parse(sys.argv[1])",
        ])
        .arg(&svg)
        .status()
        .unwrap();
    assert!(parsed.success(), "not XML: {}", svg.display());
    let peak = report_json(path, &[])["totals"]["heap"]["peak_live_bytes"]
        .as_u64()
        .unwrap();
    let grouped = |n: u64| {
        let s = n.to_string();
        let mut out = String::new();
        for (k, c) in s.chars().enumerate() {
            if k > 0 && (s.len() - k).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        out
    };
    let want = format!("<title>table ({} bytes, 100.00%)</title>", grouped(peak));
    assert!(text.contains(&want), "{want} missing");
    assert!(text.contains("live at the heap peak, in bytes"), "title");
}

#[test]
fn pprof_totals_and_top_functions_equal_the_json_sites() {
    let test = "pprof_totals_and_top_functions_equal_the_json_sites";
    let Some(path) = recording(test) else {
        return;
    };
    if Command::new("go").arg("version").output().is_err() {
        return skip(test, "go is not installed (golang-go)");
    }
    let pb = scratch_file("views_stacks.pb.gz");
    run(&[
        "report",
        path.to_str().unwrap(),
        "--format",
        "pprof",
        "-o",
        pb.to_str().unwrap(),
    ])
    .expect_code(0);
    for (index, field, unit) in [
        ("inuse_space", "peak_live_bytes", "B"),
        ("alloc_space", "allocated_bytes", "B"),
        ("alloc_objects", "allocations", ""),
        ("leaked_space", "leaked_bytes", "B"),
        ("leaked_objects", "leaked_blocks", ""),
        ("temporary_objects", "temporary", ""),
    ] {
        let out = run_command(
            Command::new("go")
                .args(["tool", "pprof", "-top"])
                .args((unit == "B").then_some("-unit=byte"))
                .arg(format!("-sample_index={index}"))
                .arg(&pb),
        )
        .expect_code(0);
        let want = format!("Total samples = {}{unit} ", json_sum(path, field));
        assert!(
            out.stdout.contains(&want),
            "{index}: {want:?} missing\n{}",
            out.stdout
        );
    }
    // The top function at the peak is table, the caller of malloc and calloc, with the
    // child's and parent's word tables and their arrays: the whole peak.
    let out = run_command(
        Command::new("go")
            .args([
                "tool",
                "pprof",
                "-top",
                "-unit=byte",
                "-sample_index=inuse_space",
            ])
            .arg(&pb),
    );
    let top = out
        .stdout
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"))
        .nth(1)
        .unwrap_or_default()
        .to_string();
    let table = 50000 * 96 + 50000 * 8 + 10000 * 48 + 10000 * 8;
    assert!(top.trim_start().starts_with(&format!("{table}B ")), "{top}");
    assert!(top.trim_end().ends_with(" table"), "{top}");
    // Samples carry their process.
    let raw =
        run_command(Command::new("go").args(["tool", "pprof", "-raw"]).arg(&pb)).expect_code(0);
    assert!(raw.stdout.contains("pid:["), "{}", raw.stdout);
    assert!(
        raw.stdout.contains("inuse_space/bytes[dflt]"),
        "{}",
        raw.stdout
    );
}

/// The profile.proto of `report FILE --format pprof` with `extra` flags, decoded.
fn pprof_profile(path: &Path, extra: &[&str]) -> memtrack::views::pprof::Profile {
    let pb = scratch_file("views_stacks_callers.pb.gz");
    let args = ["report", path.to_str().unwrap(), "--format", "pprof", "-o"];
    run(&[&args[..], &[pb.to_str().unwrap()], extra].concat()).expect_code(0);
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&pb).unwrap())
        .read_to_end(&mut bytes)
        .expect("gzip");
    memtrack::views::pprof::Profile::decode(bytes.as_slice()).expect("profile.proto")
}

/// Each sample's function names, innermost first: every location's lines (callee first).
fn sample_functions(p: &memtrack::views::pprof::Profile) -> Vec<(Vec<String>, i64)> {
    let alloc_space = 1; // pprof::SAMPLE_TYPES
    let function = |id: u64| {
        let f = p.function.iter().find(|f| f.id == id).expect("function");
        p.string_table[f.name as usize].clone()
    };
    p.sample
        .iter()
        .map(|s| {
            let names = s
                .location_id
                .iter()
                .flat_map(|&id| {
                    let l = p.location.iter().find(|l| l.id == id).expect("location");
                    l.line.iter().map(|line| function(line.function_id))
                })
                .collect();
            (names, s.value[alloc_space])
        })
        .collect()
}

/// Issue 32: `go tool pprof -top` put 99.7 % of a C++ program's bytes in `operator new`. The
/// stacks now start at the allocator's caller: in template_new.cpp (main -> build ->
/// Factory::make -> operator new(7781)) the innermost frame of the 7781-byte sample is
/// Factory::make, and no sample starts at an allocator; `--allocator-frames` brings operator
/// new back, the stacks otherwise the same.
#[test]
fn pprof_stacks_start_at_the_allocators_caller() {
    let test = "pprof_stacks_start_at_the_allocators_caller";
    if !can_record(test) {
        return;
    }
    let Some(exe) = require(
        test,
        build_fixture(
            "stacks/template_new.cpp",
            "views_stacks_template_new",
            &["-fomit-frame-pointer"],
        ),
    ) else {
        return;
    };
    let r = record(
        "views_stacks_template_new",
        &["--stacks"],
        &[exe.to_str().unwrap()],
    );
    assert_eq!(r.run.code(), 0, "{}", r.run.describe());
    let make = "Factory<Blob<(unsigned long)7781> >::make()";
    let new = "operator new(unsigned long)";
    let callers = sample_functions(&pprof_profile(&r.path, &[]));
    // The resident views' samples (pages the program made resident) weigh no heap bytes.
    let ours: Vec<_> = callers
        .iter()
        .filter(|(names, bytes)| *bytes > 0 && names.iter().any(|n| n == "main"))
        .collect();
    assert_eq!(ours.len(), 1, "one sample through main: {callers:?}");
    assert_eq!(ours[0].1, 7781, "{callers:?}");
    assert_eq!(
        ours[0].0[0], make,
        "the program's function first: {callers:?}"
    );
    assert!(
        ours[0].0[1].starts_with("Blob<(unsigned long)7781>* build<"),
        "{callers:?}"
    );
    // libstdc++'s own start-up pool, before main, starts at libstdc++'s code, not malloc.
    for (names, _) in &callers {
        let first = names[0].as_str();
        assert!(
            !first.contains("operator new") && !first.contains("malloc"),
            "a sample starts at the allocator: {callers:?}"
        );
    }
    let kept = sample_functions(&pprof_profile(&r.path, &["--allocator-frames"]));
    let ours: Vec<_> = kept
        .iter()
        .filter(|(names, bytes)| *bytes > 0 && names.iter().any(|n| n == "main"))
        .collect();
    assert_eq!(ours.len(), 1, "{kept:?}");
    assert_eq!(ours[0].0[0], new, "{kept:?}");
    assert_eq!(
        ours[0].0[1..],
        callers.iter().find(|(n, _)| n[0] == make).unwrap().0[..]
    );
    assert!(
        kept.iter()
            .filter(|(_, bytes)| *bytes > 0)
            .all(|(names, _)| names[0] == new || names[0].contains("malloc")),
        "every heap stack starts at the allocator: {kept:?}"
    );
}

#[test]
fn speedscope_matches_its_schema_and_the_json_sites() {
    let test = "speedscope_matches_its_schema_and_the_json_sites";
    let Some(path) = recording(test) else {
        return;
    };
    let schema = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/node/node_modules/speedscope/dist/release/file-format-schema.json");
    if !schema.exists() {
        return skip(
            test,
            "the speedscope npm package is not installed (scripts/setup.sh)",
        );
    }
    let file = scratch_file("views_stacks.speedscope.json");
    run(&[
        "report",
        path.to_str().unwrap(),
        "--format",
        "speedscope",
        "--view",
        "leaked",
        "-o",
        file.to_str().unwrap(),
    ])
    .expect_code(0);
    let check = run_command(
        // Debian's python3, which scripts/setup.sh gives python3-jsonschema (a python3 earlier
        // on PATH, pyenv's say, may not have it).
        Command::new("/usr/bin/python3")
            .args([
                "-c",
                "import json, sys, jsonschema; jsonschema.validate(json.load(open(sys.argv[1])), \
                 json.load(open(sys.argv[2])))",
            ])
            .arg(&file)
            .arg(&schema),
    );
    if check.stderr.contains("No module named 'jsonschema'") {
        return skip(test, "python3-jsonschema is not installed");
    }
    assert_eq!(check.code(), 0, "{}", check.describe());
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let profiles = v["profiles"].as_array().unwrap();
    let end = |name: &str| {
        let p = profiles.iter().find(|p| p["name"] == name).expect(name);
        let sum: u64 = p["weights"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_u64().unwrap())
            .sum();
        assert_eq!(p["endValue"].as_u64(), Some(sum), "{name}");
        sum
    };
    assert_eq!(
        end("live at the heap peak (bytes)"),
        json_sum(path, "peak_live_bytes")
    );
    assert_eq!(end("allocated (bytes)"), json_sum(path, "allocated_bytes"));
    assert_eq!(
        end("allocated (allocations)"),
        json_sum(path, "allocations")
    );
    assert_eq!(end("leaked (bytes)"), json_sum(path, "leaked_bytes"));
    assert_eq!(end("temporary (allocations)"), json_sum(path, "temporary"));
    assert_eq!(
        profiles[v["activeProfileIndex"].as_u64().unwrap() as usize]["name"],
        "leaked (bytes)"
    );
}

#[test]
fn stack_formats_need_stacks_and_their_flags_need_them() {
    let test = "stack_formats_need_stacks_and_their_flags_need_them";
    if !can_record(test) {
        return;
    }
    let r = record_fixture("views_stacks_plain", &["--no-stacks"], "malloc_free", &[]);
    let file = r.path.to_str().unwrap();
    for format in ["folded", "flamegraph", "pprof", "speedscope"] {
        run(&["report", file, "--format", format])
            .expect_failure(2, &["has no call stacks", "--stacks"]);
    }
    run(&["report", file, "--view", "leaked"]).expect_failure(2, &["--view and --weight"]);
    run(&["report", file, "--format", "json", "--weight", "count"])
        .expect_failure(2, &["--format folded"]);
}
