//! Every allocator, each allocation exactly once (issue 6): C++ operator new/delete, jemalloc,
//! mimalloc and tcmalloc linked dynamically, statically and preloaded, libraries loaded with
//! dlopen and used at once (also from two threads at the same moment), a statically linked
//! program executed by a wrapper, raw mappings, a Rust program with the system allocator and
//! with mimalloc, and real `python3` and `gcc` runs. Each test runs the real recorder on a
//! fixture from `testdata/alloc/` whose fingerprint sizes are listed in its header comment, and
//! compares what the file says with what the fixture did, exactly.

mod common;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use common::{
    build_fixture, cargo_fixture, record, record_with_env, require, system_library, Recording,
};
use memtrack::format::{map_bits, AllocFunc, Event, EventKind};

/// The allocation events (Alloc and Realloc) of `size` bytes in process `pid`.
fn sized(rec: &Recording, pid: u32, size: u64) -> Vec<&Event> {
    rec.allocs_of_size(size)
        .into_iter()
        .filter(|e| e.pid == pid)
        .collect()
}

fn func_of(e: &Event) -> AllocFunc {
    match e.kind {
        EventKind::Alloc { func, .. } | EventKind::Realloc { func, .. } => func,
        _ => unreachable!("not an allocation: {e:?}"),
    }
}

/// How many times the block `alloc` is released by its process before its address is handed
/// out again.
fn releases(rec: &Recording, alloc: &Event) -> usize {
    let addr = match alloc.kind {
        EventKind::Alloc { addr, .. } | EventKind::Realloc { addr, .. } => addr,
        _ => return 0,
    };
    let at = rec
        .events
        .iter()
        .position(|e| std::ptr::eq(e, alloc))
        .expect("an event of this recording");
    let mut n = 0;
    for e in rec.events[at + 1..].iter().filter(|e| e.pid == alloc.pid) {
        match e.kind {
            EventKind::Free { addr: a, .. } | EventKind::Realloc { old_addr: a, .. }
                if a == addr =>
            {
                n += 1
            }
            _ => {}
        }
        match e.kind {
            EventKind::Alloc { addr: a, .. } | EventKind::Realloc { addr: a, .. } if a == addr => {
                break
            }
            _ => {}
        }
    }
    n
}

/// Asserts that `pid` allocated exactly `count` blocks of each size in `sizes`, and released
/// each of them exactly once.
///
/// Only the fixture's own blocks are held to "exactly once": glibc frees the blocks still in a
/// thread's cache once more when the thread exits (`tcache_thread_shutdown`, through the
/// probed `free`), which the report counts as unknown frees.
fn assert_each_once(rec: &Recording, pid: u32, sizes: &[u64], count: usize) {
    for &size in sizes {
        let blocks = sized(rec, pid, size);
        check!(
            rec,
            blocks.len() == count,
            "{count} allocation(s) of {size} bytes, got {}: {blocks:?}",
            blocks.len()
        );
        for b in blocks {
            let n = releases(rec, b);
            check!(
                rec,
                n == 1,
                "block of {size} bytes released once, got {n}: {b:?}"
            );
        }
    }
}

fn assert_ran(rec: &Recording) {
    check!(rec, rec.code() == 0, "exit code");
    check!(rec, rec.lost() == 0, "no lost events");
    let stepped = single_stepped(rec);
    check!(
        rec,
        stepped
            .as_ref()
            .is_some_and(|s| s.iter().all(|s| s == "reallocarray in libc.so.6")),
        "every probe site is on an instruction the kernel emulates (issue 12), but glibc's \
         reallocarray, whose `mul` writes its third argument first: {stepped:?}"
    );
}

/// The probe sites the recorder says the kernel single-steps, as "FUNCTION in FILE", from its
/// summary line ("...; 2 probe sites single-stepped (a in x.so, b in y.so); ..."); None
/// without that line.
fn single_stepped(rec: &Recording) -> Option<Vec<String>> {
    let stderr = &rec.run.stderr;
    let line = stderr.lines().find(|l| l.contains("allocators: "))?;
    let Some((_, listed)) = line.split_once(" single-stepped (") else {
        return Some(Vec::new());
    };
    let listed = listed.split(')').next().unwrap_or("");
    Some(listed.split(", ").map(str::to_string).collect())
}

/// The coverage record of the file whose name starts with `file`, as (allocator, probes).
fn coverage_of(rec: &Recording, file: &str) -> Option<(String, u32)> {
    rec.coverage()
        .into_iter()
        .find_map(|(_, path, alloc, probes)| {
            let name = Path::new(&path).file_name()?.to_string_lossy().into_owned();
            name.starts_with(file).then_some((alloc, probes))
        })
}

/// An allocator library of the system: its name in the catalogue, shared library, link flags
/// for dynamic and static linking, and the fixture's define.
struct Allocator {
    name: &'static str,
    shared: &'static str,
    dynamic: &'static [&'static str],
    /// None when the distribution ships no static library (mimalloc on Debian 12).
    fully_static: Option<&'static [&'static str]>,
    define: &'static str,
}

const ALLOCATORS: [Allocator; 3] = [
    Allocator {
        name: "jemalloc",
        shared: "libjemalloc.so.2",
        dynamic: &["-ljemalloc"],
        fully_static: Some(&["-static", "-ljemalloc", "-lpthread", "-lm", "-ldl"]),
        define: "-DJEMALLOC",
    },
    Allocator {
        name: "mimalloc",
        shared: "libmimalloc.so.2",
        dynamic: &["-lmimalloc"],
        fully_static: None,
        define: "-DMIMALLOC",
    },
    Allocator {
        name: "tcmalloc",
        shared: "libtcmalloc_minimal.so.4",
        dynamic: &["-ltcmalloc_minimal"],
        // tcmalloc is C++: its static archive needs libstdc++ (c++ as the linker driver).
        fully_static: Some(&[
            "-static",
            "-ltcmalloc_minimal",
            "-lstdc++",
            "-lpthread",
            "-lm",
        ]),
        define: "-DTCMALLOC",
    },
];

/// The sizes every build of c_api.c allocates once (and frees), plus its 10 x 30011.
const C_API_ONCE: [u64; 5] = [30021, 30031, 30037, 30041, 30047];

/// The extra sizes the allocator's own API allocates in c_api.c.
fn own_api_sizes(name: &str) -> &'static [u64] {
    match name {
        "jemalloc" => &[30059, 30071, 30089],
        "mimalloc" => &[30059, 30071, 30089],
        _ => &[30059],
    }
}

fn assert_c_api(rec: &Recording, own: &[u64]) {
    assert_ran(rec);
    let root = rec.header.root_pid;
    assert_each_once(rec, root, &[30011], 10);
    assert_each_once(rec, root, &C_API_ONCE, 1);
    assert_each_once(rec, root, own, 1);
}

fn c_api(test: &str, alloc: &Allocator, out: &str, flags: &[&str]) -> Option<PathBuf> {
    let mut all = vec![alloc.define];
    all.extend_from_slice(flags);
    require(test, build_fixture("alloc/c_api.c", out, &all))
}

#[test]
fn jemalloc_mimalloc_tcmalloc_linked_dynamically() {
    let test = "jemalloc_mimalloc_tcmalloc_linked_dynamically";
    skip_unless_recording!(test);
    for alloc in &ALLOCATORS {
        let Some(exe) = c_api(test, alloc, &format!("c_api_{}", alloc.name), alloc.dynamic) else {
            continue;
        };
        let rec = record(
            &format!("dyn_{}", alloc.name),
            &[],
            &[exe.to_str().unwrap()],
        );
        assert_c_api(&rec, own_api_sizes(alloc.name));
        let cov = coverage_of(&rec, alloc.shared.split(".so").next().unwrap());
        check!(
            rec,
            matches!(&cov, Some((a, p)) if a == alloc.name && *p > 0),
            "coverage names {} with probes: {cov:?}",
            alloc.name
        );
    }
}

#[test]
fn jemalloc_and_tcmalloc_linked_statically() {
    let test = "jemalloc_and_tcmalloc_linked_statically";
    skip_unless_recording!(test);
    for alloc in &ALLOCATORS {
        let Some(flags) = alloc.fully_static else {
            eprintln!("{test}: Debian ships no static {}; not tested", alloc.name);
            continue;
        };
        let out = format!("c_api_{}_static", alloc.name);
        let Some(exe) = c_api(test, alloc, &out, flags) else {
            continue;
        };
        let rec = record(&out, &[], &[exe.to_str().unwrap()]);
        assert_c_api(&rec, own_api_sizes(alloc.name));
        let cov = coverage_of(&rec, &out);
        check!(
            rec,
            matches!(&cov, Some((a, p)) if a == alloc.name && *p > 0),
            "the executable itself holds {}: {cov:?}",
            alloc.name
        );
    }
}

#[test]
fn glibc_linked_statically() {
    skip_unless_recording!("glibc_linked_statically");
    let Some(exe) = require(
        "glibc_linked_statically",
        build_fixture("alloc/c_api.c", "c_api_glibc_static", &["-static"]),
    ) else {
        return;
    };
    let rec = record("c_api_glibc_static", &[], &[exe.to_str().unwrap()]);
    assert_c_api(&rec, &[]);
    let cov = coverage_of(&rec, "c_api_glibc_static");
    check!(
        rec,
        matches!(&cov, Some((a, p)) if a == "glibc" && *p > 0),
        "{cov:?}"
    );
}

#[test]
fn jemalloc_mimalloc_tcmalloc_preloaded() {
    let test = "jemalloc_mimalloc_tcmalloc_preloaded";
    skip_unless_recording!(test);
    let Some(exe) = require(test, build_fixture("alloc/c_api.c", "c_api_plain", &[])) else {
        return;
    };
    for alloc in &ALLOCATORS {
        let Some(lib) = require(test, system_library(alloc.shared)) else {
            continue;
        };
        let rec = record_with_env(
            &format!("preload_{}", alloc.name),
            &[],
            &[exe.to_str().unwrap()],
            &[("LD_PRELOAD", lib.as_os_str())],
        );
        assert_c_api(&rec, &[]);
        let cov = coverage_of(&rec, alloc.shared.split(".so").next().unwrap());
        check!(
            rec,
            matches!(&cov, Some((a, p)) if a == alloc.name && *p > 0),
            "{cov:?}"
        );
    }
}

/// The sizes of cxx_new_delete.cpp: (size, label with libstdc++).
const CXX_BLOCKS: [(u64, AllocFunc); 12] = [
    (20011, AllocFunc::New),
    (20023, AllocFunc::New),
    (20021, AllocFunc::NewArray),
    (20029, AllocFunc::NewArray),
    (20033, AllocFunc::New),
    (20039, AllocFunc::NewArray),
    (20047, AllocFunc::New),
    (20051, AllocFunc::New),
    (20057, AllocFunc::NewArray),
    (20063, AllocFunc::NewArray),
    (20069, AllocFunc::New),
    (20071, AllocFunc::NewArray),
];

#[test]
fn cxx_new_and_delete_in_every_variant() {
    let test = "cxx_new_and_delete_in_every_variant";
    skip_unless_recording!(test);
    // With libstdc++ as a shared library, and linked statically (with glibc) into the program.
    for (out, flags, lib) in [
        ("cxx_new_delete", &[][..], "libstdc++"),
        (
            "cxx_new_delete_static",
            &["-static"][..],
            "cxx_new_delete_static",
        ),
    ] {
        let Some(exe) = require(test, build_fixture("alloc/cxx_new_delete.cpp", out, flags)) else {
            continue;
        };
        let rec = record(out, &[], &[exe.to_str().unwrap()]);
        assert_cxx(&rec, lib);
    }
}

/// Every block of cxx_new_delete.cpp once, with its label and its delete, the two failures,
/// and `lib` (the file holding operator new) covered.
fn assert_cxx(rec: &Recording, lib: &str) {
    assert_ran(rec);
    let root = rec.header.root_pid;
    for (size, func) in CXX_BLOCKS {
        assert_each_once(rec, root, &[size], 1);
        let got = func_of(sized(rec, root, size)[0]);
        check!(rec, got == func, "{size} bytes by {func:?}, got {got:?}");
        let block = sized(rec, root, size)[0];
        let EventKind::Alloc { addr, .. } = block.kind else {
            unreachable!()
        };
        let release = rec
            .events
            .iter()
            .skip_while(|e| !std::ptr::eq(*e, block))
            .find(|e| matches!(e.kind, EventKind::Free { addr: a, .. } if a == addr));
        let want = if func == AllocFunc::New {
            AllocFunc::Delete
        } else {
            AllocFunc::DeleteArray
        };
        check!(
            rec,
            matches!(release, Some(Event { kind: EventKind::Free { func, .. }, .. }) if *func == want),
            "{size} released by {want:?}: {release:?}"
        );
    }
    // std::vector<int>(5003) goes through operator new too.
    assert_each_once(rec, root, &[20012], 1);
    let failed = rec.failures(AllocFunc::New);
    check!(
        rec,
        failed == vec![u64::MAX / 2, u64::MAX / 4],
        "the failing nothrow new and the caught throwing new, once each: {failed:?}"
    );
    check!(
        rec,
        matches!(coverage_of(rec, lib), Some((_, p)) if p > 0),
        "{lib} covered"
    );
}

#[test]
fn cxx_new_and_delete_of_preloaded_allocators() {
    let test = "cxx_new_and_delete_of_preloaded_allocators";
    skip_unless_recording!(test);
    let Some(exe) = require(
        test,
        build_fixture("alloc/cxx_new_delete.cpp", "cxx_new_delete", &[]),
    ) else {
        return;
    };
    for alloc in &ALLOCATORS {
        let Some(lib) = require(test, system_library(alloc.shared)) else {
            continue;
        };
        // These allocators implement operator new themselves, with a return probe: a
        // bad_alloc thrown through it terminates (see catalogue::plan), so the fixture skips
        // its throwing failure.
        let rec = record_with_env(
            &format!("cxx_preload_{}", alloc.name),
            &[],
            &[exe.to_str().unwrap(), "no-throw"],
            &[("LD_PRELOAD", lib.as_os_str())],
        );
        assert_ran(&rec);
        let root = rec.header.root_pid;
        let sizes: Vec<u64> = CXX_BLOCKS.iter().map(|b| b.0).collect();
        assert_each_once(&rec, root, &sizes, 1);
        check!(
            rec,
            rec.failures(AllocFunc::New).len() + rec.failures(AllocFunc::NewArray).len() == 1,
            "the failing nothrow new, once"
        );
    }
}

#[test]
fn dlopened_allocators_are_recorded_from_their_first_call() {
    let test = "dlopened_allocators_are_recorded_from_their_first_call";
    skip_unless_recording!(test);
    let (Some(exe), Some(tc), Some(mi)) = (
        require(
            test,
            build_fixture("alloc/dlopen_alloc.c", "dlopen_alloc", &["-ldl"]),
        ),
        require(test, system_library("libtcmalloc_minimal.so.4")),
        require(test, system_library("libmimalloc.so.2")),
    ) else {
        return;
    };
    let args = [
        exe.to_str().unwrap(),
        tc.to_str().unwrap(),
        mi.to_str().unwrap(),
    ];
    let rec = record("dlopen_alloc", &[], &args);
    assert_ran(&rec);
    assert_each_once(&rec, rec.header.root_pid, &[40009, 40013], 1);
    for (lib, name) in [
        ("libtcmalloc_minimal", "tcmalloc"),
        ("libmimalloc", "mimalloc"),
    ] {
        check!(
            rec,
            matches!(coverage_of(&rec, lib), Some((a, _)) if a == name),
            "{lib} covered"
        );
    }

    // Two threads dlopen different allocators at the same moment.
    let mut args = args.to_vec();
    args.push("threads");
    let rec = record("dlopen_alloc_threads", &[], &args);
    assert_ran(&rec);
    let root = rec.header.root_pid;
    assert_each_once(&rec, root, &[40019, 40021], 1);
    let tids: HashSet<u32> = [40019, 40021]
        .iter()
        .map(|&s| sized(&rec, root, s)[0].tid)
        .collect();
    check!(
        rec,
        tids.len() == 2 && !tids.contains(&root),
        "by two threads"
    );
}

#[test]
fn statically_linked_jemalloc_run_by_a_wrapper() {
    let test = "statically_linked_jemalloc_run_by_a_wrapper";
    skip_unless_recording!(test);
    let alloc = &ALLOCATORS[0];
    let out = "c_api_jemalloc_static";
    let Some(exe) = c_api(test, alloc, out, alloc.fully_static.unwrap()) else {
        return;
    };
    // The shell forks and executes the program (the `; true` keeps it from exec'ing itself).
    let script = format!("{}; true", exe.display());
    let rec = record("static_wrapper", &[], &["/bin/sh", "-c", &script]);
    assert_ran(&rec);
    let child = rec
        .execs()
        .into_iter()
        .find(|(_, f, _)| f.ends_with(out))
        .map(|(pid, _, _)| pid);
    let Some(child) = child else {
        panic!("no exec of {out}\n{}", rec.describe());
    };
    check!(rec, child != rec.header.root_pid, "a child of the shell");
    assert_each_once(&rec, child, &[30011], 10);
    assert_each_once(&rec, child, &C_API_ONCE, 1);
    assert_each_once(&rec, child, own_api_sizes("jemalloc"), 1);
}

#[test]
fn raw_mappings_are_recorded_on_success_only() {
    let test = "raw_mappings_are_recorded_on_success_only";
    skip_unless_recording!(test);
    let Some(exe) = require(test, build_fixture("alloc/mappings.c", "mappings", &[])) else {
        return;
    };
    let rec = record("mappings", &[], &[exe.to_str().unwrap()]);
    assert_ran(&rec);
    let root = rec.header.root_pid;
    let mine: Vec<&EventKind> = rec
        .events
        .iter()
        .filter(|e| e.pid == root)
        .map(|e| &e.kind)
        .collect();
    let Some(start) = mine
        .iter()
        .position(|k| matches!(k, EventKind::Mmap { len: 20487, .. }))
    else {
        panic!("no mmap of 20487 bytes\n{}", rec.describe());
    };
    let EventKind::Mmap {
        addr: a,
        prot,
        flags,
        ..
    } = *mine[start]
    else {
        unreachable!()
    };
    check!(
        rec,
        prot == 3 && flags & map_bits::MAP_ANONYMOUS != 0 && flags & map_bits::MAP_SHARED == 0,
        "anonymous private read-write: prot {prot:#x} flags {flags:#x}"
    );
    let page = u64::from(rec.header.page_size_bytes);
    let seq: Vec<&EventKind> = mine[start + 1..]
        .iter()
        .copied()
        .filter(|k| {
            matches!(
                k,
                EventKind::Mmap { .. }
                    | EventKind::Munmap { .. }
                    | EventKind::Mremap { .. }
                    | EventKind::Brk { .. }
            )
        })
        .take(6)
        .collect();
    let EventKind::Mremap {
        addr: b, old_len, ..
    } = *seq[1]
    else {
        panic!("second: mremap, got {:?}\n{}", seq[1], rec.describe());
    };
    let EventKind::Brk { from, to } = *seq[4] else {
        panic!("fifth: brk, got {:?}\n{}", seq[4], rec.describe());
    };
    let expected = [
        EventKind::Munmap {
            addr: a + page,
            len: page,
        },
        EventKind::Mremap {
            old_addr: a,
            old_len,
            addr: b,
            len: 7 * page,
        },
        EventKind::Munmap {
            addr: b,
            len: 7 * page,
        },
        EventKind::Munmap {
            addr: a + 2 * page,
            len: 4 * page,
        },
        EventKind::Brk {
            from,
            to: from + 65536,
        },
        EventKind::Brk { from: to, to: from },
    ];
    check!(
        rec,
        old_len == page && seq.len() == 6 && seq.iter().zip(&expected).all(|(g, w)| *g == w),
        "mapping calls in order, failures left out: {seq:?}"
    );
    check!(
        rec,
        rec.header.features.iter().any(|f| f == "mappings"),
        "feature"
    );
    // The report keeps them apart from the heap.
    let report = common::analyze(&rec.header, rec.events.clone(), Some(&rec.end));
    let m = report.totals.mapped.clone().expect("mapped metrics");
    check!(
        rec,
        m.mremaps == 1 && m.munmaps >= 4 && m.brks >= 2 && m.peak_anon_bytes >= 7 * page,
        "mapped metrics: {m:?}"
    );
}

/// Asserts that no process of `rec` released a block it allocated more often than it allocated
/// it, that it allocated something, and that glibc was found.
fn assert_balanced(rec: &Recording, min_allocs: usize) {
    assert_ran(rec);
    let pids: HashSet<u32> = rec.events.iter().map(|e| e.pid).collect();
    let allocs = rec
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Alloc { .. } | EventKind::Realloc { .. }))
        .count();
    check!(
        rec,
        allocs >= min_allocs,
        "at least {min_allocs} allocations, got {allocs}"
    );
    for pid in pids {
        let (double, _) = rec.release_balance(pid);
        check!(
            rec,
            double == 0,
            "pid {pid}: {double} blocks released twice"
        );
    }
    check!(
        rec,
        matches!(coverage_of(rec, "libc.so"), Some((a, _)) if a == "glibc"),
        "glibc covered"
    );
}

#[test]
fn python_frees_never_exceed_its_allocations() {
    let test = "python_frees_never_exceed_its_allocations";
    skip_unless_recording!(test);
    let python = Path::new("/usr/bin/python3");
    if require(
        test,
        python
            .exists()
            .then_some(())
            .ok_or_else(|| "no /usr/bin/python3".to_string()),
    )
    .is_none()
    {
        return;
    }
    let rec = record(
        "python",
        &[],
        &[
            "/usr/bin/python3",
            "-c",
            "import json; d = {str(i): list(range(i)) for i in range(300)}; print(len(json.dumps(d)))",
        ],
    );
    assert_balanced(&rec, 1000);
}

#[test]
fn gcc_frees_never_exceed_its_allocations() {
    let test = "gcc_frees_never_exceed_its_allocations";
    skip_unless_recording!(test);
    let dir = common::scratch_dir();
    let src = dir.join("gcc_input.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return 0; }\n",
    )
    .unwrap();
    let obj = dir.join("gcc_input.o");
    let rec = record(
        "gcc",
        &[],
        &[
            "gcc",
            "-O2",
            "-c",
            src.to_str().unwrap(),
            "-o",
            obj.to_str().unwrap(),
        ],
    );
    assert_balanced(&rec, 1000);
    // cc1 is C++: its operator new reaches malloc once per block, labelled new.
    let news = rec
        .events
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                EventKind::Alloc {
                    func: AllocFunc::New | AllocFunc::NewArray,
                    ..
                }
            )
        })
        .count();
    check!(rec, news > 0, "operator new in cc1");
}

#[test]
fn rust_with_the_system_allocator_and_with_mimalloc() {
    let test = "rust_with_the_system_allocator_and_with_mimalloc";
    skip_unless_recording!(test);
    let Some(bins) = require(test, cargo_fixture("rust-alloc", false)) else {
        return;
    };
    for (bin, allocator) in [("system", None), ("mimalloc", Some("mimalloc"))] {
        let exe = bins.join(bin);
        let rec = record(&format!("rust_{bin}"), &[], &[exe.to_str().unwrap()]);
        assert_ran(&rec);
        let root = rec.header.root_pid;
        assert_each_once(&rec, root, &[50021, 50023, 50047, 50051, 50053], 1);
        let grown = sized(&rec, root, 50047);
        check!(
            rec,
            matches!(grown[0].kind, EventKind::Realloc { .. }),
            "the Vec grew by realloc"
        );
        if let Some(allocator) = allocator {
            // mimalloc is linked into the executable itself.
            let cov = coverage_of(&rec, bin);
            check!(
                rec,
                matches!(&cov, Some((a, p)) if a == allocator && *p > 0),
                "{cov:?}"
            );
        }
    }
}

#[test]
fn a_stripped_allocator_is_reported_not_silently_zero() {
    let test = "a_stripped_allocator_is_reported_not_silently_zero";
    skip_unless_recording!(test);
    let alloc = &ALLOCATORS[0];
    let mut flags = alloc.fully_static.unwrap().to_vec();
    flags.push("-s");
    let Some(exe) = c_api(test, alloc, "c_api_jemalloc_stripped", &flags) else {
        return;
    };
    let rec = record("stripped", &[], &[exe.to_str().unwrap()]);
    assert_ran(&rec);
    check!(
        rec,
        rec.allocs_of_size(30011).is_empty(),
        "nothing to probe in a stripped static executable"
    );
    let stderr = &rec.run.stderr;
    check!(
        rec,
        stderr.contains("without a single allocator event") && stderr.contains("allocators:"),
        "the recorder says so"
    );
    check!(
        rec,
        matches!(coverage_of(&rec, "c_api_jemalloc_stripped"), Some((a, 0)) if a == "none"),
        "coverage: none found"
    );
}
