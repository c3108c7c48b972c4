//! The metrics two recordings are compared on, and one metric's change: both values, the
//! difference and the relative difference. `diff` shows them, `check --baseline` sets limits on
//! them; both take the values from a `model::metrics::Metrics` as the pass computed it. Here, in
//! the model, so that neither command imports the other.

use serde::Serialize;

use crate::model::measure::Measure;
use crate::model::metrics::Metrics;
use crate::units::format_bytes;

/// A metric `diff` compares and `check --baseline` limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Metric {
    /// Highest live heap.
    PeakHeap,
    /// Successful allocations, reallocs included.
    Allocations,
    /// Bytes requested by the allocations.
    BytesAllocated,
    /// Bytes live when their process exited.
    LeakedBytes,
    /// Blocks live when their process exited.
    LeakedBlocks,
    /// Allocations freed by their thread before it allocated anything else.
    Temporary,
    /// Highest resident memory (anon + file + shmem); absent without the `rss` feature.
    PeakResident,
    /// Highest mapped bytes; absent without the `mappings` feature.
    PeakMapped,
    /// Of the leaked bytes, those the leak scans found definitely lost; absent without scans
    /// (`record --no-leak-scan`, format before 5, or no process of the scope exited).
    LostBytes,
    /// Of the leaked blocks, those definitely lost.
    LostBlocks,
    /// Of the leaked bytes, those still reachable at exit; absent without scans.
    ReachableBytes,
    /// Of the leaked blocks, those still reachable.
    ReachableBlocks,
}

/// Whether a metric counts bytes or events, which decides how it is shown and whether
/// `--max-increase-bytes` applies to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// A size in bytes.
    Bytes,
    /// A count.
    Count,
}

impl Metric {
    /// Every metric, in the order they are documented.
    pub const ALL: [Metric; 12] = [
        Metric::PeakHeap,
        Metric::Allocations,
        Metric::BytesAllocated,
        Metric::LeakedBytes,
        Metric::LeakedBlocks,
        Metric::Temporary,
        Metric::PeakResident,
        Metric::PeakMapped,
        Metric::LostBytes,
        Metric::LostBlocks,
        Metric::ReachableBytes,
        Metric::ReachableBlocks,
    ];

    /// Its name in JSON (`diff --format json`).
    pub fn key(self) -> &'static str {
        match self {
            Metric::PeakHeap => "peak_heap_bytes",
            Metric::Allocations => "allocations",
            Metric::BytesAllocated => "bytes_allocated",
            Metric::LeakedBytes => "leaked_bytes",
            Metric::LeakedBlocks => "leaked_blocks",
            Metric::Temporary => "temporary_allocations",
            Metric::PeakResident => "peak_resident_bytes",
            Metric::PeakMapped => "peak_mapped_bytes",
            Metric::LostBytes => "definitely_lost_bytes",
            Metric::LostBlocks => "definitely_lost_blocks",
            Metric::ReachableBytes => "still_reachable_bytes",
            Metric::ReachableBlocks => "still_reachable_blocks",
        }
    }

    /// Its name for people, as `report` and `check` say it.
    pub fn label(self) -> &'static str {
        match self {
            Metric::PeakHeap => "peak heap",
            Metric::Allocations => "allocations",
            Metric::BytesAllocated => "bytes allocated",
            Metric::LeakedBytes => "leaked",
            Metric::LeakedBlocks => "leaked blocks",
            Metric::Temporary => "temporary",
            Metric::PeakResident => "peak resident",
            Metric::PeakMapped => "peak mapped",
            Metric::LostBytes => "definitely lost",
            Metric::LostBlocks => "definitely lost blocks",
            Metric::ReachableBytes => "still reachable",
            Metric::ReachableBlocks => "still reachable blocks",
        }
    }

    /// Bytes or a count.
    pub fn unit(self) -> Unit {
        match self {
            Metric::Allocations
            | Metric::LeakedBlocks
            | Metric::Temporary
            | Metric::LostBlocks
            | Metric::ReachableBlocks => Unit::Count,
            _ => Unit::Bytes,
        }
    }

    /// Its value in `m`; `None` when the recording did not measure it (no resident or mapping
    /// events in the scope).
    pub fn value(self, m: &Metrics) -> Option<u64> {
        let heap = &m.heap;
        Some(match self {
            Metric::PeakHeap => heap.peak_live_bytes,
            Metric::Allocations => heap.allocs,
            Metric::BytesAllocated => heap.bytes_allocated,
            Metric::LeakedBytes => heap.leaked.bytes,
            Metric::LeakedBlocks => heap.leaked.blocks,
            Metric::Temporary => heap.temporary_allocs,
            Metric::PeakResident => return m.resident.as_ref().map(|r| r.peak_bytes),
            Metric::PeakMapped => return m.mapped.as_ref().map(|r| r.peak_bytes),
            Metric::LostBytes => return heap.leaks.as_ref().map(|l| l.definitely_lost.bytes),
            Metric::LostBlocks => return heap.leaks.as_ref().map(|l| l.definitely_lost.blocks),
            Metric::ReachableBytes => return heap.leaks.as_ref().map(|l| l.still_reachable.bytes),
            Metric::ReachableBlocks => {
                return heap.leaks.as_ref().map(|l| l.still_reachable.blocks)
            }
        })
    }
}

/// Each measure's metric, here rather than in `model::measure` so that the measures, which the
/// views' tables read, import nothing of the metrics.
impl Measure {
    /// The metric `diff` compares and `check` limits for it.
    pub const fn metric(self) -> Metric {
        match self {
            Measure::Peak => Metric::PeakHeap,
            Measure::Allocated => Metric::BytesAllocated,
            Measure::Count => Metric::Allocations,
            Measure::Leaked => Metric::LeakedBytes,
            Measure::Temporary => Metric::Temporary,
            Measure::Rss => Metric::PeakResident,
        }
    }

    /// Its name for people, as `report`'s totals and `check`'s lines say it ("bytes
    /// allocated"); a view with a label of its own keeps it.
    pub fn label(self) -> &'static str {
        self.metric().label()
    }

    /// Bytes or a count.
    pub fn unit(self) -> Unit {
        self.metric().unit()
    }

    /// Its key in JSON (`bytes_allocated`).
    pub fn key(self) -> &'static str {
        self.metric().key()
    }
}

impl Serialize for Metric {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.key())
    }
}

/// One metric in both recordings.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Change {
    /// Which metric.
    pub metric: Metric,
    /// Bytes or a count.
    pub unit: Unit,
    /// Its value in the base recording; absent when the base did not measure it (or the
    /// process or benchmark is not in the base).
    pub base: Option<u64>,
    /// Its value in the new recording; absent likewise.
    pub new: Option<u64>,
    /// `new - base`, when both have it.
    pub change: Option<i64>,
    /// The change in per cent of `base`: absent when either value is, or when `base` is 0 and
    /// `new` is not (text says "new"); -100 when `new` is 0 and `base` is not ("gone").
    pub relative_percent: Option<f64>,
}

impl Change {
    /// `metric` from `base` to `new` (either absent for a process or benchmark only one side
    /// has).
    pub fn of(metric: Metric, base: Option<&Metrics>, new: Option<&Metrics>) -> Change {
        let base = base.and_then(|m| metric.value(m));
        let new = new.and_then(|m| metric.value(m));
        let change = match (base, new) {
            (Some(b), Some(n)) => Some(difference(b, n)),
            _ => None,
        };
        let relative_percent = match (base, new) {
            (Some(0), Some(0)) => Some(0.0),
            (Some(0), Some(_)) => None,
            (Some(b), Some(n)) => Some((n as f64 - b as f64) * 100.0 / b as f64),
            _ => None,
        };
        Change {
            metric,
            unit: metric.unit(),
            base,
            new,
            change,
            relative_percent,
        }
    }

    /// Every metric from `base` to `new`, sorted by the largest relative change first (a
    /// metric that appeared from 0 counts as infinite; ties by the larger absolute change, then
    /// in the documented order).
    pub fn all(base: Option<&Metrics>, new: Option<&Metrics>) -> Vec<Change> {
        let mut changes: Vec<Change> = Metric::ALL
            .iter()
            .map(|&m| Change::of(m, base, new))
            .collect();
        changes.sort_by(|a, b| {
            b.magnitude()
                .total_cmp(&a.magnitude())
                .then(b.change_abs().cmp(&a.change_abs()))
                .then(a.metric.cmp(&b.metric))
        });
        changes
    }

    /// How large the relative change is, for sorting: infinite when the metric appeared from
    /// 0, -1 when a side lacks the metric (those sort last).
    pub fn magnitude(&self) -> f64 {
        match (self.relative_percent, self.base, self.new) {
            (Some(r), _, _) => r.abs(),
            (None, Some(0), Some(_)) => f64::INFINITY,
            _ => -1.0,
        }
    }

    fn change_abs(&self) -> u64 {
        self.change.map_or(0, i64::unsigned_abs)
    }

    /// Whether the value is the same on both sides (or neither side has it).
    pub fn unchanged(&self) -> bool {
        self.base == self.new
    }

    /// The relative change for people: "+12.5%", "-3.0%", "0.0%", "new" (from 0), "gone" (to
    /// 0), "-" when a side lacks the metric.
    pub fn relative_text(&self) -> String {
        match (self.base, self.new) {
            (Some(0), Some(0)) => "0.0%".to_string(),
            (Some(0), Some(_)) => "new".to_string(),
            (Some(_), Some(0)) => "gone".to_string(),
            (Some(_), Some(_)) => percent_text(self.relative_percent.unwrap_or(0.0)),
            _ => "-".to_string(),
        }
    }

    /// The change for people, signed: "+1.2 MiB", "-3", "0".
    pub fn change_text(&self) -> String {
        match self.change {
            Some(c) => signed(self.unit, c),
            None => "-".to_string(),
        }
    }
}

/// `n - base` as a signed number, saturating at the ends of i64.
pub fn difference(base: u64, n: u64) -> i64 {
    let d = i128::from(n) - i128::from(base);
    d.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// A per cent value with its sign and one decimal: "+12.5%", "-3.0%", "0.0%".
pub fn percent_text(p: f64) -> String {
    if p > 0.0 && format!("{p:.1}") != "0.0" {
        format!("+{p:.1}%")
    } else if p < 0.0 && format!("{:.1}", -p) != "0.0" {
        format!("{p:.1}%")
    } else {
        "0.0%".to_string()
    }
}

/// A value of `unit` for people: "1.2 MiB" or "1234"; "-" when absent.
pub fn value_text(unit: Unit, v: Option<u64>) -> String {
    match (unit, v) {
        (_, None) => "-".to_string(),
        (Unit::Bytes, Some(v)) => format_bytes(v),
        (Unit::Count, Some(v)) => v.to_string(),
    }
}

/// A signed change of `unit` for people: "+1.2 MiB", "-3", "0".
pub fn signed(unit: Unit, c: i64) -> String {
    let sign = match c.signum() {
        1 => "+",
        -1 => "-",
        _ => "",
    };
    let magnitude = match unit {
        Unit::Bytes => format_bytes(c.unsigned_abs()),
        Unit::Count => c.unsigned_abs().to_string(),
    };
    format!("{sign}{magnitude}")
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::model::metrics::{Blocks, HeapMetrics};

    #[test]
    fn each_measure_is_one_metric() {
        let mut seen = std::collections::HashSet::new();
        for m in Measure::ALL {
            assert!(seen.insert(m.metric()), "{m:?}");
        }
        assert_eq!(Measure::Allocated.key(), "bytes_allocated");
        assert_eq!(Measure::Allocated.label(), "bytes allocated");
        assert_eq!(Measure::Count.unit(), Unit::Count);
        assert_eq!(Measure::Rss.unit(), Unit::Bytes);
    }

    fn heap(allocs: u64, leaked: u64) -> Metrics {
        Metrics {
            processes: 1,
            heap: HeapMetrics {
                allocs,
                bytes_allocated: allocs * 10,
                leaked: Blocks {
                    blocks: leaked,
                    bytes: leaked * 10,
                },
                ..HeapMetrics::default()
            },
            resident: None,
            mapped: None,
        }
    }

    #[test]
    fn change_and_relative() {
        let c = Change::of(
            Metric::Allocations,
            Some(&heap(200, 0)),
            Some(&heap(250, 0)),
        );
        assert_eq!((c.base, c.new, c.change), (Some(200), Some(250), Some(50)));
        assert_eq!(c.relative_percent, Some(25.0));
        assert_eq!(c.relative_text(), "+25.0%");
        assert_eq!(c.change_text(), "+50");
    }

    #[test]
    fn from_zero_is_new_and_to_zero_is_gone() {
        let new = Change::of(Metric::LeakedBytes, Some(&heap(1, 0)), Some(&heap(1, 2)));
        assert_eq!(
            (new.relative_percent, new.relative_text()),
            (None, "new".into())
        );
        assert_eq!(new.change_text(), "+20 B");
        let gone = Change::of(Metric::LeakedBytes, Some(&heap(1, 2)), Some(&heap(1, 0)));
        assert_eq!(gone.relative_percent, Some(-100.0));
        assert_eq!(gone.relative_text(), "gone");
        let zero = Change::of(Metric::LeakedBytes, Some(&heap(1, 0)), Some(&heap(1, 0)));
        assert_eq!(zero.relative_text(), "0.0%");
    }

    #[test]
    fn a_metric_one_side_lacks_has_no_change() {
        let c = Change::of(Metric::PeakResident, Some(&heap(1, 0)), Some(&heap(1, 0)));
        assert_eq!(
            (c.base, c.change, c.relative_text()),
            (None, None, "-".into())
        );
        let added = Change::of(Metric::Allocations, None, Some(&heap(3, 0)));
        assert_eq!((added.base, added.new, added.change), (None, Some(3), None));
    }

    #[test]
    fn sorted_by_largest_relative_change() {
        // allocations +10%, bytes +10%, leaked new (from 0): leaks first, then the two by size
        // of change (bytes 10x larger), then unchanged, then the absent ones.
        let order: Vec<Metric> = Change::all(Some(&heap(100, 0)), Some(&heap(110, 1)))
            .iter()
            .map(|c| c.metric)
            .collect();
        assert_eq!(
            order,
            vec![
                Metric::LeakedBytes,
                Metric::LeakedBlocks,
                Metric::BytesAllocated,
                Metric::Allocations,
                Metric::PeakHeap,
                Metric::Temporary,
                Metric::PeakResident,
                Metric::PeakMapped,
                Metric::LostBytes,
                Metric::LostBlocks,
                Metric::ReachableBytes,
                Metric::ReachableBlocks,
            ]
        );
    }

    #[test]
    fn percent_text_rounds_to_zero_without_sign() {
        assert_eq!(percent_text(0.04), "0.0%");
        assert_eq!(percent_text(-0.04), "0.0%");
        assert_eq!(percent_text(12.46), "+12.5%");
        assert_eq!(percent_text(-3.0), "-3.0%");
    }

    #[test]
    fn difference_saturates() {
        assert_eq!(difference(0, u64::MAX), i64::MAX);
        assert_eq!(difference(u64::MAX, 0), i64::MIN);
    }
}
