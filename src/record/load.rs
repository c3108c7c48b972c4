//! Loading the BPF objects of `bpf/` and attaching their tracepoint programs, driven by one
//! table, [`OBJECTS`]: for each object its bytes, the maps it shares with the others (created
//! before any loads, from the first's definitions), its programs in attach order, the header feature it serves and when it is
//! enabled.
//!
//! The allocator object (alloc.bpf.o, or floor.bpf.o with `--probe-floor`) is loaded here too,
//! but its programs go on uprobes, file by file, as `discover` finds the files (`attach`).

use std::cell::{OnceCell, RefCell};
use std::thread::JoinHandle;

use crate::error::Error;
use crate::preflight::{rmap_hooks, Capabilities, UprobeLinks};
use crate::record::pidns::{self, PidNamespace};
use crate::record::stacks::{self, StackMode};
use crate::record::walker::{self, refuses_walk_preempt_off, Walker, WalkerSetup};
use crate::record::{attach, core_btf, discover, kernel_error, rmap, RecordOptions};
use crate::sys::bpf::{BpfError, CustomBtf, Link, LoadedObject, OpenObject, SharedMap};
use crate::sys::{raw, sched};

/// One object of `bpf/`.
pub struct Object {
    /// Its name, bpf/NAME.bpf.c's.
    pub name: &'static str,
    /// The ELF image build.rs compiled.
    bytes: &'static [u8],
    /// The maps it shares with other objects instead of creating its own (bpf_map__reuse_fd):
    /// created once, before the objects load, as the first object defines them.
    shares: &'static [&'static str],
    /// Its programs: attached here in this order, or left to `attach`.
    programs: Programs,
    /// The feature the header names for it, if it serves one of its own.
    feature: Option<&'static str>,
    /// When it is loaded.
    when: When,
}

impl Object {
    /// Whether programs of the object go on uprobes: the allocator's, and discover's loader
    /// hook (`_dl_debug_state`) and leak-scan hold (`_exit`).
    fn goes_on_uprobes(&self) -> bool {
        matches!(self.programs, Programs::Uprobes(_)) || self.name == "discover"
    }
}

/// How an object's programs are attached.
enum Programs {
    /// Where their sections say (tracepoints), in this order, once everything is loaded.
    Tracepoints(&'static [&'static str]),
    /// On the sites `attach` plans per file: uprobe_multi programs, loaded as classic uprobes
    /// on kernels without uprobe_multi links.
    Uprobes(&'static [&'static str]),
    /// fentry programs on the kernel's rmap functions, those `record::rmap` chose for this
    /// kernel (the others are left out of the load), attached where their sections say.
    Rmap,
}

/// When an object is enabled.
#[derive(Clone, Copy)]
enum When {
    Always,
    /// Resident memory is recorded (not `--no-rss`).
    Rss,
    /// rmap hooks are wanted (not `--no-rmap`, nor `--no-rss`).
    Rmap,
    /// Raw mappings are recorded (not `--no-mappings`).
    Mappings,
    /// The real allocator programs (not `--probe-floor`).
    Allocations,
    /// The empty programs of `--probe-floor`.
    ProbeFloor,
}

impl When {
    fn holds(self, opts: &RecordOptions, caps: &Capabilities) -> bool {
        match self {
            When::Always => true,
            When::Rss => opts.rss && caps.bpf_loop,
            When::Rmap => opts.rmap && opts.rss && caps.bpf_loop,
            When::Mappings => opts.mappings,
            When::Allocations => !opts.probe_floor,
            When::ProbeFloor => opts.probe_floor,
        }
    }
}

/// The maps of common.bpf.h every object but floor.bpf.o works on, and any more named.
macro_rules! shared {
    ($($more:literal),*) => {
        &["tracked", "events", "lost", "fault_pending", "inheriting" $(, $more)*]
    };
}

/// The maps of common.bpf.h every object but floor.bpf.o works on.
const SHARED: &[&str] = shared!();

/// SHARED, and the gate that `--control` opens and closes, which process.bpf.o and the
/// allocator programs read.
const SHARED_AND_GATE: &[&str] = shared!("gate");

/// Programs attached twice to the same tracepoint, the copy right after the first: the kernel
/// skips a run of a program on a CPU where a run of it is under way (preempted, on kernels that
/// run tracepoint programs preemptible), and the copy then runs in its place
/// (process.bpf.c's `sched_process_exit_again`: a lost exit would be lost for good, and the
/// `tracked` delete lets only one copy report; rss.bpf.c's `rss_exit_again`: a lost forget
/// would leave the process's last values for a later process of its tgid, and a second delete
/// is harmless). Only runs both copies skipped may lose events.
const DOUBLED: &[(&str, &str)] = &[
    ("sched_process_exit", "sched_process_exit_again"),
    ("rss_exit", "rss_exit_again"),
];

/// Programs that find what their skipped runs lost of the tree themselves and count it as lost
/// events (mmap.bpf.c's syscall programs, doubled too where [`COPIES_RODATA`] says, and their
/// thread exit: `skipped_mapping_call`).
/// Their tracepoints fire for every syscall of the machine and run preemptible on 7.2, where
/// sid's matrix saw 3 to 15 of their runs skipped per test, nearly all other processes' calls:
/// their own counts would call every such recording incomplete.
const COUNTED_IN_BAND: &[&str] = &[
    "mmap_sys_enter",
    "mmap_sys_enter_again",
    "mmap_sys_exit",
    "mmap_sys_exit_again",
    "mmap_thread_exit",
];

/// Of the programs' skipped runs (name, count), those that may have lost events not counted
/// otherwise: every skip of a program loaded once; of a program loaded twice ([`DOUBLED`]) only
/// runs both copies skipped, at most the smaller of the two counts; none of the programs that
/// count their losses themselves ([`COUNTED_IN_BAND`]).
fn missing_runs(counts: &[(String, u64)]) -> u64 {
    let count = |name: &str| counts.iter().find(|(n, _)| n == name).map(|c| c.1);
    let mut total = 0;
    for (name, n) in counts {
        if COUNTED_IN_BAND.contains(&name.as_str()) {
            continue;
        }
        let doubled = DOUBLED
            .iter()
            .find(|(first, again)| name == first || name == again);
        total += match doubled.map(|(first, again)| (name == first, count(again))) {
            // The first of a pair whose copy was loaded too.
            Some((true, Some(again))) => (*n).min(again),
            // The copy, counted with its first.
            Some((false, _)) => 0,
            _ => *n,
        };
    }
    total
}

/// Every object, in load and attach order. Where two attach to the same tracepoint, the order
/// is the order of their events: at exec, the Exec event (process) comes before the new image's
/// resident values (rss), and discovery's stop after both.
pub const OBJECTS: &[Object] = &[
    Object {
        name: "process",
        bytes: raw::PROCESS_BPF_OBJECT,
        shares: SHARED_AND_GATE,
        programs: Programs::Tracepoints(&[
            "sched_process_fork",
            "sched_process_exec",
            "sched_process_exit",
            "sched_process_exit_again",
        ]),
        feature: Some("lifecycle"),
        when: When::Always,
    },
    Object {
        name: "rss",
        bytes: raw::RSS_BPF_OBJECT,
        shares: SHARED,
        programs: Programs::Tracepoints(&[
            "rss_stat",
            "rss_fork",
            "rss_exec",
            "rss_exit",
            "rss_exit_again",
        ]),
        feature: Some("rss"),
        when: When::Rss,
    },
    Object {
        name: "rmap",
        bytes: raw::RMAP_BPF_OBJECT,
        shares: SHARED,
        programs: Programs::Rmap,
        feature: Some("rmap"),
        when: When::Rmap,
    },
    Object {
        name: "discover",
        bytes: raw::DISCOVER_BPF_OBJECT,
        shares: SHARED,
        programs: Programs::Tracepoints(&[discover::DISCOVER_EXEC]),
        feature: None,
        when: When::Always,
    },
    Object {
        name: "mmap",
        bytes: raw::MMAP_BPF_OBJECT,
        shares: SHARED,
        programs: Programs::Tracepoints(&[
            "mmap_sys_enter",
            "mmap_sys_enter_again",
            "mmap_sys_exit",
            "mmap_sys_exit_again",
            "mmap_thread_exit",
        ]),
        feature: Some("mappings"),
        when: When::Mappings,
    },
    Object {
        name: "alloc",
        bytes: raw::ALLOC_BPF_OBJECT,
        shares: SHARED_AND_GATE,
        programs: Programs::Uprobes(ALLOC_ENTRY_VARIANTS),
        feature: Some("alloc"),
        when: When::Allocations,
    },
    Object {
        name: "floor",
        bytes: raw::FLOOR_BPF_OBJECT,
        shares: &[],
        programs: Programs::Uprobes(FLOOR_PROGRAMS),
        feature: Some("probe_floor"),
        when: When::ProbeFloor,
    },
];

/// walk.bpf.c, the walker of call stacks: not in [`OBJECTS`], since nothing waits for its
/// load, which goes on beside the command's start (walker.rs); `doctor` loads it with the
/// others.
pub const WALK: Object = Object {
    name: "walk",
    bytes: raw::WALK_BPF_OBJECT,
    shares: SHARED,
    programs: Programs::Uprobes(&[crate::record::walker::PROGRAM]),
    feature: None,
    when: When::Always,
};

/// The programs of alloc.bpf.c, and of floor.bpf.c which stands in for it.
const FLOOR_PROGRAMS: &[&str] = &[attach::ALLOC_ENTER, attach::ALLOC_EXIT, attach::FREE_ENTER];

/// The programs of alloc.bpf.c: floor.bpf.c's, and the variants with stacks, of which `load`
/// keeps one entry and one return program per recording.
const ALLOC_ENTRY_VARIANTS: &[&str] = &[
    attach::ALLOC_ENTER,
    attach::ALLOC_ENTER_SAMPLED,
    attach::ALLOC_EXIT,
    attach::ALLOC_EXIT_SAMPLED,
    attach::FREE_ENTER,
];

/// The enabled objects in table order (the first is process.bpf.o), each loaded on a thread of
/// its own from [`Loaded::start`] until joined: the allocator's and discover's first
/// ([`Loaded::wait_probes`]), so that the uprobes on the C library and the loader are attached
/// while the others still load, then the rest ([`Loaded::wait_all`]). The first uprobe a
/// recording attaches waits for a kernel grace period (uprobes.c takes `dup_mmap_sem` for
/// writing, an RCU-synced lock idle since the last writer), 7-20 ms here, which now passes beside
/// the loads instead of after them (docs/PERFORMANCE.md, "Fixed cost").
pub struct Loaded {
    slots: Vec<Slot>,
    /// The CO-RE types the objects are relocated against: libbpf reads the file as each
    /// object loads, on its thread, after `start` has returned.
    core: Option<CustomBtf>,
    /// The rmap functions hooked, said at -v once rmap.bpf.o is loaded.
    rmap_functions: Vec<&'static str>,
    /// Why the rmap hooks were wanted and not loaded (the kernel refuses fentry, or has no
    /// rmap functions memtrack hooks): the one line `record` says with its closing lines.
    rmap_unavailable: OnceCell<String>,
    /// The walker of call stacks (walker.rs), loading beside alloc.bpf.o.
    pub walker: Walker,
}

/// One enabled object: loading, then loaded once joined.
struct Slot {
    object: &'static Object,
    loading: RefCell<Option<JoinHandle<Result<LoadedObject, BpfError>>>>,
    loaded: OnceCell<LoadedObject>,
}

/// mmap.bpf.c's read-only flag `copies_attached`: its copies ([`MMAP_COPIES`]) are loaded and
/// attached only where the syscall tracepoints run preemptible (each costs every syscall of the
/// machine one more program run: docs/PERFORMANCE.md).
const COPIES_RODATA: &str = ".rodata.copies";

/// rss.bpf.c's flag `faults_walked`: whether it hands the owner's increases to the fault walker.
const FAULTS_WALKED_RODATA: &str = ".rodata.faults_walked";

/// mmap.bpf.c's copies, loaded with [`COPIES_RODATA`].
const MMAP_COPIES: [&str; 2] = ["mmap_sys_enter_again", "mmap_sys_exit_again"];

/// The maps the enabled objects share, created from the first's definitions (common.bpf.h's:
/// every object has them), the ring buffer sized as `opts` says. Created before any object
/// loads, they let every object load at once.
fn create_shared(
    enabled: &[&'static Object],
    opts: &RecordOptions,
) -> Result<Vec<SharedMap>, Error> {
    let mut names: Vec<&str> = enabled
        .iter()
        .flat_map(|o| o.shares.iter().copied())
        .collect();
    names.sort_unstable();
    names.dedup();
    let Some(first) = enabled.first().filter(|_| !names.is_empty()) else {
        return Ok(Vec::new());
    };
    let mut definitions = OpenObject::open(first.name, first.bytes).map_err(kernel_error)?;
    definitions
        .set_max_entries("events", opts.ring_size_bytes as u32)
        .map_err(kernel_error)?;
    log::info!("ring buffer: {} MiB", opts.ring_size_bytes >> 20);
    names
        .iter()
        .map(|name| definitions.create_map(name).map_err(kernel_error))
        .collect()
}

/// Use the maps of `shared` that `object` shares.
fn reuse_shared(
    open: &mut OpenObject,
    object: &Object,
    shared: &[SharedMap],
) -> Result<(), BpfError> {
    for map in shared.iter().filter(|m| object.shares.contains(&m.name())) {
        open.reuse_map(map)?;
    }
    Ok(())
}

/// Open `object` and set it up as `opts` and `caps` say, with the maps of `shared` it shares
/// and its CO-RE types from `core`.
#[allow(clippy::too_many_arguments)]
fn configure(
    object: &'static Object,
    shared: &[SharedMap],
    core: Option<&CustomBtf>,
    opts: &RecordOptions,
    caps: &Capabilities,
    pidns: &PidNamespace,
) -> Result<OpenObject, Error> {
    let mut open = OpenObject::open_with(object.name, object.bytes, core).map_err(kernel_error)?;
    // The namespace whose pids the records carry (pidns.rs); floor.bpf.o has none.
    open.set_rodata(pidns::RODATA_SECTION, &pidns.rodata())
        .map_err(kernel_error)?;
    reuse_shared(&mut open, object, shared).map_err(kernel_error)?;
    if object.name == "alloc" {
        // One entry and one return program of the variants (attach::programs_for).
        let wanted = attach::programs_for(opts.stacks);
        for prog in ALLOC_ENTRY_VARIANTS
            .iter()
            .filter(|p| **p != attach::FREE_ENTER)
        {
            open.set_autoload(prog, wanted.contains(prog))
                .map_err(kernel_error)?;
        }
        // With `--stacks` the mean stays 0: every call goes to the walker.
        if let StackMode::Sampled(sample) = opts.stacks {
            open.set_rodata(walker::SAMPLE_RODATA, &sample.mean_bytes.to_ne_bytes())
                .map_err(kernel_error)?;
        }
    }
    if object.name == "rss" && !opts.stacks.walks() {
        // No fault walker will take the increases rss_stat would hand over.
        open.set_rodata(FAULTS_WALKED_RODATA, &[0])
            .map_err(kernel_error)?;
    }
    if object.name == "mmap" && !caps.preemptible_syscall_tracepoints {
        for copy in MMAP_COPIES {
            open.set_autoload(copy, false).map_err(kernel_error)?;
        }
        open.set_rodata(COPIES_RODATA, &[0]).map_err(kernel_error)?;
    }
    if let (Programs::Uprobes(programs), UprobeLinks::Classic(why)) =
        (&object.programs, &caps.uprobes)
    {
        log::info!("uprobe_multi unavailable ({why}); attaching one uprobe per site");
        for prog in *programs {
            open.use_classic_uprobe(prog).map_err(kernel_error)?;
        }
    }
    Ok(open)
}

impl Loaded {
    /// Start loading every object `opts` enables on a kernel with `caps`, the ring buffer
    /// (process.bpf.c's `events`) sized as `opts` says, the allocator programs as
    /// `caps.uprobes` says, and the pids of records in `pidns`; each loads on a thread of its
    /// own, which the `wait_` methods join.
    pub fn start(
        opts: &RecordOptions,
        caps: &Capabilities,
        pidns: &PidNamespace,
    ) -> Result<Loaded, Error> {
        if opts.rss && !caps.bpf_loop {
            log::warn!(
                "resident memory is not recorded: this kernel lacks the bpf_loop helper (Linux \
                 5.17), which summing the per-CPU rss counters needs"
            );
        }
        let enabled: Vec<&'static Object> = OBJECTS
            .iter()
            .filter(|o| o.when.holds(opts, caps))
            .collect();
        // The ring buffer's pages are cleared (some 3 ms for 16 MiB) while the CO-RE types are
        // cut.
        let kernel = caps.kernel_btf.as_ref().map(|k| k.bytes());
        // The walker loads beside them (walker.rs), against the same CO-RE types.
        let walks = opts.stacks.walks() && !opts.probe_floor;
        let relocated = enabled.iter().chain(walks.then_some(&&WALK));
        let (shared, core) = std::thread::scope(|scope| {
            let core = scope.spawn(|| {
                core_btf::custom(&relocated.map(|o| o.bytes).collect::<Vec<_>>(), kernel)
            });
            let shared = create_shared(&enabled, opts);
            (shared, core.join().expect("the CO-RE cut panicked"))
        });
        let shared = shared?;
        let mut loaded = Loaded {
            slots: Vec::with_capacity(enabled.len()),
            core,
            rmap_functions: Vec::new(),
            rmap_unavailable: OnceCell::new(),
            walker: Walker::default(),
        };
        // rmap.bpf.o is optional: where the kernel has no hooks for it or refuses fentry, the
        // recording goes on with rss_stat alone and says so once, at its end.
        let mut opened = Vec::with_capacity(enabled.len());
        for &object in &enabled {
            let (shared, core) = (&shared, loaded.core.as_ref());
            if !matches!(object.programs, Programs::Rmap) {
                let open = configure(object, shared, core, opts, caps, pidns)?;
                opened.push((object, open));
                continue;
            }
            let configured = (caps.rmap.as_deref())
                .map_err(String::clone)
                .and_then(|hooks| rmap_configure(object, hooks, shared, core, pidns));
            match configured {
                Ok((open, functions)) => {
                    loaded.rmap_functions = functions;
                    opened.push((object, open));
                }
                Err(why) => {
                    let _ = loaded.rmap_unavailable.set(rmap::unavailable_line(&why));
                }
            }
        }
        // With their shared maps made, the objects load side by side: each load parses the
        // kernel's BTF and runs the verifier, most of a recording's fixed cost. The uprobes'
        // objects come first: the others load at the lowest priority, so that the probes' grace
        // period passes while they load rather than after.
        // The walker of call stacks shares the allocator's call_state, made first (the
        // allocator's maps alone) so that the two objects verify side by side.
        let (to_walker, for_walker) = std::sync::mpsc::sync_channel(1);
        for (object, mut open) in opened {
            let waits = !object.goes_on_uprobes();
            let to_walker = (walks && object.name == "alloc").then(|| to_walker.clone());
            let load = move || {
                if waits {
                    if let Err(e) = sched::set_thread_priority(sched::Priority::Nice(19)) {
                        log::debug!("{}.bpf.o loads at the normal priority: {e}", object.name);
                    }
                }
                let began = std::time::Instant::now();
                if let Some(to_walker) = to_walker {
                    // The walker may have failed to start: the allocator goes on all the same.
                    match open.prepare_and_share(walker::FROM_ALLOCATOR) {
                        Ok(maps) => drop(to_walker.send(Ok(maps))),
                        Err(e) => {
                            let _ = to_walker.send(Err(BpfError::new(e.what.clone(), e.errno)));
                            return Err(e);
                        }
                    }
                }
                let loaded = open.load();
                let what = format!("{}.bpf.o", object.name);
                crate::record::log_load(&what, began, loaded.as_ref().ok());
                loaded
            };
            let thread = std::thread::Builder::new()
                .name(format!("load {}", object.name))
                .spawn(load)
                .map_err(|e| Error::Internal(format!("cannot start a thread: {e}")))?;
            loaded.slots.push(Slot {
                object,
                loading: RefCell::new(Some(thread)),
                loaded: OnceCell::new(),
            });
        }
        if walks {
            loaded.walker.start(WalkerSetup {
                from_allocator: for_walker,
                shared: &shared,
                core: loaded.core.as_ref(),
                classic: matches!(caps.uprobes, UprobeLinks::Classic(_)),
                pidns_rodata: pidns.rodata(),
                sample_mean: match opts.stacks {
                    StackMode::Sampled(sample) => sample.mean_bytes,
                    _ => 0,
                },
                faults: enabled.iter().any(|o| o.name == "rss"),
                touches: caps.touches.is_ok(),
            })?;
        }
        Ok(loaded)
    }

    /// Wait for the objects whose programs go on uprobes: the allocator's and discover's.
    pub fn wait_probes(&self) -> Result<(), Error> {
        for slot in self.slots.iter().filter(|s| s.object.goes_on_uprobes()) {
            self.join(slot)?;
        }
        Ok(())
    }

    /// Wait for every object.
    pub fn wait_all(&self) -> Result<(), Error> {
        for slot in &self.slots {
            self.join(slot)?;
        }
        Ok(())
    }

    /// Join `slot`'s load, unless joined already: a refused rmap.bpf.o is left out (and said).
    fn join(&self, slot: &Slot) -> Result<(), Error> {
        let Some(thread) = slot.loading.borrow_mut().take() else {
            return Ok(());
        };
        let object = slot.object;
        let result = thread.join().expect("a BPF object's load panicked");
        let result = match result {
            Err(e) if matches!(object.programs, Programs::Rmap) => {
                let _ = (self.rmap_unavailable).set(rmap::unavailable_line(&rmap_refusal(&e)));
                return Ok(());
            }
            Ok(_) if matches!(object.programs, Programs::Rmap) => {
                log::info!("rmap hooks: fentry on {}", self.rmap_functions.join(", "));
                result
            }
            other => other,
        };
        let _ = slot.loaded.set(result.map_err(kernel_error)?);
        Ok(())
    }

    /// The joined objects in table order, with their table rows.
    fn joined(&self) -> impl Iterator<Item = (&'static Object, &LoadedObject)> {
        (self.slots.iter()).filter_map(|s| s.loaded.get().map(|loaded| (s.object, loaded)))
    }

    /// Why the rmap hooks were wanted and not loaded, once every object is joined.
    pub fn rmap_unavailable(&self) -> Option<&String> {
        self.rmap_unavailable.get()
    }

    /// Load (and unload) each object `record` could load on a kernel with `caps`, each on its
    /// own, stacks included, as `doctor` shows them: its name, what it serves, and whether the
    /// kernel took it (or what it said). Nothing is attached.
    pub fn try_each(caps: &Capabilities) -> Vec<(&'static str, Result<(), String>)> {
        let tried: Vec<&'static Object> = OBJECTS
            .iter()
            .filter(|o| o.name != "floor")
            // Optional, and shown by preflight's `fentry` row instead: a kernel that refuses
            // fentry records all the same.
            .filter(|o| o.name != "rmap")
            .chain(std::iter::once(&WALK))
            .collect();
        let core = core_btf::custom(
            &tried.iter().map(|o| o.bytes).collect::<Vec<_>>(),
            caps.kernel_btf.as_ref().map(|k| k.bytes()),
        );
        tried
            .into_iter()
            .map(|object| {
                let try_load = |preempt_off: bool| {
                    OpenObject::open_with(object.name, object.bytes, core.as_ref()).and_then(
                        |mut open| {
                            open.set_max_entries("events", 1 << 20)?;
                            if !preempt_off {
                                open.set_rodata(walker::WALK_RODATA, &[0])?;
                            }
                            // The default's sampled walk, which a mean of 0 leaves out.
                            let mean = stacks::DEFAULT_SAMPLE_BYTES;
                            open.set_rodata(walker::SAMPLE_RODATA, &mean.to_ne_bytes())?;
                            // As the walker's own load: only where fentry loads on do_wp_page.
                            if object.name == WALK.name && caps.touches.is_err() {
                                open.set_autoload(walker::TOUCH_PROGRAM, false)?;
                            }
                            if let (Programs::Uprobes(programs), UprobeLinks::Classic(_)) =
                                (&object.programs, &caps.uprobes)
                            {
                                for prog in *programs {
                                    open.use_classic_uprobe(prog)?;
                                }
                            }
                            open.load()
                        },
                    )
                };
                // As `load` does: where the verifier refuses the walk with preemption off.
                let result = match try_load(true) {
                    Err(e) if refuses_walk_preempt_off(&e) => try_load(false),
                    other => other,
                }
                .map(drop)
                .map_err(|e| match &e.verifier {
                    Some(log) => crate::record::verifier_refusal(&e.what, log),
                    None => e.to_string(),
                });
                (object.name, result)
            })
            .collect()
    }

    /// Attach every tracepoint program, in table order; dropping the links detaches them. The
    /// rmap hooks attach all or none: preflight only loaded an fentry program (`Attach`), so a
    /// kernel that refuses the attach leaves them out here, and says so, as a refused load.
    pub fn attach(&self) -> Result<Vec<Link<'_>>, Error> {
        let mut links = Vec::new();
        for (object, loaded) in self.joined() {
            if let Programs::Tracepoints(programs) = object.programs {
                for prog in programs.iter().filter(|p| loaded.has_loaded(p)) {
                    links.push(loaded.attach(prog).map_err(kernel_error)?);
                }
            }
            if let Programs::Rmap = object.programs {
                let hooks: Result<Vec<Link>, BpfError> = rmap_hooks::all_programs()
                    .filter(|p| loaded.has_loaded(p))
                    .map(|prog| loaded.attach(prog))
                    .collect();
                match hooks {
                    Ok(hooks) => links.extend(hooks),
                    Err(e) => {
                        let why = rmap::unavailable_line(&rmap_refusal(&e));
                        let _ = self.rmap_unavailable.set(why);
                    }
                }
            }
        }
        Ok(links)
    }

    /// The features the attached objects serve, for the header, in table order.
    pub fn features(&self) -> Vec<String> {
        self.joined()
            .filter(|(object, _)| {
                !matches!(object.programs, Programs::Rmap) || self.rmap_unavailable.get().is_none()
            })
            .filter_map(|(object, _)| object.feature.map(str::to_string))
            .collect()
    }

    /// How many runs of the loaded programs the kernel skipped so far
    /// ([`LoadedObject::skipped_runs`]) that may have lost events ([`missing_runs`]), and each
    /// program's own count of skips ("mmap_sys_enter 3, mmap_sys_enter_again 0"), empty when
    /// none was skipped.
    pub fn skipped_runs(&self) -> (u64, String) {
        let counts: Vec<(String, u64)> = (self.joined())
            .flat_map(|(_, o)| o.skipped_runs())
            .collect();
        let skipped: Vec<String> = (counts.iter())
            .filter(|(_, n)| *n > 0)
            .map(|(name, n)| format!("{name} {n}"))
            .collect();
        (missing_runs(&counts), skipped.join(", "))
    }

    /// process.bpf.o, which owns the maps (the ring buffer, `tracked`, `lost`, `gate`).
    pub fn process(&self) -> &LoadedObject {
        self.slots[0].loaded.get().expect("process.bpf.o is joined")
    }

    /// discover.bpf.o, whose programs stop a process at exec and at dlopen (`discover`).
    pub fn discover(&self) -> &LoadedObject {
        self.joined()
            .find(|(object, _)| object.name == "discover")
            .map(|(_, loaded)| loaded)
            .expect("the table enables discover.bpf.o in every mode, joined first")
    }

    /// The object whose programs `attach` puts on allocator sites (alloc, or floor).
    pub fn allocator(&self) -> &LoadedObject {
        self.joined()
            .find(|(object, _)| matches!(object.programs, Programs::Uprobes(_)))
            .map(|(_, loaded)| loaded)
            .expect("the table enables one allocator object in every mode, joined first")
    }
}

impl Drop for Loaded {
    /// A recording that fails before every load is joined still waits for them: no object is
    /// left loading on a thread of its own while the error is said and memtrack exits.
    fn drop(&mut self) {
        for slot in &mut self.slots {
            if let Some(thread) = slot.loading.get_mut().take() {
                let _ = thread.join();
            }
        }
    }
}

/// rmap.bpf.o opened with `hooks`' programs, those preflight found for this kernel (their
/// functions' names beside it), with the maps of `shared` it shares; or why it cannot be had
/// here, in words.
fn rmap_configure(
    object: &Object,
    hooks: &[&'static rmap_hooks::Hook],
    shared: &[SharedMap],
    core: Option<&CustomBtf>,
    pidns: &PidNamespace,
) -> Result<(OpenObject, Vec<&'static str>), String> {
    let mut open =
        OpenObject::open_with(object.name, object.bytes, core).map_err(|e| e.to_string())?;
    open.set_rodata(pidns::RODATA_SECTION, &pidns.rodata())
        .map_err(|e| e.to_string())?;
    reuse_shared(&mut open, object, shared).map_err(|e| e.to_string())?;
    rmap_autoload(&mut open, hooks)?;
    Ok((open, hooks.iter().map(|h| h.function).collect()))
}

/// Leave out every program of rmap.bpf.c but `hooks`.
fn rmap_autoload(open: &mut OpenObject, hooks: &[&rmap_hooks::Hook]) -> Result<(), String> {
    for prog in rmap_hooks::all_programs() {
        let on = hooks.iter().any(|h| h.program == prog);
        open.set_autoload(prog, on).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// What the kernel said when it refused rmap.bpf.o: "fentry refused: ...".
fn rmap_refusal(e: &BpfError) -> String {
    match &e.verifier {
        Some(log) => crate::record::verifier_refusal(&e.what, log),
        None if e.errno == libc::EPERM || e.errno == libc::EACCES => {
            format!("the kernel refuses fentry programs: {e}")
        }
        None => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_comes_first_and_shares_every_shared_map() {
        // create_shared makes the shared maps from the first enabled object's definitions.
        assert_eq!(OBJECTS[0].name, "process");
        assert!(matches!(OBJECTS[0].when, When::Always));
        for object in OBJECTS {
            for map in object.shares {
                assert!(OBJECTS[0].shares.contains(map), "{map} of {}", object.name);
            }
        }
    }

    #[test]
    fn a_doubled_program_is_attached_right_after_its_first() {
        let mmap_pairs = MMAP_COPIES.map(|again| (again.trim_end_matches("_again"), again));
        for (first, again) in DOUBLED.iter().chain(&mmap_pairs) {
            let attached_after = OBJECTS.iter().any(|o| match o.programs {
                Programs::Tracepoints(p) => p.windows(2).any(|w| w == [*first, *again]),
                _ => false,
            });
            assert!(attached_after, "{again} right after {first}");
        }
    }

    #[test]
    fn only_runs_both_copies_skipped_count_as_missing() {
        let counts = |c: &[(&str, u64)]| -> Vec<(String, u64)> {
            c.iter().map(|(n, k)| (n.to_string(), *k)).collect()
        };
        // The first copy skipped, the second ran in its place.
        let covered = counts(&[("sched_process_exit", 3), ("sched_process_exit_again", 0)]);
        assert_eq!(missing_runs(&covered), 0);
        let both = counts(&[("sched_process_exit", 1), ("sched_process_exit_again", 4)]);
        assert_eq!(missing_runs(&both), 1);
        // A program loaded once loses every run it skipped, a first whose copy is not loaded
        // too.
        let once = counts(&[
            ("rss_stat", 5),
            ("sched_process_fork", 1),
            ("sched_process_exit", 7),
        ]);
        assert_eq!(missing_runs(&once), 13);
        // sid's matrix: the syscall programs count the tree's losses in the ring's `lost`.
        let in_band = counts(&[
            ("mmap_sys_enter", 2),
            ("mmap_sys_exit", 3),
            ("mmap_sys_exit_again", 3),
            ("rss_fork", 1),
        ]);
        assert_eq!(missing_runs(&in_band), 1);
    }

    #[test]
    fn programs_counted_in_band_are_loaded() {
        let loaded: Vec<&str> = (OBJECTS.iter())
            .flat_map(|o| match o.programs {
                Programs::Tracepoints(p) => p.to_vec(),
                _ => Vec::new(),
            })
            .collect();
        for program in COUNTED_IN_BAND {
            assert!(loaded.contains(program), "{program}");
        }
    }

    #[test]
    fn one_allocator_object_in_either_mode() {
        for floor in [false, true] {
            let uprobe_objects = OBJECTS
                .iter()
                .filter(|o| matches!(o.programs, Programs::Uprobes(_)))
                .filter(|o| match o.when {
                    When::Allocations => !floor,
                    When::ProbeFloor => floor,
                    _ => true,
                })
                .count();
            assert_eq!(uprobe_objects, 1, "probe floor {floor}");
        }
    }

    #[test]
    fn features_keep_the_order_the_header_always_had() {
        let features: Vec<&str> = OBJECTS.iter().filter_map(|o| o.feature).collect();
        assert_eq!(
            features,
            [
                "lifecycle",
                "rss",
                "rmap",
                "mappings",
                "alloc",
                "probe_floor"
            ]
        );
    }
}
