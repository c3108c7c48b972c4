//! Resident memory by call site (issue 35), part of the sites pass (`stacks`): the pages each
//! stack made resident (`Fault` records, bpf/walk.bpf.c's fault_walk), every one of them (the
//! `faulted` view) and those still resident at the scope's resident peak (the `resident` view),
//! anon, file and shmem apart. What no walked stack made resident is each process's
//! "[unattributed]" share, never dropped.
//!
//! The rules (also in docs/report-schema.md, "Resident memory by call site"):
//! - a `Fault` of `pages` pages of one member at address `addr` is a piece of site (stack,
//!   process); with sampled stacks it stands for its estimator weight, as a sampled allocation
//!   does (`Weigher`, over the bytes made resident);
//! - a piece stays resident until the mapping at its address goes: munmap, brk shrinking over
//!   it, mremap (it moves with the range; the part past a shrunk range goes), exec and exit. A
//!   piece without an address (kernels where it is not known) goes at exec and exit only;
//! - the scope's resident memory is rss_stat's, exact: at its peak (the first moment it was
//!   highest) every piece counts for its site, and each process's resident pages beyond its
//!   pieces' are its unattributed share. Pages released without a recorded unmap (madvise,
//!   reclaim) leave pieces behind: where a process's pieces of a member add up past its
//!   resident pages of that member, they are scaled down to them;
//! - `faulted` counts every piece when it is made; each process's unattributed faulted pages
//!   are the increases its own tasks made (rss_stat by owner) beyond its pieces'.
//!
//! Benchmark scopes keep no resident sites: pages stay resident across the windows that made
//! them, so a window's peak is not its own.

use std::collections::BTreeMap;

use crate::format::{EventKind, RssMember};
use crate::intmap::IntMap;
use crate::model::sites::{FaultSampling, MemberBytes, ResidentSite, SiteFrame};

use super::mapped::round_up;
use super::site_table::Weigher;
use super::tree::ProcIdx;

/// The leaf of the "[inherited]" site: the pages each process took over from its parent at
/// fork and has not written since (a write is copy-on-write: the page becomes the writer's).
pub(crate) const INHERITED_LEAF: u32 = crate::model::sites::INHERITED_STACK_ID;

/// The resident members, as the views keep them apart: anon, file, shmem.
pub(super) const MEMBERS: [RssMember; 3] = [RssMember::Anon, RssMember::File, RssMember::Shmem];

/// The index of `member` in [`MEMBERS`]; `None` for swap entries, which are not resident.
fn slot(member: RssMember) -> Option<usize> {
    MEMBERS.iter().position(|&m| m == member)
}

/// Bytes of each resident member.
pub(super) type PerMember = [f64; 3];

fn add(a: &mut PerMember, b: &PerMember, sign: f64) {
    for (x, y) in a.iter_mut().zip(b) {
        *x = (*x + sign * y).max(0.0);
    }
}

/// A site of resident memory: one stack in one process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct ResidentKey {
    pub(super) leaf: u32,
    pub(super) proc: usize,
}

/// What one site (or one process's unattributed share) made resident and holds, in bytes.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Cell {
    /// Made resident, every piece.
    pub(super) faulted: PerMember,
    /// Resident now.
    live: PerMember,
    /// Resident at the latest scope peak, when `changed_at` is at or after that peak.
    at_peak: PerMember,
    changed_at: u64,
}

/// One fault's pages, while they are resident.
#[derive(Clone, Copy, Debug)]
struct Piece {
    key: ResidentKey,
    member: usize,
    bytes: f64,
}

/// A process's resident memory as rss_stat says it, and its pieces.
#[derive(Debug, Default)]
struct Process {
    /// Resident bytes now, per member (rss_stat), and at the latest scope peak.
    cell: Cell,
    /// Bytes its own tasks made resident (increases by the owner), per member.
    made: PerMember,
    /// Pieces by (address, arrival), and those without an address.
    pieces: BTreeMap<(u64, u64), Piece>,
    unplaced: Vec<Piece>,
    /// The peak mark its last change of resident pages made, if it raised the peak: the
    /// `Fault` that follows that change (the same increase) is part of the peak.
    raised: Option<u64>,
}

/// The scope's resident sites.
#[derive(Debug)]
pub(super) struct ResidentSites {
    weigher: Weigher,
    /// The faults' mean interval, bytes made resident, when their stacks were sampled.
    sample_mean: Option<u64>,
    page_bytes: u64,
    sites: IntMap<ResidentKey, Cell>,
    procs: IntMap<usize, Process>,
    /// The scope's resident bytes now, and its peak (bytes, when).
    total: u64,
    pub(super) peak: u64,
    pub(super) peak_ns: Option<u64>,
    clock: u64,
    peak_mark: u64,
    arrivals: u64,
    /// `Fault` records seen, and of them those whose stack was walked.
    pub(super) faults: u64,
    pub(super) walked: u64,
    /// Increases the processes made themselves (rss_stat by the owner): with sampled stacks,
    /// most have no `Fault` record.
    increases: u64,
    /// Writes to inherited pages seen (`Fault` records of 0 pages), and whether the recording
    /// looked for them (header feature `inherited_writes`).
    touches: u64,
    inherited_writes: bool,
}

/// One row of the finished views: a site, or a process's unattributed share (`leaf` 0).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct ResidentRow {
    pub(super) key: ResidentKey,
    pub(super) faulted: PerMember,
    pub(super) at_peak: PerMember,
}

impl ResidentSites {
    /// The sites of a recording whose fault stacks were sampled with a mean of `sample_mean`
    /// bytes made resident (`None`: every one walked), pages of `page_bytes`.
    pub(super) fn new(sample_mean: Option<u64>, page_bytes: u64) -> ResidentSites {
        ResidentSites {
            weigher: sample_mean.map_or(Weigher::exact(), Weigher::sampled),
            sample_mean,
            page_bytes,
            sites: IntMap::default(),
            procs: IntMap::default(),
            total: 0,
            peak: 0,
            peak_ns: None,
            clock: 0,
            peak_mark: 0,
            arrivals: 0,
            faults: 0,
            walked: 0,
            increases: 0,
            touches: 0,
            inherited_writes: false,
        }
    }

    /// The same, saying whether the recording walked its processes' writes to inherited pages.
    pub(super) fn with_inherited_writes(self, seen: bool) -> ResidentSites {
        ResidentSites {
            inherited_writes: seen,
            ..self
        }
    }

    pub(super) fn page_bytes(&self) -> u64 {
        self.page_bytes
    }

    /// How the fault stacks were sampled, and what the estimates stand on; `None` if exact.
    pub(super) fn sampling(&self) -> Option<FaultSampling> {
        self.sample_mean.map(|mean_bytes| FaultSampling {
            mean_bytes,
            walked: self.walked,
            increases: self.increases(),
        })
    }

    /// The increases the processes made themselves, walked or not; never fewer than the
    /// `Fault` records seen.
    fn increases(&self) -> u64 {
        self.increases.max(self.faults)
    }

    /// Whether any fault was recorded: the views have something to show.
    pub(super) fn recorded(&self) -> bool {
        self.faults + self.touches > 0
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// `cell`, about to change: it saves what it held if the scope peaked since its last change.
    fn changing(cell: &mut Cell, mark: u64, now: u64) {
        if cell.changed_at < mark {
            cell.at_peak = cell.live;
        }
        cell.changed_at = now;
    }

    fn at_peak(&self, cell: &Cell) -> PerMember {
        if cell.changed_at < self.peak_mark {
            cell.live
        } else {
            cell.at_peak
        }
    }

    /// Process `i`'s own tasks made `pages` pages of `member` resident (an increase by the owner).
    pub(super) fn made(&mut self, i: ProcIdx, member: RssMember, pages: u64) {
        if let Some(m) = slot(member) {
            self.increases += 1;
            let p = self.procs.entry(i.get()).or_default();
            p.made[m] += pages as f64 * self.page_bytes as f64;
        }
    }

    /// Process `i` got `pages` pages of `member` from its parent at fork (its counters filled
    /// before it ran): its "[inherited]" site, until it writes them or loses its address space.
    pub(super) fn inherited(&mut self, i: ProcIdx, member: RssMember, pages: u64) {
        let Some(member) = slot(member) else {
            return;
        };
        let piece = Piece {
            key: inherited_key(i),
            member,
            bytes: (pages * self.page_bytes) as f64,
        };
        self.change(&piece, 1.0);
    }

    /// Process `i` wrote an inherited page at `addr` with stack `leaf` (0: not walked), which
    /// copy-on-write made its own anonymous page: one page (or, sampled, its estimator weight)
    /// goes from its "[inherited]" to that site, as much as is left there. A page written with no
    /// stack walked leaves "[inherited]" for the unattributed share.
    fn touch(&mut self, i: ProcIdx, addr: u64, leaf: u32) {
        self.touches += 1;
        let anon = slot(RssMember::Anon).expect("anon is resident");
        let from = inherited_key(i);
        let left = self.sites.get(&from).map_or(0.0, |c| c.live[anon]);
        // The weight of the page as a walked touch, whether or not its walk succeeded.
        let Some(weight) = self.weigher.weigh(INHERITED_LEAF, self.page_bytes) else {
            return;
        };
        let bytes = weight.bytes.min(left);
        if bytes <= 0.0 {
            return;
        }
        self.change(
            &Piece {
                key: from,
                member: anon,
                bytes,
            },
            -1.0,
        );
        if leaf == 0 {
            return;
        }
        let piece = Piece {
            key: ResidentKey {
                leaf,
                proc: i.get(),
            },
            member: anon,
            bytes,
        };
        self.change(&piece, 1.0);
        self.place(i, addr, piece);
    }

    /// Keeps `piece` of process `i` at `addr` (0: not known) until its mapping goes.
    fn place(&mut self, i: ProcIdx, addr: u64, piece: Piece) {
        self.arrivals += 1;
        let p = self.procs.entry(i.get()).or_default();
        if addr == 0 {
            p.unplaced.push(piece);
        } else {
            p.pieces.insert((addr, self.arrivals), piece);
        }
    }

    /// Process `i`'s resident pages are now `pages` (per member, as rss_stat numbers them), at
    /// `ts`.
    pub(super) fn resident(&mut self, i: ProcIdx, pages: [u64; 4], ts: u64) {
        let now = self.tick();
        let (mark, page) = (self.peak_mark, self.page_bytes as f64);
        let p = self.procs.entry(i.get()).or_default();
        let live: PerMember = MEMBERS.map(|m| pages[m as usize] as f64 * page);
        let before: f64 = p.cell.live.iter().sum();
        Self::changing(&mut p.cell, mark, now);
        p.cell.live = live;
        let after: f64 = live.iter().sum();
        p.raised = None;
        self.total = (self.total as f64 - before + after).max(0.0).round() as u64;
        if self.total > self.peak {
            self.peak = self.total;
            self.peak_ns = Some(ts);
            // Every change so far is before the peak: their cells hold their peak values now.
            self.peak_mark = self.tick();
            self.procs.entry(i.get()).or_default().raised = Some(self.peak_mark);
        }
    }

    /// Process `i` made `pages` pages of `member` resident at `addr` (0: not known), with stack
    /// `leaf` (0: not walked).
    pub(super) fn fault(
        &mut self,
        i: ProcIdx,
        member: RssMember,
        pages: u32,
        addr: u64,
        leaf: u32,
    ) {
        if pages == 0 {
            return self.touch(i, addr, leaf);
        }
        let Some(member) = slot(member) else {
            return;
        };
        self.faults += 1;
        let bytes = u64::from(pages) * self.page_bytes;
        let Some(weight) = self.weigher.weigh(leaf, bytes).filter(|_| leaf != 0) else {
            return;
        };
        self.walked += 1;
        let key = ResidentKey {
            leaf,
            proc: i.get(),
        };
        let piece = Piece {
            key,
            member,
            bytes: weight.bytes,
        };
        let p = self.procs.entry(i.get()).or_default();
        if p.raised.is_some() && p.raised == Some(self.peak_mark) {
            // The increase that raised the peak: its pages were resident at it.
            let cell = self.sites.entry(key).or_default();
            cell.live[member] += weight.bytes;
            if cell.changed_at >= self.peak_mark {
                cell.at_peak[member] += weight.bytes;
            }
        } else {
            self.change(&piece, 1.0);
        }
        self.sites.entry(key).or_default().faulted[member] += weight.bytes;
        self.place(i, addr, piece);
    }

    /// Adds (`sign` 1) or removes (-1) `piece` from its site's resident bytes.
    fn change(&mut self, piece: &Piece, sign: f64) {
        let now = self.tick();
        let mark = self.peak_mark;
        let cell = self.sites.entry(piece.key).or_default();
        Self::changing(cell, mark, now);
        let mut d = [0.0; 3];
        d[piece.member] = piece.bytes;
        add(&mut cell.live, &d, sign);
    }

    /// The pieces of process `i` in [lo, hi), taken out.
    fn take(&mut self, i: ProcIdx, lo: u64, hi: u64) -> Vec<(u64, Piece)> {
        let Some(p) = self.procs.get_mut(&i.get()) else {
            return Vec::new();
        };
        let keys: Vec<(u64, u64)> = p.pieces.range((lo, 0)..(hi, 0)).map(|(k, _)| *k).collect();
        keys.into_iter()
            .filter_map(|k| p.pieces.remove(&k).map(|piece| (k.0, piece)))
            .collect()
    }

    /// Process `i`'s mapping change `kind` (munmap, mremap, brk) ends or moves its pieces.
    pub(super) fn mapping(&mut self, i: ProcIdx, kind: &EventKind) {
        let page = self.page_bytes;
        let round_up = |len: u64| round_up(len, page);
        match *kind {
            EventKind::Munmap { addr, len } => {
                self.unmap(i, addr, addr.saturating_add(round_up(len)))
            }
            EventKind::Brk { from, to } if to < from => self.unmap(i, to, from),
            EventKind::Mremap {
                old_addr,
                old_len,
                addr,
                len,
            } => {
                let moved = self.take(i, old_addr, old_addr.saturating_add(round_up(old_len)));
                let kept = round_up(len);
                for (at, piece) in moved {
                    let offset = at - old_addr;
                    if offset < kept {
                        self.arrivals += 1;
                        let p = self.procs.entry(i.get()).or_default();
                        p.pieces.insert((addr + offset, self.arrivals), piece);
                    } else {
                        self.change(&piece, -1.0);
                    }
                }
            }
            _ => {}
        }
    }

    fn unmap(&mut self, i: ProcIdx, lo: u64, hi: u64) {
        for (_, piece) in self.take(i, lo, hi) {
            self.change(&piece, -1.0);
        }
    }

    /// Process `i` lost its address space (exec or exit): every piece goes, and what it
    /// inherited.
    pub(super) fn drop_process(&mut self, i: ProcIdx) {
        // What it still held of what it got at fork ends with it, every member at once.
        let (now, mark) = (self.tick(), self.peak_mark);
        if let Some(cell) = self.sites.get_mut(&inherited_key(i)) {
            Self::changing(cell, mark, now);
            cell.live = [0.0; 3];
        }
        let mut pieces = Vec::new();
        if let Some(p) = self.procs.get_mut(&i.get()) {
            pieces.extend(std::mem::take(&mut p.pieces).into_values());
            pieces.append(&mut p.unplaced);
        }
        for piece in pieces {
            self.change(&piece, -1.0);
        }
    }

    /// The views' rows: every site, then every process's unattributed share (`leaf` 0), in key
    /// order. At the peak a process's sites are scaled down, per member, to what it held.
    pub(super) fn rows(&self) -> Vec<ResidentRow> {
        let mut rows: Vec<ResidentRow> = self
            .sites
            .iter()
            .map(|(&key, cell)| ResidentRow {
                key,
                faulted: cell.faulted,
                at_peak: self.at_peak(cell),
            })
            .collect();
        rows.sort_by_key(|r| r.key);
        let mut procs: Vec<(&usize, &Process)> = self.procs.iter().collect();
        procs.sort_by_key(|(k, _)| **k);
        for (&proc, p) in procs {
            let held = self.at_peak(&p.cell);
            let mine = |r: &&mut ResidentRow| r.key.proc == proc;
            let mut sum_peak = [0.0; 3];
            for r in rows.iter_mut().filter(|r| r.key.proc == proc) {
                add(&mut sum_peak, &r.at_peak, 1.0);
            }
            for m in 0..3 {
                let scale = if sum_peak[m] > held[m] {
                    held[m] / sum_peak[m]
                } else {
                    1.0
                };
                // Whole bytes, as reported, so that the unattributed share makes the rows add
                // up to the peak exactly.
                sum_peak[m] = 0.0;
                for r in rows.iter_mut().filter(mine) {
                    r.at_peak[m] = (r.at_peak[m] * scale).floor();
                    r.faulted[m] = r.faulted[m].round();
                    sum_peak[m] += r.at_peak[m];
                }
            }
            let mut sum_faulted = [0.0; 3];
            for r in rows.iter().filter(|r| r.key.proc == proc) {
                add(&mut sum_faulted, &r.faulted, 1.0);
            }
            let mut unattributed = ResidentRow {
                key: ResidentKey { leaf: 0, proc },
                faulted: p.made,
                at_peak: held,
            };
            add(&mut unattributed.faulted, &sum_faulted, -1.0);
            add(&mut unattributed.at_peak, &sum_peak, -1.0);
            if unattributed
                .faulted
                .iter()
                .chain(&unattributed.at_peak)
                .any(|&b| b >= 0.5)
            {
                rows.push(unattributed);
            }
        }
        rows
    }
}

impl ResidentSites {
    /// The report's form: the `top` stacks (0: every one) by bytes resident at the peak, then
    /// made resident, each stack's processes added up, with their frames (`frames_of`); the
    /// unattributed share; `None` without a fault recorded. `start_ns`: the recording's start.
    pub(super) fn report(
        &self,
        top: usize,
        start_ns: u64,
        frames_of: impl Fn(u32) -> Vec<SiteFrame>,
    ) -> Option<crate::model::sites::ResidentSites> {
        if !self.recorded() {
            return None;
        }
        let mut by_leaf: BTreeMap<u32, (PerMember, PerMember)> = BTreeMap::new();
        for row in self.rows() {
            let (resident, faulted) = by_leaf.entry(row.key.leaf).or_default();
            add(resident, &row.at_peak, 1.0);
            add(faulted, &row.faulted, 1.0);
        }
        let unattributed = by_leaf.remove(&0).unwrap_or_default();
        let mut sites: Vec<ResidentSite> = by_leaf
            .into_iter()
            .map(|(leaf, (resident, faulted))| ResidentSite {
                stack_id: leaf,
                resident: member_bytes(&resident),
                faulted: member_bytes(&faulted),
                frames: Vec::new(),
            })
            .collect();
        sites.sort_by_key(|s| {
            let key = (s.resident.total_bytes, s.faulted.total_bytes);
            (std::cmp::Reverse(key), s.stack_id)
        });
        let sites_total = sites.len() as u64;
        if top > 0 {
            sites.truncate(top);
        }
        for s in &mut sites {
            s.frames = frames_of(s.stack_id);
        }
        Some(crate::model::sites::ResidentSites {
            peak_bytes: self.peak,
            peak_at_ns: self.peak_ns.map(|t| t.saturating_sub(start_ns)),
            faults: self.increases(),
            walked: self.walked,
            sampling: self.sampling(),
            inherited_writes: self.inherited_writes,
            sites_total,
            sites,
            unattributed: ResidentSite {
                resident: member_bytes(&unattributed.0),
                faulted: member_bytes(&unattributed.1),
                ..ResidentSite::default()
            },
        })
    }
}

/// The "[inherited]" site of process `i`.
fn inherited_key(i: ProcIdx) -> ResidentKey {
    ResidentKey {
        leaf: INHERITED_LEAF,
        proc: i.get(),
    }
}

/// Whole bytes of each member, and their sum.
fn member_bytes(b: &PerMember) -> MemberBytes {
    let [anon, file, shmem] = b.map(|x| x.round() as u64);
    MemberBytes {
        anon_bytes: anon,
        file_bytes: file,
        shmem_bytes: shmem,
        total_bytes: anon + file + shmem,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: u64 = 4096;

    fn proc(n: usize) -> ProcIdx {
        ProcIdx::new(n)
    }

    fn pages(anon: u64, file: u64) -> [u64; 4] {
        [file, anon, 0, 0]
    }

    fn row(rows: &[ResidentRow], leaf: u32) -> ResidentRow {
        *rows.iter().find(|r| r.key.leaf == leaf).expect("a row")
    }

    #[test]
    fn sites_at_the_peak_add_up_to_it_with_the_unattributed() {
        let mut r = ResidentSites::new(None, PAGE);
        r.resident(proc(0), pages(10, 0), 1);
        r.made(proc(0), RssMember::Anon, 2);
        r.resident(proc(0), pages(12, 0), 2);
        r.fault(proc(0), RssMember::Anon, 2, 0x1000, 7);
        r.made(proc(0), RssMember::File, 4);
        r.resident(proc(0), pages(12, 4), 3);
        r.fault(proc(0), RssMember::File, 4, 0x9000, 8);
        // The anon block goes, then the peak is lower: the peak above stands.
        r.mapping(
            proc(0),
            &EventKind::Munmap {
                addr: 0x1000,
                len: 8192,
            },
        );
        r.resident(proc(0), pages(10, 4), 4);
        let rows = r.rows();
        assert_eq!(r.peak, 16 * PAGE);
        assert_eq!(row(&rows, 7).at_peak, [2.0 * 4096.0, 0.0, 0.0]);
        assert_eq!(row(&rows, 8).at_peak, [0.0, 4.0 * 4096.0, 0.0]);
        let u = row(&rows, 0);
        assert_eq!(
            u.at_peak,
            [10.0 * 4096.0, 0.0, 0.0],
            "the first 10 pages: no stack"
        );
        assert_eq!(
            u.faulted, [0.0; 3],
            "every increase by the owner had its stack"
        );
        let sum: f64 = rows.iter().flat_map(|r| r.at_peak).sum();
        assert_eq!(sum, r.peak as f64);
    }

    #[test]
    fn an_unmapped_site_leaves_a_later_peak() {
        let mut r = ResidentSites::new(None, PAGE);
        r.made(proc(0), RssMember::Anon, 4);
        r.resident(proc(0), pages(4, 0), 1);
        r.fault(proc(0), RssMember::Anon, 4, 0x10000, 7);
        r.mapping(
            proc(0),
            &EventKind::Munmap {
                addr: 0x10000,
                len: 4 * PAGE,
            },
        );
        r.resident(proc(0), pages(0, 0), 2);
        r.made(proc(0), RssMember::Anon, 6);
        r.resident(proc(0), pages(6, 0), 3);
        r.fault(proc(0), RssMember::Anon, 6, 0x20000, 8);
        let rows = r.rows();
        assert_eq!(row(&rows, 7).at_peak, [0.0; 3]);
        assert_eq!(row(&rows, 7).faulted, [4.0 * 4096.0, 0.0, 0.0]);
        assert_eq!(row(&rows, 8).at_peak, [6.0 * 4096.0, 0.0, 0.0]);
        assert!(
            rows.iter().all(|r| r.key.leaf != 0),
            "all attributed: {rows:?}"
        );
    }

    #[test]
    fn mremap_moves_pieces_and_drops_what_it_cuts() {
        let mut r = ResidentSites::new(None, PAGE);
        r.made(proc(0), RssMember::Anon, 2);
        r.resident(proc(0), pages(2, 0), 1);
        r.fault(proc(0), RssMember::Anon, 1, 0x10000, 7);
        r.fault(proc(0), RssMember::Anon, 1, 0x11000, 8);
        let shrink = EventKind::Mremap {
            old_addr: 0x10000,
            old_len: 2 * PAGE,
            addr: 0x50000,
            len: PAGE,
        };
        r.mapping(proc(0), &shrink);
        // Only the moved piece is left to go with the new range.
        r.mapping(
            proc(0),
            &EventKind::Munmap {
                addr: 0x50000,
                len: PAGE,
            },
        );
        assert!(r.sites.values().all(|c| c.live == [0.0; 3]));
    }

    #[test]
    fn pieces_past_what_a_process_holds_are_scaled_to_it() {
        let mut r = ResidentSites::new(None, PAGE);
        r.made(proc(0), RssMember::Anon, 4);
        r.resident(proc(0), pages(4, 0), 1);
        r.fault(proc(0), RssMember::Anon, 4, 0x10000, 7);
        // madvise(MADV_DONTNEED) released 2 pages without a recorded unmap.
        r.resident(proc(0), pages(2, 0), 2);
        r.resident(proc(1), pages(8, 0), 3);
        let rows = r.rows();
        assert_eq!(r.peak, 10 * PAGE);
        assert_eq!(row(&rows, 7).at_peak, [2.0 * 4096.0, 0.0, 0.0]);
    }

    #[test]
    fn a_childs_writes_move_its_inherited_pages_to_the_writer() {
        let mut r = ResidentSites::new(None, PAGE);
        // Filled at fork: 10 anon pages, 2 file pages.
        r.inherited(proc(1), RssMember::Anon, 10);
        r.inherited(proc(1), RssMember::File, 2);
        r.resident(proc(1), pages(10, 2), 1);
        // It writes 4 of them (copy-on-write: no counter moves), then makes 3 pages its own.
        for n in 0..4 {
            r.fault(proc(1), RssMember::Anon, 0, 0x10000 + n * PAGE, 7);
        }
        r.made(proc(1), RssMember::Anon, 3);
        r.resident(proc(1), pages(13, 2), 2);
        r.fault(proc(1), RssMember::Anon, 3, 0x90000, 8);
        let rows = r.rows();
        let inherited = row(&rows, INHERITED_LEAF);
        assert_eq!(inherited.at_peak, [6.0 * 4096.0, 2.0 * 4096.0, 0.0]);
        assert_eq!(inherited.faulted, [0.0; 3], "the parent made them resident");
        assert_eq!(row(&rows, 7).at_peak, [4.0 * 4096.0, 0.0, 0.0]);
        assert_eq!(
            row(&rows, 7).faulted,
            [0.0; 3],
            "a write makes no page resident"
        );
        assert_eq!(row(&rows, 8).at_peak, [3.0 * 4096.0, 0.0, 0.0]);
        assert!(rows.iter().all(|r| r.key.leaf != 0), "{rows:?}");
        assert_eq!(r.touches, 4);
        // Past what is left, a write takes nothing: the page was the child's own.
        for n in 0..8 {
            r.fault(proc(1), RssMember::Anon, 0, 0x20000 + n * PAGE, 9);
        }
        let rows = r.rows();
        assert_eq!(row(&rows, 9).at_peak, [0.0; 3], "after the peak");
        assert_eq!(
            r.sites[&inherited_key(proc(1))].live,
            [0.0, 2.0 * 4096.0, 0.0]
        );
        // Its unmapped writes leave; exit ends the rest.
        r.mapping(
            proc(1),
            &EventKind::Munmap {
                addr: 0x10000,
                len: 4 * PAGE,
            },
        );
        assert_eq!(r.sites[&ResidentKey { leaf: 7, proc: 1 }].live, [0.0; 3]);
        r.drop_process(proc(1));
        assert!(r.sites.values().all(|c| c.live == [0.0; 3]));
    }

    #[test]
    fn exit_ends_every_piece_and_a_sampled_piece_stands_for_its_weight() {
        let mut r = ResidentSites::new(Some(64 * PAGE), PAGE);
        r.made(proc(0), RssMember::Anon, 1);
        r.resident(proc(0), pages(1, 0), 1);
        r.fault(proc(0), RssMember::Anon, 1, 0, 7);
        r.fault(proc(0), RssMember::Anon, 1, 0x1000, 0);
        assert_eq!((r.faults, r.walked), (2, 1));
        let p = -(-1.0f64 / 64.0).exp_m1();
        let faulted = row(&r.rows(), 7).faulted[0];
        assert!((faulted - 4096.0 / p).abs() <= 0.5, "{faulted}");
        r.drop_process(proc(0));
        assert!(r.sites.values().all(|c| c.live == [0.0; 3]));
    }
}
