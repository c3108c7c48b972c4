//! The recorded command's process group, treated the way a shell treats a job.
//!
//! The command starts in a process group of its own (its pid is the group id), so a signal
//! memtrack passes on (SIGINT, SIGTERM, SIGHUP, SIGQUIT sent to memtrack) reaches the command and
//! every descendant that stayed in its group, and never memtrack's neighbours in a pipeline
//! (`memtrack record -- cmd | tee log`). When memtrack runs in the foreground of a terminal, the
//! command's group gets the terminal, so ^C, ^Z and reads from the terminal reach the command
//! directly; memtrack takes it back when the tree is gone. When the command stops for job
//! control (^Z), memtrack stops too, so the shell sees the job stopped, and `fg`/`bg` continue
//! both.

use crate::sys::process;
use crate::sys::terminal::Lease;

/// The command's process group, and the terminal while the group holds it.
pub struct CommandGroup {
    pgid: i32,
    terminal: Option<Lease>,
}

impl CommandGroup {
    /// The group of the command just spawned as `pgid` (with `Command::process_group(0)`);
    /// lends it `terminal`, which the child already tried to take itself before exec. Dropping
    /// the group takes the terminal back if the group still holds it.
    pub fn new(pgid: i32, mut terminal: Option<Lease>) -> CommandGroup {
        if let Some(t) = &mut terminal {
            t.lend_to(pgid);
        }
        CommandGroup { pgid, terminal }
    }

    /// Pass `signal` on to every process of the group.
    pub fn signal(&self, signal: i32) {
        log::info!(
            "passing signal {signal} on to the command's process group {}",
            self.pgid
        );
        process::kill_group(self.pgid, signal);
    }

    /// The command's first process was stopped by `signal`. For job-control stops (^Z, or
    /// terminal access from the background) stop memtrack as well, then continue the group
    /// when memtrack is continued, giving it the terminal again if `fg` gave it to us.
    pub fn stopped(&self, signal: i32) {
        if !matches!(signal, libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU) {
            return; // SIGSTOP from someone else: theirs to continue
        }
        log::info!("the command was stopped (signal {signal}); stopping memtrack too");
        let terminal = self.terminal.as_ref().map(Lease::terminal);
        if let Some(t) = terminal {
            if t.foreground_group() == self.pgid {
                t.take_back();
            }
        }
        process::stop_self();
        if let Some(t) = terminal {
            if t.is_ours() {
                t.give_to(self.pgid);
            }
        }
        process::kill_group(self.pgid, libc::SIGCONT);
    }

    /// Take the terminal back if the group still holds it (also done on drop).
    pub fn restore_terminal(&self) {
        if let Some(t) = &self.terminal {
            t.restore();
        }
    }
}
