//! The allocation sites of a report's scope (`report --stacks`, the JSON report's `stacks`):
//! each distinct call stack with what its blocks did, and its frames as symbolized. Plain
//! values; the pass that finds them is the sites pass of the accounting.

use serde::Serialize;

/// The kernel's stack-walk counters, as the recording states them.
pub use crate::format::StackWalks;

/// The allocation sites of the report's scope (`report --stacks`): each distinct call stack
/// with what its blocks did. A recording without call stacks has `recorded` false and no sites.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StackReport {
    /// Whether the recording has call stacks (false: recorded with `--no-stacks`, or by a
    /// memtrack before call stacks).
    pub recorded: bool,
    /// What the sites are sorted by: "peak", "allocated", "count", "leaked" or "temporary".
    pub order: String,
    /// The scope's heap peak the sites' `peak_live_bytes` are taken at (they add up to it).
    pub peak_live_bytes: u64,
    /// When that peak was first reached; absent when nothing was ever live.
    pub peak_live_at_ns: Option<u64>,
    /// Distinct sites in the scope; `sites` holds the top ones (`--stacks-top`).
    pub sites_total: u64,
    /// The top sites, in `order`, largest first.
    pub sites: Vec<SiteMetrics>,
    /// Present when the recording has no symbols for some modules of its stacks (its recorder
    /// was cut short before writing them) and the report named their frames from this
    /// machine's files after the fact; absent for a recording that has its symbols.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_symbols: Option<LocalSymbols>,
    /// The kernel's stack-walk counters (cumulative over the recording, not narrowed to the
    /// scope); absent when the file has none (cut short, or no call stacks).
    #[serde(flatten)]
    pub walks: Option<StackWalks>,
}

/// The modules whose frames a report named from the files of the machine it ran on, not from
/// the recording: those whose file there has the recorded build id, and the others, whose
/// frames keep their module+offset names.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LocalSymbols {
    /// The modules named from this machine's files, by path.
    pub named: Vec<String>,
    /// The modules that could not be, with why.
    pub unnamed: Vec<UnnamedModule>,
}

/// A module of [`LocalSymbols`] whose frames stay unnamed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UnnamedModule {
    /// The module's recorded path.
    pub path: String,
    /// Why its file here cannot name them (missing, another build).
    pub reason: String,
}

/// One allocation site: one distinct call stack and what the blocks it allocated did in the
/// scope.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SiteMetrics {
    /// The stack's leaf node id in the recording (0: allocations without a call stack).
    pub stack_id: u32,
    /// Its frames, innermost (the allocator) first; an inlined function comes before the
    /// function it was inlined into.
    pub frames: Vec<SiteFrame>,
    /// Bytes requested by its allocations (a realloc counts its new size).
    pub allocated_bytes: u64,
    /// Its allocations, reallocs included.
    pub allocations: u64,
    /// Its live bytes at the scope's heap peak (`StackReport::peak_live_bytes`).
    pub peak_live_bytes: u64,
    /// Bytes live when their process exited.
    pub leaked_bytes: u64,
    /// Blocks live when their process exited.
    pub leaked_blocks: u64,
    /// Of the leaked bytes, those the leak scan found definitely lost (0 without scans).
    pub lost_bytes: u64,
    /// Of the leaked blocks, those the leak scan found definitely lost.
    pub lost_blocks: u64,
    /// Definitely lost bytes a suppression rule matched (`--suppress`); not in `lost_bytes`.
    pub suppressed_bytes: u64,
    /// Definitely lost blocks a suppression rule matched.
    pub suppressed_blocks: u64,
    /// Bytes live at the end of the recording in processes still running (not leaks).
    pub live_at_end_bytes: u64,
    /// Blocks live at the end of the recording in processes still running.
    pub live_at_end_blocks: u64,
    /// Its allocations freed by the thread that made them before it allocated anything else.
    pub temporary: u64,
}

/// One frame of a site's stack.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SiteFrame {
    /// The function, demangled; "" when unknown; for a frame that ends a walk early,
    /// "[truncated]", "[unknown]" or "[unsupported]".
    pub function: String,
    /// Its source file; "" when unknown.
    pub file: String,
    /// Its source line; 0 when unknown.
    pub line: u32,
    /// The executable file the frame is in, as the recorder found it mapped; "" for a frame
    /// that ends a walk early.
    pub module: String,
    /// The file offset in `module` inside the frame's instruction (the allocator's entry for
    /// the innermost frame, inside the call for the others); for a frame that ends a walk early,
    /// why (1 truncated, 2 unknown, 3 unsupported).
    pub offset: u64,
    /// Whether the function was inlined into the next frame (same `module` and `offset`).
    pub inlined: bool,
}

impl SiteFrame {
    /// A frame that is no function: a mark that ends a walk, or a stack the file lacks.
    pub fn mark(what: &str, offset: u64) -> SiteFrame {
        SiteFrame {
            function: what.to_string(),
            file: String::new(),
            line: 0,
            module: String::new(),
            offset,
            inlined: false,
        }
    }

    /// Whether it is a mark rather than code.
    pub fn is_mark(&self) -> bool {
        self.module.is_empty() && self.function.starts_with('[')
    }
}
