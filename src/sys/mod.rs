//! The only `unsafe` code in memtrack: owners of what libbpf and the kernel hand us, each freeing
//! it in `Drop`, and thin wrappers over the libc calls the recorder needs. Everything above this
//! layer is safe Rust.

pub mod bpf;
pub mod bpf_map;
pub mod caps;
pub mod custom_btf;
pub mod fifo;
pub mod inspect;
pub mod kernel_btf;
pub mod lock;
pub mod mount;
pub mod probe;
pub mod process;
pub mod raw;
pub mod ring;
pub mod sched;
pub mod terminal;
pub mod wait;
