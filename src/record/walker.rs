//! The walker of call stacks (issue 32), a sample's or, with `--stacks`, every allocation's,
//! loaded beside the recorded command's start instead of before it: its verification (the walk
//! is some 2,000 instructions, 15-25 ms) and its rows array (48 MiB of kernel memory to clear,
//! before the rows came in chunks made as needed) were most of what stacks added to the fixed
//! cost of every recording, and a recording that samples its stacks by default must not pay
//! them before the command runs. `--stacks` walked inline in alloc.bpf.o's entry program,
//! verified before the command started (`record -- true` 1.79x `--no-stacks`); it now takes
//! this walker too, every call sampled (a mean of 0).
//!
//! Flow: [`Walker::start`] loads bpf/walk.bpf.c on a thread of its own, beside the other
//! objects, sharing the allocator's per-thread `call_state` and the maps every object shares,
//! while the rest of the recording starts. alloc.bpf.o makes its maps first and sends them
//! (`OpenObject::prepare_and_share`), so that the two verify side by side. Started once
//! alloc.bpf.o was loaded instead, the walker was ready later (`sort` 1.44x `--no-stacks`
//! against 1.39x, a python run 1.17x against 1.16x, 13 and 11 interleaved rounds); started
//! after the command's fork, later still (`record -- true` 1.15x against 1.06x, a python run
//! 1.72x against 1.53x, 11 and 9 rounds).
//!
//! The command starts meanwhile, with alloc_enter_sampled attached: until the walker is in
//! place, its tail call does nothing, and a sampled call's walk is left to its return, its
//! process stopped (STOP_WALKER) until the walker is in place (bpf/alloc.bpf.c, "Sampled
//! stacks"). The drain loop polls [`Walker::put_in_place`] as it goes, and waits on it only
//! for such a stop; once loaded, the unwind tables of the files discovered so far are loaded
//! into its maps (record::stacks; parsed meanwhile by record::table_builder, beside this load),
//! and only then the walker is put in both slots of the allocator's `walkers` array, so it
//! never walks a file without its table.

use std::cell::{Cell, OnceCell, RefCell};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::thread::JoinHandle;

use crate::error::Error;
use crate::record::discover::Discovery;
use crate::record::kernel_error;
use crate::record::stacks::{self, Tables};
use crate::sys::bpf::{BpfError, CustomBtf, Link, LoadedObject, OpenObject, SharedMap};
use crate::sys::bpf_map::{ArrayChunks, MapFd};
use crate::sys::raw;
use crate::sys::sched::Lowered;

/// walk.bpf.c's program, which walks at an entry and at a return.
pub const PROGRAM: &str = "alloc_walk";
/// The allocator's program array it goes in, and its slots (`enum walker_slot`): the entry's
/// tail call, then the return's.
const WALKERS_MAP: &str = "walkers";
const SLOTS: u32 = 2;

/// The allocator's flag that the walker will never be in place: its sampled calls then stop no
/// process for it ([`Walker::give_up`]).
const FAILED_MAP: &str = "walker_failed";

/// For tests/sampled.rs: with this set in the environment, the walker goes in the return's slot
/// alone, so that every sampled call is walked at its return (its process stopped for it each
/// time), and the test compares each of those walks with the entry's own.
const AT_RETURN_ONLY: &str = "MEMTRACK_TEST_WALK_AT_RETURN";

/// For tests/sampled.rs: with this set in the environment, the walker's load fails, as where a
/// kernel's verifier refuses it, so that the test sees what a recording does then.
const FAILS_FOR_TESTS: &str = "MEMTRACK_TEST_WALKER_FAILS";

/// walk.bpf.c's program that walks the stacks of the pages a process makes resident, attached
/// to rss_stat after rss.bpf.c's (issue 35).
pub const FAULT_PROGRAM: &str = "fault_walk";

/// walk.bpf.c's program that walks the stacks of writes to pages a process inherited at fork,
/// at the return of the kernel's write-protect fault (fexit on do_wp_page): copy-on-write
/// changes no resident counter, so [`FAULT_PROGRAM`] never sees them.
pub const TOUCH_PROGRAM: &str = "touch_walk";

/// walk.bpf.c's programs that keep a tracked thread's faulting address for [`FAULT_PROGRAM`]:
/// x86's page fault tracepoints, elsewhere a kprobe on handle_mm_fault.
pub const FAULT_ADDRESS_PROGRAMS: &[&str] = if cfg!(target_arch = "x86_64") {
    &["fault_address_user", "fault_address_kernel"]
} else {
    &["fault_address"]
};

/// alloc.bpf.c's and walk.bpf.c's mean bytes between sampled stacks (`stack_sample_mean`; 0
/// walks every one).
pub const SAMPLE_RODATA: &str = ".rodata.sample";

/// walk.bpf.c's factor of the faults' mean interval over the allocations'
/// ([`stacks::FAULT_SAMPLE_FACTOR`]).
const FAULTS_RODATA: &str = ".rodata.faults";

/// walk.bpf.c's page size, which its countdown over bytes made resident counts pages by.
const PAGE_RODATA: &str = ".rodata.page";

/// The allocator's maps the walker works on besides those every object shares: the per-thread
/// calls, and the sampling countdowns' draws.
pub const FROM_ALLOCATOR: &[&str] = &["call_state", "sample_draws"];

/// walk.bpf.c's read-only flag `walk_preempt_off`, cleared where the verifier refuses the
/// walk with preemption off ([`refuses_walk_preempt_off`]); `doctor` loads it so too.
pub const WALK_RODATA: &str = ".rodata.walk";

/// The walker: loading on its thread, then loaded. walk.bpf.o loads twice, its maps shared:
/// first with the walk of allocations alone ([`PROGRAM`]), which a sampled call's process may
/// be stopped for, then with the walks of faults ([`FAULT_PROGRAM`], [`TOUCH_PROGRAM`] and the
/// address programs), which nothing waits for. Each program verifies the walk's functions on
/// its own: in one load, the faults' doubled the time a python run stood stopped for the
/// walker (15-20 ms to 33-43 ms).
#[derive(Default)]
pub struct Walker {
    /// The first load, which the thread sends as soon as it has it.
    loading: RefCell<Option<Receiver<Result<Walking, BpfError>>>>,
    /// The thread, which ends with the second load (`None`: no faults walked).
    thread: RefCell<Option<JoinHandle<SecondLoad>>>,
    loaded: OnceCell<LoadedObject>,
    /// Its rows' first chunk, made as it loaded, until its tables take it.
    rows: RefCell<Option<ArrayChunks>>,
    /// Why it is not walking, said once by the drain loop.
    failed: OnceCell<String>,
    /// Whether the first load is in place (its tables made), which the faults' wait for.
    placed: Cell<bool>,
    /// Whether the walks of faults load in the first load (`--stacks`: every page the
    /// command's start makes resident has its stack, as every allocation).
    faults_first: Cell<bool>,
    /// The second load, once attached (or failed, or not asked for).
    faults: OnceCell<Option<LoadedObject>>,
    /// Whether the allocator was told that the walker will never be in place.
    given_up: Cell<bool>,
    /// The loading thread's priority: a process stopped for the walker gives it the normal
    /// one back ([`Walker::wait`]).
    priority: Lowered,
}

/// The walker loaded, and its rows' first chunk ([`stacks::load_with_rows`]).
type Walking = (LoadedObject, ArrayChunks);

/// The second load of walk.bpf.o, the walks of faults; `None` when not asked for.
type SecondLoad = Result<Option<LoadedObject>, BpfError>;

/// Which programs of walk.bpf.o a load takes ([`Walker`]): the walk of allocations, the walks
/// of faults, and of those the walk of writes to inherited pages.
#[derive(Clone, Copy)]
struct Part {
    allocations: bool,
    faults: bool,
    touches: bool,
}

/// What every load of walk.bpf.o is opened with, on the loading thread.
struct Opener {
    core: Option<CustomBtf>,
    classic: bool,
    pidns_rodata: [u8; 16],
    sample_mean: u64,
    page_size: u32,
}

impl Opener {
    /// walk.bpf.o opened to load `part`, on `shared` maps.
    fn open(
        &self,
        shared: &[SharedMap],
        preempt_off: bool,
        part: Part,
    ) -> Result<OpenObject, BpfError> {
        let mut open = OpenObject::open_with("walk", raw::WALK_BPF_OBJECT, self.core.as_ref())?;
        open.set_rodata(crate::record::pidns::RODATA_SECTION, &self.pidns_rodata)?;
        // Sized before the maps of the first load replace its own in the second.
        stacks::size_rows(&mut open)?;
        for map in shared {
            open.reuse_map(map)?;
        }
        if !preempt_off {
            open.set_rodata(WALK_RODATA, &[0])?;
        }
        if self.classic {
            open.use_classic_uprobe(PROGRAM)?;
        }
        open.set_rodata(SAMPLE_RODATA, &self.sample_mean.to_ne_bytes())?;
        let factor = stacks::FAULT_SAMPLE_FACTOR as u32;
        open.set_rodata(FAULTS_RODATA, &factor.to_ne_bytes())?;
        open.set_rodata(PAGE_RODATA, &self.page_size.to_ne_bytes())?;
        open.set_autoload(PROGRAM, part.allocations)?;
        for prog in [FAULT_PROGRAM].iter().chain(FAULT_ADDRESS_PROGRAMS) {
            open.set_autoload(prog, part.faults)?;
        }
        open.set_autoload(TOUCH_PROGRAM, part.faults && part.touches)?;
        if cfg!(target_arch = "aarch64") {
            // pac-ret's signatures are stripped from return addresses with it.
            let mask = stacks::pc_mask();
            open.set_rodata(stacks::PC_MASK_RODATA, &mask.to_ne_bytes())?;
        }
        Ok(open)
    }

    /// `part` loaded by `load`; again without the walk of writes to inherited pages where the
    /// kernel refuses it: the rest walks all the same.
    fn load<T>(
        &self,
        shared: &[SharedMap],
        preempt_off: bool,
        part: Part,
        load: impl Fn(OpenObject) -> Result<T, BpfError>,
    ) -> Result<T, BpfError> {
        match self.open(shared, preempt_off, part).and_then(&load) {
            Err(e) if part.faults && part.touches => {
                log::info!("writes to pages inherited at fork are not walked: {e}");
                let part = Part {
                    touches: false,
                    ..part
                };
                self.open(shared, preempt_off, part).and_then(load)
            }
            other => other,
        }
    }

    /// The first load, with preemption off where the verifier allows the walk so (whether it
    /// did is the second's to follow).
    fn load_first(&self, shared: &[SharedMap], part: Part) -> (Result<Walking, BpfError>, bool) {
        match self.load(shared, true, part, stacks::load_with_rows) {
            Err(e) if refuses_walk_preempt_off(&e) => {
                log::info!(
                    "this kernel's verifier refuses the stack walk with preemption off; it walks \
                     preemptible"
                );
                (
                    self.load(shared, false, part, stacks::load_with_rows),
                    false,
                )
            }
            other => (other, true),
        }
    }
}

/// Where the walker's load is ([`Walker::poll`]).
pub enum Load<'a> {
    Loading,
    Ready(&'a LoadedObject),
    /// It failed, and was said.
    Failed,
}

/// What the walker's load needs from the recording's other loads.
pub struct WalkerSetup<'a> {
    /// The allocator's maps it shares ([`FROM_ALLOCATOR`]), sent once the allocator's object
    /// has made them, before that object's own verification.
    pub from_allocator: Receiver<Result<Vec<SharedMap>, BpfError>>,
    /// The maps every object shares (the ring, the lost counters, the tracked processes).
    pub shared: &'a [SharedMap],
    /// The CO-RE types the loads are relocated against.
    pub core: Option<&'a CustomBtf>,
    /// Whether uprobes are classic (no uprobe_multi): the walker must be the tail-calling
    /// program's kind.
    pub classic: bool,
    /// The recorder's pid namespace, as `.rodata.pidns` says it (pidns.rs).
    pub pidns_rodata: [u8; 16],
    /// The mean bytes between sampled stacks; 0 walks every one (`--stacks`).
    pub sample_mean: u64,
    /// Whether resident memory is recorded, whose increases the walker walks too: without it
    /// [`FAULT_PROGRAM`] is left out of the load.
    pub faults: bool,
    /// Whether [`TOUCH_PROGRAM`] loads here (`preflight::Touches`); it is left out otherwise.
    pub touches: bool,
}

impl Walker {
    /// Start loading the walker on a thread of its own: everything but copying a few
    /// descriptors happens there, the object's opening and the wait for the allocator's maps
    /// included.
    pub fn start(&self, setup: WalkerSetup<'_>) -> Result<(), Error> {
        let mut shared = Vec::new();
        for map in setup.shared {
            shared.push(map.try_clone().map_err(kernel_error)?);
        }
        let core = match setup.core.map(CustomBtf::try_clone).transpose() {
            Ok(core) => core,
            Err(e) => return Err(Error::Internal(format!("cannot copy the CO-RE types: {e}"))),
        };
        let (classic, pidns_rodata) = (setup.classic, setup.pidns_rodata);
        let (sample_mean, faults, touches) = (setup.sample_mean, setup.faults, setup.touches);
        let page_size = crate::sys::ring::page_size() as u32;
        let from_allocator = setup.from_allocator;
        let (sent, received) = std::sync::mpsc::sync_channel(1);
        let priority = self.priority.clone();
        // Sampled (the default), the walks of faults load second; with `--stacks`, first.
        let faults_first = faults && sample_mean == 0;
        let first_part = Part {
            allocations: true,
            faults: faults_first,
            touches,
        };
        let second_part = Part {
            allocations: false,
            faults: faults && !faults_first,
            touches,
        };
        let opener = Opener {
            core,
            classic,
            pidns_rodata,
            sample_mean,
            page_size,
        };
        let thread = std::thread::Builder::new()
            .name("load walk".into())
            .spawn(move || {
                // It may outlive the start, whose signals the recorder blocks only later: a
                // SIGTERM for the recorder must not end it here.
                if let Err(e) = crate::sys::process::block_all_signals() {
                    log::debug!("the walker's load takes signals: {e}");
                }
                // Beside the command's start, not in its way: the lowest priority, as the
                // objects that attach after the uprobes (load.rs).
                if let Err(e) = priority.lower(19) {
                    log::debug!("walk.bpf.o loads at the normal priority: {e}");
                }
                let began = std::time::Instant::now();
                if std::env::var_os(FAILS_FOR_TESTS).is_some() {
                    let what = format!("load the walker ({FAILS_FOR_TESTS} is set)");
                    return Err(BpfError::new(what, libc::EPERM));
                }
                match from_allocator.recv() {
                    Ok(Ok(maps)) => shared.extend(maps),
                    Ok(Err(e)) => return Err(e),
                    Err(_) => {
                        let what = "share the allocator's maps: its load ended first";
                        return Err(BpfError::new(what.to_string(), libc::ECANCELED));
                    }
                }
                let (first, preempt_off) = opener.load_first(&shared, first_part);
                let loaded = first.as_ref().ok().map(|(loaded, _)| loaded);
                crate::record::log_load("walk.bpf.o", began, loaded);
                // Its maps, for the second load to work on: every one, its own included.
                let maps = match &first {
                    Ok((loaded, _)) if second_part.faults => Some(loaded.share_maps()),
                    _ => None,
                };
                if sent.send(first).is_err() {
                    return Ok(None);
                }
                let Some(maps) = maps.transpose()? else {
                    return Ok(None);
                };
                let began = std::time::Instant::now();
                let second = opener.load(&maps, preempt_off, second_part, OpenObject::load)?;
                let what = "walk.bpf.o's walks of faults";
                crate::record::log_load(what, began, Some(&second));
                Ok(Some(second))
            })
            .map_err(|e| Error::Internal(format!("cannot start a thread: {e}")))?;
        self.faults_first.set(faults_first);
        *self.loading.borrow_mut() = Some(received);
        *self.thread.borrow_mut() = Some(thread);
        Ok(())
    }

    /// Where the walker's load is, asked without waiting: a load that failed is said once, at
    /// warning level (the sampled allocations then keep no stack).
    pub fn poll(&self) -> Load<'_> {
        self.load(false)
    }

    /// Where the walker's load is once it has ended: waits for it, its thread at the normal
    /// priority from now on, since a stopped process waits too. At nice 19 on a machine busy
    /// with other work, the load got what those left, and the process stayed stopped.
    pub fn wait(&self) -> Load<'_> {
        // Only while the thread runs: a thread that has ended may have left its id to another.
        let running = (self.thread.borrow().as_ref()).is_some_and(|t| !t.is_finished());
        if running && self.loaded.get().is_none() && self.failed.get().is_none() {
            if let Err(e) = self.priority.raise() {
                log::debug!("the walker's load keeps nice 19: {e}");
            }
        }
        self.load(true)
    }

    fn load(&self, wait: bool) -> Load<'_> {
        if let Some(loaded) = self.loaded.get() {
            return Load::Ready(loaded);
        }
        if self.failed.get().is_some() {
            return Load::Failed;
        }
        let received = {
            let loading = self.loading.borrow();
            let Some(receiver) = loading.as_ref() else {
                return Load::Loading;
            };
            if wait {
                receiver.recv().ok()
            } else {
                match receiver.try_recv() {
                    Ok(first) => Some(first),
                    Err(TryRecvError::Empty) => return Load::Loading,
                    Err(TryRecvError::Disconnected) => None,
                }
            }
        };
        self.loading.borrow_mut().take();
        // Nothing sent: the thread failed before the load, and says why as it ends.
        let first = received.unwrap_or_else(|| match self.join() {
            Err(e) => Err(e),
            Ok(_) => Err(BpfError::new("load the walker", libc::ECANCELED)),
        });
        match first {
            Ok((loaded, rows)) => {
                *self.rows.borrow_mut() = Some(rows);
                Load::Ready(self.loaded.get_or_init(|| loaded))
            }
            Err(e) => {
                let why = match &e.verifier {
                    Some(log) => crate::record::verifier_refusal(&e.what, log),
                    None => e.to_string(),
                };
                log::warn!("call stacks are not walked: the walker did not load ({why})");
                let _ = self.failed.set(why);
                Load::Failed
            }
        }
    }

    /// The thread's end: the second load, if it was asked for.
    fn join(&self) -> SecondLoad {
        match self.thread.borrow_mut().take() {
            Some(thread) => thread.join().expect("the walker's load panicked"),
            None => Ok(None),
        }
    }

    /// Once the walker is in place and its second load has ended, the walks of faults attached,
    /// after the programs that give them addresses: the links, for the caller to keep. Empty
    /// before (never waiting for the load), and after the first time.
    pub fn attach_faults(&self) -> Vec<Link<'_>> {
        let loading = self
            .thread
            .borrow()
            .as_ref()
            .is_some_and(|t| !t.is_finished());
        if !self.placed.get() || self.faults.get().is_some() || loading {
            return Vec::new();
        }
        let second = match self.join() {
            Ok(second) => second,
            Err(e) => {
                let why = match &e.verifier {
                    Some(log) => crate::record::verifier_refusal(&e.what, log),
                    None => e.to_string(),
                };
                log::warn!("the stacks of pages made resident are not walked: {why}");
                None
            }
        };
        match self.faults.get_or_init(|| second) {
            Some(faults) => fault_links(faults),
            None => Vec::new(),
        }
    }

    /// Once the walker is loaded (`wait`: waiting for its first load to end), give `discovery`
    /// the unwind tables of the files it found so far, then let `alloc`'s sampled entries
    /// tail-call the walker, so that it never meets a file without its table; then, once they
    /// have loaded too, attach its walks of faults, which rss.bpf.o's rss_stat (attached before
    /// the command started) feeds ([`Self::attach_faults`]): the links, for the caller to
    /// keep. A failure is said once, and discovery stops keeping files for tables.
    pub fn put_in_place<'obj>(
        &'obj self,
        alloc: &LoadedObject,
        discovery: &mut Discovery<'obj>,
        wait: bool,
    ) -> Vec<Link<'obj>> {
        let Some(walker) = self.place(alloc, discovery, wait) else {
            return Vec::new();
        };
        self.placed.set(true);
        if self.faults_first.get() {
            return fault_links(walker);
        }
        self.attach_faults()
    }

    /// The walker, once in place.
    fn place<'obj>(
        &'obj self,
        alloc: &LoadedObject,
        discovery: &mut Discovery<'obj>,
        wait: bool,
    ) -> Option<&'obj LoadedObject> {
        let load = if wait { self.wait() } else { self.poll() };
        let walker = match load {
            Load::Loading => return None,
            Load::Failed => {
                self.give_up(alloc, discovery);
                return None;
            }
            Load::Ready(walker) => walker,
        };
        // Its tables are made once (the drain asks while discovery waits for them).
        let rows = self.rows.borrow_mut().take()?;
        let began = std::time::Instant::now();
        match Tables::new(walker, rows) {
            Ok(tables) => discovery.set_tables(tables),
            Err(e) => {
                log::warn!("call stacks are not walked: {e}");
                self.give_up(alloc, discovery);
                return None;
            }
        }
        // The return's slot first, so that a call left to its return never finds the entry's
        // slot filled and its own empty.
        let first = u32::from(std::env::var_os(AT_RETURN_ONLY).is_some());
        for slot in (first..SLOTS).rev() {
            if let Err(e) = alloc.set_tail_call(WALKERS_MAP, slot, walker, PROGRAM) {
                log::warn!("call stacks are not walked: {e}");
                self.give_up(alloc, discovery);
                return None;
            }
        }
        log::debug!(
            "walker in place, its tables made in {:.1} ms",
            began.elapsed().as_secs_f64() * 1e3
        );
        Some(walker)
    }

    /// Whether the walker will never be in place (its load, tables or tail call failed): the
    /// recording then walked no stack at all.
    pub fn gave_up(&self) -> bool {
        self.given_up.get()
    }

    /// Once the walker will never be in place: discovery keeps no more files for its tables,
    /// and the allocator's sampled calls stop no process for it (they keep no stack, shown as
    /// such). Without this, `--stacks` stopped the process at every allocation, for nothing,
    /// when the walker failed to load: 175,625 stops of 30-50 µs for a `git log --stat`.
    fn give_up(&self, alloc: &LoadedObject, discovery: &mut Discovery<'_>) {
        discovery.set_tables_never();
        if self.given_up.replace(true) {
            return;
        }
        if let Err(e) = MapFd::of(alloc, FAILED_MAP).and_then(|map| map.update_u32(0, 1)) {
            log::warn!("each sampled call stops its process, for a walker that will not come: {e}");
        }
    }
}

/// The fault walk attached, after the kprobe that gives it addresses (without which the pages'
/// addresses are 0: unknown), then the walk of writes to inherited pages; none when they were
/// left out of the load (`--no-rss`).
fn fault_links(walker: &LoadedObject) -> Vec<Link<'_>> {
    let mut links = Vec::new();
    if !walker.has_loaded(FAULT_PROGRAM) {
        return links;
    }
    for prog in FAULT_ADDRESS_PROGRAMS {
        match walker.attach(prog) {
            Ok(link) => links.push(link),
            Err(e) => log::info!("the addresses of pages made resident are not known: {e}"),
        }
    }
    match walker.attach(FAULT_PROGRAM) {
        Ok(link) => links.push(link),
        Err(e) => log::warn!("the stacks of pages made resident are not walked: {e}"),
    }
    // Without it a forked child's writes to what it inherited stay "[inherited]".
    if walker.has_loaded(TOUCH_PROGRAM) {
        match walker.attach(TOUCH_PROGRAM) {
            Ok(link) => links.push(link),
            Err(e) => log::info!("writes to pages inherited at fork are not seen: {e}"),
        }
    }
    links
}

/// Whether `e` is the verifier refusing a global function's call with preemption off.
pub fn refuses_walk_preempt_off(e: &BpfError) -> bool {
    e.verifier
        .as_ref()
        .is_some_and(|v| v.log.contains("global function calls are not allowed"))
}
