//! Sampled stacks (issue 32) on the real recorder: `record --stack-sample` walks a byte-weighted
//! sample of the allocations, and the report estimates each site from it. On
//! testdata/stacks/sampled.c (three call paths of 20 MB each, blocks of 100, 1,000 and 40,000
//! bytes), every site's estimated bytes and count are within four standard deviations of the
//! exact figures, the estimator's own spread computed from the fixture's sizes; the totals stay
//! exact; two recordings with one seed walk the same allocations (their folded outputs are the
//! same bytes), and another seed walks others. A walk made at a call's return, for a call
//! sampled before the walker was in place, gives the stack `--stacks` walks at its entry; a
//! walker that failed to load stops no process.

mod common;

use std::collections::HashMap;

use common::{build_fixture, record_fixture, record_with_env, report_json, run};
use memtrack::format::{Event, EventKind};
use serde_json::Value;

/// The mean requested bytes between walks the tests record with.
const MEAN: u64 = 16 << 10;

/// (function, blocks, bytes of each) of the fixture's call paths.
const PATHS: [(&str, u64, u64); 3] = [
    ("small", 200_000, 100),
    ("medium", 20_000, 1_000),
    ("large", 500, 40_000),
];

fn sampled(name: &str, seed: &str) -> common::Recording {
    let mean = MEAN.to_string();
    let args = ["--no-rss", "--stack-sample", &mean, "--stack-seed", seed];
    let rec = record_fixture(name, &args, "stacks/sampled", &[]);
    assert_eq!(rec.run.code(), 0, "{}", rec.run.describe());
    rec
}

/// The site of the fixture's function `name` (its first frame past malloc).
fn site<'a>(sites: &'a [Value], name: &str) -> &'a Value {
    sites
        .iter()
        .find(|s| s["frames"][1]["function"] == name)
        .unwrap_or_else(|| panic!("no site of {name}: {sites:#?}"))
}

/// The standard deviation of the estimate of `n` blocks of `size` bytes, each walked with
/// probability p = 1 - exp(-size / MEAN) and weighed 1/p: sqrt(n (1-p)/p) times the weight.
fn spread(n: u64, size: u64) -> (f64, f64) {
    let p = -(-(size as f64) / MEAN as f64).exp_m1();
    let p = if size >= MEAN { 1.0 } else { p };
    let blocks = (n as f64 * (1.0 - p) / p).sqrt();
    (blocks, blocks * size as f64)
}

#[test]
fn sampled_sites_estimate_the_exact_ones() {
    skip_unless_recording!("sampled_sites_estimate_the_exact_ones");
    let rec = sampled("sampled_estimates", "0");
    let r = report_json(
        &rec.path,
        &["--stacks", "--stacks-by", "allocated", "--stacks-top", "0"],
    );
    let stacks = &r["stacks"];
    let sampling = &stacks["sampling"];
    assert_eq!(sampling["mean_bytes"], MEAN, "{stacks:#}");
    let sites = stacks["sites"].as_array().unwrap();
    for (name, n, size) in PATHS {
        let s = site(sites, name);
        let (sd_blocks, sd_bytes) = spread(n, size);
        let blocks = s["allocations"].as_u64().unwrap() as f64;
        let bytes = s["allocated_bytes"].as_u64().unwrap() as f64;
        let (want_blocks, want_bytes) = (n as f64, (n * size) as f64);
        assert!(
            (blocks - want_blocks).abs() <= 4.0 * sd_blocks + 0.5,
            "{name}: {blocks} blocks estimated for {n} (sd {sd_blocks:.0})"
        );
        assert!(
            (bytes - want_bytes).abs() <= 4.0 * sd_bytes + 0.5,
            "{name}: {bytes} bytes estimated for {want_bytes} (sd {sd_bytes:.0})"
        );
        if size >= MEAN {
            // Always walked: exact.
            assert_eq!((blocks, bytes), (want_blocks, want_bytes), "{name}");
        }
    }
    // What the estimates stand on: every allocation counted, a few per cent walked.
    let allocations = sampling["allocations"].as_u64().unwrap();
    let walked = sampling["sampled_allocations"].as_u64().unwrap();
    let all: u64 = PATHS.iter().map(|p| p.1).sum();
    assert!(allocations >= all, "{sampling:#}");
    assert!(walked > 500 && walked < all / 5, "{sampling:#}");
    // Every view says the sites are estimates (views::words): the text and the functions.
    let text = common::report_text(&rec.path, &["--stacks", "--functions"], None);
    assert!(
        text.matches("estimated from").count() >= 2,
        "sites and functions both marked:\n{text}"
    );
    let functions = report_json(&rec.path, &["--functions"]);
    assert_eq!(functions["functions"]["sampling"]["mean_bytes"], MEAN);
    // The heap's own figures stay exact: every allocation, and the bytes to the byte.
    let heap = &r["totals"]["heap"];
    assert_eq!(heap["allocs"].as_u64(), Some(allocations), "{heap:#}");
    let bytes: u64 = PATHS.iter().map(|p| p.1 * p.2).sum();
    assert!(
        heap["bytes_allocated"].as_u64().unwrap() >= bytes,
        "{heap:#}"
    );
}

#[test]
fn one_seed_walks_the_same_allocations() {
    skip_unless_recording!("one_seed_walks_the_same_allocations");
    let folded = |rec: &common::Recording| {
        let out = run(&["report", "--format", "folded", rec.path.to_str().unwrap()]);
        assert_eq!(out.code(), 0, "{}", out.describe());
        out.stdout
    };
    let a = folded(&sampled("sampled_seed_a", "7"));
    let b = folded(&sampled("sampled_seed_b", "7"));
    assert!(!a.is_empty());
    assert_eq!(a, b, "one seed, one deterministic program: the same sample");
    let c = folded(&sampled("sampled_seed_c", "8"));
    assert_ne!(a, c, "another seed walks other allocations");
}

/// Each successful allocation's stack, in the order of the events: (file, offset) frames,
/// innermost first, empty for one without a stack.
fn stacks_of(events: &[Event]) -> Vec<Vec<(String, u64)>> {
    let mut modules = HashMap::new();
    let mut nodes = HashMap::new();
    let mut out = Vec::new();
    for e in events {
        match &e.kind {
            EventKind::Module(m) => {
                modules.insert(m.id, m.path.clone());
            }
            EventKind::StackNode {
                id,
                parent,
                module,
                offset,
            } => {
                nodes.insert(*id, (*parent, *module, *offset));
            }
            EventKind::Alloc { stack_id, .. } | EventKind::Realloc { stack_id, .. } => {
                let mut frames = Vec::new();
                let mut id = *stack_id;
                while let Some(&(parent, module, offset)) = nodes.get(&id) {
                    let file = modules
                        .get(&module)
                        .cloned()
                        .unwrap_or_else(|| "[mark]".into());
                    frames.push((file, offset));
                    id = parent;
                }
                out.push(frames);
            }
            _ => {}
        }
    }
    out
}

/// testdata/stacks/sampled_new.cpp (60,000 news and mallocs from a few call paths) recorded
/// with `args` and `env`, which must exit 0.
fn sampled_new(name: &str, args: &[&str], env: &[(&str, &str)]) -> common::Recording {
    let cxx = build_fixture("stacks/sampled_new.cpp", "stacks_sampled_new", &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let env: Vec<_> = env
        .iter()
        .map(|&(k, v)| (k, std::ffi::OsStr::new(v)))
        .collect();
    let rec = record_with_env(name, args, &[cxx.to_str().unwrap()], &env);
    assert_eq!(rec.code(), 0, "{}", rec.describe());
    rec
}

#[test]
fn walks_at_the_return_are_the_entrys_walks() {
    skip_unless_recording!("walks_at_the_return_are_the_entrys_walks");
    let exact = sampled_new("walk_return_exact", &["--no-rss", "--stacks"], &[]);
    let at_return = sampled_new(
        "walk_return_sampled",
        &["--no-rss", "--stack-sample", "4KiB"],
        &[("MEMTRACK_TEST_WALK_AT_RETURN", "1")],
    );
    // Every sampled call stopped for the walker and was walked at its return.
    assert!(
        at_return.run.stderr.contains("stops for the walker"),
        "{}",
        at_return.describe()
    );
    let (want, got) = (stacks_of(&exact.events), stacks_of(&at_return.events));
    assert_eq!(want.len(), got.len(), "one program, the same allocations");
    let mut compared = 0;
    for (i, (want, got)) in want.iter().zip(&got).enumerate() {
        if got.is_empty() {
            continue; // not sampled
        }
        assert!(
            want.len() > 3,
            "allocation {i}: the exact stack is {want:?}"
        );
        assert_eq!(
            got,
            want,
            "allocation {i}: walked at the return, and at the entry\n{}",
            at_return.describe()
        );
        compared += 1;
    }
    // 60,000 news and mallocs of 4.6 MB in all, one walk per 4 KiB on average.
    assert!(compared > 500, "only {compared} allocations were walked");
}

/// How many times the recording stopped a process for the walker, from its closing line
/// ("…; 1 stop for the walker, …" or "N stops for the walker"); 0 if it says none.
fn walker_stops(stderr: &str) -> u64 {
    let Some(at) = stderr.find(" for the walker") else {
        return 0;
    };
    let before = stderr[..at].trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let number = before.trim_end().rsplit(' ').next().unwrap_or("");
    number
        .parse()
        .unwrap_or_else(|_| panic!("no count before \"for the walker\" in {stderr}"))
}

/// A walker that failed to load (as where a kernel's verifier refuses it) stops no process:
/// every allocation is recorded without a stack, and the failure is said.
#[test]
fn a_walker_that_failed_to_load_stops_no_process() {
    skip_unless_recording!("a_walker_that_failed_to_load_stops_no_process");
    let plain = sampled_new("walker_failed_plain", &["--no-rss", "--no-stacks"], &[]);
    // With `--stacks` every call is sampled: each one stopped its process for the walker
    // that had failed, 60,000 stops here.
    let failed = sampled_new(
        "walker_failed",
        &["--no-rss", "--stacks"],
        &[("MEMTRACK_TEST_WALKER_FAILS", "1")],
    );
    let stderr = &failed.run.stderr;
    assert!(
        stderr.contains("call stacks are not walked: the walker did not load"),
        "the failure is said\n{}",
        failed.describe()
    );
    // The first sampled call may come before the failure is known, and wait for it.
    let stops = walker_stops(stderr);
    assert!(
        stops <= 1,
        "{stops} stops for the walker\n{}",
        failed.describe()
    );
    // Every allocation is recorded all the same, none with a frame of a file (at most the
    // mark that says it has no stack).
    let (want, got) = (stacks_of(&plain.events), stacks_of(&failed.events));
    assert_eq!(want.len(), got.len(), "the same allocations");
    assert!(want.len() >= 60_000, "{} allocations", want.len());
    let walked = got.iter().flatten().find(|(file, _)| file != "[mark]");
    assert!(walked.is_none(), "a frame without a walker: {walked:?}");
    // And the report says why its sites have no stack, not that the file was cut short.
    let text = common::report_text(&failed.path, &["--stacks"], Some("400"));
    assert!(
        text.contains("stack walks: none: the stack walker did not load where this was recorded"),
        "{text}"
    );
}
