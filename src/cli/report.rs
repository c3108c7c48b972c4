//! `memtrack report`'s flags as typed and their `TryFrom` into `report::ReportOptions`: the
//! format (from the views' `FORMATS` table), the scope, the rows of the tables, the sites and
//! what a stack format weighs; every conflict between them is caught here.

use std::path::PathBuf;

use argh::FromArgs;

use crate::analyze::functions::FunctionOptions;
use crate::analyze::stacks::{SiteOptions, SiteOrder, DEFAULT_TOP};
use crate::error::Error;
use crate::model::metrics::Scope;
use crate::model::profile::{View, Weight};
use crate::report::ReportOptions;
use crate::views::rows::{RowOptions, Rows, SortKey, DEFAULT_TOP_ROWS};
use crate::views::{self, Format, Sites};

use super::{
    bad_value, by, load_suppressions, measured, parse_count, parse_pid, parse_view, parse_weight,
};

/// Summarise a recording: per run, per process tree and per process.
#[derive(FromArgs, Debug)]
#[argh(
    subcommand,
    help_triggers("-h", "--help", "help"),
    name = "report",
    example = "memtrack report run.mt --format json",
    example = "memtrack report run.mt --stacks --stacks-by leaked",
    example = "memtrack report run.mt --functions --functions-by allocated",
    example = "memtrack report run.mt --top 5 --sort leaked",
    example = "memtrack report run.mt --format markdown >> \"$GITHUB_STEP_SUMMARY\"",
    example = "memtrack report run.mt --format flamegraph --view leaked -o leaks.svg",
    example = "memtrack report run.mt --format pprof -o heap.pb.gz",
    note = "The text form fits the width of the terminal ($COLUMNS overrides it; 80 when not a
terminal): narrow, it drops the least important columns and shortens commands. Rows: with no
--sort, the process tree (benchmarks as named) when every row fits --top, else the top ones by
peak heap; the rows left out are summed in one line. JSON always lists every row, so --top,
--all and --sort are refused with --format json."
)]
pub struct ReportArgs {
    /// the recording to read
    #[argh(positional)]
    pub file: PathBuf,
    /// output format: text (default), json, markdown (a summary for CI job summaries and
    /// pull-request comments), html (one self-contained page: memory over time, the process
    /// tree, flame graphs with --stacks), timeline-csv or timeline-json (memory over time as
    /// data), or a stack format of every allocation site (recorded with --stacks): folded
    /// (flamegraph.pl / inferno input), flamegraph (SVG), pprof (gzipped profile.proto for `go
    /// tool pprof`) or speedscope (JSON)
    #[argh(option, default = "Default::default()", from_str_fn(parse_format))]
    pub format: &'static Format,
    /// only this process
    #[argh(option, from_str_fn(parse_pid))]
    pub pid: Option<u32>,
    /// only this process and its descendants
    #[argh(option, from_str_fn(parse_pid))]
    pub tree: Option<u32>,
    /// only this benchmark: its pid tree inside its measuring windows
    #[argh(option)]
    pub bench: Option<String>,
    /// rows of the text and markdown forms: process (default) or bench (one row per benchmark
    /// the harness named; JSON always has both)
    #[argh(option, default = "Rows::Processes", from_str_fn(parse_rows))]
    pub by: Rows,
    /// also list the top allocation sites (call stacks) of the scope: live bytes at its heap
    /// peak, bytes and count allocated, leaked, temporary, and each site's frames
    #[argh(switch)]
    pub stacks: bool,
    /// sort the sites by peak (live bytes at the heap peak, default), allocated, count, leaked
    /// or temporary; implies --stacks
    #[argh(option, from_str_fn(parse_site_order))]
    pub stacks_by: Option<SiteOrder>,
    /// how many sites to list (default 10, 0 for all); implies --stacks
    #[argh(option, from_str_fn(parse_count))]
    pub stacks_top: Option<u64>,
    /// also list the top allocating functions of the scope (text, json, markdown): per
    /// function, what the allocations it made itself (its innermost program frame, the
    /// allocator's and the standard library's frames folded) and those under it (anywhere on
    /// their stack) cost; needs call stacks (any recording but one made with --no-stacks)
    #[argh(switch)]
    pub functions: bool,
    /// sort the functions by what they allocated themselves: peak (default), allocated, count,
    /// leaked or temporary, as --stacks-by; implies --functions
    #[argh(option, from_str_fn(parse_site_order))]
    pub functions_by: Option<SiteOrder>,
    /// how many functions to list (default 10, 0 for all); implies --functions
    #[argh(option, from_str_fn(parse_count))]
    pub functions_top: Option<u64>,
    /// write the report to this file instead of standard output (a file is replaced only once
    /// the report is complete; a device or FIFO is written in place)
    #[argh(option, short = 'o')]
    pub output: Option<PathBuf>,
    /// rows of the process (or --by bench) table of text and markdown: the top N, the rest
    /// summed in one row (default 20)
    #[argh(option, from_str_fn(parse_count))]
    pub top: Option<u64>,
    /// every row of the process (or --by bench) table, none summed
    #[argh(switch)]
    pub all: bool,
    /// sort the rows, biggest first, by peak (own peak heap), allocated (bytes), count
    /// (allocations), leaked or rss (peak resident); default: see below
    #[argh(option, from_str_fn(parse_sort))]
    pub sort: Option<SortKey>,
    /// what the stack formats weigh: peak (live at the scope's heap peak, default), allocated,
    /// leaked, temporary, resident (pages resident at the scope's resident peak, by the code
    /// that made them resident) or faulted (every page made resident); pprof and speedscope
    /// carry every view and open on this one
    #[argh(option, from_str_fn(parse_view))]
    pub view: Option<View>,
    /// what the stack formats weigh blocks by: bytes (default) or count
    #[argh(option, from_str_fn(parse_weight))]
    pub weight: Option<Weight>,
    /// keep the allocator's own frames (malloc, operator new) and the standard-library frames
    /// between them and the program in the stack formats and the html flame graphs; without
    /// it their stacks start at the allocator's caller (json always has every frame)
    #[argh(switch)]
    pub allocator_frames: bool,
    /// leak suppressions: a file of leak:PATTERN lines (LeakSanitizer's syntax, # comments)
    /// matched against the stacks of definitely lost blocks; what they match is counted as
    /// suppressed, not lost (needs a recording made with --stacks)
    #[argh(option)]
    pub suppress: Option<PathBuf>,
}

/// `report --format`.
fn parse_format(value: &str) -> Result<&'static Format, String> {
    views::format(value).ok_or_else(|| format!("give {}", views::names(views::FORMATS)))
}

/// `report --by`.
fn parse_rows(value: &str) -> Result<Rows, String> {
    by(&Rows::BY, value)
}

/// `report --stacks-by` and `--functions-by`.
fn parse_site_order(value: &str) -> Result<SiteOrder, String> {
    measured(&SiteOrder::MEASURES, value)
}

/// `report --sort`.
fn parse_sort(value: &str) -> Result<SortKey, String> {
    measured(&SortKey::MEASURES, value)
}

impl TryFrom<ReportArgs> for ReportOptions {
    type Error = Error;

    fn try_from(a: ReportArgs) -> Result<ReportOptions, Error> {
        let format = a.format;
        let rows = a.by;
        let functions = functions_of(&a, format)?;
        let scope =
            match (a.pid, a.tree, a.bench) {
                (Some(_), Some(_), _) => return Err(Error::Usage(
                    "--pid and --tree cannot be used together: --pid shows one process, --tree \
                     a process and its descendants"
                        .into(),
                )),
                (Some(_), None, Some(_)) | (None, Some(_), Some(_)) => return Err(Error::Usage(
                    "--bench cannot be used with --pid or --tree: --bench already names the pid \
                     tree the harness gave the benchmark"
                        .into(),
                )),
                (Some(pid), None, None) => Scope::Process { pid },
                (None, Some(pid), None) => Scope::Tree { pid },
                (None, None, Some(uri)) => Scope::Benchmark { uri },
                (None, None, None) => Scope::Run,
            };
        let order = a.stacks_by;
        let top = count_of("--stacks-top", a.stacks_top, "sites")?;
        let view = a.view.unwrap_or_default();
        let weight = a.weight.unwrap_or_default();
        let stack_format = format.is_stack_format();
        if !stack_format && (a.view.is_some() || a.weight.is_some()) {
            return Err(Error::Usage(format!(
                "--view and --weight choose what a stack format weighs: give them with \
                 --format {}",
                views::names(views::stack_formats())
            )));
        }
        if a.allocator_frames && format.needs.sites == Sites::AsAsked {
            return Err(Error::Usage(format!(
                "--allocator-frames keeps the allocator's frames in the stacks of the stack \
                 formats and the html flame graphs: give it with --format {}",
                views::names(
                    views::FORMATS
                        .iter()
                        .filter(|f| f.needs.sites != Sites::AsAsked)
                )
            )));
        }
        if stack_format && (order.is_some() || top.is_some()) {
            return Err(Error::Usage(format!(
                "--stacks-by and --stacks-top choose the sites text and json list; --format {} \
                 takes every site: drop them (--view and --weight choose what it weighs)",
                format.name
            )));
        }
        // A stack format needs every site of the scope, per process, with its frames (the
        // profile); so do the page's flame graphs (when the recording has stacks). The report's
        // own list of sites, which these formats do not show, stays at its default length.
        let profile = |order| SiteOptions {
            order,
            top: DEFAULT_TOP,
            profile: true,
            functions: None,
        };
        let stacks = match format.needs.sites {
            Sites::Profile => Some(profile(SiteOrder::default())),
            // The page lists the sites of definitely lost blocks, the most lost first.
            Sites::ProfileLostFirst => Some(profile(SiteOrder::Leaked)),
            Sites::AsAsked => (a.stacks || order.is_some() || top.is_some()).then(|| SiteOptions {
                order: order.unwrap_or_default(),
                top: top.unwrap_or(DEFAULT_TOP),
                profile: false,
                functions: None,
            }),
        };
        if let Some(path) = &a.output {
            crate::output::validate_output(path, "report.txt")?;
        }
        let row_options = row_options(a.top, a.all, a.sort, format)?;
        let output = a.output;
        Ok(ReportOptions {
            file: a.file,
            format,
            scope,
            rows,
            stacks,
            functions,
            output,
            row_options,
            width: None,
            view,
            weight,
            allocator_frames: a.allocator_frames,
            suppress: a.suppress.as_deref().map(load_suppressions).transpose()?,
        })
    }
}

/// A count flag (`--stacks-top`, `--functions-top`) as a length of a list of `what`.
fn count_of(flag: &str, n: Option<u64>, what: &str) -> Result<Option<usize>, Error> {
    n.map(|n| {
        usize::try_from(n)
            .map_err(|_| bad_value(flag, &n.to_string(), format!("give a count of {what}")))
    })
    .transpose()
}

/// `--functions`, `--functions-by` and `--functions-top` as the functions the pass adds up,
/// refused with a format that does not show them.
fn functions_of(a: &ReportArgs, format: &Format) -> Result<Option<FunctionOptions>, Error> {
    let top = count_of("--functions-top", a.functions_top, "functions")?;
    if !(a.functions || a.functions_by.is_some() || top.is_some()) {
        return Ok(None);
    }
    if !format.needs.functions {
        return Err(Error::Usage(format!(
            "--functions, --functions-by and --functions-top add the functions table of --format \
             {}; --format {} does not show it: drop them",
            views::names(views::function_formats()),
            format.name
        )));
    }
    Ok(Some(FunctionOptions {
        order: a.functions_by.unwrap_or_default(),
        top: top.unwrap_or(DEFAULT_TOP),
    }))
}

/// `report --top N`, `--all` and `--sort KEY` as the rows of the text and markdown tables.
fn row_options(
    top: Option<u64>,
    all: bool,
    sort: Option<SortKey>,
    format: &Format,
) -> Result<RowOptions, Error> {
    if format.needs.every_row && (top.is_some() || all || sort.is_some()) {
        return Err(Error::Usage(format!(
            "--top, --all and --sort choose the rows of the text and markdown tables; --format \
             {} always lists every process and benchmark: drop them, or sort with jq",
            format.name
        )));
    }
    if all && top.is_some() {
        return Err(Error::Usage(
            "--top and --all cannot be used together: --top N shows N rows, --all every row".into(),
        ));
    }
    let top = match top {
        Some(0) => {
            return Err(bad_value(
                "--top",
                "0",
                "give at least 1 row, or --all for every row",
            ))
        }
        Some(n) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
        None if all => None,
        None => Some(DEFAULT_TOP_ROWS),
    };
    Ok(RowOptions { top, sort })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::tests::{cli, help_names, refused, usage};
    use crate::cli::Command;
    use crate::model::measure;

    fn report(args: &[&str]) -> Result<ReportOptions, Error> {
        match cli(&[&["report", "run.mt"], args].concat()).command {
            Some(Command::Report(a)) => a.try_into(),
            other => panic!("{other:?}"),
        }
    }

    /// `refused`'s line for a flag of `report run.mt`, which exits 2.
    fn report_refuses(args: &[&str]) -> String {
        let (message, code) = refused(&[&["report", "run.mt"], args].concat());
        assert_eq!(code, 2, "{message}");
        message
    }

    #[test]
    fn report_options_from_flags() {
        let opts = report(&["--format", "json", "--tree", "7", "--by", "bench"]).unwrap();
        assert_eq!(opts.file, PathBuf::from("run.mt"));
        assert_eq!(opts.format.name, "json");
        assert_eq!(opts.scope, Scope::Tree { pid: 7 });
        assert_eq!(opts.rows, Rows::Benchmarks);
        // check's --by run is one of the words, but not one report offers.
        let e = report_refuses(&["--by", "run"]);
        assert!(
            e.starts_with("memtrack: --by run: give process or bench;"),
            "{e}"
        );
        assert_eq!(
            report(&["--pid", "3"]).unwrap().scope,
            Scope::Process { pid: 3 }
        );
        assert_eq!(
            report(&[]).unwrap(),
            ReportOptions {
                file: "run.mt".into(),
                ..ReportOptions::default()
            }
        );
    }

    #[test]
    fn row_flags() {
        let opts = report(&["--top", "5", "--sort", "leaked"]).unwrap();
        assert_eq!(
            opts.row_options,
            RowOptions {
                top: Some(5),
                sort: Some(SortKey::Leaked)
            }
        );
        assert_eq!(report(&["--all"]).unwrap().row_options.top, None);
        assert_eq!(report(&[]).unwrap().row_options, RowOptions::default());
        let md = report(&["--format", "markdown", "--top", "3"]).unwrap();
        assert_eq!(md.format.name, "markdown");
        assert_eq!(md.row_options.top, Some(3));
    }

    #[test]
    fn bad_row_flags_are_usage() {
        assert!(usage(report(&["--top", "3", "--all"])).contains("cannot be used together"));
        assert!(usage(report(&["--top", "0"])).contains("or --all for every row"));
        assert_eq!(
            report_refuses(&["--sort", "size"]),
            "memtrack: --sort size: give peak, allocated, count, leaked or rss; `memtrack \
             report --help` lists what it takes"
        );
        for flags in [&["--top", "3"][..], &["--all"], &["--sort", "peak"]] {
            let mut args = vec!["--format", "json"];
            args.extend(flags);
            assert!(
                usage(report(&args)).contains("--format json always lists every process"),
                "{flags:?}"
            );
        }
    }

    #[test]
    fn stacks_flags() {
        assert_eq!(report(&[]).unwrap().stacks, None);
        assert_eq!(
            report(&["--stacks"]).unwrap().stacks,
            Some(SiteOptions {
                order: SiteOrder::Peak,
                top: 10,
                profile: false,
                functions: None,
            })
        );
        // Choosing an order or a count asks for the sites too.
        assert_eq!(
            report(&["--stacks-by", "leaked", "--stacks-top", "0"])
                .unwrap()
                .stacks,
            Some(SiteOptions {
                order: SiteOrder::Leaked,
                top: 0,
                profile: false,
                functions: None,
            })
        );
        assert_eq!(
            report_refuses(&["--stacks-by", "size"]),
            "memtrack: --stacks-by size: give peak, allocated, count, leaked or temporary; \
             `memtrack report --help` lists what it takes"
        );
    }

    #[test]
    fn functions_flags() {
        use crate::analyze::functions::FunctionOptions;
        assert_eq!(report(&[]).unwrap().functions, None);
        let opts = report(&["--functions"]).unwrap();
        assert_eq!(
            opts.functions,
            Some(FunctionOptions {
                order: SiteOrder::Peak,
                top: 10,
            })
        );
        // The sites stay as asked: not listed unless --stacks.
        assert_eq!(opts.stacks, None);
        // Choosing an order or a count asks for the functions too; --stacks-by is the sites'.
        let opts = report(&[
            "--functions-by",
            "allocated",
            "--functions-top",
            "0",
            "--stacks-by",
            "leaked",
        ])
        .unwrap();
        assert_eq!(
            opts.functions,
            Some(FunctionOptions {
                order: SiteOrder::Allocated,
                top: 0,
            })
        );
        assert_eq!(opts.stacks.map(|s| s.order), Some(SiteOrder::Leaked));
        assert_eq!(
            report(&["--format", "markdown", "--functions-top", "3"])
                .unwrap()
                .functions
                .map(|f| f.top),
            Some(3)
        );
        assert_eq!(
            report_refuses(&["--functions-by", "rss"]),
            "memtrack: --functions-by rss: give peak, allocated, count, leaked or temporary; \
             `memtrack report --help` lists what it takes"
        );
        for format in ["folded", "html", "timeline-csv"] {
            assert_eq!(
                usage(report(&["--format", format, "--functions"])),
                format!(
                    "--functions, --functions-by and --functions-top add the functions table of \
                     --format text, json or markdown; --format {format} does not show it: drop \
                     them"
                )
            );
        }
    }

    #[test]
    fn stack_format_flags() {
        use crate::model::profile::{View, Weight};
        let opts = report(&[
            "--format", "folded", "--view", "leaked", "--weight", "count",
        ])
        .unwrap();
        assert_eq!(opts.format.name, "folded");
        assert_eq!((opts.view, opts.weight), (View::Leaked, Weight::Count));
        // Every site in the profile; the report's own list as by default.
        assert_eq!(
            opts.stacks,
            Some(SiteOptions {
                order: SiteOrder::Peak,
                top: DEFAULT_TOP,
                profile: true,
                functions: None,
            })
        );
        let opts = report(&["--format", "pprof"]).unwrap();
        assert_eq!((opts.view, opts.weight), (View::Peak, Weight::Bytes));
        assert!(usage(report(&["--view", "leaked"])).starts_with("--view and --weight choose"));
        assert!(usage(report(&["--format", "json", "--weight", "count"]))
            .starts_with("--view and --weight choose"));
        assert_eq!(
            report_refuses(&["--format", "folded", "--view", "live"]),
            "memtrack: --view live: give peak, allocated, leaked, temporary, resident or \
             faulted; `memtrack report --help` lists what it takes"
        );
        assert_eq!(
            report_refuses(&["--format", "flamegraph", "--weight", "kg"]),
            "memtrack: --weight kg: give bytes or count; `memtrack report --help` lists what it \
             takes"
        );
        assert!(
            usage(report(&["--format", "speedscope", "--stacks-top", "3"]))
                .starts_with("--stacks-by and --stacks-top choose the sites text and json list")
        );
    }

    #[test]
    fn allocator_frames_is_for_the_formats_that_draw_stacks() {
        assert!(!report(&["--format", "pprof"]).unwrap().allocator_frames);
        for format in ["folded", "flamegraph", "pprof", "speedscope", "html"] {
            let opts = report(&["--format", format, "--allocator-frames"]).unwrap();
            assert!(opts.allocator_frames, "{format}");
        }
        for format in ["text", "json", "markdown", "timeline-csv"] {
            let e = usage(report(&[
                "--format",
                format,
                "--allocator-frames",
                "--stacks",
            ]));
            assert_eq!(
                e,
                "--allocator-frames keeps the allocator's frames in the stacks of the stack \
                 formats and the html flame graphs: give it with --format html, folded, \
                 flamegraph, pprof or speedscope",
                "{format}"
            );
        }
    }

    #[test]
    fn report_of_a_benchmark() {
        assert_eq!(
            report(&["--bench", "parse::small"]).unwrap().scope,
            Scope::Benchmark {
                uri: "parse::small".into()
            }
        );
        let e = usage(report(&["--bench", "b", "--tree", "1"]));
        assert!(
            e.starts_with("--bench cannot be used with --pid or --tree"),
            "{e}"
        );
    }

    #[test]
    fn pid_and_tree_together_is_usage() {
        let e = usage(report(&["--pid", "1", "--tree", "1"]));
        assert!(
            e.starts_with("--pid and --tree cannot be used together"),
            "{e}"
        );
    }

    #[test]
    fn bad_format_and_rows_name_the_choices() {
        assert_eq!(
            report_refuses(&["--format", "xml"]),
            "memtrack: --format xml: give text, json, markdown, html, timeline-csv, \
             timeline-json, folded, flamegraph, pprof or speedscope; `memtrack report --help` \
             lists what it takes"
        );
        assert_eq!(
            report_refuses(&["--by", "frob"]),
            "memtrack: --by frob: give process or bench; `memtrack report --help` lists what it \
             takes"
        );
        // A bad value is refused before any conflict between flags, as before.
        let e = report_refuses(&["--format", "xml", "--pid", "1", "--tree", "1"]);
        assert!(e.starts_with("memtrack: --format xml"), "{e}");
    }

    #[test]
    fn the_old_measure_words_choose_what_they_chose() {
        let sort = |word| report(&["--sort", word]).unwrap().row_options.sort;
        assert_eq!(sort("bytes"), Some(SortKey::Bytes));
        assert_eq!(sort("allocated"), Some(SortKey::Bytes));
        assert_eq!(sort("allocs"), Some(SortKey::Allocs));
        assert_eq!(sort("count"), Some(SortKey::Allocs));
        for (word, key) in [("peak", SortKey::Peak), ("leaked", SortKey::Leaked)] {
            assert_eq!(sort(word), Some(key));
        }
        assert_eq!(sort("rss"), Some(SortKey::Rss));
        let order = |word| {
            report(&["--stacks-by", word])
                .unwrap()
                .stacks
                .unwrap()
                .order
        };
        for (m, o) in SiteOrder::MEASURES {
            assert_eq!(order(m.word()), o);
        }
        assert_eq!(order("bytes"), SiteOrder::Allocated);
        assert_eq!(order("allocs"), SiteOrder::Count);
        let view = |word| {
            report(&["--format", "folded", "--view", word])
                .unwrap()
                .view
        };
        for (m, v) in View::MEASURES {
            assert_eq!(view(m.word()), v);
        }
        assert_eq!(view("bytes"), View::Allocated);
        // A measure a flag does not offer is refused with the flag's own words.
        assert_eq!(
            report_refuses(&["--stacks-by", "rss"]),
            "memtrack: --stacks-by rss: give peak, allocated, count, leaked or temporary; \
             `memtrack report --help` lists what it takes"
        );
    }

    #[test]
    fn the_help_names_every_choice() {
        let report = &["report"][..];
        help_names(report, "--format", views::FORMATS.iter().map(|f| f.name));
        help_names(report, "--by", Rows::BY.map(|(b, _)| b.word()));
        help_names(report, "--stacks-by", measure::words(&SiteOrder::MEASURES));
        help_names(
            report,
            "--functions-by",
            measure::words(&SiteOrder::MEASURES),
        );
        help_names(report, "--sort", measure::words(&SortKey::MEASURES));
        help_names(report, "--view", measure::words(&View::MEASURES));
        help_names(report, "--weight", Weight::ALL.map(|(n, _)| n));
    }
}
