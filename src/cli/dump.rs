//! `memtrack dump`'s flags as typed: the recording to print, which `dump::run` takes as it is.

use std::path::PathBuf;

use argh::FromArgs;

/// Print every event of a recording as one JSON object per line: the header, the events (times
/// are absolute CLOCK_MONOTONIC ns), then the trailer or where the damage is
/// (docs/dump-format.md lists every field and its unit).
#[derive(FromArgs, Debug)]
#[argh(
    subcommand,
    name = "dump",
    help_triggers("-h", "--help", "help"),
    example = "memtrack dump run.mt | head"
)]
pub struct DumpArgs {
    /// the recording to read
    #[argh(positional)]
    pub file: PathBuf,
}
