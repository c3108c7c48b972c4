//! No input makes `report`, `check` or `dump` panic: a real recording is damaged thousands of
//! ways (byte flips, truncations, duplicated and dropped ranges) and each must end in a report
//! (complete or marked incomplete) or a clean error. `MEMTRACK_FUZZ_CASES` raises the count
//! (scripts/fuzz.sh runs millions).

mod common;

use std::io::Cursor;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::Command;

use memtrack::format::{ReadEnd, Reader};
use memtrack::report::analyze;

/// xorshift64*: a deterministic mutator, so a failing case can be replayed from its number.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn sample() -> Vec<u8> {
    std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/testdata/compat/v1-malloc_free.mt"
    ))
    .unwrap()
}

/// Damage `data` in one of several ways chosen by `rng`.
fn mutate(data: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut d = data.to_vec();
    match rng.below(5) {
        0 => {
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(d.len());
                d[at] ^= 1 << rng.below(8);
            }
        }
        1 => d.truncate(rng.below(d.len())),
        2 => {
            // Duplicate a range (a repeated chunk, or part of one).
            let start = rng.below(d.len());
            let end = (start + 1 + rng.below(d.len() - start)).min(d.len());
            let copy = d[start..end].to_vec();
            let at = rng.below(d.len());
            d.splice(at..at, copy);
        }
        3 => {
            let start = rng.below(d.len());
            let end = (start + 1 + rng.below(64)).min(d.len());
            d.drain(start..end);
        }
        _ => {
            let at = rng.below(d.len());
            d[at] = rng.next() as u8;
        }
    }
    d
}

/// Read and account `data`; the case passes when this returns without panicking.
fn read_all(data: Vec<u8>) -> Option<ReadEnd> {
    let mut reader = Reader::new(Cursor::new(data)).ok()?;
    let header = reader.header().clone();
    let events: Vec<_> = reader.by_ref().collect();
    let report = analyze(&header, events, reader.end());
    assert_eq!(report.complete, report.incomplete_reasons.is_empty());
    reader.end().cloned()
}

#[test]
fn thousands_of_damaged_files_report_or_fail_cleanly() {
    let cases: u64 = std::env::var("MEMTRACK_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000);
    let data = sample();
    let (mut complete, mut damaged, mut refused) = (0u64, 0u64, 0u64);
    for case in 0..cases {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ case.wrapping_mul(0x1000_0000_01b3) | 1);
        let mutated = mutate(&data, &mut rng);
        match catch_unwind(AssertUnwindSafe(|| read_all(mutated))) {
            Ok(Some(ReadEnd::Complete(_))) => complete += 1,
            Ok(Some(ReadEnd::Damaged { .. })) => damaged += 1,
            Ok(None) => refused += 1,
            Err(_) => panic!("case {case} panicked (replay with this case number)"),
        }
    }
    eprintln!("{cases} cases: {complete} complete, {damaged} damaged, {refused} refused");
    assert!(damaged > cases / 4, "most mutations must be noticed");
}

#[test]
fn the_binary_never_crashes_on_damaged_files() {
    let data = sample();
    let dir = common::scratch_dir().join("robustness");
    std::fs::create_dir_all(&dir).unwrap();
    for case in 0..40u64 {
        let mut rng = Rng(case.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let path = dir.join(format!("case-{case}.mt"));
        std::fs::write(&path, mutate(&data, &mut rng)).unwrap();
        for args in [
            vec!["report", path.to_str().unwrap()],
            vec!["report", path.to_str().unwrap(), "--format", "json"],
            vec!["check", path.to_str().unwrap(), "--max-allocs", "100"],
            vec!["dump", path.to_str().unwrap()],
        ] {
            let out = Command::new(common::memtrack())
                .args(&args)
                .output()
                .unwrap();
            let code = out.status.code();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                matches!(code, Some(0..=2)),
                "case {case} {args:?}: status {:?}\n{stderr}",
                out.status
            );
            assert!(
                !stderr.contains("panicked"),
                "case {case} {args:?}: {stderr}"
            );
        }
    }
}
