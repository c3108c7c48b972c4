//! What recording needs from the machine, and what this machine has: one list of checks that
//! `memtrack doctor` prints as a table and `record` runs before it loads anything, failing with
//! the very line `doctor` prints for the first required check that is missing.
//!
//! The kernel is asked, not guessed at: each BPF check creates a map or loads a two-instruction
//! program of the kind memtrack uses and attaches it where memtrack's own programs go
//! (`sys::probe`), so a container's seccomp filter or a locked-down kernel shows up here.

use std::path::Path;

use crate::binary::symbols::ElfSymbols;
use crate::binary::{self, catalogue};
use crate::error::Error;
use crate::sys::bpf::BpfError;
use crate::sys::{probe, process};

/// Linux capability numbers (linux/capability.h).
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// Where the kernel exposes its own BTF, which CO-RE relocation and tp_btf programs need.
pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";
/// The kernel function the `fentry` row tries when the kernel's BTF has no rmap functions
/// memtrack hooks (record::rmap chooses them otherwise): where fentry is refused, the rmap
/// hooks (bpf/rmap.bpf.c) are not loaded and resident memory comes from rss_stat alone.
const RMAP_FUNCTION: &str = "folio_add_new_anon_rmap";
/// Where tracefs is mounted when it is.
const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];
/// The perf PMU classic uprobes are created through (CONFIG_UPROBE_EVENTS).
const UPROBE_PMU: &str = "/sys/bus/event_source/devices/uprobe/type";

/// The outcome of one check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// The machine has it.
    Ok,
    /// The machine lacks it (or refuses it).
    Missing,
    /// Not checked, because something it depends on is missing (BPF checks without privileges).
    Unknown,
}

impl Status {
    /// The word the table shows.
    pub fn word(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Missing => "missing",
            Status::Unknown => "unknown",
        }
    }
}

/// One line of `memtrack doctor`: a thing recording needs, and what this machine has.
#[derive(Clone, Debug)]
pub struct Check {
    /// What is checked, e.g. "ring buffer".
    pub name: &'static str,
    /// Whether `record` cannot work without it.
    pub required: bool,
    /// What the check found.
    pub status: Status,
    /// What this machine has, or why it is missing.
    pub found: String,
    /// What a missing item disables.
    pub disables: &'static str,
    /// What to do about it when missing (empty when there is nothing to do).
    pub fix: String,
}

impl Check {
    fn ok(name: &'static str, required: bool, found: String, disables: &'static str) -> Check {
        Check {
            name,
            required,
            status: Status::Ok,
            found,
            disables,
            fix: String::new(),
        }
    }

    fn missing(
        name: &'static str,
        required: bool,
        found: String,
        disables: &'static str,
        fix: impl Into<String>,
    ) -> Check {
        Check {
            name,
            required,
            status: Status::Missing,
            found,
            disables,
            fix: fix.into(),
        }
    }

    /// Whether this check stops `record`.
    pub fn blocks_recording(&self) -> bool {
        self.required && self.status != Status::Ok
    }

    /// The one line `record` fails with, and `doctor` prints under its table, when this check
    /// is not ok: what is missing and what to do.
    pub fn problem(&self) -> String {
        if self.fix.is_empty() {
            format!("{}: {}", self.name, self.found)
        } else {
            format!("{}: {}; {}", self.name, self.found, self.fix)
        }
    }

    /// The error `record` returns for this check.
    pub fn to_error(&self) -> Error {
        let line = format!("{} (`memtrack doctor` lists every check)", self.problem());
        if self.name == "privileges" {
            Error::Privilege(line)
        } else {
            Error::Kernel(line)
        }
    }
}

/// Run every check, in the order `doctor` shows them; with the kernel's BTF as read for them.
pub fn run() -> (Vec<Check>, KernelFacts) {
    run_checks(true)
}

/// What the checks learned of the kernel that `record` uses beyond pass or fail
/// ([`capabilities`]).
#[derive(Debug)]
pub struct KernelFacts {
    /// The rmap hooks, or why there are none.
    pub rmap: RmapHooks,
    /// The kernel's BTF, where the checks could read it.
    pub btf: Option<KernelBtf>,
    /// Whether the syscall tracepoints run their programs preemptible (the kernel's BTF has
    /// `tracepoint_ext.faultable`, Linux 6.13): a run of a program there can be preempted, and
    /// the kernel then skips that program's runs on the CPU until it resumes.
    pub preemptible_syscall_tracepoints: bool,
}

/// The running kernel's BTF as the checks parsed it (libbpf maps /sys/kernel/btf/vmlinux,
/// about 5 MiB): `record` cuts its CO-RE types from its bytes (record/core_btf.rs) instead of
/// reading them again, and without a copy (one cost 2 ms of page faults).
#[derive(Clone)]
pub struct KernelBtf(std::rc::Rc<probe::VmlinuxBtf>);

impl KernelBtf {
    /// The raw BTF, as the kernel gives it.
    pub fn bytes(&self) -> &[u8] {
        self.0.raw_bytes()
    }
}

impl std::fmt::Debug for KernelBtf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KernelBtf({} bytes)", self.bytes().len())
    }
}

impl PartialEq for KernelBtf {
    fn eq(&self, other: &KernelBtf) -> bool {
        self.bytes() == other.bytes()
    }
}

impl Eq for KernelBtf {}

/// The rmap hooks `record` would load here (the programs `record::rmap::choose` picks from the
/// kernel's BTF, fentry attaching to the first of them), or why there are none, in words:
/// found by the `fentry` check, so that `record` neither parses the kernel's BTF again nor
/// loads rmap.bpf.o where the kernel refuses fentry.
pub type RmapHooks = Result<Vec<&'static crate::record::rmap::Hook>, String>;

/// What `record` uses of this machine, decided here once so that `record` never asks again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// How the allocator probes attach.
    pub uprobes: UprobeLinks,
    /// Whether the `bpf_loop` helper exists (Linux 5.17), which summing the per-CPU parts of
    /// the resident-memory counters needs: without it, no resident memory is recorded.
    pub bpf_loop: bool,
    /// The rmap hooks, or why there are none.
    pub rmap: RmapHooks,
    /// The kernel's BTF, where the checks could read it.
    pub kernel_btf: Option<KernelBtf>,
    /// [`KernelFacts::preemptible_syscall_tracepoints`]: mmap.bpf.c's syscall programs are
    /// attached twice there (record/load.rs, `DOUBLED`).
    pub preemptible_syscall_tracepoints: bool,
}

/// A kernel feature memtrack finds by probing the running kernel (its BTF, a helper, a program
/// load or a link), never by its version: the first mainline kernel that has it, and what
/// memtrack does on a kernel without it. `doctor` prints a row for each; the README's "Kernels"
/// table is checked against this list (a unit test below).
pub struct KernelFeature {
    /// What is probed.
    pub name: &'static str,
    /// The first mainline release that has it.
    pub first: &'static str,
    /// What memtrack does without it.
    pub without: &'static str,
}

/// Every kernel feature memtrack adapts to, oldest first.
pub const KERNEL_FEATURES: &[KernelFeature] = &[
    KernelFeature {
        name: "bpf_get_attach_cookie",
        first: "5.15",
        without: "refuses to record: every allocator probe reads its cookie",
    },
    KernelFeature {
        name: "bpf_loop",
        first: "5.17",
        without: "records no resident memory (summing the per-CPU rss counters needs it)",
    },
    KernelFeature {
        name: "rmap functions",
        first: "6.1",
        without: "resident memory from rss_stat alone: no rmap accounting (also where fentry \
                  is refused; 6.2-6.7 mix two generations and get none)",
    },
    KernelFeature {
        name: "rss_stat per-CPU counters",
        first: "6.2",
        without: "reads the older atomic counters, exact as /proc shows them",
    },
    KernelFeature {
        name: "mm_lock_seq",
        first: "6.4",
        without: "stack walks look up every frame's mapping again (slower --stacks)",
    },
    KernelFeature {
        name: "uprobe_multi links",
        first: "6.6",
        without: "attaches one perf uprobe per probe site (slower start)",
    },
    KernelFeature {
        name: "task VMA iterator",
        first: "6.7",
        without: "discovery stops a process at every dynamic-loader event, known files or not",
    },
    KernelFeature {
        name: "bpf_preempt_disable",
        first: "6.10",
        without: "probe programs may be preempted (no per-CPU program stack to share before 6.13)",
    },
    KernelFeature {
        name: "faultable syscall tracepoints",
        first: "6.13",
        without: "attaches the mapping calls' syscall programs once: their runs are not \
                  preempted, so none is skipped",
    },
    KernelFeature {
        name: "open_tree of a detached mount",
        first: "6.15",
        without: "no private library copies: probes on the shared files, with a warning",
    },
    KernelFeature {
        name: "sched_process_exit group_dead",
        first: "6.16",
        without: "finds the last thread of a process from signal->live instead (nothing lost)",
    },
];

/// What probing found of one [`KernelFeature`]: whether the kernel has it, and in what form.
pub struct FeatureProbe {
    /// The feature.
    pub feature: &'static KernelFeature,
    /// Whether this kernel has it; None when it could not be asked.
    pub present: Option<bool>,
    /// What was found, in words.
    pub found: String,
}

/// Probe every [`KERNEL_FEATURES`] entry; `vmlinux` is the kernel's BTF, when it could be read.
/// `private_mounts` says whether the private-library namespace works here (doctor's own check).
/// Without the privileges to load a program (`privileged`), what needs one is not asked: a
/// refusal would say nothing of the kernel.
pub fn kernel_features(
    vmlinux: Option<&probe::VmlinuxBtf>,
    private_mounts: Option<Result<(), String>>,
    privileged: bool,
) -> Vec<FeatureProbe> {
    use libbpf_sys as sys;
    let unasked = || (None, "not checked without the privileges above".to_string());
    KERNEL_FEATURES
        .iter()
        .map(|feature| {
            let (present, found) = match feature.name {
                "bpf_get_attach_cookie" | "bpf_loop" | "uprobe_multi links" if !privileged => {
                    unasked()
                }
                "bpf_get_attach_cookie" => helper_found(sys::BPF_FUNC_get_attach_cookie),
                "bpf_loop" => helper_found(sys::BPF_FUNC_loop),
                "rss_stat per-CPU counters" => {
                    match vmlinux.map(|b| b.member_kind("mm_struct", "rss_stat")) {
                        None => (None, "no BTF to read".into()),
                        Some(Some(sys::BTF_KIND_ARRAY)) => {
                            (Some(true), "mm_struct.rss_stat is percpu_counter[]".into())
                        }
                        Some(Some(_)) => (Some(false), "struct mm_rss_stat of atomics".into()),
                        Some(None) => (Some(false), "mm_struct has no rss_stat".into()),
                    }
                }
                "rmap functions" => match vmlinux {
                    None => (None, "no BTF to read".into()),
                    Some(b) => {
                        match crate::record::rmap::choose(|f| b.has(f, sys::BTF_KIND_FUNC)) {
                            Ok(hooks) => (
                                Some(true),
                                format!(
                                    "{} of {}",
                                    hooks.len(),
                                    crate::record::rmap::kernels_of(hooks[0])
                                ),
                            ),
                            Err(_) => (Some(false), "neither set memtrack hooks".into()),
                        }
                    }
                },
                "mm_lock_seq" => match vmlinux.map(|b| b.member_kind("mm_struct", "mm_lock_seq")) {
                    None => (None, "no BTF to read".into()),
                    Some(Some(sys::BTF_KIND_STRUCT)) => (Some(true), "a seqcount (6.14+)".into()),
                    Some(Some(_)) => (Some(true), "a plain counter (6.4-6.13)".into()),
                    Some(None) => (Some(false), "mm_struct has no mm_lock_seq".into()),
                },
                "uprobe_multi links" => match probe::uprobe_multi_links() {
                    Ok(()) => (Some(true), "BPF_TRACE_UPROBE_MULTI links".into()),
                    Err(e) => (Some(false), refusal(&e)),
                },
                "task VMA iterator" => kfunc_found(vmlinux, "bpf_iter_task_vma_new"),
                // Kept on for every uprobe program's run: a preempted program on 6.13+'s
                // per-CPU private stack shares it with the next (bpf/common.bpf.h).
                "bpf_preempt_disable" => kfunc_found(vmlinux, "bpf_preempt_disable"),
                "faultable syscall tracepoints" => match vmlinux {
                    None => (None, "no BTF to read".into()),
                    Some(b) if faultable_syscalls(b) => (
                        Some(true),
                        "tracepoint_ext.faultable: mapping-call programs attached twice".into(),
                    ),
                    Some(_) => (Some(false), "no tracepoint_ext.faultable".into()),
                },
                "open_tree of a detached mount" => match &private_mounts {
                    None => (None, "not tried".into()),
                    Some(Ok(())) => (Some(true), "private copies bind in a namespace".into()),
                    Some(Err(why)) => (Some(false), why.clone()),
                },
                _ => match vmlinux.and_then(|b| b.tracepoint_arity("sched_process_exit")) {
                    None => (None, "no BTF prototype of sched_process_exit".into()),
                    Some(n) => (
                        Some(n >= 2),
                        format!("the tracepoint takes {n} argument(s)"),
                    ),
                },
            };
            FeatureProbe {
                feature,
                present,
                found,
            }
        })
        .collect()
}

/// Whether the kernel's syscall tracepoints may fault, and so run their programs preemptible.
fn faultable_syscalls(vmlinux: &probe::VmlinuxBtf) -> bool {
    vmlinux.member_kind("tracepoint_ext", "faultable").is_some()
}

/// Whether the kernel's BTF names the kfunc `name`.
fn kfunc_found(vmlinux: Option<&probe::VmlinuxBtf>, name: &str) -> (Option<bool>, String) {
    match vmlinux {
        None => (None, "no BTF to read".into()),
        Some(b) => {
            let has = b.has(name, libbpf_sys::BTF_KIND_FUNC);
            let what = if has { "kfunc" } else { "no kfunc" };
            (Some(has), format!("{what} {name}"))
        }
    }
}

fn helper_found(helper: libbpf_sys::bpf_func_id) -> (Option<bool>, String) {
    match probe::helper(libbpf_sys::BPF_PROG_TYPE_KPROBE, helper) {
        Ok(true) => (Some(true), "the helper loads in a uprobe program".into()),
        Ok(false) => (Some(false), "the verifier does not know the helper".into()),
        Err(e) => (None, refusal(&e)),
    }
}

/// How allocator probes attach on this kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UprobeLinks {
    /// uprobe_multi links (Linux 6.6+): all sites of a file attach, and detach, at once.
    Multi,
    /// One classic perf-event uprobe per site, from a load of the same programs as plain
    /// uprobes; with why uprobe_multi is not there.
    Classic(String),
}

/// The checks `record` runs before it loads anything, failing with the first blocking one's
/// line ([`require`]); then what `record` uses. The same checks as [`run`], except that the
/// uprobe check only loads a uprobe program instead of also attaching one: detaching a uprobe
/// waits for a grace period (about 40 ms here), and `record` attaches its real probes a moment
/// later anyway, failing with the same fixes (`record::kernel_error`). Whether uprobe_multi
/// links exist is asked without attaching (`probe::uprobe_multi_links`).
pub fn for_record() -> Result<Capabilities, Error> {
    let start = std::time::Instant::now();
    crate::sys::bpf::route_libbpf_logs();
    let (checks, facts) = run_checks(false);
    require(&checks)?;
    let caps = capabilities(facts);
    // The first step of record's start-up (record::StartClock logs the others).
    log::info!("preflight: {:.1} ms", start.elapsed().as_secs_f64() * 1e3);
    Ok(caps)
}

/// What `record` would use here, asked of the kernel (`for_record` after its checks, and
/// `doctor`, which loads the real objects with them).
pub fn capabilities(facts: KernelFacts) -> Capabilities {
    let uprobes = match probe::uprobe_multi_links() {
        Ok(()) => UprobeLinks::Multi,
        Err(e) => UprobeLinks::Classic(refusal(&e)),
    };
    // A failed probe is not a missing helper: record tries, and says what the kernel refused.
    let bpf_loop =
        probe::helper(libbpf_sys::BPF_PROG_TYPE_KPROBE, libbpf_sys::BPF_FUNC_loop).unwrap_or(true);
    Capabilities {
        uprobes,
        bpf_loop,
        rmap: facts.rmap,
        kernel_btf: facts.btf,
        preemptible_syscall_tracepoints: facts.preemptible_syscall_tracepoints,
    }
}

fn run_checks(attach_uprobe: bool) -> (Vec<Check>, KernelFacts) {
    let mut checks = vec![kernel(), btf(), privileges()];
    let mut facts = KernelFacts {
        rmap: Err("not checked without the privileges bpf() needs".to_string()),
        btf: None,
        preemptible_syscall_tracepoints: false,
    };
    let privileged = checks[2].status == Status::Ok;
    let btf_ok = checks[1].status == Status::Ok;
    if !privileged {
        for (name, disables) in BPF_CHECKS {
            checks.push(Check {
                name,
                required: name != "fentry",
                status: Status::Unknown,
                found: "not checked without the privileges above".into(),
                disables,
                fix: String::new(),
            });
        }
    } else {
        checks.push(bpf_syscall());
        let bpf_ok = checks.last().map(|c| c.status) == Some(Status::Ok);
        checks.push(ring_buffer(bpf_ok));
        checks.push(uprobes(bpf_ok, attach_uprobe));
        checks.push(helpers(bpf_ok));
        let vmlinux = (bpf_ok && btf_ok).then(probe::VmlinuxBtf::load).transpose();
        checks.push(tp_btf(&vmlinux));
        let (check, hooks) = fentry(&vmlinux);
        checks.push(check);
        facts.rmap = hooks;
        if let Ok(Some(btf)) = vmlinux {
            facts.preemptible_syscall_tracepoints = faultable_syscalls(&btf);
            facts.btf = Some(KernelBtf(std::rc::Rc::new(btf)));
        }
    }
    checks.push(tracefs());
    checks.push(pid_namespace());
    if attach_uprobe {
        checks.push(root_file_system());
        checks.push(probe_sites());
        checks.push(private_libraries(privileged));
    }
    (checks, facts)
}

/// The allocator libraries `probe_sites` looks at, where Debian-like systems keep them.
const ALLOCATOR_LIBRARIES: [&str; 5] = [
    "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
    "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
    "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2",
    "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
    "/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4",
];

/// Where `record` would put its probes in the system's allocator libraries, and how many of
/// those sites the kernel must single-step (`binary::placement`): doctor only, as `record`
/// says the same of the files it probes. Never blocks: a single-stepped site still records,
/// at about ten times the cost per call of an emulated one.
fn probe_sites() -> Check {
    const NAME: &str = "probe sites";
    const COST: &str = "nothing; a single-stepped site costs about 10x an emulated one per call";
    let libraries = binary::find_libc()
        .into_iter()
        .chain(
            ALLOCATOR_LIBRARIES
                .iter()
                .map(|p| Path::new(p).to_path_buf()),
        )
        .filter(|p| p.exists());
    let (mut files, mut sites, mut stepped) = (0, 0, Vec::new());
    for lib in libraries {
        let Ok(symbols) = ElfSymbols::read_only(&lib, catalogue::wants) else {
            continue;
        };
        let plan = catalogue::plan(&symbols).sites;
        let name = lib
            .file_name()
            .map_or(String::new(), |n| n.to_string_lossy().into_owned());
        files += 1;
        sites += plan.probes();
        stepped.extend(plan.stepped.iter().map(|s| s.in_file(&name)));
    }
    let found = match (files, stepped.len()) {
        (0, _) => "no allocator library found at the usual paths".to_string(),
        (_, 0) => format!("all {sites} in {files} allocator libraries emulated"),
        (_, n) => format!(
            "{n} of {sites} in {files} allocator libraries single-stepped: {}",
            stepped.join(", ")
        ),
    };
    Check::ok(NAME, false, found, COST)
}

/// Whether `record` can give the command private copies of the allocator libraries (issue 19):
/// the copies are made and a forked child enters a namespace with them bound over the real
/// files, exactly as the command's child will (`record::private`). Doctor only: `record` runs
/// the same check itself and falls back to the shared files with a warning.
fn private_libraries(privileged: bool) -> Check {
    const NAME: &str = "private libraries";
    const DISABLES: &str =
        "sparing other processes the probes (they run the probed shared files instead)";
    const FIX: &str = "allow unshare(CLONE_NEWNS) and mount (CAP_SYS_ADMIN; in a container, a \
                       seccomp profile that permits them), or record with --no-private-libs";
    if !privileged {
        return not_checked(NAME, false, DISABLES, "it needs the privileges above");
    }
    let libraries = binary::allocator_libraries();
    if libraries.is_empty() {
        return Check::ok(
            NAME,
            false,
            "no allocator library found to copy".into(),
            DISABLES,
        );
    }
    match crate::record::private::PrivateLibs::make_checked(&libraries) {
        Ok(libs) => Check::ok(
            NAME,
            false,
            format!(
                "{} allocator libraries copied ({}); the command's mount namespace works",
                libs.copies().len(),
                crate::units::format_bytes(libs.bytes())
            ),
            DISABLES,
        ),
        Err(why) => Check::missing(NAME, false, why, DISABLES, FIX),
    }
}

/// Fail with the first blocking check's line, as `record` does before loading anything. Items
/// that are missing but optional are said once, at info level (`-v`).
pub fn require(checks: &[Check]) -> Result<(), Error> {
    if let Some(c) = checks.iter().find(|c| c.blocks_recording()) {
        return Err(c.to_error());
    }
    for c in checks.iter().filter(|c| c.status != Status::Ok) {
        log::info!("{}; disables: {}", c.problem(), c.disables);
    }
    Ok(())
}

/// The BPF checks, with what each disables, in order (for the "not checked" rows).
const BPF_CHECKS: [(&str, &str); 6] = [
    ("bpf syscall", DISABLES_ALL),
    ("ring buffer", DISABLES_ALL),
    ("uprobes", DISABLES_ALLOCS),
    ("BPF helpers", DISABLES_ALL),
    ("tp_btf", DISABLES_TREE),
    ("fentry", DISABLES_RMAP),
];
const DISABLES_ALL: &str = "recording (required)";
const DISABLES_ALLOCS: &str = "recording allocations (required)";
const DISABLES_TREE: &str = "recording the process tree and rss_stat (required)";
const DISABLES_RMAP: &str = "rmap hooks (resident memory uses rss_stat instead)";

fn kernel() -> Check {
    let (release, _) = process::uname();
    Check::ok(
        "kernel",
        false,
        format!("Linux {release} {}", std::env::consts::ARCH),
        "-",
    )
}

fn btf() -> Check {
    match std::fs::metadata(VMLINUX_BTF) {
        Ok(m) => Check::ok(
            "BTF",
            true,
            format!("{VMLINUX_BTF} ({})", crate::units::format_bytes(m.len())),
            DISABLES_ALL,
        ),
        Err(e) => Check::missing(
            "BTF",
            true,
            format!("cannot read {VMLINUX_BTF} ({e})"),
            DISABLES_ALL,
            "memtrack needs a kernel built with CONFIG_DEBUG_INFO_BTF=y (Debian, Ubuntu, Fedora \
             and RHEL kernels have it)",
        ),
    }
}

/// The capabilities recording needs that this process lacks (empty when it has them all).
pub fn missing_capabilities() -> Vec<&'static str> {
    let eff = effective_capabilities().unwrap_or(0);
    [
        (CAP_BPF, "CAP_BPF"),
        (CAP_PERFMON, "CAP_PERFMON"),
        (CAP_SYS_ADMIN, "CAP_SYS_ADMIN"),
    ]
    .into_iter()
    .filter(|(bit, _)| eff & (1u64 << bit) == 0)
    .map(|(_, name)| name)
    .collect()
}

/// The effective capability mask of this process, from /proc/self/status.
fn effective_capabilities() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("CapEff:"))?;
    u64::from_str_radix(line["CapEff:".len()..].trim(), 16).ok()
}

fn privileges() -> Check {
    let euid = process::geteuid();
    let missing = missing_capabilities();
    let who = if euid == 0 {
        "root".to_string()
    } else {
        format!("uid {euid}")
    };
    if missing.is_empty() {
        return Check::ok(
            "privileges",
            true,
            format!("{who} with CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN"),
            DISABLES_ALL,
        );
    }
    let fix = if euid == 0 {
        "root without them is a container or a restricted service: run the container with \
         --privileged or --cap-add BPF,PERFMON,SYS_ADMIN"
    } else {
        "run memtrack with sudo (or grant it CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN)"
    };
    Check::missing(
        "privileges",
        true,
        format!("{who} lacks {}", missing.join(", ")),
        DISABLES_ALL,
        fix,
    )
}

/// What a probe's error says, on one line: "fentry/f: Operation not permitted (EPERM)".
fn refusal(e: &BpfError) -> String {
    if e.errno == 0 {
        return e.what.clone();
    }
    let text = std::io::Error::from_raw_os_error(e.errno).to_string();
    let text = text.split(" (os error").next().unwrap_or_default();
    let name = match e.errno {
        libc::EPERM => "EPERM",
        libc::EACCES => "EACCES",
        libc::EINVAL => "EINVAL",
        libc::ENOENT => "ENOENT",
        libc::ENOSYS => "ENOSYS",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::E2BIG => "E2BIG",
        libc::EBADF => "EBADF",
        libc::ESRCH => "ESRCH",
        _ => return format!("{}: {text} (errno {})", e.what, e.errno),
    };
    format!("{}: {text} ({name})", e.what)
}

/// What a refused bpf() usually means, for the fix column.
fn bpf_fix(e: &BpfError) -> &'static str {
    match e.errno {
        libc::ENOSYS => "this kernel was built without CONFIG_BPF_SYSCALL",
        libc::EPERM | libc::EACCES => {
            "in a container, allow the bpf() syscall (docker run --privileged, or a seccomp \
             profile that allows bpf and perf_event_open)"
        }
        _ => "run with -v to see libbpf's log",
    }
}

fn bpf_syscall() -> Check {
    match probe::bpf_syscall() {
        Ok(()) => Check::ok("bpf syscall", true, "bpf() works".into(), DISABLES_ALL),
        Err(e) => Check::missing("bpf syscall", true, refusal(&e), DISABLES_ALL, bpf_fix(&e)),
    }
}

fn not_checked(name: &'static str, required: bool, disables: &'static str, why: &str) -> Check {
    Check {
        name,
        required,
        status: Status::Unknown,
        found: format!("not checked: {why}"),
        disables,
        fix: String::new(),
    }
}

fn ring_buffer(bpf_ok: bool) -> Check {
    if !bpf_ok {
        return not_checked("ring buffer", true, DISABLES_ALL, "bpf() does not work");
    }
    let page = crate::sys::ring::page_size() as u32;
    match probe::ring_buffer(page) {
        Ok(()) => Check::ok(
            "ring buffer",
            true,
            "BPF_MAP_TYPE_RINGBUF".into(),
            DISABLES_ALL,
        ),
        Err(e) => Check::missing(
            "ring buffer",
            true,
            refusal(&e),
            DISABLES_ALL,
            "BPF ring buffers need Linux 5.8 or later",
        ),
    }
}

fn uprobes(bpf_ok: bool, attach: bool) -> Check {
    const NAME: &str = "uprobes";
    if !bpf_ok {
        return not_checked(NAME, true, DISABLES_ALLOCS, "bpf() does not work");
    }
    if let Err(e) = probe::uprobe_program() {
        return Check::missing(NAME, true, refusal(&e), DISABLES_ALLOCS, bpf_fix(&e));
    }
    let classic = Path::new(UPROBE_PMU).exists();
    if !attach {
        return Check::ok(
            NAME,
            true,
            "uprobe programs load (record attaches its own next)".into(),
            DISABLES_ALLOCS,
        );
    }
    // Attach where `record` will: glibc's malloc, for this process only.
    let target = binary::find_libc().and_then(|libc| {
        let symbols = ElfSymbols::read(&libc).ok()?;
        Some((libc, symbols.get("malloc")?.offset))
    });
    let Some((libc, offset)) = target else {
        return if classic {
            Check::ok(
                NAME,
                true,
                "perf uprobes (no glibc found to try uprobe_multi on)".into(),
                DISABLES_ALLOCS,
            )
        } else {
            Check::missing(
                NAME,
                true,
                format!("no uprobe PMU ({UPROBE_PMU})"),
                DISABLES_ALLOCS,
                "memtrack needs a kernel built with CONFIG_UPROBE_EVENTS=y",
            )
        };
    };
    match probe::uprobe_multi(&libc.to_string_lossy(), offset) {
        Ok(()) => Check::ok(
            NAME,
            true,
            format!("uprobe_multi links on {}", libc.display()),
            DISABLES_ALLOCS,
        ),
        Err(e) if classic && !matches!(e.errno, libc::EPERM | libc::EACCES) => Check::ok(
            NAME,
            true,
            format!(
                "perf uprobes, one per site (no uprobe_multi links before Linux 6.6: {})",
                refusal(&e)
            ),
            DISABLES_ALLOCS,
        ),
        Err(e) => Check::missing(NAME, true, refusal(&e), DISABLES_ALLOCS, bpf_fix(&e)),
    }
}

/// The helpers every object calls, and the oldest kernel memtrack records on: Linux 5.15, for
/// `bpf_get_attach_cookie` (each allocator probe's cookie says which function it is on). An
/// older kernel is refused here, before anything is loaded, with that reason.
fn helpers(bpf_ok: bool) -> Check {
    const NAME: &str = "BPF helpers";
    if !bpf_ok {
        return not_checked(NAME, true, DISABLES_ALL, "bpf() does not work");
    }
    let (release, _) = process::uname();
    match probe::helper(
        libbpf_sys::BPF_PROG_TYPE_KPROBE,
        libbpf_sys::BPF_FUNC_get_attach_cookie,
    ) {
        Ok(true) => Check::ok(
            NAME,
            true,
            "bpf_get_attach_cookie (Linux 5.15) is there".into(),
            DISABLES_ALL,
        ),
        Ok(false) => Check::missing(
            NAME,
            true,
            format!("Linux {release} lacks bpf_get_attach_cookie, which came in Linux 5.15"),
            DISABLES_ALL,
            "memtrack records on Linux 5.15 and later (every feature from 6.1): run it on a \
             newer kernel",
        ),
        Err(e) => Check::missing(NAME, true, refusal(&e), DISABLES_ALL, bpf_fix(&e)),
    }
}

fn tp_btf(vmlinux: &Result<Option<probe::VmlinuxBtf>, BpfError>) -> Check {
    const NAME: &str = "tp_btf";
    let btf = match vmlinux {
        Ok(Some(btf)) => btf,
        Ok(None) => return not_checked(NAME, true, DISABLES_TREE, "needs BTF and bpf()"),
        Err(e) => {
            return Check::missing(
                NAME,
                true,
                refusal(e),
                DISABLES_TREE,
                "memtrack needs a kernel with BTF (CONFIG_DEBUG_INFO_BTF=y)",
            )
        }
    };
    let result = ["sched_process_fork", "rss_stat"]
        .into_iter()
        .try_for_each(|tp| btf.tp_btf(tp));
    match result {
        Ok(()) => Check::ok(
            NAME,
            true,
            "sched_process_fork and rss_stat attach".into(),
            DISABLES_TREE,
        ),
        Err(e) => Check::missing(
            NAME,
            true,
            refusal(&e),
            DISABLES_TREE,
            if e.errno == 0 {
                "memtrack needs Linux 5.5 or later (tp_btf and the rss_stat tracepoint)"
            } else {
                bpf_fix(&e)
            },
        ),
    }
}

fn fentry(vmlinux: &Result<Option<probe::VmlinuxBtf>, BpfError>) -> (Check, RmapHooks) {
    const NAME: &str = "fentry";
    let Ok(Some(btf)) = vmlinux else {
        const WHY: &str = "needs BTF and bpf()";
        let check = not_checked(NAME, false, DISABLES_RMAP, WHY);
        return (check, Err(format!("cannot read the kernel's BTF: {WHY}")));
    };
    // The first function of the rmap hooks this kernel would get, else the usual one.
    let hooks = crate::record::rmap::choose(|f| btf.has(f, libbpf_sys::BTF_KIND_FUNC));
    let function = hooks.as_ref().map_or(RMAP_FUNCTION, |h| h[0].function);
    match btf.fentry(function) {
        Ok(()) => {
            let found = match &hooks {
                Ok(h) => format!(
                    "fentry/{function} attaches; rmap hooks on {} functions",
                    h.len()
                ),
                Err(_) => format!("fentry/{function} attaches"),
            };
            (Check::ok(NAME, false, found, DISABLES_RMAP), hooks)
        }
        // Refused on locked-down kernels (docs/kernel-facts.md); nothing to fix: rss_stat covers
        // resident memory.
        Err(e) => {
            let why = refusal(&e);
            let check = Check::missing(NAME, false, why.clone(), DISABLES_RMAP, "");
            (
                check,
                Err(format!("the kernel refuses fentry programs: {why}")),
            )
        }
    }
}

fn tracefs() -> Check {
    const NAME: &str = "tracefs";
    const DISABLES: &str = "nothing memtrack needs (it uses tp_btf, not tracefs tracepoints)";
    match TRACEFS
        .iter()
        .find(|dir| Path::new(dir).join("events").is_dir())
    {
        Some(dir) => Check::ok(NAME, false, format!("mounted at {dir}"), DISABLES),
        None => Check::missing(
            NAME,
            false,
            format!("not mounted at {}", TRACEFS[0]),
            DISABLES,
            "",
        ),
    }
}

/// The pid namespace `record` runs in (issue 30): inside a container the recording names the
/// container's pids, which needs a /proc of that namespace (record::pidns).
fn pid_namespace() -> Check {
    const NAME: &str = "pid namespace";
    const DISABLES: &str = "recording (every /proc read would name other processes)";
    match crate::record::pidns::PidNamespace::of_self() {
        Ok(ns) if ns.is_initial() => Check::ok(NAME, true, "the host's".into(), DISABLES),
        Ok(ns) => Check::ok(
            NAME,
            true,
            format!(
                "a container's (pid:[{}]), with its own /proc: recordings name its pids",
                ns.inum
            ),
            DISABLES,
        ),
        Err(e) => Check::missing(NAME, true, e.to_string(), DISABLES, ""),
    }
}

/// The root file system `record` sees: a container image's (overlay) is said, as the files its
/// processes map are found through it.
fn root_file_system() -> Check {
    const NAME: &str = "root file system";
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    // "36 35 98:0 / / rw,noatime master:1 - ext3 /dev/root rw": the last mount at "/" is ours.
    let root = mountinfo
        .lines()
        .rfind(|l| l.split(' ').nth(4) == Some("/"))
        .and_then(|l| {
            let mut after = l.split(" - ").nth(1)?.split(' ');
            Some((after.next()?.to_string(), after.next()?.to_string()))
        });
    let found = match root {
        Some((fs, _)) if fs == "overlay" => "overlay (a container image's): files are found \
             as the processes map them"
            .to_string(),
        Some((fs, source)) => format!("{fs} ({source})"),
        None => "unknown (no / in /proc/self/mountinfo)".to_string(),
    };
    Check::ok(NAME, false, found, "nothing")
}

#[cfg(test)]
mod tests {
    /// The README's Kernels table is this list, row for row: a feature added to one and not
    /// the other fails here.
    #[test]
    fn the_readme_kernels_table_is_the_feature_list() {
        let readme = include_str!("../README.md");
        let section = readme
            .split("### Kernels")
            .nth(1)
            .expect("README has a Kernels section");
        let rows: Vec<Vec<&str>> = section
            .lines()
            .skip_while(|l| !l.starts_with("| feature"))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
            .collect();
        let want: Vec<Vec<&str>> = KERNEL_FEATURES
            .iter()
            .map(|f| vec![f.name, f.first, f.without])
            .collect();
        assert_eq!(rows, want);
    }

    use super::*;

    fn check(required: bool, status: Status, fix: &str) -> Check {
        Check {
            name: "ring buffer",
            required,
            status,
            found: "BPF_MAP_TYPE_RINGBUF: Invalid argument (EINVAL)".into(),
            disables: DISABLES_ALL,
            fix: fix.into(),
        }
    }

    #[test]
    fn problem_is_one_line_with_the_fix() {
        let c = check(
            true,
            Status::Missing,
            "BPF ring buffers need Linux 5.8 or later",
        );
        assert_eq!(
            c.problem(),
            "ring buffer: BPF_MAP_TYPE_RINGBUF: Invalid argument (EINVAL); \
             BPF ring buffers need Linux 5.8 or later"
        );
        assert!(!c.problem().contains('\n'));
    }

    #[test]
    fn only_required_checks_that_are_not_ok_block() {
        assert!(check(true, Status::Missing, "").blocks_recording());
        assert!(check(true, Status::Unknown, "").blocks_recording());
        assert!(!check(true, Status::Ok, "").blocks_recording());
        assert!(!check(false, Status::Missing, "").blocks_recording());
    }

    #[test]
    fn require_fails_with_the_first_blocking_line() {
        let checks = [
            check(false, Status::Missing, ""),
            check(true, Status::Missing, "fix one"),
            check(true, Status::Missing, "fix two"),
        ];
        let e = require(&checks).unwrap_err();
        assert!(e.to_string().starts_with(&checks[1].problem()), "{e}");
        assert!(require(&checks[..1]).is_ok());
    }

    #[test]
    fn refusals_name_the_errno() {
        let e = BpfError {
            what: "fentry/f".into(),
            errno: libc::EPERM,
            verifier: None,
        };
        assert_eq!(refusal(&e), "fentry/f: Operation not permitted (EPERM)");
        let e = BpfError {
            what: "f is not in the kernel's BTF".into(),
            errno: 0,
            verifier: None,
        };
        assert_eq!(refusal(&e), "f is not in the kernel's BTF");
    }

    #[test]
    fn privileges_error_is_a_privilege_error() {
        let mut c = check(true, Status::Missing, "run memtrack with sudo");
        c.name = "privileges";
        assert!(matches!(c.to_error(), Error::Privilege(_)));
    }
}
