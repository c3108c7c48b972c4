//! The kernel features memtrack adapts to, each found by probing the running kernel, never by
//! its version: the table `doctor` prints and the README's "Kernels" section lists.

use super::checks::refusal;
use super::rmap_hooks;
use crate::sys::probe;

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
                    Some(b) => match rmap_hooks::choose_in(b) {
                        Ok(hooks) => (
                            Some(true),
                            format!("{} of {}", hooks.len(), rmap_hooks::kernels_of(hooks[0])),
                        ),
                        Err(_) => (Some(false), "neither set memtrack hooks".into()),
                    },
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
pub(super) fn faultable_syscalls(vmlinux: &probe::VmlinuxBtf) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The README's Kernels table is this list, row for row: a feature added to one and not
    /// the other fails here.
    #[test]
    fn the_readme_kernels_table_is_the_feature_list() {
        let readme = include_str!("../../README.md");
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
}
