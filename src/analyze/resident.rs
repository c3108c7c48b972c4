//! Resident memory of one process from the kernel's signed counter changes, and the running
//! sums of trees; part of the accounting pass.
//!
//! Flow: `accounting` routes each `Rss` event to the process's [`ProcResident`], then moves
//! what the process contributes to its trees' [`ResidentSum`]s (kept in the process table,
//! `tree`). The rules (SPEC section 5):
//! a process's resident memory is `baseline + net`, per counter, in pages. The baseline is what
//! the kernel filled into a forked child's counters before the child did anything itself, and
//! zero after exec; `net` is the signed sum of every later change, never clamped. Removes that
//! take the estimate below zero are counted as "beyond baseline" rather than floored away.

use crate::format::RssMember;

use super::counters::Peak;
use crate::model::metrics::{MemberResident, ResidentMetrics};

/// Number of resident counters (`RssMember`), indexed by their kernel number.
pub(super) const MEMBERS: usize = 4;

/// Index of the total (anon + file + shmem) in per-member arrays of five.
pub(super) const TOTAL: usize = MEMBERS;

/// Members in the order reports list them.
const MEMBER_ORDER: [RssMember; MEMBERS] = [
    RssMember::Anon,
    RssMember::File,
    RssMember::Shmem,
    RssMember::SwapEntries,
];

/// Whether a member counts as resident: swap entries are pages that are not, so they are left
/// out of the total (as the kernel's VmRSS leaves them out).
fn is_resident(member: usize) -> bool {
    member != RssMember::SwapEntries as usize
}

/// Pages to bytes, saturating.
fn pages_to_bytes(pages: u64, page_bytes: u64) -> u64 {
    pages.saturating_mul(page_bytes)
}

/// Resident-counter state of one process, in pages. Boxed in the process: most processes of a
/// heap-only recording never have one.
#[derive(Clone, Debug, Default)]
pub(super) struct ProcResident {
    /// What the current image started with, per member (filled at fork, zero after exec).
    baseline: [i64; MEMBERS],
    /// Signed sum of changes since then, per member; never clamped.
    net: [i64; MEMBERS],
    /// Peaks since the last exec, per member and total.
    peak: [i64; MEMBERS + 1],
    /// Lowest estimate since the last exec, per member: below zero only if a baseline was
    /// missed, which the contract says must not happen.
    low: [i64; MEMBERS],
    peak_ns: [u64; MEMBERS + 1],
    /// Pages removed while the estimate was at or below zero, per member, over the whole life.
    pub(super) beyond: [u64; MEMBERS],
    /// What the process currently adds to its trees' sums, per member and total; kept here so
    /// the accounting can move exactly the difference when it changes.
    pub(super) contribution: [u64; MEMBERS + 1],
}

impl ProcResident {
    /// Current estimate of `member`, pages.
    fn value(&self, member: usize) -> i64 {
        self.baseline[member].saturating_add(self.net[member])
    }

    /// Current estimate of anon + file + shmem, pages.
    fn total(&self) -> i64 {
        (0..MEMBERS)
            .filter(|&m| is_resident(m))
            .fold(0i64, |acc, m| acc.saturating_add(self.value(m)))
    }

    /// The current estimate per member, pages (the rmap accounting's baseline and
    /// cross-check).
    pub(super) fn values(&self) -> [i64; MEMBERS] {
        std::array::from_fn(|m| self.value(m))
    }

    /// Current estimate of anon + file + shmem, pages, as the report's peak counts it (the
    /// timeline draws it); 0 when a missed baseline takes it below zero.
    pub(super) fn resident_pages(&self) -> u64 {
        self.total().max(0).unsigned_abs()
    }

    /// Applies one counter change. While `filling` (the kernel copying a parent's pages into a
    /// new child, before the child ran), the event's absolute `value` sets the baseline;
    /// afterwards the signed `delta` adds to the net.
    pub(super) fn change(
        &mut self,
        member: usize,
        delta: i64,
        value: u64,
        filling: bool,
        ts_ns: u64,
    ) {
        if member >= MEMBERS {
            return;
        }
        if filling {
            self.baseline[member] = i64::try_from(value).unwrap_or(i64::MAX);
            self.net[member] = 0;
        } else {
            let before = self.value(member);
            self.net[member] = self.net[member].saturating_add(delta);
            // Only the part of a removal that goes below zero is beyond the baseline.
            let below_before = before.min(0).unsigned_abs();
            let below_after = self.value(member).min(0).unsigned_abs();
            self.beyond[member] =
                self.beyond[member].saturating_add(below_after.saturating_sub(below_before));
        }
        self.low[member] = self.low[member].min(self.value(member));
        self.raise_peaks(member, ts_ns);
    }

    /// Starts a new image (exec): nothing inherited, peaks start again as the kernel's VmHWM
    /// does. Removes beyond baseline stay counted.
    pub(super) fn start_image(&mut self) {
        self.baseline = [0; MEMBERS];
        self.net = [0; MEMBERS];
        self.peak = [0; MEMBERS + 1];
        self.peak_ns = [0; MEMBERS + 1];
        self.low = [0; MEMBERS];
    }

    /// Raises the peaks of `member` and of the total to the current values.
    fn raise_peaks(&mut self, member: usize, ts_ns: u64) {
        let value = self.value(member);
        if value > self.peak[member] {
            self.peak[member] = value;
            self.peak_ns[member] = ts_ns;
        }
        let total = self.total();
        if total > self.peak[TOTAL] {
            self.peak[TOTAL] = total;
            self.peak_ns[TOTAL] = ts_ns;
        }
    }

    /// What the process should contribute to its trees now, per member and total. A member
    /// below zero (a missed baseline) contributes nothing rather than hiding other processes'
    /// memory; the shortfall shows in `beyond`.
    pub(super) fn wanted_contribution(&self) -> [u64; MEMBERS + 1] {
        let mut c = [0u64; MEMBERS + 1];
        for (m, slot) in c.iter_mut().enumerate().take(MEMBERS) {
            *slot = self.value(m).max(0).unsigned_abs();
        }
        c[TOTAL] = (0..MEMBERS)
            .filter(|&m| is_resident(m))
            .fold(0u64, |acc, m| acc.saturating_add(c[m]));
        c
    }

    /// The metrics form, in bytes, times relative to `start_ns`.
    pub(super) fn metrics(&self, page_bytes: u64, start_ns: u64) -> ResidentMetrics {
        let at = |value: i64, ts: u64| (value > 0).then(|| ts.saturating_sub(start_ns));
        let bytes = |pages: i64| pages_to_bytes(pages.max(0).unsigned_abs(), page_bytes);
        let members = MEMBER_ORDER
            .iter()
            .map(|&member| {
                let m = member as usize;
                MemberResident {
                    member: member.name().to_string(),
                    peak_bytes: bytes(self.peak[m]),
                    peak_at_ns: at(self.peak[m], self.peak_ns[m]),
                    baseline_bytes: Some(bytes(self.baseline[m])),
                    end_bytes: Some(signed_bytes(self.value(m), page_bytes)),
                    min_bytes: Some(signed_bytes(self.low[m], page_bytes)),
                    removes_beyond_baseline_bytes: pages_to_bytes(self.beyond[m], page_bytes),
                }
            })
            .collect();
        ResidentMetrics {
            peak_bytes: bytes(self.peak[TOTAL]),
            peak_at_ns: at(self.peak[TOTAL], self.peak_ns[TOTAL]),
            removes_beyond_baseline_bytes: pages_to_bytes(sum(&self.beyond), page_bytes),
            members,
        }
    }
}

/// Signed pages to bytes, saturating.
fn signed_bytes(pages: i64, page_bytes: u64) -> i64 {
    pages.saturating_mul(i64::try_from(page_bytes).unwrap_or(i64::MAX))
}

/// Sum of per-member page counts, saturating.
fn sum(pages: &[u64; MEMBERS]) -> u64 {
    pages.iter().fold(0u64, |acc, &p| acc.saturating_add(p))
}

/// The running resident sums of a tree (or the run), per member and total, pages, with peaks.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct ResidentSum {
    /// Current sums.
    pub(super) live: [u64; MEMBERS + 1],
    peak: [Peak; MEMBERS + 1],
}

impl ResidentSum {
    /// Replaces a process's contribution `old` with `new` at `ts_ns`.
    pub(super) fn replace(
        &mut self,
        old: &[u64; MEMBERS + 1],
        new: &[u64; MEMBERS + 1],
        ts_ns: u64,
    ) {
        for m in 0..=MEMBERS {
            self.live[m] = self.live[m].saturating_sub(old[m]).saturating_add(new[m]);
            self.peak[m].raise(self.live[m], ts_ns);
        }
    }

    /// Takes `live` as the current sums at `ts_ns` (a benchmark following its pid tree's sums
    /// while it is measured), raising the peaks.
    pub(super) fn follow(&mut self, live: &[u64; MEMBERS + 1], ts_ns: u64) {
        self.live = *live;
        for (peak, &value) in self.peak.iter_mut().zip(live) {
            peak.raise(value, ts_ns);
        }
    }

    /// The metrics form, with the scope's summed `beyond` pages.
    pub(super) fn metrics(
        &self,
        beyond: &[u64; MEMBERS],
        page_bytes: u64,
        start_ns: u64,
    ) -> ResidentMetrics {
        let members = MEMBER_ORDER
            .iter()
            .map(|&member| {
                let m = member as usize;
                MemberResident {
                    member: member.name().to_string(),
                    peak_bytes: pages_to_bytes(self.peak[m].value, page_bytes),
                    peak_at_ns: self.peak[m].at(start_ns),
                    baseline_bytes: None,
                    end_bytes: None,
                    min_bytes: None,
                    removes_beyond_baseline_bytes: pages_to_bytes(beyond[m], page_bytes),
                }
            })
            .collect();
        ResidentMetrics {
            peak_bytes: pages_to_bytes(self.peak[TOTAL].value, page_bytes),
            peak_at_ns: self.peak[TOTAL].at(start_ns),
            removes_beyond_baseline_bytes: pages_to_bytes(sum(beyond), page_bytes),
            members,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::metrics::{ProcessMetrics, Report};
    use crate::testkit::*;

    const ANON: usize = RssMember::Anon as usize;
    const FILE: usize = RssMember::File as usize;
    const SWAP: usize = RssMember::SwapEntries as usize;

    fn resident(report: &Report, pid: u32) -> &ResidentMetrics {
        process(report, pid)
            .own
            .resident
            .as_ref()
            .expect("resident")
    }

    fn member<'a>(r: &'a ResidentMetrics, name: &str) -> &'a MemberResident {
        r.members.iter().find(|m| m.member == name).unwrap()
    }

    fn tree_resident(p: &ProcessMetrics) -> &ResidentMetrics {
        p.tree.resident.as_ref().expect("tree resident")
    }

    // --- one process, directly ---------------------------------------------------------------

    #[test]
    fn fill_sets_baseline_from_value() {
        let mut r = ProcResident::default();
        r.change(ANON, 5, 100, true, 1);
        assert_eq!(
            (r.baseline[ANON], r.net[ANON], r.value(ANON)),
            (100, 0, 100)
        );
    }

    #[test]
    fn later_fill_event_replaces_baseline() {
        let mut r = ProcResident::default();
        r.change(ANON, 5, 100, true, 1);
        r.change(ANON, 5, 105, true, 2);
        assert_eq!(r.value(ANON), 105);
    }

    #[test]
    fn own_changes_add_signed_deltas() {
        let mut r = ProcResident::default();
        r.change(ANON, 10, 0, false, 1);
        r.change(ANON, -4, 0, false, 2);
        assert_eq!((r.net[ANON], r.value(ANON)), (6, 6));
    }

    #[test]
    fn removal_within_baseline_is_not_beyond() {
        let mut r = ProcResident::default();
        r.change(ANON, 0, 10, true, 1);
        r.change(ANON, -10, 0, false, 2);
        assert_eq!(r.beyond[ANON], 0);
    }

    #[test]
    fn removal_below_zero_is_beyond() {
        let mut r = ProcResident::default();
        r.change(ANON, 0, 10, true, 1);
        r.change(ANON, -15, 0, false, 2);
        assert_eq!((r.beyond[ANON], r.value(ANON)), (5, -5));
    }

    #[test]
    fn removal_already_below_zero_counts_whole() {
        let mut r = ProcResident::default();
        r.change(FILE, -3, 0, false, 1);
        r.change(FILE, -2, 0, false, 2);
        assert_eq!(r.beyond[FILE], 5);
    }

    #[test]
    fn adds_while_negative_are_not_beyond() {
        let mut r = ProcResident::default();
        r.change(FILE, -3, 0, false, 1);
        r.change(FILE, 2, 0, false, 2);
        assert_eq!((r.beyond[FILE], r.value(FILE)), (3, -1));
    }

    #[test]
    fn peak_and_time() {
        let mut r = ProcResident::default();
        r.change(ANON, 7, 0, false, 10);
        r.change(ANON, -2, 0, false, 20);
        r.change(ANON, 2, 0, false, 30);
        assert_eq!((r.peak[ANON], r.peak_ns[ANON]), (7, 10));
        assert_eq!((r.peak[TOTAL], r.peak_ns[TOTAL]), (7, 10));
    }

    #[test]
    fn total_excludes_swap() {
        let mut r = ProcResident::default();
        r.change(ANON, 2, 0, false, 1);
        r.change(SWAP, 9, 0, false, 2);
        assert_eq!(r.total(), 2);
        assert_eq!(r.wanted_contribution()[TOTAL], 2);
        assert_eq!(r.wanted_contribution()[SWAP], 9);
    }

    #[test]
    fn negative_member_contributes_nothing() {
        let mut r = ProcResident::default();
        r.change(ANON, -9, 0, false, 1);
        r.change(FILE, 4, 0, false, 2);
        assert_eq!(r.wanted_contribution(), [4, 0, 0, 0, 4]);
    }

    #[test]
    fn start_image_resets_but_keeps_beyond() {
        let mut r = ProcResident::default();
        r.change(ANON, -3, 0, false, 1);
        r.change(FILE, 8, 0, false, 2);
        r.start_image();
        assert_eq!((r.value(ANON), r.value(FILE), r.peak[TOTAL]), (0, 0, 0));
        assert_eq!(r.beyond[ANON], 3);
    }

    #[test]
    fn out_of_range_member_is_ignored() {
        let mut r = ProcResident::default();
        r.change(MEMBERS, 1, 1, false, 1);
        assert_eq!(r.total(), 0);
    }

    #[test]
    fn extreme_values_saturate() {
        let mut r = ProcResident::default();
        r.change(ANON, 0, u64::MAX, true, 1);
        r.change(ANON, i64::MAX, 0, false, 2);
        r.change(FILE, i64::MIN, 0, false, 3);
        r.change(FILE, i64::MIN, 0, false, 4);
        let m = r.metrics(4096, 0);
        assert_eq!(m.members[0].end_bytes, Some(i64::MAX));
        assert_eq!(m.members[1].end_bytes, Some(i64::MIN));
    }

    #[test]
    fn metrics_in_bytes() {
        let mut r = ProcResident::default();
        r.change(ANON, 0, 2, true, 5);
        let m = r.metrics(4096, 1);
        assert_eq!((m.peak_bytes, m.peak_at_ns), (8192, Some(4)));
        assert_eq!(m.members[0].member, "anon");
        assert_eq!(m.members[0].baseline_bytes, Some(8192));
    }

    #[test]
    fn sum_replaces_contribution() {
        let mut s = ResidentSum::default();
        s.replace(&[0; 5], &[1, 2, 0, 0, 3], 1);
        s.replace(&[1, 2, 0, 0, 3], &[0, 1, 0, 0, 1], 2);
        assert_eq!(s.live, [0, 1, 0, 0, 1]);
        assert_eq!(s.peak[TOTAL].value, 3);
    }

    // --- through the accounting ------------------------------------------------------------

    const MIB_PAGES: u64 = 256;

    /// Parent 1 holds 32 MiB anon; the kernel fills child 2 at fork (before the fork event, as
    /// the tracepoint fires after the copy); the child unmaps it all and exits.
    fn inherited_then_unmapped() -> Vec<crate::format::Event> {
        let p = 32 * MIB_PAGES;
        vec![
            at(0, 1, 1, rss(RssMember::Anon, p as i64, p, true)),
            at(1, 2, 1, rss(RssMember::Anon, p as i64, p, false)),
            at(2, 1, 1, fork(2)),
            at(3, 2, 2, rss(RssMember::Anon, -(p as i64), 0, true)),
            at(5, 2, 2, exit(0)),
        ]
    }

    #[test]
    fn fork_fill_sets_child_baseline() {
        let r = run(inherited_then_unmapped());
        let anon = member(resident(&r, 2), "anon");
        assert_eq!(anon.baseline_bytes, Some(32 << 20));
        assert_eq!(anon.removes_beyond_baseline_bytes, 0);
        assert_eq!(anon.end_bytes, Some(0));
    }

    #[test]
    fn child_unmapping_inherited_pages_leaves_parent_alone() {
        let r = run(inherited_then_unmapped());
        assert_eq!(resident(&r, 1).peak_bytes, 32 << 20);
        assert_eq!(member(resident(&r, 1), "anon").end_bytes, Some(32 << 20));
    }

    #[test]
    fn child_peak_matches_what_it_held() {
        // After unmapping the inherited 32 MiB, the child touches a fresh 16 MiB: its peak is
        // the 32 MiB it started with, never a floored 16.
        let mut events = inherited_then_unmapped();
        let fresh = 16 * MIB_PAGES;
        events.insert(
            4,
            at(4, 2, 2, rss(RssMember::Anon, fresh as i64, fresh, true)),
        );
        let r = run(events);
        assert_eq!(resident(&r, 2).peak_bytes, 32 << 20);
        assert_eq!(member(resident(&r, 2), "anon").end_bytes, Some(16 << 20));
        assert_eq!(r.totals.resident.as_ref().unwrap().peak_bytes, 64 << 20);
    }

    #[test]
    fn removes_beyond_baseline_are_counted_not_floored() {
        // The fill was not recorded: the child removes 10 pages it was not known to hold, then
        // adds 4.
        let r = run(vec![
            at(0, 1, 1, fork(2)),
            at(1, 2, 2, rss(RssMember::Anon, -10, 0, true)),
            at(2, 2, 2, rss(RssMember::Anon, 4, 4, true)),
        ]);
        let anon = member(resident(&r, 2), "anon");
        assert_eq!(anon.removes_beyond_baseline_bytes, 10 * 4096);
        assert_eq!(anon.end_bytes, Some(-6 * 4096));
        assert_eq!(anon.peak_bytes, 0);
        assert_eq!(
            tree_resident(process(&r, 1)).removes_beyond_baseline_bytes,
            10 * 4096
        );
    }

    #[test]
    fn exec_resets_baseline_and_process_peak() {
        let r = run(vec![
            at(0, 1, 1, rss(RssMember::Anon, 100, 100, true)),
            at(1, 1, 1, exec("/bin/x")),
            at(2, 1, 1, rss(RssMember::Anon, 10, 10, true)),
        ]);
        let res = resident(&r, 1);
        assert_eq!(res.peak_bytes, 10 * 4096);
        assert_eq!(member(res, "anon").baseline_bytes, Some(0));
        assert_eq!(r.totals.resident.as_ref().unwrap().peak_bytes, 100 * 4096);
    }

    #[test]
    fn tree_resident_peak_is_sum_at_one_moment() {
        let r = run(vec![
            at(0, 1, 1, fork(2)),
            at(1, 1, 1, fork(3)),
            at(2, 2, 2, rss(RssMember::Anon, 100, 100, true)),
            at(3, 2, 2, exit(0)),
            at(4, 3, 3, rss(RssMember::Anon, 100, 100, true)),
        ]);
        let t = tree_resident(process(&r, 1));
        assert_eq!(t.peak_bytes, 100 * 4096);
        assert_eq!(t.peak_at_ns, Some(2));
    }

    #[test]
    fn tree_resident_per_member() {
        let r = run(vec![
            at(0, 1, 1, fork(2)),
            at(1, 1, 1, rss(RssMember::File, 3, 3, true)),
            at(2, 2, 2, rss(RssMember::File, 4, 4, true)),
        ]);
        let t = tree_resident(process(&r, 1));
        assert_eq!(member(t, "file").peak_bytes, 7 * 4096);
        assert_eq!(member(t, "file").baseline_bytes, None);
    }

    #[test]
    fn adopted_child_carries_resident_into_parent_tree() {
        let r = run(vec![
            at(0, 2, 1, rss(RssMember::Anon, 6, 6, false)),
            at(1, 1, 1, rss(RssMember::Anon, 6, 6, true)),
            at(2, 1, 1, fork(2)),
        ]);
        assert_eq!(tree_resident(process(&r, 1)).peak_bytes, 12 * 4096);
    }

    #[test]
    fn no_resident_events_means_no_resident_metrics() {
        let r = run(seq(vec![malloc(1, 1)]));
        assert!(process(&r, 1).own.resident.is_none());
        assert!(process(&r, 1).tree.resident.is_none());
        assert!(r.totals.resident.is_none());
    }

    #[test]
    fn teardown_after_exit_is_ignored() {
        let r = run(seq(vec![
            rss(RssMember::Anon, 5, 5, true),
            exit(0),
            rss(RssMember::Anon, -5, 0, true),
        ]));
        assert_eq!(r.run.ignored_events, 1);
        assert_eq!(r.processes.len(), 1);
        assert_eq!(member(resident(&r, 1), "anon").end_bytes, Some(5 * 4096));
    }

    #[test]
    fn fill_of_reused_pid_starts_new_process() {
        let r = run(vec![
            at(0, 2, 2, exit(0)),
            at(1, 2, 1, rss(RssMember::Anon, 8, 8, false)),
            at(2, 1, 1, fork(2)),
        ]);
        assert_eq!(r.processes.iter().filter(|p| p.pid == 2).count(), 2);
        let second = r
            .processes
            .iter()
            .find(|p| p.parent_pid == Some(1))
            .unwrap();
        let anon = &second.own.resident.as_ref().unwrap().members[0];
        assert_eq!(anon.baseline_bytes, Some(8 * 4096));
    }

    #[test]
    fn change_by_others_after_acting_is_a_delta() {
        // Reclaim of a running process's pages is done by another task: a signed change, not
        // a new baseline.
        let r = run(seq(vec![
            rss(RssMember::File, 10, 10, true),
            rss(RssMember::File, -4, 6, false),
        ]));
        let file = member(resident(&r, 1), "file");
        assert_eq!(
            (file.baseline_bytes, file.end_bytes),
            (Some(0), Some(6 * 4096))
        );
    }
}
