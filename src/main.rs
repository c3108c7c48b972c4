//! The `memtrack` binary: parse the command line, dispatch to the subcommand, and turn its
//! result into a message and an exit code. Everything else lives in the library.

mod cli;

use std::io::Write;
use std::process::ExitCode;

use memtrack::error::{Error, Subcommand};
use memtrack::format::{ControlCommand, MarkerKind};
use memtrack::report::{CheckOptions, OutputFormat, ReportOptions, Rows};
use memtrack::{control, doctor, dump, record, report, units};

fn main() -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let (args, command) = match cli::parse(&argv) {
        cli::Parsed::Run { cli, command } => (cli, command),
        cli::Parsed::Print(text) => {
            println!("{text}");
            return ExitCode::SUCCESS;
        }
        cli::Parsed::Fail { message, code } => {
            eprintln!("{message}");
            return ExitCode::from(code);
        }
    };
    init_logging(&args);
    let Some(subcommand_args) = args.command else {
        unreachable!("cli::parse fails without a subcommand")
    };
    let subcommand = match subcommand_args {
        cli::Command::Record(_) => Subcommand::Record,
        _ => Subcommand::Other,
    };
    match run(subcommand_args, command.unwrap_or_default()) {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("memtrack: {e}");
            ExitCode::from(e.exit_code(subcommand) as u8)
        }
    }
}

fn init_logging(args: &cli::Cli) {
    let (quiet, verbose) = match &args.command {
        Some(cli::Command::Record(r)) => (r.quiet, args.verbose + r.verbose),
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
        .format_timestamp(None)
        .format_target(verbose > 1)
        .init();
}

/// Runs `command`; `record_command` is what `record` runs, exactly as given.
fn run(command: cli::Command, record_command: Vec<std::ffi::OsString>) -> Result<i32, Error> {
    match command {
        cli::Command::Record(a) => {
            let mut opts = record::RecordOptions::new(
                a.output,
                a.ring_size,
                record_command,
                !a.no_rss,
                a.quiet,
            )?
            .with_control(a.control, a.start_running)?;
            opts.probe_floor = a.probe_floor;
            opts.mappings = !a.no_mappings;
            opts.user = a.user;
            opts.ending = record::guardian::Ending::from_flags(a.grace.as_deref(), a.wait_all)?;
            for spec in &a.allocator {
                if spec == "python" {
                    opts.custom.extend(record::custom::python());
                } else {
                    opts.custom
                        .push(record::custom::parse(spec).map_err(Error::Usage)?);
                }
            }
            if a.python_objects && !a.allocator.iter().any(|s| s == "python") {
                opts.custom.extend(record::custom::python());
            }
            record::custom::check_unique(&opts.custom).map_err(Error::Usage)?;
            record::run(&opts, &memtrack::preflight::for_record()?)
        }
        cli::Command::Report(a) => {
            let format = match a.format.as_str() {
                "text" => OutputFormat::Text,
                "json" => OutputFormat::Json,
                other => return Err(Error::Usage(format!("--format {other}: give text or json"))),
            };
            let rows = match a.by.as_str() {
                "process" => Rows::Processes,
                "bench" => Rows::Benchmarks,
                other => return Err(Error::Usage(format!("--by {other}: give process or bench"))),
            };
            let opts = ReportOptions {
                format,
                pid: a.pid,
                tree: a.tree,
                rows,
            };
            report::run_report(&a.file, &opts, &mut std::io::stdout().lock())?;
            Ok(0)
        }
        cli::Command::Check(a) => {
            let size = |flag: &str, v: Option<String>| -> Result<Option<u64>, Error> {
                v.map(|s| {
                    units::parse_size(&s).map_err(|e| Error::Usage(format!("--{flag} {s}: {e}")))
                })
                .transpose()
            };
            let opts = CheckOptions {
                tree: a.tree,
                bench: a.bench,
                max_peak_heap: size("max-peak-heap", a.max_peak_heap)?,
                max_allocs: a.max_allocs,
                max_bytes: size("max-bytes", a.max_bytes)?,
                max_leaked: size("max-leaked", a.max_leaked)?,
                max_peak_rss: size("max-peak-rss", a.max_peak_rss)?,
                allow_incomplete: a.allow_incomplete,
            };
            let ok = report::run_check(&a.file, &opts, &mut std::io::stdout().lock())?;
            Ok(if ok { 0 } else { 1 })
        }
        cli::Command::Doctor(_) => {
            let ok = doctor::run(&mut std::io::stdout().lock())
                .map_err(|e| Error::io("standard output", e))?;
            Ok(if ok { 0 } else { 1 })
        }
        cli::Command::Ctl(a) => {
            let command = match a.action {
                cli::CtlAction::Hello(_) => None,
                cli::CtlAction::Start(_) => Some(ControlCommand::Start),
                cli::CtlAction::Stop(_) => Some(ControlCommand::Stop),
                cli::CtlAction::Bench(b) => Some(ControlCommand::Bench {
                    uri: b.uri,
                    pid: b.pid.unwrap_or_else(std::os::unix::process::parent_id),
                }),
                cli::CtlAction::Marker(m) => {
                    let kind = MarkerKind::from_name(&m.kind).ok_or_else(|| {
                        Error::Usage(format!(
                            "marker {}: give sample_start, sample_end, round_start or round_end",
                            m.kind
                        ))
                    })?;
                    Some(ControlCommand::Marker { kind })
                }
            };
            let hello = command.is_none();
            control::ctl(a.control.as_deref(), command)?;
            if hello {
                println!("memtrack control protocol {}", control::PROTOCOL_VERSION);
            }
            Ok(0)
        }
        cli::Command::Dump(a) => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            dump::run(&a.file, &mut out)?;
            let _ = out.flush();
            Ok(0)
        }
    }
}
