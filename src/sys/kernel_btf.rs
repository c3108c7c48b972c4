//! The running kernel's BTF, parsed once per process and shared by every reader.
//!
//! libbpf parses it (/sys/kernel/btf/vmlinux, some 5 MiB) once for every object it loads, to
//! find the tp_btf and fentry attach targets and the kfuncs, which the kernel checks by type
//! id: five objects, five parses of 3-5 ms of CPU each, and preflight's own a sixth, a quarter
//! of `record -- true`'s CPU (docs/PERFORMANCE.md, "Fixed cost"). libbpf has no option to
//! hand it a parsed one, so build.rs links with `--wrap=btf__load_vmlinux_btf`: every call of
//! that function, libbpf's own and memtrack's, comes to [`__wrap_btf__load_vmlinux_btf`]. The
//! first parses (libbpf's function, under its `__real_` name); every caller gets an empty split
//! BTF on top of the parsed one, made in microseconds: the same type ids and names, searched
//! the same way (a split BTF reads what it lacks from its base), and its own to free, which
//! leaves the base alone.

use std::ptr::NonNull;
use std::sync::OnceLock;

use libbpf_sys as sys;

/// The parsed BTF, never freed: the process's readers come and go until it exits.
struct Parsed(NonNull<sys::btf>);

// SAFETY: nobody changes the BTF once parsed: libbpf only reads the base of a split BTF
// (lookups by id, name and string offset), and memtrack's readers (probe::VmlinuxBtf) only
// read. Reads from several threads at once (the objects load side by side) are then safe.
unsafe impl Send for Parsed {}
unsafe impl Sync for Parsed {}

/// The parse, or the errno it failed with (the kernel has no BTF: it will not have one later).
static KERNEL: OnceLock<Result<Parsed, i32>> = OnceLock::new();

extern "C" {
    /// libbpf's own `btf__load_vmlinux_btf`, by the name `--wrap` gives it.
    fn __real_btf__load_vmlinux_btf() -> *mut sys::btf;
}

/// The kernel's BTF, parsed on the first call; the errno of the failed parse otherwise.
pub fn kernel() -> Result<NonNull<sys::btf>, i32> {
    let parsed = KERNEL.get_or_init(|| {
        let began = std::time::Instant::now();
        // SAFETY: no arguments; returns NULL and sets errno on failure.
        let ptr = unsafe { __real_btf__load_vmlinux_btf() };
        let errno = std::io::Error::last_os_error().raw_os_error();
        log::debug!(
            "the kernel's BTF parsed in {:.1} ms, once for the whole recording",
            began.elapsed().as_secs_f64() * 1e3
        );
        NonNull::new(ptr)
            .map(Parsed)
            .ok_or(errno.filter(|&e| e != 0).unwrap_or(libc::ENOENT))
    });
    parsed.as_ref().map(|p| p.0).map_err(|&errno| errno)
}

/// What libbpf (and anyone else) gets for `btf__load_vmlinux_btf()`: a split BTF of its own on
/// the shared parse, or NULL with errno set, as libbpf's function returns.
#[no_mangle]
pub extern "C" fn __wrap_btf__load_vmlinux_btf() -> *mut sys::btf {
    match kernel() {
        // SAFETY: the base is live for the rest of the process and never changed; libbpf
        // frees the split BTF alone (btf__free leaves a split BTF's base).
        Ok(base) => unsafe { sys::btf__new_empty_split(base.as_ptr()) },
        Err(errno) => {
            // SAFETY: errno is this thread's.
            unsafe { *libc::__errno_location() = errno };
            std::ptr::null_mut()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every caller gets a BTF of its own that finds what the shared one holds, by the same ids.
    #[test]
    fn split_views_find_the_kernels_types_by_the_same_ids() {
        let Ok(base) = kernel() else {
            eprintln!("skipped: this kernel has no BTF to parse");
            return;
        };
        let name = c"task_struct";
        // SAFETY: base is live; the name is NUL-terminated.
        let id = unsafe {
            sys::btf__find_by_name_kind(base.as_ptr(), name.as_ptr(), sys::BTF_KIND_STRUCT)
        };
        assert!(id > 0, "task_struct is in every kernel's BTF");
        let a = __wrap_btf__load_vmlinux_btf();
        let b = __wrap_btf__load_vmlinux_btf();
        assert!(!a.is_null() && !b.is_null() && a != b);
        for view in [a, b] {
            // SAFETY: view is a live split BTF; freed once, here.
            unsafe {
                assert_eq!(
                    sys::btf__find_by_name_kind(view, name.as_ptr(), sys::BTF_KIND_STRUCT),
                    id
                );
                assert_eq!(sys::btf__type_cnt(view), sys::btf__type_cnt(base.as_ptr()));
                sys::btf__free(view);
            }
        }
        // The base outlives its views.
        // SAFETY: base is live.
        assert_eq!(
            unsafe {
                sys::btf__find_by_name_kind(base.as_ptr(), name.as_ptr(), sys::BTF_KIND_STRUCT)
            },
            id
        );
    }
}
