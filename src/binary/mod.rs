//! What a program's binary offers to probe, read without loading anything into the kernel: the
//! system's C library and dynamic loader, the ELF symbols of a file (`symbols`), the allocator
//! functions among them (`catalogue`, and the user's own in `custom`), and where in each
//! function a probe goes (`placement`). The result is a file's [`Sites`].
//!
//! Both `record` (which attaches the sites) and `preflight` (which says where they would go on
//! this machine) read binaries through this module, so neither needs the other.

pub mod catalogue;
pub mod custom;
pub mod entry;
pub mod ldcache;
pub mod placement;
pub mod symbols;

use std::path::{Path, PathBuf};

/// Where distributions keep the C library; the first that exists is used.
const LIBC_PATHS: &[&str] = &[
    "/lib/x86_64-linux-gnu/libc.so.6",
    "/usr/lib/x86_64-linux-gnu/libc.so.6",
    "/lib/aarch64-linux-gnu/libc.so.6",
    "/usr/lib/aarch64-linux-gnu/libc.so.6",
    "/lib64/libc.so.6",
    "/usr/lib64/libc.so.6",
    "/usr/lib/libc.so.6",
    "/lib/libc.so.6",
];

/// The system's glibc, resolved to its real path.
pub fn find_libc() -> Option<PathBuf> {
    first_existing(LIBC_PATHS)
}

/// Where distributions keep the dynamic loader (the PT_INTERP of their executables).
const LOADER_PATHS: &[&str] = &[
    "/lib64/ld-linux-x86-64.so.2",
    "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
    "/lib/ld-linux-aarch64.so.1",
    "/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1",
    "/lib/ld-linux-riscv64-lp64d.so.1",
];

/// The system's dynamic loader, resolved to its real path.
pub fn find_loader() -> Option<PathBuf> {
    first_existing(LOADER_PATHS)
}

/// The sonames of the allocator libraries memtrack knows (the catalogue's families: glibc,
/// libstdc++ and libc++ for operator new, jemalloc, mimalloc, gperftools' tcmalloc in each of
/// its builds), by prefix, and the dynamic loader, whose debugger hook discovery probes.
const ALLOCATOR_SONAMES: &[&str] = &[
    "libc.so.",
    "ld-linux",
    "libstdc++.so.",
    "libc++.so.",
    "libjemalloc.so",
    "libmimalloc.so",
    "libtcmalloc",
];

/// The files of the allocator libraries known to memtrack that this machine's dynamic loader
/// would load (by the sonames of /etc/ld.so.cache, and the C library and loader at their usual
/// paths), resolved to their real paths, each once, for this machine's architecture only.
pub fn allocator_libraries() -> Vec<PathBuf> {
    let cached = std::fs::read(ldcache::LD_SO_CACHE)
        .map(|b| ldcache::entries(&b))
        .unwrap_or_default();
    let mut out: Vec<PathBuf> = Vec::new();
    let candidates = find_libc().into_iter().chain(find_loader()).chain(
        cached
            .into_iter()
            .filter(|(soname, _)| ALLOCATOR_SONAMES.iter().any(|p| soname.starts_with(p)))
            .filter_map(|(_, path)| std::fs::canonicalize(path).ok()),
    );
    for path in candidates {
        if !out.contains(&path) && is_native_elf(&path) {
            out.push(path);
        }
    }
    out
}

/// Whether `path` is an ELF file of the machine memtrack runs on (the cache lists the 32-bit
/// libraries of a multilib system too).
fn is_native_elf(path: &Path) -> bool {
    use std::io::Read;
    let mut header = [0u8; 20];
    let read = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut header));
    let machine = u16::from_le_bytes([header[18], header[19]]);
    let native = match std::env::consts::ARCH {
        "x86_64" => 62,
        "aarch64" => 183,
        "riscv64" => 243,
        _ => return read.is_ok() && header.starts_with(b"\x7fELF"),
    };
    read.is_ok() && header.starts_with(b"\x7fELF") && header[4] == 2 && machine == native
}

fn first_existing(paths: &[&str]) -> Option<PathBuf> {
    paths
        .iter()
        .map(Path::new)
        .find(|p| p.exists())
        .and_then(|p| std::fs::canonicalize(p).ok())
}

/// The sites to probe in one file: (file offset, cookie) pairs.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Sites {
    /// Entry sites of functions that return a block (alloc_enter, and alloc_exit on return).
    pub enter: Vec<(u64, u64)>,
    /// Sites of the return probes: the entry sites again, where `[rsp]` still holds the return
    /// address (`placement.rs`), so that one breakpoint serves both.
    pub exit: Vec<(u64, u64)>,
    /// Sites of the functions that release a block (free_enter).
    pub free: Vec<(u64, u64)>,
    /// Functions found, for the log.
    pub functions: Vec<&'static str>,
    /// The sites the kernel must single-step (no emulated instruction could be reached).
    pub stepped: Vec<Stepped>,
    /// Release functions left unprobed: they only jump to another that reports the same.
    pub forwarded: Vec<&'static str>,
    /// `--allocator` functions whose whole body is a return (`placement::only_returns`):
    /// probed, but a compiler may have removed every call to them.
    pub empty: Vec<&'static str>,
}

impl Sites {
    /// How many probes attaching these sites makes.
    pub fn probes(&self) -> usize {
        self.enter.len() + self.exit.len() + self.free.len()
    }
}

/// A site whose instruction the kernel single-steps at each hit, about ten times the cost of an
/// emulated one (docs/kernel-facts.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stepped {
    /// The function.
    pub function: &'static str,
    /// The instruction probed, at the function's entry.
    pub instruction: String,
}

impl Stepped {
    /// "FUNC in FILE", the words `record`'s allocators line and `doctor`'s probe sites row both
    /// name a stepped site with; `file` is the name of the file that defines it.
    pub fn in_file(&self, file: &str) -> String {
        format!("{} in {file}", self.function)
    }
}
