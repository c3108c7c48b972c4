//! What recording needs from the machine, and what this machine has: one list of checks that
//! `memtrack doctor` prints as a table and `record` runs before it loads anything, failing with
//! the very line `doctor` prints for the first required check that is missing.
//!
//! The kernel is asked, not guessed at: each BPF check creates a map or loads a two-instruction
//! program of the kind memtrack uses and attaches it where memtrack's own programs go
//! (`sys::probe`), so a container's seccomp filter or a locked-down kernel shows up here.

mod checks;
mod features;
pub mod pidns;
pub mod rmap_hooks;

use crate::error::Error;
use crate::sys::probe;

use checks::{
    bpf_syscall, btf, fentry, helpers, kernel, pid_namespace, privileges, probe_sites, refusal,
    ring_buffer, root_file_system, tp_btf, tracefs, uprobes,
};
pub use checks::{missing_capabilities, not_checked};
pub use features::{kernel_features, FeatureProbe, KernelFeature, KERNEL_FEATURES};

/// Where the kernel exposes its own BTF, which CO-RE relocation and tp_btf programs need.
pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

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
    pub fn ok(name: &'static str, required: bool, found: String, disables: &'static str) -> Check {
        Check {
            name,
            required,
            status: Status::Ok,
            found,
            disables,
            fix: String::new(),
        }
    }

    pub fn missing(
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
    run_checks(probe::Attach::Yes)
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
    /// [`Capabilities::touches`].
    pub touches: Touches,
}

/// Whether the walk of writes to pages inherited at fork (walk.bpf.c's touch_walk, an fexit
/// program on do_wp_page) loads here, or why not: without it, what a forked child inherited
/// stays "[inherited]" in the resident views however much of it the child writes.
pub type Touches = Result<(), String>;

/// The kernel function touch_walk follows: the write-protect fault, copy-on-write's.
pub const TOUCH_FUNCTION: &str = "do_wp_page";

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

/// The rmap hooks `record` would load here (the programs `rmap_hooks::choose` picks from the
/// kernel's BTF, fentry attaching to the first of them), or why there are none, in words:
/// found by the `fentry` check, so that `record` neither parses the kernel's BTF again nor
/// loads rmap.bpf.o where the kernel refuses fentry.
pub type RmapHooks = Result<Vec<&'static rmap_hooks::Hook>, String>;

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
    /// Whether writes to pages inherited at fork are walked, or why not.
    pub touches: Touches,
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
/// uprobe, tp_btf and fentry checks only load their programs instead of also attaching them
/// ([`probe::Attach`]): detaching a uprobe waits for a grace period (about 40 ms here), a
/// tracepoint attached again soon after a detach waits for one too, and `record` attaches its
/// real programs a moment later anyway, failing with the same fixes (`record::kernel_error`;
/// the rmap hooks, optional, are left out and said). Whether uprobe_multi links exist is asked
/// without attaching (`probe::uprobe_multi_links`).
pub fn for_record() -> Result<Capabilities, Error> {
    let start = std::time::Instant::now();
    crate::sys::bpf::route_libbpf_logs();
    let (checks, facts) = run_checks(probe::Attach::LoadOnly);
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
        touches: facts.touches,
    }
}

fn run_checks(attach: probe::Attach) -> (Vec<Check>, KernelFacts) {
    let mut checks = vec![kernel(), btf(), privileges()];
    let mut facts = KernelFacts {
        rmap: Err("not checked without the privileges bpf() needs".to_string()),
        btf: None,
        preemptible_syscall_tracepoints: false,
        touches: Err("not checked without the privileges bpf() needs".to_string()),
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
        checks.push(uprobes(bpf_ok, attach));
        checks.push(helpers(bpf_ok));
        let vmlinux = (bpf_ok && btf_ok).then(probe::VmlinuxBtf::load).transpose();
        checks.push(tp_btf(&vmlinux, attach));
        let (check, hooks) = fentry(&vmlinux, attach);
        facts.touches = touches(&vmlinux, &check);
        checks.push(check);
        facts.rmap = hooks;
        if let Ok(Some(btf)) = vmlinux {
            facts.preemptible_syscall_tracepoints = features::faultable_syscalls(&btf);
            facts.btf = Some(KernelBtf(std::rc::Rc::new(btf)));
        }
    }
    checks.push(tracefs());
    checks.push(pid_namespace());
    if attach == probe::Attach::Yes {
        checks.push(root_file_system());
        checks.push(probe_sites());
    }
    (checks, facts)
}

/// Whether touch_walk can load: fentry programs load (the `fentry` row), and the kernel's BTF
/// has [`TOUCH_FUNCTION`] (a static function: a kernel that inlines it has none).
fn touches(
    vmlinux: &Result<Option<probe::VmlinuxBtf>, crate::sys::bpf::BpfError>,
    fentry: &Check,
) -> Touches {
    if fentry.status != Status::Ok {
        return Err(format!("fentry programs do not load: {}", fentry.found));
    }
    let Ok(Some(btf)) = vmlinux else {
        return Err("cannot read the kernel's BTF".to_string());
    };
    btf.look_up(&[TOUCH_FUNCTION], libbpf_sys::BTF_KIND_FUNC);
    if btf.has(TOUCH_FUNCTION, libbpf_sys::BTF_KIND_FUNC) {
        Ok(())
    } else {
        Err(format!(
            "the kernel's BTF has no {TOUCH_FUNCTION} (inlined)"
        ))
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
    ("fentry", DISABLES_FENTRY),
];
const DISABLES_ALL: &str = "recording (required)";
const DISABLES_ALLOCS: &str = "recording allocations (required)";
const DISABLES_TREE: &str = "recording the process tree and rss_stat (required)";
const DISABLES_FENTRY: &str =
    "rmap hooks; forked children's writes to inherited pages (resident memory uses rss_stat)";

#[cfg(test)]
mod tests {
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
    fn privileges_error_is_a_privilege_error() {
        let mut c = check(true, Status::Missing, "run memtrack with sudo");
        c.name = "privileges";
        assert!(matches!(c.to_error(), Error::Privilege(_)));
    }
}
