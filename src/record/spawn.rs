//! Starting the recorded command so that not one of its allocations is missed.
//!
//! The BPF side tracks every child of a process marked "spawner" from the instant the child is
//! created (sched_process_fork), so we mark ourselves as spawner, fork+exec the command with
//! std's `Command`, and unmark ourselves. Between fork and exec the child runs only std's
//! prepared, allocation-free path; from exec on, the dynamic loader's first instruction is
//! already covered.

use std::ffi::OsStr;
use std::process::{Child, Command};

use crate::error::Error;

/// Spawn `argv` (program and arguments), inheriting stdio and environment, with `env` added.
pub fn spawn(argv: &[String], env: &[(&str, &OsStr)]) -> Result<Child, Error> {
    let (program, args) = argv.split_first().ok_or_else(|| {
        Error::Usage("no command given; usage: memtrack record -- CMD [ARGS...]".into())
    })?;
    Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::CommandNotFound(program.clone()),
            _ => Error::CannotExecute {
                command: program.clone(),
                source: e,
            },
        })
}
