//! No input makes `report`, `check` or `dump` panic: a real recording is damaged thousands of
//! ways (byte flips, truncations, duplicated and dropped ranges) and each must end in a report
//! (complete or marked incomplete) or a clean error. `MEMTRACK_FUZZ_CASES` raises the count
//! (scripts/fuzz.sh runs millions).

mod common;

use std::io::Cursor;
use std::panic::{catch_unwind, AssertUnwindSafe};

use common::analyze;
use memtrack::format::{ReadEnd, Reader};

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

/// Read and account `data`; the case passes when this returns without panicking. Returns how
/// reading ended and whether damage was skipped on the way.
fn read_all(data: Vec<u8>) -> Option<(ReadEnd, bool)> {
    let mut reader = Reader::new(Cursor::new(data)).ok()?;
    let header = reader.header().clone();
    let events: Vec<_> = reader.by_ref().collect();
    let mut accounting = common::Accounting::new(&header);
    for e in &events {
        accounting.apply(e);
    }
    accounting.note_skipped(reader.skipped());
    let report = accounting.finish(reader.end());
    assert_eq!(report.complete, report.incomplete_reasons.is_empty());
    assert_eq!(report.skipped, reader.skipped());
    if !reader.skipped().is_empty() {
        assert!(!report.complete);
    }
    // The pure core agrees on everything but the skipped ranges it is not told about.
    let plain = analyze(&header, events, reader.end());
    assert_eq!(plain.totals, report.totals);
    Some((reader.end().cloned()?, !reader.skipped().is_empty()))
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
            Ok(Some((ReadEnd::Complete(_), false))) => complete += 1,
            Ok(Some((ReadEnd::Complete(_), true) | (ReadEnd::Damaged { .. }, _))) => damaged += 1,
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
            let run = common::run(&args);
            assert!(
                matches!(run.status.code(), Some(0..=2)),
                "case {case}\n{}",
                run.describe()
            );
            assert!(
                !run.stderr.contains("panicked"),
                "case {case}\n{}",
                run.describe()
            );
        }
    }
}

/// One corrupt chunk in the middle of a real recording (issue 13, item 9): the reader skips it,
/// names the range, and counts every event after it.
#[test]
fn a_corrupt_chunk_in_a_real_recording_is_skipped_and_the_rest_counted() {
    skip_unless_recording!("a_corrupt_chunk_in_a_real_recording_is_skipped_and_the_rest_counted");
    let rec = common::record_fixture("resync", &["-q"], "malloc_free", &["30000"]);
    assert_eq!(rec.code(), 0, "{}", rec.describe());
    // Each event with the offset its chunk ends at (the reader yields a chunk's events once it
    // has read the whole frame).
    let mut reader = Reader::open(&rec.path).unwrap();
    let mut chunk_of = Vec::new();
    while let Some(ev) = reader.next() {
        chunk_of.push((reader.offset(), ev));
    }
    let mut ends: Vec<u64> = chunk_of.iter().map(|(end, _)| *end).collect();
    ends.dedup();
    assert!(
        ends.len() >= 4,
        "{} chunks: too few to damage one in the middle",
        ends.len()
    );
    let (start, end) = (ends[ends.len() / 2 - 1], ends[ends.len() / 2]);
    let mut bytes = std::fs::read(&rec.path).unwrap();
    bytes[(start + (end - start) / 2) as usize] ^= 0x10;
    let damaged = common::scratch_dir().join("resync-damaged.mt");
    std::fs::write(&damaged, &bytes).unwrap();

    let is_alloc =
        |e: &memtrack::format::Event| matches!(e.kind, memtrack::format::EventKind::Alloc { .. });
    let total_allocs = chunk_of.iter().filter(|(_, e)| is_alloc(e)).count();
    let lost_allocs = chunk_of
        .iter()
        .filter(|(c, e)| *c == end && is_alloc(e))
        .count();
    assert!(lost_allocs > 0);
    let r = common::report_json(&damaged, &[]);
    assert_eq!(r["complete"], false);
    assert_eq!(r["damage"], serde_json::Value::Null, "{:#}", r["damage"]);
    assert_eq!(
        r["skipped"].as_array().unwrap().len(),
        1,
        "{:#}",
        r["skipped"]
    );
    assert_eq!(r["skipped"][0]["offset_bytes"], start);
    assert_eq!(r["skipped"][0]["size_bytes"], end - start);
    assert!(r["skipped"][0]["reason"]
        .as_str()
        .unwrap()
        .contains("checksum mismatch"));
    // Everything after the damage is counted: the allocations of every other chunk, the leak
    // at the end, the exit.
    assert_eq!(
        r["totals"]["heap"]["allocs"],
        (total_allocs - lost_allocs) as u64
    );
    assert_eq!(r["run"]["exit_code"], 0);
    let root = r["processes"][0].clone();
    assert!(root["exit"].is_object(), "{root:#}");
    let reason = r["incomplete_reasons"][0].as_str().unwrap();
    assert!(
        reason.contains(&format!("{} bytes at byte offset {start}", end - start)),
        "{reason}"
    );
    // The text report says the same, and check refuses the file unless allowed.
    let text = common::run(&["report", damaged.to_str().unwrap()]).stdout;
    assert!(
        text.contains(&format!(
            "INCOMPLETE: the file is damaged: 1 range ({} bytes) skipped",
            end - start
        )),
        "{text}"
    );
    common::run(&["check", damaged.to_str().unwrap(), "--max-leaked", "1GiB"])
        .expect_code(2)
        .expect_stderr(&format!(
            "1 damaged range skipped, the first at byte offset {start}"
        ));
}
