//! `memtrack ctl`'s flags as typed (one argh struct per action) and their `TryFrom` into
//! `control::CtlOptions`: the request first, then the FIFO it goes to.

use std::path::PathBuf;

use argh::FromArgs;

use crate::control::{self, CtlOptions, Request};
use crate::error::Error;
use crate::format::{Bench, ControlCommand, MarkerKind};
use crate::views::words;

use super::parse_pid;

/// Talk to a running `memtrack record --control PATH` from a harness: check that it listens
/// (hello), start or stop measuring, name the benchmark and the pid it runs in, or mark a point
/// of the harness's loop. Exits 0 when the recorder acknowledged, 1 when it refused or could not
/// be reached, 2 on a bad flag or when no control FIFO is given.
#[derive(FromArgs, Debug)]
#[argh(
    subcommand,
    help_triggers("-h", "--help", "help"),
    name = "ctl",
    example = "memtrack ctl bench 'parse::small' --pid $$ && memtrack ctl start",
    example = "memtrack ctl stop"
)]
pub struct CtlArgs {
    /// the control FIFO (default: $MEMTRACK_CONTROL, which `record --control` sets)
    #[argh(option)]
    pub control: Option<PathBuf>,
    #[argh(subcommand)]
    pub action: CtlAction,
}

/// What `memtrack ctl` sends.
#[derive(FromArgs, Debug)]
#[argh(subcommand)]
pub enum CtlAction {
    Hello(CtlHello),
    Start(CtlStart),
    Stop(CtlStop),
    Bench(CtlBench),
    Marker(CtlMarker),
}

/// Check that a recorder listens and speaks this memtrack's protocol; prints `memtrack control
/// protocol N`.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "hello", help_triggers("-h", "--help", "help"))]
pub struct CtlHello {}

/// Start measuring: once this returns, allocator calls are recorded.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "start", help_triggers("-h", "--help", "help"))]
pub struct CtlStart {}

/// Stop measuring: once this returns, allocator calls are not recorded.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "stop", help_triggers("-h", "--help", "help"))]
pub struct CtlStop {}

/// Name the benchmark that runs from now on, and the pid it runs in (with its descendants).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "bench", help_triggers("-h", "--help", "help"))]
pub struct CtlBench {
    /// the benchmark's URI (any text without control characters)
    #[argh(positional)]
    pub uri: String,
    /// the pid the benchmark runs in (default: the process that runs memtrack ctl, e.g. the
    /// harness shell; 0: every process)
    #[argh(option, from_str_fn(parse_pid))]
    pub pid: Option<u32>,
}

/// Mark a point of the harness's loop: sample_start, sample_end, round_start or round_end.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "marker", help_triggers("-h", "--help", "help"))]
pub struct CtlMarker {
    /// the kind of marker
    #[argh(positional, from_str_fn(parse_marker))]
    pub kind: MarkerKind,
}

/// `ctl marker KIND`.
fn parse_marker(value: &str) -> Result<MarkerKind, String> {
    MarkerKind::from_name(value).ok_or_else(|| {
        format!(
            "give {}",
            words::either(MarkerKind::ALL.map(MarkerKind::name))
        )
    })
}

impl TryFrom<CtlArgs> for CtlOptions {
    type Error = Error;

    /// The request first, then the FIFO: `--control PATH`, or `$MEMTRACK_CONTROL` without it.
    fn try_from(a: CtlArgs) -> Result<CtlOptions, Error> {
        let command = match a.action {
            CtlAction::Hello(_) => None,
            CtlAction::Start(_) => Some(ControlCommand::Start),
            CtlAction::Stop(_) => Some(ControlCommand::Stop),
            CtlAction::Bench(b) => Some(ControlCommand::Bench(Bench {
                uri: b.uri,
                pid: b.pid.unwrap_or_else(std::os::unix::process::parent_id),
            })),
            CtlAction::Marker(m) => Some(ControlCommand::Marker { kind: m.kind }),
        };
        let from_env = std::env::var_os(control::ENV_VAR).map(PathBuf::from);
        let fifo = a.control.or(from_env).ok_or_else(|| {
            Error::Usage(format!(
                "no control FIFO: give --control PATH, or run under `memtrack record --control \
                 PATH`, which sets ${}",
                control::ENV_VAR
            ))
        })?;
        let request = match command {
            Some(command) => Request::Command(command),
            None => Request::Hello {
                version: control::PROTOCOL_VERSION,
            },
        };
        Ok(CtlOptions { fifo, request })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::tests::{cli, help, refused};
    use crate::cli::Command;

    fn ctl(args: &[&str]) -> Result<CtlOptions, Error> {
        match cli(&[&["ctl"], args].concat()).command {
            Some(Command::Ctl(a)) => a.try_into(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn ctl_marker_kind_is_checked_before_the_fifo() {
        let (e, code) = refused(&["ctl", "marker", "frob"]);
        assert_eq!(
            e,
            "memtrack: kind frob: give sample_start, sample_end, round_start or round_end; \
             `memtrack ctl --help` lists what it takes"
        );
        assert_eq!(code, 2);
        let opts = ctl(&["--control", "/tmp/c", "marker", "round_end"]).unwrap();
        assert_eq!(
            opts.request,
            Request::Command(ControlCommand::Marker {
                kind: MarkerKind::RoundEnd
            })
        );
    }

    #[test]
    fn ctl_options_from_flags() {
        let opts = ctl(&["--control", "/tmp/c", "bench", "u", "--pid", "0"]).unwrap();
        assert_eq!(opts.fifo, PathBuf::from("/tmp/c"));
        assert_eq!(
            opts.request,
            Request::Command(ControlCommand::Bench(Bench {
                uri: "u".into(),
                pid: 0
            }))
        );
        let hello = ctl(&["--control", "/tmp/c", "hello"]).unwrap();
        assert!(matches!(hello.request, Request::Hello { .. }));
    }

    #[test]
    fn the_help_names_every_marker_kind() {
        let text = help(&["ctl", "marker"]);
        for kind in MarkerKind::ALL {
            assert!(text.contains(kind.name()), "{text}");
        }
    }
}
