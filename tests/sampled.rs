//! Sampled stacks (issue 32) on the real recorder: `record --stack-sample` walks a byte-weighted
//! sample of the allocations, and the report estimates each site from it. On
//! testdata/stacks/sampled.c (three call paths of 20 MB each, blocks of 100, 1,000 and 40,000
//! bytes), every site's estimated bytes and count are within four standard deviations of the
//! exact figures, the estimator's own spread computed from the fixture's sizes; the totals stay
//! exact; two recordings with one seed walk the same allocations (their folded outputs are the
//! same bytes), and another seed walks others.

mod common;

use common::{record_fixture, report_json, run};
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
