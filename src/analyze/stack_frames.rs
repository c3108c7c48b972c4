//! The call stacks a recording names: its trie of (module, offset) nodes, the modules and the
//! symbols, and from them a stack's frames, innermost first with inline chains.
//!
//! Flow: the sites pass (`stacks`) hands every stack event to [`StackFrames::note`], then asks
//! for the frames of the sites it reports (`frames`) and of its profile (`interned_frames`, each
//! frame once in a [`FrameTable`]). It holds names, never blocks: what a site did is `stacks`'s.
//! At the end of the stream, before any frame is asked for, [`StackFrames::name_missing`] names
//! the frames of modules without a single `Symbol` event (a recorder cut short before writing
//! them) from this machine's files, through `stacks::local` (issue 32).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;

use crate::format::MODULE_MARK;
use crate::format::{
    self, EventKind, Symbol, SymbolFrame, MARK_NO_STACK, MARK_TRUNCATED, MARK_UNKNOWN,
    MARK_UNSUPPORTED,
};
use crate::intmap::IntMap;
use crate::model::profile::ProfileModule;
use crate::model::sites::{LocalSymbols, SiteFrame, UnnamedModule};
use crate::stacks::local::{self, RecordedModule};
use crate::stacks::Frame;

/// One node of the stack trie.
#[derive(Clone, Copy, Debug)]
struct Node {
    parent: u32,
    module: u32,
    offset: u64,
}

/// A module the recording names.
#[derive(Clone, Debug)]
struct Module {
    path: String,
    build_id: Vec<u8>,
}

/// Stack walks deeper than this many nodes are cut (a damaged trie could loop).
const MAX_FRAMES: usize = 4096;

/// The trie and its names, as the recording has given them so far.
#[derive(Debug, Default)]
pub(super) struct StackFrames {
    nodes: IntMap<u32, Node>,
    modules: IntMap<u32, Module>,
    symbols: HashMap<(u32, u64), Vec<SymbolFrame>>,
    /// The modules the recording has at least one `Symbol` event for.
    with_symbols: HashSet<u32>,
}

impl StackFrames {
    /// Takes in a module, trie node or symbol; other events are ignored. Returns whether it was
    /// a trie node, which tells the recording has call stacks.
    pub(super) fn note(&mut self, kind: &EventKind) -> bool {
        match kind {
            EventKind::Module(format::Module {
                id, path, build_id, ..
            }) => {
                self.modules.insert(
                    *id,
                    Module {
                        path: path.clone(),
                        build_id: build_id.clone(),
                    },
                );
            }
            EventKind::StackNode {
                id,
                parent,
                module,
                offset,
            } => {
                self.nodes.insert(
                    *id,
                    Node {
                        parent: *parent,
                        module: *module,
                        offset: *offset,
                    },
                );
                return true;
            }
            EventKind::Symbol(Symbol {
                module,
                offset,
                frames,
            }) => {
                self.symbols.insert((*module, *offset), frames.clone());
                self.with_symbols.insert(*module);
            }
            _ => {}
        }
        false
    }

    /// Names the frames of the modules the trie uses that have no `Symbol` event (the recorder
    /// writes one for every frame at its end, empty or not, so only a recorder cut short leaves
    /// a module without any) from this machine's files, each checked by its recorded build id.
    /// Says once per module that could not be named why and what to do. Returns what was
    /// done; `None` when no module lacks symbols, so a complete recording reads as before.
    pub(super) fn name_missing(&mut self) -> Option<LocalSymbols> {
        let missing: BTreeSet<u32> = (self.nodes.values())
            .map(|n| n.module)
            .filter(|m| {
                *m != MODULE_MARK && !self.with_symbols.contains(m) && self.modules.contains_key(m)
            })
            .collect();
        if missing.is_empty() {
            return None;
        }
        let modules: Vec<RecordedModule> = (missing.iter())
            .map(|&id| RecordedModule {
                id,
                path: PathBuf::from(&self.modules[&id].path),
                build_id: self.modules[&id].build_id.clone(),
            })
            .collect();
        let frames = (self.nodes.values())
            .filter(|n| missing.contains(&n.module))
            .map(|n| Frame {
                module: n.module,
                offset: n.offset,
            });
        let found = local::symbolize_here(&modules, frames);
        for (f, chain) in found.symbols {
            self.symbols.insert((f.module, f.offset), chain);
        }
        let path = |id: u32| self.modules[&id].path.clone();
        let mut named: Vec<String> = found.named.into_iter().map(path).collect();
        named.sort();
        named.dedup();
        let mut unnamed: Vec<UnnamedModule> = (found.refused.into_iter())
            .map(|(id, why)| UnnamedModule {
                path: path(id),
                reason: why.to_string(),
            })
            .collect();
        unnamed.sort_by(|a, b| a.path.cmp(&b.path));
        unnamed.dedup_by(|a, b| a.path == b.path);
        for m in &unnamed {
            log::warn!(
                "{}: its frames keep module+offset names, as the recording has no symbols \
                 and {}: {}",
                m.path,
                m.reason,
                local::advice(std::path::Path::new(&m.path))
            );
        }
        Some(LocalSymbols { named, unnamed })
    }

    /// The modules of a profile: each path once, sorted, with its build id in hex.
    pub(super) fn profile_modules(&self) -> Vec<ProfileModule> {
        let mut modules: Vec<ProfileModule> = self
            .modules
            .values()
            .map(|m| ProfileModule {
                path: m.path.clone(),
                build_id: m.build_id.iter().map(|b| format!("{b:02x}")).collect(),
            })
            .collect();
        modules.sort_by(|a, b| a.path.cmp(&b.path));
        modules.dedup_by(|a, b| a.path == b.path);
        modules
    }

    /// The frames of the stack whose leaf is `leaf`, innermost first, inlined functions before
    /// the function they were inlined into.
    pub(super) fn frames(&self, leaf: u32) -> Vec<SiteFrame> {
        let mut table = FrameTable::default();
        let ids = self.interned_frames(leaf, &mut table);
        ids.into_iter()
            .map(|i| table.frames[i as usize].clone())
            .collect()
    }

    /// The frames of the stack whose leaf is `leaf`, as indices into `table`, which gets each
    /// trie node's frames the first time a stack runs through it.
    pub(super) fn interned_frames(&self, leaf: u32, table: &mut FrameTable) -> Vec<u32> {
        let mut ids = Vec::new();
        let mut id = leaf;
        while id != 0 {
            if ids.len() >= MAX_FRAMES {
                ids.push(table.mark("[cut: stack too deep or looping]", 0));
                break;
            }
            let Some(node) = self.nodes.get(&id) else {
                ids.push(table.mark("[stack not in the recording]", u64::from(id)));
                break;
            };
            let code = (node.module, node.offset);
            let (first, end) = *table.of_code.entry(code).or_insert_with(|| {
                let first = table.frames.len() as u32;
                self.push_frames(node, &mut table.frames);
                (first, table.frames.len() as u32)
            });
            ids.extend(first..end);
            id = node.parent;
        }
        ids
    }

    /// The frames one trie node stands for: its inline chain, or one frame without a name.
    fn push_frames(&self, node: &Node, frames: &mut Vec<SiteFrame>) {
        if node.module == MODULE_MARK {
            let what = match node.offset {
                MARK_TRUNCATED => "[truncated]",
                MARK_UNKNOWN => "[unknown]",
                MARK_UNSUPPORTED => "[unsupported]",
                MARK_NO_STACK => crate::model::profile::NO_STACK,
                _ => "[stopped]",
            };
            frames.push(SiteFrame::mark(what, node.offset));
            return;
        }
        let module = self
            .modules
            .get(&node.module)
            .map_or_else(|| format!("[module {}]", node.module), |m| m.path.clone());
        match self.symbols.get(&(node.module, node.offset)) {
            Some(chain) if !chain.is_empty() => {
                let last = chain.len() - 1;
                frames.extend(chain.iter().enumerate().map(|(k, f)| SiteFrame {
                    function: f.function.clone(),
                    file: f.file.clone(),
                    line: f.line,
                    module: module.clone(),
                    offset: node.offset,
                    inlined: k < last,
                }));
            }
            _ => frames.push(SiteFrame {
                function: String::new(),
                file: String::new(),
                line: 0,
                module,
                offset: node.offset,
                inlined: false,
            }),
        }
    }
}

/// The frames of a profile, each once: the frames of a (module, offset) (its inline chain) are
/// made the first time a stack runs through it, and every stack through it, in whatever
/// process or call path, lists the same indices.
#[derive(Default)]
pub(super) struct FrameTable {
    pub(super) frames: Vec<SiteFrame>,
    /// The frames of a trie node's (module, offset): `frames[first..end]`.
    of_code: HashMap<(u32, u64), (u32, u32)>,
    /// The marks that end a stack early, by name and value.
    marks: HashMap<(&'static str, u64), u32>,
}

impl FrameTable {
    pub(super) fn mark(&mut self, what: &'static str, value: u64) -> u32 {
        *self.marks.entry((what, value)).or_insert_with(|| {
            self.frames.push(SiteFrame::mark(what, value));
            self.frames.len() as u32 - 1
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::*;

    /// The names of [`two_sites_trie`] and `more`.
    fn trie(more: Vec<EventKind>) -> StackFrames {
        let mut names = StackFrames::default();
        for k in two_sites_trie().iter().chain(&more) {
            names.note(k);
        }
        names
    }

    fn frame_names(frames: &[SiteFrame]) -> Vec<String> {
        frames
            .iter()
            .map(|f| {
                format!(
                    "{}|{}:{}|{}+{:#x}|{}",
                    f.function, f.file, f.line, f.module, f.offset, f.inlined
                )
            })
            .collect()
    }

    #[test]
    fn only_trie_nodes_say_there_are_stacks() {
        let mut names = StackFrames::default();
        assert!(!names.note(&module(1, "/lib/libc.so.6")));
        assert!(names.note(&stack_node(1, 0, 1, 0x10)));
        assert!(!names.note(&symbol(1, 0x10, &[("malloc", "malloc.c", 1)])));
    }

    #[test]
    fn frames_innermost_first_with_inline_chains() {
        let names = trie(vec![
            symbol(1, 0x9a1b0, &[("malloc", "malloc.c", 3287)]),
            symbol(2, 0x1200, &[("make_b", "app.c", 7), ("main", "app.c", 20)]),
        ]);
        assert_eq!(
            frame_names(&names.frames(4)),
            vec![
                "malloc|malloc.c:3287|/usr/lib/x86_64-linux-gnu/libc.so.6+0x9a1b0|false",
                "make_b|app.c:7|/work/app+0x1200|true",
                "main|app.c:20|/work/app+0x1200|false",
            ]
        );
        // No symbol for leaf 2's caller: module and offset only.
        assert_eq!(
            frame_names(&names.frames(2))[1],
            "|:0|/work/app+0x1100|false"
        );
    }

    #[test]
    fn marks_end_a_stack_on_top() {
        let names = trie(vec![
            stack_node(10, 0, MODULE_MARK, MARK_TRUNCATED),
            stack_node(11, 10, 2, 0x1300),
            stack_node(12, 11, 1, 0x9a1b0),
            stack_node(13, 0, MODULE_MARK, MARK_UNKNOWN),
            stack_node(14, 13, 1, 0x9a1b0),
            stack_node(15, 0, MODULE_MARK, MARK_UNSUPPORTED),
            stack_node(16, 15, 1, 0x9a1b0),
        ]);
        let last = |leaf| names.frames(leaf).last().unwrap().function.clone();
        assert_eq!(last(12), "[truncated]");
        assert_eq!(last(14), "[unknown]");
        assert_eq!(last(16), "[unsupported]");
        assert_eq!(last(99), "[stack not in the recording]");
        assert_eq!(names.frames(12).len(), 3);
    }

    #[test]
    fn a_looping_trie_is_cut() {
        let names = trie(vec![stack_node(20, 21, 1, 1), stack_node(21, 20, 1, 2)]);
        assert_eq!(names.frames(20).len(), MAX_FRAMES + 1);
    }

    #[test]
    fn a_frame_table_lists_shared_frames_once() {
        let names = trie(vec![]);
        let mut table = FrameTable::default();
        let a = names.interned_frames(2, &mut table);
        let b = names.interned_frames(4, &mut table);
        // Both stacks run through libc's malloc: the same index.
        assert_eq!(a[0], b[0]);
        assert_eq!(table.frames.len(), 3);
    }

    #[test]
    fn a_recording_with_its_symbols_is_not_named_here() {
        // Every module of the trie has a Symbol event, even an empty one: nothing to do.
        let mut names = trie(vec![symbol(1, 0x9a1b0, &[]), symbol(2, 0x1100, &[])]);
        assert_eq!(names.name_missing(), None);
        assert_eq!(
            frame_names(&names.frames(2))[0],
            "|:0|/usr/lib/x86_64-linux-gnu/libc.so.6+0x9a1b0|false"
        );
    }

    #[test]
    fn modules_without_symbols_are_named_here_or_said_unnamed() {
        let mut names = StackFrames::default();
        for k in [
            module(1, "/nonexistent/libgone.so.3"),
            module(2, "/work/app"),
            stack_node(1, 0, 2, 0x1100),
            stack_node(2, 1, 1, 0x10),
            stack_node(3, 2, MODULE_MARK, MARK_TRUNCATED),
            symbol(2, 0x1100, &[("main", "app.c", 20)]),
        ] {
            names.note(&k);
        }
        let local = names.name_missing().expect("libgone has no symbols");
        // The app has its symbols: only libgone was tried, and it is not here.
        assert!(local.named.is_empty(), "{local:?}");
        assert_eq!(local.unnamed.len(), 1, "{local:?}");
        assert_eq!(local.unnamed[0].path, "/nonexistent/libgone.so.3");
        assert!(
            local.unnamed[0]
                .reason
                .starts_with("the file is not on this machine"),
            "{local:?}"
        );
        assert_eq!(
            frame_names(&names.frames(2)),
            [
                "|:0|/nonexistent/libgone.so.3+0x10|false",
                "main|app.c:20|/work/app+0x1100|false",
            ]
        );
    }

    #[test]
    fn profile_modules_are_sorted_once_each() {
        let names = trie(vec![module(3, "/work/app")]);
        let paths: Vec<String> = names
            .profile_modules()
            .into_iter()
            .map(|m| m.path)
            .collect();
        assert_eq!(
            paths,
            vec!["/usr/lib/x86_64-linux-gnu/libc.so.6", "/work/app"]
        );
    }
}
