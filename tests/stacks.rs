//! Call stacks (issue 15) against an oracle: gdb's `bt` at a breakpoint on the allocator's
//! first instruction, frame for frame, from the allocator to `_start` (or `clone3` in a
//! thread), on the fixtures of `testdata/stacks/`: a chain of five frames across an executable
//! and a shared library, C++ `new` inside a template, allocations glibc makes inside `strdup`,
//! `fopen` and `getline`, a Rust program, a library allocating right after dlopen, a forked
//! child and a thread, and recursion deeper than the walk's limit (truncated and marked).
//!
//! Each case runs twice: under gdb (`gdb_*` tests: they check the fixture and the oracle, and
//! run wherever gdb does), and under `memtrack record`, whose stacks are read back from
//! `memtrack dump` (JSON lines: the allocation's `stack_id` is its leaf `stack_node`; `parent`
//! leads to the root; `symbol` events name each node's (module, offset); `module` events name
//! the modules). The two stacks are printed side by side when they differ.

mod common;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use common::{build_fixture, cargo_fixture, require, run_build, scratch_dir, scratch_file};
use memtrack::format::{MARK_TRUNCATED, MARK_UNKNOWN, MARK_UNSUPPORTED, MODULE_MARK};

/// The deepest walk the recorder makes, in frames (the leaf included).
const MAX_DEPTH: usize = 127;

/// One frame of a call stack as a tool names it. Stacks are innermost first, inlined
/// functions before the function they were inlined into, as gdb prints them.
#[derive(Clone, Debug, Default, PartialEq)]
struct Frame {
    /// As the tool prints it (gdb: qualified, C++ without parameters when from DWARF); ""
    /// when unknown.
    function: String,
    /// The source file as the tool names it; "" when unknown.
    file: String,
    /// 0 when unknown.
    line: u32,
    /// The path of the executable file the frame's code is in; "" when unknown.
    module: String,
    /// For the innermost frame of a recorded node, whose line comes from the line table: the
    /// node's file offset in `module`.
    line_table_at: Option<u64>,
}

impl Frame {
    /// `function (file:line) [module]`, with file and module shortened to their last component.
    fn describe(&self) -> String {
        let mut text = if self.function.is_empty() {
            "??".to_string()
        } else {
            self.function.clone()
        };
        if !self.file.is_empty() {
            text += &format!(" ({}:{})", last_component(&self.file), self.line);
        }
        if !self.module.is_empty() {
            text += &format!(" [{}]", last_component(&self.module));
        }
        text
    }
}

/// The last component of a path: gdb prints source files as the compiler recorded them
/// (`./malloc/malloc.c`), a symbolizer may join them to the compile directory, and a module may
/// be reached through `/lib` or `/usr/lib`.
fn last_component(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

// ---------------------------------------------------------------------------------------------
// The oracle: gdb.

/// How gdb is to stop where the recorder takes a stack.
struct GdbPlan<'a> {
    /// Names the run's files in the scratch directory (two cases run one executable).
    name: &'a str,
    /// The command: an executable and its arguments.
    command: &'a [String],
    /// Functions to break on at their first instruction (`break *malloc`: a plain `break`
    /// would stop after the prologue, where the caller's frame is not where the recorder
    /// sees it).
    allocators: &'a [&'a str],
    /// gdb's condition for stopping (`$rdi == 7777`, the fingerprint size).
    condition: &'a str,
    /// Follow the child of a fork (the parent runs on, undebugged).
    follow_fork_child: bool,
    /// The function gdb runs to before it breaks on the allocators: `main`, or a library's
    /// constructor for an allocation made before main (once it runs, libc is loaded).
    start_at: &'a str,
}

/// Whether gdb is installed, or why the oracle cannot run.
fn gdb_available() -> Result<(), String> {
    match Command::new("gdb").arg("--version").output() {
        Ok(out) if out.status.success() => Ok(()),
        _ => Err("gdb is not installed (scripts/setup.sh installs it)".to_string()),
    }
}

/// The gdb script of `plan`: run to main or `start_at` (so the libraries are loaded and `malloc` means
/// libc's), then break on each allocator's first instruction when `condition` holds, and at
/// each stop print the backtrace, the frames of it that are tail calls and the loaded
/// libraries between markers, and go on.
fn gdb_script(plan: &GdbPlan) -> String {
    let mut script = String::from(TAIL_CALLS_COMMAND);
    script.push_str(
        "set pagination off\n\
         set width 0\n\
         set confirm off\n\
         set print frame-arguments none\n\
         set print frame-info location-and-address\n\
         set breakpoint pending on\n\
         set backtrace past-main on\n\
         set backtrace past-entry on\n\
         handle SIGUSR1 nostop noprint pass\n",
    );
    if plan.follow_fork_child {
        script += "set follow-fork-mode child\n";
    }
    let args: Vec<String> = plan.command[1..].iter().map(|a| shell_word(a)).collect();
    script += &format!("break {}\nrun {}\n", plan.start_at, args.join(" "));
    // A Rust program stops in a frame gdb reads as Rust, whose parser knows no `malloc`.
    script += "set language c\n";
    for alloc in plan.allocators {
        script += &format!("break *{alloc} if {}\n", plan.condition);
    }
    script += "set language auto\n";
    // Breakpoint 1 is where the run started.
    script += &format!(
        "commands 2-{}\nsilent\necho {STOP}\\n\nbt\nmemtrack-tail-calls\ninfo sharedlibrary\necho {END}\\n\n\
         continue\nend\ncontinue\n",
        plan.allocators.len() + 1
    );
    script
}

const STOP: &str = "==memtrack-stop==";
/// How gdb's `bt` shows the frame the kernel pushed for a signal, where its handler returns to
/// (glibc's `__restore_rt`, which the recorder names).
const SIGNAL_FRAME: &str = "<signal handler called>";
const END: &str = "==memtrack-end==";
const TAIL_CALL: &str = "==memtrack-tail-call== ";

/// A gdb command that prints `==memtrack-tail-call== N` for each frame N of the backtrace that
/// gdb made up from the debug info's call sites (DW_TAG_call_site with DW_AT_call_tail_call):
/// glibc's `fopen` is `mov $1, %edx; jmp __fopen_internal`, and gdb shows an `_IO_new_fopen`
/// frame that is not on the stack, so no unwinder, the recorder's included, can see it. `bt`
/// prints such frames like any other; only gdb's Python API tells them apart.
const TAIL_CALLS_COMMAND: &str = "\
python
class MemtrackTailCalls(gdb.Command):
    def __init__(self):
        super().__init__('memtrack-tail-calls', gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        frame = gdb.newest_frame()
        while frame is not None:
            if frame.type() == gdb.TAILCALL_FRAME:
                print('==memtrack-tail-call== %d' % frame.level())
            frame = frame.older()

MemtrackTailCalls()
end
";

/// `word` quoted for gdb's `run`, which passes its arguments through a shell.
fn shell_word(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The stacks gdb printed at each stop of `plan`'s run, innermost first.
fn gdb_stacks(plan: &GdbPlan) -> Result<Vec<Vec<Frame>>, String> {
    gdb_available()?;
    let _alone = one_at_a_time();
    common::wait_for_detaching_recorders()?;
    // One name per run: a gdb_* test and the recorder's test of a case may run at once.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("stacks_{}_{run}", plan.name);
    let script_path = scratch_file(format!("{name}.gdb"));
    std::fs::write(&script_path, gdb_script(plan)).unwrap();
    let out_path = scratch_file(format!("{name}.gdb.out"));
    let out = std::fs::File::create(&out_path).unwrap();
    let mut child = Command::new("gdb")
        .args(["-batch", "-nx", "-x"])
        .arg(&script_path)
        .arg(&plan.command[0])
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .map_err(|e| format!("cannot run gdb: {e}"))?;
    let status = common::wait_for(&mut child, Duration::from_secs(120));
    let output = std::fs::read_to_string(&out_path).unwrap_or_default();
    let describe = || {
        format!(
            "gdb -batch -nx -x {} {}\nscript:\n{}\noutput:\n{output}",
            script_path.display(),
            plan.command[0],
            gdb_script(plan)
        )
    };
    match status {
        Some(s) if s.success() => {}
        Some(s) => return Err(format!("gdb failed ({s})\n{}", describe())),
        None => return Err(format!("gdb still running after 120 s\n{}", describe())),
    }
    if !output.contains("exited normally") {
        return Err(format!(
            "the program did not exit normally under gdb\n{}",
            describe()
        ));
    }
    parse_gdb(&output, &plan.command[0]).map_err(|e| format!("{e}\n{}", describe()))
}

/// The stacks of gdb's `output` (the stops of [`gdb_script`]), without the frames gdb made up
/// for tail calls; frames of no library are `executable`'s.
fn parse_gdb(output: &str, executable: &str) -> Result<Vec<Vec<Frame>>, String> {
    let mut stacks = Vec::new();
    let mut lines = output.lines();
    while lines.by_ref().any(|l| l == STOP) {
        let block: Vec<&str> = lines.by_ref().take_while(|l| *l != END).collect();
        let libraries = parse_sharedlibrary(&block);
        let tail_calls: HashSet<&str> = block
            .iter()
            .filter_map(|l| l.strip_prefix(TAIL_CALL))
            .collect();
        let mut frames = Vec::new();
        for line in &block {
            if line.starts_with("Backtrace stopped") {
                return Err(format!("gdb could not unwind the whole stack: {line}"));
            }
            let Some(level) = line
                .strip_prefix('#')
                .and_then(|l| l.split_whitespace().next())
            else {
                continue;
            };
            if tail_calls.contains(level) {
                continue;
            }
            if line.ends_with(SIGNAL_FRAME) {
                frames.push(Frame {
                    function: SIGNAL_FRAME.to_string(),
                    ..Frame::default()
                });
                continue;
            }
            let (pc, mut frame) =
                parse_gdb_frame(line).ok_or_else(|| format!("unexpected bt line {line:?}"))?;
            if frame.module.is_empty() {
                frame.module = libraries
                    .iter()
                    .find(|(from, to, _)| (*from..*to).contains(&pc))
                    .map_or(executable, |(_, _, path)| path.as_str())
                    .to_string();
            }
            frames.push(frame);
        }
        stacks.push(frames);
    }
    Ok(stacks)
}

/// One line of gdb's `bt` with `print frame-info location-and-address` and `print
/// frame-arguments none`: `#N  0xPC in FUNCTION (...) [at FILE:LINE | from LIBRARY]`, as the
/// frame's pc and the frame (its module only when gdb names the library).
fn parse_gdb_frame(line: &str) -> Option<(u64, Frame)> {
    let rest = line.strip_prefix('#')?;
    let rest = rest
        .trim_start_matches(|c: char| c.is_ascii_digit())
        .trim_start();
    let (pc, rest) = rest.strip_prefix("0x")?.split_once(" in ")?;
    let pc = u64::from_str_radix(pc, 16).ok()?;
    // The argument list is "()", "(...)" or "(a=..., b=...)"; a function name may hold
    // parentheses too ("call_once<fn(), ()>"), so it is the last such list followed by nothing,
    // " at " or " from ".
    let (name_end, tail) = rest
        .match_indices(" (")
        .filter_map(|(i, _)| {
            let (args, tail) = rest[i + 2..].split_once(')')?;
            let hidden = |a: &str| {
                a == "..."
                    || a.strip_suffix("=...").is_some_and(|name| {
                        !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_')
                    })
            };
            let is_args = args.is_empty() || args.split(", ").all(hidden);
            let ends = tail.is_empty() || tail.starts_with(" at ") || tail.starts_with(" from ");
            (is_args && ends).then_some((i, tail))
        })
        .last()?;
    let mut frame = Frame {
        function: rest[..name_end].to_string(),
        ..Frame::default()
    };
    if let Some(at) = tail.strip_prefix(" at ") {
        let (file, line) = at.rsplit_once(':')?;
        frame.file = file.to_string();
        frame.line = line.parse().ok()?;
    } else if let Some(library) = tail.strip_prefix(" from ") {
        frame.module = library.to_string();
    }
    Some((pc, frame))
}

/// The `.text` ranges of the libraries in gdb's `info sharedlibrary` lines of `block`:
/// `0xFROM 0xTO Yes [(*)] PATH`.
fn parse_sharedlibrary(block: &[&str]) -> Vec<(u64, u64, String)> {
    block
        .iter()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let hex = |w: &str| u64::from_str_radix(w.strip_prefix("0x")?, 16).ok();
            (words.len() >= 4).then_some(())?;
            Some((hex(words[0])?, hex(words[1])?, words.last()?.to_string()))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The recorder: its stacks as `memtrack dump` prints them.

/// A recording's call stacks and allocations, from `memtrack dump`'s JSON lines.
#[derive(Debug, Default)]
struct DumpStacks {
    /// Module id to path.
    modules: HashMap<u32, String>,
    /// Node id to (parent, module, offset).
    nodes: HashMap<u32, (u32, u32, u64)>,
    /// (module, offset) to its frames, innermost first.
    symbols: HashMap<(u32, u64), Vec<Frame>>,
    /// The allocations (alloc and realloc events), in file order.
    allocs: Vec<DumpAlloc>,
}

/// One allocation event of a dump.
#[derive(Clone, Copy, Debug, PartialEq)]
struct DumpAlloc {
    pid: u32,
    tid: u32,
    size: u64,
    /// The leaf node of its stack; 0 without one.
    stack_id: u32,
}

/// A stack read from a recording: its nodes from the leaf up, each with its frames (inlined
/// first), and the mark that ends it when the walk stopped early.
#[derive(Debug, PartialEq)]
struct Walk {
    nodes: Vec<Vec<Frame>>,
    /// The mark's offset (1 truncated, 2 unknown, 3 unsupported).
    mark: Option<u64>,
}

impl Walk {
    /// Every frame, innermost first.
    fn frames(&self) -> Vec<Frame> {
        self.nodes.iter().flatten().cloned().collect()
    }
}

/// What a mark's offset means.
fn mark_name(offset: u64) -> String {
    match offset {
        MARK_TRUNCATED => "[truncated]".to_string(),
        MARK_UNKNOWN => "[unknown]".to_string(),
        MARK_UNSUPPORTED => "[unsupported]".to_string(),
        n => format!("[mark {n}]"),
    }
}

impl DumpStacks {
    /// The stacks and allocations of `dump`, `memtrack dump`'s output.
    fn parse(dump: &str) -> Result<DumpStacks, String> {
        let mut stacks = DumpStacks::default();
        for (n, line) in dump.lines().enumerate() {
            let value: serde_json::Value = serde_json::from_str(line)
                .map_err(|e| format!("dump line {}: not JSON ({e}): {line}", n + 1))?;
            let Some(kind) = value.get("kind") else {
                continue; // header, trailer
            };
            let bad = |what: &str| format!("dump line {}: {what}: {line}", n + 1);
            let uint = |key: &str| {
                kind.get(key)
                    .and_then(|v| v.as_u64())
                    .ok_or_else(|| bad(key))
            };
            let id = |key: &str| uint(key).and_then(|v| u32::try_from(v).map_err(|_| bad(key)));
            let text = |v: &serde_json::Value, key: &str| {
                v.get(key)
                    .and_then(|v| v.as_str())
                    .map(str::to_string)
                    .ok_or_else(|| bad(key))
            };
            match kind.get("type").and_then(|t| t.as_str()) {
                Some("module") => {
                    stacks.modules.insert(id("id")?, text(kind, "path")?);
                }
                Some("stack_node") => {
                    let node = (id("parent")?, id("module")?, uint("offset")?);
                    if stacks.nodes.insert(id("id")?, node).is_some() {
                        return Err(bad("a node id written twice"));
                    }
                }
                Some("symbol") => {
                    let frames = kind
                        .get("frames")
                        .and_then(|f| f.as_array())
                        .ok_or_else(|| bad("frames"))?
                        .iter()
                        .map(|f| {
                            Ok(Frame {
                                function: text(f, "function")?,
                                file: text(f, "file")?,
                                line: f
                                    .get("line")
                                    .and_then(|l| l.as_u64())
                                    .ok_or_else(|| bad("line"))?
                                    as u32,
                                module: String::new(),
                                line_table_at: None,
                            })
                        })
                        .collect::<Result<Vec<_>, String>>()?;
                    stacks
                        .symbols
                        .insert((id("module")?, uint("offset")?), frames);
                }
                Some("alloc") | Some("realloc") => {
                    let field = |key: &str| {
                        value
                            .get(key)
                            .and_then(|v| v.as_u64())
                            .ok_or_else(|| bad(key))
                    };
                    stacks.allocs.push(DumpAlloc {
                        pid: field("pid")? as u32,
                        tid: field("tid")? as u32,
                        size: uint("size")?,
                        stack_id: id("stack_id")?,
                    });
                }
                _ => {}
            }
        }
        Ok(stacks)
    }

    /// The stack whose leaf node is `leaf`, named by the symbols and modules of the dump.
    fn walk(&self, leaf: u32) -> Result<Walk, String> {
        if self.nodes.is_empty() {
            return Err("the recording has no call stacks (no stack_node events)".to_string());
        }
        if leaf == 0 {
            return Err("the allocation has no call stack (stack_id 0)".to_string());
        }
        let mut walk = Walk {
            nodes: Vec::new(),
            mark: None,
        };
        let mut id = leaf;
        while id != 0 {
            let &(parent, module, offset) = self
                .nodes
                .get(&id)
                .ok_or_else(|| format!("stack node {id} is not in the recording"))?;
            if walk.nodes.len() > self.nodes.len() {
                return Err(format!("the parents of stack node {leaf} form a cycle"));
            }
            if walk.mark.is_some() {
                return Err(format!(
                    "stack {leaf}: the mark is not the outermost node (node {id} is above it)"
                ));
            }
            if module == MODULE_MARK {
                walk.mark = Some(offset);
            } else {
                let path = self.modules.get(&module).ok_or_else(|| {
                    format!("stack node {id}: module {module} is not in the recording")
                })?;
                let frames = match self.symbols.get(&(module, offset)) {
                    Some(frames) if !frames.is_empty() => frames.clone(),
                    _ => vec![Frame::default()],
                };
                walk.nodes.push(
                    frames
                        .into_iter()
                        .enumerate()
                        .map(|(i, f)| Frame {
                            module: path.clone(),
                            line_table_at: (i == 0).then_some(offset),
                            ..f
                        })
                        .collect(),
                );
            }
            id = parent;
        }
        Ok(walk)
    }
}

/// Held while gdb or the recorder runs, so never both at once. The recorder's uprobe at the
/// loader's `_dl_debug_state` is in the file, so in every process that maps ld.so, and it is
/// where gdb puts its own breakpoint to learn of loaded libraries: the kernel takes the trap
/// for its uprobe and gdb never hears of libc (its `break *malloc` lands on the executable's
/// `malloc@plt`, its frames in libc are `??`). Other test binaries run after this one; a
/// recorder that has exited may still hold its uprobes ([`common::wait_for_detaching_recorders`]).
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static MACHINE: Mutex<()> = Mutex::new(());
    MACHINE.lock().unwrap_or_else(|e| e.into_inner())
}

/// `memtrack record --stacks -o <scratch>/NAME.mt -- COMMAND`, asserted to succeed: the file
/// and the run.
fn record_with_stacks(name: &str, command: &[String]) -> (PathBuf, common::Run) {
    record_with_stacks_env(name, command, &[])
}

/// [`record_with_stacks`] with `env` set for the recorder, and at `-v` if `env` is not empty.
fn record_with_stacks_env(
    name: &str,
    command: &[String],
    env: &[(&str, &str)],
) -> (PathBuf, common::Run) {
    let path = scratch_file(format!("{name}.mt"));
    let words: Vec<&str> = command.iter().map(String::as_str).collect();
    let run = {
        let _alone = one_at_a_time();
        let extra: &[&str] = if env.is_empty() {
            &["--stacks"]
        } else {
            &["--stacks", "-v"]
        };
        let mut record = common::record_command(&path, extra, &words);
        common::run_command(record.envs(env.iter().copied()))
    };
    (path, run.expect_code(0))
}

/// `memtrack record -o <scratch>/NAME.mt -- COMMAND`, asserted to succeed, and its stacks from
/// `memtrack dump`.
fn record_stacks(name: &str, command: &[String]) -> DumpStacks {
    let (path, run) = record_with_stacks(name, command);
    dump_stacks(&path, &run)
}

/// The stacks of the recording at `path`, from `memtrack dump`; `run` made it.
fn dump_stacks(path: &Path, run: &common::Run) -> DumpStacks {
    let dump = common::run(&[std::ffi::OsStr::new("dump"), path.as_os_str()]).expect_code(0);
    DumpStacks::parse(&dump.stdout).unwrap_or_else(|e| panic!("{e}\n{}", run.describe()))
}

// ---------------------------------------------------------------------------------------------
// Comparing the two.

/// What the tests look up in a module's files, once per module: which names are one function
/// (the names of one address in its symbol tables: glibc's `__GI___libc_malloc` is `malloc`)
/// and which source lines the line table gives one instruction. Read with nm and objdump from
/// the module and from its debug file under /usr/lib/debug/.build-id.
#[derive(Default)]
struct ModuleFacts {
    /// Module path to its symbol names' addresses.
    symbols: HashMap<String, HashMap<String, HashSet<u64>>>,
    /// Module path to its line table.
    lines: HashMap<String, LineTable>,
}

impl ModuleFacts {
    /// Whether `a` and `b` name one address in `module` (a symbol version such as
    /// `@@GLIBC_2.2.5`, which a symbolizer may print, is not part of the name).
    fn aliases(&mut self, module: &str, a: &str, b: &str) -> bool {
        let unversioned = |name: &str| name.split('@').next().unwrap_or(name).to_string();
        let (a, b) = (unversioned(a), unversioned(b));
        let symbols = self
            .symbols
            .entry(module.to_string())
            .or_insert_with(|| module_symbols(Path::new(module)));
        match (symbols.get(&a), symbols.get(&b)) {
            (Some(x), Some(y)) => !x.is_disjoint(y),
            _ => false,
        }
    }

    /// The (file name, line) of every row the line table of `module` has for the instruction
    /// at file offset `offset`.
    fn rows_at(&mut self, module: &str, offset: u64) -> Vec<(String, u32)> {
        self.lines
            .entry(module.to_string())
            .or_insert_with(|| LineTable::read(Path::new(module)))
            .rows_at(offset)
    }
}

/// A module's line table: rows of (address, file name, line) sorted by address, and its
/// loadable segments to turn file offsets into addresses.
#[derive(Default)]
struct LineTable {
    rows: Vec<(u64, String, u32)>,
    /// (file offset, size, address) of each PT_LOAD.
    segments: Vec<(u64, u64, u64)>,
}

impl LineTable {
    /// The table of `module` (its debug file's, when installed) as `objdump --dwarf=decodedline`
    /// prints it: `FILE LINE ADDRESS [VIEW] [x]`, a long file name alone on the line before,
    /// ending in `[++]`. Empty when there is none.
    fn read(module: &Path) -> LineTable {
        let dwarf = debug_file(module).unwrap_or_else(|| module.to_path_buf());
        let out = Command::new("objdump")
            .arg("--dwarf=decodedline")
            .arg(&dwarf)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let mut rows = Vec::new();
        let mut long_name: Option<String> = None;
        for line in out.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            if let [name, "[++]"] = words.as_slice() {
                long_name = Some(name.to_string());
                continue;
            }
            let (name, rest) = match (long_name.take(), words.as_slice()) {
                (Some(name), rest) if rest.first().is_some_and(|w| w.parse::<u32>().is_ok()) => {
                    (name, rest)
                }
                (_, [name, rest @ ..]) => (name.to_string(), rest),
                _ => continue,
            };
            let (Some(Ok(number)), Some(address)) = (
                rest.first().map(|w| w.parse::<u32>()),
                rest.get(1).and_then(|w| w.strip_prefix("0x")),
            ) else {
                continue;
            };
            if let Ok(address) = u64::from_str_radix(address, 16) {
                rows.push((address, last_component(&name).to_string(), number));
            }
        }
        rows.sort_by_key(|r| r.0);
        LineTable {
            rows,
            segments: load_segments(module),
        }
    }

    /// Every row at the greatest row address not above the address of file offset `offset`.
    fn rows_at(&self, offset: u64) -> Vec<(String, u32)> {
        let Some(address) = self
            .segments
            .iter()
            .find(|(off, size, _)| (*off..off + size).contains(&offset))
            .map(|(off, _, addr)| offset - off + addr)
        else {
            return Vec::new();
        };
        let end = self.rows.partition_point(|r| r.0 <= address);
        let Some(start_address) = end.checked_sub(1).map(|i| self.rows[i].0) else {
            return Vec::new();
        };
        let start = self.rows.partition_point(|r| r.0 < start_address);
        self.rows[start..end]
            .iter()
            .map(|(_, file, line)| (file.clone(), *line))
            .collect()
    }
}

/// (file offset, file size, address) of the PT_LOAD segments of `module`, from `readelf -lW`.
fn load_segments(module: &Path) -> Vec<(u64, u64, u64)> {
    let out = Command::new("readelf").arg("-lW").arg(module).output();
    let text = out
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let hex = |w: &str| u64::from_str_radix(w.strip_prefix("0x")?, 16).ok();
    text.lines()
        .filter_map(|line| {
            let w: Vec<&str> = line.split_whitespace().collect();
            (w.first() == Some(&"LOAD")).then_some(())?;
            Some((hex(w.get(1)?)?, hex(w.get(4)?)?, hex(w.get(2)?)?))
        })
        .collect()
}

/// The defined symbols of `module` and of its debug file, name to addresses (versions such as
/// `@@GLIBC_2.2.5` cut off).
fn module_symbols(module: &Path) -> HashMap<String, HashSet<u64>> {
    let mut files = vec![module.to_path_buf()];
    files.extend(debug_file(module));
    let mut symbols: HashMap<String, HashSet<u64>> = HashMap::new();
    for file in files {
        for dynamic in [false, true] {
            let mut nm = Command::new("nm");
            nm.arg("--defined-only");
            if dynamic {
                nm.arg("-D");
            }
            let Ok(out) = nm.arg(&file).output() else {
                continue;
            };
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                let mut words = line.split_whitespace();
                let (Some(addr), Some(_), Some(name)) = (words.next(), words.next(), words.next())
                else {
                    continue;
                };
                let Ok(addr) = u64::from_str_radix(addr, 16) else {
                    continue;
                };
                let name = name.split('@').next().unwrap_or(name);
                symbols.entry(name.to_string()).or_default().insert(addr);
            }
        }
    }
    symbols
}

/// The separate debug file of `module` found by its build id, if installed.
fn debug_file(module: &Path) -> Option<PathBuf> {
    let out = Command::new("readelf")
        .arg("-n")
        .arg(module)
        .output()
        .ok()?;
    let notes = String::from_utf8_lossy(&out.stdout);
    let id = notes
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))?;
    let path = Path::new("/usr/lib/debug/.build-id")
        .join(id.get(..2)?)
        .join(format!("{}.debug", id.get(2..)?));
    path.exists().then_some(path)
}

/// `name` without a trailing parameter list (`f(int) const` is `f`) and, for a function
/// template, without its return type (`Blob<7781ul>* build<Blob<7781ul> >()` is `build<Blob<
/// 7781ul> >`): gdb names a C++ function from DWARF without either, a demangler with both.
fn without_parameters(name: &str) -> &str {
    let name = name.strip_suffix(" const").unwrap_or(name);
    let name = without_parameter_list(name);
    if !name.ends_with('>') {
        return name;
    }
    // The return type ends at the last space outside template arguments.
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in name.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            ' ' if depth == 0 => start = i + 1,
            _ => {}
        }
    }
    &name[start..]
}

/// `name` with C++ integer template arguments written as literals: libiberty's demangler (gdb,
/// c++filt) prints `Blob<7781ul>`, cpp_demangle (blazesym) `Blob<(unsigned long)7781>`.
fn cxx_literals(name: &str) -> String {
    const SUFFIXES: [(&str, &str); 6] = [
        ("(unsigned long long)", "ull"),
        ("(long long)", "ll"),
        ("(unsigned long)", "ul"),
        ("(long)", "l"),
        ("(unsigned int)", "u"),
        ("(int)", ""),
    ];
    let mut out = String::new();
    let mut rest = name;
    'scan: while !rest.is_empty() {
        for (cast, suffix) in SUFFIXES {
            if let Some(after) = rest.strip_prefix(cast) {
                let digits = after
                    .find(|c: char| !c.is_ascii_digit() && c != '-')
                    .unwrap_or(after.len());
                if digits > 0 {
                    out.push_str(&after[..digits]);
                    out.push_str(suffix);
                    rest = &after[digits..];
                    continue 'scan;
                }
            }
        }
        let c = rest.chars().next().unwrap();
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

fn without_parameter_list(name: &str) -> &str {
    if !name.ends_with(')') || name.ends_with("operator()") {
        return name;
    }
    let mut depth = 0;
    for (i, c) in name.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth -= 1;
                if depth == 0 {
                    return &name[..i];
                }
            }
            _ => {}
        }
    }
    name
}

/// The own name of a Rust function: its last path segment without generic arguments, closures
/// as `{closure}`. gdb builds Rust names from DWARF's namespaces (`alloc::alloc::{impl#1}::
/// allocate`, `lang_start::{closure#0}<()>`), a demangler from the symbol
/// (`<alloc::alloc::Global as core::alloc::Allocator>::allocate`, `lang_start::{{closure}}`):
/// only the last segment is the same in both.
fn rust_own_name(name: &str) -> String {
    let mut plain = String::new();
    let mut depth = 0;
    for c in name.chars() {
        match c {
            '<' => depth += 1,
            '>' if depth > 0 => depth -= 1,
            _ if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    // A demangled symbol writes generic arguments as `::<...>`: cut, it leaves `::`. A legacy
    // symbol demangled without `{:#}` ends in its hash, `::h` and 16 hex digits.
    let plain = plain.trim_end_matches("::");
    let plain = match plain.rsplit_once("::h") {
        Some((name, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            name
        }
        _ => plain,
    };
    let last = plain.rsplit("::").next().unwrap_or(plain).to_string();
    if last.contains("closure") {
        "{closure}".to_string()
    } else {
        last
    }
}

/// The file name of the module at `path`, through symbolic links: gdb names a library by the
/// path the loader opened (`libstdc++.so.6`), the kernel's mapping by the file
/// (`libstdc++.so.6.0.30`).
fn module_file(path: &str) -> String {
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| PathBuf::from(path));
    real.file_name()
        .map_or_else(|| path.to_string(), |n| n.to_string_lossy().into_owned())
}

/// Whether gdb's frame and ours are the same: the same module, the same function (by name, or
/// as aliases of one address, or for Rust by its own name) and the same file and line where
/// gdb knows them. When several rows of the line table share the instruction (a function's
/// first instruction is its opening brace and its first statements; inlined code starts where
/// its caller's statement does), gdb takes the last that is a statement and a symbolizer may
/// take another: then both must be rows of that instruction.
fn same_frame(facts: &mut ModuleFacts, gdb: &Frame, ours: &Frame) -> bool {
    if gdb.function == SIGNAL_FRAME {
        return ours.function == "__restore_rt" && module_file(&ours.module) == "libc.so.6";
    }
    if module_file(&gdb.module) != module_file(&ours.module) {
        return false;
    }
    let (g, o) = (
        cxx_literals(without_parameters(&gdb.function)),
        cxx_literals(without_parameters(&ours.function)),
    );
    let rust = gdb.file.ends_with(".rs") || ours.file.ends_with(".rs");
    let same_name = g == o
        || (rust && rust_own_name(&g) == rust_own_name(&o))
        || facts.aliases(&gdb.module, &gdb.function, &ours.function);
    if !same_name {
        return false;
    }
    let place = |f: &Frame| (last_component(&f.file).to_string(), f.line);
    if gdb.file.is_empty() || place(gdb) == place(ours) {
        return true;
    }
    let Some(offset) = ours.line_table_at else {
        return false;
    };
    let rows = facts.rows_at(&ours.module, offset);
    rows.contains(&place(gdb)) && rows.contains(&place(ours))
}

/// Both stacks, side by side, with `!` on the rows that differ.
fn side_by_side(
    facts: &mut ModuleFacts,
    gdb: &[Frame],
    ours: &[Frame],
    mark: Option<u64>,
) -> String {
    let mut table = format!("{:<4} {:<70} memtrack\n", "#", "gdb bt");
    for i in 0..gdb.len().max(ours.len()) {
        let g = gdb.get(i).map_or(String::new(), Frame::describe);
        let o = ours.get(i).map_or(String::new(), Frame::describe);
        let same = match (gdb.get(i), ours.get(i)) {
            (Some(g), Some(o)) => same_frame(facts, g, o),
            _ => false,
        };
        table += &format!("{}{i:<3} {g:<70} {o}\n", if same { ' ' } else { '!' });
    }
    if let Some(mark) = mark {
        table += &format!("     {:<70} {}\n", "", mark_name(mark));
    }
    table
}

/// Asserts that `walk` is gdb's stack, frame for frame, and whole (no mark).
#[track_caller]
fn assert_same_stack(what: &str, gdb: &[Frame], walk: &Walk) {
    let mut facts = ModuleFacts::default();
    let ours = walk.frames();
    let same = gdb.len() == ours.len()
        && walk.mark.is_none()
        && gdb
            .iter()
            .zip(&ours)
            .all(|(g, o)| same_frame(&mut facts, g, o));
    assert!(
        same,
        "{what}: memtrack's stack is not gdb's\n{}",
        side_by_side(&mut facts, gdb, &ours, walk.mark)
    );
}

// ---------------------------------------------------------------------------------------------
// The fixtures and the cases.

/// Compile a fixture of `testdata/stacks` the way the issue asks for: -O2 -g
/// -fomit-frame-pointer (common::build_fixture adds -O2 -g).
fn stacks_fixture(src: &str, out: &str, extra: &[&str]) -> Result<PathBuf, String> {
    let mut flags = vec!["-fomit-frame-pointer"];
    flags.extend_from_slice(extra);
    build_fixture(&format!("stacks/{src}"), out, &flags)
}

/// The executable of `chain.c`, linked with `libstacks_chain.so` (both built here).
fn chain_fixture() -> Result<PathBuf, String> {
    linked_fixture(("chainlib.c", "stacks_chain"), ("chain.c", "stacks_chain"))
}

/// The executable of `ends.c`, linked with `libstacks_ends.so` (both built here).
fn ends_fixture() -> Result<PathBuf, String> {
    linked_fixture(("endslib.c", "stacks_ends"), ("ends.c", "stacks_ends"))
}

/// The executable `exe` (source, output) linked with the shared library `lib` (source, name
/// without `lib` and `.so`), found through its rpath.
fn linked_fixture(lib: (&str, &str), exe: (&str, &str)) -> Result<PathBuf, String> {
    let built = stacks_fixture(lib.0, &format!("lib{}.so", lib.1), &["-shared", "-fPIC"])?;
    let dir = built.parent().unwrap().to_str().unwrap().to_string();
    stacks_fixture(
        exe.0,
        exe.1,
        &[
            &format!("-L{dir}"),
            &format!("-l{}", lib.1),
            &format!("-Wl,-rpath,{dir}"),
        ],
    )
}

/// `rust_chain.rs` built by rustc (no crates needed) at opt-level 2 with debug info.
fn rust_fixture() -> Result<PathBuf, String> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    static LOCK: Mutex<()> = Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    BUILT
        .get_or_init(|| {
            let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/stacks/rust_chain.rs");
            let exe = scratch_dir().join("fixtures").join("stacks_rust_chain");
            std::fs::create_dir_all(exe.parent().unwrap()).unwrap();
            let mut build = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()));
            build
                .args(["--edition", "2021", "-C", "opt-level=2", "-g", "-o"])
                .arg(&exe)
                .arg(&src);
            run_build(build, &src.display().to_string())?;
            Ok(exe)
        })
        .clone()
}

/// Which allocations of a recording a case is about.
#[derive(Clone, Copy, Debug)]
enum Pick {
    /// Every allocation of this fingerprint size, in order (gdb stops at as many).
    Size(u64),
    /// Every allocation of the root process's thread between the allocations of these two
    /// sizes, in order.
    Between(u64, u64),
}

/// One fixture run: the command, where gdb stops, and which allocations are compared.
struct Case {
    name: &'static str,
    command: Vec<String>,
    allocators: &'static [&'static str],
    condition: String,
    follow_fork_child: bool,
    start_at: &'static str,
    pick: Pick,
}

impl Case {
    /// The case with the fixture `exe` run with `args`, stopping at malloc of `size` bytes.
    fn malloc_of(name: &'static str, exe: PathBuf, args: &[&str], size: u64) -> Case {
        let mut command = vec![exe.to_str().unwrap().to_string()];
        command.extend(args.iter().map(|a| a.to_string()));
        Case {
            name,
            command,
            allocators: &["malloc"],
            condition: format!("$rdi == {size}"),
            follow_fork_child: false,
            start_at: "main",
            pick: Pick::Size(size),
        }
    }

    fn gdb_plan(&self) -> GdbPlan<'_> {
        GdbPlan {
            name: self.name,
            command: &self.command,
            allocators: self.allocators,
            condition: &self.condition,
            follow_fork_child: self.follow_fork_child,
            start_at: self.start_at,
        }
    }

    /// gdb's stacks at the case's allocations, or why gdb cannot run here.
    fn gdb(&self) -> Result<Vec<Vec<Frame>>, String> {
        gdb_stacks(&self.gdb_plan())
    }

    /// The leaf node ids of the case's allocations in `stacks`.
    fn picked(&self, stacks: &DumpStacks) -> Result<Vec<u32>, String> {
        match self.pick {
            Pick::Size(size) => {
                let found: Vec<u32> = stacks
                    .allocs
                    .iter()
                    .filter(|a| a.size == size)
                    .map(|a| a.stack_id)
                    .collect();
                if found.is_empty() {
                    Err(format!("no allocation of {size} bytes"))
                } else {
                    Ok(found)
                }
            }
            Pick::Between(before, after) => {
                let start = stacks
                    .allocs
                    .iter()
                    .position(|a| a.size == before)
                    .ok_or_else(|| format!("no allocation of {before} bytes"))?;
                let marker = stacks.allocs[start];
                let mut window = Vec::new();
                for a in stacks.allocs[start + 1..]
                    .iter()
                    .filter(|a| a.tid == marker.tid)
                {
                    if a.size == after {
                        return Ok(window);
                    }
                    window.push(a.stack_id);
                }
                Err(format!(
                    "no allocation of {after} bytes after the one of {before}"
                ))
            }
        }
    }
}

fn chain_case() -> Result<Case, String> {
    Ok(Case::malloc_of("chain", chain_fixture()?, &[], 7777))
}

fn template_new_case() -> Result<Case, String> {
    let exe = stacks_fixture("template_new.cpp", "stacks_template_new", &[])?;
    Ok(Case {
        allocators: &["_Znwm"],
        ..Case::malloc_of("template_new", exe, &[], 7781)
    })
}

fn glibc_case() -> Result<Case, String> {
    let exe = stacks_fixture("glibc.c", "stacks_glibc", &[])?;
    Ok(Case {
        allocators: &["malloc", "calloc", "realloc"],
        condition: "armed".to_string(),
        pick: Pick::Between(7901, 7903),
        ..Case::malloc_of("glibc", exe, &[], 0)
    })
}

fn rust_case() -> Result<Case, String> {
    Ok(Case::malloc_of("rust", rust_fixture()?, &[], 7841))
}

/// The same chain in a program with its own allocator, as rustc has: jemalloc, unprefixed and
/// linked into the executable (testdata/rust-jemalloc, built by cargo with the crate from the
/// registry). gdb stops in the executable's malloc, and so does memtrack's walk.
fn rust_jemalloc_case() -> Result<Case, String> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let bins = BUILT.get_or_init(|| cargo_fixture("rust-jemalloc", true));
    let exe = bins.clone()?.join("rust-jemalloc");
    Ok(Case::malloc_of("rust_jemalloc", exe, &[], 7841))
}

/// A C++ program that allocates inside libLLVM (some 110 MB, a million unwind rows): issue 32's
/// "fixture linked against LLVM-style large libraries", as rustc and clang are.
fn llvm_case() -> Result<Case, String> {
    let lib = llvm_library()?;
    let exe = stacks_fixture(
        "llvm_module.cpp",
        "stacks_llvm_module",
        &[lib.to_str().unwrap()],
    )?;
    Ok(Case {
        allocators: &["_Znwm"],
        ..Case::malloc_of("llvm", exe, &[], 7002)
    })
}

/// The newest `libLLVM-N.so.1` in this machine's multiarch library directory (Debian's
/// libllvmN, which clang depends on).
fn llvm_library() -> Result<PathBuf, String> {
    let dir = Path::new("/usr/lib").join(format!("{}-linux-gnu", std::env::consts::ARCH));
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let newest = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let version = name.strip_prefix("libLLVM-")?.strip_suffix(".so.1")?;
            Some((version.parse::<u32>().ok()?, e.path()))
        })
        .max();
    newest.map(|(_, path)| path).ok_or_else(|| {
        format!(
            "no libLLVM-N.so.1 in {} (Debian's libllvmN, which clang brings: scripts/setup.sh)",
            dir.display()
        )
    })
}

fn dlopen_case() -> Result<Case, String> {
    let lib = stacks_fixture("dlopen_lib.c", "libstacks_dlopen.so", &["-shared", "-fPIC"])?;
    let exe = stacks_fixture("dlopen_main.c", "stacks_dlopen_main", &["-ldl"])?;
    Ok(Case::malloc_of(
        "dlopen",
        exe,
        &[lib.to_str().unwrap()],
        7807,
    ))
}

fn fork_case() -> Result<Case, String> {
    let exe = stacks_fixture("fork_thread.c", "stacks_fork_thread", &[])?;
    Ok(Case {
        follow_fork_child: true,
        ..Case::malloc_of("fork", exe, &["fork"], 7817)
    })
}

fn thread_case() -> Result<Case, String> {
    let exe = stacks_fixture("fork_thread.c", "stacks_fork_thread", &[])?;
    Ok(Case::malloc_of("thread", exe, &["thread"], 7823))
}

fn signal_case() -> Result<Case, String> {
    let exe = stacks_fixture("signal.c", "stacks_signal", &[])?;
    Ok(Case::malloc_of("signal", exe, &[], 7853))
}

fn recursion_case() -> Result<Case, String> {
    let exe = stacks_fixture("recursion.c", "stacks_recursion", &[])?;
    Ok(Case::malloc_of("recursion", exe, &[], 7829))
}

/// gdb's stacks of `case`; None after saying why when gdb is missing (see
/// [`common::require`]). A failing gdb run fails the test.
fn gdb_of(test: &str, case: &Case) -> Option<Vec<Vec<Frame>>> {
    require(test, gdb_available())?;
    Some(case.gdb().unwrap_or_else(|e| panic!("{test}: {e}")))
}

/// The function names of `frames`.
fn functions(frames: &[Frame]) -> Vec<&str> {
    frames.iter().map(|f| f.function.as_str()).collect()
}

/// What every stack of a program started by glibc ends with.
const LIBC_START: [&str; 3] = ["__libc_start_call_main", "__libc_start_main_impl", "_start"];

/// gdb's one stack of `case`, asserted to be there and to have the fixture's own frames
/// `expected` (innermost first, after the allocator's) in its modules; None when gdb is
/// missing.
fn gdb_stack(
    test: &str,
    case: &Case,
    allocator: &str,
    expected: &[(&str, &str)],
) -> Option<Vec<Frame>> {
    require(test, gdb_available())?;
    let stacks = case.gdb().unwrap_or_else(|e| panic!("{test}: {e}"));
    let [stack] = stacks.as_slice() else {
        panic!("{test}: one stop, got {}: {stacks:#?}", stacks.len());
    };
    let names = functions(stack);
    assert_eq!(
        names.first().copied(),
        Some(allocator),
        "{test}: {stack:#?}"
    );
    for (i, (function, module)) in expected.iter().enumerate() {
        let frame = stack
            .get(i + 1)
            .unwrap_or_else(|| panic!("{test}: too short: {stack:#?}"));
        assert_eq!(
            (frame.function.as_str(), last_component(&frame.module)),
            (*function, *module),
            "{test}: frame {}: {stack:#?}",
            i + 1
        );
        let source = [".c", ".cpp", ".rs"]
            .iter()
            .any(|x| frame.file.ends_with(x));
        assert!(
            frame.line > 0 && source,
            "{test}: frame {} has the fixture's file and line: {frame:?}",
            i + 1
        );
    }
    Some(stack.clone())
}

// ---------------------------------------------------------------------------------------------
// gdb on the fixtures: the oracle works and each fixture's frames are all there.

#[test]
fn gdb_sees_the_chain_across_the_library() {
    let test = "gdb_sees_the_chain_across_the_library";
    let Some(case) = require(test, chain_case()) else {
        return;
    };
    let Some(stack) = gdb_stack(
        test,
        &case,
        "__GI___libc_malloc",
        &[
            ("chain_e", "stacks_chain"),
            ("chain_d", "stacks_chain"),
            ("lib_c", "libstacks_chain.so"),
            ("lib_b", "libstacks_chain.so"),
            ("chain_a", "stacks_chain"),
            ("main", "stacks_chain"),
        ],
    ) else {
        return;
    };
    assert_eq!(functions(&stack)[7..], LIBC_START, "{stack:#?}");
}

#[test]
fn gdb_sees_new_inside_the_template() {
    let test = "gdb_sees_new_inside_the_template";
    let Some(case) = require(test, template_new_case()) else {
        return;
    };
    let Some(stack) = gdb_stack(
        test,
        &case,
        "operator new(unsigned long)",
        &[
            ("Factory<Blob<7781ul> >::make", "stacks_template_new"),
            ("build<Blob<7781ul> >", "stacks_template_new"),
            ("main", "stacks_template_new"),
        ],
    ) else {
        return;
    };
    assert_eq!(
        last_component(&stack[0].module),
        "libstdc++.so.6",
        "{stack:#?}"
    );
    assert_eq!(functions(&stack)[4..], LIBC_START, "{stack:#?}");
}

#[test]
fn gdb_sees_the_allocations_inside_glibc() {
    let test = "gdb_sees_the_allocations_inside_glibc";
    let Some(case) = require(test, glibc_case()) else {
        return;
    };
    let Some(stacks) = gdb_of(test, &case) else {
        return;
    };
    // Each stack from the allocator's caller down to the fixture's main, as gdb names them.
    let callers: Vec<Vec<&str>> = stacks
        .iter()
        .map(|s| {
            let names = functions(s);
            let main = names
                .iter()
                .position(|n| *n == "main")
                .unwrap_or(names.len());
            names[1..main].to_vec()
        })
        .collect();
    assert_eq!(
        callers,
        [
            vec!["__GI___strdup"],
            // fopen and getline are tail calls (to __fopen_internal, __getdelim): no frames of
            // their own on the stack.
            vec!["__fopen_internal"],
            vec!["__GI___getdelim"],
            vec![
                "__GI__IO_file_doallocate",
                "__GI__IO_doallocbuf",
                "__GI__IO_doallocbuf",
                "_IO_new_file_underflow",
                "__GI___getdelim"
            ],
        ],
        "strdup, fopen, getline's line and getline's stream buffer: {stacks:#?}"
    );
    for s in &stacks {
        assert_eq!(functions(s)[0], "__GI___libc_malloc", "{s:#?}");
        assert!(
            s[1..s.len() - 1].iter().all(|f| !f.file.is_empty()),
            "libc6-dbg gives glibc's lines (all but _start's, which has none): {s:#?}"
        );
        assert_eq!(functions(s)[s.len() - 3..], LIBC_START, "{s:#?}");
    }
}

#[test]
fn gdb_sees_the_rust_program() {
    let test = "gdb_sees_the_rust_program";
    let Some(case) = require(test, rust_case()) else {
        return;
    };
    let Some(stacks) = gdb_of(test, &case) else {
        return;
    };
    let [stack] = stacks.as_slice() else {
        panic!("one stop: {stacks:#?}")
    };
    let names = functions(stack);
    let at = |name: &str| names.iter().position(|n| *n == name);
    let (inner, outer, main) = (
        at("rust_chain::rust_inner"),
        at("rust_chain::rust_outer"),
        at("rust_chain::main"),
    );
    assert!(
        inner.is_some() && outer == inner.map(|i| i + 1) && main == outer.map(|i| i + 1),
        "rust_inner, rust_outer, main in a row: {stack:#?}"
    );
    // Vec::with_capacity and the allocator shims are inlined into rust_inner: frames of their
    // own in gdb's bt, at rust_inner's return address.
    assert!(
        inner.unwrap() > 1,
        "inlined frames between malloc and rust_inner: {stack:#?}"
    );
    assert_eq!(names[names.len() - 3..], LIBC_START, "{stack:#?}");
}

/// The reports for people (text and markdown) fold the run of Rust's standard library between
/// malloc and the program (`Vec::with_capacity` is some nine inlined frames of `alloc::`) into
/// one line before its outermost frame, so that the program's frames are among the lines
/// shown; the JSON keeps every frame, and says how many the line stands for.
#[test]
fn reports_for_people_fold_the_standard_library_of_a_rust_stack() {
    let test = "reports_for_people_fold_the_standard_library_of_a_rust_stack";
    skip_unless_recording!(test);
    let Some(case) = require(test, rust_case()) else {
        return;
    };
    let (path, _) = record_with_stacks("rust_folded", &case.command);
    let json = common::report_json(&path, &["--stacks"]);
    let site = &json["stacks"]["sites"][0];
    assert_eq!(
        site["allocated_bytes"], 7841,
        "the top site is the Vec's: {site:#}"
    );
    let frames: Vec<(String, String)> = site["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let text = |k: &str| f[k].as_str().unwrap().to_string();
            (text("function"), text("file"))
        })
        .collect();
    let inner = frames
        .iter()
        .position(|(function, _)| function == "rust_chain::rust_inner")
        .unwrap_or_else(|| panic!("rust_inner in {frames:#?}"));
    assert!(
        inner >= 4
            && frames[1..inner]
                .iter()
                .all(|(_, file)| file.starts_with("/rustc/")),
        "malloc, then at least three frames of the standard library, then rust_inner: {frames:#?}"
    );
    let folded = format!("… {} standard-library frames", inner - 2);

    let text = common::report_text(&path, &["--stacks"], Some("250"));
    let lines: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("   1  "))
        .skip(1)
        .take_while(|l| l.starts_with("       "))
        .map(str::trim)
        .collect();
    let want = [
        frames[0].0.as_str(),
        folded.as_str(),
        frames[inner - 1].0.as_str(),
        "rust_chain::rust_inner",
        "rust_chain::rust_outer",
        "rust_chain::main",
    ];
    assert!(
        lines.len() >= want.len() && lines.iter().zip(want).all(|(line, w)| line.starts_with(w)),
        "site 1's lines begin {want:#?}:\n{text}"
    );

    let markdown = common::report_text(&path, &["--stacks", "--format", "markdown"], None);
    let row = markdown
        .lines()
        .find(|l| l.starts_with("| 1 | "))
        .unwrap_or_else(|| panic!("site 1's row:\n{markdown}"));
    assert!(
        row.contains(&format!("← {folded} ← ")) && row.contains("rust\\_chain::rust\\_inner"),
        "the markdown row folds the run and keeps rust_inner in its five frames: {row}"
    );
}

/// A Rust program whose `#[global_allocator]` is jemalloc's crate reaches the executable's malloc
/// through that crate's `GlobalAlloc` and the compiler's `__rust_alloc` shim, neither in the
/// standard library's files: the stack formats still start at the program's call
/// (`Vec::with_capacity`, the outermost of the standard library's frames), as with the system
/// allocator, and `--allocator-frames` keeps the rest.
#[test]
fn stack_formats_start_at_the_caller_of_a_rust_global_allocator() {
    let test = "stack_formats_start_at_the_caller_of_a_rust_global_allocator";
    skip_unless_recording!(test);
    let Some(case) = require(test, rust_jemalloc_case()) else {
        return;
    };
    let (path, _) = record_with_stacks("rust_jemalloc_folded", &case.command);
    let folded_line = |args: &[&str]| {
        let out = common::report_text(&path, args, None);
        let line = out.lines().find(|l| l.ends_with(" 7841"));
        let line = line.unwrap_or_else(|| panic!("the line of the Vec's 7841 bytes:\n{out}"));
        line.trim_end_matches(" 7841")
            .split(';')
            .map(String::from)
            .collect::<Vec<_>>()
    };
    let frames = folded_line(&["--format", "folded"]);
    let chain = "rust_jemalloc::rust_chain::";
    assert!(
        frames.ends_with(&[
            format!("{chain}rust_inner"),
            "alloc::vec::Vec<T>::with_capacity".to_string(),
        ]),
        "the stack ends at the program's call: {frames:#?}"
    );
    let all = folded_line(&["--format", "folded", "--allocator-frames"]);
    let inner = all.iter().position(|f| *f == format!("{chain}rust_inner"));
    let kept = &all[inner.unwrap_or_else(|| panic!("rust_inner in {all:#?}")) + 1..];
    let global_alloc =
        (kept.iter()).position(|f| f.contains(" as core::alloc::global::GlobalAlloc>::alloc"));
    let malloc = kept.iter().position(|f| f == "malloc");
    assert!(
        global_alloc.is_some() && malloc > global_alloc,
        "--allocator-frames keeps the crate's GlobalAlloc, then jemalloc's malloc: {kept:#?}"
    );
}

#[test]
fn gdb_sees_the_library_right_after_dlopen() {
    let test = "gdb_sees_the_library_right_after_dlopen";
    let Some(case) = require(test, dlopen_case()) else {
        return;
    };
    let Some(stack) = gdb_stack(
        test,
        &case,
        "__GI___libc_malloc",
        &[
            ("dl_inner", "libstacks_dlopen.so"),
            ("dl_outer", "libstacks_dlopen.so"),
            ("main", "stacks_dlopen_main"),
        ],
    ) else {
        return;
    };
    assert_eq!(functions(&stack)[4..], LIBC_START, "{stack:#?}");
}

#[test]
fn gdb_sees_the_forked_child() {
    let test = "gdb_sees_the_forked_child";
    let Some(case) = require(test, fork_case()) else {
        return;
    };
    let Some(stack) = gdb_stack(
        test,
        &case,
        "__GI___libc_malloc",
        &[
            ("child_alloc", "stacks_fork_thread"),
            ("in_child", "stacks_fork_thread"),
            ("main", "stacks_fork_thread"),
        ],
    ) else {
        return;
    };
    assert_eq!(functions(&stack)[4..], LIBC_START, "{stack:#?}");
}

#[test]
fn gdb_sees_the_thread() {
    let test = "gdb_sees_the_thread";
    let Some(case) = require(test, thread_case()) else {
        return;
    };
    let Some(stack) = gdb_stack(
        test,
        &case,
        "__GI___libc_malloc",
        &[
            ("thread_alloc", "stacks_fork_thread"),
            ("thread_main", "stacks_fork_thread"),
        ],
    ) else {
        return;
    };
    // A thread's stack starts in clone3, whose CFI ends the walk (rip undefined).
    assert_eq!(
        functions(&stack)[3..],
        ["start_thread", "clone3"],
        "{stack:#?}"
    );
}

#[test]
fn gdb_sees_the_signal_frame() {
    let test = "gdb_sees_the_signal_frame";
    let Some(case) = require(test, signal_case()) else {
        return;
    };
    let Some(stack) = gdb_stack(
        test,
        &case,
        "__GI___libc_malloc",
        &[
            ("signal_alloc", "stacks_signal"),
            ("on_signal", "stacks_signal"),
        ],
    ) else {
        return;
    };
    // The handler's caller is the signal frame, and past it the code the signal interrupted:
    // inside raise, called from deliver.
    let names = functions(&stack);
    assert_eq!(names[3], SIGNAL_FRAME, "{stack:#?}");
    let raise = names.iter().position(|n| *n == "__GI_raise");
    assert!(
        raise.is_some_and(|r| r > 3 && names[r + 1..r + 3] == ["deliver", "main"]),
        "raise, deliver and main past the signal frame: {stack:#?}"
    );
    assert_eq!(names[names.len() - 3..], LIBC_START, "{stack:#?}");
}

#[test]
fn gdb_sees_the_whole_recursion() {
    let test = "gdb_sees_the_whole_recursion";
    let Some(case) = require(test, recursion_case()) else {
        return;
    };
    let recursion = vec![("recurse", "stacks_recursion"); 200];
    let Some(stack) = gdb_stack(test, &case, "__GI___libc_malloc", &recursion) else {
        return;
    };
    // malloc, 200 x recurse, main, and glibc's start: deeper than the walk goes.
    assert_eq!(
        functions(&stack)[201..],
        ["main", LIBC_START[0], LIBC_START[1], LIBC_START[2]]
    );
    assert!(stack.len() > MAX_DEPTH + 1);
}

// ---------------------------------------------------------------------------------------------
// The recorder against gdb. Without call stacks in the recording (a recorder without the BPF
// stack walk, or one that lost it) they fail with "the recording has no call stacks".

/// Records `case` and asserts each of its allocations has gdb's stack, frame for frame.
fn assert_stacks_are_gdbs(test: &str, case: Case) {
    assert_stacks_are_gdbs_with(test, case, &[], |_| {});
}

/// [`assert_stacks_are_gdbs`] with `env` set for the recorder, whose run `check` is given.
fn assert_stacks_are_gdbs_with(
    test: &str,
    case: Case,
    env: &[(&str, &str)],
    check: impl FnOnce(&common::Run),
) {
    let Some(gdb) = gdb_of(test, &case) else {
        return;
    };
    let (path, run) = record_with_stacks_env(case.name, &case.command, env);
    check(&run);
    let stacks = dump_stacks(&path, &run);
    let leaves = case
        .picked(&stacks)
        .unwrap_or_else(|e| panic!("{test}: {e}"));
    assert_eq!(
        leaves.len(),
        gdb.len(),
        "{test}: gdb stopped {} times, memtrack recorded {} allocations: {leaves:?}",
        gdb.len(),
        leaves.len()
    );
    for (i, (leaf, gdb)) in leaves.iter().zip(&gdb).enumerate() {
        let walk = stacks
            .walk(*leaf)
            .unwrap_or_else(|e| panic!("{test}: allocation {i}: {e}"));
        assert_same_stack(&format!("{test}: allocation {i}"), gdb, &walk);
    }
}

/// One test per case: record it, and hold every allocation's stack to what gdb's `bt` shows
/// at the same call.
macro_rules! stacks_are_gdbs {
    ($($test:ident: $case:expr;)*) => {$(
        #[test]
        fn $test() {
            let test = stringify!($test);
            skip_unless_recording!(test);
            let Some(case) = require(test, $case) else {
                return;
            };
            assert_stacks_are_gdbs(test, case);
        }
    )*};
}

stacks_are_gdbs! {
    stack_of_the_chain_across_the_library_is_gdbs: chain_case();
    stack_of_new_inside_a_template_is_gdbs: template_new_case();
    stacks_of_strdup_fopen_getline_inside_glibc_are_gdbs: glibc_case();
    stack_of_a_rust_program_is_gdbs: rust_case();
    stack_of_a_rust_program_with_its_own_jemalloc_is_gdbs: rust_jemalloc_case();
    stack_inside_libllvm_is_gdbs: llvm_case();
    stack_in_a_library_right_after_dlopen_is_gdbs: dlopen_case();
    stack_in_a_forked_child_is_gdbs: fork_case();
    stack_in_a_thread_is_gdbs: thread_case();
    stack_through_a_signal_frame_is_gdbs: signal_case();
}

/// The unwind tables' rows come in chunks made as they are needed (bpf/stack.bpf.h), and a
/// file's rows run on from one chunk into the next. With chunks of 2,048 rows instead of
/// 262,144, the C library's 28,000 run across 14 of them, the fixture's and its library's
/// across others, and every allocation still has gdb's stack.
#[test]
fn stacks_across_small_chunks_of_rows_are_gdbs() {
    let test = "stacks_across_small_chunks_of_rows_are_gdbs";
    skip_unless_recording!(test);
    let Some(case) = require(test, glibc_case()) else {
        return;
    };
    let case = Case {
        name: "glibc_small_chunks",
        ..case
    };
    let env = [("MEMTRACK_TEST_ROW_CHUNK_SHIFT", "10")];
    assert_stacks_are_gdbs_with(test, case, &env, |run| {
        // "unwind tables: 5 files, 40000 rows (468 KiB) in 20 chunks, 3 ms"
        let chunks = run
            .stderr
            .split_once(" KiB) in ")
            .and_then(|(_, rest)| rest.split_once(" chunk"))
            .and_then(|(n, _)| n.parse::<u32>().ok())
            .unwrap_or_else(|| panic!("{test}: no chunk count\n{}", run.describe()));
        assert!(chunks >= 14, "{test}: {chunks} chunks\n{}", run.describe());
    });
}

/// The walk's memo (bpf/stack.bpf.h) skips a walk from where the last one started when every
/// stack word that walk read is unchanged. `memo.c` enters malloc at one rsp through the same
/// two innermost frames from two callers, alternately: each allocation must still get its own
/// caller's stack, with and without frame pointers (rbp-based CFAs, whose saved rbp the memo
/// compares too).
#[test]
fn walks_from_one_place_tell_their_callers_apart() {
    let test = "walks_from_one_place_tell_their_callers_apart";
    skip_unless_recording!(test);
    const ROUNDS: usize = 1000;
    for (name, flags) in [
        ("stacks_memo", &[][..]),
        ("stacks_memo_fp", &["-fno-omit-frame-pointer"][..]),
    ] {
        let Some(exe) = require(test, stacks_fixture("memo.c", name, flags)) else {
            return;
        };
        let command = [exe.to_str().unwrap().to_string(), ROUNDS.to_string()];
        let stacks = record_stacks(name, &command);
        let paths: Vec<&str> = stacks
            .allocs
            .iter()
            .filter(|a| a.size == 7901)
            .map(|a| {
                let walk = stacks
                    .walk(a.stack_id)
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                let frames = walk.frames();
                let names = functions(&frames);
                assert_eq!(names[1..3], ["leaf", "middle"], "{name}: {frames:#?}");
                assert_eq!(names[4], "main", "{name}: {frames:#?}");
                match names[3] {
                    "path_a" => "a",
                    "path_b" => "b",
                    other => panic!("{name}: a path_a or path_b frame, not {other}: {frames:#?}"),
                }
            })
            .collect();
        let want: Vec<&str> = ["a", "b"].repeat(ROUNDS);
        assert!(
            paths == want,
            "{name}: {} allocations, alternately path_a's and path_b's; first wrong at {:?}",
            paths.len(),
            paths.iter().zip(&want).position(|(p, w)| p != w)
        );
    }
}

#[test]
fn recursion_deeper_than_the_limit_is_truncated_and_marked() {
    let test = "recursion_deeper_than_the_limit_is_truncated_and_marked";
    skip_unless_recording!(test);
    let Some(case) = require(test, recursion_case()) else {
        return;
    };
    let Some(gdb) = gdb_of(test, &case) else {
        return;
    };
    let stacks = record_stacks(case.name, &case.command);
    let leaves = case
        .picked(&stacks)
        .unwrap_or_else(|e| panic!("{test}: {e}"));
    let walk = stacks
        .walk(leaves[0])
        .unwrap_or_else(|e| panic!("{test}: {e}"));
    let mut facts = ModuleFacts::default();
    let ours = walk.frames();
    let table = side_by_side(&mut facts, &gdb[0], &ours, walk.mark);
    assert_eq!(
        (walk.nodes.len(), walk.mark),
        (MAX_DEPTH, Some(MARK_TRUNCATED)),
        "{test}: the innermost {MAX_DEPTH} frames and the [truncated] mark as the outermost node\n{table}"
    );
    assert!(
        gdb[0]
            .iter()
            .zip(&ours)
            .all(|(g, o)| same_frame(&mut facts, g, o))
            && ours.len() == MAX_DEPTH,
        "{test}: the {MAX_DEPTH} frames are gdb's innermost\n{table}"
    );
}

// ---------------------------------------------------------------------------------------------
// The parsers on samples, so a change in either tool's output is caught here first.

/// `memtrack dump` lines of a recording with two stacks sharing a prefix, one truncated, in
/// the shape of issue 15's format (format version 4).
const DUMP_SAMPLE: &str = r#"{"header":{"memtrack_version":"0.4.0","root_pid":100}}
{"ts_ns":1,"pid":100,"tid":0,"kind":{"type":"module","id":1,"path":"/usr/lib/x86_64-linux-gnu/libc.so.6","build_id":"93ac61ec","dev":65024,"ino":326279}}
{"ts_ns":1,"pid":100,"tid":0,"kind":{"type":"module","id":2,"path":"/tmp/fixtures/stacks_chain","build_id":"","dev":65024,"ino":42}}
{"ts_ns":2,"pid":0,"tid":0,"kind":{"type":"stack_node","id":1,"parent":0,"module":1,"offset":160511}}
{"ts_ns":2,"pid":0,"tid":0,"kind":{"type":"stack_node","id":2,"parent":1,"module":2,"offset":4368}}
{"ts_ns":2,"pid":0,"tid":0,"kind":{"type":"stack_node","id":3,"parent":2,"module":1,"offset":625968}}
{"ts_ns":3,"pid":100,"tid":100,"kind":{"type":"alloc","func":"Malloc","addr":4096,"size":7777,"stack_id":3}}
{"ts_ns":4,"pid":100,"tid":100,"kind":{"type":"free","func":"Free","addr":4096}}
{"ts_ns":5,"pid":0,"tid":0,"kind":{"type":"stack_node","id":4,"parent":0,"module":4294967295,"offset":1}}
{"ts_ns":5,"pid":0,"tid":0,"kind":{"type":"stack_node","id":5,"parent":4,"module":2,"offset":4400}}
{"ts_ns":5,"pid":0,"tid":0,"kind":{"type":"stack_node","id":6,"parent":5,"module":1,"offset":625968}}
{"ts_ns":6,"pid":100,"tid":101,"kind":{"type":"realloc","func":"Realloc","old_addr":4096,"addr":8192,"size":7829,"stack_id":6}}
{"ts_ns":7,"pid":100,"tid":100,"kind":{"type":"alloc","func":"Malloc","addr":4096,"size":9,"stack_id":0}}
{"ts_ns":8,"pid":0,"tid":0,"kind":{"type":"symbol","module":1,"offset":625968,"frames":[{"function":"malloc","file":"./malloc/malloc.c","line":3287}]}}
{"ts_ns":8,"pid":0,"tid":0,"kind":{"type":"symbol","module":2,"offset":4368,"frames":[{"function":"inlined_here","file":"/src/chain.c","line":5},{"function":"chain_e","file":"/src/chain.c","line":14}]}}
{"ts_ns":8,"pid":0,"tid":0,"kind":{"type":"symbol","module":1,"offset":160511,"frames":[]}}
{"ts_ns":9,"pid":0,"tid":0,"kind":{"type":"stack_stats","walks":2,"truncated":1,"unknown":0,"unsupported":0,"collisions":0,"uncached":0}}
{"trailer":{"events":12}}
"#;

fn frame(function: &str, file: &str, line: u32, module: &str) -> Frame {
    Frame {
        function: function.into(),
        file: file.into(),
        line,
        module: module.into(),
        line_table_at: None,
    }
}

/// `frame` as the innermost frame of a recorded node at `offset`.
fn at(offset: u64, frame: Frame) -> Frame {
    Frame {
        line_table_at: Some(offset),
        ..frame
    }
}

#[test]
fn dump_parsing_reads_allocations_with_their_leaf() {
    let stacks = DumpStacks::parse(DUMP_SAMPLE).unwrap();
    assert_eq!(
        stacks.allocs,
        [
            DumpAlloc {
                pid: 100,
                tid: 100,
                size: 7777,
                stack_id: 3
            },
            DumpAlloc {
                pid: 100,
                tid: 101,
                size: 7829,
                stack_id: 6
            },
            DumpAlloc {
                pid: 100,
                tid: 100,
                size: 9,
                stack_id: 0
            },
        ]
    );
}

#[test]
fn dump_parsing_follows_parents_from_the_leaf_expanding_inlined_frames() {
    let stacks = DumpStacks::parse(DUMP_SAMPLE).unwrap();
    let libc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
    let exe = "/tmp/fixtures/stacks_chain";
    assert_eq!(
        stacks.walk(3).unwrap(),
        Walk {
            nodes: vec![
                vec![at(625968, frame("malloc", "./malloc/malloc.c", 3287, libc))],
                vec![
                    at(4368, frame("inlined_here", "/src/chain.c", 5, exe)),
                    frame("chain_e", "/src/chain.c", 14, exe)
                ],
                // An empty symbol (nothing known) is one unknown frame in its module.
                vec![at(160511, frame("", "", 0, libc))],
            ],
            mark: None,
        }
    );
    assert_eq!(stacks.walk(3).unwrap().frames().len(), 4);
}

#[test]
fn dump_parsing_takes_the_mark_as_the_outermost_node() {
    let stacks = DumpStacks::parse(DUMP_SAMPLE).unwrap();
    let walk = stacks.walk(6).unwrap();
    assert_eq!(walk.mark, Some(MARK_TRUNCATED));
    // Node 5 has no symbol event: one unknown frame.
    assert_eq!(walk.nodes.len(), 2);
    assert_eq!(
        walk.nodes[1],
        [at(4400, frame("", "", 0, "/tmp/fixtures/stacks_chain"))]
    );
}

#[test]
fn dump_parsing_says_what_is_missing() {
    let none = DumpStacks::parse(r#"{"header":{}}"#).unwrap();
    assert!(none
        .walk(1)
        .unwrap_err()
        .contains("the recording has no call stacks"));
    let stacks = DumpStacks::parse(DUMP_SAMPLE).unwrap();
    assert!(stacks.walk(0).unwrap_err().contains("stack_id 0"));
    assert!(stacks
        .walk(99)
        .unwrap_err()
        .contains("node 99 is not in the recording"));
    let mark_inside = DUMP_SAMPLE.replace(
        r#""id":5,"parent":4,"module":2"#,
        r#""id":5,"parent":1,"module":4294967295"#,
    );
    let bad = DumpStacks::parse(&mark_inside).unwrap();
    assert!(bad
        .walk(6)
        .unwrap_err()
        .contains("the mark is not the outermost node"));
    let cycle = DUMP_SAMPLE.replace(r#""id":1,"parent":0"#, r#""id":1,"parent":3"#);
    let bad = DumpStacks::parse(&cycle).unwrap();
    assert!(bad.walk(3).unwrap_err().contains("cycle"));
    assert!(DumpStacks::parse("{not json")
        .unwrap_err()
        .contains("dump line 1"));
}

#[test]
fn picking_takes_one_fingerprint_or_the_window_between_markers() {
    let mut stacks = DumpStacks::parse(DUMP_SAMPLE).unwrap();
    let case = |pick| Case {
        name: "sample",
        command: vec!["x".into()],
        allocators: &["malloc"],
        condition: String::new(),
        follow_fork_child: false,
        start_at: "main",
        pick,
    };
    assert_eq!(case(Pick::Size(7777)).picked(&stacks), Ok(vec![3]));
    assert!(case(Pick::Size(5)).picked(&stacks).is_err());
    // The realloc of 7829 is on another thread: not in the window of thread 100.
    assert_eq!(case(Pick::Between(7777, 9)).picked(&stacks), Ok(vec![]));
    stacks.allocs.insert(
        1,
        DumpAlloc {
            pid: 100,
            tid: 100,
            size: 120,
            stack_id: 6,
        },
    );
    assert_eq!(case(Pick::Between(7777, 9)).picked(&stacks), Ok(vec![6]));
    assert!(case(Pick::Between(9, 7777)).picked(&stacks).is_err());
}

/// What gdb 13 printed at a stop of the chain fixture (shortened paths).
const GDB_SAMPLE: &str = "\
Breakpoint 1, 0x0000555555555090 in main () at /w/testdata/stacks/chain.c:40
Breakpoint 2 at 0x7ffff7e68930: file ./malloc/malloc.c, line 3288.
==memtrack-stop==
#0  0x00007ffff7e68930 in __GI___libc_malloc (bytes=...) at ./malloc/malloc.c:3288
#1  0x00005555555551e9 in chain_e (n=...) at /w/testdata/stacks/chain.c:14
#2  0x00007ffff7fbc11d in lib_c (back=..., n=...) at /w/testdata/stacks/chainlib.c:9
#3  0x00007ffff7ca9570 in operator new(unsigned long) () from /lib/x86_64-linux-gnu/libstdc++.so.6
#4  0x0000555555567e83 in core::ops::function::FnOnce::call_once<fn(), ()> () at /rustc/x/library/core/src/ops/function.rs:250
#5  0x00007ffff7df7305 in __libc_start_main_impl (main=..., argc=..., argv=..., init=..., fini=..., rtld_fini=..., stack_end=...) at ../csu/libc-start.c:360
#6  0x0000555555555111 in _start ()
From                To                  Syms Read   Shared Object Library
0x00007ffff7fcb060  0x00007ffff7ff0111  Yes         /lib64/ld-linux-x86-64.so.2
0x00007ffff7fbc050  0x00007ffff7fbc161  Yes         /tmp/fixtures/libstacks_chain.so
0x00007ffff7df6380  0x00007ffff7f4a22d  Yes         /lib/x86_64-linux-gnu/libc.so.6
0x00007ffff7c9e000  0x00007ffff7d9e000  Yes (*)     /lib/x86_64-linux-gnu/libstdc++.so.6
(*): Shared library is missing debugging information.
==memtrack-end==
[Inferior 1 (process 13022) exited normally]
";

#[test]
fn gdb_parsing_reads_function_file_line_and_module() {
    let stacks = parse_gdb(GDB_SAMPLE, "/tmp/fixtures/stacks_chain").unwrap();
    let libc = "/lib/x86_64-linux-gnu/libc.so.6";
    let exe = "/tmp/fixtures/stacks_chain";
    assert_eq!(
        stacks,
        [vec![
            frame("__GI___libc_malloc", "./malloc/malloc.c", 3288, libc),
            frame("chain_e", "/w/testdata/stacks/chain.c", 14, exe),
            frame(
                "lib_c",
                "/w/testdata/stacks/chainlib.c",
                9,
                "/tmp/fixtures/libstacks_chain.so"
            ),
            frame(
                "operator new(unsigned long)",
                "",
                0,
                "/lib/x86_64-linux-gnu/libstdc++.so.6"
            ),
            frame(
                "core::ops::function::FnOnce::call_once<fn(), ()>",
                "/rustc/x/library/core/src/ops/function.rs",
                250,
                exe
            ),
            frame("__libc_start_main_impl", "../csu/libc-start.c", 360, libc),
            frame("_start", "", 0, exe),
        ]]
    );
}

#[test]
fn gdb_parsing_leaves_out_the_frames_gdb_made_up_for_tail_calls() {
    let with_tail_call = GDB_SAMPLE.replace(
        "From                To",
        "==memtrack-tail-call== 4\nFrom                To",
    );
    let stacks = parse_gdb(&with_tail_call, "/tmp/fixtures/stacks_chain").unwrap();
    let all = parse_gdb(GDB_SAMPLE, "/tmp/fixtures/stacks_chain").unwrap();
    let mut expected = all[0].clone();
    assert!(expected
        .remove(4)
        .function
        .starts_with("core::ops::function::FnOnce"));
    assert_eq!(stacks, [expected]);
}

#[test]
fn gdb_parsing_refuses_a_stack_gdb_could_not_finish() {
    let cut = GDB_SAMPLE.replace(
        "#6  0x0000555555555111 in _start ()",
        "Backtrace stopped: previous frame inner to this frame (corrupt stack?)",
    );
    assert!(parse_gdb(&cut, "x")
        .unwrap_err()
        .contains("could not unwind"));
    let odd = GDB_SAMPLE.replace("#6  0x0000555555555111 in _start ()", "#6  _start");
    assert!(parse_gdb(&odd, "x")
        .unwrap_err()
        .contains("unexpected bt line"));
}

#[test]
fn gdb_script_breaks_at_the_first_instruction_on_the_condition() {
    let command = ["/f/x".to_string(), "it's".to_string()];
    let script = gdb_script(&GdbPlan {
        name: "sample",
        command: &command,
        allocators: &["malloc", "calloc"],
        condition: "$rdi == 7777",
        follow_fork_child: true,
        start_at: "main",
    });
    for want in [
        "run 'it'\\''s'\n",
        "break *malloc if $rdi == 7777\n",
        "break *calloc if $rdi == 7777\n",
        "commands 2-3\n",
        "set follow-fork-mode child\n",
        "set backtrace past-main on\n",
        "bt\nmemtrack-tail-calls\n",
        "if frame.type() == gdb.TAILCALL_FRAME:",
    ] {
        assert!(script.contains(want), "{want:?} in\n{script}");
    }
}

#[test]
fn names_compare_as_the_same_function() {
    assert_eq!(
        without_parameters("Factory<Blob<7781ul> >::make()"),
        "Factory<Blob<7781ul> >::make"
    );
    assert_eq!(
        without_parameters("operator new(unsigned long)"),
        "operator new"
    );
    assert_eq!(without_parameters("S::f(int) const"), "S::f");
    assert_eq!(without_parameters("S::operator()"), "S::operator()");
    assert_eq!(without_parameters("chain_e"), "chain_e");
    assert_eq!(
        cxx_literals(without_parameters(
            "Blob<(unsigned long)7781>* build<Blob<(unsigned long)7781> >()"
        )),
        "build<Blob<7781ul> >"
    );
    assert_eq!(cxx_literals("f<(int)-3, (long)2>"), "f<-3, 2l>");
    assert_eq!(cxx_literals("operator()(int)"), "operator()(int)");
    assert_eq!(
        without_parameters("Blob<7781ul>* build<Blob<7781ul> >()"),
        "build<Blob<7781ul> >"
    );
    assert_eq!(
        without_parameters("build<Blob<7781ul> >"),
        "build<Blob<7781ul> >"
    );
    assert_eq!(
        rust_own_name("std::panicking::catch_unwind::do_call::<&dyn Fn<(), Output = i32>, i32>"),
        "do_call"
    );
    assert_eq!(
        rust_own_name("alloc::alloc::{impl#1}::allocate"),
        "allocate"
    );
    assert_eq!(
        rust_own_name("<alloc::alloc::Global as core::alloc::Allocator>::allocate"),
        "allocate"
    );
    assert_eq!(
        rust_own_name("alloc::raw_vec::RawVecInner<alloc::alloc::Global>::try_allocate_in<alloc::alloc::Global>"),
        "try_allocate_in"
    );
    assert_eq!(
        rust_own_name("std::rt::lang_start::{closure#0}<()>"),
        "{closure}"
    );
    assert_eq!(
        rust_own_name("std::rt::lang_start::{{closure}}"),
        "{closure}"
    );
    assert_ne!(
        rust_own_name("rust_chain::rust_inner"),
        rust_own_name("rust_chain::rust_outer")
    );
}

#[test]
fn frames_differ_by_module_function_or_line() {
    let mut facts = ModuleFacts::default();
    let g = frame("chain_e", "/w/chain.c", 14, "/a/stacks_chain");
    let same = |facts: &mut ModuleFacts, f: Frame| same_frame(facts, &g, &f);
    assert!(same(
        &mut facts,
        frame("chain_e", "/other/chain.c", 14, "/b/stacks_chain")
    ));
    assert!(!same(
        &mut facts,
        frame("chain_e", "/w/chain.c", 15, "/a/stacks_chain")
    ));
    assert!(!same(
        &mut facts,
        frame("chain_d", "/w/chain.c", 14, "/a/stacks_chain")
    ));
    assert!(!same(
        &mut facts,
        frame("chain_e", "/w/chain.c", 14, "/a/libc.so.6")
    ));
    // A module without a line table gives no rows: a different line stays different.
    let mut inside = frame("chain_e", "/w/chain.c", 15, "/a/stacks_chain");
    inside.line_table_at = Some(0x1000);
    assert!(!same(&mut facts, inside));
    // gdb knows no line: only the function is compared.
    let bare = frame("_start", "", 0, "/a/x");
    assert!(same_frame(
        &mut facts,
        &bare,
        &frame("_start", "start.S", 115, "/a/x")
    ));
    let text = side_by_side(
        &mut facts,
        &[g.clone(), bare],
        std::slice::from_ref(&g),
        Some(MARK_TRUNCATED),
    );
    assert!(
        text.contains("[truncated]") && text.contains("!1"),
        "{text}"
    );
}

/// The file offset of the symbol `name` of `module` (`nm`, `nm -D`), through its segments.
fn symbol_offset(module: &Path, name: &str) -> Option<u64> {
    let address = *module_symbols(module).get(name)?.iter().next()?;
    load_segments(module)
        .iter()
        .find(|(_, size, addr)| (*addr..addr + size).contains(&address))
        .map(|(off, _, addr)| address - addr + off)
}

#[test]
fn line_table_rows_of_one_instruction_are_each_its_line() {
    let test = "line_table_rows_of_one_instruction_are_each_its_line";
    let Some(exe) = require(test, chain_fixture()) else {
        return;
    };
    let src = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/stacks/chain.c"),
    )
    .unwrap();
    // chain_e's first instruction is its opening brace's line (the line after its name).
    let brace = src
        .lines()
        .position(|l| l.contains("void *chain_e(size_t n)"))
        .unwrap() as u32
        + 2;
    let exe_path = exe.to_str().unwrap();
    let entry = symbol_offset(&exe, "chain_e").expect("chain_e in the symbol table");
    let mut facts = ModuleFacts::default();
    let rows = facts.rows_at(exe_path, entry);
    assert!(
        rows.contains(&("chain.c".to_string(), brace)),
        "line {brace} in {rows:?}"
    );
    // The same for a frame: another row of the instruction is the same line, a line the
    // instruction has no row for is not.
    let gdb = frame("chain_e", "chain.c", brace, exe_path);
    for (file, line) in &rows {
        let mut ours = frame("chain_e", file, *line, exe_path);
        ours.line_table_at = Some(entry);
        assert!(same_frame(&mut facts, &gdb, &ours), "{ours:?}");
    }
    let mut ours = frame("chain_e", "chain.c", brace + 40, exe_path);
    ours.line_table_at = Some(entry);
    assert!(!same_frame(&mut facts, &gdb, &ours));

    // glibc's malloc starts with several rows (gdb says 3288, addr2line 3281 here).
    let libc = common::system_library("libc.so.6").unwrap();
    let Some(malloc) = symbol_offset(&libc, "malloc") else {
        return common::skip(test, "no symbol table for libc.so.6 (binutils)");
    };
    let rows = facts.rows_at(libc.to_str().unwrap(), malloc);
    if rows.is_empty() {
        return common::skip(test, "no line table for libc.so.6 (libc6-dbg)");
    }
    assert!(
        rows.len() > 1 && rows.iter().all(|(f, _)| f == "malloc.c"),
        "{rows:?}"
    );
}

#[test]
fn glibc_aliases_are_the_same_function() {
    let test = "glibc_aliases_are_the_same_function";
    let Some(libc) = require(test, common::system_library("libc.so.6")) else {
        return;
    };
    let libc = libc.to_str().unwrap();
    let mut facts = ModuleFacts::default();
    if !facts.aliases(libc, "malloc", "__libc_malloc") {
        common::skip(test, "no symbol table for libc.so.6 (nm, libc6-dbg)");
        return;
    }
    assert!(facts.aliases(libc, "__libc_start_main_impl", "__libc_start_main"));
    assert!(facts.aliases(libc, "_IO_new_fopen", "_IO_fopen@@GLIBC_2.2.5"));
    assert!(!facts.aliases(libc, "malloc", "free"));
    assert!(!facts.aliases(libc, "malloc", "no_such_function"));
}

#[test]
fn dump_parsing_reads_the_events_as_the_library_serializes_them() {
    use memtrack::format::{AllocFunc, Event, EventKind, Module, Symbol, SymbolFrame};
    let event = |pid, kind| Event {
        ts_ns: 1,
        pid,
        tid: pid,
        kind,
    };
    let events = [
        event(
            7,
            EventKind::Module(Module {
                id: 1,
                path: "/lib/libc.so.6".into(),
                build_id: vec![0x93, 0xac],
                dev: 1,
                ino: 2,
            }),
        ),
        event(
            0,
            EventKind::StackNode {
                id: 1,
                parent: 0,
                module: MODULE_MARK,
                offset: MARK_TRUNCATED,
            },
        ),
        event(
            0,
            EventKind::StackNode {
                id: 2,
                parent: 1,
                module: 1,
                offset: 0x98930,
            },
        ),
        event(
            7,
            EventKind::Alloc {
                func: AllocFunc::Malloc,
                addr: 4096,
                size: 7777,
                stack_id: 2,
            },
        ),
        event(
            0,
            EventKind::Symbol(Symbol {
                module: 1,
                offset: 0x98930,
                frames: vec![SymbolFrame {
                    function: "malloc".into(),
                    file: "malloc.c".into(),
                    line: 3287,
                }],
            }),
        ),
    ];
    let dump: Vec<String> = events
        .iter()
        .map(|e| serde_json::to_string(e).unwrap())
        .collect();
    let stacks = DumpStacks::parse(&dump.join("\n")).unwrap();
    assert_eq!(
        stacks.allocs,
        [DumpAlloc {
            pid: 7,
            tid: 7,
            size: 7777,
            stack_id: 2
        }]
    );
    assert_eq!(
        stacks.walk(2).unwrap(),
        Walk {
            nodes: vec![vec![at(
                0x98930,
                frame("malloc", "malloc.c", 3287, "/lib/libc.so.6")
            )]],
            mark: Some(MARK_TRUNCATED),
        }
    );
}

// ---------------------------------------------------------------------------------------------
// A cut-short recording (issue 32): the recorder was killed before it wrote the symbols, so
// `report` names the frames from this machine's files, checked by build id.

/// The frames of the site that allocated `bytes` in a JSON report's stacks: (function, the
/// module's file name, inlined).
fn site_functions(json: &serde_json::Value, bytes: u64) -> Vec<(String, String, bool)> {
    let sites = json["stacks"]["sites"]
        .as_array()
        .expect("a stacks section");
    let site = sites
        .iter()
        .find(|s| s["allocated_bytes"] == bytes)
        .unwrap_or_else(|| panic!("no site of {bytes} bytes: {json:#}"));
    site["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let module = f["module"].as_str().unwrap();
            let file = module.rsplit('/').next().unwrap().to_string();
            let inlined = f["inlined"].as_bool().unwrap();
            (f["function"].as_str().unwrap().to_string(), file, inlined)
        })
        .collect()
}

/// `memtrack report PATH --stacks --stacks-top 0 --format json`, asserted to succeed: the
/// report and the run (its stderr has the notes).
fn every_site_json(path: &Path) -> (serde_json::Value, common::Run) {
    let mut report = Command::new(common::memtrack());
    report
        .arg("report")
        .arg(path)
        .args(["--stacks", "--stacks-top", "0", "--format", "json"]);
    let run = common::run_command(&mut report).expect_code(0);
    let json = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e})\n{}", run.describe()));
    (json, run)
}

/// `memtrack record --stacks` of `exe` killed with SIGKILL once the file holds the allocation
/// of `bytes` (the command, `exe` then a `read` of the test's pipe, has reached it and waits):
/// the file, with stack nodes and modules but no symbols.
fn record_cut_short(name: &str, exe: &Path, bytes: u64) -> PathBuf {
    use memtrack::format::EventKind;
    let path = scratch_file(format!("{name}.mt"));
    let script = format!("'{}' && echo reached && read line", exe.display());
    let _alone = one_at_a_time();
    let mut child = common::record_command(&path, &["--stacks", "-q"], &["sh", "-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run memtrack");
    let line = common::first_line(&mut child);
    assert_eq!(line, "reached\n", "the command ran {}", exe.display());
    common::wait_for_event(
        &path,
        &format!("the allocation of {bytes} bytes"),
        |kind| matches!(kind, EventKind::Alloc { size, stack_id, .. } if *size == bytes && *stack_id != 0),
    );
    child.kill().expect("SIGKILL memtrack");
    child.wait().unwrap();
    // The command reads its pipe: closing it ends the command the recorder left running.
    drop(child.stdin.take());
    path
}

#[test]
fn issue32_a_cut_short_recording_is_named_from_this_machines_files() {
    let test = "issue32_a_cut_short_recording_is_named_from_this_machines_files";
    skip_unless_recording!(test);
    let Some(built) = require(test, chain_fixture()) else {
        return;
    };
    // A copy the test may change (its library is found by the fixture's rpath).
    let dir = scratch_dir().join(test);
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("stacks_chain");
    std::fs::copy(&built, &exe).unwrap();

    let (full, _) = record_with_stacks("issue32_full", &[exe.to_str().unwrap().to_string()]);
    let (complete, run) = every_site_json(&full);
    assert!(
        !run.stderr.contains("named from this machine"),
        "{}",
        run.describe()
    );
    assert!(
        complete["stacks"].get("local_symbols").is_none(),
        "{complete:#}"
    );
    let want = site_functions(&complete, 7777);
    let exe_name = "stacks_chain".to_string();
    for f in ["chain_e", "chain_d", "lib_c", "lib_b", "chain_a", "main"] {
        assert!(want.iter().any(|(g, _, _)| g == f), "{f} in {want:?}");
    }

    let cut = record_cut_short("issue32_cut", &exe, 7777);
    let (_, events, _) = common::read_recording(&cut);
    let symbols = events
        .iter()
        .filter(|e| matches!(e.kind, memtrack::format::EventKind::Symbol(_)))
        .count();
    assert_eq!(symbols, 0, "the recorder was killed before its symbols");
    let (json, run) = every_site_json(&cut);
    assert_eq!(site_functions(&json, 7777), want, "{}", run.describe());
    assert!(
        run.stderr.contains(
            "the recording has no symbols (its recorder was cut short, or ran with --no-symbols), \
             so the frames of"
        ) && run
            .stderr
            .contains("were named from this machine's files, checked by build id"),
        "{}",
        run.describe()
    );
    let named = &json["stacks"]["local_symbols"]["named"];
    assert!(
        named.as_array().unwrap().contains(&exe.to_str().into()),
        "{named:#}"
    );
    assert_eq!(
        json["stacks"]["local_symbols"]["unnamed"],
        serde_json::json!([])
    );
    let text = common::report_text(&cut, &["--stacks"], Some("250"));
    assert!(
        text.contains("  symbols: none in the file; ")
            && text.contains(" modules named from this machine's files (same build id)\n"),
        "{text}"
    );

    // Another build of the executable at its path (one byte of its build id changed): its
    // frames keep module+offset names, the library's and libc's are named, one warning.
    let module = events
        .iter()
        .find_map(|e| match &e.kind {
            memtrack::format::EventKind::Module(m) if Path::new(&m.path) == exe => Some(m),
            _ => None,
        })
        .expect("the executable's module");
    let mut bytes = std::fs::read(&exe).unwrap();
    let at = bytes
        .windows(module.build_id.len())
        .position(|w| w == module.build_id)
        .expect("the build id note");
    bytes[at] ^= 0xff;
    std::fs::write(&exe, &bytes).unwrap();
    let (json, run) = every_site_json(&cut);
    let got = site_functions(&json, 7777);
    // An unnamed frame is one per (module, offset): no inline chain.
    let expected: Vec<(String, String, bool)> = want
        .iter()
        .filter(|(_, m, inlined)| !(*m == exe_name && *inlined))
        .map(|(f, m, inlined)| {
            let f = if *m == exe_name { "" } else { f };
            (f.to_string(), m.clone(), *inlined)
        })
        .collect();
    assert_eq!(got, expected, "{}", run.describe());
    let warnings: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("module+offset names"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", run.describe());
    assert!(
        warnings[0].contains(&format!(
            "{}: its frames keep module+offset names, as the recording has no symbols and this \
             machine's file is another build",
            exe.display()
        )) && warnings[0].ends_with(
            "run report on the machine that recorded, or install the same version of \
             stacks_chain"
        ),
        "{}",
        run.describe()
    );
    let unnamed = &json["stacks"]["local_symbols"]["unnamed"][0];
    assert_eq!(unnamed["path"], exe.to_str().unwrap(), "{json:#}");
}

/// The kernel's walk counters in a JSON report: walks, truncated, unknown, unsupported.
fn walk_counters(json: &serde_json::Value) -> [u64; 4] {
    ["walks", "truncated", "unknown", "unsupported"].map(|key| {
        json["stacks"][key]
            .as_u64()
            .unwrap_or_else(|| panic!("no stacks.{key} in {json:#}"))
    })
}

/// Issue 32: a walk that reaches the outermost frame is complete, whether the CFI says so
/// (glibc's `_start`) or the frame is the code at the loader's entry point, which Debian's
/// glibc 2.36 gives no CFI (`_dl_start_user`, which calls every library's constructor through
/// `_dl_init`). Those walks counted as unknown although their stacks were whole. A frame in
/// code no file covers (`ends.c jit`, a JIT-like stub in an anonymous mapping) still ends its
/// walk unknown, and is counted.
#[test]
fn issue32_a_walk_that_reaches_the_loaders_entry_is_complete_and_jit_code_is_unknown() {
    let test = "issue32_a_walk_that_reaches_the_loaders_entry_is_complete_and_jit_code_is_unknown";
    skip_unless_recording!(test);
    let Some(exe) = require(test, ends_fixture()) else {
        return;
    };
    let case = Case {
        start_at: "ends_lib_init",
        ..Case::malloc_of("ends", exe.clone(), &[], 7861)
    };
    let Some(gdb) = gdb_of(test, &case) else {
        return;
    };
    let [gdb] = gdb.as_slice() else {
        panic!("{test}: one stop, got {gdb:#?}");
    };
    // gdb has no CFI there either: past _dl_start_user it reads the process's first stack
    // words (argc, argv[0], its NULL) as return addresses, frames of no function.
    let start_user = functions(gdb)
        .iter()
        .position(|f| *f == "_dl_start_user")
        .unwrap_or_else(|| panic!("{test}: gdb's stack reaches _dl_start_user: {gdb:#?}"));
    let (gdb, past) = gdb.split_at(start_user + 1);
    assert!(
        past.iter().all(|f| f.function == "??"),
        "{test}: nothing but the initial stack's words past _dl_start_user: {past:#?}"
    );
    assert_eq!(
        functions(gdb)[1..3],
        ["ends_lib_alloc", "ends_lib_init"],
        "{test}: {gdb:#?}"
    );

    let (path, run) = record_with_stacks("ends", &case.command);
    let stacks = dump_stacks(&path, &run);
    let leaves = case
        .picked(&stacks)
        .unwrap_or_else(|e| panic!("{test}: {e}"));
    let walk = stacks
        .walk(leaves[0])
        .unwrap_or_else(|e| panic!("{test}: {e}"));
    assert_same_stack(test, gdb, &walk);
    let (json, _) = every_site_json(&path);
    // The constructor's walk and main's, both complete (there may be glibc's own).
    let [walks, truncated, unknown, unsupported] = walk_counters(&json);
    assert!(walks >= 2, "{test}: {json:#}");
    assert_eq!(
        (truncated, unknown, unsupported),
        (0, 0, 0),
        "{test}: every walk of {walks} complete"
    );

    let jit = [exe.to_str().unwrap().to_string(), "jit".to_string()];
    let (path, run) = record_with_stacks("ends_jit", &jit);
    let stacks = dump_stacks(&path, &run);
    let leaves = Case::malloc_of("ends_jit", exe, &["jit"], 7863)
        .picked(&stacks)
        .unwrap_or_else(|e| panic!("{test}: {e}"));
    let walk = stacks
        .walk(leaves[0])
        .unwrap_or_else(|e| panic!("{test}: {e}"));
    let frames = walk.frames();
    assert_eq!(
        (
            module_file(&frames[0].module).as_str(),
            walk.nodes.len(),
            walk.mark
        ),
        ("libc.so.6", 1, Some(MARK_UNKNOWN)),
        "{test}: malloc's frame, then the stub's, which no file covers: {frames:#?}"
    );
    let (json, _) = every_site_json(&path);
    let [walks, truncated, unknown, unsupported] = walk_counters(&json);
    assert_eq!(
        (truncated, unknown, unsupported),
        (0, 1, 0),
        "{test}: the stub's walk alone is unknown, of {walks}"
    );
}
