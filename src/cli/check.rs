//! `memtrack check`'s flags as typed and their `TryFrom` into `check::CheckOptions`: the limits
//! (sizes, counts, per cents over a baseline) and the scope they apply to; a check without a
//! limit, or an increase limit without a baseline, is refused here.

use std::path::PathBuf;

use argh::FromArgs;

use crate::check::{self, CheckOptions};
use crate::error::Error;
use crate::model::metrics::Scope;
use crate::units;
use crate::views::rows::By;

use super::{by, load_suppressions, parse_count, parse_pid};

/// Fail (exit 1) when a recording exceeds memory limits; exit 0 when all hold, 2 on a bad file
/// or flag, and 2 on a recording that lost events or is damaged (its numbers may be wrong
/// either way) unless --allow-incomplete, or a limit fails that more events could not make
/// pass. SIZE takes plain bytes or units: 64MiB, 1.5GB, 512k.
#[derive(FromArgs, Debug)]
#[argh(
    subcommand,
    help_triggers("-h", "--help", "help"),
    name = "check",
    example = "memtrack check run.mt --max-peak-heap 64MiB --max-leaked 0"
)]
pub struct CheckArgs {
    /// the recording to read
    #[argh(positional)]
    pub file: PathBuf,
    /// check only this process and its descendants (default: the whole run)
    #[argh(option, from_str_fn(parse_pid))]
    pub tree: Option<u32>,
    /// check only this benchmark: its pid tree inside its measuring windows
    #[argh(option)]
    pub bench: Option<String>,
    /// highest allowed peak of live heap (SIZE)
    #[argh(option, from_str_fn(parse_size))]
    pub max_peak_heap: Option<u64>,
    /// highest allowed count of allocations
    #[argh(option, from_str_fn(parse_count))]
    pub max_count: Option<u64>,
    /// the older name of --max-count, kept for scripts
    #[argh(option, hidden_help, from_str_fn(parse_count))]
    pub max_allocs: Option<u64>,
    /// highest allowed total of bytes allocated (SIZE)
    #[argh(option, from_str_fn(parse_size))]
    pub max_allocated: Option<u64>,
    /// the older name of --max-allocated, kept for scripts
    #[argh(option, hidden_help, from_str_fn(parse_size))]
    pub max_bytes: Option<u64>,
    /// highest allowed heap leaked when processes exit (SIZE): with the leak scan (recordings
    /// since format version 5), the bytes definitely lost, plus all the leaked bytes of
    /// processes that could not be scanned; in older recordings, every byte still live
    #[argh(option, from_str_fn(parse_size))]
    pub max_leaked: Option<u64>,
    /// highest allowed heap still reachable when processes exit (SIZE), by the leak scan
    #[argh(option, from_str_fn(parse_size))]
    pub max_reachable: Option<u64>,
    /// highest allowed peak resident memory, anon + file + shmem (SIZE)
    #[argh(option, from_str_fn(parse_size))]
    pub max_peak_rss: Option<u64>,
    /// check a recording that lost events or is damaged on what it holds (by default it is
    /// refused with exit 2, since its numbers may be wrong either way)
    #[argh(switch)]
    pub allow_incomplete: bool,
    /// compare with this recording (e.g. main's): the --max-*-increase limits are increases
    /// over it, for the same scope (the run, or --bench by URI)
    #[argh(option)]
    pub baseline: Option<PathBuf>,
    /// highest allowed increase over --baseline of every metric both recordings have, in per
    /// cent (e.g. 5%); any increase from 0 fails it
    #[argh(option, from_str_fn(parse_percent))]
    pub max_increase: Option<u64>,
    /// highest allowed increase over --baseline of every metric in bytes (SIZE), a limit of
    /// its own beside the per cent ones
    #[argh(option, from_str_fn(parse_size))]
    pub max_increase_bytes: Option<u64>,
    /// highest allowed increase of the peak heap over --baseline, in per cent (replaces
    /// --max-increase for it; likewise the flags below)
    #[argh(option, from_str_fn(parse_percent))]
    pub max_peak_heap_increase: Option<u64>,
    /// highest allowed increase of the count of allocations, in per cent
    #[argh(option, from_str_fn(parse_percent))]
    pub max_count_increase: Option<u64>,
    /// the older name of --max-count-increase, kept for scripts
    #[argh(option, hidden_help, from_str_fn(parse_percent))]
    pub max_allocs_increase: Option<u64>,
    /// highest allowed increase of the bytes allocated, in per cent
    #[argh(option, from_str_fn(parse_percent))]
    pub max_allocated_increase: Option<u64>,
    /// the older name of --max-allocated-increase, kept for scripts
    #[argh(option, hidden_help, from_str_fn(parse_percent))]
    pub max_bytes_increase: Option<u64>,
    /// highest allowed increase of the leaked bytes, in per cent
    #[argh(option, from_str_fn(parse_percent))]
    pub max_leaked_increase: Option<u64>,
    /// highest allowed increase of the leaked blocks, in per cent
    #[argh(option, from_str_fn(parse_percent))]
    pub max_leaked_blocks_increase: Option<u64>,
    /// highest allowed increase of the temporary allocations, in per cent
    #[argh(option, from_str_fn(parse_percent))]
    pub max_temporary_increase: Option<u64>,
    /// highest allowed increase of the peak resident memory, in per cent
    #[argh(option, from_str_fn(parse_percent))]
    pub max_peak_rss_increase: Option<u64>,
    /// highest allowed increase of the peak mapped bytes, in per cent
    #[argh(option, from_str_fn(parse_percent))]
    pub max_peak_mapped_increase: Option<u64>,
    /// what the limits apply to: run (default: the run, or --bench) or bench (each benchmark
    /// of the recording, one line per limit and benchmark)
    #[argh(option, long = "by", default = "false", from_str_fn(parse_check_by))]
    pub by_bench: bool,
    /// leak suppressions: a file of leak:PATTERN lines (LeakSanitizer's syntax, # comments)
    /// matched against the stacks of definitely lost blocks, which --max-leaked then leaves
    /// out (needs a recording made with --stacks)
    #[argh(option)]
    pub suppress: Option<PathBuf>,
}

/// What `check --by` offers of `report`'s words: whether the limits apply to each benchmark.
const BY_BENCH: [(By, bool); 2] = [(By::Run, false), (By::Bench, true)];

/// `check --by`.
fn parse_check_by(value: &str) -> Result<bool, String> {
    by(&BY_BENCH, value)
}

/// The limit of a flag renamed to a measure's word (`--max-count`, once `--max-allocs`): the
/// one given, by either name; both is refused, since they could disagree.
fn renamed(
    (new, new_flag): (Option<u64>, &str),
    (old, old_flag): (Option<u64>, &str),
) -> Result<Option<u64>, Error> {
    match (new, old) {
        (Some(_), Some(_)) => Err(Error::Usage(format!(
            "{old_flag} is the older name of {new_flag}: give one of them"
        ))),
        _ => Ok(new.or(old)),
    }
}

/// The SIZE flags of `check` (`--max-peak-heap 64MiB`), in bytes.
fn parse_size(value: &str) -> Result<u64, String> {
    units::parse_size(value).map_err(|e| e.to_string())
}

/// The per cent flags of `check` (`--max-increase 5%`): "5%", "2.5%", "0.25%" in hundredths
/// of a per cent (500, 250, 25).
fn parse_percent(value: &str) -> Result<u64, String> {
    parse_hundredths(value).map_err(String::from)
}

fn parse_hundredths(value: &str) -> Result<u64, &'static str> {
    const WHY: &str = "give a per cent with at most two decimals, e.g. 5% or 2.5%";
    let number = value.trim().strip_suffix('%').ok_or(WHY)?;
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || fraction.len() > 2 || !(fraction.is_empty() || digits(fraction)) {
        return Err(WHY);
    }
    let whole: u64 = whole.parse().map_err(|_| WHY)?;
    let fraction: u64 = format!("{fraction:0<2}").parse().map_err(|_| WHY)?;
    whole
        .checked_mul(100)
        .and_then(|w| w.checked_add(fraction))
        .ok_or(WHY)
}

impl TryFrom<CheckArgs> for CheckOptions {
    type Error = Error;

    fn try_from(a: CheckArgs) -> Result<CheckOptions, Error> {
        let mut opts = CheckOptions {
            file: a.file,
            scope: Scope::Run,
            max_peak_heap: a.max_peak_heap,
            max_count: renamed((a.max_count, "--max-count"), (a.max_allocs, "--max-allocs"))?,
            max_allocated: renamed(
                (a.max_allocated, "--max-allocated"),
                (a.max_bytes, "--max-bytes"),
            )?,
            max_leaked: a.max_leaked,
            max_reachable: a.max_reachable,
            max_peak_rss: a.max_peak_rss,
            allow_incomplete: a.allow_incomplete,
            baseline: a.baseline,
            max_increase: a.max_increase,
            metric_increases: Vec::new(),
            max_increase_bytes: a.max_increase_bytes,
            by_bench: a.by_bench,
            suppress: a.suppress.as_deref().map(load_suppressions).transpose()?,
        };
        let per_metric = [
            a.max_peak_heap_increase,
            renamed(
                (a.max_count_increase, "--max-count-increase"),
                (a.max_allocs_increase, "--max-allocs-increase"),
            )?,
            renamed(
                (a.max_allocated_increase, "--max-allocated-increase"),
                (a.max_bytes_increase, "--max-bytes-increase"),
            )?,
            a.max_leaked_increase,
            a.max_leaked_blocks_increase,
            a.max_temporary_increase,
            a.max_peak_rss_increase,
            a.max_peak_mapped_increase,
        ];
        for ((metric, _), value) in check::METRIC_INCREASE_FLAGS.into_iter().zip(per_metric) {
            if let Some(limit) = value {
                opts.metric_increases.push((metric, limit));
            }
        }
        if opts.has_no_limit() {
            return Err(Error::Usage(format!(
                "memtrack check needs at least one limit: {}; or, with --baseline FILE, {}",
                check::LIMIT_FLAGS,
                check::INCREASE_FLAGS
            )));
        }
        match (&opts.baseline, opts.has_increase_limit()) {
            (None, true) => {
                return Err(Error::Usage(
                    "the --max-*-increase limits need --baseline FILE, the recording they \
                     compare with (e.g. main's)"
                        .into(),
                ))
            }
            (Some(_), false) => {
                return Err(Error::Usage(format!(
                    "--baseline needs a limit on the increase: {}",
                    check::INCREASE_FLAGS
                )))
            }
            _ => {}
        }
        if opts.baseline.is_some() && a.tree.is_some() {
            return Err(Error::Usage(
                "--tree cannot be used with --baseline: pids differ between recordings; check \
                 the run, or a benchmark with --bench (`memtrack diff` matches processes)"
                    .into(),
            ));
        }
        if opts.by_bench && (a.tree.is_some() || a.bench.is_some()) {
            return Err(Error::Usage(
                "--by bench checks every benchmark: drop --tree and --bench".into(),
            ));
        }
        opts.scope =
            match (a.tree, a.bench) {
                (Some(_), Some(_)) => return Err(Error::Usage(
                    "--tree and --bench cannot be used together: --bench already names the pid \
                     tree the harness gave the benchmark"
                        .into(),
                )),
                (Some(pid), None) => Scope::Tree { pid },
                (None, Some(uri)) => Scope::Benchmark { uri },
                (None, None) => Scope::Run,
            };
        Ok(opts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::tests::{cli, help_names, refused, usage};
    use crate::cli::Command;

    fn check(args: &[&str]) -> Result<CheckOptions, Error> {
        match cli(&[&["check", "run.mt"], args].concat()).command {
            Some(Command::Check(a)) => a.try_into(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn check_options_from_flags() {
        let opts = check(&[
            "--max-peak-heap",
            "64MiB",
            "--max-count",
            "5",
            "--bench",
            "b",
        ]);
        let opts = opts.unwrap();
        assert_eq!(opts.max_peak_heap, Some(64 << 20));
        assert_eq!(opts.max_count, Some(5));
        assert_eq!(opts.scope, Scope::Benchmark { uri: "b".into() });
        assert!(!opts.allow_incomplete);
    }

    #[test]
    fn the_older_limit_flags_set_the_same_limits() {
        let old = check(&[
            "--baseline",
            "b",
            "--max-allocs",
            "5",
            "--max-bytes",
            "1k",
            "--max-allocs-increase",
            "1%",
            "--max-bytes-increase",
            "2%",
        ])
        .unwrap();
        let new = check(&[
            "--baseline",
            "b",
            "--max-count",
            "5",
            "--max-allocated",
            "1k",
            "--max-count-increase",
            "1%",
            "--max-allocated-increase",
            "2%",
        ])
        .unwrap();
        assert_eq!(old, new);
        assert_eq!(new.max_count, Some(5));
        assert_eq!(new.max_allocated, Some(1024));
        use crate::model::metric::Metric;
        assert_eq!(
            new.metric_increases,
            [(Metric::Allocations, 100), (Metric::BytesAllocated, 200)]
        );
        for (old, new, value) in [
            ("--max-allocs", "--max-count", "1"),
            ("--max-bytes", "--max-allocated", "1"),
        ] {
            let e = usage(check(&[old, value, new, value]));
            assert_eq!(
                e,
                format!("{old} is the older name of {new}: give one of them")
            );
        }
        let e = usage(check(&[
            "--baseline",
            "b",
            "--max-count-increase",
            "1%",
            "--max-allocs-increase",
            "1%",
        ]));
        assert!(
            e.starts_with("--max-allocs-increase is the older name"),
            "{e}"
        );
    }

    #[test]
    fn the_older_limit_flags_are_not_in_the_help() {
        let text = crate::cli::tests::help(&["check"]);
        for old in ["--max-allocs", "--max-bytes"] {
            assert!(!text.contains(old), "{old} in\n{text}");
        }
        for new in ["--max-count ", "--max-allocated ", "--max-count-increase"] {
            assert!(text.contains(new), "{new} not in\n{text}");
        }
    }

    #[test]
    fn check_without_limit_is_usage() {
        let e = usage(check(&[]));
        assert!(e.contains("--max-peak-heap"), "{e}");
    }

    #[test]
    fn tree_and_bench_together_is_usage() {
        let e = usage(check(&["--tree", "1", "--bench", "x", "--max-count", "1"]));
        assert!(
            e.starts_with("--tree and --bench cannot be used together"),
            "{e}"
        );
    }

    #[test]
    fn a_bad_size_names_its_flag() {
        let (e, code) = refused(&["check", "run.mt", "--max-leaked", "12XB"]);
        assert!(
            e.starts_with("memtrack: --max-leaked 12XB: invalid size '12XB'"),
            "{e}"
        );
        assert!(
            e.ends_with("; `memtrack check --help` lists what it takes"),
            "{e}"
        );
        assert_eq!(code, 2);
        assert_eq!(
            check(&[
                "--max-increase-bytes",
                "1.5k",
                "--baseline",
                "b",
                "--max-increase",
                "0%"
            ])
            .unwrap()
            .max_increase_bytes,
            Some(1536)
        );
    }

    #[test]
    fn check_against_a_baseline() {
        use crate::model::metric::Metric;
        let opts = check(&[
            "--baseline",
            "main.mt",
            "--max-increase",
            "5%",
            "--max-peak-heap-increase",
            "2.5%",
            "--max-increase-bytes",
            "1MiB",
            "--by",
            "bench",
        ])
        .unwrap();
        assert_eq!(opts.baseline, Some(PathBuf::from("main.mt")));
        assert_eq!(opts.max_increase, Some(500));
        assert_eq!(opts.metric_increases, vec![(Metric::PeakHeap, 250)]);
        assert_eq!(opts.max_increase_bytes, Some(1 << 20));
        assert!(opts.by_bench);
    }

    #[test]
    fn increase_limits_need_a_baseline_and_the_other_way_round() {
        let e = usage(check(&["--max-increase", "5%"]));
        assert!(
            e.starts_with("the --max-*-increase limits need --baseline"),
            "{e}"
        );
        let e = usage(check(&["--baseline", "b.mt", "--max-count", "3"]));
        assert!(
            e.starts_with("--baseline needs a limit on the increase"),
            "{e}"
        );
        let e = usage(check(&[
            "--baseline",
            "b.mt",
            "--max-increase",
            "1%",
            "--tree",
            "4",
        ]));
        assert!(
            e.starts_with("--tree cannot be used with --baseline"),
            "{e}"
        );
        let e = usage(check(&[
            "--max-count",
            "3",
            "--by",
            "bench",
            "--bench",
            "x",
        ]));
        assert!(e.starts_with("--by bench checks every benchmark"), "{e}");
    }

    #[test]
    fn percentages_parse_exactly() {
        assert_eq!(parse_percent("5%"), Ok(500));
        assert_eq!(parse_percent("2.5%"), Ok(250));
        assert_eq!(parse_percent("0.01%"), Ok(1));
        assert_eq!(parse_percent("0%"), Ok(0));
        for bad in [
            "5",
            "-1%",
            "1.234%",
            "%",
            ".5%",
            "1e3%",
            "x%",
            "99999999999999999999%",
        ] {
            assert!(parse_percent(bad).is_err(), "{bad}");
        }
        assert_eq!(
            refused(&["check", "run.mt", "--baseline", "b", "--max-increase", "5"]),
            (
                "memtrack: --max-increase 5: give a per cent with at most two decimals, e.g. 5% \
                 or 2.5%; `memtrack check --help` lists what it takes"
                    .to_string(),
                2
            )
        );
        let (e, _) = refused(&["check", "run.mt", "--max-leaked-increase", "x"]);
        assert!(
            e.starts_with("memtrack: --max-leaked-increase x: give a per cent"),
            "{e}"
        );
        let (e, _) = refused(&["check", "run.mt", "--max-count", "1", "--by", "tree"]);
        assert!(
            e.starts_with("memtrack: --by tree: give run or bench;"),
            "{e}"
        );
        // report's word that check does not offer is refused naming the ones it does.
        let (e, _) = refused(&["check", "run.mt", "--max-count", "1", "--by", "process"]);
        assert!(
            e.starts_with("memtrack: --by process: give run or bench;"),
            "{e}"
        );
    }

    #[test]
    fn the_help_names_every_choice() {
        help_names(&["check"], "--by", BY_BENCH.map(|(b, _)| b.word()));
    }
}
