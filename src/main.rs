//! The `memtrack` binary: parse the command line, dispatch to the subcommand, and turn its
//! result into a message and an exit code. Everything else lives in the library.

mod cli;

use std::io::Write;
use std::process::ExitCode;

use memtrack::error::{Error, Subcommand};
use memtrack::report::{CheckOptions, OutputFormat, ReportOptions};
use memtrack::{doctor, dump, record, report, units};

fn main() -> ExitCode {
    let args: cli::Cli = argh::from_env();
    init_logging(&args);
    let subcommand = match args.command {
        cli::Command::Record(_) => Subcommand::Record,
        _ => Subcommand::Other,
    };
    match run(args.command) {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("memtrack: {e}");
            ExitCode::from(e.exit_code(subcommand) as u8)
        }
    }
}

fn init_logging(args: &cli::Cli) {
    let (quiet, verbose) = match &args.command {
        cli::Command::Record(r) => (r.quiet, args.verbose + r.verbose),
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

fn run(command: cli::Command) -> Result<i32, Error> {
    match command {
        cli::Command::Record(a) => {
            let mut opts =
                record::RecordOptions::new(a.output, a.ring_size, a.command, !a.no_rss, a.quiet)?;
            opts.probe_floor = a.probe_floor;
            opts.mappings = !a.no_mappings;
            opts.user = a.user;
            record::run(&opts)
        }
        cli::Command::Report(a) => {
            let format = match a.format.as_str() {
                "text" => OutputFormat::Text,
                "json" => OutputFormat::Json,
                other => return Err(Error::Usage(format!("--format {other}: give text or json"))),
            };
            let opts = ReportOptions {
                format,
                pid: a.pid,
                tree: a.tree,
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
                max_peak_heap: size("max-peak-heap", a.max_peak_heap)?,
                max_allocs: a.max_allocs,
                max_bytes: size("max-bytes", a.max_bytes)?,
                max_leaked: size("max-leaked", a.max_leaked)?,
                max_peak_rss: size("max-peak-rss", a.max_peak_rss)?,
            };
            let ok = report::run_check(&a.file, &opts, &mut std::io::stdout().lock())?;
            Ok(if ok { 0 } else { 1 })
        }
        cli::Command::Doctor(_) => {
            let ok = doctor::run(&mut std::io::stdout().lock())
                .map_err(|e| Error::io("standard output", e))?;
            Ok(if ok { 0 } else { 1 })
        }
        cli::Command::Dump(a) => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            dump::run(&a.file, &mut out)?;
            let _ = out.flush();
            Ok(0)
        }
    }
}
