//! The rmap accounting as the report carries it: per process and kind (anon, file, shmem) the
//! pages mapped, unmapped, their signed sum, and the inherited baseline beside rss_stat's own
//! figure. Plain values; the pass that counts them is `rmap` of the accounting.

use serde::Serialize;

/// The rmap accounting of the report (only for recordings with `Rmap` records).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RmapReport {
    /// Where each resident figure comes from: "rmap" (baseline from rss_stat plus the rmap
    /// net) and "rss_stat" (the kernel's counters), side by side.
    pub sources: String,
    pub processes: Vec<RmapProcess>,
}

/// One process image's rmap accounting.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RmapProcess {
    pub pid: u32,
    pub command: String,
    pub kinds: Vec<RmapKind>,
    /// Highest sum of the image's own mapped pages (adds minus removes, all kinds), bytes.
    pub peak_own_bytes: u64,
    /// When, ns from the start of the recording.
    pub peak_at_ns: Option<u64>,
    /// The own pages resident at that peak by what holds them (a file's path, or heap,
    /// stack, anonymous mmap, shmem), most first.
    pub by_mapping: Vec<RegionResident>,
}

/// One kind (anon, file, shmem) of [`RmapProcess`], in pages.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RmapKind {
    pub kind: String,
    pub adds_pages: u64,
    pub removes_pages: u64,
    /// adds - removes: negative when the process unmapped inherited pages; never clamped.
    pub net_pages: i64,
    /// Pages it mapped itself that are still mapped ("resident own pages").
    pub own_resident_pages: u64,
    /// The baseline it started with (rss_stat: filled at fork, or set up by exec).
    pub inherited_pages: Option<i64>,
    /// Removes of pages it never mapped itself: inherited, since unmapped.
    pub inherited_unmapped_pages: u64,
    /// inherited + net: resident pages by rmap.
    pub rmap_resident_pages: Option<i64>,
    /// The same by rss_stat, at the end of the recording (or of the process).
    pub rss_stat_pages: Option<i64>,
    /// rmap minus rss_stat.
    pub difference_pages: Option<i64>,
}

/// Resident bytes of one region at a process's rmap peak.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RegionResident {
    pub region: String,
    pub bytes: u64,
}
