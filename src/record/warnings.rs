//! What the drained records give reason to warn about at the end of a recording: a process
//! whose memory grew without one allocator event (an allocator memtrack did not find), and a
//! recording that saw nothing where it should have (no process, no allocator call, or a
//! container started elsewhere).
//!
//! In the flow kernel -> ring -> decode -> writer -> file, this sits beside the writer: the
//! drain loop (drain.rs) notes every decoded event here on its way to the file, and reads the
//! warnings for its closing summary.

use crate::format::{map_bits, EventKind, Exec};

/// Growth of one process's memory outside any allocator event, to warn about an allocator
/// memtrack did not find (stripped, or unknown to the catalogue). Growth is counted only while
/// the gate is open (`--control`): while measuring is paused no allocator event is recorded at
/// all, and a glibc program running then is not missing an allocator.
#[derive(Debug, Default)]
pub(super) struct Growth {
    allocator_events: u64,
    brk_bytes: u64,
    anon_bytes: u64,
    exe: Option<String>,
}

/// Break growth from which a process with no allocator events is suspicious: glibc's malloc
/// grows the break by at least 132 KiB at once, while a static program's start-up TLS takes a
/// few KiB.
const SUSPICIOUS_BRK_BYTES: u64 = 128 << 10;
/// Anonymous private mapping growth from which a process with no allocator events is
/// suspicious (the loader's own mappings stay far below).
const SUSPICIOUS_ANON_BYTES: u64 = 1 << 20;

impl Growth {
    /// Counts `kind`; `measuring` says whether the gate is open, as far as the drain knows: it
    /// is closed before the records up to a `stop` are drained, and opened after those up to a
    /// `start`, so growth near a flip is rather left out than counted without its allocations.
    pub(super) fn note(&mut self, kind: &EventKind, measuring: bool) {
        match kind {
            EventKind::Alloc { .. }
            | EventKind::Free { .. }
            | EventKind::Realloc { .. }
            | EventKind::AllocFailed { .. } => self.allocator_events += 1,
            EventKind::Brk { from, to } if measuring && to > from => self.brk_bytes += to - from,
            EventKind::Mmap { len, flags, .. }
                if measuring
                    && flags & map_bits::MAP_ANONYMOUS != 0
                    && flags & map_bits::MAP_SHARED == 0 =>
            {
                self.anon_bytes = self.anon_bytes.saturating_add(*len)
            }
            EventKind::Exec(Exec { filename, .. }) => self.exe = Some(filename.clone()),
            _ => {}
        }
    }

    /// The warning for process `pid`, if its growth is unexplained.
    pub(super) fn warning(&self, pid: u32) -> Option<String> {
        if self.allocator_events > 0
            || (self.brk_bytes < SUSPICIOUS_BRK_BYTES && self.anon_bytes < SUSPICIOUS_ANON_BYTES)
        {
            return None;
        }
        Some(format!(
            "pid {pid} ({}) grew its break by {} and its anonymous mappings by {} without a \
             single allocator event: its allocator is stripped or unknown to memtrack, so its \
             heap is not in the report (the mappings are)",
            self.exe.as_deref().unwrap_or("?"),
            crate::units::format_bytes(self.brk_bytes),
            crate::units::format_bytes(self.anon_bytes)
        ))
    }
}

/// Counts of what a recording saw, enough to say when it saw nothing where it should have
/// (issue 30; report/incomplete.rs's `unseen_reason` says it in the report).
#[derive(Default)]
pub(super) struct Seen {
    /// Exec events: every command's start is one.
    execs: u64,
    /// Allocator records (allocations, frees, reallocs, failures).
    allocator_calls: u64,
    /// Whether a process of the tree mapped a file with allocator probes.
    probed_mapped: bool,
    /// The first container client the tree ran to start a container (`docker run`).
    container_client: Option<String>,
}

/// Clients that ask a container runtime to run a program, and the subcommands that do: the
/// program then runs under the runtime's daemon (containerd-shim, conmon, the kubelet), not
/// under the recorded command, and is not recorded.
const CONTAINER_CLIENTS: &[(&str, &[&str])] = &[
    ("docker", &["run", "exec", "start", "compose"]),
    ("podman", &["run", "exec", "start", "compose"]),
    ("nerdctl", &["run", "exec", "start", "compose"]),
    ("kubectl", &["run", "exec", "debug", "apply", "create"]),
];

/// `docker run` (the client and its subcommand) when `exec` starts a container.
fn container_client(exec: &Exec) -> Option<String> {
    let name = exec.filename.rsplit('/').next()?;
    let (client, subcommands) = CONTAINER_CLIENTS.iter().find(|(c, _)| *c == name)?;
    // The subcommand comes first after the global options, some of which take a value
    // (`docker --context ci run`): one of the first two words that are not options.
    let sub = exec
        .argv
        .iter()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .take(2)
        .find(|a| subcommands.contains(&a.as_str()))?;
    Some(format!("{client} {sub}"))
}

impl Seen {
    /// Counts `kind`.
    pub(super) fn note(&mut self, kind: &EventKind) {
        match kind {
            EventKind::Exec(exec) => {
                self.execs += 1;
                if self.container_client.is_none() {
                    self.container_client = container_client(exec);
                }
            }
            EventKind::Alloc { .. }
            | EventKind::Free { .. }
            | EventKind::Realloc { .. }
            | EventKind::AllocFailed { .. } => self.allocator_calls += 1,
            EventKind::Coverage(c) if c.probes > 0 => self.probed_mapped = true,
            _ => {}
        }
    }

    /// The warning to print, if the recording saw nothing where it should have; `gated` when
    /// `--control` may rightly have kept every allocator call out.
    pub(super) fn warning(&self, gated: bool) -> Option<String> {
        if let Some(client) = &self.container_client {
            return Some(format!(
                "`{client}` runs the container's processes under the container runtime, not \
                 under this command, so they were not recorded: run memtrack inside the \
                 container instead (privileged, or with CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN; \
                 README, \"In containers and CI runners\")"
            ));
        }
        if self.execs == 0 {
            return Some(
                "not one process of the command was seen: every number is 0 and the report \
                 says incomplete (the recorder's pids did not match the kernel's, or the \
                 command could not be tracked); see `memtrack doctor`"
                    .to_string(),
            );
        }
        (self.allocator_calls == 0 && self.probed_mapped && !gated).then(|| {
            "not one allocator call was recorded although the processes mapped probed \
             allocators: the report says incomplete (a program that allocates nothing, or \
             probes that never fired; -v shows what was probed)"
                .to_string()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::AllocFunc;

    #[test]
    fn container_clients_that_start_containers_are_named() {
        let exec = |filename: &str, argv: &[&str]| Exec {
            filename: filename.into(),
            argv: argv.iter().map(|a| a.to_string()).collect(),
        };
        let run = exec(
            "/usr/bin/docker",
            &["docker", "--context", "ci", "run", "img"],
        );
        assert_eq!(container_client(&run).as_deref(), Some("docker run"));
        let kube = exec("kubectl", &["kubectl", "exec", "-it", "pod", "--", "make"]);
        assert_eq!(container_client(&kube).as_deref(), Some("kubectl exec"));
        assert_eq!(
            container_client(&exec("/usr/bin/docker", &["docker", "ps"])),
            None
        );
        assert_eq!(container_client(&exec("/bin/sh", &["sh", "run"])), None);
        let mut seen = Seen::default();
        seen.note(&EventKind::Exec(run));
        let w = seen.warning(false).unwrap();
        assert!(
            w.starts_with("`docker run` runs the container's processes"),
            "{w}"
        );
        assert!(w.contains("CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN"), "{w}");
    }

    fn anon(len: u64) -> EventKind {
        EventKind::Mmap {
            addr: 0x7f00_0000_0000,
            len,
            prot: 3,
            flags: map_bits::MAP_ANONYMOUS | 0x2,
        }
    }

    #[test]
    fn growth_without_allocator_events_warns() {
        let mut g = Growth::default();
        g.note(
            &EventKind::Exec(Exec {
                filename: "/bin/stripped".into(),
                argv: vec![],
            }),
            true,
        );
        g.note(&anon(8 << 20), true);
        let w = g.warning(42).expect("a warning");
        assert!(
            w.contains("pid 42 (/bin/stripped)") && !w.contains('\n'),
            "{w}"
        );
    }

    #[test]
    fn any_allocator_event_or_small_growth_is_no_warning() {
        let mut g = Growth::default();
        g.note(&anon(8 << 20), true);
        g.note(
            &EventKind::Free {
                func: AllocFunc::Free,
                addr: 1,
            },
            true,
        );
        assert!(g.warning(1).is_none());

        let mut small = Growth::default();
        small.note(
            &EventKind::Brk {
                from: 0x1000,
                to: 0x3000,
            },
            true,
        );
        small.note(&anon(64 << 10), true);
        assert!(
            small.warning(1).is_none(),
            "a static program's TLS, the loader's pages"
        );

        let mut shared = Growth::default();
        shared.note(
            &EventKind::Mmap {
                addr: 0,
                len: 64 << 20,
                prot: 3,
                flags: map_bits::MAP_ANONYMOUS | map_bits::MAP_SHARED,
            },
            true,
        );
        assert!(shared.warning(1).is_none(), "shared memory is not a heap");
    }

    #[test]
    fn growth_while_paused_is_not_counted() {
        let mut g = Growth::default();
        g.note(&anon(8 << 20), false);
        g.note(
            &EventKind::Brk {
                from: 0x1000,
                to: 0x1000 + (1 << 20),
            },
            false,
        );
        assert!(g.warning(3).is_none(), "no allocator call is recorded then");
        g.note(&anon(2 << 20), true);
        assert!(g.warning(3).is_some(), "growth while measuring still warns");
    }

    #[test]
    fn brk_growth_warns() {
        let mut g = Growth::default();
        g.note(
            &EventKind::Brk {
                from: 0x1000,
                to: 0x1000 + (132 << 10),
            },
            true,
        );
        assert!(g.warning(7).is_some());
    }
}
