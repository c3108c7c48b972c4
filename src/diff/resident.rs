//! The resident memory by call site of two recordings (issue 35), matched as the allocation
//! sites are (`sites::key`: each frame's function and module, not its address): the code whose
//! pages at the resident peak, or pages made resident in all, changed most. What no walked
//! stack made resident is compared too, as one more row, so the changes add up to the change of
//! the peak.

use serde::Serialize;

use super::sites::pair_by_key;
use crate::model::metric::difference;
use crate::model::sites::{FaultSampling, ResidentSite, ResidentSites, SiteFrame};

/// What one site held in one recording.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ResidentCounts {
    /// Bytes resident at the resident peak.
    pub resident_bytes: u64,
    /// Bytes made resident in all.
    pub faulted_bytes: u64,
}

impl ResidentCounts {
    fn add(&mut self, s: &ResidentSite) {
        self.resident_bytes = self.resident_bytes.saturating_add(s.resident.total_bytes);
        self.faulted_bytes = self.faulted_bytes.saturating_add(s.faulted.total_bytes);
    }
}

/// One site in both recordings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ResidentChange {
    /// Its frames, innermost first, as the new recording names them (the base's for a site
    /// only the base has); none for the unattributed row.
    pub frames: Vec<SiteFrame>,
    /// Whether it is what no walked stack made resident.
    pub unattributed: bool,
    pub base: ResidentCounts,
    pub new: ResidentCounts,
    /// `new.resident_bytes - base.resident_bytes`.
    pub resident_bytes_change: i64,
    /// `new.faulted_bytes - base.faulted_bytes`.
    pub faulted_bytes_change: i64,
    /// "matched", "added" (only the new recording has it) or "removed".
    pub status: &'static str,
}

/// The resident sites of both recordings that changed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResidentDiff {
    /// The resident peaks the sites are taken at.
    pub base_peak_bytes: u64,
    pub new_peak_bytes: u64,
    /// Distinct sites (by key) in each recording.
    pub base_sites: u64,
    pub new_sites: u64,
    /// Sites (and the unattributed row) whose bytes changed.
    pub changed_total: u64,
    /// The top changed ones: the largest change at the peak first, then of bytes made resident.
    pub changed: Vec<ResidentChange>,
    /// Present when that recording sampled its faults' stacks: its values are estimates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_sampling: Option<FaultSampling>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_sampling: Option<FaultSampling>,
}

/// Compares every resident site of `base` with every one of `new` (from reports that kept
/// every site) and keeps the `top` that changed most (0: all of them).
pub fn compare(base: &ResidentSites, new: &ResidentSites, top: usize) -> ResidentDiff {
    let mut changed = Vec::new();
    let mut push = |frames, unattributed, b: ResidentCounts, n: ResidentCounts, status| {
        if b != n {
            changed.push(ResidentChange {
                frames,
                unattributed,
                base: b,
                new: n,
                resident_bytes_change: difference(b.resident_bytes, n.resident_bytes),
                faulted_bytes_change: difference(b.faulted_bytes, n.faulted_bytes),
                status,
            });
        }
    };
    let sites = (base.sites.as_slice(), new.sites.as_slice());
    let (base_total, new_total) = pair_by_key(
        sites,
        |s| &s.frames,
        ResidentCounts::add,
        |frames, b, n, status| push(frames, false, b, n, status),
    );
    let counts = |s: &ResidentSite| {
        let mut c = ResidentCounts::default();
        c.add(s);
        c
    };
    let (b, n) = (counts(&base.unattributed), counts(&new.unattributed));
    push(Vec::new(), true, b, n, "matched");
    changed.sort_by_key(|c| {
        std::cmp::Reverse((
            c.resident_bytes_change.unsigned_abs(),
            c.faulted_bytes_change.unsigned_abs(),
        ))
    });
    let changed_total = changed.len() as u64;
    if top > 0 {
        changed.truncate(top);
    }
    ResidentDiff {
        base_peak_bytes: base.peak_bytes,
        new_peak_bytes: new.peak_bytes,
        base_sites: base_total,
        new_sites: new_total,
        changed_total,
        changed,
        base_sampling: base.sampling,
        new_sampling: new.sampling,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::sites::MemberBytes;

    fn frame(function: &str, offset: u64) -> SiteFrame {
        SiteFrame {
            function: function.to_string(),
            file: String::new(),
            line: 0,
            module: "/a/touch".to_string(),
            offset,
            inlined: false,
        }
    }

    fn anon(bytes: u64) -> MemberBytes {
        MemberBytes {
            anon_bytes: bytes,
            total_bytes: bytes,
            ..MemberBytes::default()
        }
    }

    fn site(function: &str, offset: u64, resident: u64, faulted: u64) -> ResidentSite {
        ResidentSite {
            stack_id: offset as u32,
            resident: anon(resident),
            faulted: anon(faulted),
            frames: vec![frame(function, offset), frame("main", 0x900)],
        }
    }

    fn sites(list: Vec<ResidentSite>, unattributed: u64) -> ResidentSites {
        ResidentSites {
            peak_bytes: list.iter().map(|s| s.resident.total_bytes).sum::<u64>() + unattributed,
            sites_total: list.len() as u64,
            sites: list,
            unattributed: ResidentSite {
                resident: anon(unattributed),
                faulted: anon(unattributed),
                ..ResidentSite::default()
            },
            ..ResidentSites::default()
        }
    }

    #[test]
    fn sites_match_by_function_and_the_changes_add_up_to_the_peaks() {
        let base = sites(
            vec![
                site("touch_a", 0x100, 8 << 20, 8 << 20),
                site("touch_b", 0x200, 24 << 20, 24 << 20),
            ],
            1 << 20,
        );
        // A new build: other addresses, touch_b grown, touch_a gone, read_c new.
        let new = sites(
            vec![
                site("touch_b", 0x280, 32 << 20, 40 << 20),
                site("read_c", 0x300, 16 << 20, 16 << 20),
            ],
            2 << 20,
        );
        let d = compare(&base, &new, 0);
        let got: Vec<(&str, &str, i64, i64)> = d
            .changed
            .iter()
            .map(|c| {
                let name = c.frames.first().map_or("", |f| f.function.as_str());
                (
                    name,
                    c.status,
                    c.resident_bytes_change,
                    c.faulted_bytes_change,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("read_c", "added", 16 << 20, 16 << 20),
                ("touch_b", "matched", 8 << 20, 16 << 20),
                ("touch_a", "removed", -(8 << 20), -(8 << 20)),
                ("", "matched", 1 << 20, 1 << 20),
            ]
        );
        assert!(d.changed[3].unattributed);
        let sum: i64 = d.changed.iter().map(|c| c.resident_bytes_change).sum();
        assert_eq!(sum, difference(d.base_peak_bytes, d.new_peak_bytes));
        assert_eq!((d.base_sites, d.new_sites, d.changed_total), (2, 2, 4));
        assert_eq!(compare(&base, &new, 2).changed.len(), 2);
    }

    #[test]
    fn unchanged_sites_are_left_out() {
        let one = sites(vec![site("touch_a", 0x100, 4096, 8192)], 4096);
        let d = compare(&one, &one, 0);
        assert_eq!((d.changed_total, d.changed.len()), (0, 0));
    }
}
