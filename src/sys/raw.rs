//! The kernel→user record layouts of `bpf/event.h`, as bindgen generated them at build time, and
//! the BPF objects compiled from `bpf/*.bpf.c`, embedded in the binary.
#![allow(non_camel_case_types, non_upper_case_globals, dead_code)]

include!(concat!(env!("OUT_DIR"), "/event.rs"));

/// Process lifecycle programs and the maps every object shares (bpf/process.bpf.c).
pub static PROCESS_BPF_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/process.bpf.o"));
/// Resident memory from rss_stat (bpf/rss.bpf.c).
pub static RSS_BPF_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/rss.bpf.o"));
/// Resident memory from fentry programs on the kernel's rmap functions (bpf/rmap.bpf.c).
pub static RMAP_BPF_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/rmap.bpf.o"));
/// Empty programs at the allocator sites, the cost floor (bpf/floor.bpf.c).
pub static FLOOR_BPF_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/floor.bpf.o"));
/// Stops at exec and at the dynamic loader's hook, for discovery (bpf/discover.bpf.c).
pub static DISCOVER_BPF_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/discover.bpf.o"));
/// Raw mappings from the syscall tracepoints (bpf/mmap.bpf.c).
pub static MMAP_BPF_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/mmap.bpf.o"));
/// Allocator uprobes (bpf/alloc.bpf.c).
pub static ALLOC_BPF_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/alloc.bpf.o"));
/// The walker of sampled stacks, tail-called by the allocator's entry (bpf/walk.bpf.c).
pub static WALK_BPF_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/walk.bpf.o"));

/// The bytes of a record struct, laid out as the kernel writes it into the ring (tests build
/// records with this).
#[cfg(test)]
pub fn record_bytes<T: Copy>(v: &T) -> Vec<u8> {
    // SAFETY: T is one of the plain #[repr(C)] structs of event.h, whose padding is explicit
    // fields, so every byte is initialised; the slice lives only for this copy.
    unsafe { std::slice::from_raw_parts(v as *const T as *const u8, std::mem::size_of::<T>()) }
        .to_vec()
}
