//! The allocating functions of a report's scope (`report --functions`, the JSON report's
//! `functions`): a flat table by function, heaptrack_print's and `pprof -top`'s, where the
//! sites (`sites`) split a function's total over its call paths. Plain values; the sites pass
//! (`analyze::functions`) adds them up from the distinct stacks.

use serde::Serialize;

use super::measure::Measure;
use super::sites::{SiteMetrics, StackSampling};

/// The allocating functions of the report's scope (`report --functions`). A recording without
/// call stacks has `recorded` false and one row, the allocations without a stack.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FunctionReport {
    /// Whether the recording has call stacks (as `StackReport::recorded`).
    pub recorded: bool,
    /// What `functions` is sorted by, their `self` cost: "peak", "allocated", "count",
    /// "leaked" or "temporary".
    pub order: String,
    /// Distinct functions in the scope's stacks; `functions` holds the top ones
    /// (`--functions-top`).
    pub functions_total: u64,
    /// The top functions, by `order` of their `self` cost, then of their `cumulative` cost.
    pub functions: Vec<FunctionMetrics>,
    /// The scope's allocations: every function's `self` added up (each allocation has one
    /// innermost function), so the heap totals of the scope.
    pub total: Cost,
    /// Present when the recording sampled its stacks: the values are then estimates from the
    /// sampled allocations (as `StackReport::sampling`); absent for exact stacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampling: Option<StackSampling>,
}

/// One function and what the allocations under it did in the scope.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FunctionMetrics {
    /// The function, demangled; "" when the file has no symbol for it (then `offset` names
    /// it); a mark such as "[unknown]" for a walk that ended early; "[no call stack]" for the
    /// allocations without one.
    pub function: String,
    /// Its source file; "" when unknown.
    pub file: String,
    /// The line of its frame on its heaviest stack (the first by `order`); 0 when unknown.
    pub line: u32,
    /// The executable file it is in; "" for a mark.
    pub module: String,
    /// For a function without a name, the file offset in `module` of its frame on its heaviest
    /// stack; 0 for a named function.
    pub offset: u64,
    /// The allocations whose innermost program frame is this function (the allocator's own
    /// frame and the standard library's folded into it).
    #[serde(rename = "self")]
    pub own: Cost,
    /// The allocations with this function anywhere on their stack, each counted once even
    /// when the function recurses.
    pub cumulative: Cost,
}

/// What a set of allocations did in the scope: the counters the measures sort by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Cost {
    /// Bytes requested (a realloc counts its new size).
    pub allocated_bytes: u64,
    /// Allocations, reallocs included.
    pub allocations: u64,
    /// Live bytes at the scope's heap peak.
    pub peak_live_bytes: u64,
    /// Bytes live when their process exited.
    pub leaked_bytes: u64,
    /// Blocks live when their process exited.
    pub leaked_blocks: u64,
    /// Of the leaked bytes, those the leak scan found definitely lost.
    pub lost_bytes: u64,
    /// Allocations freed by their thread before it allocated anything else.
    pub temporary: u64,
}

impl Cost {
    /// The cost of site `s`.
    pub fn of(s: &SiteMetrics) -> Cost {
        Cost {
            allocated_bytes: s.allocated_bytes,
            allocations: s.allocations,
            peak_live_bytes: s.peak_live_bytes,
            leaked_bytes: s.leaked_bytes,
            leaked_blocks: s.leaked_blocks,
            lost_bytes: s.lost_bytes,
            temporary: s.temporary,
        }
    }

    /// Its value of `measure`: leaked is the bytes leaked; 0 for rss, which no allocation has.
    pub fn value(&self, measure: Measure) -> u64 {
        match measure {
            Measure::Peak => self.peak_live_bytes,
            Measure::Allocated => self.allocated_bytes,
            Measure::Count => self.allocations,
            Measure::Leaked => self.leaked_bytes,
            Measure::Temporary => self.temporary,
            Measure::Rss => 0,
        }
    }

    /// `self` with `other` added.
    pub fn plus(self, other: Cost) -> Cost {
        let add = |a: u64, b: u64| a.saturating_add(b);
        Cost {
            allocated_bytes: add(self.allocated_bytes, other.allocated_bytes),
            allocations: add(self.allocations, other.allocations),
            peak_live_bytes: add(self.peak_live_bytes, other.peak_live_bytes),
            leaked_bytes: add(self.leaked_bytes, other.leaked_bytes),
            leaked_blocks: add(self.leaked_blocks, other.leaked_blocks),
            lost_bytes: add(self.lost_bytes, other.lost_bytes),
            temporary: add(self.temporary, other.temporary),
        }
    }
}
