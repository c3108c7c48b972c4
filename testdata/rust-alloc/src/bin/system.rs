//! The allocations of lib.rs through Rust's default (system) allocator.
fn main() {
    rust_alloc::run();
}
