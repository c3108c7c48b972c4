//! Which rows the process and benchmark tables of the text and markdown forms show, and in what
//! order (`report --top N`, `--all`, `--sort KEY`), with the rows left out summed into one.
//!
//! Flow: `text` and `markdown` call [`select`] on `Report::processes` or `Report::benchmarks`
//! after the report is built; JSON never goes through here (it lists everything). The order
//! follows what heaptrack and memray users expect: when every row fits and no `--sort` is
//! given, the recording's own order (the process tree, the benchmarks as the harness named
//! them); as soon as rows are cut, the biggest first by peak heap, so that the rows left out
//! are the small ones.

use crate::model::measure::Measure;
use crate::model::metrics::{BenchmarkMetrics, HeapMetrics, ProcessMetrics};

/// What the rows of the text form are (`--by`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Rows {
    /// One row per process, as a tree.
    #[default]
    Processes,
    /// One row per benchmark the harness named.
    Benchmarks,
}

impl Rows {
    /// Every kind of row, by the `--by` word that asks for it (`report --by`).
    pub const BY: [(By, Rows); 2] = [
        (By::Process, Rows::Processes),
        (By::Bench, Rows::Benchmarks),
    ];
}

/// What a command's output is split by, as `--by` says it: `report` and `check` read the word
/// through one table (`By::NAMES`) and each keeps the ones it offers as `(By, T)` pairs
/// (`Rows::BY`, check's), so one word means one thing in both and a command refuses what it
/// does not offer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum By {
    /// The run, or the scope it is narrowed to (`check`'s default).
    Run,
    /// One row per process (`report`'s default).
    Process,
    /// One row, or one line per limit, per benchmark the harness named.
    Bench,
}

impl By {
    /// Every word of `--by`.
    pub const NAMES: [(&'static str, By); 3] = [
        ("run", By::Run),
        ("process", By::Process),
        ("bench", By::Bench),
    ];

    /// Its word.
    pub fn word(self) -> &'static str {
        By::NAMES
            .iter()
            .find(|(_, b)| *b == self)
            .map_or("", |(n, _)| n)
    }
}

/// Rows shown when `--top` is not given.
pub const DEFAULT_TOP_ROWS: usize = 20;

/// The column a table is sorted by (`--sort`), biggest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortKey {
    /// Peak live heap of the row's own allocations.
    Peak,
    /// Number of allocations.
    Allocs,
    /// Bytes allocated.
    Bytes,
    /// Heap left at exit (for a process still running: live at the end).
    Leaked,
    /// Peak resident memory (0 without it).
    Rss,
}

impl SortKey {
    /// Every key with its measure, whose word `--sort` takes (`allocs` and `bytes`, its
    /// words before the measures had one vocabulary, still parse: `Measure::aliases`).
    pub const MEASURES: [(Measure, SortKey); 5] = [
        (Measure::Peak, SortKey::Peak),
        (Measure::Allocated, SortKey::Bytes),
        (Measure::Count, SortKey::Allocs),
        (Measure::Leaked, SortKey::Leaked),
        (Measure::Rss, SortKey::Rss),
    ];

    /// The words for the order in a table's title: "by peak heap".
    pub fn label(self) -> &'static str {
        match self {
            SortKey::Peak => "peak heap",
            SortKey::Allocs => "allocations",
            SortKey::Bytes => "bytes allocated",
            SortKey::Leaked => "leaked",
            SortKey::Rss => "peak resident",
        }
    }

    /// The header of the column this key sorts, so a narrow table never drops it.
    pub fn column(self) -> &'static str {
        match self {
            SortKey::Peak => "PEAK HEAP",
            SortKey::Allocs => "ALLOCS",
            SortKey::Bytes => "ALLOCATED",
            SortKey::Leaked => "LEAKED",
            SortKey::Rss => "PEAK RSS",
        }
    }

    fn value(self, m: &Measures) -> u64 {
        match self {
            SortKey::Peak => m.heap.peak_live_bytes,
            SortKey::Allocs => m.heap.allocs,
            SortKey::Bytes => m.heap.bytes_allocated,
            SortKey::Leaked => m.leaked_bytes,
            SortKey::Rss => m.resident_peak_bytes.unwrap_or(0),
        }
    }
}

/// How many rows a table shows and in what order, as `cli` validated them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowOptions {
    /// At most this many rows (`--top`); `None` for all of them (`--all`).
    pub top: Option<usize>,
    /// The order asked for (`--sort`); `None` for the default described in the module doc.
    pub sort: Option<SortKey>,
}

impl Default for RowOptions {
    fn default() -> RowOptions {
        RowOptions {
            top: Some(DEFAULT_TOP_ROWS),
            sort: None,
        }
    }
}

impl RowOptions {
    /// Every row, in the recording's order.
    pub const ALL: RowOptions = RowOptions {
        top: None,
        sort: None,
    };
}

/// What a table row shows of a process or a benchmark, for ordering and summing.
pub struct Measures<'a> {
    /// Its heap metrics.
    pub heap: &'a HeapMetrics,
    /// Its peak resident memory, when recorded.
    pub resident_peak_bytes: Option<u64>,
    /// What its LEAKED cell shows: leaked at exit, or live at the end while running.
    pub leaked_bytes: u64,
    /// Whether it was still running when the recording ended.
    pub running: bool,
}

/// The measures of a process's own row.
pub fn process_measures(p: &ProcessMetrics) -> Measures<'_> {
    let heap = &p.own.heap;
    Measures {
        heap,
        resident_peak_bytes: p.own.resident.as_ref().map(|r| r.peak_bytes),
        leaked_bytes: match p.exit {
            Some(_) => heap.leaked.bytes,
            None => heap.live_at_end.bytes,
        },
        running: p.exit.is_none(),
    }
}

/// The measures of a benchmark's row.
pub fn benchmark_measures(b: &BenchmarkMetrics) -> Measures<'_> {
    Measures {
        heap: &b.metrics.heap,
        resident_peak_bytes: b.metrics.resident.as_ref().map(|r| r.peak_bytes),
        leaked_bytes: b.metrics.heap.leaked.bytes,
        running: false,
    }
}

/// The rows a table shows and the sums of those it leaves out.
pub struct Selection<'a, T> {
    /// The rows to show, in order.
    pub shown: Vec<&'a T>,
    /// The order they are in: `None` for the recording's own.
    pub sorted_by: Option<SortKey>,
    /// How many rows there are in all.
    pub total: usize,
    /// The rows left out, summed; `None` when every row is shown.
    pub rest: Option<Rest>,
}

/// The rows a table leaves out, summed per column (the peaks, which do not add up, as the
/// largest of them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rest {
    /// How many rows.
    pub rows: u64,
    /// Their allocations.
    pub allocs: u64,
    /// Their frees.
    pub frees: u64,
    /// Their bytes allocated.
    pub bytes_allocated: u64,
    /// Their LEAKED cells.
    pub leaked_bytes: u64,
    /// Their failed allocations.
    pub failed_allocs: u64,
    /// The largest of their heap peaks.
    pub largest_peak_bytes: u64,
    /// The largest of their resident peaks, when any was recorded.
    pub largest_resident_bytes: Option<u64>,
    /// Whether any of them was still running (their LEAKED includes live heap).
    pub running: bool,
}

impl Rest {
    fn add(&mut self, m: &Measures) {
        self.rows += 1;
        self.allocs += m.heap.allocs;
        self.frees += m.heap.frees;
        self.bytes_allocated += m.heap.bytes_allocated;
        self.leaked_bytes += m.leaked_bytes;
        self.failed_allocs += m.heap.failed_allocs;
        self.largest_peak_bytes = self.largest_peak_bytes.max(m.heap.peak_live_bytes);
        if let Some(r) = m.resident_peak_bytes {
            self.largest_resident_bytes = Some(self.largest_resident_bytes.unwrap_or(0).max(r));
        }
        self.running |= m.running;
    }
}

/// The rows of `items` that `options` shows, and the rest summed. `measures` says what each
/// row shows. Ties keep the recording's order, so the output is the same on every run.
pub fn select<'a, T>(
    items: &'a [T],
    options: RowOptions,
    measures: impl Fn(&'a T) -> Measures<'a>,
) -> Selection<'a, T> {
    let total = items.len();
    let cut = options.top.is_some_and(|top| top < total);
    let sorted_by = options.sort.or(cut.then_some(SortKey::Peak));
    let mut rows: Vec<&T> = items.iter().collect();
    if let Some(key) = sorted_by {
        // Stable: equal rows stay in tree order.
        rows.sort_by_key(|&item| std::cmp::Reverse(key.value(&measures(item))));
    }
    let rest = options.top.filter(|_| cut).map(|top| {
        let mut rest = Rest::default();
        for &item in &rows[top..] {
            rest.add(&measures(item));
        }
        rows.truncate(top);
        rest
    });
    Selection {
        shown: rows,
        sorted_by,
        total,
        rest,
    }
}

impl<T> Selection<'_, T> {
    /// The table's title: "processes", "processes by leaked", "processes: top 20 of 1000 by
    /// peak heap".
    pub fn title(&self, noun: &str) -> String {
        let by = self
            .sorted_by
            .map(|k| format!(" by {}", k.label()))
            .unwrap_or_default();
        if self.rest.is_some() {
            format!("{noun}: top {} of {}{by}", self.shown.len(), self.total)
        } else {
            format!("{noun}{by}")
        }
    }
}

impl Selection<'_, ProcessMetrics> {
    /// Whether a process of the table (shown or summed) was still running at the end, which
    /// its LEAKED cell marks and a note under the table explains.
    pub fn running(&self) -> bool {
        self.shown.iter().any(|p| p.exit.is_none()) || self.rest.is_some_and(|r| r.running)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Header;
    use crate::model::metrics::Report;
    use crate::testkit::{analyze, at, exit, fork, malloc};

    /// Root 1 forks `children` processes; child i allocates (i + 1) * 10 bytes `i % 3 + 1`
    /// times, leaks them all and exits.
    fn many(children: u32) -> Report {
        let mut events = Vec::new();
        let mut t = 1;
        let mut addr = 0x1000;
        for i in 0..children {
            let pid = 2 + i;
            events.push(at(t, 1, 1, fork(pid)));
            t += 1;
            for _ in 0..(i % 3 + 1) {
                events.push(at(t, pid, pid, malloc(addr, u64::from(i + 1) * 10)));
                addr += 0x1000;
                t += 1;
            }
            events.push(at(t, pid, pid, exit(0)));
            t += 1;
        }
        events.push(at(t, 1, 1, exit(0)));
        let header = Header {
            root_pid: 1,
            ..Header::default()
        };
        analyze(&header, events, None)
    }

    #[test]
    fn everything_fits_in_tree_order() {
        let report = many(5);
        let s = select(&report.processes, RowOptions::default(), process_measures);
        assert_eq!(s.sorted_by, None);
        assert!(s.rest.is_none());
        let pids: Vec<u32> = s.shown.iter().map(|p| p.pid).collect();
        assert_eq!(pids, [1, 2, 3, 4, 5, 6]);
        assert_eq!(s.title("processes"), "processes");
    }

    #[test]
    fn a_cut_shows_the_biggest_peaks() {
        let report = many(5);
        let options = RowOptions {
            top: Some(2),
            sort: None,
        };
        let s = select(&report.processes, options, process_measures);
        assert_eq!(s.sorted_by, Some(SortKey::Peak));
        let pids: Vec<u32> = s.shown.iter().map(|p| p.pid).collect();
        // Child 4 (pid 6) peaks at 2 x 50 bytes, child 2 (pid 4) at 3 x 30.
        assert_eq!(pids, [6, 4]);
        assert_eq!(s.title("processes"), "processes: top 2 of 6 by peak heap");
    }

    #[test]
    fn a_thousand_processes_are_twenty_rows_and_one_sum() {
        let report = many(999);
        let s = select(&report.processes, RowOptions::default(), process_measures);
        assert_eq!(s.shown.len(), 20);
        let rest = s.rest.expect("the rest summed");
        assert_eq!(rest.rows, 1000 - 20);
        let shown = |f: fn(&ProcessMetrics) -> u64| s.shown.iter().map(|p| f(p)).sum::<u64>();
        let h = &report.totals.heap;
        assert_eq!(rest.allocs, h.allocs - shown(|p| p.own.heap.allocs));
        assert_eq!(rest.frees, h.frees - shown(|p| p.own.heap.frees));
        assert_eq!(
            rest.bytes_allocated,
            h.bytes_allocated - shown(|p| p.own.heap.bytes_allocated)
        );
        assert_eq!(
            rest.leaked_bytes,
            h.leaked.bytes - shown(|p| p.own.heap.leaked.bytes)
        );
        // Every shown peak is at least the largest left out.
        assert!(s
            .shown
            .iter()
            .all(|p| p.own.heap.peak_live_bytes >= rest.largest_peak_bytes));
        assert!(!rest.running);
    }

    #[test]
    fn sort_keeps_every_row_unless_cut() {
        let report = many(5);
        let options = RowOptions {
            top: None,
            sort: Some(SortKey::Allocs),
        };
        let s = select(&report.processes, options, process_measures);
        assert!(s.rest.is_none());
        let allocs: Vec<u64> = s.shown.iter().map(|p| p.own.heap.allocs).collect();
        assert_eq!(allocs, [3, 2, 2, 1, 1, 0]);
        assert_eq!(s.title("processes"), "processes by allocations");
    }

    #[test]
    fn ties_keep_tree_order() {
        let report = many(6);
        let options = RowOptions {
            top: None,
            sort: Some(SortKey::Allocs),
        };
        let s = select(&report.processes, options, process_measures);
        let pids: Vec<u32> = s.shown.iter().map(|p| p.pid).collect();
        assert_eq!(pids, [4, 7, 3, 6, 2, 5, 1]);
    }

    #[test]
    fn rss_without_resident_sorts_as_zero() {
        let report = many(3);
        let options = RowOptions {
            top: Some(1),
            sort: Some(SortKey::Rss),
        };
        let s = select(&report.processes, options, process_measures);
        assert_eq!(s.shown[0].pid, 1);
        assert_eq!(s.rest.map(|r| r.largest_resident_bytes), Some(None));
    }
}
