//! Call stacks between the kernel's walk and the recording file: the recorder's interner
//! ([`trie`]) that turns each new stack into trie nodes, and the symbolizer ([`symbolize`])
//! that names the frames (issue 15), which `report` also uses through [`local`] to name a
//! cut-short recording's frames from this machine's files (issue 32).
//!
//! Where it sits in the flow: the kernel walks a stack into (module, file offset) frames; the
//! recorder interns them into a [`StackTrie`] and writes the new nodes as `StackNode` events,
//! names each new frame as it comes (record/names.rs), and at the end writes the names of
//! [`StackTrie::frames`] as `Symbol` events. Both `record` and `report` may use this module;
//! it knows nothing of either.

pub mod local;
pub mod symbolize;
pub mod trie;

pub use symbolize::{symbolize, ModuleFile};
pub use trie::{Frame, NewNode, StackTrie};
