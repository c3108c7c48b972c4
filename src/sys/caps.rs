//! Capabilities the recorded command must not inherit from memtrack.
//!
//! memtrack needs CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN; it may have them as root, or as
//! another user with ambient capabilities (`setpriv --ambient-caps`, `capsh --addamb`, a
//! systemd unit's `AmbientCapabilities=`). Ambient capabilities survive execve into a program
//! without file capabilities, and inheritable ones survive into a program whose file grants
//! them, so without care the command and everything it starts would run with memtrack's
//! privileges. [`clear_for_exec`] runs in the child between fork and exec and leaves it
//! nothing: no ambient, no inheritable, and (when the child is not root) no permitted or
//! effective capability either. The bounding set is left alone: it is a ceiling, not a
//! privilege, and lowering it would break the setuid programs (sudo, ping) a build may run as
//! the user could without memtrack.

/// The capability sets of this process, bit N for capability N, from /proc/self/status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CapSets {
    /// CapEff.
    pub effective: u64,
    /// CapPrm.
    pub permitted: u64,
    /// CapInh.
    pub inheritable: u64,
    /// CapAmb (0 on kernels before 4.3, which have none).
    pub ambient: u64,
}

impl CapSets {
    /// Parse the `Cap*:` lines of a /proc/PID/status text; missing lines read as 0.
    pub fn parse(status: &str) -> CapSets {
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
                .unwrap_or(0)
        };
        CapSets {
            effective: field("CapEff:"),
            permitted: field("CapPrm:"),
            inheritable: field("CapInh:"),
            ambient: field("CapAmb:"),
        }
    }

    /// This process's sets.
    pub fn own() -> CapSets {
        std::fs::read_to_string("/proc/self/status")
            .map(|s| CapSets::parse(&s))
            .unwrap_or_default()
    }

    /// Whether a child running as a user other than root (`child_is_root` false) would keep
    /// something of these across exec unless [`clear_for_exec`] runs.
    pub fn leak_into_child(&self, child_is_root: bool) -> bool {
        self.ambient != 0
            || self.inheritable != 0
            || (!child_is_root && (self.permitted | self.effective) != 0)
    }
}

/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Give up every capability the exec'd program could inherit: the ambient set and the
/// inheritable set always, and the permitted and effective sets too unless the process is
/// root (real and effective uid 0), whose capabilities execve grants anew anyway. Call it last
/// before exec, after any setuid (which needs CAP_SETUID). Async-signal-safe (two system calls
/// and no allocation), for `Command::pre_exec`. Returns the failing call's errno, if one
/// failed; a kernel without ambient capabilities (EINVAL) is not a failure.
pub fn clear_for_exec() -> Result<(), i32> {
    // SAFETY: prctl with integer arguments only; getuid and geteuid cannot fail.
    let (rc, uid, euid) = unsafe {
        (
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
            ),
            libc::getuid(),
            libc::geteuid(),
        )
    };
    if rc != 0 {
        let errno = errno();
        if errno != libc::EINVAL {
            return Err(errno);
        }
    }
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    if uid == 0 && euid == 0 {
        // Root keeps what it has, minus the inheritable set.
        // SAFETY: header and data are valid for capget's version 3 layout (two CapData).
        if unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) } != 0 {
            return Err(errno());
        }
        for d in &mut data {
            d.inheritable = 0;
        }
    }
    // SAFETY: as above; capset only lowers sets here, which needs no capability.
    if unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) } != 0 {
        return Err(errno());
    }
    Ok(())
}

fn errno() -> i32 {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_lines() {
        let s = "Name:\tx\nCapInh:\t0000000000200000\nCapPrm:\t000000c000200000\n\
                 CapEff:\t000000c000200000\nCapBnd:\t000001ffffffffff\nCapAmb:\t0000000000000001\n";
        let c = CapSets::parse(s);
        assert_eq!(c.inheritable, 0x20_0000);
        assert_eq!(c.permitted, 0xc0_0020_0000);
        assert_eq!(c.effective, 0xc0_0020_0000);
        assert_eq!(c.ambient, 1);
        assert_eq!(CapSets::parse("garbage"), CapSets::default());
    }

    #[test]
    fn what_leaks_into_a_child() {
        let root = CapSets {
            effective: !0,
            permitted: !0,
            ..CapSets::default()
        };
        assert!(!root.leak_into_child(true), "root's own caps stay root's");
        assert!(
            root.leak_into_child(false),
            "a dropped child must lose them"
        );
        let ambient = CapSets {
            ambient: 1,
            ..CapSets::default()
        };
        assert!(ambient.leak_into_child(true));
        let inheritable = CapSets {
            inheritable: 1 << 21,
            ..CapSets::default()
        };
        assert!(inheritable.leak_into_child(true));
        assert!(!CapSets::default().leak_into_child(false));
    }
}
