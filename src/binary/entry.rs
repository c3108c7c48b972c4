//! One allocator entry point as memtrack probes it: its symbol, the label its events carry and
//! its role. Both `catalogue` (the entry points memtrack knows) and `custom` (those a user names
//! with `--allocator`) build them, so they live apart from either.

use crate::sys::raw::{alloc_func, alloc_layout};

/// What an entry point does with its arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Returns a block (or resizes one): probed at entry and return.
    Alloc(alloc_layout),
    /// Returns a block only by calling a probed allocator: probed at entry only, to label the
    /// block that allocator reports (operator new of libstdc++ and libc++, which call malloc).
    Label,
    /// Releases the block of its first argument: probed at entry only.
    Free,
}

/// One entry point: a symbol name, the label it reports, and its role.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    /// The symbol as the file defines it (mangled for C++).
    pub name: &'static str,
    /// The label of its events.
    pub func: alloc_func,
    /// How it is probed.
    pub role: Role,
}
