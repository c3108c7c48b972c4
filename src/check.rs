//! `memtrack check`: compares a recording's metrics with limits, so CI can gate on memory.
//!
//! Flow: [`run_check`] reads the report through `analyze` (narrowed to `--tree` or `--bench`
//! if given) the same way `report` does, then [`evaluate`] compares its totals with each limit
//! (and [`evaluate_increase`] with a `--baseline`'s) and [`write_results`] prints one aligned
//! line per limit. The caller maps the outcome to an exit code: 0 all hold, 1 any fails, 2 a
//! bad file or flag.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::model::measure::Measure;
use crate::model::metric::{percent_text, signed, Metric, Unit};
use crate::table::{Column, Table};
use crate::units::format_bytes;

use crate::analyze::stacks::{SiteOptions, SiteOrder};
use crate::analyze::{
    incomplete, narrow, read_report, read_report_suppressed, suppress, suppressible,
};
use crate::error::{Error, Result};
use crate::format::Reader;
use crate::model::metrics::{Metrics, Report, Scope};
use crate::output::output_result;
use crate::views::{frames, words};

/// What `memtrack check` was asked for: the recording, what to check in it, and the limits,
/// each optional (`cli` refuses a check without one). Every limit holds when the value is at
/// most the limit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckOptions {
    /// The recording to read.
    pub file: PathBuf,
    /// What to check: the whole run, the tree of a pid (`--tree`: the process and its
    /// descendants) or a benchmark (`--bench`: its pid tree inside its windows).
    pub scope: Scope,
    /// Highest live heap, bytes (`--max-peak-heap`).
    pub max_peak_heap: Option<u64>,
    /// Successful allocations, reallocs included (`--max-count`).
    pub max_count: Option<u64>,
    /// Bytes allocated (`--max-allocated`).
    pub max_allocated: Option<u64>,
    /// Bytes live when their process exited (`--max-leaked`); the heap of processes still
    /// running at the end of the recording is not a leak. In a recording with leak scans, only
    /// the definitely lost bytes, plus the leaked bytes of processes that were not scanned.
    pub max_leaked: Option<u64>,
    /// Bytes still reachable at exit by the leak scans (`--max-reachable`); in a recording
    /// without scans, every leaked byte.
    pub max_reachable: Option<u64>,
    /// Highest resident memory (anon + file + shmem), bytes (`--max-peak-rss`); for a tree or
    /// the run, the peak of the sum over processes alive at the same moment.
    pub max_peak_rss: Option<u64>,
    /// Check a recording that lost events or is damaged on what it holds, instead of refusing
    /// it (`--allow-incomplete`).
    pub allow_incomplete: bool,
    /// The recording the increase limits compare with (`--baseline`, e.g. main's).
    pub baseline: Option<PathBuf>,
    /// Highest allowed increase over the baseline of every metric both recordings have, in
    /// hundredths of a per cent (`--max-increase 5%` is 500).
    pub max_increase: Option<u64>,
    /// Per metric, a highest allowed increase in hundredths of a per cent that replaces
    /// `max_increase` for it (`--max-peak-heap-increase 2%`).
    pub metric_increases: Vec<(Metric, u64)>,
    /// Highest allowed increase over the baseline, bytes, of every metric in bytes
    /// (`--max-increase-bytes 1MiB`); a limit of its own beside the relative ones.
    pub max_increase_bytes: Option<u64>,
    /// Check each benchmark of the recording instead of the scope (`--by bench`).
    pub by_bench: bool,
    /// Leak suppression rules (`--suppress FILE`): what they match is not definitely lost.
    pub suppress: Option<suppress::Suppressions>,
}

impl CheckOptions {
    /// Whether no limit was given.
    pub fn has_no_limit(&self) -> bool {
        self.max_peak_heap.is_none()
            && self.max_count.is_none()
            && self.max_allocated.is_none()
            && self.max_leaked.is_none()
            && self.max_reachable.is_none()
            && self.max_peak_rss.is_none()
            && !self.has_increase_limit()
    }

    /// Whether a limit on the increase over a baseline was given.
    pub fn has_increase_limit(&self) -> bool {
        self.max_increase.is_some()
            || !self.metric_increases.is_empty()
            || self.max_increase_bytes.is_some()
    }

    /// The relative limit on `metric`, in hundredths of a per cent: its own flag's, else
    /// `--max-increase`.
    fn relative_limit(&self, metric: Metric) -> Option<(u64, &'static str)> {
        self.metric_increases
            .iter()
            .rev()
            .find(|(m, _)| *m == metric)
            .map(|&(m, limit)| (limit, increase_flag(m)))
            .or(self.max_increase.map(|limit| (limit, "--max-increase")))
    }
}

/// The flags that set limits, for the message when none is given.
pub const LIMIT_FLAGS: &str =
    "--max-peak-heap SIZE, --max-count N, --max-allocated SIZE, --max-leaked SIZE, --max-reachable SIZE, \
     --max-peak-rss SIZE";

/// The flags that set limits on the increase over `--baseline`.
pub const INCREASE_FLAGS: &str =
    "--max-increase P%, --max-METRIC-increase P%, --max-increase-bytes SIZE";

/// Each metric's own relative-increase flag, in `Metric::ALL` order: the stem of its absolute
/// limit where it has one (`--max-peak-heap`, `--max-count`, ...). A metric that is a measure
/// is named by it, so that every measure has one (a test says so).
pub const METRIC_INCREASE_FLAGS: [(Metric, &str); 8] = [
    (Measure::Peak.metric(), "--max-peak-heap-increase"),
    (Measure::Count.metric(), "--max-count-increase"),
    (Measure::Allocated.metric(), "--max-allocated-increase"),
    (Measure::Leaked.metric(), "--max-leaked-increase"),
    (Metric::LeakedBlocks, "--max-leaked-blocks-increase"),
    (Measure::Temporary.metric(), "--max-temporary-increase"),
    (Measure::Rss.metric(), "--max-peak-rss-increase"),
    (Metric::PeakMapped, "--max-peak-mapped-increase"),
];

/// The relative-increase flag of `metric`.
pub fn increase_flag(metric: Metric) -> &'static str {
    METRIC_INCREASE_FLAGS
        .iter()
        .find(|(m, _)| *m == metric)
        .map_or("--max-increase", |(_, f)| f)
}

/// One limit compared with the recording.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitResult {
    /// What is limited, for people ("peak heap").
    pub name: &'static str,
    /// The flag that set the limit.
    pub flag: &'static str,
    /// Bytes or a count, which decides how its numbers are shown.
    pub quantity: Unit,
    /// The recording's value.
    pub value: u64,
    /// The limit.
    pub limit: u64,
    /// Whether `value <= limit` (for an increase limit, whether the increase is within it).
    pub pass: bool,
    /// The benchmark the limit was checked on (`--by bench`); `None` for the scope.
    pub benchmark: Option<String>,
    /// For a limit on the increase over the baseline: the baseline's value (`value` is the new
    /// recording's) and the form of `limit`.
    pub increase: Option<Increase>,
}

/// The baseline side of a limit on an increase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Increase {
    /// The baseline's value.
    pub base: u64,
    /// Whether `limit` is hundredths of a per cent of `base` (else an amount, bytes).
    pub relative: bool,
}

/// Compares the totals of `report` (already narrowed to the scope) with every given limit, in
/// the order the flags are documented.
pub fn evaluate(report: &Report, opts: &CheckOptions) -> Vec<LimitResult> {
    let heap = &report.totals.heap;
    // With leak scans, a leak is what no root reaches; a process that was not scanned keeps
    // all it left live counted, since nothing says it is reachable.
    let (leaked_name, leaked_value, reachable_name, reachable_value) = match &heap.leaks {
        Some(l) if l.not_scanned.blocks == 0 => (
            "definitely lost",
            l.definitely_lost.bytes,
            "still reachable",
            l.still_reachable.bytes,
        ),
        Some(l) => (
            "definitely lost + not scanned",
            l.definitely_lost.bytes.saturating_add(l.not_scanned.bytes),
            "still reachable",
            l.still_reachable.bytes,
        ),
        None => (
            "leaked",
            heap.leaked.bytes,
            "leaked (no leak scan in the recording)",
            heap.leaked.bytes,
        ),
    };
    // The limits named by a measure take its label, unit and value from the measure's metric.
    let measured = |measure: Measure, flag, limit| {
        let metric = measure.metric();
        let value = metric.value(&report.totals).unwrap_or(0);
        (measure.label(), flag, measure.unit(), value, limit)
    };
    let candidates = [
        measured(Measure::Peak, "--max-peak-heap", opts.max_peak_heap),
        measured(Measure::Count, "--max-count", opts.max_count),
        measured(Measure::Allocated, "--max-allocated", opts.max_allocated),
        (
            leaked_name,
            "--max-leaked",
            Unit::Bytes,
            leaked_value,
            opts.max_leaked,
        ),
        (
            reachable_name,
            "--max-reachable",
            Unit::Bytes,
            reachable_value,
            opts.max_reachable,
        ),
        measured(Measure::Rss, "--max-peak-rss", opts.max_peak_rss),
    ];
    candidates
        .into_iter()
        .filter_map(|(name, flag, quantity, value, limit)| {
            limit.map(|limit| LimitResult {
                name,
                flag,
                quantity,
                value,
                limit,
                pass: value <= limit,
                benchmark: None,
                increase: None,
            })
        })
        .collect()
}

/// Compares `new` (narrowed to the scope) with `base` (narrowed to the same scope) on every
/// increase limit: per metric both have, the relative limit, then the bytes limit. Metrics
/// only one side has are not compared; a note says which. `benchmark` names the scope's
/// benchmark for the lines (`--by bench`).
pub fn evaluate_increase(
    new: &Metrics,
    base: &Metrics,
    opts: &CheckOptions,
    benchmark: Option<&str>,
    notes: &mut Vec<String>,
) -> Vec<LimitResult> {
    let mut results = Vec::new();
    for metric in Metric::ALL {
        let relative = opts.relative_limit(metric);
        let bytes = opts
            .max_increase_bytes
            .filter(|_| metric.unit() == Unit::Bytes);
        if relative.is_none() && bytes.is_none() {
            continue;
        }
        let (Some(b), Some(n)) = (metric.value(base), metric.value(new)) else {
            let within = benchmark.map_or(String::new(), |b| format!(" of benchmark {b}"));
            let leak_split = [
                Metric::LostBytes,
                Metric::LostBlocks,
                Metric::ReachableBytes,
                Metric::ReachableBlocks,
            ];
            // The four values of the leak split come and go together: one note for them.
            if leak_split.contains(&metric) {
                if metric == Metric::LostBytes {
                    notes.push(format!(
                        "definitely lost and still reachable{within} are not in both \
                         recordings (one has no leak scans): not compared"
                    ));
                }
                continue;
            }
            notes.push(format!(
                "{}{within} is not in both recordings: not compared",
                metric.label()
            ));
            continue;
        };
        let quantity = metric.unit();
        let line = |flag, limit, relative, pass| LimitResult {
            name: metric.label(),
            flag,
            quantity,
            value: n,
            limit,
            pass,
            benchmark: benchmark.map(str::to_string),
            increase: Some(Increase { base: b, relative }),
        };
        if let Some((limit, flag)) = relative {
            // new <= base * (1 + limit / 10000), in integers: exact at the boundary, and any
            // increase from 0 fails.
            let pass = u128::from(n) * 10_000 <= u128::from(b) * (10_000 + u128::from(limit));
            results.push(line(flag, limit, true, pass));
        }
        if let Some(limit) = bytes {
            let pass = n <= b.saturating_add(limit);
            results.push(line("--max-increase-bytes", limit, false, pass));
        }
    }
    results
}

/// The value cell of an increase line: the change and its relative change ("+6.8 KiB
/// (+50.0%)", "+3 (new)" from 0).
fn show_increase(r: &LimitResult, inc: Increase) -> String {
    let unit = r.quantity;
    let change = crate::model::metric::difference(inc.base, r.value);
    let relative = match (inc.base, r.value) {
        (0, 0) => "0.0%".to_string(),
        (0, _) => "new".to_string(),
        (b, n) => percent_text((n as f64 - b as f64) * 100.0 / b as f64),
    };
    format!("{} ({relative})", signed(unit, change))
}

/// The limit cell of an increase line: "+5.0%" or "+1.0 MiB (1048576 bytes)".
fn show_increase_limit(r: &LimitResult, inc: Increase) -> String {
    if inc.relative {
        format!("+{}.{:02}%", r.limit / 100, r.limit % 100)
    } else {
        format!("+{}", show(Unit::Bytes, r.limit))
    }
}

/// A number as the check line shows it: sizes both rounded and exact, so a failure by a few
/// bytes is visible.
fn show(quantity: Unit, n: u64) -> String {
    match quantity {
        Unit::Bytes => format!("{} ({n} bytes)", format_bytes(n)),
        Unit::Count => n.to_string(),
    }
}

/// Prints one aligned line per limit: name, value, limit, pass or FAIL; then a line per reason
/// the report is incomplete.
pub fn write_results(
    results: &[LimitResult],
    report: &Report,
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut table = Table::new(vec![
        Column::left(""),
        Column::right("  "),
        Column::right("  limit "),
        Column::left("  "),
    ]);
    for r in results {
        let verdict = if r.pass { "pass" } else { "FAIL" };
        let name = match &r.benchmark {
            Some(b) => format!("{b}: {}", r.name),
            None => r.name.to_string(),
        };
        let (value, limit) = match r.increase {
            Some(inc) => (show_increase(r, inc), show_increase_limit(r, inc)),
            None => (show(r.quantity, r.value), show(r.quantity, r.limit)),
        };
        table.row(vec![name, value, limit, verdict.to_string()]);
    }
    for line in table.lines() {
        writeln!(out, "{line}")?;
    }
    if results.iter().any(|r| r.flag == "--max-leaked" && !r.pass) {
        write_lost_site(report, out)?;
    }
    if let Some(s) = &report.suppressions {
        for line in words::suppression_lines(s) {
            writeln!(out, "{line}")?;
        }
    }
    for reason in &report.incomplete_reasons {
        writeln!(out, "incomplete: {reason}")?;
    }
    Ok(())
}

/// After a failed `--max-leaked`: the site that lost the most, named by its first frames
/// beyond the allocator ("top lost site: 1010 bytes in 1 block: loses (leaks.c:61) <- ..."),
/// or why there is none to name.
fn write_lost_site(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let lost = report
        .totals
        .heap
        .leaks
        .as_ref()
        .map_or(0, |l| l.definitely_lost.blocks);
    if lost == 0 {
        return Ok(());
    }
    let Some(stacks) = report.stacks.as_ref().filter(|s| s.recorded) else {
        return writeln!(
            out,
            "lost blocks have no call stacks in this recording: record with --stacks to name \
             the sites that lost them"
        );
    };
    let Some(site) = stacks.sites.first().filter(|s| s.lost_blocks > 0) else {
        return Ok(());
    };
    writeln!(
        out,
        "top lost site: {} in {}: {}",
        show(Unit::Bytes, site.lost_bytes),
        crate::views::words::counted(site.lost_blocks, "block", "blocks"),
        frames::site_name(&site.frames)
    )?;
    match &stacks.sampling {
        Some(sampling) => writeln!(out, "  {}", words::estimates_note(sampling)),
        None => Ok(()),
    }
}

/// Refuses `--suppress` on a recording that sampled its call stacks: a rule matches a lost
/// block by the stack that allocated it, and only the sampled allocations have one, so the
/// other blocks would stay definitely lost and the leak limit would judge an estimate.
fn suppress_needs_exact_stacks(
    report: &Report,
    path: &Path,
    s: &suppress::Suppressions,
) -> Result<()> {
    match report.stacks.as_ref().and_then(|st| st.sampling.as_ref()) {
        Some(sampling) => Err(Error::Usage(format!(
            "--suppress {}: {} sampled its call stacks (sites {}), and a rule matches only the \
             blocks whose stack was walked; record again with --stacks for exact stacks",
            s.file,
            path.display(),
            words::estimated_from(sampling)
        ))),
        None => Ok(()),
    }
}

/// Reads the recording `opts.file`, checks the limits in `opts` and prints one line per limit.
/// Returns whether every limit holds.
///
/// An incomplete recording (events lost, damaged, cut short) is an error (exit 2) naming the
/// cause, unless `opts.allow_incomplete`, or a limit fails on a value that can only be too low
/// (`incomplete::lower_bounds`): more events would not make it pass. A `--probe-floor`
/// recording has no allocations and is always refused.
pub fn run_check(opts: &CheckOptions, out: &mut dyn Write) -> Result<bool> {
    let path = &opts.file;
    // A leak limit names the top lost site when the recording has stacks, and suppressions
    // match them: then the pass finds the sites of the scope, lost first.
    let leak_limit = opts.max_leaked.is_some() || opts.suppress.is_some();
    let with_stacks = leak_limit
        && Reader::open(path)?
            .header()
            .features
            .iter()
            .any(|f| f == crate::format::FEATURE_STACKS);
    let site_options = SiteOptions {
        order: SiteOrder::Leaked,
        top: 3,
        profile: false,
        functions: None,
    };
    let sites = (with_stacks || opts.suppress.is_some()).then_some((&opts.scope, site_options));
    let report = narrow(
        read_report_suppressed(path, sites, None, opts.suppress.as_ref())?,
        opts.scope.clone(),
        path,
    )?;
    if let Some(s) = &opts.suppress {
        suppressible(&report, path, s)?;
        suppress_needs_exact_stacks(&report, path, s)?;
    }
    let bad_file = |message: String| Error::BadFile {
        path: path.to_path_buf(),
        message,
    };
    let floor = report
        .run
        .features
        .iter()
        .any(|f| f == incomplete::FEATURE_PROBE_FLOOR);
    if floor {
        return Err(bad_file(
            "recorded with --probe-floor: allocations were not recorded (it measures the \
             probes' own cost), so there is nothing to check; record again without --probe-floor"
                .to_string(),
        ));
    }
    if opts.max_peak_rss.is_some() && report.totals.resident.is_none() {
        return Err(Error::Usage(format!(
            "{} has no resident memory (it was recorded with --no-rss); drop --max-peak-rss or \
             record again without --no-rss",
            path.display()
        )));
    }
    let mut notes = Vec::new();
    let results = match &opts.baseline {
        Some(base_path) => against_baseline(&report, base_path, opts, &mut notes)?,
        None => evaluate(&report, opts),
    };
    let all_pass = results.iter().all(|r| r.pass);
    let mut out = BufWriter::new(out);
    let written = write_results(&results, &report, &mut out)
        .and_then(|()| notes.iter().try_for_each(|n| writeln!(out, "note: {n}")));
    output_result(written.and_then(|()| out.flush()))?;
    if report.complete || opts.allow_incomplete {
        return Ok(all_pass);
    }
    // Allocation counts and bytes allocated only grow with more events, whatever was lost; the
    // other values do too when the file was only cut short.
    let all_lower = incomplete::lower_bounds(report.lost_events.total, &report.skipped, floor);
    let certain_failure = results
        .iter()
        .any(|r| !r.pass && (all_lower || matches!(r.name, "allocations" | "bytes allocated")));
    if certain_failure {
        return Ok(false);
    }
    let mut causes = Vec::new();
    if let Some(damage) = &report.damage {
        causes.push(damage.end_reason());
    }
    if !report.skipped.is_empty() {
        let first = &report.skipped[0];
        causes.push(format!(
            "{} damaged range{} skipped, the first at byte offset {} ({})",
            report.skipped.len(),
            if report.skipped.len() == 1 { "" } else { "s" },
            first.offset_bytes,
            first.reason
        ));
    }
    if report.lost_events.total > 0 {
        let by: Vec<String> = report
            .lost_events
            .by_cause
            .iter()
            .map(|l| format!("{} {}", l.count, l.cause))
            .collect();
        causes.push(format!(
            "{} events lost while recording ({}; raise --ring-size)",
            report.lost_events.total,
            by.join(", ")
        ));
    }
    if causes.is_empty() {
        // A recording that saw nothing (incomplete::unseen_reason): its reason's first clause.
        causes.extend(
            report
                .incomplete_reasons
                .iter()
                .filter_map(|r| r.split(':').next().map(str::to_string)),
        );
    }
    Err(bad_file(format!(
        "the recording is incomplete: {}; its numbers may be wrong either way (see the \
         incomplete lines above), so the limits were not checked: record again, or give \
         --allow-incomplete to check what was read",
        causes.join("; ")
    )))
}

/// The limits of `opts` on `report` (the new recording, narrowed to the scope) against the
/// baseline at `base_path`: the absolute limits and the increase limits, for the scope or, with
/// `--by bench`, for each benchmark both recordings have (one only one has is a note). An
/// incomplete baseline is refused unless `--allow-incomplete`, as the new recording is.
fn against_baseline(
    report: &Report,
    base_path: &Path,
    opts: &CheckOptions,
    notes: &mut Vec<String>,
) -> Result<Vec<LimitResult>> {
    let base = narrow(read_report(base_path)?, opts.scope.clone(), base_path)?;
    let bad_base = |message: String| Error::BadFile {
        path: base_path.to_path_buf(),
        message,
    };
    if base
        .run
        .features
        .iter()
        .any(|f| f == incomplete::FEATURE_PROBE_FLOOR)
    {
        return Err(bad_base(
            "the baseline was recorded with --probe-floor: it has no allocations to compare \
             with; record it again without --probe-floor"
                .into(),
        ));
    }
    if !base.complete && !opts.allow_incomplete {
        return Err(bad_base(format!(
            "the baseline is incomplete ({}): its numbers may be wrong either way, so the \
             limits were not checked; record it again, or give --allow-incomplete",
            base.incomplete_reasons.join("; ")
        )));
    }
    if base.run.command != report.run.command {
        notes.push(format!(
            "the recorded commands differ (baseline `{}`, new `{}`): compared anyway",
            base.run.command.join(" "),
            report.run.command.join(" ")
        ));
    }
    if !opts.by_bench {
        let mut results = evaluate(report, opts);
        results.extend(evaluate_increase(
            &report.totals,
            &base.totals,
            opts,
            None,
            notes,
        ));
        return Ok(results);
    }
    let mut results = Vec::new();
    for bench in &report.benchmarks {
        let Some(base_bench) = base.benchmarks.iter().find(|b| b.uri == bench.uri) else {
            notes.push(format!(
                "benchmark {} is not in the baseline: not compared",
                bench.uri
            ));
            continue;
        };
        let scoped = report
            .clone()
            .narrow(Scope::Benchmark {
                uri: bench.uri.clone(),
            })
            .map_err(|_| Error::Internal(format!("benchmark {} vanished", bench.uri)))?;
        let mut absolute = evaluate(&scoped, opts);
        for r in &mut absolute {
            r.benchmark = Some(bench.uri.clone());
        }
        results.extend(absolute);
        results.extend(evaluate_increase(
            &bench.metrics,
            &base_bench.metrics,
            opts,
            Some(&bench.uri),
            notes,
        ));
    }
    for b in &base.benchmarks {
        if !report.benchmarks.iter().any(|n| n.uri == b.uri) {
            notes.push(format!(
                "benchmark {} is only in the baseline: not compared",
                b.uri
            ));
        }
    }
    if report.benchmarks.is_empty() {
        notes.push("the recording names no benchmark: nothing was checked by bench".into());
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{exit, free, malloc, run, seq};
    use crate::testkit::{recording_bytes, temp_recording};

    /// 3 allocations of 1000 bytes, peak 2000, one block of 1000 leaked at exit.
    fn report() -> Report {
        run(seq(vec![
            malloc(1, 1000),
            malloc(2, 1000),
            free(1),
            malloc(3, 1000),
            free(3),
            exit(0),
        ]))
    }

    /// [`report`] with its leaked block definitely lost at one site, as `--max-leaked` reads
    /// it from a recording with leak scans and stacks, the stacks sampled when `sampled`.
    fn lost_at_a_site(sampled: bool) -> Report {
        use crate::model::sites::{SiteMetrics, StackReport};
        let mut r = report();
        let site = SiteMetrics {
            stack_id: 2,
            frames: vec![
                crate::testkit::site_frame("malloc", ""),
                crate::testkit::site_frame("loses", "leaks.c"),
            ],
            ..SiteMetrics::default()
        };
        r.stacks = Some(StackReport {
            recorded: true,
            order: "leaked".into(),
            peak_live_bytes: 2000,
            peak_live_at_ns: None,
            sites_total: 1,
            sites: vec![site],
            local_symbols: None,
            walks: None,
            sampling: sampled.then(crate::testkit::stack_sampling),
            resident: None,
        });
        crate::testkit::lost_at_first_site(&mut r, 1000);
        r
    }

    #[test]
    fn a_sampled_top_lost_site_says_its_values_are_estimates() {
        let text = |r: &Report| {
            let mut out = Vec::new();
            write_lost_site(r, &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        let exact = text(&lost_at_a_site(false));
        assert_eq!(
            exact,
            "top lost site: 1000 B (1000 bytes) in 1 block: loses (leaks.c:1)\n"
        );
        assert_eq!(
            text(&lost_at_a_site(true)),
            format!("{exact}  {}\n", crate::testkit::SAMPLED_NOTE)
        );
    }

    #[test]
    fn suppressions_refuse_sampled_stacks_in_one_line() {
        let rules = suppress::Suppressions {
            file: "s.supp".into(),
            rules: Vec::new(),
        };
        let path = Path::new("app.mt");
        assert!(suppress_needs_exact_stacks(&lost_at_a_site(false), path, &rules).is_ok());
        assert!(suppress_needs_exact_stacks(&report(), path, &rules).is_ok());
        let err = suppress_needs_exact_stacks(&lost_at_a_site(true), path, &rules).unwrap_err();
        assert!(matches!(err, Error::Usage(_)), "{err:?}");
        let message = err.to_string();
        assert_eq!(
            message,
            "--suppress s.supp: app.mt sampled its call stacks (sites estimated from 1200 sampled \
             allocations of 52000, 1 per 512.0 KiB), and a rule matches only the blocks whose \
             stack was walked; record again with --stacks for exact stacks"
        );
    }

    fn all(limit: u64) -> CheckOptions {
        CheckOptions {
            file: PathBuf::new(),
            scope: Scope::Run,
            max_peak_heap: Some(limit),
            max_count: Some(limit),
            max_allocated: Some(limit),
            max_leaked: Some(limit),
            max_peak_rss: None,
            allow_incomplete: false,
            ..CheckOptions::default()
        }
    }

    #[test]
    fn peak_rss_is_the_resident_peak() {
        use crate::format::RssMember;
        use crate::testkit::rss;
        // 100 anon pages, then 50 file pages, then anon down to 20: peak 150 pages.
        let report = run(seq(vec![
            rss(RssMember::Anon, 100, 100, true),
            rss(RssMember::File, 50, 50, true),
            rss(RssMember::Anon, -80, 20, true),
            exit(0),
        ]));
        let page = 4096;
        let limit = |n| CheckOptions {
            max_peak_rss: Some(n),
            ..CheckOptions::default()
        };
        let r = evaluate(&report, &limit(150 * page));
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].value, r[0].pass), (150 * page, true));
        assert!(!evaluate(&report, &limit(150 * page - 1))[0].pass);
    }

    #[test]
    fn values_are_the_totals() {
        let r = evaluate(&report(), &all(u64::MAX));
        let values: Vec<u64> = r.iter().map(|l| l.value).collect();
        assert_eq!(values, vec![2000, 3, 3000, 1000]);
    }

    #[test]
    fn only_given_limits_are_checked() {
        let opts = CheckOptions {
            max_count: Some(3),
            ..CheckOptions::default()
        };
        let r = evaluate(&report(), &opts);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].flag, "--max-count");
    }

    #[test]
    fn equal_to_limit_passes() {
        let opts = CheckOptions {
            max_peak_heap: Some(2000),
            ..CheckOptions::default()
        };
        assert!(evaluate(&report(), &opts)[0].pass);
    }

    #[test]
    fn one_over_limit_fails() {
        let opts = CheckOptions {
            max_peak_heap: Some(1999),
            ..CheckOptions::default()
        };
        assert!(!evaluate(&report(), &opts)[0].pass);
    }

    #[test]
    fn leaked_limit_uses_leaked_bytes() {
        let opts = CheckOptions {
            max_leaked: Some(999),
            ..CheckOptions::default()
        };
        let r = evaluate(&report(), &opts);
        assert_eq!((r[0].value, r[0].pass), (1000, false));
    }

    #[test]
    fn no_limit_detected() {
        assert!(CheckOptions::default().has_no_limit());
        assert!(!all(1).has_no_limit());
    }

    #[test]
    fn lines_show_value_limit_and_verdict() {
        let rep = report();
        let results = evaluate(&rep, &all(2000));
        let mut out = Vec::new();
        write_results(&results, &rep, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[0].starts_with("peak heap "), "{text}");
        assert!(lines[0].contains("2.0 KiB (2000 bytes)"), "{text}");
        assert!(lines[0].ends_with("pass"), "{text}");
        assert!(lines[2].starts_with("bytes allocated"), "{text}");
        assert!(lines[2].ends_with("FAIL"), "{text}");
    }

    #[test]
    fn lines_align() {
        let rep = report();
        let results = evaluate(&rep, &all(2000));
        let mut out = Vec::new();
        write_results(&results, &rep, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let columns: Vec<usize> = text.lines().map(|l| l.find("limit").unwrap()).collect();
        assert!(columns.windows(2).all(|w| w[0] == w[1]), "{text}");
    }

    /// `report()` with `extra` allocations of 1000 bytes more (and so `extra` more leaks).
    fn grown(extra: u64) -> Report {
        let mut events = vec![
            malloc(1, 1000),
            malloc(2, 1000),
            free(1),
            malloc(3, 1000),
            free(3),
        ];
        for i in 0..extra {
            events.push(malloc(100 + i, 1000));
        }
        events.push(exit(0));
        run(seq(events))
    }

    fn increase(opts: &CheckOptions, new: &Report, base: &Report) -> Vec<LimitResult> {
        evaluate_increase(&new.totals, &base.totals, opts, None, &mut Vec::new())
    }

    #[test]
    fn every_measure_has_an_increase_limit_in_metric_order() {
        for m in Measure::ALL {
            assert_ne!(increase_flag(m.metric()), "--max-increase", "{m:?}");
        }
        let order: Vec<Metric> = METRIC_INCREASE_FLAGS.iter().map(|(m, _)| *m).collect();
        let all: Vec<Metric> = Metric::ALL
            .into_iter()
            .filter(|m| order.contains(m))
            .collect();
        assert_eq!(order, all);
    }

    #[test]
    fn relative_increase_is_exact_at_the_limit() {
        // 3 -> 4 allocations: +33.33...%.
        let (base, new) = (grown(0), grown(1));
        let limit = |bps| CheckOptions {
            metric_increases: vec![(Metric::Allocations, bps)],
            ..CheckOptions::default()
        };
        let r = increase(&limit(3334), &new, &base);
        assert_eq!(r.len(), 1);
        assert_eq!(
            (r[0].flag, r[0].value, r[0].pass),
            ("--max-count-increase", 4, true)
        );
        assert!(!increase(&limit(3333), &new, &base)[0].pass);
    }

    #[test]
    fn max_increase_covers_every_metric_both_have() {
        let opts = CheckOptions {
            max_increase: Some(0),
            ..CheckOptions::default()
        };
        let mut notes = Vec::new();
        let base = grown(0);
        let r = evaluate_increase(&base.totals, &base.totals, &opts, None, &mut notes);
        // Six heap metrics; no resident or mapping events, no leak scans: three notes.
        assert_eq!(r.len(), 6);
        assert!(r.iter().all(|l| l.pass));
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert_eq!(
            notes[2],
            "definitely lost and still reachable are not in both recordings (one has no leak \
             scans): not compared"
        );
        assert_eq!(
            notes[0],
            "peak resident is not in both recordings: not compared"
        );
    }

    #[test]
    fn a_metric_flag_replaces_max_increase_for_it() {
        let opts = CheckOptions {
            max_increase: Some(0),
            metric_increases: vec![(Metric::Allocations, 10_000)],
            ..CheckOptions::default()
        };
        let r = increase(&opts, &grown(1), &grown(0));
        let allocs = r.iter().find(|l| l.name == "allocations").unwrap();
        assert!(allocs.pass);
        let bytes = r.iter().find(|l| l.name == "bytes allocated").unwrap();
        assert!(!bytes.pass);
        assert_eq!(bytes.flag, "--max-increase");
    }

    #[test]
    fn increase_from_zero_fails_any_percentage() {
        // No leak in the base: leaking 1000 bytes is new.
        let base = run(seq(vec![malloc(1, 1000), free(1), exit(0)]));
        let new = run(seq(vec![malloc(1, 1000), exit(0)]));
        let opts = CheckOptions {
            metric_increases: vec![(Metric::LeakedBytes, 1_000_000)],
            ..CheckOptions::default()
        };
        assert!(!increase(&opts, &new, &base)[0].pass);
    }

    #[test]
    fn bytes_limit_applies_to_byte_metrics_only() {
        let opts = CheckOptions {
            max_increase_bytes: Some(1000),
            ..CheckOptions::default()
        };
        let r = increase(&opts, &grown(1), &grown(0));
        let names: Vec<&str> = r.iter().map(|l| l.name).collect();
        assert_eq!(names, vec!["peak heap", "bytes allocated", "leaked"]);
        assert!(r.iter().all(|l| l.pass), "+1000 bytes each: {r:?}");
        // Two more blocks: 2000 more allocated and leaked; the peak (2000 -> 3000) only 1000.
        let over = increase(&opts, &grown(2), &grown(0));
        let passes: Vec<bool> = over.iter().map(|l| l.pass).collect();
        assert_eq!(passes, vec![true, false, false]);
    }

    #[test]
    fn increase_lines_show_change_and_limit() {
        let opts = CheckOptions {
            metric_increases: vec![(Metric::BytesAllocated, 250)],
            ..CheckOptions::default()
        };
        let mut r = increase(&opts, &grown(1), &grown(0));
        r[0].benchmark = Some("parse::small".into());
        let mut out = Vec::new();
        write_results(&r, &grown(1), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let cells: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(
            cells,
            vec![
                "parse::small:",
                "bytes",
                "allocated",
                "+1000",
                "B",
                "(+33.3%)",
                "limit",
                "+2.50%",
                "FAIL"
            ],
            "{text}"
        );
    }

    #[test]
    fn incomplete_reasons_are_printed() {
        let mut rep = report();
        rep.incomplete_reasons.push("3 events were lost".into());
        let mut out = Vec::new();
        write_results(&[], &rep, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "incomplete: 3 events were lost\n"
        );
    }

    fn limits(path: &Path, max_peak_heap: u64) -> CheckOptions {
        CheckOptions {
            file: path.to_path_buf(),
            max_peak_heap: Some(max_peak_heap),
            ..CheckOptions::default()
        }
    }

    #[test]
    fn check_of_a_file_passes_and_fails() {
        let file = temp_recording("check", &recording_bytes());
        assert!(run_check(&limits(&file.0, 3100), &mut Vec::new()).unwrap());
        assert!(!run_check(&limits(&file.0, 3099), &mut Vec::new()).unwrap());
    }

    #[test]
    fn check_of_a_tree() {
        let file = temp_recording("check-tree", &recording_bytes());
        let opts = CheckOptions {
            scope: Scope::Tree { pid: 2 },
            ..limits(&file.0, 3000)
        };
        let mut out = Vec::new();
        assert!(run_check(&opts, &mut out).unwrap());
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("peak heap"), "{text}");
        assert!(text.trim_end().ends_with("pass"), "{text}");
    }

    #[test]
    fn check_of_a_damaged_file() {
        let bytes = recording_bytes();
        let file = temp_recording("check-damaged", &bytes[..bytes.len() - 3]);
        // The limits hold for what could be read, but the rest is unknown: a bad file.
        let e = run_check(&limits(&file.0, 1 << 30), &mut Vec::new()).unwrap_err();
        assert!(matches!(e, Error::BadFile { .. }), "{e}");
        assert!(e.to_string().contains("byte offset"), "{e}");
        // A limit already exceeded stays exceeded whatever followed.
        assert!(!run_check(&limits(&file.0, 10), &mut Vec::new()).unwrap());
    }
}
