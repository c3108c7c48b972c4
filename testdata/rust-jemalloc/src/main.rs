//! testdata/stacks/rust_chain.rs's chain (main -> rust_outer -> rust_inner ->
//! Vec::with_capacity(7841) -> the allocator shims), here ending in the executable's own
//! jemalloc instead of the C library's malloc.

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[path = "../../stacks/rust_chain.rs"]
mod rust_chain;

fn main() {
    rust_chain::main();
}
