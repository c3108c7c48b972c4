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
    /// Present when the recording sampled its stacks (the default, `record --stack-sample`):
    /// the sites' values are then estimates from the sampled allocations; absent when every
    /// allocation's stack was walked (`record --stacks`), and the values are exact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampling: Option<StackSampling>,
    /// The scope's resident memory by the code that made it resident (issue 35), when the
    /// recording has the stacks of its faults; absent otherwise, and for benchmarks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resident: Option<ResidentSites>,
}

/// Resident memory by call site: what the stacks that made pages resident held at the scope's
/// resident peak, and made resident in all (docs/formats.md, "Resident memory by call site").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ResidentSites {
    /// The scope's resident peak (anon + file + shmem) the sites are taken at: their
    /// `resident` and the unattributed share add up to it.
    pub peak_bytes: u64,
    /// When it was first reached.
    pub peak_at_ns: Option<u64>,
    /// Increases of resident memory seen with a stack to walk, and of them those walked (all
    /// with `record --stacks`; with sampled stacks, the values are estimates from those).
    pub faults: u64,
    pub walked: u64,
    /// Distinct stacks; `sites` holds the top ones (`--stacks-top`), by resident bytes at the
    /// peak, then bytes made resident.
    pub sites_total: u64,
    pub sites: Vec<ResidentSite>,
    /// Present when the recording sampled the stacks of its faults: then the values are
    /// estimates from the walked increases.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampling: Option<FaultSampling>,
    /// Whether forked processes' writes to the pages they inherited were walked: then a site
    /// "[inherited]" (stack id 4294967295, its one frame that mark) holds what they got at fork
    /// and have not written; else it holds all they got (the kernel refuses fentry, or has no
    /// do_wp_page).
    pub inherited_writes: bool,
    /// Pages no walked stack made resident (before the walker was in place, by the kernel or
    /// another task, or not sampled).
    pub unattributed: ResidentSite,
}

/// The `stack_id` of the resident site "[inherited]": the pages forked processes got from their
/// parents and have not written since; no stack of the recording's.
pub const INHERITED_STACK_ID: u32 = u32::MAX;

/// One stack's resident memory, or the unattributed share (`stack_id` 0, no frames).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ResidentSite {
    pub stack_id: u32,
    /// Bytes resident at the peak, per member and in all.
    pub resident: MemberBytes,
    /// Bytes made resident, per member and in all.
    pub faulted: MemberBytes,
    /// Innermost first: the instruction that made the pages resident (or the allocator's
    /// caller, for a page the allocator touched), then its callers.
    pub frames: Vec<SiteFrame>,
}

/// Bytes of anon, file and shmem pages, and their sum.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MemberBytes {
    pub anon_bytes: u64,
    pub file_bytes: u64,
    pub shmem_bytes: u64,
    pub total_bytes: u64,
}

/// How a recording sampled the stacks of the pages its processes made resident (issue 35), and
/// how many increases of resident memory the resident sites' estimates stand on: as
/// [`StackSampling`], over the bytes made resident instead of requested (the header's
/// `fault_sample`, 16 times the allocations' mean by default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FaultSampling {
    /// The mean number of bytes made resident between two walked increases.
    pub mean_bytes: u64,
    /// The increases whose stack was walked: what the estimates stand on.
    pub walked: u64,
    /// The increases the scope's processes made themselves, walked or not.
    pub increases: u64,
}

/// How a recording sampled its allocations' stacks, and how many of the scope's allocations
/// the sites' estimates stand on.
///
/// Every allocation is recorded exactly; only the walk of its stack is sampled, as a Poisson
/// process over the requested bytes: an allocation of `s` bytes is walked with probability
/// `1 - exp(-s / mean_bytes)`, and always when `s >= mean_bytes`. A walked allocation stands
/// for `1 / p` allocations and `s / p` bytes of its site (docs/PERFORMANCE.md, "Sampled stacks").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StackSampling {
    /// The mean number of requested bytes between two walked allocations (R).
    pub mean_bytes: u64,
    /// The seed the recording's draws came from: the same seed and the same deterministic
    /// program walk the same allocations.
    pub seed: u64,
    /// The scope's allocations whose stack was walked: what the estimates stand on.
    pub sampled_allocations: u64,
    /// The scope's allocations, walked or not (exact).
    pub allocations: u64,
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

    /// Whether it is the standard library's: by the source file its debug information names
    /// (Rust's standard library is built with its sources at `/rustc/<commit>/` and the crates
    /// it vendors at `/rust/deps/`; libstdc++'s and libc++'s templates are inlined from
    /// `…/include/c++/`, libstdc++'s own code is built from `…/libstdc++-v3/`), else, without
    /// a file, by the namespace of its name. The views for people fold these frames
    /// (`views::frames`), the stack formats start past them (`callers_start`), and the
    /// functions view counts them for the program's function that called them
    /// (`analyze::functions`).
    pub fn is_library(&self) -> bool {
        if self.is_mark() {
            return false;
        }
        if !self.file.is_empty() {
            return ["/rustc/", "/rust/deps/"]
                .iter()
                .any(|p| self.file.starts_with(p))
                || ["/include/c++/", "/libstdc++-v3/"]
                    .iter()
                    .any(|p| self.file.contains(p));
        }
        const NAMESPACES: [&str; 4] = ["std::", "core::", "alloc::", "__gnu_cxx::"];
        let name = self.function.strip_prefix('<').unwrap_or(&self.function);
        NAMESPACES.iter().any(|ns| name.starts_with(ns))
    }

    /// Whether it is Rust's way from an allocation to a `#[global_allocator]` of the program's
    /// (jemalloc's or mimalloc's crate, as rustc and many servers have): the allocator type's
    /// `GlobalAlloc` method (`<tikv_jemallocator::Jemalloc as core::alloc::global::GlobalAlloc>
    /// ::alloc`) and the shims the compiler makes (`__rust_alloc`, `__rustc::__rust_alloc` since
    /// Rust 1.88; `__rg_` and `__rdl_` forward to the chosen and the default allocator). Their
    /// source files are the crate's and the program's own, not the standard library's, so
    /// without this the stack formats started at the allocator crate and never at the caller.
    pub fn is_allocator_glue(&self) -> bool {
        let name = &self.function;
        let shim = name.strip_prefix("__rustc::").unwrap_or(name);
        ["__rust_", "__rg_", "__rdl_"]
            .iter()
            .any(|p| shim.starts_with(p))
            || name.contains(" as core::alloc::global::GlobalAlloc>::")
    }
}

/// How many of a stack's `frames` (innermost first) are the allocator's own: the function the
/// probe is on, with the functions inlined into it at the probe (they come before it), and
/// then Rust's glue to it when it is a program's global allocator
/// ([`SiteFrame::is_allocator_glue`]). None when the stack starts with a mark (a walk that
/// found no frame).
pub fn allocator_frames<'a>(frames: impl IntoIterator<Item = &'a SiteFrame>) -> usize {
    let mut n = 0;
    let mut probed = false;
    for f in frames {
        if n == 0 && f.is_mark() {
            return 0;
        }
        if probed && !f.is_allocator_glue() {
            break;
        }
        n += 1;
        probed |= !f.inlined;
    }
    n
}

/// Where the program's side of a stack's `frames` (innermost first) begins: past the
/// allocator's own frames and the run of standard-library frames right after them, but at the
/// run's outermost frame, the library function the program called (`vector::push_back`,
/// `Vec::with_capacity`), as the text report folds them (`views::frames`). A stack of nothing
/// but those keeps its last (outermost) frame, so it never becomes empty.
pub fn callers_start<'a, I>(frames: I) -> usize
where
    I: IntoIterator<Item = &'a SiteFrame>,
    I::IntoIter: Clone,
{
    let frames = frames.into_iter();
    let allocator = allocator_frames(frames.clone());
    start_past(frames, allocator)
}

/// Where the program's side of the stack of an instruction that made pages resident begins
/// (the resident views'): as [`callers_start`], but its innermost frame is the program's own
/// code, or the standard library's function it called (`memset`), not an allocator's.
pub fn toucher_start<'a, I>(frames: I) -> usize
where
    I: IntoIterator<Item = &'a SiteFrame>,
    I::IntoIter: Clone,
{
    start_past(frames.into_iter(), 0)
}

/// Past the first `allocator` frames and the run of standard-library frames after them, at the
/// run's outermost frame, never past the last frame.
fn start_past<'a>(frames: impl Iterator<Item = &'a SiteFrame> + Clone, allocator: usize) -> usize {
    let len = frames.clone().count();
    let library = frames
        .skip(allocator)
        .take_while(|f| f.is_library())
        .count();
    (allocator + library.saturating_sub(1)).min(len.saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::site_frame as frame;

    fn inlined(function: &str, file: &str) -> SiteFrame {
        SiteFrame {
            inlined: true,
            ..frame(function, file)
        }
    }

    const STD: &str =
        "/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/alloc/src/vec/mod.rs";
    const VECTOR: &str = "/usr/include/c++/12/bits/vector.tcc";

    #[test]
    fn library_frames_by_file_or_by_namespace() {
        let library = |function, file| frame(function, file).is_library();
        assert!(library("whatever", STD));
        assert!(library("std::vector<int>::_M_realloc_insert", VECTOR));
        assert!(library(
            "std::__1::vector<int>::push_back",
            "/usr/lib/llvm-16/bin/../include/c++/v1/vector"
        ));
        // No file: the namespace says.
        assert!(library("alloc::raw_vec::finish_grow", ""));
        assert!(library(
            "<alloc::alloc::Global as core::alloc::Allocator>::allocate",
            ""
        ));
        assert!(library("__gnu_cxx::new_allocator<int>::allocate", ""));
        assert!(library(
            "hashbrown::raw::RawTable<T>::reserve_rehash",
            "/rust/deps/hashbrown-0.15.2/src/raw/mod.rs"
        ));
        // A file outside the toolchains' decides over a name that looks like one of theirs.
        assert!(!library("std::f", "/src/my_std.cpp"));
        assert!(!library("<mycrate::Foo as core::fmt::Display>::fmt", ""));
        assert!(!library("operator new(unsigned long)", ""));
        assert!(!library("stdio_helper", ""));
        assert!(!SiteFrame::mark("[truncated]", 1).is_library());
    }

    #[test]
    fn the_allocator_is_the_probed_function_with_what_is_inlined_at_the_probe() {
        let plain = [frame("malloc", ""), frame("main", "/src/m.c")];
        assert_eq!(allocator_frames(&plain), 1);
        let with_inline = [
            inlined("tcache_get", "malloc.c"),
            frame("malloc", "malloc.c"),
            frame("main", "/src/m.c"),
        ];
        assert_eq!(allocator_frames(&with_inline), 2);
        let walk_failed = [SiteFrame::mark("[unknown]", 2)];
        assert_eq!(allocator_frames(&walk_failed), 0);
        assert_eq!(allocator_frames(&[]), 0);
    }

    /// testdata/rust-jemalloc's stack, as recorded: jemalloc's malloc in the executable, the
    /// crate's `GlobalAlloc`, the compiler's shim, then the standard library down to
    /// `Vec::with_capacity`, the program's call.
    #[test]
    fn a_rust_global_allocators_glue_is_the_allocators() {
        let jemalloc = [
            inlined("imalloc_fastpath", "/b/jemalloc_internal_inlines_c.h"),
            frame("malloc", "/b/src/jemalloc.c"),
            frame(
                "<tikv_jemallocator::Jemalloc as core::alloc::global::GlobalAlloc>::alloc",
                "/root/.cargo/registry/src/x/tikv-jemallocator-0.6.1/src/lib.rs",
            ),
            inlined("__rustc::__rust_alloc", "/src/main.rs"),
            inlined("alloc::alloc::alloc", STD),
            frame("alloc::raw_vec::RawVecInner<A>::try_allocate_in", STD),
            inlined("alloc::vec::Vec<T>::with_capacity", STD),
            frame("rust_inner", "/src/chain.rs"),
        ];
        assert_eq!(allocator_frames(&jemalloc), 4);
        assert_eq!(callers_start(&jemalloc), 6);
        // The same names further out are not the allocator's: only right after it.
        let later = [
            frame("malloc", ""),
            frame("user", "/u.rs"),
            frame("__rust_alloc", ""),
        ];
        assert_eq!(allocator_frames(&later), 1);
        let glue = |name| frame(name, "").is_allocator_glue();
        assert!(glue("__rust_alloc_zeroed"));
        assert!(glue("__rdl_dealloc"));
        assert!(glue(
            "<mimalloc::MiMalloc as core::alloc::global::GlobalAlloc>::realloc"
        ));
        assert!(!glue("rust_alloc_helper"));
        assert!(!glue("<my::Pool as my::Alloc>::alloc"));
    }

    #[test]
    fn callers_start_after_the_allocator_at_the_library_function_called() {
        // operator new, then libstdc++'s templates, then the program: the caller is the
        // outermost library frame, push_back (inlined into main).
        let cxx = [
            frame("operator new(unsigned long)", ""),
            inlined(
                "std::__new_allocator<int>::allocate(unsigned long, void const*)",
                VECTOR,
            ),
            frame(
                "std::vector<int>::_M_realloc_append<int const&>(int const&)",
                VECTOR,
            ),
            inlined("std::vector<int>::push_back(int const&)", VECTOR),
            frame("main", "/src/m.cpp"),
        ];
        assert_eq!(callers_start(&cxx), 3);
        // No library frames: the allocator's caller itself.
        let c = [frame("malloc", ""), frame("table", "/src/t.c")];
        assert_eq!(callers_start(&c), 1);
        // One library frame stays: it is what the program called.
        let one = [
            frame("malloc", ""),
            frame("std::f", STD),
            frame("user", "/u.rs"),
        ];
        assert_eq!(callers_start(&one), 1);
        // A stack of allocator frames only keeps its last frame.
        assert_eq!(
            callers_start(&[frame("operator new(unsigned long)", "")]),
            0
        );
        let inline_only = [inlined("tcache_get", ""), frame("malloc", "")];
        assert_eq!(callers_start(&inline_only), 1);
        // A walk that found nothing keeps its mark; an empty stack stays empty.
        assert_eq!(callers_start(&[SiteFrame::mark("[unknown]", 2)]), 0);
        assert_eq!(callers_start(&[]), 0);
        // Library frames further out are the program's business: only the innermost run.
        let outer = [
            frame("malloc", ""),
            frame("user", "/u.rs"),
            frame("std::rt::lang_start", STD),
        ];
        assert_eq!(callers_start(&outer), 1);
    }
}
