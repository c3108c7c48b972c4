//! The allocation sites of two recordings with call stacks, matched by their frames' function
//! and module rather than by address (addresses move with every build): the sites whose bytes
//! or counts changed most.
//!
//! A site's key is its frames, innermost first, each as (function, module file name). A frame
//! without a function name (no symbols) is keyed by module file name and offset, which only
//! names the same code in the same build of the module: the report does not carry build ids,
//! so two builds of an unsymbolized module may fail to match (and show as a site gone and a
//! site new). Sites of one recording with the same key (the same function calling from two
//! places) are added together.

use std::collections::HashMap;

use serde::Serialize;

use crate::model::sites::{SiteFrame, SiteMetrics, StackReport, StackSampling};

use crate::model::metric::difference;

/// What one site did in one recording.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SiteCounts {
    /// Bytes its allocations requested.
    pub allocated_bytes: u64,
    /// Its allocations.
    pub allocations: u64,
    /// Its bytes live when their process exited.
    pub leaked_bytes: u64,
    /// Its temporary allocations.
    pub temporary: u64,
}

impl SiteCounts {
    fn add(&mut self, s: &SiteMetrics) {
        self.allocated_bytes = self.allocated_bytes.saturating_add(s.allocated_bytes);
        self.allocations = self.allocations.saturating_add(s.allocations);
        self.leaked_bytes = self.leaked_bytes.saturating_add(s.leaked_bytes);
        self.temporary = self.temporary.saturating_add(s.temporary);
    }
}

/// One site in both recordings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SiteChange {
    /// Its frames, innermost first, as the new recording names them (the base's for a site
    /// only the base has).
    pub frames: Vec<SiteFrame>,
    /// What it did in the base recording (zeros when only the new one has it).
    pub base: SiteCounts,
    /// What it did in the new recording (zeros when only the base has it).
    pub new: SiteCounts,
    /// `new.allocated_bytes - base.allocated_bytes`.
    pub allocated_bytes_change: i64,
    /// `new.allocations - base.allocations`.
    pub allocations_change: i64,
    /// `new.leaked_bytes - base.leaked_bytes`.
    pub leaked_bytes_change: i64,
    /// Whether only the new recording has it ("added"), only the base ("removed"), or both
    /// ("matched").
    pub status: &'static str,
}

/// The sites of both recordings that changed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SitesDiff {
    /// Distinct sites (by key) in the base recording.
    pub base_sites: u64,
    /// Distinct sites (by key) in the new recording.
    pub new_sites: u64,
    /// Sites whose bytes, count, leaks or temporaries changed.
    pub changed_total: u64,
    /// The top changed ones: the largest change of bytes allocated first, then of the count.
    pub changed: Vec<SiteChange>,
    /// Present when the base recording sampled its stacks: its sites' values are estimates
    /// (the report's `stacks.sampling`); absent for exact stacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_sampling: Option<StackSampling>,
    /// Likewise for the new recording.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_sampling: Option<StackSampling>,
}

/// The key a site is matched by: per frame, the function (or the offset when unnamed) and the
/// module's file name.
pub fn key(frames: &[SiteFrame]) -> SiteKey {
    frames
        .iter()
        .map(|f| {
            let module = f.module.rsplit('/').next().unwrap_or(&f.module).to_string();
            if f.function.is_empty() {
                (format!("+{:#x}", f.offset), module)
            } else {
                (f.function.clone(), module)
            }
        })
        .collect()
}

/// A site's key: per frame, (function or offset, module file name).
pub type SiteKey = Vec<(String, String)>;

/// The sites of one recording by key: the first site's frames and the counts (`C`) added.
type Keyed<C> = HashMap<SiteKey, (Vec<SiteFrame>, C)>;

/// `sites` (each with its frames, `frames_of`) by key, with their frames (the first site's) and
/// counts added (`add`), and the keys in order of first appearance.
fn by_key<T, C: Default>(
    sites: &[T],
    frames_of: impl Fn(&T) -> &Vec<SiteFrame>,
    add: impl Fn(&mut C, &T),
) -> (Vec<SiteKey>, Keyed<C>) {
    let mut order = Vec::new();
    let mut keyed = Keyed::new();
    for s in sites {
        let frames = frames_of(s);
        let k = key(frames);
        let entry = keyed.entry(k.clone()).or_insert_with(|| {
            order.push(k);
            (frames.to_vec(), C::default())
        });
        add(&mut entry.1, s);
    }
    (order, keyed)
}

/// Pairs the sites of `base` and `new` by key ([`by_key`]): `pair(frames, base counts, new
/// counts, status)` for each key either has, the new recording's first in its order ("matched"
/// or "added", the new frames), then those only the base has ("removed"). Returns how many
/// distinct keys each has.
pub(super) fn pair_by_key<T, C: Default + Clone>(
    (base, new): (&[T], &[T]),
    frames_of: impl Fn(&T) -> &Vec<SiteFrame>,
    add: impl Fn(&mut C, &T),
    mut pair: impl FnMut(Vec<SiteFrame>, C, C, &'static str),
) -> (u64, u64) {
    let (base_order, mut base_sites) = by_key(base, &frames_of, &add);
    let (new_order, new_sites) = by_key(new, &frames_of, &add);
    let totals = (base_sites.len() as u64, new_sites.len() as u64);
    for k in &new_order {
        let (frames, n) = new_sites[k].clone();
        match base_sites.remove(k) {
            Some((_, b)) => pair(frames, b, n, "matched"),
            None => pair(frames, C::default(), n, "added"),
        }
    }
    for k in &base_order {
        if let Some((frames, b)) = base_sites.remove(k) {
            pair(frames, b, C::default(), "removed");
        }
    }
    totals
}

/// Compares every site of `base` with every site of `new` (both from `report --stacks` with
/// every site kept) and keeps the `top` that changed most (0: all of them).
pub fn compare(base: &StackReport, new: &StackReport, top: usize) -> SitesDiff {
    let mut changed = Vec::new();
    let push = |frames: Vec<SiteFrame>, b: SiteCounts, n: SiteCounts, status| {
        if b != n {
            changed.push(SiteChange {
                frames,
                base: b,
                new: n,
                allocated_bytes_change: difference(b.allocated_bytes, n.allocated_bytes),
                allocations_change: difference(b.allocations, n.allocations),
                leaked_bytes_change: difference(b.leaked_bytes, n.leaked_bytes),
                status,
            });
        }
    };
    let sites = (base.sites.as_slice(), new.sites.as_slice());
    let (base_total, new_total) = pair_by_key(sites, |s| &s.frames, SiteCounts::add, push);
    changed.sort_by_key(|c| {
        std::cmp::Reverse((
            c.allocated_bytes_change.unsigned_abs(),
            c.allocations_change.unsigned_abs(),
            c.leaked_bytes_change.unsigned_abs(),
        ))
    });
    let changed_total = changed.len() as u64;
    if top > 0 {
        changed.truncate(top);
    }
    SitesDiff {
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

    fn frame(function: &str, module: &str, offset: u64) -> SiteFrame {
        SiteFrame {
            function: function.to_string(),
            file: String::new(),
            line: 0,
            module: module.to_string(),
            offset,
            inlined: false,
        }
    }

    fn site(id: u32, frames: Vec<SiteFrame>, bytes: u64, count: u64) -> SiteMetrics {
        SiteMetrics {
            stack_id: id,
            frames,
            allocated_bytes: bytes,
            allocations: count,
            ..SiteMetrics::default()
        }
    }

    fn stacks(sites: Vec<SiteMetrics>) -> StackReport {
        StackReport {
            recorded: true,
            order: "allocated".into(),
            peak_live_bytes: 0,
            peak_live_at_ns: None,
            sites_total: sites.len() as u64,
            sites,
            local_symbols: None,
            walks: None,
            sampling: None,
            resident: None,
        }
    }

    fn grow(at: u64, module: &str) -> Vec<SiteFrame> {
        vec![
            frame("malloc", "/lib/libc.so.6", 0x9a1b0),
            frame("grow", module, at),
            frame("main", module, at + 0x40),
        ]
    }

    #[test]
    fn frames_match_by_function_and_module_not_address() {
        let base = stacks(vec![site(1, grow(0x100, "/a/diff"), 700, 100)]);
        let new = stacks(vec![site(9, grow(0x180, "/b/diff"), 1400, 200)]);
        let d = compare(&base, &new, 0);
        assert_eq!(d.changed.len(), 1);
        let c = &d.changed[0];
        assert_eq!(
            (c.status, c.allocated_bytes_change, c.allocations_change),
            ("matched", 700, 100)
        );
        assert_eq!(c.frames[1].offset, 0x180, "the new recording's frames");
    }

    #[test]
    fn unchanged_sites_are_left_out_and_new_and_gone_ones_listed() {
        let same = grow(0x100, "/a/diff");
        let mut other = grow(0x100, "/a/diff");
        other[1].function = "shrink".into();
        let mut third = grow(0x100, "/a/diff");
        third[1].function = "leak_one".into();
        let base = stacks(vec![site(1, same.clone(), 10, 1), site(2, other, 5, 1)]);
        let new = stacks(vec![site(3, same, 10, 1), site(4, third, 30, 3)]);
        let d = compare(&base, &new, 0);
        let got: Vec<(&str, i64)> = d
            .changed
            .iter()
            .map(|c| (c.status, c.allocated_bytes_change))
            .collect();
        assert_eq!(got, vec![("added", 30), ("removed", -5)]);
        assert_eq!((d.base_sites, d.new_sites, d.changed_total), (2, 2, 2));
    }

    #[test]
    fn sites_with_one_key_are_added_together() {
        // Two call sites in grow (two stack ids) are one site for the diff.
        let base = stacks(vec![
            site(1, grow(0x100, "/a/diff"), 10, 1),
            site(2, grow(0x110, "/a/diff"), 20, 2),
        ]);
        let new = stacks(vec![site(3, grow(0x100, "/a/diff"), 60, 6)]);
        let d = compare(&base, &new, 0);
        assert_eq!(d.base_sites, 1);
        assert_eq!(d.changed[0].base.allocated_bytes, 30);
        assert_eq!(d.changed[0].allocated_bytes_change, 30);
    }

    #[test]
    fn unnamed_frames_match_by_offset() {
        let at = |o| vec![frame("", "/lib/libx.so", o)];
        let d = compare(
            &stacks(vec![site(1, at(0x10), 1, 1)]),
            &stacks(vec![site(1, at(0x20), 1, 1)]),
            0,
        );
        assert_eq!(d.changed.len(), 2, "different offsets are different sites");
    }

    #[test]
    fn each_sides_sampling_is_kept() {
        let exact = stacks(vec![site(1, grow(0x100, "/a/diff"), 10, 1)]);
        let mut sampled = exact.clone();
        sampled.sampling = Some(crate::testkit::stack_sampling());
        let d = compare(&exact, &sampled, 0);
        assert_eq!((d.base_sampling, d.new_sampling), (None, sampled.sampling));
        let d = compare(&sampled, &exact, 0);
        assert_eq!((d.base_sampling, d.new_sampling), (sampled.sampling, None));
        let json = serde_json::to_value(compare(&exact, &exact, 0)).unwrap();
        assert!(json.get("base_sampling").is_none() && json.get("new_sampling").is_none());
        let json = serde_json::to_value(compare(&sampled, &sampled, 0)).unwrap();
        assert_eq!(json["base_sampling"]["mean_bytes"], 512 * 1024);
        assert_eq!(json["new_sampling"]["sampled_allocations"], 1200);
    }

    #[test]
    fn top_keeps_the_largest_changes() {
        let mut f = grow(0x100, "/a/diff");
        let sites: Vec<SiteMetrics> = (0..5u64)
            .map(|i| {
                f[1].function = format!("f{i}");
                site(i as u32, f.clone(), i * 10, i)
            })
            .collect();
        let d = compare(&stacks(Vec::new()), &stacks(sites), 2);
        assert_eq!(d.changed_total, 4, "f0 allocated nothing: unchanged");
        let names: Vec<&str> = d
            .changed
            .iter()
            .map(|c| c.frames[1].function.as_str())
            .collect();
        assert_eq!(names, vec!["f4", "f3"]);
    }
}
