//! The recorder's stack interner: every call stack of the recording as one trie of (module,
//! file offset) frames, from the outermost frame at the root down to the allocator's frame at
//! a leaf, each node numbered the first time it is seen.
//!
//! Where it sits in the flow: the recorder's drain turns each new kernel stack into
//! (module, offset) frames, interns them here and writes the nodes this created as
//! `StackNode` events before the allocation that refers to the leaf; at the end, [`StackTrie::
//! frames`] lists what the symbols section must name. A call path seen in two processes, or
//! under two ASLR layouts, is one node, and stacks that share callers share their prefix, so a
//! flame graph is a walk of the trie. The idea is heaptrack's trace tree (KDE/heaptrack
//! `src/track/tracetree.h`), keyed by a hash map instead of sorted child lists: a node's
//! children are looked up by (parent, frame) in one probe.

use std::collections::HashSet;

use crate::format::MODULE_MARK;
use crate::intmap::IntMap;

/// One frame of a stack: a file offset inside module `module` (see `format::EventKind::
/// StackNode` for which instruction it points into).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Frame {
    /// The module id (`format::EventKind::Module`), or `format::MODULE_MARK`.
    pub module: u32,
    /// The file offset in the module (for a mark, why the walk stopped).
    pub offset: u64,
}

/// A node created by [`StackTrie::intern`]: what its `StackNode` event says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewNode {
    /// The node's id (from 1).
    pub id: u32,
    /// Its parent's id; 0 is the root.
    pub parent: u32,
    /// Its frame.
    pub frame: Frame,
}

/// A node as the trie keeps it.
#[derive(Clone, Copy, Debug)]
struct Node {
    parent: u32,
    frame: Frame,
}

/// Every stack interned so far, as a trie whose node ids go from 1 in creation order.
#[derive(Default)]
pub struct StackTrie {
    /// Node `id` is `nodes[id - 1]`.
    nodes: Vec<Node>,
    /// (parent << 32 | module, offset) to the child's id: the one lookup per frame.
    children: IntMap<(u64, u64), u32>,
}

impl StackTrie {
    /// An empty trie (the root alone).
    pub fn new() -> StackTrie {
        StackTrie::default()
    }

    /// Interns a stack given innermost first (the allocator's frame first), as the kernel walk
    /// gives it. Returns the leaf's node id: 0 for an empty stack, never 0 otherwise. Appends to
    /// `created` each node this call made, parents before children, so the caller can write
    /// them as `StackNode` events before the allocation that refers to the leaf.
    ///
    /// The trie never holds more than `u32::MAX - 1` nodes: past that (some 100 GB of stacks),
    /// a stack that needs a new node gets 0, no stack.
    pub fn intern(&mut self, frames: &[Frame], created: &mut Vec<NewNode>) -> u32 {
        let mut parent = 0u32;
        for &frame in frames.iter().rev() {
            let key = (
                (u64::from(parent) << 32) | u64::from(frame.module),
                frame.offset,
            );
            parent = match self.children.get(&key) {
                Some(&id) => id,
                None => {
                    // Ids 0 (the root) and u32::MAX are never handed out.
                    let Some(id) = u32::try_from(self.nodes.len() + 1)
                        .ok()
                        .filter(|&id| id != u32::MAX)
                    else {
                        return 0;
                    };
                    self.nodes.push(Node { parent, frame });
                    self.children.insert(key, id);
                    created.push(NewNode { id, parent, frame });
                    id
                }
            };
        }
        parent
    }

    /// The stack that ends at node `leaf`, innermost first, as it was interned; empty for 0
    /// or an id the trie never handed out.
    pub fn stack(&self, leaf: u32) -> Vec<Frame> {
        let mut out = Vec::new();
        let mut id = leaf;
        while let Some(node) = id.checked_sub(1).and_then(|i| self.nodes.get(i as usize)) {
            out.push(node.frame);
            id = node.parent;
        }
        out
    }

    /// Every distinct (module, offset) of the trie's nodes, sorted, for the symbols section;
    /// without the `MODULE_MARK` frames, which name no code.
    pub fn frames(&self) -> impl Iterator<Item = Frame> + '_ {
        let distinct: HashSet<Frame> = self
            .nodes
            .iter()
            .map(|n| n.frame)
            .filter(|f| f.module != MODULE_MARK)
            .collect();
        let mut sorted: Vec<Frame> = distinct.into_iter().collect();
        sorted.sort_unstable();
        sorted.into_iter()
    }

    /// The frames of the nodes made after the first `nodes`, in creation order, repeats
    /// included, without the `MODULE_MARK` frames: what the trie gained since it had `nodes`.
    pub fn frames_since(&self, nodes: usize) -> impl Iterator<Item = Frame> + '_ {
        self.nodes
            .get(nodes..)
            .unwrap_or_default()
            .iter()
            .map(|n| n.frame)
            .filter(|f| f.module != MODULE_MARK)
    }

    /// How many nodes the trie has (the root not counted).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether nothing was interned yet.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::MARK_TRUNCATED;

    fn f(module: u32, offset: u64) -> Frame {
        Frame { module, offset }
    }

    /// Interns `frames` and returns the leaf and the nodes created.
    fn intern(trie: &mut StackTrie, frames: &[Frame]) -> (u32, Vec<NewNode>) {
        let mut created = Vec::new();
        let leaf = trie.intern(frames, &mut created);
        (leaf, created)
    }

    #[test]
    fn first_stack_creates_a_chain_from_the_outermost_frame() {
        let mut trie = StackTrie::new();
        // malloc (1:0x100) called by g (2:0x20) called by main (2:0x10).
        let (leaf, created) = intern(&mut trie, &[f(1, 0x100), f(2, 0x20), f(2, 0x10)]);
        assert_eq!(leaf, 3);
        assert_eq!(
            created,
            [
                NewNode {
                    id: 1,
                    parent: 0,
                    frame: f(2, 0x10)
                },
                NewNode {
                    id: 2,
                    parent: 1,
                    frame: f(2, 0x20)
                },
                NewNode {
                    id: 3,
                    parent: 2,
                    frame: f(1, 0x100)
                },
            ]
        );
        assert_eq!(trie.len(), 3);
        assert_eq!(trie.stack(leaf), [f(1, 0x100), f(2, 0x20), f(2, 0x10)]);
    }

    #[test]
    fn the_same_stack_twice_gives_the_same_leaf_and_creates_nothing() {
        let mut trie = StackTrie::new();
        let stack = [f(1, 0x100), f(2, 0x20), f(2, 0x10)];
        let (first, _) = intern(&mut trie, &stack);
        let (again, created) = intern(&mut trie, &stack);
        assert_eq!(again, first);
        assert!(created.is_empty());
        assert_eq!(trie.len(), 3);
    }

    #[test]
    fn shared_callers_get_one_node() {
        let mut trie = StackTrie::new();
        let (a, _) = intern(&mut trie, &[f(1, 0x100), f(2, 0x20), f(2, 0x10)]);
        // Another site in g: only the leaf is new, under g's node.
        let (b, created) = intern(&mut trie, &[f(1, 0x200), f(2, 0x20), f(2, 0x10)]);
        assert_ne!(a, b);
        assert_eq!(
            created,
            [NewNode {
                id: 4,
                parent: 2,
                frame: f(1, 0x200)
            }]
        );
        // The same frame under another caller is another node: the trie is of paths.
        let (c, created) = intern(&mut trie, &[f(1, 0x100), f(2, 0x30), f(2, 0x10)]);
        assert_eq!(c, 6);
        assert_eq!(
            created,
            [
                NewNode {
                    id: 5,
                    parent: 1,
                    frame: f(2, 0x30)
                },
                NewNode {
                    id: 6,
                    parent: 5,
                    frame: f(1, 0x100)
                },
            ]
        );
        // A stack that is a prefix of another is its inner node, created once.
        let (g, created) = intern(&mut trie, &[f(2, 0x20), f(2, 0x10)]);
        assert_eq!((g, created.len()), (2, 0));
        assert_eq!(trie.len(), 6);
    }

    #[test]
    fn same_offset_in_another_module_is_another_frame() {
        let mut trie = StackTrie::new();
        let (a, _) = intern(&mut trie, &[f(1, 0x10)]);
        let (b, created) = intern(&mut trie, &[f(2, 0x10)]);
        assert_ne!(a, b);
        assert_eq!(created.len(), 1);
    }

    #[test]
    fn empty_stack_is_zero() {
        let mut trie = StackTrie::new();
        let (leaf, created) = intern(&mut trie, &[]);
        assert_eq!((leaf, created.len(), trie.len()), (0, 0, 0));
        assert!(trie.stack(0).is_empty());
        assert!(trie.stack(99).is_empty());
    }

    #[test]
    fn deep_stacks_round_trip() {
        let mut trie = StackTrie::new();
        let deep: Vec<Frame> = (0..200)
            .map(|i| f(1 + i % 3, 0x1000 + 16 * u64::from(i)))
            .collect();
        let (leaf, created) = intern(&mut trie, &deep);
        assert_eq!((leaf, created.len()), (200, 200));
        assert_eq!(trie.stack(leaf), deep);
        // Parents always come before their children.
        for (i, n) in created.iter().enumerate() {
            assert_eq!(n.parent, i as u32);
        }
        // A recursion truncated at the same depth elsewhere: the mark on top, then 199 frames
        // of which only the innermost differs.
        let mut truncated = deep.clone();
        truncated[0] = f(1, 0x9999);
        truncated.push(f(MODULE_MARK, MARK_TRUNCATED));
        let (other, created) = intern(&mut trie, &truncated);
        assert_eq!(created.len(), 201, "a new outermost frame shares nothing");
        assert_eq!(trie.stack(other), truncated);
    }

    #[test]
    fn frames_are_distinct_and_leave_out_marks() {
        let mut trie = StackTrie::new();
        intern(&mut trie, &[f(1, 0x100), f(2, 0x20), f(2, 0x10)]);
        intern(&mut trie, &[f(1, 0x100), f(2, 0x30), f(2, 0x10)]);
        intern(&mut trie, &[f(1, 0x100), f(MODULE_MARK, MARK_TRUNCATED)]);
        let frames: Vec<Frame> = trie.frames().collect();
        assert_eq!(frames, [f(1, 0x100), f(2, 0x10), f(2, 0x20), f(2, 0x30)]);
    }

    #[test]
    fn many_stacks_intern_quickly() {
        // 100,000 stacks of 30 frames with a shared 20-frame base, as a big compile has: the
        // lookups must stay a hash probe each (a debug build does this in well under a second).
        let mut trie = StackTrie::new();
        let mut created = Vec::new();
        let base: Vec<Frame> = (0..20).map(|i| f(1, 0x10_000 + i)).collect();
        let start = std::time::Instant::now();
        for s in 0..100_000u64 {
            let mut stack: Vec<Frame> = (0..10).map(|i| f(2, s * 64 + i)).collect();
            stack.extend_from_slice(&base);
            created.clear();
            trie.intern(&stack, &mut created);
        }
        assert_eq!(trie.len(), 20 + 100_000 * 10);
        let took = start.elapsed();
        eprintln!("interned 100,000 stacks of 30 frames in {took:?}");
        assert!(took.as_secs() < 10, "interning took {took:?}");
    }
}
