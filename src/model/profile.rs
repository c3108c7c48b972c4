//! The profile model of the stack formats (`report --format folded|flamegraph|pprof|speedscope`):
//! every allocation site of the report's scope, not only the top ones, each with its full frames,
//! its values for every view and weight, and the process (and benchmark) it belongs to.
//!
//! Flow: `stacks::StackPass` builds a [`Profile`] from its site table when the report asks for
//! one (`SiteOptions::profile`); `accounting` names the benchmarks; the renderers (`folded`,
//! `flamegraph`, `pprof`, `speedscope`) only read it. [`folded`] is the one place frames become
//! names, so the folded lines, the flame graph and speedscope agree.
//!
//! A profile holds every frame as recorded; `report` then starts its stacks at the allocator's
//! caller ([`Profile::start_at_callers`], unless `--allocator-frames`), as Go's heap profiles
//! start at the caller of `mallocgc`: in `go tool pprof -top` the flat column names the code
//! that allocated, not `operator new` for 99 % of the bytes.
//!
//! A sample is one (site, process, benchmark): pprof and speedscope can filter by process and
//! benchmark with it, and every view still adds up, since the samples split the scope's blocks.

use std::collections::BTreeMap;
use std::str::FromStr;

use super::measure::{self, Measure};
use super::sites::{callers_start, toucher_start, FaultSampling, SiteFrame, StackSampling};

/// Which blocks a profile view weighs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum View {
    /// Live at the scope's heap peak (the first moment its live heap was highest): what to cut
    /// to lower the peak, so the default.
    #[default]
    Peak,
    /// Every allocation made.
    Allocated,
    /// Live when their process exited.
    Leaked,
    /// Freed by the thread that made them before it allocated anything else.
    Temporary,
    /// Pages resident at the scope's resident peak, by the stack that made each resident
    /// (issue 35; `record` with stacks and resident memory).
    Resident,
    /// Every page made resident, by the stack that did.
    Faulted,
}

impl View {
    /// The heap views with their measures, whose words `--view` takes.
    pub const MEASURES: [(Measure, View); 4] = [
        (Measure::Peak, View::Peak),
        (Measure::Allocated, View::Allocated),
        (Measure::Leaked, View::Leaked),
        (Measure::Temporary, View::Temporary),
    ];

    /// The views of resident memory, with their words: pages, not blocks, so no heap measure
    /// of `model::measure` (nor a metric `diff` compares) is theirs.
    pub const RESIDENT: [(&'static str, View); 2] =
        [("resident", View::Resident), ("faulted", View::Faulted)];

    /// Every word `--view` takes, in the order its help lists them.
    pub fn words() -> impl Iterator<Item = &'static str> {
        measure::words(&View::MEASURES).chain(View::RESIDENT.map(|(w, _)| w))
    }

    /// The flag name.
    pub fn name(self) -> &'static str {
        match View::RESIDENT.iter().find(|(_, v)| *v == self) {
            Some((word, _)) => word,
            None => measure::word_of(&View::MEASURES, &self, "peak"),
        }
    }

    /// What it shows, for titles: "live at the heap peak", "allocated", ...
    pub fn describe(self) -> &'static str {
        match self {
            View::Peak => "live at the heap peak",
            View::Allocated => "allocated",
            View::Leaked => "leaked",
            View::Temporary => "temporary",
            View::Resident => "resident at the resident peak",
            View::Faulted => "made resident",
        }
    }

    /// Whether it weighs pages made resident rather than heap blocks.
    pub fn is_resident(self) -> bool {
        matches!(self, View::Resident | View::Faulted)
    }

    /// The unit of its values weighed by `weight`: "bytes", "allocations" or "pages".
    pub fn unit(self, weight: Weight) -> &'static str {
        match weight {
            Weight::Count if self.is_resident() => "pages",
            _ => weight.unit(),
        }
    }
}

impl FromStr for View {
    type Err = ();

    fn from_str(s: &str) -> Result<View, ()> {
        measure::pick(&View::MEASURES, s)
            .or_else(|| {
                View::RESIDENT
                    .iter()
                    .find(|(w, _)| *w == s)
                    .map(|&(_, v)| v)
            })
            .ok_or(())
    }
}

/// What a view's blocks are weighed by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Weight {
    /// Requested bytes.
    #[default]
    Bytes,
    /// Blocks (allocations).
    Count,
}

impl Weight {
    /// Every weight with its flag name, as `--weight` takes them: a count of blocks is the
    /// count measure's word.
    pub const ALL: [(&'static str, Weight); 2] = [
        ("bytes", Weight::Bytes),
        (Measure::Count.word(), Weight::Count),
    ];

    /// The flag name.
    pub fn name(self) -> &'static str {
        Weight::ALL
            .iter()
            .find(|(_, w)| *w == self)
            .map_or("bytes", |(n, _)| n)
    }

    /// The unit of a value, for titles and viewers: "bytes" or "allocations".
    pub fn unit(self) -> &'static str {
        match self {
            Weight::Bytes => "bytes",
            Weight::Count => "allocations",
        }
    }
}

impl FromStr for Weight {
    type Err = ();

    fn from_str(s: &str) -> Result<Weight, ()> {
        Weight::ALL
            .iter()
            .find(|(n, _)| *n == s)
            .map(|&(_, w)| w)
            .ok_or(())
    }
}

/// One sample's values, every view in both weights.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Values {
    pub allocations: u64,
    pub allocated_bytes: u64,
    /// Blocks live at the scope's heap peak.
    pub peak_live_blocks: u64,
    pub peak_live_bytes: u64,
    pub leaked_blocks: u64,
    pub leaked_bytes: u64,
    /// Temporary allocations.
    pub temporary: u64,
    pub temporary_bytes: u64,
    /// Pages resident at the scope's resident peak that this stack made resident.
    pub resident_pages: u64,
    pub resident_bytes: u64,
    /// Pages this stack made resident.
    pub faulted_pages: u64,
    pub faulted_bytes: u64,
}

impl Values {
    /// The value of `view` weighed by `weight`.
    pub fn get(&self, view: View, weight: Weight) -> u64 {
        match (view, weight) {
            (View::Peak, Weight::Bytes) => self.peak_live_bytes,
            (View::Peak, Weight::Count) => self.peak_live_blocks,
            (View::Allocated, Weight::Bytes) => self.allocated_bytes,
            (View::Allocated, Weight::Count) => self.allocations,
            (View::Leaked, Weight::Bytes) => self.leaked_bytes,
            (View::Leaked, Weight::Count) => self.leaked_blocks,
            (View::Temporary, Weight::Bytes) => self.temporary_bytes,
            (View::Temporary, Weight::Count) => self.temporary,
            (View::Resident, Weight::Bytes) => self.resident_bytes,
            (View::Resident, Weight::Count) => self.resident_pages,
            (View::Faulted, Weight::Bytes) => self.faulted_bytes,
            (View::Faulted, Weight::Count) => self.faulted_pages,
        }
    }
}

/// A module the stacks run through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileModule {
    /// Its path, as the recorder found it mapped.
    pub path: String,
    /// Its GNU build id, lowercase hex; "" when it has none.
    pub build_id: String,
}

/// One distinct call stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stack {
    /// Its leaf node id in the recording (0: allocations without a call stack).
    pub id: u32,
    /// Indices into `Profile::frames`: innermost (the allocator, or its caller after
    /// [`Profile::start_at_callers`]) first, inlined functions before the function they were
    /// inlined into, as `SiteFrame` in the JSON report.
    pub frames: Vec<u32>,
    /// Whether it is the stack of an instruction that made pages resident (the resident views'),
    /// whose innermost frame is the program's, not an allocator's.
    pub toucher: bool,
}

/// What one stack's blocks did in one process (and benchmark window).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Index into `Profile::stacks`.
    pub stack: usize,
    pub pid: u32,
    /// The program the process ran (its last exec's), "" when unknown.
    pub command: String,
    /// The benchmark measuring when the blocks were allocated, if any.
    pub benchmark: Option<String>,
    pub values: Values,
}

/// Every site of a scope, for the stack formats.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Profile {
    /// Whether the recording has call stacks at all.
    pub recorded: bool,
    /// The scope's heap peak the `peak` view is taken at (its bytes add up to it).
    pub peak_live_bytes: u64,
    /// The modules the recording names, by path.
    pub modules: Vec<ProfileModule>,
    /// Every frame the stacks name, each once. Stacks share most of their frames (a build's
    /// thousands of stacks run through the same few hundred functions), and a frame's names
    /// are long (a Rust function's often 100 characters and more): a copy of every frame per
    /// stack made the profile of one g++ run 1.2 GB.
    pub frames: Vec<SiteFrame>,
    pub stacks: Vec<Stack>,
    /// Sorted by stack, pid, benchmark.
    pub samples: Vec<Sample>,
    /// Present when the values are estimates from sampled stacks (as `StackReport::sampling`).
    pub sampling: Option<StackSampling>,
    /// The scope's resident peak the `resident` view is taken at (its bytes add up to it), when
    /// the recording has the stacks of pages made resident.
    pub resident_peak_bytes: Option<u64>,
    /// Present when the resident views' values are estimates from sampled fault stacks.
    pub resident_sampling: Option<FaultSampling>,
}

impl Profile {
    /// The frames of `stack`, innermost first.
    pub fn frames_of<'a>(
        &'a self,
        stack: &'a Stack,
    ) -> impl DoubleEndedIterator<Item = &'a SiteFrame> + ExactSizeIterator + 'a {
        stack.frames.iter().map(|&i| &self.frames[i as usize])
    }

    /// Starts every stack at the allocator's caller: drops the allocator's own frames and the
    /// standard library's frames between it and the program but the outermost of those, the
    /// library function the program called (`model::sites::callers_start`, the decision the
    /// text report folds its frames by). A stack with nothing else keeps its outermost frame.
    /// Stacks that become equal stay separate stacks; the formats add them up by name.
    pub fn start_at_callers(&mut self) {
        let frames = &self.frames;
        for stack in &mut self.stacks {
            let of_stack = stack.frames.iter().map(|&i| &frames[i as usize]);
            let start = if stack.toucher {
                toucher_start(of_stack)
            } else {
                callers_start(of_stack)
            };
            stack.frames.drain(..start);
        }
    }

    /// The entries of a format's table of views (`view_of` says each one's), the resident views
    /// last, that this profile has values for: all of them, or without the resident views the
    /// heap's alone. pprof's sample types and speedscope's profiles are such tables.
    pub fn views_in<'t, T>(&self, table: &'t [T], view_of: impl Fn(&T) -> View) -> &'t [T] {
        if self.resident_peak_bytes.is_some() {
            return table;
        }
        let heap = table
            .iter()
            .take_while(|t| !view_of(t).is_resident())
            .count();
        debug_assert!(table[heap..].iter().all(|t| view_of(t).is_resident()));
        &table[..heap]
    }

    /// The sum of `view` weighed by `weight` over every sample.
    pub fn total(&self, view: View, weight: Weight) -> u64 {
        self.samples
            .iter()
            .map(|s| s.values.get(view, weight))
            .fold(0u64, u64::saturating_add)
    }
}

/// How a frame is named in folded lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Naming {
    /// The function alone, as demangled (`malloc`, `Foo::bar(int) const`): folded lines.
    #[default]
    Function,
    /// The function and its module's file name (`malloc [libc.so.6]`): the same function
    /// name in two modules stays two frames (differential flame graphs of two recordings).
    FunctionAndModule,
    /// The function's [`label`]: a C++ name without its parameter list, return type and
    /// function template arguments (`Foo::bar`), the flame graph's frames. A label that does
    /// not fit its box is cut from the left, so what stays is the function's own name, where a
    /// C++ name once showed only the end of its parameter list.
    Label,
}

/// The name of one frame in folded lines: its function; an unsymbolized frame is its module's
/// file name and offset (`libfoo.so+0x1234`); a mark that ends a walk early keeps its bracketed
/// name (`[truncated]`, `[unknown]`, ...). A `;` (the folded separator, as in Rust's `[u8; 8]`)
/// becomes `:`, and line breaks become spaces, so a name is always one frame on one line.
pub fn frame_name(f: &SiteFrame, naming: Naming) -> String {
    let module = f.module.rsplit('/').next().unwrap_or(&f.module);
    let name = if f.is_mark() {
        f.function.clone()
    } else if f.function.is_empty() {
        format!("{module}+{:#x}", f.offset)
    } else if naming == Naming::FunctionAndModule {
        format!("{} [{module}]", f.function)
    } else if naming == Naming::Label {
        label(&f.function).to_string()
    } else {
        f.function.clone()
    };
    name.replace(';', ":").replace(['\n', '\r'], " ")
}

/// The short name of the function `name` for a flame graph's label: a C++ name as demangled
/// loses its parameter list with what follows it (`const`, `&&`, GCC's `[clone .cold]`), then,
/// for a function template, its own template arguments and the return type before it:
/// `std::vector<int>::push_back(int const&)` is `std::vector<int>::push_back`,
/// `Blob<7781ul>* build<Blob<7781ul> >()` is `build`. So the label ends with the function's
/// name. A name without a parameter list (C, Rust, a mark) is itself, as is `operator()`'s
/// own `()`: only a list that follows a name is one.
pub fn label(name: &str) -> &str {
    let Some(open) = parameters_at(name) else {
        return name;
    };
    let mut f = &name[..open];
    if f.ends_with('>') && !f.contains("operator") {
        if let Some(open) = matching_open(f, '<', '>') {
            f = &f[..open];
        }
    }
    // The return type, before the last space outside brackets that is not operator's own
    // (`operator new`, `operator bool`).
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in f.char_indices() {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' => depth = depth.saturating_sub(1),
            ' ' if depth == 0 && !f[..i].ends_with("operator") => start = i + 1,
            _ => {}
        }
    }
    match &f[start..] {
        "" => name,
        f => f,
    }
}

/// Where the parameter list of the C++ function `name` opens, if it has one: the `(` that
/// matches its last `)`, after the qualifiers and clone suffixes that may follow.
fn parameters_at(name: &str) -> Option<usize> {
    let mut end = name.trim_end();
    loop {
        let before = end.len();
        for suffix in [" const", " volatile", " &&", " &", " noexcept"] {
            end = end.strip_suffix(suffix).unwrap_or(end).trim_end();
        }
        if end.ends_with(']') {
            if let Some(i) = end.rfind(" [clone ") {
                end = &end[..i];
            }
        }
        if end.len() == before {
            break;
        }
    }
    if !end.ends_with(')') {
        return None;
    }
    let open = matching_open(end, '(', ')')?;
    let before = &end[..open];
    (!before.is_empty() && !before.ends_with("operator")).then_some(open)
}

/// The index of the `open` that matches the `close` `s` ends with.
fn matching_open(s: &str, open: char, close: char) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in s.char_indices().rev() {
        if c == close {
            depth += 1;
        } else if c == open {
            depth = depth.checked_sub(1)?;
            if depth == 0 {
                return Some(i);
            }
        }
    }
    None
}

/// The folded name of an empty stack: allocations the recording has no call stack for.
pub const NO_STACK: &str = "[no stack]";

/// The folded stack of `stack`: frames root first, joined by `;`; `names` holds the name of
/// each of the profile's frames.
fn folded_stack(stack: &Stack, names: &[String]) -> String {
    if stack.frames.is_empty() {
        return NO_STACK.to_string();
    }
    let names: Vec<&str> = stack
        .frames
        .iter()
        .rev()
        .map(|&i| names[i as usize].as_str())
        .collect();
    names.join(";")
}

/// The folded lines of `profile` for `view` weighed by `weight`: (stack root first, value),
/// one per distinct folded stack (stacks that name the same frames add up), sorted by stack,
/// without zero values. This is what `--format folded` prints, one `stack value` per line.
pub fn folded(profile: &Profile, view: View, weight: Weight, naming: Naming) -> Vec<(String, u64)> {
    let mut per_stack = vec![0u64; profile.stacks.len()];
    for s in &profile.samples {
        if let Some(v) = per_stack.get_mut(s.stack) {
            *v = v.saturating_add(s.values.get(view, weight));
        }
    }
    let names: Vec<String> = profile
        .frames
        .iter()
        .map(|f| frame_name(f, naming))
        .collect();
    let mut lines: BTreeMap<String, u64> = BTreeMap::new();
    for (stack, value) in profile.stacks.iter().zip(per_stack) {
        if value > 0 {
            let v = lines.entry(folded_stack(stack, &names)).or_default();
            *v = v.saturating_add(value);
        }
    }
    lines.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str, module: &str, offset: u64) -> SiteFrame {
        SiteFrame {
            function: function.into(),
            file: String::new(),
            line: 0,
            module: module.into(),
            offset,
            inlined: false,
        }
    }

    fn profile() -> Profile {
        let values = |peak, alloc| Values {
            peak_live_bytes: peak,
            allocated_bytes: alloc,
            allocations: 1,
            ..Values::default()
        };
        Profile {
            recorded: true,
            peak_live_bytes: 30,
            modules: Vec::new(),
            frames: vec![
                frame("malloc", "/lib/libc.so.6", 1),
                frame("main", "/a", 2),
                frame("main", "/a", 3),
                frame("", "/lib/libfoo.so", 0x1234),
                SiteFrame::mark("[truncated]", 1),
            ],
            stacks: vec![
                Stack {
                    id: 2,
                    frames: vec![0, 1],
                    toucher: false,
                },
                // Another call site in main: the same folded stack.
                Stack {
                    id: 4,
                    frames: vec![0, 2],
                    toucher: false,
                },
                Stack {
                    id: 5,
                    frames: vec![3, 4],
                    toucher: false,
                },
                Stack {
                    id: 0,
                    frames: Vec::new(),
                    toucher: false,
                },
            ],
            sampling: None,
            resident_peak_bytes: None,
            resident_sampling: None,
            samples: vec![
                Sample {
                    stack: 0,
                    pid: 1,
                    command: "/a".into(),
                    benchmark: None,
                    values: values(10, 10),
                },
                Sample {
                    stack: 1,
                    pid: 2,
                    command: "/a".into(),
                    benchmark: None,
                    values: values(20, 25),
                },
                Sample {
                    stack: 2,
                    pid: 2,
                    command: "/a".into(),
                    benchmark: None,
                    values: values(0, 7),
                },
                Sample {
                    stack: 3,
                    pid: 2,
                    command: "/a".into(),
                    benchmark: None,
                    values: values(0, 1),
                },
            ],
        }
    }

    #[test]
    fn folded_lines_merge_equal_stacks_and_skip_zeros() {
        let p = profile();
        assert_eq!(
            folded(&p, View::Peak, Weight::Bytes, Naming::Function),
            vec![("main;malloc".to_string(), 30)]
        );
        assert_eq!(
            folded(&p, View::Allocated, Weight::Bytes, Naming::Function),
            vec![
                ("[no stack]".to_string(), 1),
                ("[truncated];libfoo.so+0x1234".to_string(), 7),
                ("main;malloc".to_string(), 35),
            ]
        );
        assert_eq!(p.total(View::Allocated, Weight::Count), 4);
    }

    #[test]
    fn stacks_start_at_the_allocators_caller() {
        let mut p = profile();
        p.start_at_callers();
        assert_eq!(
            folded(&p, View::Allocated, Weight::Bytes, Naming::Function),
            vec![
                ("[no stack]".to_string(), 1),
                ("[truncated]".to_string(), 7),
                ("main".to_string(), 35),
            ]
        );
        // The standard library's run keeps its outermost frame; an allocator frame alone
        // stays.
        let vector = "/usr/include/c++/12/bits/vector.tcc";
        let mut p = profile();
        p.frames = vec![
            frame("operator new(unsigned long)", "/lib/libstdc++.so.6", 1),
            SiteFrame {
                file: vector.into(),
                ..frame("std::vector<int>::_M_realloc_append(int&&)", "/a", 2)
            },
            SiteFrame {
                file: vector.into(),
                inlined: true,
                ..frame("std::vector<int>::push_back(int&&)", "/a", 3)
            },
            frame("fill", "/a", 3),
            frame("main", "/a", 4),
        ];
        p.stacks[0].frames = vec![0, 1, 2, 3, 4];
        p.stacks[1].frames = vec![0];
        p.stacks[2].frames = vec![0, 3, 4];
        p.start_at_callers();
        assert_eq!(p.stacks[0].frames, [2, 3, 4]);
        assert_eq!(p.stacks[1].frames, [0]);
        assert_eq!(p.stacks[2].frames, [3, 4]);
        assert_eq!(p.stacks[3].frames, [0u32; 0]);
        assert_eq!(
            folded(&p, View::Allocated, Weight::Bytes, Naming::Function),
            vec![
                ("[no stack]".to_string(), 1),
                ("main;fill".to_string(), 7),
                (
                    "main;fill;std::vector<int>::push_back(int&&)".to_string(),
                    10
                ),
                ("operator new(unsigned long)".to_string(), 25),
            ]
        );
    }

    #[test]
    fn names_with_modules_and_separators() {
        let f = frame("f<[u8; 8]>\n", "/lib/x.so", 9);
        assert_eq!(frame_name(&f, Naming::Function), "f<[u8: 8]> ");
        assert_eq!(
            frame_name(
                &frame("malloc", "/lib/libc.so.6", 1),
                Naming::FunctionAndModule
            ),
            "malloc [libc.so.6]"
        );
        assert_eq!(
            frame_name(&SiteFrame::mark("[unknown]", 2), Naming::FunctionAndModule),
            "[unknown]"
        );
    }

    #[test]
    fn labels_keep_the_function_name_without_its_parameters() {
        for (name, want) in [
            ("main", "main"),
            ("__GI___libc_malloc", "__GI___libc_malloc"),
            (
                "std::vector<int, std::allocator<int> >::push_back(int const&)",
                "std::vector<int, std::allocator<int> >::push_back",
            ),
            (
                "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> \
                 >::basic_string(std::__cxx11::basic_string<char, std::char_traits<char>, \
                 std::allocator<char> >&&)",
                "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> \
                 >::basic_string",
            ),
            (
                "Factory<Blob<(unsigned long)7781> >::make()",
                "Factory<Blob<(unsigned long)7781> >::make",
            ),
            (
                "Blob<(unsigned long)7781>* build<Blob<(unsigned long)7781> >()",
                "build",
            ),
            (
                "void std::vector<int>::_M_realloc_insert<int const&>(__gnu_cxx::\
                 __normal_iterator<int*, std::vector<int> >, int const&)",
                "std::vector<int>::_M_realloc_insert",
            ),
            ("Foo::bar(int) const &", "Foo::bar"),
            ("f(int) [clone .cold]", "f"),
            ("operator new(unsigned long)", "operator new"),
            (
                "operator new[](unsigned long, std::nothrow_t const&)",
                "operator new[]",
            ),
            ("Foo::operator bool() const", "Foo::operator bool"),
            ("Foo::operator()(int) const", "Foo::operator()"),
            ("Foo::operator()", "Foo::operator()"),
            ("Foo::operator<(Foo const&)", "Foo::operator<"),
            ("Foo::operator->() const", "Foo::operator->"),
            (
                "main::{lambda(int)#1}::operator()(int) const",
                "main::{lambda(int)#1}::operator()",
            ),
            (
                "(anonymous namespace)::pool::pool()",
                "(anonymous namespace)::pool::pool",
            ),
            ("unsigned long Foo::size<int>(int)", "Foo::size"),
            // Rust and marks have no parameter list; their brackets stay.
            (
                "core::ptr::drop_in_place<alloc::vec::Vec<u8>>",
                "core::ptr::drop_in_place<alloc::vec::Vec<u8>>",
            ),
            (
                "<alloc::vec::Vec<T> as core::clone::Clone>::clone",
                "<alloc::vec::Vec<T> as core::clone::Clone>::clone",
            ),
            ("[unknown]", "[unknown]"),
            ("libfoo.so+0x1234", "libfoo.so+0x1234"),
            ("(int)", "(int)"),
        ] {
            assert_eq!(label(name), want, "{name}");
        }
        let f = frame("Foo::bar(int) const", "/a", 1);
        assert_eq!(frame_name(&f, Naming::Label), "Foo::bar");
        assert_eq!(frame_name(&f, Naming::Function), "Foo::bar(int) const");
    }

    #[test]
    fn views_and_weights_parse_their_names() {
        for (m, v) in View::MEASURES {
            assert_eq!(m.word().parse(), Ok(v));
            assert_eq!(v.name(), m.word());
        }
        for (n, w) in Weight::ALL {
            assert_eq!(n.parse(), Ok(w));
            assert_eq!(w.name(), n);
        }
        assert!("live".parse::<View>().is_err());
    }
}
