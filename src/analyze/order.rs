//! How the sites and the functions of a report are ordered (`--stacks-by`, `--functions-by`):
//! one measure of the `model::measure` vocabulary, and the key a site's or a function's cost
//! is sorted by. The sites pass (`stacks`) sorts its sites by it and `functions` its rows, so
//! both lists put the same costs first.

use crate::model::functions::Cost;
use crate::model::measure::{self, Measure};

/// How `report --stacks` orders its sites (`--stacks-by`) and `--functions` its functions
/// (`--functions-by`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SiteOrder {
    /// Live bytes at the scope's heap peak, then bytes allocated.
    #[default]
    Peak,
    /// Bytes allocated.
    Allocated,
    /// Allocations made.
    Count,
    /// Bytes definitely lost (by the leak scan), then bytes leaked (live at their process's
    /// exit).
    Leaked,
    /// Temporary allocations.
    Temporary,
}

impl SiteOrder {
    /// Every order with its measure, whose word `--stacks-by` and `--functions-by` take.
    pub const MEASURES: [(Measure, SiteOrder); 5] = [
        (Measure::Peak, SiteOrder::Peak),
        (Measure::Allocated, SiteOrder::Allocated),
        (Measure::Count, SiteOrder::Count),
        (Measure::Leaked, SiteOrder::Leaked),
        (Measure::Temporary, SiteOrder::Temporary),
    ];

    /// The flag name of the order.
    pub fn name(self) -> &'static str {
        measure::word_of(&SiteOrder::MEASURES, &self, "peak")
    }

    /// The key a site or a function is sorted by, largest first: the chosen cost, then bytes and count
    /// allocated, so ties still put the heavier site first.
    pub(super) fn key(self, s: &Cost) -> (u64, u64, u64) {
        let first = match self {
            SiteOrder::Peak => s.peak_live_bytes,
            SiteOrder::Allocated => s.allocated_bytes,
            SiteOrder::Count => s.allocations,
            SiteOrder::Leaked => return (s.lost_bytes, s.leaked_bytes, s.allocated_bytes),
            SiteOrder::Temporary => s.temporary,
        };
        (first, s.allocated_bytes, s.allocations)
    }
}
