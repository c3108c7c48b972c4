//! A Rust program for tests/stacks.rs, built by the test with `rustc -C opt-level=2 -g`:
//! main -> rust_outer -> rust_inner -> Vec::with_capacity(7841) -> (Rust's allocator shims)
//! -> malloc(7841). Frames are kept by `#[inline(never)]` and by work after each call.
//! testdata/rust-jemalloc runs the same chain as a module, through its own jemalloc.

use std::hint::black_box;

#[inline(never)]
fn rust_inner(n: usize) -> Vec<u8> {
    let v = Vec::with_capacity(n);
    black_box(&v);
    v
}

#[inline(never)]
fn rust_outer(n: usize) -> Vec<u8> {
    let v = rust_inner(n + 1);
    black_box(&v);
    v
}

pub fn main() {
    // 7841 = 7839 + the argument count (1) + 1 (rust_outer).
    let v = rust_outer(7839 + std::env::args().count());
    assert_eq!(black_box(&v).capacity(), 7841);
}
