//! The `memtrack` binary: parse the command line, dispatch to the subcommand, and turn its
//! result into a message and an exit code. Everything else lives in the library: `cli` turns
//! the flags into each subcommand's validated options, which the subcommand runs on.

#![deny(unsafe_code)]

use std::ffi::OsString;
use std::io::{self, Write};
use std::process::ExitCode;

use memtrack::cli::{self, Command};
use memtrack::error::Error;
use memtrack::{check, control, diff, doctor, dump, record, report};

fn main() -> ExitCode {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let args = match cli::parse(&argv) {
        cli::Parsed::Run(cli) => cli,
        cli::Parsed::Print(text) => return print_help(&text),
        cli::Parsed::Fail { message, code } => {
            eprintln!("{message}");
            return ExitCode::from(code);
        }
    };
    init_logging(&args);
    let Some(command) = args.command else {
        unreachable!("cli::parse fails without a subcommand")
    };
    let subcommand = command.subcommand();
    match run(command) {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("memtrack: {e}");
            ExitCode::from(e.exit_code(subcommand) as u8)
        }
    }
}

fn init_logging(args: &cli::Cli) {
    let (quiet, verbose) = match &args.command {
        Some(Command::Record(r)) => (r.quiet, args.verbose + r.verbose),
        _ => (false, args.verbose),
    };
    let level = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, 2) => "debug",
        _ => "trace",
    };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(level))
        .format_timestamp(if verbose > 2 {
            Some(env_logger::TimestampPrecision::Micros)
        } else {
            None
        })
        .format_target(verbose > 1)
        .init();
}

/// Runs `command` on its validated options; returns the exit code.
fn run(command: Command) -> Result<i32, Error> {
    match command {
        Command::Record(a) => record::run(&a.try_into()?),
        Command::Report(a) => report::run(&a.try_into()?).map(|()| 0),
        Command::Check(a) => {
            check::run_check(&a.try_into()?, &mut io::stdout().lock()).map(verdict)
        }
        Command::Dump(a) => dump::run(&a.file, &mut io::stdout().lock()).map(|_| 0),
        Command::Doctor(_) => doctor::run(&mut io::stdout().lock())
            .map_err(|e| Error::io("standard output", e))
            .map(verdict),
        Command::Ctl(a) => control::ctl(&a.try_into()?, &mut io::stdout().lock()).map(|()| 0),
        Command::Diff(a) => diff::run_to(&a.try_into()?, &mut io::stdout().lock()).map(|()| 0),
    }
}

/// Prints help or the version on standard output. A reader that closed early (`memtrack report
/// --help | head -3`) ends it quietly with exit 0, as ripgrep does; `println!` panicked there.
/// Any other failure to write is one line and exit 2.
fn print_help(text: &str) -> ExitCode {
    let mut out = io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
            eprintln!("memtrack: cannot write to standard output: {e}");
            ExitCode::from(2)
        }
        _ => ExitCode::SUCCESS,
    }
}

/// The exit code of a verdict: 0 when it holds, 1 when it fails.
fn verdict(holds: bool) -> i32 {
    i32::from(!holds)
}
