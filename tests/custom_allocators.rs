//! Allocators memtrack does not know (issue 18): a program's own pool allocator named with
//! `record --allocator`, linked into the executable and from a shared library, each allocation
//! exactly once under the pool's label (the slab malloc nested in pool_alloc is not reported);
//! an allocator no file defines is a warning; a bad spec is a usage error. The fixture is
//! `testdata/alloc/pool.c`, whose fingerprint sizes its header comment lists.

mod common;

use std::path::Path;

use common::{record, report_json, require_fixture, run, skip, Recording};
use memtrack::format::{AllocFunc, EventKind};

/// The pool's four functions, family "pool"; the pool is every function's first argument.
const POOL: [&str; 8] = [
    "--allocator",
    "pool:pool_alloc=alloc(size=arg2)",
    "--allocator",
    "pool:pool_calloc=calloc(n=arg2,size=arg3)",
    "--allocator",
    "pool:pool_realloc=realloc(ptr=arg2,size=arg3)",
    "--allocator",
    "pool:pool_free=free(ptr=arg2)",
];

/// The allocation events of `pid` of `size` bytes, as (label, address, old address).
fn of_size(rec: &Recording, pid: u32, size: u64) -> Vec<(AllocFunc, u64, Option<u64>)> {
    rec.events
        .iter()
        .filter(|e| e.pid == pid)
        .filter_map(|e| match e.kind {
            EventKind::Alloc {
                func,
                addr,
                size: s,
                ..
            } if s == size => Some((func, addr, None)),
            EventKind::Realloc {
                func,
                addr,
                old_addr,
                size: s,
                ..
            } if s == size => Some((func, addr, Some(old_addr))),
            _ => None,
        })
        .collect()
}

/// The addresses `pid` released with `func`.
fn frees(rec: &Recording, pid: u32, func: AllocFunc) -> Vec<u64> {
    rec.events
        .iter()
        .filter(|e| e.pid == pid)
        .filter_map(|e| match e.kind {
            EventKind::Free { func: f, addr } if f == func => Some(addr),
            _ => None,
        })
        .collect()
}

/// What the fixture did, exactly, and that the file that defines the pool is reported as
/// family "pool" with its 7 probes (3 allocating functions at entry and return, 1 free).
fn assert_pool_run(rec: &Recording, pool_file: &str) {
    check!(rec, rec.code() == 0, "exit code");
    check!(rec, rec.lost() == 0, "no lost events");
    let pid = rec.header.root_pid;
    let a = of_size(rec, pid, 3001);
    check!(rec, a.len() == 5, "5 pool_alloc blocks of 3001: {a:?}");
    check!(
        rec,
        a.iter().all(|b| b.0 == AllocFunc::CustomAlloc),
        "labelled custom alloc: {a:?}"
    );
    let c = of_size(rec, pid, 3017);
    check!(
        rec,
        c.len() == 2 && c.iter().all(|b| b.0 == AllocFunc::CustomCalloc),
        "2 pool_calloc(7, 431) blocks, once each (not again as the pool_alloc they call): {c:?}"
    );
    let r = of_size(rec, pid, 3023);
    check!(
        rec,
        r == [(AllocFunc::CustomRealloc, r[0].1, Some(a[0].1))],
        "one pool_realloc of the first block: {r:?}"
    );
    let m = of_size(rec, pid, 3031);
    check!(
        rec,
        m.len() == 1 && m[0].0 == AllocFunc::Malloc,
        "the malloc view is unchanged: {m:?}"
    );
    check!(
        rec,
        of_size(rec, pid, 8209).is_empty(),
        "the slabs malloc'd inside pool_alloc are nested, never reported"
    );
    let mut freed = frees(rec, pid, AllocFunc::CustomFree);
    freed.sort_unstable();
    let mut expected = vec![a[1].1, a[2].1, a[3].1, c[0].1, c[1].1, r[0].1];
    expected.sort_unstable();
    check!(
        rec,
        freed == expected,
        "pool_free released exactly the 6 blocks the fixture freed (not the realloc's old \
         block again, which pool_realloc frees inside): {freed:x?} vs {expected:x?}"
    );
    check!(
        rec,
        frees(rec, pid, AllocFunc::Free).contains(&m[0].1),
        "free of the malloc block"
    );
    let coverage = rec.coverage();
    let pool = coverage
        .iter()
        .find(|c| Path::new(&c.1).file_name().is_some_and(|n| n == pool_file));
    check!(
        rec,
        pool.is_some_and(|c| c.2 == "pool" && c.3 == 7),
        "{pool_file} is covered as family pool with 7 probes: {coverage:?}"
    );
    let stderr = &rec.run.stderr;
    check!(
        rec,
        stderr.contains(&format!("pool in {pool_file} (7 probes)")),
        "the summary line names the family"
    );
    check!(rec, !stderr.contains("warning"), "no warning");

    // The report's totals: the fixture's own blocks are all there is besides stdout's buffer.
    let json = report_json(&rec.path, &[]);
    let files = json["run"]["files"].as_array().unwrap();
    check!(
        rec,
        files
            .iter()
            .any(|f| f["allocator"] == "pool" && f["path"].as_str().unwrap().ends_with(pool_file)),
        "the JSON report names the family: {files:?}"
    );
}

/// The pool fixture with its allocator linked into the executable, or `None` when `test` skips.
fn pool_static(test: &str) -> Option<std::path::PathBuf> {
    require_fixture(test, "alloc/pool.c", "pool_static", &["-DPOOL_STATIC"])
}

#[test]
fn pool_allocator_in_the_executable_is_recorded_exactly() {
    let test = "pool_allocator_in_the_executable_is_recorded_exactly";
    skip_unless_recording!(test);
    let Some(exe) = pool_static(test) else {
        return;
    };
    let rec = record("pool_static", &POOL, &[exe.to_str().unwrap()]);
    assert_pool_run(&rec, "pool_static");
}

#[test]
fn pool_allocator_in_a_shared_library_is_recorded_exactly() {
    let test = "pool_allocator_in_a_shared_library_is_recorded_exactly";
    skip_unless_recording!(test);
    let Some(lib) = require_fixture(
        test,
        "alloc/pool_alloc.c",
        "libpool.so",
        &["-shared", "-fPIC"],
    ) else {
        return;
    };
    let dir = lib.parent().unwrap().to_str().unwrap().to_string();
    let rpath = format!("-Wl,-rpath,{dir}");
    let Some(exe) = require_fixture(
        test,
        "alloc/pool.c",
        "pool_shared",
        &[lib.to_str().unwrap(), &rpath],
    ) else {
        return;
    };
    let rec = record("pool_shared", &POOL, &[exe.to_str().unwrap()]);
    assert_pool_run(&rec, "libpool.so");
}

#[test]
fn an_allocator_no_file_defines_is_a_warning() {
    let test = "an_allocator_no_file_defines_is_a_warning";
    skip_unless_recording!(test);
    let Some(exe) = pool_static(test) else {
        return;
    };
    let rec = record(
        "pool_unknown",
        &[
            "-q",
            "--allocator",
            "pool_alloc=alloc(size=arg2)",
            "--allocator",
            "pool_grab=alloc(size=arg1)",
        ],
        &[exe.to_str().unwrap()],
    );
    check!(rec, rec.code() == 0, "exit code");
    let stderr = &rec.run.stderr;
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("warning")).collect();
    check!(
        rec,
        warnings
            == [
                "memtrack: warning: --allocator pool_grab: no file of the recorded tree defines \
                 pool_grab; nothing was recorded for it"
            ],
        "one warning, for the symbol no file defines, even with -q: {warnings:?}"
    );
    let a = of_size(&rec, rec.header.root_pid, 3001);
    check!(rec, a.len() == 5, "pool_alloc is still recorded: {a:?}");
}

#[test]
fn a_bad_allocator_spec_is_one_usage_line() {
    for (spec, says) in [
        ("pool_alloc", "no '=' between the symbol and what it does"),
        ("pool_alloc=alloc(size=arg9)", "'arg9' is not arg1 to arg6"),
        (
            "pool_alloc=grab(size=arg1)",
            "'grab' is not alloc, calloc, realloc or free",
        ),
    ] {
        let run = run(&[
            "record",
            "-o",
            "/dev/null",
            "--allocator",
            spec,
            "--",
            "true",
        ])
        .expect_failure(125, &[]);
        assert!(
            run.stderr
                .starts_with(&format!("memtrack: --allocator '{spec}': {says}; give ")),
            "{}",
            run.describe()
        );
    }
    run(&[
        "record",
        "-o",
        "/dev/null",
        "--python-objects",
        "--allocator",
        "PyObject_Malloc=alloc(size=arg1)",
        "--",
        "true",
    ])
    .expect_code(125)
    .expect_stderr("PyObject_Malloc is named twice");
}

/// Calls CPython's allocator functions through their exported symbols (ctypes), with sizes
/// above pymalloc's 512-byte limit, so that each falls back to malloc inside: 7
/// PyObject_Malloc(100003), 2 PyMem_Malloc(100007), 1 PyObject_Calloc(7, 14293) = 100051 resized
/// by PyObject_Realloc to 100103, all freed with PyObject_Free / PyMem_Free; and 3 malloc(30011)
/// freed with free, which the malloc view sees as today.
const PYTHON_WORKLOAD: &str = "\
import ctypes
api = ctypes.pythonapi
for f in (api.PyObject_Malloc, api.PyMem_Malloc, api.PyObject_Calloc, api.PyObject_Realloc):
    f.restype = ctypes.c_void_p
api.PyObject_Realloc.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
api.PyObject_Free.argtypes = (ctypes.c_void_p,)
api.PyMem_Free.argtypes = (ctypes.c_void_p,)
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = (ctypes.c_void_p,)
objs = [api.PyObject_Malloc(100003) for _ in range(7)]
mems = [api.PyMem_Malloc(100007) for _ in range(2)]
c = api.PyObject_Calloc(7, 14293)
r = api.PyObject_Realloc(c, 100103)
raw = [libc.malloc(30011) for _ in range(3)]
for p in objs + [r]: api.PyObject_Free(p)
for p in mems: api.PyMem_Free(p)
for p in raw: libc.free(p)
";

/// The labels of `pid`'s allocations of `size` bytes, sorted.
fn labels(rec: &Recording, pid: u32, size: u64) -> Vec<AllocFunc> {
    let mut l: Vec<AllocFunc> = of_size(rec, pid, size).iter().map(|b| b.0).collect();
    l.sort_unstable();
    l
}

#[test]
fn python_objects_preset_counts_each_block_once() {
    let test = "python_objects_preset_counts_each_block_once";
    skip_unless_recording!(test);
    let python = "/usr/bin/python3";
    if !Path::new(python).exists() {
        return skip(
            test,
            &format!("{python} is not installed (scripts/setup.sh)"),
        );
    }
    // Today's malloc view: pymalloc's fallback is a malloc of the same size.
    let plain = record("python_plain", &[], &[python, "-c", PYTHON_WORKLOAD]);
    check!(plain, plain.code() == 0 && plain.lost() == 0, "ran");
    let pid = plain.header.root_pid;
    check!(
        plain,
        labels(&plain, pid, 100003) == [AllocFunc::Malloc; 7],
        "without the preset, PyObject_Malloc's blocks are the mallocs it makes"
    );
    check!(
        plain,
        labels(&plain, pid, 30011) == [AllocFunc::Malloc; 3],
        "the malloc view"
    );

    let rec = record(
        "python_objects",
        &["--python-objects"],
        &[python, "-c", PYTHON_WORKLOAD],
    );
    check!(rec, rec.code() == 0 && rec.lost() == 0, "ran");
    let pid = rec.header.root_pid;
    for (size, want) in [
        (100003, vec![AllocFunc::CustomAlloc; 7]),
        (100007, vec![AllocFunc::CustomAlloc; 2]),
        (100051, vec![AllocFunc::CustomCalloc]),
        (100103, vec![AllocFunc::CustomRealloc]),
        (30011, vec![AllocFunc::Malloc; 3]),
    ] {
        let got = labels(&rec, pid, size);
        check!(
            rec,
            got == want,
            "{size} bytes: each block once, under the outermost label (the malloc pymalloc \
             makes inside is nested): {got:?}"
        );
    }
    let python_blocks: Vec<u64> = [100003, 100007, 100103]
        .into_iter()
        .flat_map(|s| of_size(&rec, pid, s))
        .map(|b| b.1)
        .collect();
    let mut freed = frees(&rec, pid, AllocFunc::CustomFree);
    freed.retain(|a| python_blocks.contains(a));
    check!(
        rec,
        freed.len() == 10,
        "the 10 python blocks released once each, not again as the free inside: {freed:x?}"
    );
    let plain_frees = frees(&rec, pid, AllocFunc::Free);
    check!(
        rec,
        !plain_frees.iter().any(|a| python_blocks.contains(a)),
        "no free of a python block under free's label"
    );
    let raw: Vec<u64> = of_size(&rec, pid, 30011).iter().map(|b| b.1).collect();
    check!(
        rec,
        raw.iter().all(|a| plain_frees.contains(a)),
        "the malloc blocks freed by free"
    );
    let coverage = rec.coverage();
    check!(
        rec,
        coverage.iter().any(|c| c.2 == "python" && c.3 == 14),
        "python3.11 is covered as family python with 14 probes: {coverage:?}"
    );
}

/// The addresses of `pid`'s allocations of `size` bytes labelled `func`.
fn blocks_of(rec: &Recording, pid: u32, size: u64, func: AllocFunc) -> Vec<u64> {
    of_size(rec, pid, size)
        .into_iter()
        .filter(|b| b.0 == func)
        .map(|b| b.1)
        .collect()
}

/// Issue 34, item 2: allocator functions of one instruction (testdata/alloc/one_instruction.c).
/// A free that is a bare `ret` and is called records each call (its site is single-stepped,
/// which works); a `jmp` tail call to malloc or free records each block once under the custom
/// label; a bare `ret` whose calls gcc removed (what was reported as "0 of 518 frees") records
/// nothing, and the recorder says why in one warning per such function.
#[test]
fn one_instruction_allocator_functions_record_every_call_made() {
    let test = "one_instruction_allocator_functions_record_every_call_made";
    skip_unless_recording!(test);
    let Some(exe) = require_fixture(
        test,
        "alloc/one_instruction.c",
        "one_instruction",
        &["-O1", "-foptimize-sibling-calls", "-fcf-protection=none"],
    ) else {
        return;
    };
    let rec = record(
        "one_instruction",
        &[
            "-v",
            "--allocator",
            "pool:pool_alloc=alloc(size=arg1)",
            "--allocator",
            "pool:pool_free=free(ptr=arg1)",
            "--allocator",
            "pool:dropped_free=free(ptr=arg1)",
            "--allocator",
            "wrap:wrap_alloc=alloc(size=arg1)",
            "--allocator",
            "wrap:wrap_free=free(ptr=arg1)",
        ],
        &[exe.to_str().unwrap()],
    );
    check!(rec, rec.code() == 0 && rec.lost() == 0, "ran, nothing lost");
    let stderr = &rec.run.stderr;
    check!(
        rec,
        stderr.contains("pool_free (ret)") && stderr.contains("dropped_free (ret)"),
        "both frees are a single `ret`, single-stepped"
    );
    check!(
        rec,
        !stderr.contains("wrap_alloc (") && !stderr.contains("wrap_free ("),
        "the tail calls are emulated jumps, not single-stepped"
    );
    let pid = rec.header.root_pid;

    let pool = blocks_of(&rec, pid, 3001, AllocFunc::CustomAlloc);
    check!(rec, pool.len() == 10, "10 pool blocks of 3001: {pool:x?}");
    let mut freed = frees(&rec, pid, AllocFunc::CustomFree);
    freed.retain(|a| pool.contains(a));
    freed.sort_unstable();
    let mut first7 = pool[..7].to_vec();
    first7.sort_unstable();
    check!(
        rec,
        freed == first7,
        "the `ret` free released exactly the 7 blocks it was called with: {freed:x?}"
    );

    let dropped = blocks_of(&rec, pid, 3019, AllocFunc::CustomAlloc);
    check!(
        rec,
        dropped.len() == 5,
        "5 pool blocks of 3019: {dropped:x?}"
    );
    let all_frees = rec
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Free { addr, .. } if dropped.contains(&addr)))
        .count();
    check!(
        rec,
        all_frees == 0,
        "no call of dropped_free is left in the program, so nothing frees its blocks"
    );

    let wrapped = blocks_of(&rec, pid, 3011, AllocFunc::CustomAlloc);
    check!(rec, wrapped.len() == 6, "6 wrap_alloc blocks: {wrapped:x?}");
    check!(
        rec,
        blocks_of(&rec, pid, 3011, AllocFunc::Malloc).is_empty(),
        "the malloc wrap_alloc jumps to is nested, not reported again"
    );
    let mut wrap_freed = frees(&rec, pid, AllocFunc::CustomFree);
    wrap_freed.retain(|a| wrapped.contains(a));
    wrap_freed.sort_unstable();
    let mut first4 = wrapped[..4].to_vec();
    first4.sort_unstable();
    check!(
        rec,
        wrap_freed == first4,
        "wrap_free released exactly its 4 blocks once: {wrap_freed:x?}"
    );
    check!(
        rec,
        !frees(&rec, pid, AllocFunc::Free)
            .iter()
            .any(|a| wrapped.contains(a)),
        "and the free it jumps to did not report them again"
    );

    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("warning")).collect();
    let bare = |name: &str| {
        format!(
            "memtrack: warning: --allocator {name}: {name} in one_instruction is a bare `ret` \
             (it does nothing), so a compiler that sees it may remove the calls to it (gcc does \
             from -O1) and a removed call records nothing; build {name} with \
             __attribute__((noipa)) or in its own file to keep the calls"
        )
    };
    check!(
        rec,
        warnings == [bare("pool_free"), bare("dropped_free")],
        "one line for each function that only returns: {warnings:?}"
    );
}
