//! The one streaming pass over a recording: every event goes through `accounting` (the one
//! dispatcher), which feeds the process `tree`, the heap `counters`, `resident` and `mapped`
//! memory, benchmark windows (`bench`), the sites pass (`stacks`, with `suppress`,
//! `stack_frames` naming each site's frames, `functions` adding them up by function and
//! `order` sorting both), the `timeline` pass and `rmap`, then `assemble` builds the model's
//! `Report` and `incomplete` says what could not be counted.
//!
//! Flow: [`read_report`] and its variants read a file (a second thread decodes while this one
//! accounts) into a `model::metrics::Report`; [`narrow`] cuts it to the scope the command asked
//! for. The pass imports `format` and `model`, never the views or the commands.

pub mod accounting;
mod assemble;
mod bench;
mod counters;
pub mod functions;
pub mod incomplete;
mod mapped;
mod order;
mod resident;
mod resident_sites;
pub mod rmap;
mod site_table;
mod stack_frames;
pub mod stacks;
pub mod suppress;
pub mod timeline;
mod tree;

use std::path::Path;
use std::sync::mpsc;

use crate::error::{Error, Result};
use crate::format::{Event, Reader};
use crate::model::metrics::{Report, Scope, Unknown};

pub use accounting::{analyze, Accounting};
pub use stacks::{SiteOptions, SiteOrder};

/// Events pass from the decoding thread to the accounting in batches of this many.
const BATCH_EVENTS: usize = 4096;

/// Reads the recording at `path` into its [`Report`] for the whole run, as `report` and
/// `check` do before narrowing it (and as a command comparing two recordings would). A damaged,
/// cut or lossy file still gives a report, with `complete` false and the reasons in
/// `incomplete_reasons`; only a file that cannot be opened or is not a recording is an error.
///
/// Events stream through the accounting, so memory follows the live allocations, not the file
/// length. Decoding (checksums, varints, delta state) and accounting each take about half of
/// the work, so a second thread decodes while this one accounts (3.3 M-event storm recording:
/// 0.17 to 0.14 s of wall time; 10 M-event churn recording: 0.37 to 0.24 s, on 2 CPUs). Events
/// arrive in file order, exactly as a single loop would see them.
pub fn read_report(path: &Path) -> Result<Report> {
    read_report_with(path, None)
}

/// [`read_report`] that also finds the allocation sites of a scope (`report --stacks`), in the
/// same single pass.
pub fn read_report_with(path: &Path, sites: Option<(&Scope, SiteOptions)>) -> Result<Report> {
    read_report_full(path, sites, None)
}

/// [`read_report_full`] that also applies leak suppressions to the definitely lost blocks of
/// the sites' scope (they need `sites`: a suppression matches a block by its stack).
pub fn read_report_suppressed(
    path: &Path,
    sites: Option<(&Scope, SiteOptions)>,
    timeline: Option<&Scope>,
    suppress: Option<&suppress::Suppressions>,
) -> Result<Report> {
    read_pass(path, sites, timeline, suppress)
}

/// Whether suppressions can apply to `report`: its recording must have leak scans (they find
/// what is definitely lost) and call stacks (the rules match their frames). Either missing is
/// a usage error: a gate that silently suppressed nothing would pretend.
pub fn suppressible(report: &Report, path: &Path, s: &suppress::Suppressions) -> Result<()> {
    let has = |f: &str| report.run.features.iter().any(|g| g == f);
    if !has(crate::format::FEATURE_LEAK_SCAN) {
        return Err(Error::Usage(format!(
            "--suppress {}: {} has no leak scans (recorded with --no-leak-scan, or before format \
             version 5), so nothing is definitely lost to suppress; record again without \
             --no-leak-scan",
            s.file,
            path.display()
        )));
    }
    if !report.stacks.as_ref().is_some_and(|st| st.recorded) {
        return Err(Error::Usage(format!(
            "--suppress {}: suppressions need call stacks, and {} has none; record again with \
             --stacks",
            s.file,
            path.display()
        )));
    }
    Ok(())
}

/// [`read_report_with`] that also follows memory over time (`Report::timeline`) of the scope
/// `timeline`, if given, in the same single pass.
pub fn read_report_full(
    path: &Path,
    sites: Option<(&Scope, SiteOptions)>,
    timeline: Option<&Scope>,
) -> Result<Report> {
    read_pass(path, sites, timeline, None)
}

/// The one pass over the file behind every `read_report*`.
fn read_pass(
    path: &Path,
    sites: Option<(&Scope, SiteOptions)>,
    timeline: Option<&Scope>,
    suppress: Option<&suppress::Suppressions>,
) -> Result<Report> {
    let reader = Reader::open(path)?;
    let mut accounting = match sites {
        Some((scope, options)) => Accounting::with_sites(reader.header(), scope, options),
        None => Accounting::new(reader.header()),
    };
    if let Some(scope) = timeline {
        accounting = accounting.with_timeline_of(scope);
    }
    if let Some(s) = suppress {
        accounting = accounting.with_suppressions(s.clone());
    }
    let (full_tx, full_rx) = mpsc::sync_channel::<Vec<Event>>(4);
    let (empty_tx, empty_rx) = mpsc::channel::<Vec<Event>>();
    let reader = std::thread::scope(|s| {
        let decoder = s.spawn(move || {
            let mut reader = reader;
            loop {
                let mut batch = empty_rx
                    .try_recv()
                    .unwrap_or_else(|_| Vec::with_capacity(BATCH_EVENTS));
                batch.extend(reader.by_ref().take(BATCH_EVENTS));
                if batch.is_empty() || full_tx.send(batch).is_err() {
                    return reader;
                }
            }
        });
        for mut batch in full_rx {
            for event in batch.drain(..) {
                accounting.apply(&event);
            }
            let _ = empty_tx.send(batch); // the decoder may have finished: nothing to reuse
        }
        decoder.join()
    });
    let reader = reader.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    if reader.end().is_none() {
        log::warn!(
            "{}: the reader stopped without saying how the file ended",
            path.display()
        );
    }
    accounting.note_skipped(reader.skipped());
    let report = accounting.finish(reader.end());
    if let Some(local) = report
        .stacks
        .as_ref()
        .and_then(|s| s.local_symbols.as_ref())
    {
        say_local_symbols(path, local);
    }
    Ok(report)
}

/// The note that a recording's frames were named after the fact, from this machine's files
/// (each module's own warning, when it could not be, is said by the pass).
fn say_local_symbols(path: &Path, local: &crate::model::sites::LocalSymbols) {
    if local.named.is_empty() {
        return;
    }
    log::warn!(
        "{}: the recording has no symbols (its recorder was cut short, or ran with \
         --no-symbols), so the frames of {} modules were named from this machine's files, \
         checked by build id (the JSON report lists them in stacks.local_symbols)",
        path.display(),
        local.named.len(),
    );
}

/// Narrows `report` to `scope`, turning an unknown pid or benchmark into a usage error that
/// says how to list what the recording has.
pub fn narrow(report: Report, scope: Scope, path: &Path) -> Result<Report> {
    report.narrow(scope).map_err(|unknown| {
        Error::Usage(match unknown {
            Unknown::Pid(pid) => format!(
                "pid {pid} is not in the recording; `memtrack report {}` lists its processes",
                path.display()
            ),
            Unknown::Benchmark(uri) => format!(
                "benchmark '{uri}' is not in the recording; `memtrack report {} --by bench` \
                 lists its benchmarks",
                path.display()
            ),
        })
    })
}
