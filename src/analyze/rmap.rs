//! Signed per-process rmap accounting: resident pages counted from the kernel's reverse-mapping
//! events (`Rmap` records, bpf/rmap.bpf.c), cross-checked against rss_stat; part of the
//! accounting pass.
//!
//! Flow: `accounting` routes each `Rmap` event to the process's [`ProcRmap`]; at the end the
//! report lists, per process and kind (anon, file, shmem), the pages mapped (adds), unmapped
//! (removes) and their signed running sum (net), never clamped. Pages a child inherits at fork
//! produce no adds under its pid (fork copies page tables without the hooked functions), so a
//! child that unmaps them has more removes than adds: the contract of
//! `fork-inherited-unmap-contract.txt`. The inherited baseline is kept apart: it comes from
//! rss_stat (what the kernel filled into the child's counters at fork, or an image's starting
//! pages at exec), and each page is followed by address, so a remove of a page the process
//! never added is counted as "inherited, since unmapped" and a remove of one it added leaves
//! its "own" pages. rmap-derived resident = baseline + net; rss_stat's own figure next to it,
//! with the difference.
//!
//! Costs: one entry per own resident page (a hash set of page addresses) and one per event
//! (kept to find what was resident at the process's rmap peak, which `by_mapping` groups);
//! the pass is only made when the file has `Rmap` records.

use std::collections::{BTreeMap, HashMap};

use crate::format::RssMember;
use crate::model::rmap::{RegionResident, RmapKind, RmapProcess};

/// Kinds the rmap hooks report, in the order reports list them.
pub(super) const KINDS: [RssMember; 3] = [RssMember::Anon, RssMember::File, RssMember::Shmem];

/// The rmap state of one process image.
#[derive(Debug, Default)]
pub(super) struct ProcRmap {
    /// rss_stat's values when the image's first rmap event came, per `RssMember` number: what
    /// it held without adds of its own (filled at fork, or set up by exec, which the rmap
    /// hooks leave out); None until then.
    pub(super) inherited: Option<[i64; 4]>,
    /// Pages added, removed, per `RssMember` number.
    adds: [u64; 4],
    removes: [u64; 4],
    /// Removes of pages this image never added: inherited at fork (or set up by exec).
    inherited_unmapped: [u64; 4],
    /// Own pages mapped now: page address -> member number.
    own: HashMap<u64, u8>,
    /// Signed sum, all kinds, and its peak (pages) with its time: the moment `by_mapping` looks
    /// at.
    net_total: i64,
    peak_total: i64,
    peak_ns: u64,
    /// Every event of the image, for the peak's page set: (ts, addr, signed pages, member).
    log: Vec<(u64, u64, i32, u8)>,
    /// The mappings rmap events fell into: start -> (end, what, file name). Kept across exec:
    /// the kernel side sends a mapping once per process and address range.
    regions: BTreeMap<u64, (u64, String, String)>,
}

impl ProcRmap {
    /// Applies `pages` (signed) of `member` at `addr`, of page size `page`, at `ts`.
    pub(super) fn apply(&mut self, member: RssMember, pages: i32, addr: u64, page: u64, ts: u64) {
        let m = member as usize;
        let n = u64::from(pages.unsigned_abs());
        if pages >= 0 {
            self.adds[m] = self.adds[m].saturating_add(n);
            for k in 0..n {
                self.own.insert(addr.wrapping_add(k * page), m as u8);
            }
        } else {
            self.removes[m] = self.removes[m].saturating_add(n);
            for k in 0..n {
                if self.own.remove(&addr.wrapping_add(k * page)).is_none() {
                    self.inherited_unmapped[m] += 1;
                }
            }
        }
        self.net_total = self.net_total.saturating_add(i64::from(pages));
        if self.net_total > self.peak_total {
            self.peak_total = self.net_total;
            self.peak_ns = ts;
        }
        self.log.push((ts, addr, pages, m as u8));
    }

    /// Signed net pages of `member`: adds minus removes.
    pub(super) fn net(&self, member: RssMember) -> i64 {
        let m = member as usize;
        (self.adds[m] as i64).saturating_sub(self.removes[m] as i64)
    }

    /// Starts a new image (exec): the old address space is gone.
    pub(super) fn start_image(&mut self) {
        let regions = std::mem::take(&mut self.regions);
        *self = ProcRmap {
            regions,
            ..ProcRmap::default()
        };
    }

    /// The mapping [start, end) is `what` (file name `name`), replacing what overlapped it.
    pub(super) fn note_region(&mut self, start: u64, end: u64, what: &str, name: &str) {
        let stale: Vec<u64> = self
            .regions
            .range(..end)
            .filter(|(_, (e, _, _))| *e > start)
            .map(|(s, _)| *s)
            .collect();
        for s in stale {
            self.regions.remove(&s);
        }
        self.regions
            .insert(start, (end, what.to_string(), name.to_string()));
    }

    /// What holds a page of `member` at `addr`: the file's name, or heap, stack, anonymous
    /// mmap, shmem.
    fn region_of(&self, addr: u64, member: u8) -> String {
        let found = self
            .regions
            .range(..=addr)
            .next_back()
            .filter(|(_, (end, _, _))| addr < *end);
        let Some((_, (_, what, name))) = found else {
            return "unknown mapping".into();
        };
        match what.as_str() {
            "file" if member == RssMember::Anon as u8 => format!("{name} (private copies)"),
            "file" => name.clone(),
            "shmem" => format!("shmem {name}"),
            "anon" => "anonymous mmap".into(),
            other => other.to_string(),
        }
    }

    /// The pages mapped by the image at `ts` (its own adds still mapped then), as page address
    /// -> member, replayed from the log.
    fn pages_at(&self, ts: u64, page: u64) -> HashMap<u64, u8> {
        let mut pages = HashMap::new();
        for &(t, addr, n, m) in self.log.iter().take_while(|e| e.0 <= ts) {
            let _ = t;
            for k in 0..u64::from(n.unsigned_abs()) {
                let a = addr.wrapping_add(k * page);
                if n >= 0 {
                    pages.insert(a, m);
                } else {
                    pages.remove(&a);
                }
            }
        }
        pages
    }

    /// The metrics form, with rss_stat's current value per member (pages, when the recording
    /// has them).
    pub(super) fn metrics(
        &self,
        pid: u32,
        command: String,
        rss: Option<[i64; 4]>,
        page: u64,
        start_ns: u64,
    ) -> RmapProcess {
        let kinds = KINDS
            .iter()
            .map(|&member| {
                let m = member as usize;
                let net = self.net(member);
                let own = self.own.values().filter(|&&k| k as usize == m).count() as u64;
                let baseline = self.inherited.map(|b| b[m]);
                let rss_stat = rss.map(|v| v[m]);
                let resident = baseline.map(|b| b.saturating_add(net));
                RmapKind {
                    kind: member.name().to_string(),
                    adds_pages: self.adds[m],
                    removes_pages: self.removes[m],
                    net_pages: net,
                    own_resident_pages: own,
                    inherited_pages: baseline,
                    inherited_unmapped_pages: self.inherited_unmapped[m],
                    rmap_resident_pages: resident,
                    rss_stat_pages: rss_stat,
                    difference_pages: resident.zip(rss_stat).map(|(r, s)| r - s),
                }
            })
            .collect();
        let mut by: HashMap<String, u64> = HashMap::new();
        if self.peak_total > 0 {
            for (addr, m) in self.pages_at(self.peak_ns, page) {
                *by.entry(self.region_of(addr, m)).or_default() += page;
            }
        }
        let mut by_mapping: Vec<RegionResident> = by
            .into_iter()
            .map(|(region, bytes)| RegionResident { region, bytes })
            .collect();
        by_mapping.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.region.cmp(&b.region)));
        RmapProcess {
            pid,
            command,
            kinds,
            peak_own_bytes: self.peak_total.max(0).unsigned_abs().saturating_mul(page),
            peak_at_ns: (self.peak_total > 0).then(|| self.peak_ns.saturating_sub(start_ns)),
            by_mapping,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{EventKind, RmapRegion};
    use crate::testkit::{at, fork, rss, run};

    fn rmap(member: RssMember, pages: i32, addr: u64) -> EventKind {
        EventKind::Rmap {
            member,
            pages,
            addr,
        }
    }

    fn region(start: u64, end: u64, what: &str, name: &str) -> EventKind {
        EventKind::RmapRegion(RmapRegion {
            start,
            end,
            what: what.into(),
            name: name.into(),
        })
    }

    /// The seed's contract through the whole accounting pass: the parent maps 32 MiB, the
    /// kernel fills the child's counters at fork, the child unmaps them: its anon net is
    /// -8192 pages, all inherited, rmap and rss_stat agree, nothing is clamped; the views say
    /// so.
    #[test]
    fn a_child_unmapping_what_it_inherited_goes_negative_in_every_view() {
        const BASE: u64 = 0x7f00_0000_0000;
        let (parent, child) = (10, 11);
        let mut events = vec![
            at(
                1,
                parent,
                parent,
                region(BASE, BASE + (32 << 20), "anon", ""),
            ),
            at(2, parent, parent, rmap(RssMember::Anon, 8192, BASE)),
            at(3, parent, parent, rss(RssMember::Anon, 8192, 8192, true)),
            at(4, parent, parent, fork(child)),
            at(5, child, parent, rss(RssMember::Anon, 8192, 8192, false)),
        ];
        // The child unmaps page by page, as zap_pte_range calls the remove function per folio.
        for k in 0..8192u64 {
            events.push(at(
                6 + k,
                child,
                child,
                rmap(RssMember::Anon, -1, BASE + k * 4096),
            ));
        }
        events.push(at(9000, child, child, rss(RssMember::Anon, -8192, 0, true)));
        let report = run(events);
        let rmap = report.rmap.as_ref().expect("rmap section");
        let c = rmap.processes.iter().find(|p| p.pid == child).unwrap();
        let anon = &c.kinds[0];
        assert_eq!(
            (anon.adds_pages, anon.removes_pages, anon.net_pages),
            (0, 8192, -8192)
        );
        assert_eq!(anon.inherited_pages, Some(8192));
        assert_eq!(anon.inherited_unmapped_pages, 8192);
        assert_eq!(anon.own_resident_pages, 0);
        assert_eq!(
            (
                anon.rmap_resident_pages,
                anon.rss_stat_pages,
                anon.difference_pages
            ),
            (Some(0), Some(0), Some(0))
        );
        let p = rmap.processes.iter().find(|p| p.pid == parent).unwrap();
        assert_eq!(p.peak_own_bytes, 32 << 20);
        let held: Vec<_> = p
            .by_mapping
            .iter()
            .map(|r| (r.region.as_str(), r.bytes))
            .collect();
        assert_eq!(held, [("anonymous mmap", 32 << 20)]);

        let mut text = Vec::new();
        crate::views::text::write_text(&report, &Default::default(), &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains("adds 0, removes 8192, net -8192"), "{text}");
        assert!(text.contains("inherited since unmapped 8192"), "{text}");
        assert!(text.contains("anonymous mmap 32.0 MiB"), "{text}");
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["rmap"]["processes"][1]["kinds"][0]["net_pages"], -8192);
    }

    #[test]
    fn a_report_without_rmap_events_has_no_rmap_section() {
        let report = run(vec![at(1, 1, 1, rss(RssMember::Anon, 5, 5, true))]);
        assert!(report.rmap.is_none());
        let json = serde_json::to_value(&report).unwrap();
        assert!(json.get("rmap").is_none(), "the JSON stays as it was");
    }

    #[test]
    fn removes_of_inherited_pages_go_negative_unclamped() {
        let mut r = ProcRmap {
            inherited: Some([0, 8200, 0, 0]),
            ..ProcRmap::default()
        };
        // 32 MiB inherited, unmapped by the child: removes only.
        r.apply(RssMember::Anon, -8192, 0x7f00_0000_0000, 4096, 10);
        assert_eq!(r.net(RssMember::Anon), -8192);
        assert_eq!(r.inherited_unmapped[RssMember::Anon as usize], 8192);
        assert!(r.own.is_empty());
        let m = r.metrics(7, "child".into(), Some([0, 8, 0, 0]), 4096, 0);
        let anon = &m.kinds[0];
        assert_eq!(
            (
                anon.net_pages,
                anon.rmap_resident_pages,
                anon.difference_pages
            ),
            (-8192, Some(8), Some(0))
        );
    }

    #[test]
    fn own_pages_come_and_go_by_address_and_the_peak_set_is_replayed() {
        let mut r = ProcRmap::default();
        r.apply(RssMember::Anon, 4, 0x1000, 4096, 1);
        r.apply(RssMember::File, 2, 0x10_0000, 4096, 2);
        r.apply(RssMember::Anon, -1, 0x1000, 4096, 3); // own
        r.apply(RssMember::Anon, -1, 0x9000, 4096, 4); // never added
        assert_eq!(r.own.len(), 5);
        assert_eq!(r.inherited_unmapped[RssMember::Anon as usize], 1);
        assert_eq!((r.peak_total, r.peak_ns), (6, 2));
        r.note_region(0, 0x10_0000, "heap", "");
        r.note_region(0x10_0000, 0x20_0000, "file", "data.bin");
        let m = r.metrics(1, "p".into(), None, 4096, 0);
        let by: Vec<_> = m
            .by_mapping
            .iter()
            .map(|r| (r.region.as_str(), r.bytes))
            .collect();
        assert_eq!(by, [("heap", 16384), ("data.bin", 8192)]);
        assert_eq!(m.peak_own_bytes, 6 * 4096);
    }
}
