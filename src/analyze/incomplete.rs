//! Why a report is incomplete, in words that say which way each number may be wrong.
//!
//! `assemble` builds `Report::incomplete_reasons` from these; `check` uses [`lower_bounds`]
//! to tell a limit that certainly fails from one that only may. A lost or skipped free leaves
//! its block live, so leaks and peaks can be too HIGH, not only too low; counts of allocations
//! and bytes allocated can only be too low.

use crate::format::{Coverage, Header, LostCount, Skipped};

/// `Header::features` entry of a recording made with `record --probe-floor`.
pub const FEATURE_PROBE_FLOOR: &str = "probe_floor";

/// The reason every report of a `--probe-floor` recording gives.
pub const PROBE_FLOOR: &str = "recorded with --probe-floor: allocations were not recorded (empty \
     programs at the allocator sites measured the probes' own cost), so every heap number is 0; \
     record again without --probe-floor to measure the program";

/// Whether the recording was made with `record --probe-floor`.
pub fn is_probe_floor(header: &Header) -> bool {
    header.features.iter().any(|f| f == FEATURE_PROBE_FLOOR)
}

/// What losing events of `cause` (src/record/decode.rs names them) does to the numbers.
pub fn loss_effect(cause: &str) -> &'static str {
    match cause {
        "ring_full_alloc" => {
            "allocations, frees and bytes allocated may be too low; peak heap and leaked may be \
             too low (lost allocations) or too HIGH (a lost free leaves its block live)"
        }
        "call_state_full" => {
            "allocation or mapping calls were not seen: allocations, bytes allocated, peak heap \
             and leaked may be too low, their frees count as frees of unknown addresses, and \
             mappings may be missing"
        }
        "skipped_mapping_call" => {
            "mapping calls (mmap, munmap, mremap, brk) of the tree were not seen: the kernel \
             skipped both copies of memtrack's syscall programs (a run of each under way on that \
             CPU, preempted); peak mapped may be too low or too high"
        }
        "ring_full_lifecycle" => {
            "forks, execs or exits are missing: processes may be missing from their trees or \
             keep an old name, and a process whose exit was lost has its heap counted as live at \
             the end, not leaked (leaked may be too low)"
        }
        "ring_full_rss" => {
            "resident-memory changes are missing: peak resident may be too low or too high"
        }
        "ring_full_mapping" => {
            "mapping changes are missing: peak mapped may be too low or too high"
        }
        "tracked_map_full" => {
            "new processes were not tracked: everything they did is missing, so every number may \
             be too low"
        }
        "ring_full_discovery" => {
            "a new program or library ran before its allocator was found: its allocations may be \
             missing (too low)"
        }
        "ring_full_stack" => {
            "call stacks are missing: some allocations have no stack, and the sites' shares may \
             be too low (the heap numbers are whole)"
        }
        "ring_full_rmap" => {
            "rmap changes are missing: the rmap accounting may be too low or too high (rss_stat's \
             resident figures are whole)"
        }
        "ring_full_fault" => {
            "stacks of pages made resident are missing: those pages count as unattributed in the \
             resident and faulted views (the resident figures are whole)"
        }
        "skipped_runs" => {
            "the kernel skipped runs of memtrack's programs (a run of the same program was under \
             way on that CPU, preempted): some may have been the tree's allocations, frees, \
             forks, execs, exits or resident-memory changes, so any number may be wrong, either \
             way (the count includes runs for other processes of the machine)"
        }
        _ => "an unknown cause: any number may be wrong, either way",
    }
}

/// The incomplete reason for `lost` events (`total` in all), each cause with its effect.
pub fn loss_reason(lost: &[LostCount], total: u64) -> String {
    let causes: Vec<String> = lost
        .iter()
        .map(|l| format!("{} {}: {}", l.count, l.cause, loss_effect(&l.cause)))
        .collect();
    // Only a full ring is helped by a bigger one.
    let hint = if lost.iter().any(|l| l.cause.starts_with("ring_full")) {
        "; a bigger --ring-size avoids it"
    } else {
        ""
    };
    format!(
        "{total} events were lost while recording ({}){hint}",
        causes.join("; ")
    )
}

/// The incomplete reason for damaged ranges the reader skipped. `written` is the trailer's
/// event count when the file has one, `read` the events counted.
pub fn skipped_reason(skipped: &[Skipped], written: Option<u64>, read: u64) -> String {
    const SHOWN: usize = 3;
    let bytes: u64 = skipped.iter().map(|s| s.size_bytes).sum();
    let mut ranges: Vec<String> = skipped
        .iter()
        .take(SHOWN)
        .map(|s| {
            format!(
                "{} bytes at byte offset {}: {}",
                s.size_bytes, s.offset_bytes, s.reason
            )
        })
        .collect();
    if skipped.len() > SHOWN {
        ranges.push(format!("and {} more", skipped.len() - SHOWN));
    }
    let lost = match written {
        Some(w) => format!("{} events", w.saturating_sub(read)),
        None => "the events".to_string(),
    };
    let (ranges_word, after) = match skipped.len() {
        1 => ("range", "it"),
        _ => ("ranges", "each"),
    };
    format!(
        "the file is damaged: {} {ranges_word} ({bytes} bytes) skipped, reading on after \
         {after} ({}); {lost} in them are not counted: counts may be too low, and a skipped \
         free leaves its block live (peak heap and leaked may be too HIGH)",
        skipped.len(),
        ranges.join("; ")
    )
}

/// Why a recording that should have seen something saw nothing (issue 30: a recorder whose
/// pids never matched the kernel's recorded 0 events and called it complete), or None.
///
/// Two cases: the command never appeared (no process at all: its start was not seen), and
/// processes that mapped a probed allocator library yet made not one allocator call. The
/// second can be true (`true` allocates nothing) but is far more often probes that never
/// fired, so it is not taken as complete; `check --allow-incomplete` accepts it. Not for
/// `--control` recordings, whose gate may rightly never have opened, nor `--probe-floor`.
pub fn unseen_reason(
    header: &Header,
    processes: usize,
    allocator_calls: u64,
    files: &[Coverage],
) -> Option<String> {
    if processes == 0 {
        return Some(
            "no process of the command was recorded: its start was never seen, so every \
             number is 0 (the recorder's pids did not match the kernel's, or it could not \
             track the command); record again with -v and see `memtrack doctor`"
                .to_string(),
        );
    }
    let alloc = header.features.iter().any(|f| f == "alloc");
    let gated = header
        .features
        .iter()
        .any(|f| f == crate::format::FEATURE_CONTROL);
    if allocator_calls > 0 || !alloc || gated || is_probe_floor(header) {
        return None;
    }
    let probed: Vec<String> = files
        .iter()
        .filter(|f| f.probes > 0)
        .map(|f| format!("{} in {}", f.allocator, f.path))
        .collect();
    if probed.is_empty() {
        return None;
    }
    Some(format!(
        "no allocator call was recorded, although the processes mapped probed allocators ({}): \
         either the programs allocate nothing (as `true` does) or the probes never fired for \
         them (a library seen under another root or file than the one it maps); record again \
         with -v to see what was probed, or accept it with check --allow-incomplete",
        probed.join(", ")
    ))
}

/// Whether values that only grow with more events (`allocs`, `bytes_allocated`) are the only
/// ones a failed limit can be trusted on (`false`), or every value is a lower bound of the truth
/// (`true`): the case when the only damage is a file cut short, since events missing at the end
/// can only add allocations, live heap, leaks and resident memory.
pub fn lower_bounds(lost_total: u64, skipped: &[Skipped], floor: bool) -> bool {
    lost_total == 0 && skipped.is_empty() && !floor
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_frees_are_said_to_make_leaks_too_high() {
        let lost = [LostCount {
            cause: "ring_full_alloc".into(),
            count: 7,
        }];
        let r = loss_reason(&lost, 7);
        assert!(
            r.starts_with("7 events were lost while recording (7 ring_full_alloc: "),
            "{r}"
        );
        assert!(
            r.contains("leaked may be too low (lost allocations) or too HIGH"),
            "{r}"
        );
        assert!(!r.contains('\n'));
    }

    #[test]
    fn only_a_full_ring_is_told_to_grow() {
        let skipped = [LostCount {
            cause: "skipped_runs".into(),
            count: 1,
        }];
        let r = loss_reason(&skipped, 1);
        assert!(r.contains("the kernel skipped runs"), "{r}");
        assert!(!r.contains("--ring-size"), "{r}");
        let both = [
            skipped[0].clone(),
            LostCount {
                cause: "ring_full_rss".into(),
                count: 2,
            },
        ];
        assert!(loss_reason(&both, 3).ends_with("; a bigger --ring-size avoids it"));
    }

    #[test]
    fn every_cause_the_recorder_writes_has_its_own_effect() {
        let written = crate::record::decode::LOST_CAUSES.map(|(_, name)| name);
        for cause in written.into_iter().chain(["skipped_runs"]) {
            assert!(!loss_effect(cause).contains("unknown cause"), "{cause}");
        }
        assert!(loss_effect("new_cause").contains("either way"));
    }

    #[test]
    fn skipped_ranges_are_named_with_offset_and_size() {
        let skipped: Vec<Skipped> = (0..5)
            .map(|i| Skipped {
                offset_bytes: 1000 * (i + 1),
                size_bytes: 100,
                reason: "checksum mismatch".into(),
            })
            .collect();
        let r = skipped_reason(&skipped[..1], Some(50), 40);
        assert!(r.contains("1 range (100 bytes) skipped"), "{r}");
        assert!(
            r.contains("100 bytes at byte offset 1000: checksum mismatch"),
            "{r}"
        );
        assert!(r.contains("10 events in them are not counted"), "{r}");
        let r = skipped_reason(&skipped, None, 40);
        assert!(r.contains("5 ranges (500 bytes)"), "{r}");
        assert!(r.contains("and 2 more"), "{r}");
        assert!(!r.contains("offset 4000"), "{r}");
    }

    #[test]
    fn a_recording_that_saw_nothing_says_why() {
        let header = Header {
            features: vec!["lifecycle".into(), "alloc".into()],
            ..Header::default()
        };
        let libc = Coverage {
            path: "/usr/lib/libc.so.6".into(),
            allocator: "glibc".into(),
            probes: 17,
        };
        let none = Coverage {
            path: "/bin/static".into(),
            allocator: "none".into(),
            probes: 0,
        };
        let r = unseen_reason(&header, 0, 0, &[]).unwrap();
        assert!(
            r.starts_with("no process of the command was recorded"),
            "{r}"
        );
        let r = unseen_reason(&header, 3, 0, &[none.clone(), libc.clone()]).unwrap();
        assert!(
            r.contains("probed allocators (glibc in /usr/lib/libc.so.6)"),
            "{r}"
        );
        assert!(r.contains("check --allow-incomplete"), "{r}");
        assert!(!r.contains("  "), "{r}");
        // Calls seen, only a static program without probes, or a gate that may never have
        // opened: nothing to say.
        assert_eq!(
            unseen_reason(&header, 3, 1, std::slice::from_ref(&libc)),
            None
        );
        assert_eq!(unseen_reason(&header, 1, 0, &[none]), None);
        let gated = Header {
            features: vec!["alloc".into(), crate::format::FEATURE_CONTROL.into()],
            ..Header::default()
        };
        assert_eq!(unseen_reason(&gated, 1, 0, &[libc]), None);
    }
}
