//! `memtrack diff`'s flags as typed and their `TryFrom` into `diff::DiffOptions`: the format
//! (from `DiffFormat::NAMES`), the sites, and what the differential stack formats weigh.

use std::path::PathBuf;

use argh::FromArgs;

use crate::analyze::stacks::DEFAULT_TOP;
use crate::diff::{DiffFormat, DiffOptions};
use crate::error::Error;
use crate::model::profile::{View, Weight};

use super::{bad_value, named, parse_count, parse_view, parse_weight};

/// Compare two recordings (e.g. main's and a pull request's): the whole run, each benchmark (by
/// URI), each process (matched by command and position in the tree, since pids differ) and,
/// with --stacks, the allocation sites and resident memory by site (matched by function and
/// module). Every metric with both
/// values, the change and the relative change, largest relative change first. Exits 0, or 2 on
/// a bad file or flag; `memtrack check NEW --baseline BASE` turns the comparison into a verdict.
#[derive(FromArgs, Debug)]
#[argh(
    subcommand,
    help_triggers("-h", "--help", "help"),
    name = "diff",
    example = "memtrack diff main.mt branch.mt",
    example = "memtrack diff main.mt branch.mt --stacks --format json",
    example = "memtrack diff main.mt branch.mt --format flamegraph > diff.svg",
    note = "--format folded and flamegraph compare the call stacks of two recordings made without
--no-stacks, frames named by function and module so that two builds line up: folded prints
`stack base new` per stack (the input of inferno-flamegraph and flamegraph.pl, as
inferno-diff-folded and difffolded.pl write it), flamegraph draws it (widths from the new
recording, red where it has more than the base, blue where less). They weigh allocated bytes
unless --view and --weight say otherwise."
)]
pub struct DiffArgs {
    /// the recording to compare against (e.g. main's)
    #[argh(positional)]
    pub base: PathBuf,
    /// the recording to compare (e.g. the branch's)
    #[argh(positional)]
    pub new: PathBuf,
    /// output format: text (default), json, or, for two recordings with call stacks, folded
    /// (differential folded stacks) or flamegraph (a differential flame graph SVG)
    #[argh(option, default = "DiffFormat::Text", from_str_fn(parse_diff_format))]
    pub format: DiffFormat,
    /// also compare the allocation sites and, when both have them, the resident memory by site
    /// (both recordings need call stacks: not --no-stacks)
    #[argh(switch)]
    pub stacks: bool,
    /// how many changed sites to list (default 10, 0 for all); implies --stacks
    #[argh(option, from_str_fn(parse_count))]
    pub top: Option<u64>,
    /// what folded and flamegraph weigh: allocated (default), peak (live at each recording's
    /// heap peak), leaked, temporary, resident (at each recording's resident peak) or faulted
    #[argh(option, from_str_fn(parse_view))]
    pub view: Option<View>,
    /// what folded and flamegraph weigh blocks by: bytes (default) or count
    #[argh(option, from_str_fn(parse_weight))]
    pub weight: Option<Weight>,
    /// draw the flame graph's widths from the base recording, so stacks the new one no longer
    /// has show (the hues stay: red is more in the new recording)
    #[argh(switch)]
    pub base_widths: bool,
    /// write the comparison to this file instead of standard output (a file is replaced only
    /// once it is complete; a device or FIFO is written in place)
    #[argh(option, short = 'o')]
    pub output: Option<PathBuf>,
}

/// `diff --format`.
fn parse_diff_format(value: &str) -> Result<DiffFormat, String> {
    named(&DiffFormat::NAMES, value)
}

impl TryFrom<DiffArgs> for DiffOptions {
    type Error = Error;

    fn try_from(a: DiffArgs) -> Result<DiffOptions, Error> {
        let format = a.format;
        let stack_format = matches!(format, DiffFormat::Folded | DiffFormat::Flamegraph);
        if !stack_format && (a.view.is_some() || a.weight.is_some()) {
            return Err(Error::Usage(
                "--view and --weight choose what --format folded and flamegraph weigh: give \
                 them with one of those (text and json list every value of each site)"
                    .into(),
            ));
        }
        if a.base_widths && format != DiffFormat::Flamegraph {
            return Err(Error::Usage(
                "--base-widths chooses the widths of the flame graph: give it with --format \
                 flamegraph"
                    .into(),
            ));
        }
        if stack_format && a.top.is_some() {
            return Err(Error::Usage(format!(
                "--top chooses how many changed sites text and json list; --format {} has \
                 every stack: drop it",
                format.name()
            )));
        }
        // The diff's question is what a change made a program do, so allocated is its default
        // view, where report's is the peak.
        let view = a.view.unwrap_or(View::Allocated);
        let weight = a.weight.unwrap_or_default();
        let top = match a.top {
            Some(n) => usize::try_from(n)
                .map_err(|_| bad_value("--top", &n.to_string(), "give a count of sites"))?,
            None => DEFAULT_TOP,
        };
        if let Some(path) = &a.output {
            crate::output::validate_output(path, "diff.txt")?;
        }
        Ok(DiffOptions {
            base: a.base,
            new: a.new,
            format,
            stacks: a.stacks || a.top.is_some(),
            top,
            view,
            weight,
            base_widths: a.base_widths,
            output: a.output,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::tests::{cli, help_names, refused, usage};
    use crate::cli::Command;

    fn diff(args: &[&str]) -> Result<DiffOptions, Error> {
        match cli(&[&["diff", "a.mt", "b.mt"], args].concat()).command {
            Some(Command::Diff(a)) => a.try_into(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn diff_stack_formats_weigh_allocated_bytes_unless_told() {
        let opts = diff(&["--format", "folded"]).unwrap();
        assert_eq!(
            (opts.format, opts.view, opts.weight, opts.base_widths),
            (DiffFormat::Folded, View::Allocated, Weight::Bytes, false)
        );
        let opts = diff(&[
            "--format",
            "flamegraph",
            "--view",
            "leaked",
            "--weight",
            "count",
            "--base-widths",
        ])
        .unwrap();
        assert_eq!(
            (opts.format, opts.view, opts.weight, opts.base_widths),
            (DiffFormat::Flamegraph, View::Leaked, Weight::Count, true)
        );
    }

    #[test]
    fn diff_flags_that_do_not_fit_the_format_are_usage() {
        assert_eq!(
            refused(&["diff", "a.mt", "b.mt", "--format", "svg"]),
            (
                "memtrack: --format svg: give text, json, folded or flamegraph; `memtrack diff \
                 --help` lists what it takes"
                    .to_string(),
                2
            )
        );
        let e = usage(diff(&["--view", "peak"]));
        assert!(e.starts_with("--view and --weight choose"), "{e}");
        let e = usage(diff(&["--format", "folded", "--base-widths"]));
        assert!(e.starts_with("--base-widths chooses"), "{e}");
        let e = usage(diff(&["--format", "folded", "--top", "3"]));
        assert!(e.starts_with("--top chooses"), "{e}");
        assert_eq!(
            refused(&["diff", "a.mt", "b.mt", "--format", "folded", "--view", "live"]).0,
            "memtrack: --view live: give peak, allocated, leaked, temporary, resident or faulted; \
             `memtrack diff --help` lists what it takes"
        );
    }

    #[test]
    fn the_help_names_every_choice() {
        help_names(&["diff"], "--format", DiffFormat::NAMES.map(|(n, _)| n));
        help_names(&["diff"], "--view", View::words());
        help_names(&["diff"], "--weight", Weight::ALL.map(|(n, _)| n));
    }
}
