//! Resident memory by call site (issue 35): the real recorder on testdata/resident/touch.c,
//! whose touch_a() makes 8 MiB of a malloc'd block resident, touch_b() 24 MiB and read_c() 16
//! MiB of a mapped file, all resident at the process's peak. `report --view resident` gives each
//! the pages it made resident, anon and file apart, and adds up to the peak resident memory the
//! report states; `--view faulted` keeps what was unmapped before the peak.

mod common;

use common::{fixture, memtrack, record_with_env, report_json, run, scratch_file, Recording};
use memtrack::format::{EventKind, RssMember};

const MIB: u64 = 1 << 20;
const PAGE: u64 = 4096;

/// Record touch.c with `extra` recorder flags and `args` after its file.
fn record_touch(name: &str, extra: &[&str], args: &[&str]) -> Recording {
    let exe = fixture("resident/touch");
    let data = scratch_file(format!("{name}.data"));
    let side = scratch_file(format!("{name}.status"));
    let mut command = vec![exe.to_str().unwrap(), data.to_str().unwrap()];
    command.extend_from_slice(args);
    let rec = record_with_env(
        name,
        extra,
        &command,
        &[("MEMTRACK_STATUS_FILE", side.as_os_str())],
    );
    check!(rec, rec.code() == 0, "exit code");
    rec
}

/// The folded lines of `view` of `rec`: (stack, bytes).
fn folded(rec: &Recording, view: &str) -> Vec<(String, u64)> {
    let out = std::process::Command::new(memtrack())
        .args(["report", "--format", "folded", "--view", view])
        .arg(&rec.path)
        .output()
        .expect("run memtrack report");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (stack, value) = l.rsplit_once(' ').expect("a folded line");
            (stack.to_string(), value.parse().expect("a value"))
        })
        .collect()
}

/// The bytes of the lines of `member` ("[anon]", "[file]") whose stack names `function`.
fn of(lines: &[(String, u64)], member: &str, function: &str) -> u64 {
    lines
        .iter()
        .filter(|(s, _)| s.starts_with(member) && s.split(';').any(|f| f == function))
        .map(|(_, v)| v)
        .sum()
}

/// Whether `got` is `want` within `pages` pages.
fn within(got: u64, want: u64, pages: u64) -> bool {
    got.abs_diff(want) <= pages * PAGE
}

/// How many pages a site may be from its own: two (the block's last page, a page of the
/// binary's), where every fault is its own increase. Before Linux 6.2 a thread hands its
/// counters' changes over 64 faults at a time (the kernel matrix boots 6.1), and they go to the
/// stack of the fault that hands them over, or to exit for the last of them: 64 faults of up to
/// 16 pages (a file's fault-around). The recording shows which: a batch is an anon increase of
/// more than one page and less than a huge page.
fn slack(rec: &Recording) -> u64 {
    let batched = rec.events.iter().any(|e| {
        matches!(e.kind, EventKind::Rss { member: RssMember::Anon, delta_pages, by_owner: true, .. }
            if delta_pages > 1 && delta_pages < 512)
    });
    if batched {
        2 + 64 * 16
    } else {
        2
    }
}

/// The bytes of the lines of a file's pages (a file on tmpfs is shmem) whose stack names
/// `function`.
fn of_file(lines: &[(String, u64)], function: &str) -> u64 {
    of(lines, "[file]", function) + of(lines, "[shmem]", function)
}

/// The run's peak resident bytes, as the JSON report states them.
fn peak_resident(rec: &Recording) -> u64 {
    report_json(&rec.path, &[])["totals"]["resident"]["peak_bytes"]
        .as_u64()
        .expect("a resident peak")
}

#[test]
fn the_resident_view_names_the_code_that_made_each_page_resident() {
    skip_unless_recording!("the_resident_view_names_the_code_that_made_each_page_resident");
    let rec = record_touch("resident-touch", &["--stacks"], &[]);
    let lines = folded(&rec, "resident");
    let shown = format!("{lines:#?}\n{}", rec.describe());
    let slack = slack(&rec);
    let a = of(&lines, "[anon]", "touch_a");
    let b = of(&lines, "[anon]", "touch_b");
    let c = of_file(&lines, "read_c");
    assert!(within(a, 8 * MIB, slack), "touch_a: {a}\n{shown}");
    assert!(within(b, 24 * MIB, slack), "touch_b: {b}\n{shown}");
    assert!(within(c, 16 * MIB, slack), "read_c's file: {c}\n{shown}");
    assert!(
        of_file(&lines, "touch_b") <= (slack - 2) * PAGE,
        "touch_b made no file page resident (a batch may carry some before 6.2)\n{shown}"
    );
    let total: u64 = lines.iter().map(|(_, v)| v).sum();
    assert_eq!(
        total,
        peak_resident(&rec),
        "the view adds up to the peak\n{shown}"
    );
    // What no stack was walked for (the loader's start, before the walker was in place) is
    // named, not dropped.
    assert!(
        lines.iter().any(|(s, _)| s.ends_with("[unattributed]")),
        "{shown}"
    );
    // Every fault is one increase by the owner, walked (`--stacks`): their pages are the
    // faulted view's, unattributed ones included.
    let increases: i64 = rec
        .events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Rss {
                delta_pages,
                by_owner: true,
                member,
                ..
            } if delta_pages > 0 && member != RssMember::SwapEntries => Some(delta_pages),
            _ => None,
        })
        .sum();
    let faulted: u64 = folded(&rec, "faulted").iter().map(|(_, v)| v).sum();
    assert_eq!(faulted, increases as u64 * PAGE, "{shown}");

    // The JSON report's sites say the same, the largest first, adding up to the peak.
    let json = report_json(&rec.path, &["--stacks", "--stacks-top", "0"]);
    let r = &json["stacks"]["resident"];
    let total = |s: &serde_json::Value| s["resident"]["total_bytes"].as_u64().unwrap();
    let sites = r["sites"].as_array().expect("resident sites");
    let sum: u64 = sites.iter().map(total).sum::<u64>() + total(&r["unattributed"]);
    assert_eq!(r["sites_total"].as_u64(), Some(sites.len() as u64), "{r:#}");
    assert_eq!(sum, peak_resident(&rec), "{r:#}");
    let first = sites[0]["frames"][1]["function"].as_str();
    assert_eq!(first, Some("touch_b"), "touch_b holds the most: {r:#}");
    assert!(within(total(&sites[0]), 24 * MIB, slack), "{r:#}");
}

#[test]
fn an_unmapped_block_leaves_the_resident_view_and_stays_faulted() {
    skip_unless_recording!("an_unmapped_block_leaves_the_resident_view_and_stays_faulted");
    let rec = record_touch("resident-free-a", &["--stacks"], &["free_a"]);
    let resident = folded(&rec, "resident");
    let faulted = folded(&rec, "faulted");
    let shown = format!("{resident:#?}\n{faulted:#?}\n{}", rec.describe());
    let slack = slack(&rec);
    assert!(
        of(&resident, "[anon]", "touch_a") <= slack * PAGE,
        "touch_a's block was unmapped before the peak\n{shown}"
    );
    assert!(
        within(of(&resident, "[anon]", "touch_b"), 24 * MIB, slack),
        "{shown}"
    );
    assert!(
        within(of(&faulted, "[anon]", "touch_a"), 8 * MIB, slack),
        "{shown}"
    );
    let total: u64 = resident.iter().map(|(_, v)| v).sum();
    assert_eq!(total, peak_resident(&rec), "{shown}");
}

/// `diff --stacks` of touch.c against itself freeing touch_a's block first: the resident sites
/// are matched by their frames, touch_a's 8 MiB leave the peak while it made as many resident,
/// and the changes, the unattributed row with them, add up to the change of the peak.
#[test]
fn diff_names_the_site_whose_pages_left_the_peak() {
    skip_unless_recording!("diff_names_the_site_whose_pages_left_the_peak");
    let base = record_touch("resident-diff-base", &["--stacks"], &[]);
    let new = record_touch("resident-diff-new", &["--stacks"], &["free_a"]);
    let (b, n) = (base.path.to_str().unwrap(), new.path.to_str().unwrap());
    let out = run(&["diff", "--top", "0", "--format", "json", b, n]).expect_code(0);
    let diff: serde_json::Value = serde_json::from_str(&out.stdout).expect("diff's JSON");
    let r = &diff["resident_sites"];
    let shown = format!("{r:#}\n{}\n{}", base.describe(), new.describe());
    let slack = slack(&base).max(slack(&new));
    let changed = r["changed"].as_array().expect("changed resident sites");
    let named = |c: &&serde_json::Value, function: &str| {
        c["frames"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f["function"] == function))
    };
    let touch_a = changed
        .iter()
        .find(|c| named(c, "touch_a"))
        .unwrap_or_else(|| panic!("touch_a changed\n{shown}"));
    assert_eq!(touch_a["status"], "matched", "{shown}");
    let at_peak = touch_a["resident_bytes_change"].as_i64().unwrap();
    assert!(
        (at_peak + (8 * MIB) as i64).unsigned_abs() <= slack * PAGE,
        "{shown}"
    );
    let made = touch_a["faulted_bytes_change"].as_i64().unwrap();
    assert!(made.unsigned_abs() <= slack * PAGE, "{shown}");
    let sum: i64 = changed
        .iter()
        .map(|c| c["resident_bytes_change"].as_i64().unwrap())
        .sum();
    let peaks = r["new_peak_bytes"].as_i64().unwrap() - r["base_peak_bytes"].as_i64().unwrap();
    assert_eq!(sum, peaks, "{shown}");
    assert_eq!(r["base_peak_bytes"].as_u64(), Some(peak_resident(&base)));
    let text = run(&["diff", "--stacks", b, n]).expect_code(0).stdout;
    assert!(text.contains("\nresident memory by site: "), "{text}");
}

/// testdata/resident/inherit.c: fill() makes 16 MiB resident, the process forks, and the child
/// writes the first half of the block from write_half(), then makes 2 MiB of its own resident
/// from own(). At the run's peak (the child's end, the parent waiting), the child's
/// "[inherited]" is what it got at fork less what it wrote, write_half holds the 8 MiB it wrote
/// (copy-on-write made them the child's), and the view still adds up to the peak. Where the
/// kernel refuses fentry (the child's writes are not walked: the recording says so), all it got
/// stays "[inherited]".
#[test]
fn a_forked_childs_writes_leave_what_it_inherited() {
    skip_unless_recording!("a_forked_childs_writes_leave_what_it_inherited");
    let exe = fixture("resident/inherit");
    let rec = record_with_env(
        "resident-inherit",
        &["--stacks"],
        &[exe.to_str().unwrap()],
        &[],
    );
    check!(rec, rec.code() == 0, "exit code");
    let lines = folded(&rec, "resident");
    let shown = format!("{lines:#?}\n{}", rec.describe());
    let slack = slack(&rec);
    // The child's anonymous pages as the kernel filled them at fork: its first anon value, set
    // by another task (the parent, forking). The parent is the process that executed the
    // fixture (the recorder's own fork of the command is recorded too).
    let parent = rec
        .events
        .iter()
        .find(|e| matches!(&e.kind, EventKind::Exec(_)))
        .expect("the fixture's exec")
        .pid;
    let child = rec
        .events
        .iter()
        .find_map(|e| match e.kind {
            EventKind::Fork { child } if e.pid == parent => Some(child),
            _ => None,
        })
        .expect("the fixture's fork");
    let got = rec
        .events
        .iter()
        .find_map(|e| match e.kind {
            EventKind::Rss {
                member: RssMember::Anon,
                value_pages,
                by_owner: false,
                ..
            } if e.pid == child => Some(value_pages * PAGE),
            _ => None,
        })
        .expect("the child's anon pages at fork");
    assert!(
        got >= 16 * MIB,
        "the child got fill's block: {got}\n{shown}"
    );
    let inherited = of(&lines, "[anon]", "[inherited]");
    let written = of(&lines, "[anon]", "write_half");
    assert!(
        within(of(&lines, "[anon]", "own"), 2 * MIB, slack),
        "own: {shown}"
    );
    assert!(
        within(of(&lines, "[anon]", "fill"), 16 * MIB, slack),
        "the parent's fill: {shown}"
    );
    let total: u64 = lines.iter().map(|(_, v)| v).sum();
    assert_eq!(total, peak_resident(&rec), "adds up to the peak\n{shown}");
    let walked = rec
        .header
        .features
        .iter()
        .any(|f| f == memtrack::format::FEATURE_INHERITED_WRITES);
    // What the recorder's preflight decided, asked again: whether the walk could load here.
    let touches = memtrack::preflight::for_record()
        .expect("preflight")
        .touches;
    assert_eq!(walked, touches.is_ok(), "{touches:?}\n{shown}");
    if let Err(why) = touches {
        eprintln!(
            "a_forked_childs_writes_leave_what_it_inherited: the child's writes are not walked \
             here ({why}); checked that all it got stays [inherited] (the kernel matrix checks \
             the split)"
        );
        assert_eq!(written, 0, "{shown}");
        assert_eq!(inherited, got, "{shown}");
        return;
    }
    // Besides write_half's 2,048 pages, the child writes a few inherited pages of its stack and
    // of libc's data (its exit, stdio) before the peak.
    assert!(
        within(written, 8 * MIB, slack),
        "write_half: {written}\n{shown}"
    );
    let others = got - 8 * MIB - inherited.min(got - 8 * MIB);
    assert!(
        inherited <= got - 8 * MIB && others <= (slack + 30) * PAGE,
        "[inherited]: {inherited} of {got} got at fork\n{shown}"
    );
    eprintln!(
        "a_forked_childs_writes_leave_what_it_inherited: got {got} at fork, write_half \
         {written}, [inherited] {inherited} (other writes {others})"
    );
}
