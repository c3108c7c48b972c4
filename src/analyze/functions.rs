//! The allocating functions of the scope (`report --functions`): every distinct stack's
//! counters added to the functions on it, `self` to the innermost function of the program and
//! `cumulative` to every function of the program on the stack, once per stack.
//!
//! Flow: the sites pass (`stacks`) ends by adding up each stack's counters (one
//! `SiteMetrics` per distinct stack); when the report asks for functions, [`report`] walks
//! those stacks' frames (`stack_frames`, each trie node named once) into a
//! `model::functions::FunctionReport`. It holds one row per function and one small index per
//! frame: memory follows the distinct stacks, never the allocations.
//!
//! Which function a stack's allocations are the program's: the innermost trie node's frames
//! are the allocator's own (the probe is on malloc or operator new, and calls nested in them
//! are the allocator's, not events); the standard library's frames after them
//! (`SiteFrame::is_library`, the text report's folding) are skipped, so a Rust
//! `Vec::with_capacity` or a C++ `vector::push_back` counts for the program's function that
//! called it. A library function would gather every vector of the program into one row, which
//! is the split this table is there to undo, the other way round. A stack with no program
//! frame at all (a runtime's own allocations) counts for its outermost frame.

use std::collections::HashMap;

use super::order::SiteOrder;
use super::stack_frames::{FrameTable, StackFrames};
use crate::model::functions::{Cost, FunctionMetrics, FunctionReport};
use crate::model::sites::{allocator_frames, SiteFrame, SiteMetrics};

/// What `report --functions` asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FunctionOptions {
    /// What the functions are sorted by, their own cost first (`--functions-by`).
    pub order: SiteOrder,
    /// How many functions the report keeps (`--functions-top`); 0 keeps every one.
    pub top: usize,
}

/// The name of the row of the allocations without a call stack.
pub const NO_STACK: &str = "[no call stack]";

/// A function as a frame names it: by name, file and module, or without a name by its module
/// and offset (a mark by its name and why).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    function: String,
    file: String,
    module: String,
    offset: u64,
}

impl Key {
    fn of(f: &SiteFrame) -> Key {
        Key {
            function: f.function.clone(),
            file: f.file.clone(),
            module: f.module.clone(),
            offset: if f.function.is_empty() || f.is_mark() {
                f.offset
            } else {
                0
            },
        }
    }
}

/// The functions of `sites` (every site of the scope, each one distinct stack), named by
/// `names`, sorted and cut as `options` says; `recorded` is whether the recording has stacks.
pub(super) fn report(
    sites: &[SiteMetrics],
    names: &StackFrames,
    options: FunctionOptions,
    recorded: bool,
) -> FunctionReport {
    let order = options.order;
    // The heaviest stacks first, so the first frame seen of a function is on its heaviest one.
    let mut sorted: Vec<(Cost, u32)> = sites.iter().map(|s| (Cost::of(s), s.stack_id)).collect();
    sorted.sort_by(|a, b| order.key(&b.0).cmp(&order.key(&a.0)).then(a.1.cmp(&b.1)));
    let mut table = Tally::default();
    let mut frames = FrameTable::default();
    let mut total = Cost::default();
    for (n, (cost, leaf)) in sorted.into_iter().enumerate() {
        total = total.plus(cost);
        let ids = names.interned_frames(leaf, &mut frames);
        let stack: Vec<&SiteFrame> = ids.iter().map(|&i| &frames.frames[i as usize]).collect();
        let program = program_frames(&stack);
        if program.is_empty() {
            let none = table.function_of(usize::MAX, &SiteFrame::mark(NO_STACK, 0));
            table.add(none, n, cost, true);
            continue;
        }
        for (k, &pos) in program.iter().enumerate() {
            let f = table.function_of(ids[pos] as usize, stack[pos]);
            table.add(f, n, cost, k == 0);
        }
    }
    let mut functions = table.rows;
    functions.sort_by(|a, b| {
        (order.key(&b.own), order.key(&b.cumulative))
            .cmp(&(order.key(&a.own), order.key(&a.cumulative)))
            .then_with(|| {
                (&a.function, &a.module, a.offset).cmp(&(&b.function, &b.module, b.offset))
            })
    });
    let functions_total = functions.len() as u64;
    if options.top > 0 {
        functions.truncate(options.top);
    }
    FunctionReport {
        recorded,
        order: order.name().to_string(),
        functions_total,
        functions,
        total,
        sampling: None,
    }
}

/// The positions in `stack` (innermost first) of the program's functions: the innermost
/// program frame first (the one `self` counts for), then its callers that are the program's.
/// Empty only for an empty stack (allocations without one).
fn program_frames(stack: &[&SiteFrame]) -> Vec<usize> {
    // The innermost trie node's frames: the allocator function and what is inlined at its entry
    // (the stack formats' rule too). A mark is only ever a walk's outermost frame.
    let allocator = allocator_frames(stack.iter().copied());
    let program: Vec<usize> = (allocator..stack.len())
        .filter(|&k| !stack[k].is_library())
        .collect();
    match (program.is_empty(), stack.len()) {
        (false, _) => program,
        (true, 0) => Vec::new(),
        (true, n) => vec![n - 1],
    }
}

/// The functions seen so far, with their counters.
#[derive(Default)]
struct Tally {
    rows: Vec<FunctionMetrics>,
    /// A row's index by the function's key.
    by_key: HashMap<Key, usize>,
    /// A row's index by frame-table index, so each frame is keyed once.
    by_frame: HashMap<usize, usize>,
    /// For each row, the last stack (by position, plus one) that counted it cumulatively: a
    /// recursive function is on a stack several times and counts once.
    counted_in: Vec<usize>,
}

impl Tally {
    /// The row of frame `f` (index `frame` in the frame table), made when first seen with its
    /// file, line and offset.
    fn function_of(&mut self, frame: usize, f: &SiteFrame) -> usize {
        if let Some(&row) = self.by_frame.get(&frame) {
            return row;
        }
        let key = Key::of(f);
        let row = *self.by_key.entry(key.clone()).or_insert_with(|| {
            self.rows.push(FunctionMetrics {
                function: key.function,
                file: key.file,
                line: f.line,
                module: key.module,
                offset: key.offset,
                ..FunctionMetrics::default()
            });
            self.counted_in.push(0);
            self.rows.len() - 1
        });
        self.by_frame.insert(frame, row);
        row
    }

    /// Adds the cost of stack `n` to row `row`: cumulatively once per stack, and as its own
    /// when it is the stack's innermost program function (`own`).
    fn add(&mut self, row: usize, n: usize, cost: Cost, own: bool) {
        let f = &mut self.rows[row];
        if own {
            f.own = f.own.plus(cost);
        }
        if self.counted_in[row] != n + 1 {
            self.counted_in[row] = n + 1;
            f.cumulative = f.cumulative.plus(cost);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str, file: &str, inlined: bool) -> SiteFrame {
        SiteFrame {
            function: function.to_string(),
            file: file.to_string(),
            line: 1,
            module: "/bin/p".to_string(),
            offset: 0x10,
            inlined,
        }
    }

    fn positions(frames: &[SiteFrame]) -> Vec<usize> {
        program_frames(&frames.iter().collect::<Vec<_>>())
    }

    const STD: &str = "/rustc/0123/library/alloc/src/raw_vec.rs";

    #[test]
    fn the_allocator_and_the_standard_library_are_folded() {
        let stack = [
            frame("malloc", "malloc.c", false),
            frame("alloc::raw_vec::finish_grow", STD, false),
            frame("alloc::raw_vec::RawVec::grow_one", STD, false),
            frame("app::grow", "/src/app.rs", false),
            frame("std::rt::lang_start", STD, false),
            frame("main", "", false),
        ];
        assert_eq!(positions(&stack), [3, 5]);
    }

    #[test]
    fn the_allocators_inline_chain_is_its_own() {
        let stack = [
            frame("tcache_get", "malloc.c", true),
            frame("malloc", "malloc.c", false),
            frame("grow", "/src/app.c", true),
            frame("main", "/src/app.c", false),
        ];
        // An inlined function of the program is a function: grow's own, main's cumulative.
        assert_eq!(positions(&stack), [2, 3]);
    }

    #[test]
    fn a_stack_of_library_frames_counts_for_its_outermost() {
        let stack = [
            frame("malloc", "malloc.c", false),
            frame("std::rt::init", STD, false),
            frame("std::rt::lang_start_internal", STD, false),
        ];
        assert_eq!(positions(&stack), [2]);
        assert_eq!(positions(&stack[..1]), [0]);
        assert!(positions(&[]).is_empty());
    }

    // --- through the pass -------------------------------------------------------------------

    use crate::format::Event;
    use crate::model::metrics::Scope;
    use crate::testkit::*;

    /// The functions of `events` after `trie`, every one, by allocated bytes.
    fn functions_of(trie: Vec<EventKind>, events: Vec<EventKind>) -> FunctionReport {
        let mut all: Vec<Event> = stack_prelude(trie);
        all.extend(seq(events));
        let options = super::super::stacks::SiteOptions {
            functions: Some(FunctionOptions {
                order: SiteOrder::Allocated,
                top: 0,
            }),
            ..Default::default()
        };
        let r =
            crate::analyze::accounting::analyze_sites(&header(), all, None, &Scope::Run, options);
        r.functions.expect("the functions")
    }

    /// A function's (name or place, self allocations, self bytes, cumulative allocations,
    /// cumulative bytes).
    fn rows(f: &FunctionReport) -> Vec<(String, u64, u64, u64, u64)> {
        f.functions
            .iter()
            .map(|r| {
                let name = if r.function.is_empty() {
                    format!("{}+{:#x}", r.module, r.offset)
                } else {
                    r.function.clone()
                };
                (
                    name,
                    r.own.allocations,
                    r.own.allocated_bytes,
                    r.cumulative.allocations,
                    r.cumulative.allocated_bytes,
                )
            })
            .collect()
    }

    fn row(name: &str, own: (u64, u64), cumulative: (u64, u64)) -> (String, u64, u64, u64, u64) {
        (name.to_string(), own.0, own.1, cumulative.0, cumulative.1)
    }

    use crate::format::EventKind;

    /// libc's malloc at 0x10; the program: main at 0x100, 0x101 and 0x102 (three calls), grow
    /// at 0x200 and 0x201, walk (recursive) at 0x300 and 0x301.
    fn program() -> Vec<EventKind> {
        vec![
            module(1, "/lib/libc.so.6"),
            module(2, "/work/app"),
            symbol(1, 0x10, &[("malloc", "malloc.c", 1)]),
            symbol(2, 0x100, &[("main", "app.c", 10)]),
            symbol(2, 0x101, &[("main", "app.c", 11)]),
            symbol(2, 0x102, &[("main", "app.c", 12)]),
            symbol(2, 0x200, &[("grow", "app.c", 3)]),
            symbol(2, 0x201, &[("grow", "app.c", 4)]),
            symbol(2, 0x300, &[("walk", "app.c", 6)]),
            symbol(2, 0x301, &[("walk", "app.c", 7)]),
        ]
    }

    #[test]
    fn self_is_the_innermost_and_cumulative_every_caller() {
        let mut trie = program();
        trie.extend([
            // main:10 -> grow:3 -> malloc, and main:11 -> grow:4 -> malloc: two sites, one grow.
            stack_node(1, 0, 2, 0x100),
            stack_node(2, 1, 2, 0x200),
            stack_node(3, 2, 1, 0x10),
            stack_node(4, 0, 2, 0x101),
            stack_node(5, 4, 2, 0x201),
            stack_node(6, 5, 1, 0x10),
            // main:12 -> malloc.
            stack_node(7, 0, 2, 0x102),
            stack_node(8, 7, 1, 0x10),
        ]);
        let f = functions_of(
            trie,
            vec![
                malloc_from(3, 1, 100),
                malloc_from(6, 2, 50),
                malloc_from(6, 3, 50),
                malloc_from(8, 4, 30),
            ],
        );
        assert_eq!(
            rows(&f),
            [
                row("grow", (3, 200), (3, 200)),
                row("main", (1, 30), (4, 230)),
            ]
        );
        // Each allocation has one innermost function: self adds up to the scope.
        assert_eq!((f.total.allocations, f.total.allocated_bytes), (4, 230));
        assert_eq!(f.functions_total, 2);
        // The line of its heaviest stack: grow:4's, 100 bytes as grow:3's but in two
        // allocations (ties go by allocations, as the sites').
        assert_eq!(
            (f.functions[0].file.as_str(), f.functions[0].line),
            ("app.c", 4)
        );
    }

    #[test]
    fn recursion_counts_once_per_allocation() {
        let mut trie = program();
        trie.extend([
            // main -> walk:6 -> walk:7 -> walk:7 -> malloc.
            stack_node(1, 0, 2, 0x100),
            stack_node(2, 1, 2, 0x300),
            stack_node(3, 2, 2, 0x301),
            stack_node(4, 3, 2, 0x301),
            stack_node(5, 4, 1, 0x10),
        ]);
        let f = functions_of(trie, vec![malloc_from(5, 1, 64), malloc_from(5, 2, 64)]);
        assert_eq!(
            rows(&f),
            [
                row("walk", (2, 128), (2, 128)),
                row("main", (0, 0), (2, 128)),
            ]
        );
    }

    #[test]
    fn inlined_functions_are_functions() {
        let mut trie = program();
        trie.extend([
            // grow inlined into main at 0x400.
            symbol(2, 0x400, &[("grow", "app.c", 4), ("main", "app.c", 20)]),
            stack_node(1, 0, 2, 0x400),
            stack_node(2, 1, 1, 0x10),
        ]);
        let f = functions_of(trie, vec![malloc_from(2, 1, 8)]);
        assert_eq!(
            rows(&f),
            [row("grow", (1, 8), (1, 8)), row("main", (0, 0), (1, 8))]
        );
        // main's line is the inline site's, as the frame says.
        assert_eq!(f.functions[1].line, 20);
    }

    #[test]
    fn unsymbolized_frames_are_named_by_module_and_offset() {
        let trie = vec![
            module(1, "/lib/libc.so.6"),
            module(2, "/work/app"),
            stack_node(1, 0, 2, 0x500),
            stack_node(2, 1, 2, 0x600),
            stack_node(3, 2, 1, 0x10),
            stack_node(4, 1, 2, 0x601),
            stack_node(5, 4, 1, 0x10),
        ];
        let f = functions_of(trie, vec![malloc_from(3, 1, 10), malloc_from(5, 2, 20)]);
        assert_eq!(
            rows(&f),
            [
                row("/work/app+0x601", (1, 20), (1, 20)),
                row("/work/app+0x600", (1, 10), (1, 10)),
                row("/work/app+0x500", (0, 0), (2, 30)),
            ]
        );
    }

    #[test]
    fn the_standard_library_counts_for_the_program() {
        let mut trie = program();
        trie.extend([
            symbol(
                2,
                0x700,
                &[(
                    "std::vector<int>::push_back",
                    "/usr/include/c++/12/bits/stl_vector.h",
                    1,
                )],
            ),
            symbol(
                2,
                0x701,
                &[(
                    "std::vector<int>::_M_realloc_insert",
                    "/usr/include/c++/12/bits/vector.tcc",
                    1,
                )],
            ),
            stack_node(1, 0, 2, 0x100),
            stack_node(2, 1, 2, 0x700),
            stack_node(3, 2, 2, 0x701),
            stack_node(4, 3, 1, 0x10),
        ]);
        let f = functions_of(trie, vec![malloc_from(4, 1, 16)]);
        assert_eq!(rows(&f), [row("main", (1, 16), (1, 16))]);
    }

    #[test]
    fn allocations_without_a_stack_are_one_row() {
        let f = functions_of(program(), vec![malloc(1, 10)]);
        assert_eq!(rows(&f), [row(NO_STACK, (1, 10), (1, 10))]);
        assert!(!f.recorded);
    }
}
