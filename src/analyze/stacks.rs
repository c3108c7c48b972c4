//! Allocation sites, part of the accounting pass (`report --stacks`): per site (one distinct
//! call stack, one trie leaf) what its blocks did in the report's scope. The trie, modules and
//! symbols the recording carries, which name a site's frames, are `stack_frames`'s.
//!
//! Flow: `accounting` creates a [`StackPass`] only when the report asks for sites, so a report
//! without `--stacks` pays one branch per allocator event. It hands the pass the stack events
//! ([`StackPass::note`]) and every change of a block in the scope ([`StackPass::insert`],
//! [`StackPass::release`], [`StackPass::drop_process`]); [`StackPass::finish`] turns the
//! [`SiteTable`] into the top sites with their frames (`metrics::StackReport`).
//!
//! The rules (also in docs/report-schema.md, "Call stacks"):
//! - a block belongs to the site of the stack that allocated it; a realloc's new block takes
//!   the realloc's stack and its old block leaves its own site (as a release, never temporary);
//! - whether a block counts is decided when it is allocated: in the scope's process, tree (by
//!   the recorded forks at that moment) or benchmark window; frees of blocks allocated before
//!   the recording (or outside the scope) are ignored, as the heap accounting ignores them;
//! - `peak_live_bytes` of a site is what it held at the scope's heap peak, the first moment the
//!   scope's live heap was highest, so the sites' values add up to the scope's peak. It is exact
//!   in one pass: a site notes its live bytes before its first change after each new peak (see
//!   [`SiteTable`]), which is what heaptrack's second pass over the file finds;
//! - a temporary allocation is one freed by the thread that made it with no other allocation
//!   of that thread in between (heaptrack's definition, the heap accounting's `temporary`);
//! - leaked: live when its process exited; live at end: its process was still running.

use crate::format::{
    EventKind, FaultSampleFeature, Header, RssMember, StackSampleFeature, FEATURE_INHERITED_WRITES,
};
use crate::intmap::IntMap;

use super::bench::Benchmarks;
use super::functions::{self, FunctionOptions};
use super::resident_sites::{self, ResidentSites};
use super::site_table::{Amount, Ending, SiteTable, Weigher};
use super::stack_frames::{FrameTable, StackFrames};
use super::suppress::Suppressions;
use super::tree::{ProcIdx, ProcessTable};
use crate::model::functions::{Cost, FunctionReport};
use crate::model::metrics::Scope;
use crate::model::metrics::SuppressionReport;
use crate::model::profile::{Profile, Sample, Stack, Values};
use crate::model::sites::{
    LocalSymbols, SiteFrame, SiteMetrics, StackReport, StackSampling, StackWalks,
};

pub use super::order::SiteOrder;

/// What `report --stacks` asks for beside the scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SiteOptions {
    /// How the sites are sorted (`--stacks-by`).
    pub order: SiteOrder,
    /// How many sites the report keeps (`--stacks-top`); 0 keeps every one.
    pub top: usize,
    /// Whether to also build the scope's `profile::Profile` (every site, per process and
    /// benchmark) for the stack formats.
    pub profile: bool,
    /// Whether to also add up the scope's allocating functions (`--functions`), and how.
    pub functions: Option<FunctionOptions>,
}

impl Default for SiteOptions {
    fn default() -> Self {
        SiteOptions {
            order: SiteOrder::Peak,
            top: DEFAULT_TOP,
            profile: false,
            functions: None,
        }
    }
}

/// Sites shown by default: a terminal page of sites with a few frames each, and in a CI log
/// enough to name what dominates without burying the rest of the report.
pub const DEFAULT_TOP: usize = 10;

/// What a site's counters are kept for: one stack in one process, allocated inside one
/// benchmark's window or none. The report's sites add up the processes and benchmarks of a
/// stack; the profile keeps them apart (its samples' pid and benchmark labels). Since every
/// block has exactly one key, the values of a stack are the sums of its keys', the peak too.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct SiteKey {
    leaf: u32,
    proc: usize,
    bench: Option<usize>,
}

/// Which allocations the scope takes, resolved as the stream names its processes.
#[derive(Debug)]
enum Filter {
    Run,
    /// The first process seen with `pid` (as `Report::narrow` names a reused pid's first).
    Process {
        pid: u32,
        first: Option<ProcIdx>,
    },
    /// That process and its descendants.
    Tree {
        pid: u32,
        root: Option<ProcIdx>,
    },
    /// Blocks allocated inside the windows of the benchmark `uri`.
    Bench {
        uri: String,
        index: Option<usize>,
    },
}

impl Filter {
    fn new(scope: &Scope) -> Filter {
        match scope {
            Scope::Run => Filter::Run,
            Scope::Process { pid } => Filter::Process {
                pid: *pid,
                first: None,
            },
            Scope::Tree { pid } => Filter::Tree {
                pid: *pid,
                root: None,
            },
            Scope::Benchmark { uri } => Filter::Bench {
                uri: uri.clone(),
                index: None,
            },
        }
    }

    /// Whether an allocation of process `i`, measured in benchmark `bench` (with `uri_of` its
    /// URI), counts.
    fn takes<'a>(
        &mut self,
        table: &ProcessTable,
        i: ProcIdx,
        bench: Option<usize>,
        uri_of: impl FnOnce(usize) -> &'a str,
    ) -> bool {
        match self {
            Filter::Run => true,
            Filter::Process { pid, first } => {
                table[i].pid == *pid && *first.get_or_insert_with(|| first_of(table, *pid)) == i
            }
            Filter::Tree { pid, root } => {
                if root.is_none() && table.ancestors(i).any(|k| table[k].pid == *pid) {
                    *root = Some(first_of(table, *pid));
                }
                root.is_some_and(|r| table.is_ancestor(r, i))
            }
            Filter::Bench { uri, index } => match bench {
                None => false,
                Some(b) => {
                    if index.is_none() && uri_of(b) == uri {
                        *index = Some(b);
                    }
                    *index == Some(b)
                }
            },
        }
    }
}

/// The first process seen with `pid`; only called once one is known to exist.
fn first_of(table: &ProcessTable, pid: u32) -> ProcIdx {
    let i = table.procs().iter().position(|p| p.pid == pid).unwrap_or(0);
    ProcIdx::new(i)
}

/// The stack of a process's resident pages no walked stack made resident.
pub const UNATTRIBUTED: &str = "[unattributed]";

/// The stack of the pages a process inherited at fork and has not written since.
pub const INHERITED: &str = "[inherited]";

/// The frames of resident site `leaf`: the stack's, or "[inherited]"'s one mark.
fn resident_frames(names: &StackFrames, leaf: u32) -> Vec<SiteFrame> {
    match leaf {
        resident_sites::INHERITED_LEAF => vec![SiteFrame::mark(INHERITED, 0)],
        leaf => names.frames(leaf),
    }
}

/// The outermost frame of the resident views' stacks of `member`.
fn member_mark(member: RssMember) -> &'static str {
    match member {
        RssMember::Anon => "[anon]",
        RssMember::File => "[file]",
        RssMember::Shmem => "[shmem]",
        RssMember::SwapEntries => "[swap]",
    }
}

/// What the sites pass found, at its end.
pub(super) struct Finished {
    /// The scope's sites.
    pub(super) scope: StackReport,
    /// The sites of each benchmark that allocated, with its index.
    pub(super) benches: Vec<(usize, StackReport)>,
    /// The scope's profile, when the options ask for it.
    pub(super) profile: Option<Profile>,
    /// The scope's functions, when the options ask for them.
    pub(super) functions: Option<FunctionReport>,
}

/// The call-stack state of the pass: the trie and its names, the scope's sites, and the site
/// of each live block in the scope.
#[derive(Debug)]
pub(super) struct StackPass {
    options: SiteOptions,
    filter: Filter,
    /// The trie and its names, which give a site its frames.
    names: StackFrames,
    walks: Option<StackWalks>,
    /// How the recording sampled its stacks (its header's feature); `None`: every stack walked.
    sampling: Option<StackSampleFeature>,
    /// The modules named from this machine's files (`name_missing`), for every report made.
    local_symbols: Option<LocalSymbols>,
    /// Whether the recording has call stacks at all: a stack node, walk counters, or an
    /// allocation naming a stack.
    recorded: bool,
    /// Live blocks in the scope: (process, address) -> their site (leaf 0: no stack).
    blocks: IntMap<(ProcIdx, u64), SiteKey>,
    sites: SiteTable<SiteKey>,
    /// Live blocks a benchmark owns (allocated inside its windows): (process, address) ->
    /// their site (with its benchmark index), whatever the scope, for the benchmarks' own sites.
    bench_blocks: IntMap<(ProcIdx, u64), SiteKey>,
    /// The sites of each benchmark that allocated, by its index in `bench::Benchmarks`.
    bench_sites: IntMap<usize, SiteTable<SiteKey>>,
    /// The scope's resident memory by the stacks that made it resident.
    resident: ResidentSites,
}

impl StackPass {
    /// A pass for the sites of `scope`, before any event.
    pub(super) fn new(scope: &Scope, options: SiteOptions, header: &Header) -> StackPass {
        let sampling = StackSampleFeature::of(&header.features);
        let weigher = sampling.map_or(Weigher::exact(), |f| Weigher::sampled(f.mean_bytes));
        StackPass {
            sampling,
            filter: Filter::new(scope),
            options,
            names: StackFrames::default(),
            walks: None,
            local_symbols: None,
            recorded: false,
            blocks: IntMap::default(),
            sites: SiteTable::new(weigher),
            bench_blocks: IntMap::default(),
            bench_sites: IntMap::default(),
            resident: ResidentSites::new(
                // Recordings before the faults' own mean sampled them at the allocations'.
                FaultSampleFeature::of(&header.features)
                    .map(|f| f.mean_bytes)
                    .or(sampling.map(|f| f.mean_bytes)),
                u64::from(header.page_size_bytes.max(1)),
            )
            .with_inherited_writes(
                header
                    .features
                    .iter()
                    .any(|f| f == FEATURE_INHERITED_WRITES),
            ),
        }
    }

    /// Whether the scope takes process `i`'s resident memory: its process, tree or the run's;
    /// a benchmark scope takes none (resident_sites.rs).
    fn takes_resident(&mut self, table: &ProcessTable, i: ProcIdx) -> bool {
        self.filter.takes(table, i, None, |_| "")
    }

    /// Process `i` made `pages` pages of `member` resident at `addr`, with stack `leaf`.
    #[inline(never)]
    pub(super) fn fault(
        &mut self,
        table: &ProcessTable,
        i: ProcIdx,
        member: RssMember,
        pages: u32,
        addr: u64,
        leaf: u32,
    ) {
        self.recorded |= leaf != 0;
        if self.takes_resident(table, i) {
            self.resident.fault(i, member, pages, addr, leaf);
        }
    }

    /// Process `i`'s own tasks made `pages` pages of `member` resident (`inherited` false), or
    /// it got them from its parent at fork (true).
    #[inline(never)]
    pub(super) fn made_resident(
        &mut self,
        table: &ProcessTable,
        i: ProcIdx,
        member: RssMember,
        pages: u64,
        inherited: bool,
    ) {
        if !self.takes_resident(table, i) {
            return;
        }
        if inherited {
            self.resident.inherited(i, member, pages);
        } else {
            self.resident.made(i, member, pages);
        }
    }

    /// Process `i` now holds `pages` resident pages per member.
    #[inline(never)]
    pub(super) fn resident(&mut self, table: &ProcessTable, i: ProcIdx, pages: [u64; 4], ts: u64) {
        if self.takes_resident(table, i) {
            self.resident.resident(i, pages, ts);
        }
    }

    /// Process `i` unmapped, moved or cut a mapping (`kind`).
    #[inline(never)]
    pub(super) fn mapping(&mut self, i: ProcIdx, kind: &EventKind) {
        self.resident.mapping(i, kind);
    }

    /// Process `i` lost its address space (exec, exit).
    #[inline(never)]
    pub(super) fn drop_resident(&mut self, i: ProcIdx) {
        self.resident.drop_process(i);
    }

    /// Takes in a stack event (module, trie node, symbol, walk counters); others are ignored.
    pub(super) fn note(&mut self, kind: &EventKind) {
        if let &EventKind::StackStats(walks) = kind {
            self.recorded = true;
            self.walks = Some(walks);
        } else {
            self.recorded |= self.names.note(kind);
        }
    }

    /// Names the frames the recording left unnamed (its recorder was cut short) from this
    /// machine's files, once the stream has ended and before any site's frames are read:
    /// suppressions match them, and every report of the pass shows them.
    pub(super) fn name_missing(&mut self) {
        self.local_symbols = self.names.name_missing();
    }

    /// Process `i` allocated `size` bytes at `addr` at `ts` with stack `leaf`, measured in
    /// benchmark `bench` (if any); `replaced` is the size of a live block at the same address
    /// whose free was not seen, which leaves its site first.
    ///
    /// Never inlined, nor are the other per-event entries, so the accounting's hot path for a
    /// report without sites stays one branch on the pass being there (callgrind on
    /// `report_throughput_few_live`: 3 instructions more per event than before the pass).
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    pub(super) fn insert<'a>(
        &mut self,
        table: &ProcessTable,
        i: ProcIdx,
        addr: u64,
        size: u64,
        leaf: u32,
        ts: u64,
        bench: Option<usize>,
        replaced: Option<u64>,
        uri_of: impl FnOnce(usize) -> &'a str,
    ) {
        self.recorded |= leaf != 0;
        if let Some(old_size) = replaced {
            self.release(i, addr, old_size, false);
        }
        let key = SiteKey {
            leaf,
            proc: i.get(),
            bench,
        };
        if self.filter.takes(table, i, bench, uri_of) {
            self.blocks.insert((i, addr), key);
            self.sites.allocate(key, leaf, size, ts);
        }
        if let Some(b) = bench {
            self.bench_blocks.insert((i, addr), key);
            let weigher = self.sites.weigher();
            (self.bench_sites.entry(b))
                .or_insert_with(|| SiteTable::new(weigher))
                .allocate(key, leaf, size, ts);
        }
    }

    /// Process `i` released its live block at `addr` of `size` bytes (`temporary` as the heap
    /// accounting decided).
    #[inline(never)]
    pub(super) fn release(&mut self, i: ProcIdx, addr: u64, size: u64, temporary: bool) {
        if let Some(key) = self.blocks.remove(&(i, addr)) {
            self.sites
                .end(key, key.leaf, size, Ending::Released { temporary });
        }
        if let Some(key) = self.bench_blocks.remove(&(i, addr)) {
            self.bench_end(key, size, Ending::Released { temporary });
        }
    }

    /// Process `i`'s live heap `live` (address -> size) goes away: leaked at its exit
    /// (`at_exit`), else dropped by exec.
    #[inline(never)]
    pub(super) fn drop_process(&mut self, i: ProcIdx, live: &IntMap<u64, u64>, at_exit: bool) {
        let how = if at_exit {
            Ending::Leaked
        } else {
            Ending::Dropped
        };
        self.end_blocks(i, live, how);
    }

    /// Of process `i`'s live heap `live`, the blocks at `addrs` are definitely lost (its leak
    /// scan): count them at their sites, before `drop_process` ends them as leaked.
    pub(super) fn lost(&mut self, i: ProcIdx, live: &IntMap<u64, u64>, addrs: &[u64]) {
        for addr in addrs {
            let (Some(&size), Some(&key)) = (live.get(addr), self.blocks.get(&(i, *addr))) else {
                continue;
            };
            self.sites.lost(key, key.leaf, size);
        }
    }

    /// Applies suppression rules `s` to the definitely lost blocks of every site of the scope,
    /// now that every symbol is known: a site whose frames a rule matches moves its lost blocks
    /// to suppressed, in the site and in its process's leak split (`table`, before the sums are
    /// made). Returns what each rule took.
    pub(super) fn suppress(
        &mut self,
        s: &Suppressions,
        table: &mut ProcessTable,
        benches: &mut Benchmarks,
    ) -> SuppressionReport {
        let mut report = super::suppress::empty_report(s);
        let mut by_leaf: IntMap<u32, Option<usize>> = IntMap::default();
        let mut keys: Vec<SiteKey> = self
            .sites
            .sites
            .iter()
            .filter(|(_, site)| site.lost.blocks > 0.0)
            .map(|(k, _)| *k)
            .collect();
        keys.sort_unstable();
        for key in keys {
            let lost_amount = self.sites.sites[&key].lost;
            // Estimated, with sampled stacks: the process's exact leak split loses the estimate.
            let lost = lost_amount.rounded();
            if key.leaf == 0 {
                report.unmatchable = report.unmatchable.plus(lost);
                continue;
            }
            let rule = *by_leaf
                .entry(key.leaf)
                .or_insert_with(|| s.matching(&self.names.frames(key.leaf)));
            let Some(rule) = rule else { continue };
            let site = self.sites.sites.get_mut(&key).expect("a key of the table");
            site.suppressed = site.suppressed.plus(lost_amount);
            site.lost = Amount::default();
            report.suppressed = report.suppressed.plus(lost);
            let used = &mut report.rules[rule].suppressed;
            *used = used.plus(lost);
            if let Some(l) = table[ProcIdx::new(key.proc)].heap.leaks.as_mut() {
                l.suppress(lost);
            }
            // A block allocated inside a benchmark's window leaves its split too.
            if let Some(l) = key.bench.and_then(|b| benches.heap(b).leaks.as_mut()) {
                l.suppress(lost);
            }
        }
        report
    }

    /// A live block of a benchmark's site `key` ended (the benchmark has a table: it
    /// allocated the block).
    fn bench_end(&mut self, key: SiteKey, size: u64, how: Ending) {
        if let Some(t) = key.bench.and_then(|b| self.bench_sites.get_mut(&b)) {
            t.end(key, key.leaf, size, how);
        }
    }

    fn end_blocks(&mut self, i: ProcIdx, live: &IntMap<u64, u64>, how: Ending) {
        if self.blocks.is_empty() && self.bench_blocks.is_empty() {
            return;
        }
        // A benchmark's blocks still live at the end are its leaks, as its heap counts them
        // (docs/report-schema.md, "benchmark").
        let bench_how = match how {
            Ending::LiveAtEnd => Ending::Leaked,
            other => other,
        };
        for (&addr, &size) in live {
            if let Some(key) = self.blocks.remove(&(i, addr)) {
                self.sites.end(key, key.leaf, size, how);
            }
            if let Some(key) = self.bench_blocks.remove(&(i, addr)) {
                self.bench_end(key, size, bench_how);
            }
        }
    }

    /// Ends the pass: the blocks of processes still running are live at the end; the sites
    /// are sorted and cut to the options, each with its frames. Returns the scope's sites,
    /// those of each benchmark that allocated, with its index, the scope's profile and its
    /// functions when the options ask for them (its benchmarks named by `uri_of`).
    /// `start_ns` is the recording's start.
    pub(super) fn finish(
        mut self,
        table: &ProcessTable,
        start_ns: u64,
        uri_of: impl Fn(usize) -> Option<String>,
    ) -> Finished {
        for (k, p) in table.procs().iter().enumerate() {
            if p.is_alive() {
                self.end_blocks(ProcIdx::new(k), &p.live, Ending::LiveAtEnd);
            }
        }
        let benches = self
            .bench_sites
            .iter()
            .map(|(&b, t)| (b, self.report_of(t, start_ns)))
            .collect();
        let profile = self
            .options
            .profile
            .then(|| self.profile_of(table, &uri_of));
        let sites = self.sorted_sites(&self.sites);
        let functions = self.options.functions.map(|f| FunctionReport {
            // Estimates as the sites they are added up from.
            sampling: self.sampling_of(&self.sites),
            ..functions::report(&sites, &self.names, f, self.recorded)
        });
        let mut scope = self.cut(sites, &self.sites, start_ns);
        scope.resident = (self.resident).report(self.options.top, start_ns, |leaf| {
            resident_frames(&self.names, leaf)
        });
        Finished {
            scope,
            benches,
            profile,
            functions,
        }
    }

    /// The report of the sites of `table`.
    fn report_of(&self, table: &SiteTable<SiteKey>, start_ns: u64) -> StackReport {
        self.cut(self.sorted_sites(table), table, start_ns)
    }

    /// Every site of `table`, each stack's keys added up, in the options' order.
    fn sorted_sites(&self, table: &SiteTable<SiteKey>) -> Vec<SiteMetrics> {
        let mut by_leaf: IntMap<u32, SiteMetrics> = IntMap::default();
        for (key, s) in &table.sites {
            let m = by_leaf.entry(key.leaf).or_insert_with(|| SiteMetrics {
                stack_id: key.leaf,
                ..SiteMetrics::default()
            });
            let add = |a: &mut u64, b: u64| *a = a.saturating_add(b);
            let allocated = s.allocated.rounded();
            let (leaked, lost) = (s.leaked.rounded(), s.lost.rounded());
            let (suppressed, live_at_end) = (s.suppressed.rounded(), s.live_at_end.rounded());
            add(&mut m.allocations, allocated.blocks);
            add(&mut m.allocated_bytes, allocated.bytes);
            add(&mut m.peak_live_bytes, table.at_peak(s).rounded().bytes);
            add(&mut m.leaked_bytes, leaked.bytes);
            add(&mut m.leaked_blocks, leaked.blocks);
            add(&mut m.lost_bytes, lost.bytes);
            add(&mut m.lost_blocks, lost.blocks);
            add(&mut m.suppressed_bytes, suppressed.bytes);
            add(&mut m.suppressed_blocks, suppressed.blocks);
            add(&mut m.live_at_end_bytes, live_at_end.bytes);
            add(&mut m.live_at_end_blocks, live_at_end.blocks);
            add(&mut m.temporary, s.temporary.rounded().blocks);
        }
        let mut sites: Vec<SiteMetrics> = by_leaf.into_values().collect();
        let order = self.options.order;
        sites.sort_by(|a, b| {
            order
                .key(&Cost::of(b))
                .cmp(&order.key(&Cost::of(a)))
                .then(a.stack_id.cmp(&b.stack_id))
        });
        sites
    }

    /// The report of `sites` (sorted, of `table`): cut to the options, each with its frames.
    fn cut(
        &self,
        mut sites: Vec<SiteMetrics>,
        table: &SiteTable<SiteKey>,
        start_ns: u64,
    ) -> StackReport {
        let sites_total = sites.len() as u64;
        if self.options.top > 0 {
            sites.truncate(self.options.top);
        }
        for s in &mut sites {
            s.frames = self.names.frames(s.stack_id);
        }
        StackReport {
            recorded: self.recorded,
            order: self.options.order.name().to_string(),
            peak_live_bytes: table.peak.value,
            peak_live_at_ns: table.peak.at(start_ns),
            sites_total,
            sites,
            local_symbols: self.local_symbols.clone(),
            walks: self.walks,
            sampling: self.sampling_of(table),
            resident: None,
        }
    }

    /// The profile of the scope's sites: every key a sample, every stack once with its frames.
    fn profile_of(
        &self,
        table: &ProcessTable,
        uri_of: &dyn Fn(usize) -> Option<String>,
    ) -> Profile {
        let sites = &self.sites;
        let mut keys: Vec<(&SiteKey, &super::site_table::Site)> = sites.sites.iter().collect();
        keys.sort_by_key(|(k, _)| **k);
        let mut stacks: Vec<Stack> = Vec::new();
        let mut frames = FrameTable::default();
        let mut samples = Vec::with_capacity(keys.len());
        for (key, s) in keys {
            if stacks.last().is_none_or(|st| st.id != key.leaf) {
                stacks.push(Stack {
                    id: key.leaf,
                    frames: self.names.interned_frames(key.leaf, &mut frames),
                    toucher: false,
                });
            }
            let p = table.procs().get(key.proc);
            let peak = sites.at_peak(s).rounded();
            let (allocated, leaked) = (s.allocated.rounded(), s.leaked.rounded());
            let temporary = s.temporary.rounded();
            samples.push(Sample {
                stack: stacks.len() - 1,
                pid: p.map_or(0, |p| p.pid),
                command: p.and_then(|p| p.exe.clone()).unwrap_or_default(),
                benchmark: key.bench.and_then(uri_of),
                values: Values {
                    allocations: allocated.blocks,
                    allocated_bytes: allocated.bytes,
                    peak_live_blocks: peak.blocks,
                    peak_live_bytes: peak.bytes,
                    leaked_blocks: leaked.blocks,
                    leaked_bytes: leaked.bytes,
                    temporary: temporary.blocks,
                    temporary_bytes: temporary.bytes,
                    ..Values::default()
                },
            });
        }
        let resident = self.resident.recorded().then_some(self.resident.peak);
        if resident.is_some() {
            self.resident_samples(table, &mut frames, &mut stacks, &mut samples);
        }
        Profile {
            recorded: self.recorded,
            peak_live_bytes: sites.peak.value,
            modules: self.names.profile_modules(),
            frames: frames.frames,
            stacks,
            samples,
            sampling: self.sampling_of(sites),
            resident_peak_bytes: resident,
            resident_sampling: resident.and(self.resident.sampling()),
        }
    }

    /// The samples of the resident views: one per site, process and member, each stack ending
    /// (outermost) in its member's mark ("[anon]", "[file]", "[shmem]") so that the flame
    /// graphs keep the three apart, and each process's unattributed pages as the stack
    /// "[unattributed]" of its member.
    fn resident_samples(
        &self,
        table: &ProcessTable,
        frames: &mut FrameTable,
        stacks: &mut Vec<Stack>,
        samples: &mut Vec<Sample>,
    ) {
        let page = self.resident.page_bytes() as f64;
        for row in self.resident.rows() {
            let p = table.procs().get(row.key.proc);
            let mut site = match row.key.leaf {
                0 => vec![frames.mark(UNATTRIBUTED, 0)],
                resident_sites::INHERITED_LEAF => vec![frames.mark(INHERITED, 0)],
                leaf => self.names.interned_frames(leaf, frames),
            };
            for (m, member) in resident_sites::MEMBERS.iter().enumerate() {
                let (resident, faulted) = (row.at_peak[m].round(), row.faulted[m].round());
                if resident < 1.0 && faulted < 1.0 {
                    continue;
                }
                site.push(frames.mark(member_mark(*member), 0));
                stacks.push(Stack {
                    id: row.key.leaf,
                    frames: site.clone(),
                    toucher: true,
                });
                site.pop();
                samples.push(Sample {
                    stack: stacks.len() - 1,
                    pid: p.map_or(0, |p| p.pid),
                    command: p.and_then(|p| p.exe.clone()).unwrap_or_default(),
                    benchmark: None,
                    values: Values {
                        resident_bytes: resident as u64,
                        resident_pages: (resident / page).round() as u64,
                        faulted_bytes: faulted as u64,
                        faulted_pages: (faulted / page).round() as u64,
                        ..Values::default()
                    },
                });
            }
        }
    }

    /// How the sites of `table` were sampled, if they were.
    fn sampling_of(&self, table: &SiteTable<SiteKey>) -> Option<StackSampling> {
        self.sampling.map(|f| StackSampling {
            mean_bytes: f.mean_bytes,
            seed: f.seed,
            sampled_allocations: table.walked,
            allocations: table.allocations,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Event;
    use crate::model::metrics::Report;
    use crate::model::sites::SiteFrame;
    use crate::testkit::*;

    /// Sites A and B of `two_sites_trie`.
    const A: u32 = 2;
    const B: u32 = 4;

    /// The sites report of `events` (after the trie) for `scope`, every site kept.
    fn sites_of(scope: Scope, order: SiteOrder, events: Vec<Event>) -> Report {
        let mut all = stack_prelude(two_sites_trie());
        all.extend(events);
        let options = SiteOptions {
            order,
            top: 0,
            profile: false,
            functions: None,
        };
        crate::analyze::accounting::analyze_sites(&header(), all, None, &scope, options)
    }

    fn stacks(r: &Report) -> &StackReport {
        r.stacks.as_ref().expect("a sites report")
    }

    fn site(r: &Report, leaf: u32) -> &SiteMetrics {
        stacks(r)
            .sites
            .iter()
            .find(|s| s.stack_id == leaf)
            .unwrap_or_else(|| panic!("no site {leaf} in {:?}", stacks(r).sites))
    }

    /// (allocations, allocated, at peak, leaked blocks, leaked bytes, temporary) of a site.
    fn columns(s: &SiteMetrics) -> (u64, u64, u64, u64, u64, u64) {
        (
            s.allocations,
            s.allocated_bytes,
            s.peak_live_bytes,
            s.leaked_blocks,
            s.leaked_bytes,
            s.temporary,
        )
    }

    /// A peaks at 200 on its own, but the run's heap peaks later (210) with A holding 60 and B
    /// 150; A's 60 are leaked at exit; A's second block is freed with no allocation of the
    /// thread in between (temporary), the first and B's are not.
    fn story() -> Vec<Event> {
        seq(vec![
            malloc_from(A, 0xa1, 100),
            malloc_from(A, 0xa2, 100),
            free(0xa1),
            free(0xa2),
            malloc_from(B, 0xb1, 150),
            malloc_from(A, 0xa3, 60),
            free(0xb1),
            exit(0),
        ])
    }

    #[test]
    fn every_column_of_two_sites() {
        let r = sites_of(Scope::Run, SiteOrder::Peak, story());
        assert_eq!(columns(site(&r, A)), (3, 260, 60, 1, 60, 1));
        assert_eq!(columns(site(&r, B)), (1, 150, 150, 0, 0, 0));
        let s = stacks(&r);
        assert_eq!((s.peak_live_bytes, s.peak_live_at_ns), (210, Some(5)));
        assert_eq!(s.sites_total, 2);
        assert!(s.recorded);
    }

    #[test]
    fn peak_values_add_up_to_the_scope_peak() {
        let r = sites_of(Scope::Run, SiteOrder::Peak, story());
        let sum: u64 = stacks(&r).sites.iter().map(|s| s.peak_live_bytes).sum();
        assert_eq!(sum, r.totals.heap.peak_live_bytes);
        assert_eq!(sum, 210);
    }

    #[test]
    fn the_first_moment_of_the_peak_counts() {
        // The heap is at 100 twice: first held by A, then by B. The peak is the first moment.
        let r = sites_of(
            Scope::Run,
            SiteOrder::Peak,
            seq(vec![
                malloc_from(A, 1, 100),
                free(1),
                malloc_from(B, 2, 100),
            ]),
        );
        assert_eq!(site(&r, A).peak_live_bytes, 100);
        assert_eq!(site(&r, B).peak_live_bytes, 0);
    }

    #[test]
    fn a_site_changed_after_several_peaks_keeps_the_last() {
        // Peaks at 10 (A 10), 30 (A 10, B 20), 35 (A 15, B 20); then A and B shrink.
        let r = sites_of(
            Scope::Run,
            SiteOrder::Peak,
            seq(vec![
                malloc_from(A, 1, 10),
                malloc_from(B, 2, 20),
                malloc_from(A, 3, 5),
                free(1),
                free(2),
            ]),
        );
        assert_eq!(site(&r, A).peak_live_bytes, 15);
        assert_eq!(site(&r, B).peak_live_bytes, 20);
    }

    #[test]
    fn sorted_by_each_order() {
        let order_of = |order| {
            let r = sites_of(Scope::Run, order, story());
            stacks(&r)
                .sites
                .iter()
                .map(|s| s.stack_id)
                .collect::<Vec<_>>()
        };
        assert_eq!(order_of(SiteOrder::Peak), vec![B, A]);
        assert_eq!(order_of(SiteOrder::Allocated), vec![A, B]);
        assert_eq!(order_of(SiteOrder::Count), vec![A, B]);
        assert_eq!(order_of(SiteOrder::Leaked), vec![A, B]);
        assert_eq!(order_of(SiteOrder::Temporary), vec![A, B]);
    }

    #[test]
    fn ties_go_to_the_heavier_site() {
        // Neither leaks: the tie on leaked bytes is broken by bytes allocated.
        let r = sites_of(
            Scope::Run,
            SiteOrder::Leaked,
            seq(vec![
                malloc_from(A, 1, 10),
                free(1),
                malloc_from(B, 2, 99),
                free(2),
            ]),
        );
        let ids: Vec<u32> = stacks(&r).sites.iter().map(|s| s.stack_id).collect();
        assert_eq!(ids, vec![B, A]);
    }

    #[test]
    fn top_keeps_the_first_sites_and_counts_all() {
        let mut all = stack_prelude(two_sites_trie());
        all.extend(story());
        let options = SiteOptions {
            order: SiteOrder::Peak,
            top: 1,
            profile: false,
            functions: None,
        };
        let r =
            crate::analyze::accounting::analyze_sites(&header(), all, None, &Scope::Run, options);
        let s = stacks(&r);
        assert_eq!(s.sites.len(), 1);
        assert_eq!((s.sites[0].stack_id, s.sites_total), (B, 2));
    }

    // --- temporary allocations -----------------------------------------------------------

    #[test]
    fn temporary_needs_no_allocation_of_the_thread_in_between() {
        let r = sites_of(
            Scope::Run,
            SiteOrder::Peak,
            vec![
                at(1, 1, 1, malloc_from(A, 1, 8)),
                at(2, 1, 2, malloc_from(B, 2, 8)), // another thread: does not matter
                at(3, 1, 1, free(1)),              // temporary
                at(4, 1, 1, malloc_from(A, 3, 8)),
                at(5, 1, 1, malloc_from(A, 4, 8)),
                at(6, 1, 1, free(3)), // thread 1 allocated 4 since: not temporary
                at(7, 1, 1, free(2)), // freed by another thread: not temporary
            ],
        );
        assert_eq!(site(&r, A).temporary, 1);
        assert_eq!(site(&r, B).temporary, 0);
        assert_eq!(r.totals.heap.temporary_allocs, 1);
    }

    // --- realloc -------------------------------------------------------------------------

    #[test]
    fn realloc_moves_the_bytes_to_its_own_site() {
        let r = sites_of(
            Scope::Run,
            SiteOrder::Peak,
            seq(vec![
                malloc_from(A, 1, 100),
                realloc_from(B, 1, 2, 300),
                free(2), // right after the realloc, by its thread: temporary, of B
                exit(0),
            ]),
        );
        // The old block leaves first, so the peak is 300, all of it B's.
        assert_eq!(columns(site(&r, A)), (1, 100, 0, 0, 0, 0));
        assert_eq!(columns(site(&r, B)), (1, 300, 300, 0, 0, 1));
        assert_eq!(stacks(&r).peak_live_bytes, 300);
    }

    #[test]
    fn realloc_in_place_keeps_the_block_with_the_new_site() {
        let r = sites_of(
            Scope::Run,
            SiteOrder::Peak,
            seq(vec![
                malloc_from(A, 1, 100),
                realloc_from(B, 1, 1, 40),
                exit(0),
            ]),
        );
        // The peak (100) was when A held the block; B's 40 are leaked.
        assert_eq!(columns(site(&r, A)), (1, 100, 100, 0, 0, 0));
        assert_eq!(columns(site(&r, B)), (1, 40, 0, 1, 40, 0));
        assert_eq!(stacks(&r).peak_live_bytes, 100);
    }

    #[test]
    fn realloc_of_an_unknown_block_only_allocates() {
        let r = sites_of(
            Scope::Run,
            SiteOrder::Peak,
            seq(vec![realloc_from(B, 9, 2, 30), exit(0)]),
        );
        assert_eq!(columns(site(&r, B)), (1, 30, 30, 1, 30, 0));
        assert_eq!(stacks(&r).sites_total, 1);
    }

    // --- frees, exec, exit, the end --------------------------------------------------------

    #[test]
    fn unknown_frees_are_ignored() {
        let r = sites_of(
            Scope::Run,
            SiteOrder::Peak,
            seq(vec![free(0x77), malloc_from(A, 1, 10), free(0x78), exit(0)]),
        );
        assert_eq!(columns(site(&r, A)), (1, 10, 10, 1, 10, 0));
        assert_eq!(r.totals.heap.unknown_frees, 2);
    }

    #[test]
    fn a_block_replaced_at_its_address_leaves_its_site() {
        let r = sites_of(
            Scope::Run,
            SiteOrder::Peak,
            seq(vec![malloc_from(A, 1, 100), malloc_from(B, 1, 30), exit(0)]),
        );
        assert_eq!(columns(site(&r, A)), (1, 100, 100, 0, 0, 0));
        assert_eq!(columns(site(&r, B)), (1, 30, 0, 1, 30, 0));
    }

    #[test]
    fn exec_drops_blocks_without_leaking_them() {
        let r = sites_of(
            Scope::Run,
            SiteOrder::Peak,
            seq(vec![
                malloc_from(A, 1, 10),
                exec("/bin/x"),
                free(1),
                exit(0),
            ]),
        );
        assert_eq!(columns(site(&r, A)), (1, 10, 10, 0, 0, 0));
        assert_eq!(site(&r, A).live_at_end_blocks, 0);
    }

    #[test]
    fn running_processes_hold_blocks_live_at_end() {
        let r = sites_of(
            Scope::Run,
            SiteOrder::Peak,
            seq(vec![malloc_from(A, 1, 10), malloc_from(A, 2, 5)]),
        );
        let a = site(&r, A);
        assert_eq!((a.live_at_end_blocks, a.live_at_end_bytes), (2, 15));
        assert_eq!((a.leaked_blocks, a.leaked_bytes), (0, 0));
    }

    #[test]
    fn allocations_without_a_stack_are_one_site() {
        let r = sites_of(
            Scope::Run,
            SiteOrder::Peak,
            seq(vec![malloc(1, 7), malloc_from(A, 2, 3), exit(0)]),
        );
        assert_eq!(columns(site(&r, 0)), (1, 7, 7, 1, 7, 0));
        assert!(site(&r, 0).frames.is_empty());
    }

    // --- scopes ----------------------------------------------------------------------------

    /// Process 1 forks 2, which forks 3; each allocates from its own site at its own time.
    fn family() -> Vec<Event> {
        vec![
            at(1, 1, 1, fork(2)),
            at(2, 2, 2, fork(3)),
            at(3, 1, 1, malloc_from(A, 1, 1000)),
            at(4, 1, 1, free(1)),
            at(5, 2, 2, malloc_from(A, 1, 10)),
            at(6, 3, 3, malloc_from(B, 1, 20)),
            at(7, 3, 3, exit(0)),
            at(8, 2, 2, exit(0)),
            at(9, 1, 1, exit(0)),
        ]
    }

    #[test]
    fn run_scope_takes_every_process() {
        let r = sites_of(Scope::Run, SiteOrder::Peak, family());
        assert_eq!(columns(site(&r, A)), (2, 1010, 1000, 1, 10, 1));
        assert_eq!(columns(site(&r, B)), (1, 20, 0, 1, 20, 0));
        assert_eq!(stacks(&r).peak_live_bytes, 1000);
    }

    #[test]
    fn tree_scope_takes_the_descendants_with_their_peak() {
        let r = sites_of(Scope::Tree { pid: 2 }, SiteOrder::Peak, family());
        assert_eq!(columns(site(&r, A)), (1, 10, 10, 1, 10, 0));
        assert_eq!(columns(site(&r, B)), (1, 20, 20, 1, 20, 0));
        let s = stacks(&r);
        assert_eq!((s.peak_live_bytes, s.peak_live_at_ns), (30, Some(6)));
        assert_eq!(s.peak_live_bytes, tree(&r, 2).peak_live_bytes);
    }

    #[test]
    fn process_scope_takes_that_process_alone() {
        let r = sites_of(Scope::Process { pid: 2 }, SiteOrder::Peak, family());
        assert_eq!(stacks(&r).sites_total, 1);
        assert_eq!(columns(site(&r, A)), (1, 10, 10, 1, 10, 0));
    }

    #[test]
    fn process_scope_of_a_reused_pid_takes_its_first_process() {
        let r = sites_of(
            Scope::Process { pid: 1 },
            SiteOrder::Peak,
            vec![
                at(1, 1, 1, malloc_from(A, 1, 10)),
                at(2, 1, 1, exit(0)),
                at(3, 1, 1, malloc_from(B, 1, 20)),
            ],
        );
        assert_eq!(stacks(&r).sites_total, 1);
        assert_eq!(site(&r, A).allocated_bytes, 10);
    }

    #[test]
    fn benchmark_scope_takes_its_windows() {
        let r = sites_of(
            Scope::Benchmark { uri: "b".into() },
            SiteOrder::Peak,
            vec![
                bench(1, "a", 0),
                start(2),
                at(3, 1, 1, malloc_from(A, 1, 10)),
                bench(4, "b", 0),
                at(5, 1, 1, malloc_from(B, 2, 20)),
                at(6, 1, 1, free(1)), // a's block: not b's
                stop(7),
                at(8, 1, 1, malloc_from(B, 3, 40)), // not measured
            ],
        );
        assert_eq!(stacks(&r).sites_total, 1);
        assert_eq!(columns(site(&r, B)), (1, 20, 20, 0, 0, 0));
        assert_eq!((site(&r, B).live_at_end_bytes), 20);
    }

    #[test]
    fn each_benchmark_has_its_own_sites() {
        let r = sites_of(
            Scope::Run,
            SiteOrder::Peak,
            vec![
                bench(1, "a", 0),
                start(2),
                at(3, 1, 1, malloc_from(A, 1, 10)),
                bench(4, "b", 0),
                at(5, 1, 1, malloc_from(B, 2, 20)),
                at(6, 1, 1, free(2)), // temporary, of b
                at(7, 1, 1, malloc_from(A, 3, 5)),
                stop(8),
                at(9, 1, 1, free(1)), // a's block, freed after its window: not a's leak
                at(10, 1, 1, exit(0)),
            ],
        );
        let sites_of_bench = |k: usize| {
            let s = r.benchmarks[k]
                .stacks
                .as_ref()
                .expect("sites of the benchmark");
            let mut v: Vec<(u32, [u64; 6])> = s
                .sites
                .iter()
                .map(|x| {
                    let c = columns(x);
                    (x.stack_id, [c.0, c.1, c.2, c.3, c.4, c.5])
                })
                .collect();
            v.sort();
            (s.peak_live_bytes, v)
        };
        assert_eq!(sites_of_bench(0), (10, vec![(A, [1, 10, 10, 0, 0, 0])]));
        // b: its peak is 20 (B's block), then A's 5 are leaked at exit.
        assert_eq!(
            sites_of_bench(1),
            (20, vec![(A, [1, 5, 0, 1, 5, 0]), (B, [1, 20, 20, 0, 0, 1])])
        );
        assert_eq!(r.benchmarks[1].metrics.heap.peak_live_bytes, 20);
        // The run's sites are not cut to the benchmarks; the run peaks at 30 (A 10, B 20).
        assert_eq!(columns(site(&r, A)), (2, 15, 10, 1, 5, 0));
    }

    #[test]
    fn benchmarks_have_no_sites_without_the_request() {
        let mut events = stack_prelude(two_sites_trie());
        events.extend([
            bench(1, "a", 0),
            start(2),
            at(3, 1, 1, malloc_from(A, 1, 10)),
        ]);
        assert_eq!(run(events).benchmarks[0].stacks, None);
    }

    #[test]
    fn walk_counters_are_the_last_written() {
        let mut events = stack_prelude(vec![
            stack_stats([5, 1, 0, 0, 0, 0]),
            stack_stats([9, 2, 3, 4, 5, 6]),
        ]);
        events.extend(story());
        let r = sites_of(Scope::Run, SiteOrder::Peak, events);
        assert_eq!(
            stacks(&r).walks,
            Some(StackWalks {
                walks: 9,
                truncated: 2,
                unknown: 3,
                unsupported: 4,
                collisions: 5,
                uncached: 6,
            })
        );
    }

    #[test]
    fn a_recording_without_stacks_says_so() {
        let options = SiteOptions::default();
        let events = seq(vec![malloc(1, 10), exit(0)]);
        let r = crate::analyze::accounting::analyze_sites(
            &header(),
            events,
            None,
            &Scope::Run,
            options,
        );
        let s = stacks(&r);
        assert!(!s.recorded);
        assert_eq!(s.sites_total, 1); // the allocations without a stack, for the same numbers
    }

    #[test]
    fn without_the_request_there_is_no_stacks_section() {
        let mut events = stack_prelude(two_sites_trie());
        events.extend(story());
        assert_eq!(run(events).stacks, None);
    }

    #[test]
    fn order_names_round_trip() {
        for (m, order) in SiteOrder::MEASURES {
            assert_eq!(order.name(), m.word());
        }
    }

    // --- the profile ------------------------------------------------------------------------

    /// The profile of `events` (after the trie) for `scope`.
    fn profile_of(scope: Scope, events: Vec<Event>) -> (Report, Profile) {
        let mut all = stack_prelude(two_sites_trie());
        all.extend(events);
        let options = SiteOptions {
            order: SiteOrder::Peak,
            top: 0,
            profile: true,
            functions: None,
        };
        let mut r =
            crate::analyze::accounting::analyze_sites(&header(), all, None, &scope, options);
        let p = r.profile.take().expect("a profile");
        (r, p)
    }

    #[test]
    fn profile_samples_are_per_process_and_add_up_to_the_sites() {
        let (r, p) = profile_of(Scope::Run, family());
        // A in processes 1 and 2, B in 3.
        let samples: Vec<(u32, u32, u64, u64, u64)> = p
            .samples
            .iter()
            .map(|s| {
                let v = &s.values;
                (
                    p.stacks[s.stack].id,
                    s.pid,
                    v.allocated_bytes,
                    v.peak_live_bytes,
                    v.peak_live_blocks,
                )
            })
            .collect();
        assert_eq!(
            samples,
            vec![(A, 1, 1000, 1000, 1), (A, 2, 10, 0, 0), (B, 3, 20, 0, 0)]
        );
        assert_eq!(p.stacks.len(), 2);
        let frames: Vec<SiteFrame> = p.frames_of(&p.stacks[0]).cloned().collect();
        assert_eq!(frames, site(&r, A).frames);
        // Both stacks start in the same malloc: its frame is in the profile once.
        assert_eq!(p.stacks[0].frames[0], p.stacks[1].frames[0]);
        assert_eq!(p.peak_live_bytes, 1000);
        assert!(p.recorded);
    }

    #[test]
    fn profile_counts_blocks_at_the_peak_and_temporary_bytes() {
        let (_, p) = profile_of(Scope::Run, story());
        let of = |leaf| {
            p.samples
                .iter()
                .find(|s| p.stacks[s.stack].id == leaf)
                .map(|s| s.values)
                .unwrap()
        };
        // At the peak (210) A holds one block of 60, B one of 150; A's second 100 were temporary.
        assert_eq!((of(A).peak_live_blocks, of(A).peak_live_bytes), (1, 60));
        assert_eq!((of(B).peak_live_blocks, of(B).peak_live_bytes), (1, 150));
        assert_eq!((of(A).temporary, of(A).temporary_bytes), (1, 100));
        assert_eq!((of(A).leaked_blocks, of(A).leaked_bytes), (1, 60));
    }

    #[test]
    fn profile_samples_name_their_benchmark() {
        let (_, p) = profile_of(
            Scope::Run,
            vec![
                bench(1, "a", 0),
                start(2),
                at(3, 1, 1, malloc_from(A, 1, 10)),
                stop(4),
                at(5, 1, 1, malloc_from(A, 2, 20)),
            ],
        );
        let labels: Vec<(Option<&str>, u64)> = p
            .samples
            .iter()
            .map(|s| (s.benchmark.as_deref(), s.values.allocated_bytes))
            .collect();
        assert_eq!(labels, vec![(None, 20), (Some("a"), 10)]);
    }

    #[test]
    fn no_profile_without_the_request() {
        let mut events = stack_prelude(two_sites_trie());
        events.extend(story());
        let options = SiteOptions::default();
        let r = crate::analyze::accounting::analyze_sites(
            &header(),
            events,
            None,
            &Scope::Run,
            options,
        );
        assert!(r.stacks.is_some() && r.profile.is_none());
    }

    // --- against the heap accounting -------------------------------------------------------

    use crate::xorshift::XorShift as Random;

    #[test]
    fn random_streams_add_up_to_the_heap_totals() {
        for seed in 1..300u64 {
            let mut rng = Random(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
            let mut events = stack_prelude(two_sites_trie());
            for t in 0..300 {
                let pid = 1 + rng.below(3) as u32;
                let addr = rng.below(12) * 16;
                let leaf = [0, A, B][rng.below(3) as usize];
                if rng.below(10) == 0 {
                    events.push(match rng.below(3) {
                        0 => start(t),
                        1 => stop(t),
                        _ => bench(t, ["x", "y"][rng.below(2) as usize], rng.below(3) as u32),
                    });
                    continue;
                }
                let kind = match rng.below(10) {
                    0..=3 => malloc_from(leaf, addr, rng.below(100)),
                    4..=6 => free(addr),
                    7 => realloc_from(leaf, addr, rng.below(12) * 16, rng.below(100)),
                    8 => fork(1 + rng.below(3) as u32),
                    _ => match rng.below(3) {
                        0 => exit(0),
                        1 => exec("/bin/x"),
                        _ => free(addr),
                    },
                };
                events.push(at(t, pid, pid + rng.below(2) as u32, kind));
            }
            let (r, p) = profile_of(
                Scope::Run,
                events[stack_prelude(two_sites_trie()).len()..].to_vec(),
            );
            let s = stacks(&r);
            let h = &r.totals.heap;
            let total = |view| p.total(view, crate::model::profile::Weight::Bytes);
            use crate::model::profile::View;
            assert_eq!(total(View::Peak), h.peak_live_bytes, "seed {seed}");
            assert_eq!(total(View::Allocated), h.bytes_allocated, "seed {seed}");
            assert_eq!(total(View::Leaked), h.leaked.bytes, "seed {seed}");
            let count = |view| p.total(view, crate::model::profile::Weight::Count);
            assert_eq!(count(View::Allocated), h.allocs, "seed {seed}");
            assert_eq!(count(View::Leaked), h.leaked.blocks, "seed {seed}");
            assert_eq!(count(View::Temporary), h.temporary_allocs, "seed {seed}");
            let sum = |f: fn(&SiteMetrics) -> u64| s.sites.iter().map(f).sum::<u64>();
            assert_eq!(sum(|s| s.peak_live_bytes), h.peak_live_bytes, "seed {seed}");
            assert_eq!(s.peak_live_bytes, h.peak_live_bytes, "seed {seed}");
            assert_eq!(sum(|s| s.allocations), h.allocs, "seed {seed}");
            assert_eq!(sum(|s| s.allocated_bytes), h.bytes_allocated, "seed {seed}");
            assert_eq!(sum(|s| s.leaked_bytes), h.leaked.bytes, "seed {seed}");
            assert_eq!(sum(|s| s.leaked_blocks), h.leaked.blocks, "seed {seed}");
            assert_eq!(
                sum(|s| s.live_at_end_bytes),
                h.live_at_end.bytes,
                "seed {seed}"
            );
            assert_eq!(sum(|s| s.temporary), h.temporary_allocs, "seed {seed}");
            for b in &r.benchmarks {
                let h = &b.metrics.heap;
                let Some(s) = &b.stacks else {
                    assert_eq!(h.allocs, 0, "seed {seed}");
                    continue;
                };
                let sum = |f: fn(&SiteMetrics) -> u64| s.sites.iter().map(f).sum::<u64>();
                assert_eq!(sum(|s| s.peak_live_bytes), h.peak_live_bytes, "seed {seed}");
                assert_eq!(sum(|s| s.allocations), h.allocs, "seed {seed}");
                assert_eq!(sum(|s| s.allocated_bytes), h.bytes_allocated, "seed {seed}");
                assert_eq!(sum(|s| s.leaked_bytes), h.leaked.bytes, "seed {seed}");
                assert_eq!(sum(|s| s.leaked_blocks), h.leaked.blocks, "seed {seed}");
                assert_eq!(sum(|s| s.temporary), h.temporary_allocs, "seed {seed}");
            }
        }
    }
}
