//! Starting the recorded command so that not one of its allocations is missed.
//!
//! The BPF side tracks every child of a process marked "spawner" from the instant the child is
//! created (sched_process_fork), so the recorder marks the guardian (guardian.rs) as spawner,
//! the guardian fork+execs the command with std's `Command`, and the recorder unmarks it. Between fork and exec the child runs only std's
//! prepared, allocation-free path (and, under sudo or on a terminal, the async-signal-safe hook
//! of `sys::process::prepare_child`); from exec on, the dynamic loader's first instruction is
//! already covered.
//!
//! The command gets a process group of its own (see `foreground.rs`) and, when `identity` says
//! so, runs as another user (see `identity.rs`), with that user's HOME, USER and LOGNAME; with
//! `--control`, MEMTRACK_CONTROL too (`env`).

use std::ffi::{OsStr, OsString};
use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::process::Command;

use crate::error::Error;
use crate::record::identity::Identity;
use crate::sys::process;

/// The command `argv` (program and arguments) ready to spawn in a new process group,
/// inheriting stdio and environment with `env` added; as `identity` when given; taking the
/// terminal `tty` for its group when given. The guardian (guardian.rs) spawns it, from inside
/// the mount namespace of the private allocator libraries when there is one.
pub fn command(
    argv: &[OsString],
    env: &[(&str, &OsStr)],
    identity: Option<&Identity>,
    tty: Option<RawFd>,
) -> Result<Command, Error> {
    let (program, args) = argv.split_first().ok_or_else(|| {
        Error::Usage("no command given; usage: memtrack record -- CMD [ARGS...]".into())
    })?;
    let mut cmd = Command::new(program);
    cmd.args(args).envs(env.iter().copied()).process_group(0);
    if let Some(id) = identity {
        cmd.env("USER", &id.name).env("LOGNAME", &id.name);
        if let Some(home) = &id.home {
            cmd.env("HOME", home);
        }
    }
    process::prepare_child(&mut cmd, identity.map(Identity::credentials), tty);
    Ok(cmd)
}

/// The error to report when spawning `program` failed with `e`.
pub fn spawn_error(program: &OsStr, e: std::io::Error) -> Error {
    match e.kind() {
        std::io::ErrorKind::NotFound => crate::record::resolve::not_found(program),
        _ => Error::CannotExecute {
            command: program.to_string_lossy().into_owned(),
            source: e,
        },
    }
}
