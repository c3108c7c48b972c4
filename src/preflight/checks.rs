//! The checks themselves, one function per row of `doctor`'s table, in the order `run_checks`
//! calls them (preflight/mod.rs): each asks the kernel or the file system and says what it
//! found, what a missing one disables and how to fix it.

use std::path::Path;

use super::{
    rmap_hooks, Check, RmapHooks, Status, DISABLES_ALL, DISABLES_ALLOCS, DISABLES_FENTRY,
    DISABLES_TREE, VMLINUX_BTF,
};
use crate::binary::symbols::ElfSymbols;
use crate::binary::{self, catalogue};
use crate::sys::bpf::BpfError;
use crate::sys::{probe, process};

/// Linux capability numbers (linux/capability.h).
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// The kernel function the `fentry` row tries when the kernel's BTF has no rmap functions
/// memtrack hooks (`rmap_hooks::choose` picks them otherwise): where fentry is refused, the rmap
/// hooks (bpf/rmap.bpf.c) are not loaded and resident memory comes from rss_stat alone.
const RMAP_FUNCTION: &str = "folio_add_new_anon_rmap";
/// Where tracefs is mounted when it is.
const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];
/// The perf PMU classic uprobes are created through (CONFIG_UPROBE_EVENTS).
const UPROBE_PMU: &str = "/sys/bus/event_source/devices/uprobe/type";

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
pub(super) fn probe_sites() -> Check {
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

pub(super) fn kernel() -> Check {
    let (release, _) = process::uname();
    Check::ok(
        "kernel",
        false,
        format!("Linux {release} {}", std::env::consts::ARCH),
        "-",
    )
}

pub(super) fn btf() -> Check {
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

pub(super) fn privileges() -> Check {
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
pub(super) fn refusal(e: &BpfError) -> String {
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

pub(super) fn bpf_syscall() -> Check {
    match probe::bpf_syscall() {
        Ok(()) => Check::ok("bpf syscall", true, "bpf() works".into(), DISABLES_ALL),
        Err(e) => Check::missing("bpf syscall", true, refusal(&e), DISABLES_ALL, bpf_fix(&e)),
    }
}

pub fn not_checked(name: &'static str, required: bool, disables: &'static str, why: &str) -> Check {
    Check {
        name,
        required,
        status: Status::Unknown,
        found: format!("not checked: {why}"),
        disables,
        fix: String::new(),
    }
}

pub(super) fn ring_buffer(bpf_ok: bool) -> Check {
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

pub(super) fn uprobes(bpf_ok: bool, attach: probe::Attach) -> Check {
    const NAME: &str = "uprobes";
    if !bpf_ok {
        return not_checked(NAME, true, DISABLES_ALLOCS, "bpf() does not work");
    }
    if let Err(e) = probe::uprobe_program() {
        return Check::missing(NAME, true, refusal(&e), DISABLES_ALLOCS, bpf_fix(&e));
    }
    let classic = Path::new(UPROBE_PMU).exists();
    if attach == probe::Attach::LoadOnly {
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
pub(super) fn helpers(bpf_ok: bool) -> Check {
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

pub(super) fn tp_btf(
    vmlinux: &Result<Option<probe::VmlinuxBtf>, BpfError>,
    attach: probe::Attach,
) -> Check {
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
        .try_for_each(|tp| btf.tp_btf(tp, attach));
    let found = match attach {
        probe::Attach::Yes => "sched_process_fork and rss_stat attach",
        probe::Attach::LoadOnly => "sched_process_fork and rss_stat load (record attaches next)",
    };
    match result {
        Ok(()) => Check::ok(NAME, true, found.into(), DISABLES_TREE),
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

pub(super) fn fentry(
    vmlinux: &Result<Option<probe::VmlinuxBtf>, BpfError>,
    attach: probe::Attach,
) -> (Check, RmapHooks) {
    const NAME: &str = "fentry";
    let Ok(Some(btf)) = vmlinux else {
        const WHY: &str = "needs BTF and bpf()";
        let check = not_checked(NAME, false, DISABLES_FENTRY, WHY);
        return (check, Err(format!("cannot read the kernel's BTF: {WHY}")));
    };
    // The first function of the rmap hooks this kernel would get, else the usual one.
    let hooks = rmap_hooks::choose_in(btf);
    let function = hooks.as_ref().map_or(RMAP_FUNCTION, |h| h[0].function);
    let verb = match attach {
        probe::Attach::Yes => "attaches",
        probe::Attach::LoadOnly => "loads",
    };
    match btf.fentry(function, attach) {
        Ok(()) => {
            let found = match &hooks {
                Ok(h) => format!(
                    "fentry/{function} {verb}; rmap hooks on {} functions",
                    h.len()
                ),
                Err(_) => format!("fentry/{function} {verb}"),
            };
            (Check::ok(NAME, false, found, DISABLES_FENTRY), hooks)
        }
        // Refused on locked-down kernels (docs/kernel-facts.md); nothing to fix: rss_stat covers
        // resident memory.
        Err(e) => {
            let why = refusal(&e);
            let check = Check::missing(NAME, false, why.clone(), DISABLES_FENTRY, "");
            (
                check,
                Err(format!("the kernel refuses fentry programs: {why}")),
            )
        }
    }
}

pub(super) fn tracefs() -> Check {
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
/// container's pids, which needs a /proc of that namespace (`pidns`).
pub(super) fn pid_namespace() -> Check {
    const NAME: &str = "pid namespace";
    const DISABLES: &str = "recording (every /proc read would name other processes)";
    match super::pidns::PidNamespace::of_self() {
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
pub(super) fn root_file_system() -> Check {
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
    use super::*;

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
}
