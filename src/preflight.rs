//! What recording needs from the machine, checked before anything is loaded, with the words
//! `record` fails with. (`doctor` reports the same checks as a table.)

use std::path::Path;

use crate::error::Error;

/// Linux capability numbers (linux/capability.h).
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// Where the kernel exposes its own BTF, which CO-RE relocation and tp_btf programs need.
pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

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

/// Fail unless this process may load BPF programs and attach probes.
pub fn check_privileges() -> Result<(), Error> {
    let missing = missing_capabilities();
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::Privilege(format!(
        "recording needs root or the capabilities CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN \
         (missing: {}); run it with sudo",
        missing.join(", ")
    )))
}

/// Fail unless the kernel exposes BTF.
pub fn check_btf() -> Result<(), Error> {
    if Path::new(VMLINUX_BTF).exists() {
        return Ok(());
    }
    Err(Error::Kernel(format!(
        "this kernel exposes no BTF ({VMLINUX_BTF} is missing); memtrack needs a kernel built \
         with CONFIG_DEBUG_INFO_BTF=y (Debian, Ubuntu, Fedora and RHEL kernels have it)"
    )))
}
