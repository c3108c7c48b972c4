//! Call stacks in the recorder (issue 15): the unwind tables the kernel walk reads, and the
//! stacks it sends, interned into the recording's trie.
//!
//! - [`Tables`]: when discovery meets a new executable file, its `.eh_frame` rows (`unwind`)
//!   go into the BPF `unwind_rows` chunks, one file after another (a chunk is made when the
//!   rows reach it), and the file's (ino, dev)
//!   into `unwind_files`, which tells the walk where they are (bpf/stack.bpf.h). The process
//!   is stopped meanwhile, so the walk never meets a file of it without a table. Each such file
//!   is a module of the recording (`EventKind::Module`), kept open until the end so that its
//!   symbols are read from the very file that ran, even if it was deleted or replaced since.
//! - [`Interner`]: each new kernel stack (`decode::KernelStack`) becomes a leaf of the
//!   recording's [`StackTrie`]; the nodes it creates are written before the allocation that
//!   refers to them, and allocation events carry the leaf's id instead of the kernel's.
//! - [`finish`]: the walk counters and the symbols of every frame (named as they came, by
//!   record/names.rs), at the end of `record`.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use crate::format::{self, Event, EventKind, StackWalks, Symbol, MODULE_MARK};
use crate::record::decode::KernelStack;
use crate::record::file_key::FileKey;
use crate::record::names::Names;
use crate::stacks::symbolize::ModuleFile;
use crate::stacks::trie::{Frame, NewNode, StackTrie};
use crate::sys::bpf::{BpfError, LoadedObject, OpenObject, SharedMap};
use crate::sys::bpf_map::{ArrayChunks, MapFd};
use crate::sys::raw::{stack_stat, STACK_ID_MISSING, UNWIND_CHUNKS, UNWIND_CHUNK_SHIFT};
use crate::sys::{process, raw};
use crate::unwind::{RowIndex, UnwindRow};

/// Rows the `unwind_rows` chunks hold at most: 8 Mi rows, 96 MiB of kernel memory if every
/// chunk were made. A C++ compile needs about 0.7 Mi (cc1plus alone has 0.45 Mi), a Python or
/// git run well under 0.2 Mi; a `cargo build` 3.3 Mi (issue 32: libLLVM 1.44 Mi,
/// librustc_driver 1.15 Mi, cargo 0.42 Mi, rustup 0.21 Mi), which 2 Mi could not hold: the file
/// found last (libLLVM or librustc_driver) had no rows, and every allocation entering through
/// its `operator new` had no frame at all. Only the chunks the tables reach are made.
pub const ROW_CAPACITY: u32 = UNWIND_CHUNKS << (UNWIND_CHUNK_SHIFT + 1);

/// Rows per element of `unwind_rows`' chunks (`struct unwind_row_pair`).
const ROWS_PER_ELEMENT: u32 = 2;

/// bpf/stack.bpf.h's `row_chunk_shift`, in a section of its own.
const ROWS_RODATA: &str = ".rodata.rows";

/// For tests/stacks.rs: chunks of 2^N elements instead of 2^UNWIND_CHUNK_SHIFT, so that every
/// file's rows run across several of them.
const CHUNK_SHIFT_FOR_TESTS: &str = "MEMTRACK_TEST_ROW_CHUNK_SHIFT";

/// log2 of the elements per chunk of `unwind_rows`.
fn chunk_shift() -> u32 {
    std::env::var(CHUNK_SHIFT_FOR_TESTS)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|s| (1..=UNWIND_CHUNK_SHIFT).contains(s))
        .unwrap_or(UNWIND_CHUNK_SHIFT)
}

/// The bytes of one element of `unwind_rows`' chunks.
const ELEMENT_SIZE: u32 = ROWS_PER_ELEMENT * std::mem::size_of::<UnwindRow>() as u32;

/// `unwind_rows` (of the walking object), whose chunks are made as the tables need them.
fn row_chunks(outer: SharedMap) -> ArrayChunks {
    ArrayChunks::new(outer, ELEMENT_SIZE, 1 << chunk_shift())
}

/// Load `open`, which walks, while its first chunk of rows is made beside the verifier: making
/// a chunk waits for an RCU grace period (`ArrayChunks::grow`), and the first table is needed
/// as soon as the walker is.
pub fn load_with_rows(mut open: OpenObject) -> Result<(LoadedObject, ArrayChunks), BpfError> {
    let outer = open.prepare_and_share(&[ROWS_MAP])?.remove(0);
    let first = std::thread::Builder::new()
        .name("rows".into())
        .spawn(move || {
            let mut chunks = row_chunks(outer);
            chunks.grow().map(|()| chunks)
        })
        .map_err(|e| BpfError::io("start a thread", e))?;
    // A refused load leaves the chunk's thread to end on its own, with the last of the map.
    let loaded = open.load()?;
    let chunks = first.join().expect("the first rows' chunk panicked")?;
    Ok((loaded, chunks))
}

/// Size the walker's `unwind_rows` before load: chunks of 2^[`chunk_shift`] elements, as many
/// as [`ROW_CAPACITY`] rows take.
pub fn size_rows(open: &mut OpenObject) -> Result<(), BpfError> {
    let shift = chunk_shift();
    open.set_rodata(ROWS_RODATA, &shift.to_ne_bytes())?;
    open.set_max_entries(ROWS_MAP, (ROW_CAPACITY / ROWS_PER_ELEMENT) >> shift)?;
    open.set_inner_array(ROWS_MAP, ELEMENT_SIZE, 1 << shift)
}

/// Which allocations' stacks a recording walks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StackMode {
    /// None (`--no-stacks`): the walk is not even loaded.
    Off,
    /// A byte-weighted sample (`--stack-sample`): the sites' values are estimates.
    Sampled(StackSample),
    /// Every allocation's (`--stacks`): the sites' values are exact.
    All,
}

impl StackMode {
    /// Whether any stack is walked.
    pub fn walks(self) -> bool {
        self != StackMode::Off
    }
}

/// The sampling of a recording's stacks (alloc.bpf.c, "Sampled stacks").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackSample {
    /// The mean requested bytes between two walked allocations (R).
    pub mean_bytes: u64,
    /// The seed of the draws: one seed and one deterministic program walk the same allocations.
    pub seed: u64,
}

/// The R a recording samples its stacks with unless told otherwise (`record --stack-sample`),
/// and `doctor` verifies the sampled walk with: the largest that docs/PERFORMANCE.md's "Sampled
/// stacks" measured within the issue's accuracy target (64 KiB was not, on git).
pub const DEFAULT_SAMPLE_BYTES: u64 = 16 << 10;

/// The mean interval of the faults' walks (bytes made resident) is this many times R: a page is
/// 4 KiB, the size of a large allocation, and a fault is dearer to walk than to count
/// (docs/PERFORMANCE.md, "Resident memory by call site").
pub const FAULT_SAMPLE_FACTOR: u64 = 16;

/// The largest R `--stack-sample` takes: the draws are 32-bit byte counts, so an interval past
/// 4 GiB is cut there, which at 64 MiB happens with probability e^-64.
pub const MAX_SAMPLE_BYTES: u64 = 64 << 20;

impl StackSample {
    /// The header feature that tells the report the stacks are sampled, and how
    /// (`format::StackSampleFeature` reads it back).
    pub fn feature(self) -> String {
        format::StackSampleFeature {
            mean_bytes: self.mean_bytes,
            seed: self.seed,
        }
        .to_string()
    }

    /// The header feature that tells the report how the faults' stacks are sampled
    /// (`format::FaultSampleFeature` reads it back).
    pub fn fault_feature(self) -> String {
        format::FaultSampleFeature {
            mean_bytes: self.mean_bytes * FAULT_SAMPLE_FACTOR,
        }
        .to_string()
    }

    /// The `SAMPLE_DRAWS` intervals of the countdown: exponential with mean `mean_bytes`,
    /// rounded up (an interval of x bytes ends inside an allocation of s >= x bytes: rounding up
    /// keeps P(walk) = 1 - exp(-s/R) exact for whole s), from a generator seeded by `seed`.
    pub fn draws(self) -> Vec<u32> {
        // splitmix64's finalizer: nearby seeds (0, 1, 2 ...) start far apart, never at 0.
        let mut z = self.seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        let mut rng = crate::xorshift::XorShift((z ^ (z >> 31)).max(1));
        let mean = self.mean_bytes as f64;
        (0..crate::sys::raw::SAMPLE_DRAWS)
            .map(|_| {
                // A uniform in (0, 1]: 53 random bits, plus one so that ln never sees 0.
                let u = ((rng.next() >> 11) + 1) as f64 / (1u64 << 53) as f64;
                (-u.ln() * mean).ceil().clamp(1.0, f64::from(u32::MAX)) as u32
            })
            .collect()
    }
}

/// Give alloc.bpf.o's sampling countdown its draws (`sample_draws`), before any allocation.
pub fn fill_draws(alloc: &LoadedObject, sample: StackSample) -> Result<(), BpfError> {
    let draws = sample.draws();
    let mut map = MapFd::of(alloc, DRAWS_MAP)?.map_array(draws.len())?;
    let stride = map.stride();
    let bytes = map.bytes_mut();
    for (i, d) in draws.iter().enumerate() {
        bytes[i * stride..i * stride + 4].copy_from_slice(&d.to_ne_bytes());
    }
    Ok(())
}

/// The section of bpf/stack.bpf.h's `stack_pc_mask`, arm64's only: what [`pc_mask`] gives.
pub const PC_MASK_RODATA: &str = ".rodata.stack";

/// The bits of a user address on this machine, which the arm64 walk keeps of every return
/// address: the rest is pac-ret's signature (bits vabits..54, and 56..63 since Linux does not
/// ignore the top byte of instruction addresses when it enables pointer authentication).
///
/// Found from where the kernel put this process's stack, at the top of the default mmap
/// window, whose size is the user VA size (`DEFAULT_MAP_WINDOW`: 2^48 on Debian's kernels,
/// 2^39 or 2^42 on some others, and 2^48 still with 52-bit VA, where only mappings that ask
/// for an address above it get one, never code the loader maps). The bits of the `[stack]`
/// mapping's end are that size. `PTRACE_GETREGSET NT_ARM_PAC_MASK` would say the same, but only
/// of a stopped tracee, and the BPF objects load before the command starts. Without a
/// `[stack]` line, or one outside 36-52 bits, 48 (Debian's, and the kernel's default).
pub fn pc_mask() -> u64 {
    pc_mask_of(&std::fs::read_to_string("/proc/self/maps").unwrap_or_default())
}

/// [`pc_mask`] of the text of a `/proc/PID/maps`.
fn pc_mask_of(maps: &str) -> u64 {
    let stack_end = maps.lines().find(|l| l.ends_with("[stack]")).and_then(|l| {
        let (_, end) = l.split_whitespace().next()?.split_once('-')?;
        u64::from_str_radix(end, 16).ok()
    });
    let bits = match stack_end.map(|end| 64 - (end - 1).leading_zeros()) {
        Some(bits @ 36..=52) => bits,
        _ => {
            log::debug!("no [stack] end of 36-52 bits ({stack_end:x?}): user addresses of 48");
            48
        }
    };
    (1u64 << bits) - 1
}

/// The names of the BPF maps this module works on (bpf/stack.bpf.h).
const ROWS_MAP: &str = "unwind_rows";
const DRAWS_MAP: &str = "sample_draws";
const FILES_MAP: &str = "unwind_files";
const CONFIG_MAP: &str = "stack_config";
const STATS_MAP: &str = "stack_stats";

/// `struct unwind_file` (bpf/event.h), field by field: module, first row, rows, then the bucket
/// index's first row, base, buckets and shift.
type UnwindFile = [u32; 7];
const _: () = assert!(std::mem::size_of::<UnwindFile>() == std::mem::size_of::<raw::unwind_file>());

/// One module: a file with a table.
struct Module {
    id: u32,
    path: String,
    /// The file as it was mapped, open, for its frames' symbols.
    file: Option<File>,
}

/// A file's unwind table ready to load: its rows with file offsets for pcs, their index, and
/// the file's build id. Made from the file alone, so it can be made before the walker (whose
/// maps it goes into) has loaded.
#[derive(Debug)]
pub struct Prepared {
    rows: Vec<UnwindRow>,
    index: RowIndex,
    build_id: Vec<u8>,
    /// How long the parse took, ns (the summary's building time counts it).
    parse_ns: u64,
}

impl Prepared {
    /// The table of the ELF file at `path`; why not, when the file has no usable call frame
    /// information.
    pub fn of(path: &Path) -> Result<Prepared, String> {
        let started = process::monotonic_ns();
        let table = crate::unwind::build(path).map_err(|e| e.to_string())?;
        let rows = table.file_offset_rows();
        let pcs: Vec<u32> = rows.iter().map(|r| r.pc).collect();
        let index = RowIndex::of(&pcs).ok_or("no rows")?;
        let build_id = match table.identity() {
            crate::unwind::FileIdentity::BuildId(b) => b.clone(),
            crate::unwind::FileIdentity::CfiHash(_) => Vec::new(),
        };
        Ok(Prepared {
            rows,
            index,
            build_id,
            parse_ns: process::monotonic_ns().saturating_sub(started),
        })
    }

    /// Its rows (file offsets for pcs), for tests.
    pub fn rows(&self) -> &[UnwindRow] {
        &self.rows
    }
}

/// The unwind tables loaded into the kernel, and the modules they belong to.
pub struct Tables<'obj> {
    /// `unwind_rows`' chunks made so far, mapped.
    rows: ArrayChunks,
    used: u32,
    files: MapFd<'obj>,
    stats: MapFd<'obj>,
    modules: Vec<Module>,
    /// Module events not yet written.
    pending: Vec<Event>,
    /// Files refused because the rows array was full (warned once).
    refused_full: u32,
    /// Time spent building and loading tables, ns.
    build_ns: u64,
}

impl<'obj> Tables<'obj> {
    /// Switch stacks on in `walker` (walk.bpf.o), whose `unwind_rows` is `rows`, with the chunk
    /// made as it loaded ([`load_with_rows`]); later chunks are made as the tables need them.
    pub fn new(walker: &'obj LoadedObject, rows: ArrayChunks) -> Result<Tables<'obj>, BpfError> {
        MapFd::of(walker, CONFIG_MAP)?.update_u32(0, 1)?;
        Ok(Tables {
            rows,
            used: 0,
            files: MapFd::of(walker, FILES_MAP)?,
            stats: MapFd::of(walker, STATS_MAP)?,
            modules: Vec::new(),
            pending: Vec::new(),
            refused_full: 0,
            build_ns: 0,
        })
    }

    /// Build and load the table of the file `key`, read through `path` (a `/proc/PID/map_files`
    /// entry, or the real path), shown as `shown`, first mapped by process `pid`. A file
    /// without usable call frame information gets no table: the walk ends, marked unknown, at
    /// its frames. Never fails the recording.
    pub fn add(&mut self, key: FileKey, path: &Path, shown: &str, pid: u32) {
        match Prepared::of(path) {
            Ok(prepared) => self.add_prepared(key, prepared, path, shown, pid),
            Err(e) => log::debug!("no unwind table for {shown}: {e}"),
        }
    }

    /// Load the table `prepared` of the file `key` (read through `path`, as for [`Self::add`]),
    /// made beforehand, off the drain ([`crate::record::table_builder`]).
    pub fn add_prepared(
        &mut self,
        key: FileKey,
        prepared: Prepared,
        path: &Path,
        shown: &str,
        pid: u32,
    ) {
        let started = process::monotonic_ns();
        let Prepared {
            rows,
            index,
            build_id,
            parse_ns,
        } = prepared;
        let index_rows = index.rows();
        let Some(at) = self.reserve(index_rows.len() + rows.len(), shown) else {
            return;
        };
        let first = at + index_rows.len() as u32;
        self.write_rows(at, index_rows.into_iter());
        self.write_rows(first, rows.iter().map(UnwindRow::to_bytes));
        let id = self.modules.len() as u32 + 1;
        let fields: UnwindFile = [
            id,
            first,
            rows.len() as u32,
            at,
            index.base,
            index.buckets(),
            index.shift,
        ];
        let mut value = [0u8; std::mem::size_of::<UnwindFile>()];
        for (bytes, field) in value.chunks_exact_mut(4).zip(fields) {
            bytes.copy_from_slice(&field.to_ne_bytes());
        }
        // Published after the rows are written: the walk reads them once it finds this entry.
        if let Err(e) = self.files.update_bytes(&key.bytes(), &value) {
            log::warn!("{shown}: cannot load its unwind table ({e}); its frames end stacks");
            return;
        }
        self.modules.push(Module {
            id,
            path: shown.to_string(),
            file: File::open(path).ok(),
        });
        self.pending.push(Event {
            ts_ns: 0, // set when written
            pid,
            tid: 0,
            kind: EventKind::Module(format::Module {
                id,
                path: shown.to_string(),
                build_id,
                dev: key.dev,
                ino: key.ino,
            }),
        });
        let took = process::monotonic_ns().saturating_sub(started);
        self.build_ns += parse_ns + took;
        log::debug!(
            "{shown}: unwind table of {} rows, parsed in {} µs, loaded in {} µs",
            rows.len(),
            parse_ns / 1000,
            took / 1000
        );
    }

    /// Where `n` rows go, if they fit, with the chunks they reach made.
    fn reserve(&mut self, n: usize, shown: &str) -> Option<u32> {
        let n = u32::try_from(n).ok()?;
        if n > ROW_CAPACITY - self.used {
            if self.refused_full == 0 {
                log::warn!(
                    "{shown}: the unwind tables are full ({ROW_CAPACITY} rows); stacks end at the \
                     frames of this and later files"
                );
            }
            self.refused_full += 1;
            return None;
        }
        let first = self.used;
        // Each file starts on an element, so that no two files share one.
        let end = first + n.next_multiple_of(ROWS_PER_ELEMENT);
        while (self.rows.len() as u32) * self.chunk_rows() < end {
            if let Err(e) = self.rows.grow() {
                log::warn!("{shown}: no room for its unwind table ({e}); its frames end stacks");
                return None;
            }
        }
        self.used = end;
        Some(first)
    }

    /// Rows per chunk.
    fn chunk_rows(&self) -> u32 {
        self.rows.entries() * ROWS_PER_ELEMENT
    }

    /// Write `rows` (each a row's bytes, [`UnwindRow::to_bytes`]) from row `first` on.
    fn write_rows(&mut self, first: u32, rows: impl Iterator<Item = [u8; 12]>) {
        let size = std::mem::size_of::<UnwindRow>();
        let chunk_rows = self.chunk_rows() as usize;
        for (i, row) in rows.enumerate() {
            let at = first as usize + i;
            let chunk = at / chunk_rows;
            let at = (at % chunk_rows) * size;
            self.rows.chunk_mut(chunk)[at..at + size].copy_from_slice(&row);
        }
    }

    /// Module events to write, oldest first, stamped now: the C library's and the loader's
    /// tables are built before the recording starts, and no event may predate its header.
    pub fn take_events(&mut self) -> Vec<Event> {
        let now = process::monotonic_ns();
        let mut out = std::mem::take(&mut self.pending);
        for ev in &mut out {
            ev.ts_ns = now;
        }
        out
    }

    /// One line for the end of `record`.
    pub fn summary(&self) -> String {
        format!(
            "unwind tables: {} files, {} rows ({} KiB) in {} chunk{}, {} ms",
            self.modules.len(),
            self.used,
            self.used as usize * std::mem::size_of::<UnwindRow>() / 1024,
            self.rows.len(),
            if self.rows.len() == 1 { "" } else { "s" },
            self.build_ns / 1_000_000
        )
    }

    /// The kernel's walk counters, as the file's `StackStats` event.
    fn stats_event(&self) -> Event {
        let n = |s: stack_stat| self.stats.lookup_percpu_u64_sum(s as u32).unwrap_or(0);
        Event {
            ts_ns: process::monotonic_ns(),
            pid: 0,
            tid: 0,
            kind: EventKind::StackStats(StackWalks {
                walks: n(stack_stat::STAT_WALKS),
                truncated: n(stack_stat::STAT_TRUNCATED),
                unknown: n(stack_stat::STAT_UNKNOWN),
                unsupported: n(stack_stat::STAT_UNSUPPORTED),
                collisions: n(stack_stat::STAT_COLLISIONS),
                uncached: n(stack_stat::STAT_UNCACHED),
            }),
        }
    }

    /// The path to read module `m`'s symbols from: its real path while that is still the file
    /// that ran (debug links next to it then work), else the file kept open.
    fn symbol_path(m: &Module) -> Option<PathBuf> {
        use std::os::fd::AsRawFd;
        let open = PathBuf::from(format!("/proc/self/fd/{}", m.file.as_ref()?.as_raw_fd()));
        Some(ModuleFile::preferred_path(Path::new(&m.path), &open))
    }
}

/// The recording's stack trie, fed with the kernel's stacks as they arrive.
#[derive(Default)]
pub struct Interner {
    trie: StackTrie,
    /// Kernel stack id → leaf node id.
    leaves: HashMap<u32, u32>,
    created: Vec<NewNode>,
    frames: Vec<Frame>,
    /// Names the frames as they come (record/names.rs), unless the symbols are left out.
    names: Option<Names>,
    /// Nodes whose frames went to it.
    named: usize,
}

impl Interner {
    /// An empty trie, whose frames are named as they come if `symbols`.
    pub fn new(symbols: bool) -> Interner {
        Interner {
            names: symbols.then(Names::default),
            ..Interner::default()
        }
    }

    /// Hands the naming thread the modules `tables` made and the frames the trie gained since
    /// the last call, so that they are named while the command runs.
    pub fn feed_names(&mut self, tables: Option<&Tables<'_>>) {
        let (Some(names), Some(tables)) = (self.names.as_mut(), tables) else {
            return;
        };
        let modules = tables.modules[names.modules_sent..]
            .iter()
            .filter_map(|m| Tables::symbol_path(m).map(|path| ModuleFile { id: m.id, path }))
            .collect();
        names.modules_sent = tables.modules.len();
        let frames = self.trie.frames_since(self.named).collect();
        self.named = self.trie.len();
        names.feed(modules, frames);
    }

    /// Intern `stack`, appending the nodes it creates to `out` as `StackNode` events.
    pub fn add(&mut self, stack: &KernelStack, out: &mut Vec<Event>) {
        log::trace!(
            "kernel stack {} (end {}): {:x?}",
            stack.id,
            stack.end,
            stack.frames
        );
        self.frames.clear();
        self.frames.extend(stack.frames.iter().map(|&f| Frame {
            module: (f >> 32) as u32,
            offset: f & 0xffff_ffff,
        }));
        if stack.end != 0 {
            self.frames.push(Frame {
                module: MODULE_MARK,
                offset: u64::from(stack.end),
            });
        }
        self.created.clear();
        let leaf = self.trie.intern(&self.frames, &mut self.created);
        self.leaves.insert(stack.id, leaf);
        let ts_ns = stack.ts_ns;
        out.extend(self.created.iter().map(|n| Event {
            ts_ns,
            pid: 0,
            tid: 0,
            kind: EventKind::StackNode {
                id: n.id,
                parent: n.parent,
                module: n.frame.module,
                offset: n.frame.offset,
            },
        }));
    }

    /// Interns the stack of a sampled allocation whose walk gave none (`STACK_ID_MISSING`), a
    /// lone `[no stack]` mark, the first time one arrives, appending its node to `out`.
    pub fn add_missing(&mut self, ts_ns: u64, out: &mut Vec<Event>) {
        if self.leaves.contains_key(&STACK_ID_MISSING) {
            return;
        }
        let missing = KernelStack {
            id: STACK_ID_MISSING,
            end: format::MARK_NO_STACK as u32,
            ts_ns,
            frames: Vec::new(),
        };
        self.add(&missing, out);
    }

    /// Makes the kernel's stack id of `ev` (an allocation's, or a fault's) the recording's trie
    /// leaf, appending to `out` the node of a missing stack the first time one arrives, to be
    /// written before `ev`.
    pub fn to_leaf(&mut self, ev: &mut Event, out: &mut Vec<Event>) {
        let ts_ns = ev.ts_ns;
        if let EventKind::Alloc { stack_id, .. }
        | EventKind::Realloc { stack_id, .. }
        | EventKind::Fault { stack_id, .. } = &mut ev.kind
        {
            if *stack_id == STACK_ID_MISSING {
                self.add_missing(ts_ns, out);
            }
            *stack_id = self.leaf(*stack_id);
        }
    }

    /// The leaf node of kernel stack `id` (0: none, or never seen).
    pub fn leaf(&self, id: u32) -> u32 {
        if id == 0 {
            return 0;
        }
        self.leaves.get(&id).copied().unwrap_or(0)
    }

    /// Nodes in the trie.
    pub fn nodes(&self) -> usize {
        self.trie.len()
    }
}

/// The walk counters of a recording with stacks whose walker was never in place: it failed to
/// load (its sampled allocations kept no stack), or was still loading when the tree ended. All
/// zero, which the report reads as "no walk" where allocations were sampled; without them it
/// could only say that the file has no counters, as of a recorder cut short.
pub fn no_walks() -> Event {
    Event {
        ts_ns: process::monotonic_ns(),
        pid: 0,
        tid: 0,
        kind: EventKind::StackStats(StackWalks::default()),
    }
}

/// The events that close a recording with stacks: the walk counters, then (unless the symbols
/// are left out) what every frame of the trie is.
pub fn finish(tables: &Tables<'_>, interner: &mut Interner) -> Vec<Event> {
    let mut out = vec![tables.stats_event()];
    let started = process::monotonic_ns();
    interner.feed_names(Some(tables));
    let Some(names) = interner.names.take() else {
        return out;
    };
    let mut named = names.finish();
    let ts_ns = process::monotonic_ns();
    let frames: Vec<Frame> = interner.trie.frames().collect();
    let count = frames.len();
    out.extend(frames.into_iter().map(|f| Event {
        ts_ns,
        pid: 0,
        tid: 0,
        kind: EventKind::Symbol(Symbol {
            module: f.module,
            offset: f.offset,
            frames: named.remove(&f).unwrap_or_default(),
        }),
    }));
    log::info!(
        "symbols: {count} frames of {} modules, named as they came; {} ms at the end",
        tables.modules.len(),
        process::monotonic_ns().saturating_sub(started) / 1_000_000
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_feature_names_the_sample_and_reads_back() {
        let sample = StackSample {
            mean_bytes: 16384,
            seed: 7,
        };
        assert_eq!(sample.feature(), "stack_sample:16384:7");
        let features = ["stacks".to_string(), sample.feature()];
        let read = format::StackSampleFeature::of(&features).unwrap();
        assert_eq!((read.mean_bytes, read.seed), (16384, 7));
        assert_eq!(format::StackSampleFeature::of(&["stacks".into()]), None);
        assert_eq!(
            format::StackSampleFeature::of(&["stack_sample:0:1".into()]),
            None
        );
    }

    /// The draws are a seed's alone, differ between seeds (nearby ones too), and average the
    /// mean: the sample's promise rests on them being exponential with mean R.
    #[test]
    fn draws_are_the_seeds_and_exponential() {
        let sample = |seed| StackSample {
            mean_bytes: 16384,
            seed,
        };
        let a = sample(2).draws();
        assert_eq!(a, sample(2).draws());
        assert_ne!(a, sample(3).draws());
        assert_eq!(a.len(), crate::sys::raw::SAMPLE_DRAWS as usize);
        let mean = a.iter().map(|&d| f64::from(d)).sum::<f64>() / a.len() as f64;
        assert!((mean / 16384.0 - 1.0).abs() < 0.02, "mean draw {mean}");
        // Exponential: P(X > R) = 1/e.
        let above = a.iter().filter(|&&d| d > 16384).count() as f64 / a.len() as f64;
        assert!(
            (above - (-1f64).exp()).abs() < 0.01,
            "{above} above the mean"
        );
        assert!(a.iter().all(|&d| d >= 1));
    }

    #[test]
    fn pc_mask_has_the_bits_of_the_stacks_end() {
        let maps = "aaaab0a70000-aaaab0a8d000 r-xp 00000000 fe:01 1234 /usr/bin/true\n\
                    ffffe7e0a000-ffffe7e2b000 rw-p 00000000 00:00 0 [stack]\n";
        assert_eq!(pc_mask_of(maps), (1 << 48) - 1);
        let maps = "7fc6a000-7fc8b000 rw-p 00000000 00:00 0 [stack]";
        assert_eq!(
            pc_mask_of(maps),
            (1 << 48) - 1,
            "below 36 bits: the default"
        );
        let maps = "7ffff8a000-7ffff8b000 rw-p 00000000 00:00 0 [stack]";
        assert_eq!(pc_mask_of(maps), (1 << 39) - 1, "a 39-bit VA kernel");
        assert_eq!(pc_mask_of(""), (1 << 48) - 1);
        // This machine's: user addresses fit.
        let mask = pc_mask();
        let here = pc_mask as *const () as u64;
        assert_eq!(here & mask, here);
    }
}
