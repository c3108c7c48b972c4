//! The command line, in two steps (as ripgrep's lowargs and hiargs): first the flags as typed,
//! one argh struct per subcommand whose doc comments are the --help text; then one `TryFrom`
//! per subcommand into the validated options it runs on (`record::RecordOptions`,
//! `report::ReportOptions`, `check::CheckOptions`, `diff::DiffOptions`, `control::CtlOptions`).
//! This file holds the top level (`Cli`, `Command`, `parse`, argh's messages in our words) and
//! the value parsers more than one subcommand uses; each subcommand's file (`record`, `report`,
//! `check`, `diff`, `ctl`, `dump`, `doctor`) holds its argh struct, its own parsers, its
//! `TryFrom` and its tests. Every flag value is parsed once, at the argh edge (`from_str_fn`:
//! formats, orders, sizes, per cents, durations, allocator specs, marker kinds become their
//! types there, and argh's "Error parsing option" becomes our one line in `argh_message`); the
//! choices a flag lists come from its type's own name table; every conflict between flags is
//! caught in the `TryFrom`s, before anything is read, loaded or spawned. `main` only dispatches.

mod check;
mod ctl;
mod diff;
mod doctor;
mod dump;
mod record;
mod report;

use std::ffi::OsString;
use std::fmt;
use std::path::Path;

use argh::FromArgs;

use crate::analyze::suppress::Suppressions;
use crate::error::{Error, Subcommand};
use crate::model::measure::{self, Measure};
use crate::model::profile::{View, Weight};
use crate::views::rows::By;
use crate::views::words;

pub use check::CheckArgs;
pub use ctl::{CtlAction, CtlArgs, CtlBench, CtlHello, CtlMarker, CtlStart, CtlStop};
pub use diff::DiffArgs;
pub use doctor::DoctorArgs;
pub use dump::DumpArgs;
pub use record::{AllocatorFlag, RecordArgs};
pub use report::ReportArgs;

/// Record every heap allocation and resident-memory change of a command and all its
/// descendants with eBPF, and report on the recording.
#[derive(FromArgs, Debug)]
#[argh(
    help_triggers("-h", "--help", "help"),
    example = "sudo memtrack doctor",
    example = "sudo memtrack record -o run.mt -- cargo bench",
    example = "memtrack report run.mt",
    note = "On a new machine, start with `sudo memtrack doctor`. `memtrack <command> --help`
describes each command; README.md has examples and troubleshooting."
)]
pub struct Cli {
    /// print more (repeat for libbpf's own log); RUST_LOG overrides
    #[argh(switch, short = 'v')]
    pub verbose: u8,
    /// print memtrack's version and exit
    #[argh(switch, short = 'V')]
    pub version: bool,
    #[argh(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
// Parsed once per run: the size of `check`'s many limit flags costs nothing, and argh's
// subcommand enum takes the argument structs themselves, not boxes.
#[allow(clippy::large_enum_variant)]
#[derive(FromArgs, Debug)]
#[argh(subcommand)]
pub enum Command {
    /// `memtrack record`
    Record(RecordArgs),
    /// `memtrack report`
    Report(ReportArgs),
    /// `memtrack check`
    Check(CheckArgs),
    /// `memtrack dump`
    Dump(DumpArgs),
    /// `memtrack doctor`
    Doctor(DoctorArgs),
    /// `memtrack ctl`
    Ctl(CtlArgs),
    /// `memtrack diff`
    Diff(DiffArgs),
}

impl Command {
    /// Which subcommand this is, for the exit code of its errors.
    pub fn subcommand(&self) -> Subcommand {
        match self {
            Command::Record(_) => Subcommand::Record,
            _ => Subcommand::Other,
        }
    }
}

/// The subcommands' names, in the order "give a command" lists them (a unit test holds it to
/// `Command`'s, which --help lists in its own order).
const SUBCOMMANDS: [&str; 7] = ["record", "report", "check", "diff", "dump", "doctor", "ctl"];

/// `--max-count N`: a plain count.
fn parse_count(value: &str) -> Result<u64, String> {
    value.parse().map_err(|_| {
        "give a whole number, e.g. 1500 (unit suffixes such as 1.5k are for the SIZE flags)".into()
    })
}

/// `--pid`, `--tree`: a process id.
fn parse_pid(value: &str) -> Result<u32, String> {
    value
        .parse()
        .map_err(|_| "give a process id (a whole number, as `memtrack report FILE` lists)".into())
}

/// The value `names` gives `value`, else the names as the error ("give a, b or c").
fn named<T: Copy>(names: &[(&str, T)], value: &str) -> Result<T, String> {
    names
        .iter()
        .find(|(n, _)| *n == value)
        .map(|&(_, v)| v)
        .ok_or_else(|| format!("give {}", words::either(names.iter().map(|(n, _)| *n))))
}

/// The value `table` gives the measure `value` names (by its word or an older one), else the
/// table's words as the error ("give a, b or c").
fn measured<T: Copy>(table: &[(Measure, T)], value: &str) -> Result<T, String> {
    measure::pick(table, value)
        .ok_or_else(|| format!("give {}", words::either(measure::words(table))))
}

/// `--by` of `report` and `check`: the value `offered` (the command's table) gives the word
/// `value` of `By::NAMES`, else the words it offers ("give run or bench"), so a word of the
/// other command is refused the same way as a word of neither.
fn by<T: Copy>(offered: &[(By, T)], value: &str) -> Result<T, String> {
    let by = named(&By::NAMES, value).ok();
    offered
        .iter()
        .find(|(b, _)| Some(*b) == by)
        .map(|&(_, v)| v)
        .ok_or_else(|| {
            format!(
                "give {}",
                words::either(offered.iter().map(|(b, _)| b.word()))
            )
        })
}

/// `report --view`, `diff --view`.
fn parse_view(value: &str) -> Result<View, String> {
    value
        .parse()
        .map_err(|()| format!("give {}", words::either(View::words())))
}

/// `report --weight`, `diff --weight`.
fn parse_weight(value: &str) -> Result<Weight, String> {
    named(&Weight::ALL, value)
}

/// What the command line asks for, once parsed.
// Made once per run and moved once: the size of the `Run` variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Parsed {
    /// Run a subcommand. For `record`, `RecordArgs::command` is the recorded command exactly as
    /// given (any bytes, not only UTF-8).
    Run(Cli),
    /// Print this on stdout and exit 0 (`--help`, `-h`, `help`, `--version`).
    Print(String),
    /// Print this one line on stderr and exit with `code`: 2, or 125 for `record`.
    Fail { message: String, code: u8 },
}

/// The name of the subcommand `args` (without the program name) asks for, if any: the first
/// argument that is not a flag. Top-level flags take no value, so nothing else can come first.
fn subcommand_of(args: &[String]) -> Option<&str> {
    args.iter()
        .map(String::as_str)
        .find(|a| !a.starts_with('-'))
}

/// Parses `argv` (program name first). Every argument but the recorded command's must be UTF-8;
/// the recorded command's are passed through untouched.
pub fn parse(argv: &[OsString]) -> Parsed {
    let args: Vec<String> = argv
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let sub = subcommand_of(&args).map(str::to_string);
    let code = if sub.as_deref() == Some("record") {
        EXIT_RECORD_USAGE
    } else {
        EXIT_USAGE
    };
    let help = match &sub {
        Some(s) if is_subcommand(s) => format!("`memtrack {s} --help`"),
        _ => "`memtrack --help`".to_string(),
    };
    let fail = |what: String| Parsed::Fail {
        message: format!("memtrack: {what}; {help} lists what it takes"),
        code,
    };
    let strs: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cli = match Cli::from_args(&["memtrack"], &strs) {
        Ok(cli) => cli,
        Err(early) if early.status.is_ok() => return Parsed::Print(early.output),
        Err(early) => {
            let mut what = argh_message(&early.output);
            // A missing positional: say the usage and an example, not only its name.
            if early
                .output
                .starts_with("Required positional arguments not provided")
            {
                if let Some(usage) = sub.as_deref().and_then(usage_of) {
                    what = format!("{what}: {usage}");
                }
            }
            return fail(what);
        }
    };
    if cli.version {
        return Parsed::Print(format!("memtrack {}", env!("CARGO_PKG_VERSION")));
    }
    let tail = match &cli.command {
        Some(Command::Record(r)) => r.command.len(),
        Some(_) => 0,
        None => return fail(format!("give a command: {}", words::either(SUBCOMMANDS))),
    };
    // A greedy positional takes every argument after its first, so the recorded command is
    // exactly the last `tail` arguments.
    let rest = argv.get(1..).unwrap_or_default();
    let (flags, command) = rest.split_at(rest.len() - tail);
    if let Some(bad) = flags.iter().find(|a| a.to_str().is_none()) {
        return fail(format!(
            "argument '{}' is not valid UTF-8: memtrack's own flags and file names must be \
             (the recorded command's arguments, after --, may be any bytes)",
            bad.to_string_lossy()
        ));
    }
    if let Some(Command::Record(r)) = &mut cli.command {
        r.command = command.to_vec();
    }
    Parsed::Run(cli)
}

/// Exit code of a bad flag of `report`, `check`, `dump`, `ctl` and `doctor`.
const EXIT_USAGE: u8 = 2;
/// Exit code of a bad flag of `record`, whose other codes are the command's.
const EXIT_RECORD_USAGE: u8 = 125;

fn is_subcommand(name: &str) -> bool {
    SUBCOMMANDS.contains(&name)
}

/// The short usage of subcommand `sub` from its help ("usage: memtrack diff [options] <base>
/// <new>"), with its first example, if it has one.
fn usage_of(sub: &str) -> Option<String> {
    let help = match Cli::from_args(&["memtrack"], &[sub, "--help"]) {
        Err(early) if early.status.is_ok() => early.output,
        _ => return None,
    };
    let mut lines = help.lines().map(str::trim);
    let full = lines
        .find_map(|l| l.strip_prefix("Usage: "))?
        .replace(" [--]", "");
    // "memtrack diff [--format <format>] ... [--] <base> <new>": the options in one word.
    let usage = match (full.find(" ["), full.rfind("] ")) {
        (Some(first), Some(last)) => {
            format!("{} [options] {}", &full[..first], &full[last + 2..])
        }
        _ => full.to_string(),
    };
    let example = help
        .lines()
        .skip_while(|l| !l.starts_with("Examples:"))
        .nth(1)
        .map(str::trim);
    Some(match example {
        Some(e) => format!("usage: {usage}, e.g. {e}"),
        None => format!("usage: {usage}"),
    })
}

/// argh's error text on one line, in our words where we know its form.
fn argh_message(output: &str) -> String {
    let lines: Vec<&str> = output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let first = lines.first().copied().unwrap_or("bad arguments");
    if let Some(rest) = first.strip_prefix("Error parsing option '") {
        // "Error parsing option '--max-count' with value '1.5k': invalid digit found in string"
        if let Some((flag, rest)) = rest.split_once("' with value '") {
            if let Some((value, why)) = rest.split_once("': ") {
                if why == "duplicate values provided" {
                    return format!(
                        "{flag} was given twice ({value} the second time); give it once"
                    );
                }
                // A parser whose message names the flag itself (`--allocator`) says it all.
                if why.starts_with(flag) {
                    return why.to_string();
                }
                return format!("{flag} {value}: {why}");
            }
        }
    }
    if let Some(rest) = first.strip_prefix("Error parsing positional argument '") {
        // "Error parsing positional argument 'kind' with value 'frob': give sample_start, ..."
        if let Some((name, rest)) = rest.split_once("' with value '") {
            if let Some((value, why)) = rest.split_once("': ") {
                return format!("{name} {value}: {why}");
            }
        }
    }
    if let Some(arg) = first.strip_prefix("Unrecognized argument: ") {
        let hint = lines
            .get(1)
            .map(|l| format!(" ({})", l.trim_end_matches('?').to_lowercase() + "?"))
            .unwrap_or_default();
        return format!("unknown argument '{arg}'{hint}");
    }
    if first.starts_with("Required positional arguments not provided")
        || first.starts_with("Required options not provided")
    {
        return format!("missing {}", lines[1..].join(", "));
    }
    if first.starts_with("One of the following subcommands must be present") {
        let names: Vec<&str> = lines[1..]
            .iter()
            .copied()
            .filter(|l| *l != "help")
            .collect();
        return format!("give one of: {}", names.join(", "));
    }
    lines.join(" ")
}

/// The usage error for `value` given to `flag`: "FLAG VALUE: WHY", as every flag checked after
/// argh says it.
fn bad_value(flag: &str, value: &str, why: impl fmt::Display) -> Error {
    Error::Usage(format!("{flag} {value}: {why}"))
}

/// Reads and parses the suppression file of `--suppress` (report and check); a bad line is a
/// usage error naming its line.
fn load_suppressions(path: &Path) -> Result<Suppressions, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::Usage(format!(
            "--suppress {}: cannot read it ({e}); give a file of leak:PATTERN lines",
            path.display()
        ))
    })?;
    Suppressions::parse(&path.display().to_string(), &text)
        .map_err(|e| Error::Usage(format!("--suppress {e}")))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The `Cli` of `args` (without the program name), which must parse.
    pub(crate) fn cli(args: &[&str]) -> Cli {
        let argv: Vec<OsString> = std::iter::once("memtrack")
            .chain(args.iter().copied())
            .map(OsString::from)
            .collect();
        match parse(&argv) {
            Parsed::Run(cli) => cli,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    /// The line and exit code of a value argh's parsers refuse (program name not included).
    pub(crate) fn refused(args: &[&str]) -> (String, u8) {
        let argv: Vec<OsString> = std::iter::once("memtrack")
            .chain(args.iter().copied())
            .map(OsString::from)
            .collect();
        match parse(&argv) {
            Parsed::Fail { message, code } => (message, code),
            other => panic!("{args:?} parsed: {other:?}"),
        }
    }

    /// The message of a usage error.
    pub(crate) fn usage<T: fmt::Debug>(result: Result<T, Error>) -> String {
        match result {
            Err(Error::Usage(m)) => m,
            other => panic!("not a usage error: {other:?}"),
        }
    }

    /// The --help of `args` (a subcommand's words, without the program name).
    pub(crate) fn help(args: &[&str]) -> String {
        let argv: Vec<OsString> = std::iter::once("memtrack")
            .chain(args.iter().copied())
            .chain(["--help"])
            .map(OsString::from)
            .collect();
        match parse(&argv) {
            Parsed::Print(text) => text,
            other => panic!("{args:?} --help: {other:?}"),
        }
    }

    /// Asserts that the --help of `sub` names each of `names` as a word in what it says of
    /// `flag` (from its line to the next flag's), so a choice added to a name table cannot be
    /// left out of the help typed beside it.
    pub(crate) fn help_names<'a>(
        sub: &[&str],
        flag: &str,
        names: impl IntoIterator<Item = &'a str>,
    ) {
        let text = help(sub);
        let start = text
            .lines()
            .position(|l| l.trim_start().starts_with(&format!("{flag} ")))
            .unwrap_or_else(|| panic!("{sub:?} --help has no {flag}:\n{text}"));
        let said: Vec<&str> = text
            .lines()
            .skip(start)
            .enumerate()
            .take_while(|(i, l)| {
                *i == 0 || !(l.trim().is_empty() || l.trim_start().starts_with('-'))
            })
            .map(|(_, l)| l)
            .collect();
        let said = said.join(" ");
        let words: Vec<&str> = said
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .collect();
        for name in names {
            assert!(
                words.contains(&name),
                "{sub:?} --help says of {flag} without naming {name}: {said}"
            );
        }
    }

    #[test]
    fn the_subcommand_names_are_commands() {
        let mut ours = SUBCOMMANDS.to_vec();
        let mut argh: Vec<&str> = <Command as argh::SubCommands>::COMMANDS
            .iter()
            .map(|c| c.name)
            .collect();
        ours.sort_unstable();
        argh.sort_unstable();
        assert_eq!(ours, argh);
        assert_eq!(
            refused(&[]).0,
            "memtrack: give a command: record, report, check, diff, dump, doctor or ctl; \
             `memtrack --help` lists what it takes"
        );
    }

    #[test]
    fn measured_takes_the_words_and_the_old_words() {
        let table = [(Measure::Allocated, 'a'), (Measure::Count, 'c')];
        assert_eq!(measured(&table, "allocated"), Ok('a'));
        assert_eq!(measured(&table, "bytes"), Ok('a'));
        assert_eq!(measured(&table, "allocs"), Ok('c'));
        assert_eq!(
            measured(&table, "peak"),
            Err("give allocated or count".to_string())
        );
    }

    #[test]
    fn named_lists_the_table() {
        let names = [("one", 1), ("two", 2), ("three", 3)];
        assert_eq!(named(&names, "two"), Ok(2));
        assert_eq!(
            named(&names, "four"),
            Err("give one, two or three".to_string())
        );
        assert_eq!(named(&names[..1], "four"), Err("give one".to_string()));
    }

    #[test]
    fn the_recorded_command_is_kept_byte_for_byte() {
        use std::os::unix::ffi::OsStrExt;
        let arg = OsString::from(std::ffi::OsStr::from_bytes(b"a\xffb"));
        let argv = ["memtrack", "record", "--", "echo"]
            .map(OsString::from)
            .into_iter()
            .chain([arg.clone()])
            .collect::<Vec<_>>();
        let Parsed::Run(Cli {
            command: Some(Command::Record(r)),
            ..
        }) = parse(&argv)
        else {
            panic!("record did not parse")
        };
        assert_eq!(r.command, [OsString::from("echo"), arg]);
    }
}
