//! A program linked with musl (issue 34, item 5): its allocator is named musl (mallocng), not
//! glibc (musl defines `__libc_malloc` too, which is how glibc was recognised) nor malloc, for
//! a static program (musl inside the executable) and a dynamic one (musl's libc.so), with its
//! blocks counted exactly. The fixture is `testdata/alloc/musl.c`, built with Debian's
//! musl-gcc (musl-tools, scripts/setup.sh).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{record, report_json, run_command, scratch_dir, skip};
use memtrack::format::{AllocFunc, EventKind};

/// `testdata/alloc/musl.c` built by musl-gcc with `flags` as `out`, or `None` after saying why.
fn musl_fixture(test: &str, out: &str, flags: &[&str]) -> Option<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/alloc/musl.c");
    let exe = scratch_dir().join(out);
    let mut cc = Command::new("musl-gcc");
    cc.args(["-O2", "-g", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .args(flags);
    match cc.output() {
        Err(e) => {
            skip(
                test,
                &format!("musl-gcc cannot run ({e}): install musl-tools (scripts/setup.sh)"),
            );
            None
        }
        Ok(o) if !o.status.success() => {
            let built = run_command(&mut cc);
            panic!("musl-gcc failed\n{}", built.describe());
        }
        Ok(_) => Some(exe),
    }
}

/// Records `exe` and checks its 4 blocks of 3001 bytes (3 freed) and that the file `file`
/// (its name) is covered as `musl (mallocng)`, in the summary line and the report.
fn assert_musl_run(name: &str, exe: &Path, file: &str) {
    let rec = record(name, &[], &[exe.to_str().unwrap()]);
    check!(rec, rec.code() == 0 && rec.lost() == 0, "ran, nothing lost");
    let pid = rec.header.root_pid;
    let blocks: Vec<u64> = rec
        .events
        .iter()
        .filter(|e| e.pid == pid)
        .filter_map(|e| match e.kind {
            EventKind::Alloc {
                func: AllocFunc::Malloc,
                addr,
                size: 3001,
                ..
            } => Some(addr),
            _ => None,
        })
        .collect();
    check!(rec, blocks.len() == 4, "4 malloc(3001): {blocks:x?}");
    let freed = rec.frees_in(pid, &blocks[..3].iter().copied().collect());
    check!(rec, freed == 3, "the first 3 freed once each: {freed}");
    check!(
        rec,
        rec.frees_in(pid, &[blocks[3]].into_iter().collect()) == 0,
        "the last one is live"
    );
    let coverage = rec.coverage();
    let musl = coverage
        .iter()
        .find(|c| Path::new(&c.1).file_name().is_some_and(|n| n == file));
    check!(
        rec,
        musl.is_some_and(|c| c.2 == "musl (mallocng)"),
        "{file} is musl (mallocng): {coverage:?}"
    );
    check!(
        rec,
        rec.run
            .stderr
            .contains(&format!("allocators: musl (mallocng) in {file} (")),
        "the summary names musl"
    );
    check!(rec, !rec.run.stderr.contains("glibc"), "no glibc anywhere");
    let json = report_json(&rec.path, &[]);
    let files = json["run"]["files"].as_array().unwrap();
    check!(
        rec,
        files
            .iter()
            .any(|f| f["allocator"] == "musl (mallocng)"
                && f["path"].as_str().unwrap().ends_with(file)),
        "the report names musl: {files:?}"
    );
}

#[test]
fn a_static_musl_program_is_musl_not_glibc() {
    let test = "a_static_musl_program_is_musl_not_glibc";
    skip_unless_recording!(test);
    let Some(exe) = musl_fixture(test, "musl_static", &["-static"]) else {
        return;
    };
    assert_musl_run("musl_static", &exe, "musl_static");
}

#[test]
fn a_dynamic_musl_program_uses_musl() {
    let test = "a_dynamic_musl_program_uses_musl";
    skip_unless_recording!(test);
    let Some(exe) = musl_fixture(test, "musl_dynamic", &[]) else {
        return;
    };
    assert_musl_run("musl_dynamic", &exe, "libc.so");
}
