//! COUNT (first argument, default 100000) allocation pairs of 64 bytes through mimalloc as the
//! global allocator: the bench's Rust workload (issue 12).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let count: u64 = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000);
    for _ in 0..count {
        drop(std::hint::black_box(Box::new([0u8; 64])));
    }
}
