//! The pid namespace memtrack records in (issue 30). The BPF programs see every task through the
//! kernel's global pids, while /proc, kill(), the control FIFO's `bench --pid` and the user see
//! the pids of the namespace the recorder runs in. Design, and why:
//!
//! - Every BPF map stays keyed by the global tgid: the allocator probes' hot path keeps its one
//!   `bpf_get_current_pid_tgid`, and a container costs nothing there.
//! - The records carry the pids of the recorder's namespace. User space hands BPF the
//!   namespace's inode (read-only data, `recorder_pidns` in bpf/common.bpf.h); BPF finds the
//!   task's number in it by CO-RE reads of `thread_pid->numbers[]` (checking each level's
//!   namespace inode, so a command that makes nested namespaces of its own is still named in
//!   ours). `bpf_get_ns_current_pid_tgid` alone would not do: it answers only for the current
//!   task, and only when the task's own namespace is the one asked about (not a nested one);
//!   Fork events name a child and resident-memory events a process that is not current. It is
//!   the fast path for the current task (given nsfs's device too), the walk the fallback.
//! - The one process user space registers, the spawner, it can only name by its pid here: the
//!   global pid is not visible from inside (a fresh /proc shows this namespace only). It goes into
//!   `tracked` under `TRACKED_NS_KEY | pid`, which the fork programs look up by the parent's
//!   number in our namespace when its global tgid is not tracked; its children are then tracked
//!   by their global tgid, as on the host.
//!
//! On the host (the initial namespace) the inode handed over is 0 and the verifier drops the
//! translation as dead code: the programs are the ones that ran before.

pub use crate::preflight::pidns::PidNamespace;

/// `tracked` key bit of a process registered by its pid in the recorder's namespace (bpf/
/// common.bpf.h's TRACKED_NS_KEY).
const TRACKED_NS_KEY: u32 = 0x8000_0000;

/// The section of bpf/common.bpf.h's `recorder_pidns`.
pub const RODATA_SECTION: &str = ".rodata.pidns";

/// What the BPF objects and the header make of the namespace.
impl PidNamespace {
    /// The value of `recorder_pidns` the BPF objects load with: 0 on the host, where the
    /// global pids are the recorder's.
    pub fn rodata(&self) -> [u8; 16] {
        let (inum, dev) = if self.is_initial() {
            (0, 0)
        } else {
            (self.inum, self.dev)
        };
        let mut bytes = [0; 16];
        bytes[..8].copy_from_slice(&inum.to_ne_bytes());
        bytes[8..].copy_from_slice(&dev.to_ne_bytes());
        bytes
    }

    /// The `tracked` key under which user space registers the process `pid` (of this
    /// namespace) as the spawner.
    pub fn tracked_key(&self, pid: u32) -> u32 {
        if self.is_initial() {
            pid
        } else {
            TRACKED_NS_KEY | pid
        }
    }

    /// The header's feature entry naming the namespace, when it is not the host's: the pids of
    /// the recording are this namespace's.
    pub fn feature(&self) -> Option<String> {
        (!self.is_initial()).then(|| format!("{}{}", FEATURE_PREFIX, self.inum))
    }
}

/// The header feature of a recording made inside a pid namespace: this prefix and the
/// namespace's inode (`pid_namespace:4026532291`).
pub const FEATURE_PREFIX: &str = "pid_namespace:";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preflight::pidns::INITIAL_PID_NS;

    #[test]
    fn the_host_keeps_global_keys_and_no_translation() {
        let host = PidNamespace {
            inum: INITIAL_PID_NS,
            dev: 4,
        };
        assert_eq!(host.rodata(), [0; 16]);
        assert_eq!(host.tracked_key(1234), 1234);
        assert_eq!(host.feature(), None);
        let inner = PidNamespace {
            inum: 4026532291,
            dev: 4,
        };
        assert_eq!(inner.rodata()[..8], 4026532291u64.to_ne_bytes());
        assert_eq!(inner.rodata()[8..], 4u64.to_ne_bytes());
        assert_eq!(inner.tracked_key(2), 0x8000_0002);
        assert_eq!(inner.feature().as_deref(), Some("pid_namespace:4026532291"));
    }
}
