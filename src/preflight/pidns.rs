//! The pid namespace memtrack runs in, and whether /proc is that namespace's (issue 30): the
//! `pid namespace` check, and what `record` hands its BPF objects (record/pidns.rs, which says
//! how the records name the pids of a container).

use crate::error::Error;

/// The inode of the initial pid namespace (PROC_PID_INIT_INO in include/linux/proc_ns.h).
pub(crate) const INITIAL_PID_NS: u64 = 0xEFFF_FFFC;

/// The pid namespace memtrack runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PidNamespace {
    /// The inode of /proc/self/ns/pid.
    pub inum: u64,
    /// The device of /proc/self/ns/pid (nsfs), the kernel's encoding (major << 20 | minor),
    /// which bpf_get_ns_current_pid_tgid takes with the inode.
    pub dev: u64,
}

impl PidNamespace {
    /// The namespace of this process; an error when /proc belongs to another namespace (then
    /// every /proc/PID the recorder reads would name another process).
    pub fn of_self() -> Result<PidNamespace, Error> {
        let link = std::fs::read_link("/proc/self/ns/pid")
            .map_err(|e| Error::io("/proc/self/ns/pid", e))?;
        let inum = parse_ns_link(&link.to_string_lossy()).ok_or_else(|| {
            Error::Internal(format!(
                "/proc/self/ns/pid reads {}, not pid:[INODE]",
                link.display()
            ))
        })?;
        let ours = std::process::id();
        let seen = std::fs::read_link("/proc/self")
            .ok()
            .and_then(|p| p.to_str().and_then(|s| s.parse::<u32>().ok()));
        if seen != Some(ours) {
            return Err(Error::Usage(proc_mismatch(ours, seen)));
        }
        let dev = std::fs::metadata("/proc/self/ns/pid")
            .map(|m| std::os::unix::fs::MetadataExt::dev(&m))
            .map_err(|e| Error::io("/proc/self/ns/pid", e))?;
        // glibc's dev_t encoding to the kernel's internal one.
        let (major, minor) = (
            (dev >> 8) & 0xfff | (dev >> 32) & !0xfff,
            dev & 0xff | (dev >> 12) & !0xff,
        );
        Ok(PidNamespace {
            inum,
            dev: major << 20 | (minor & 0xfffff),
        })
    }

    /// Whether this is the host's (initial) pid namespace.
    pub fn is_initial(&self) -> bool {
        self.inum == INITIAL_PID_NS
    }
}

/// The inode of a namespace link's text, `pid:[4026531836]`.
fn parse_ns_link(link: &str) -> Option<u64> {
    link.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
}

/// The error when /proc/self is not this process.
fn proc_mismatch(ours: u32, seen: Option<u32>) -> String {
    let seen = seen.map_or_else(|| "nothing".to_string(), |p| format!("pid {p}"));
    format!(
        "/proc belongs to another pid namespace than memtrack's (memtrack is pid {ours}, /proc/self \
         says {seen}); mount a /proc of this namespace (unshare --pid --fork --mount-proc, or \
         mount -t proc proc /proc in a new mount namespace) and record again"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_links_parse() {
        assert_eq!(parse_ns_link("pid:[4026531836]"), Some(INITIAL_PID_NS));
        assert_eq!(parse_ns_link("pid:[12]"), Some(12));
        assert_eq!(parse_ns_link("mnt:[12]"), None);
        assert_eq!(parse_ns_link("pid:[x]"), None);
    }

    #[test]
    fn a_foreign_proc_says_how_to_mount_ours() {
        let m = proc_mismatch(1, Some(4242));
        assert!(
            m.contains("memtrack is pid 1, /proc/self says pid 4242"),
            "{m}"
        );
        assert!(m.contains("--mount-proc"), "{m}");
    }
}
