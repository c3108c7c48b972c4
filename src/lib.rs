//! memtrack: record every heap allocation and resident-memory change of a command and all its
//! descendants with eBPF, into one compact file, and report on it.
//!
//! Data flows one way: kernel (`bpf/`) → ring (`sys::ring`) → decode (`record::decode`) →
//! writer (`format::writer`) → file → reader (`format::reader`) → the pass (`analyze`) → its
//! values (`model`) → the formats (`views`), which the commands (`report`, `check`, `diff`)
//! choose. `record` and `report` never import each other; both use `format` (`tests/layers.rs`).
//!
//! All `unsafe` code lives in `sys`: the owners of what C hands over, whose `Drop` frees it.

#![deny(unsafe_code)]

pub mod analyze;
pub mod binary;
pub mod check;
pub mod cli;
pub mod control;
pub mod diff;
pub mod doctor;
pub mod dump;
pub mod error;
pub mod format;
mod intmap;
pub mod model;
pub mod output;
pub mod preflight;
pub mod record;
pub mod report;
pub mod stacks;
pub mod table;
pub mod units;
pub mod unwind;
pub mod views;

#[allow(unsafe_code)]
mod sys;
#[cfg(test)]
mod testkit;
mod xorshift;
