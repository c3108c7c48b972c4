//! The allocations both binaries make, with fingerprint sizes (tests/allocators.rs): a Vec of
//! 50021 bytes; a Vec of 50023 bytes filled and grown to 50047 (a realloc); a block of 50051
//! bytes aligned to 64; a zeroed block of 50053 bytes. Each released once.

use std::alloc::{alloc, alloc_zeroed, dealloc, Layout};
use std::hint::black_box;

/// Make the allocations.
pub fn run() {
    let v: Vec<u8> = Vec::with_capacity(black_box(50021));
    black_box(&v);
    drop(v);

    let mut w: Vec<u8> = Vec::with_capacity(black_box(50023));
    w.resize(50023, 1);
    w.reserve_exact(24);
    black_box(&w);
    drop(w);

    let aligned = Layout::from_size_align(50051, 64).unwrap();
    let zeroed = Layout::from_size_align(50053, 8).unwrap();
    // SAFETY: both layouts have a non-zero size; each block is freed with its own layout.
    unsafe {
        let p = black_box(alloc(aligned));
        assert!(!p.is_null());
        dealloc(p, aligned);
        let q = black_box(alloc_zeroed(zeroed));
        assert!(!q.is_null());
        dealloc(q, zeroed);
    }
    println!("done");
}
