//! Owners of libbpf objects, programs, maps and links.
//!
//! An [`OpenObject`] can be configured (map sizes, shared map fds, programs switched off) and
//! becomes a [`LoadedObject`] on load; only a loaded object hands out programs to attach and map
//! fds. Each owner frees its C resource in `Drop`. Every libbpf return is checked where it crosses
//! into Rust and turned into an error that names what failed.

use std::ffi::{CStr, CString};
use std::marker::PhantomData;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

pub use super::custom_btf::CustomBtf;
use std::os::raw::{c_char, c_int, c_void};
use std::ptr::NonNull;

use libbpf_sys as sys;

/// A libbpf or kernel failure: what we tried and the errno it gave.
#[derive(Debug)]
pub struct BpfError {
    /// What was being done, e.g. "load BPF object process".
    pub what: String,
    /// The errno (positive).
    pub errno: i32,
    /// The verifier's log, when the kernel refused a program of the object: its EACCES or
    /// EINVAL is then the verifier's verdict, not a missing privilege.
    pub verifier: Option<VerifierLog>,
}

/// What the kernel's verifier said about a program it refused.
#[derive(Clone, Debug)]
pub struct VerifierLog {
    /// The program's name.
    pub program: String,
    /// The whole log, as libbpf printed it.
    pub log: String,
}

impl VerifierLog {
    /// The line that says why: the last one that is neither an instruction, a register state,
    /// a source line nor a statistic (the verifier writes its verdict last, then its counts;
    /// libbpf names an unresolved CO-RE relocation just after the instruction it poisoned).
    pub fn reason(&self) -> &str {
        let is_trace = |l: &str| {
            l.is_empty()
                || l.starts_with(';')
                || l.starts_with("processed ")
                || l.starts_with("verification time")
                || l.starts_with("stack depth")
                || l.starts_with("R1") && l.contains('=')
                || l.split_once(':')
                    .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        };
        self.log
            .lines()
            .map(str::trim)
            .rev()
            .find(|l| !is_trace(l) && !l.contains("-- END PROG LOAD LOG --"))
            .unwrap_or("no reason in the verifier's log")
    }
}

thread_local! {
    /// The last verifier log libbpf printed on this thread (it prints one per refused
    /// program, at warning level, inside bpf_object__load).
    static LAST_VERIFIER_LOG: std::cell::RefCell<Option<VerifierLog>> =
        const { std::cell::RefCell::new(None) };
}

/// libbpf's frame around a verifier log: "prog 'NAME': -- BEGIN PROG LOAD LOG --\n...".
fn verifier_log_of(msg: &str) -> Option<VerifierLog> {
    let (head, log) = msg.split_once("-- BEGIN PROG LOAD LOG --")?;
    let program = head.split('\'').nth(1).unwrap_or("?").to_string();
    Some(VerifierLog {
        program,
        log: log.trim_start_matches('\n').to_string(),
    })
}

impl BpfError {
    /// What failed, with its errno (either sign).
    pub fn new(what: impl Into<String>, errno: i32) -> BpfError {
        BpfError {
            what: what.into(),
            errno: errno.abs(),
            verifier: None,
        }
    }

    /// An I/O failure on the way to a BPF call (reading the file to probe, say).
    pub fn io(what: impl Into<String>, e: std::io::Error) -> BpfError {
        BpfError::new(what, e.raw_os_error().unwrap_or(libc::EIO))
    }

    /// The last errno, for calls that return NULL and set errno.
    fn last(what: impl Into<String>) -> BpfError {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        BpfError::new(what, errno)
    }
}

impl std::fmt::Display for BpfError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {}",
            self.what,
            std::io::Error::from_raw_os_error(self.errno)
        )
    }
}

impl std::error::Error for BpfError {}

fn cstring(s: &str) -> CString {
    // Names come from our own code and ELF files; an interior NUL cannot name anything.
    CString::new(s.replace('\0', "")).unwrap_or_default()
}

/// Route libbpf's own messages through `log`, so `-v`/`RUST_LOG` show them and they never
/// clutter a normal run.
pub fn route_libbpf_logs() {
    extern "C" {
        fn vsnprintf(
            buf: *mut c_char,
            size: usize,
            fmt: *const c_char,
            ap: *mut sys::__va_list_tag,
        ) -> c_int;
    }
    unsafe extern "C" fn print(
        level: sys::libbpf_print_level,
        fmt: *const c_char,
        ap: *mut sys::__va_list_tag,
    ) -> c_int {
        // libbpf's info and debug messages (one per CO-RE relocation, map and program: hundreds
        // per load) are formatted only when they would be shown: formatting each into the
        // buffer below cost a recording a few ms of its start. Warnings always are: the
        // verifier's log comes as one.
        let wanted = match level {
            sys::LIBBPF_WARN => log::Level::Debug,
            _ => log::Level::Trace,
        };
        if level != sys::LIBBPF_WARN && !log::log_enabled!(target: "libbpf", wanted) {
            return 0;
        }
        // Large enough for a verifier log, which libbpf prints as one message.
        let mut buf = vec![0 as c_char; 256 * 1024];
        // SAFETY: buf is writable for its length; fmt and ap come from libbpf as a pair.
        let n = unsafe { vsnprintf(buf.as_mut_ptr(), buf.len(), fmt, ap) };
        if n < 0 {
            return n;
        }
        // SAFETY: vsnprintf NUL-terminates within the buffer.
        let msg = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy();
        let msg = msg.trim_end();
        if let Some(log) = verifier_log_of(msg) {
            LAST_VERIFIER_LOG.with(|last| *last.borrow_mut() = Some(log));
        }
        log::log!(target: "libbpf", wanted, "{msg}");
        n
    }
    // SAFETY: `print` has the signature libbpf expects and lives for the whole program.
    unsafe {
        sys::libbpf_set_print(Some(print));
    }
}

/// A BPF object file opened from memory, not yet loaded into the kernel.
pub struct OpenObject {
    ptr: NonNull<sys::bpf_object>,
    name: String,
    /// Maps libbpf was given as the model of an array of maps' inner maps
    /// ([`OpenObject::set_inner_array`]): it uses their fds at load without owning them.
    inner_models: Vec<OwnedFd>,
}

impl OpenObject {
    /// Open the ELF image `bytes` (an object embedded with `include_bytes!`) under `name`.
    pub fn open(name: &str, bytes: &'static [u8]) -> Result<OpenObject, BpfError> {
        OpenObject::open_with(name, bytes, None)
    }

    /// Open `bytes` as [`OpenObject::open`] does, its CO-RE relocations resolved against
    /// `core` rather than the kernel's whole BTF (libbpf copies the path; the file must be
    /// there until the load).
    pub fn open_with(
        name: &str,
        bytes: &'static [u8],
        core: Option<&CustomBtf>,
    ) -> Result<OpenObject, BpfError> {
        let cname = cstring(name);
        let opts = sys::bpf_object_open_opts {
            sz: std::mem::size_of::<sys::bpf_object_open_opts>() as sys::size_t,
            object_name: cname.as_ptr(),
            btf_custom_path: core.map_or(std::ptr::null(), |c| c.path().as_ptr()),
            ..Default::default()
        };
        // SAFETY: bytes outlives the object ('static); opts is fully initialised with sz set.
        let ptr = unsafe {
            sys::bpf_object__open_mem(
                bytes.as_ptr() as *const c_void,
                bytes.len() as sys::size_t,
                &opts,
            )
        };
        let ptr =
            NonNull::new(ptr).ok_or_else(|| BpfError::last(format!("open BPF object {name}")))?;
        Ok(OpenObject {
            inner_models: Vec::new(),
            ptr,
            name: name.to_string(),
        })
    }

    fn map_ptr(&self, map: &str) -> Result<NonNull<sys::bpf_map>, BpfError> {
        find_map(self.ptr, &self.name, map)
    }

    /// Set the number of entries of `map` (for a ring buffer: its size in bytes).
    pub fn set_max_entries(&mut self, map: &str, entries: u32) -> Result<(), BpfError> {
        let m = self.map_ptr(map)?;
        // SAFETY: m belongs to this open object.
        let rc = unsafe { sys::bpf_map__set_max_entries(m.as_ptr(), entries) };
        check(rc, || format!("size map {map} to {entries}"))
    }

    /// Make the array of maps `map` hold mmapable arrays of `entries` values of `value_size`
    /// bytes: the verifier holds every inner map to the model given here. (The model libbpf
    /// makes from the object's definition cannot be resized: libbpf 1.6 crashes on it.)
    pub fn set_inner_array(
        &mut self,
        map: &str,
        value_size: u32,
        entries: u32,
    ) -> Result<(), BpfError> {
        let m = self.map_ptr(map)?;
        let model = mmapable_array(value_size, entries, || format!("make the model of {map}"))?;
        // SAFETY: m belongs to this open object; the fd stays open until the load has used it
        // (self.inner_models).
        let rc = unsafe { sys::bpf_map__set_inner_map_fd(m.as_ptr(), model.as_raw_fd()) };
        check(rc, || format!("set the model of the maps in {map}"))?;
        self.inner_models.push(model);
        Ok(())
    }

    /// Set the read-only data of section `section` (a `.rodata.NAME` map of its own) to
    /// `bytes`, its exact size; `Ok(false)` when the object has no such section.
    pub fn set_rodata(&mut self, section: &str, bytes: &[u8]) -> Result<bool, BpfError> {
        let Ok(m) = self.map_ptr(section) else {
            return Ok(false);
        };
        // SAFETY: m belongs to this open object; libbpf copies `bytes` and checks their size
        // against the section's.
        let rc = unsafe {
            sys::bpf_map__set_initial_value(
                m.as_ptr(),
                bytes.as_ptr() as *const c_void,
                bytes.len() as sys::size_t,
            )
        };
        check(rc, || format!("set {section} of {}", self.name)).map(|()| true)
    }

    /// Create map `map` in the kernel as this object defines it (type, key and value sizes,
    /// entries, flags), before the object loads, for objects to share ([`Self::reuse_map`]).
    pub fn create_map(&self, map: &str) -> Result<SharedMap, BpfError> {
        let m = self.map_ptr(map)?.as_ptr();
        // SAFETY: m belongs to this open object; these only read its definition.
        let spec = unsafe {
            MapSpec {
                map_type: sys::bpf_map__type(m),
                key_size: sys::bpf_map__key_size(m),
                value_size: sys::bpf_map__value_size(m),
                entries: sys::bpf_map__max_entries(m),
                flags: sys::bpf_map__map_flags(m),
            }
        };
        let fd = new_map(&cstring(map), spec, || {
            format!("create map {map} of {}", self.name)
        })?;
        Ok(SharedMap {
            name: map.to_string(),
            fd,
        })
    }

    /// Use `shared` for the map of its name instead of creating a new one.
    pub fn reuse_map(&mut self, shared: &SharedMap) -> Result<(), BpfError> {
        let m = self.map_ptr(&shared.name)?;
        // SAFETY: m belongs to this open object; the fd is live while `shared` is, and libbpf
        // dups it, so the map outlives `shared` for as long as this object holds it.
        let rc = unsafe { sys::bpf_map__reuse_fd(m.as_ptr(), shared.fd.as_raw_fd()) };
        check(rc, || {
            format!("share map {} with {}", shared.name, self.name)
        })
    }

    /// Load program `prog` as a classic (perf-event based) uprobe instead of the uprobe_multi
    /// its section names, for kernels without uprobe_multi links (before 6.6).
    pub fn use_classic_uprobe(&mut self, prog: &str) -> Result<(), BpfError> {
        let p = self.program(prog)?;
        // SAFETY: p is a program of this open object; 0 is the attach type of a plain uprobe.
        let rc = unsafe { sys::bpf_program__set_expected_attach_type(p.as_ptr(), 0) };
        check(rc, || format!("make {prog} a classic uprobe"))
    }

    /// Program `prog` of this open object.
    fn program(&self, prog: &str) -> Result<NonNull<sys::bpf_program>, BpfError> {
        let cname = cstring(prog);
        // SAFETY: live object, NUL-terminated name.
        let p = unsafe { sys::bpf_object__find_program_by_name(self.ptr.as_ptr(), cname.as_ptr()) };
        NonNull::new(p).ok_or_else(|| {
            BpfError::new(
                format!("find program {prog} in {}", self.name),
                libc::ENOENT,
            )
        })
    }

    /// Leave program `prog` out of the load (it is neither verified nor loaded), or put it
    /// back in.
    pub fn set_autoload(&mut self, prog: &str, load: bool) -> Result<(), BpfError> {
        let p = self.program(prog)?;
        // SAFETY: p is a program of this open, not yet loaded object.
        let rc = unsafe { sys::bpf_program__set_autoload(p.as_ptr(), load) };
        check(rc, || format!("set autoload of {prog}"))
    }

    /// Create the object's maps now, before its programs load ([`Self::load`] then loads
    /// only them), and share `maps` with an object that loads meanwhile on another thread: the
    /// walker of sampled stacks shares the allocator's `call_state` without waiting for the
    /// allocator's verification (record/walker.rs).
    pub fn prepare_and_share(&mut self, maps: &[&str]) -> Result<Vec<SharedMap>, BpfError> {
        // SAFETY: self.ptr is a live, not yet prepared object.
        let rc = unsafe { sys::bpf_object__prepare(self.ptr.as_ptr()) };
        check(rc, || {
            format!("create the maps of BPF object {}", self.name)
        })?;
        maps.iter()
            .map(|m| share(self.ptr, &self.name, m))
            .collect()
    }

    /// Load every program and create every map.
    pub fn load(mut self) -> Result<LoadedObject, BpfError> {
        LAST_VERIFIER_LOG.with(|last| last.borrow_mut().take());
        // SAFETY: self.ptr is a live, not yet loaded object.
        let rc = unsafe { sys::bpf_object__load(self.ptr.as_ptr()) };
        let name = self.name.clone();
        drop(std::mem::take(&mut self.inner_models));
        // Ownership moves to LoadedObject whatever happens; on failure its Drop closes it.
        let loaded = LoadedObject {
            ptr: self.ptr,
            name: self.name.clone(),
        };
        std::mem::forget(self);
        check(rc, || format!("load BPF object {name}")).map_err(|mut e| {
            e.verifier = LAST_VERIFIER_LOG.with(|last| last.borrow_mut().take());
            e
        })?;
        Ok(loaded)
    }
}

// SAFETY: an OpenObject is its object's only owner, so one thread at a time uses it; libbpf
// keeps no per-thread state for an object, and its global state is the print callback (which
// keeps each thread's verifier log apart, LAST_VERIFIER_LOG) and a cache of kernel feature
// probes that libbpf writes racily on purpose (every writer stores the same answer). Objects
// are loaded on threads of their own (record::load).
unsafe impl Send for OpenObject {}

impl Drop for OpenObject {
    fn drop(&mut self) {
        // SAFETY: we own the object and nothing borrows it past our lifetime.
        unsafe { sys::bpf_object__close(self.ptr.as_ptr()) }
    }
}

/// A map created before the objects that share it load ([`OpenObject::create_map`]); each
/// object that reuses it holds its own copy of the fd.
pub struct SharedMap {
    name: String,
    fd: OwnedFd,
}

impl AsFd for SharedMap {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl SharedMap {
    /// The map's name, its definition's.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The same map through a descriptor of its own, for an object loaded on another thread.
    pub fn try_clone(&self) -> Result<SharedMap, BpfError> {
        Ok(SharedMap {
            name: self.name.clone(),
            fd: (self.fd.try_clone())
                .map_err(|e| BpfError::io(format!("share map {}", self.name), e))?,
        })
    }
}

/// A BPF object whose programs and maps are in the kernel. Dropping it unloads them (links
/// attached from it must be dropped first; their lifetime parameter enforces that).
pub struct LoadedObject {
    ptr: NonNull<sys::bpf_object>,
    name: String,
}

impl LoadedObject {
    /// The fd of map `map`, valid while this object lives.
    pub fn map_fd(&self, map: &str) -> Result<c_int, BpfError> {
        fd_of(self.ptr, &self.name, map)
    }

    /// Map `map` of this loaded object, for an object loaded later to use instead of its own
    /// ([`OpenObject::reuse_map`]): its own copy of the fd.
    pub fn share_map(&self, map: &str) -> Result<SharedMap, BpfError> {
        share(self.ptr, &self.name, map)
    }

    /// Every map of this object's `.maps` (not its `.rodata` and other data sections), for a
    /// second load of the same object to work on instead of its own ([`OpenObject::reuse_map`]).
    pub fn share_maps(&self) -> Result<Vec<SharedMap>, BpfError> {
        let mut names = Vec::new();
        let mut m: *mut sys::bpf_map = std::ptr::null_mut();
        loop {
            // SAFETY: a live, loaded object; `m` is null or a map of it from the last call.
            m = unsafe { sys::bpf_object__next_map(self.ptr.as_ptr(), m) };
            let Some(map) = NonNull::new(m) else {
                break;
            };
            // SAFETY: `map` is a map of this object; its name lives as long as the object.
            let (internal, name) = unsafe {
                (
                    sys::bpf_map__is_internal(map.as_ptr()),
                    CStr::from_ptr(sys::bpf_map__name(map.as_ptr())),
                )
            };
            if !internal {
                names.push(name.to_string_lossy().into_owned());
            }
        }
        names.iter().map(|n| self.share_map(n)).collect()
    }

    /// Put program `prog` of `from` at `index` of the program array `map` of this object, so
    /// that this object's programs tail-call it there.
    pub fn set_tail_call(
        &self,
        map: &str,
        index: u32,
        from: &LoadedObject,
        prog: &str,
    ) -> Result<(), BpfError> {
        let p = from.program(prog)?;
        // SAFETY: p is a program of the live object `from`; a program left out has no fd.
        let prog_fd = unsafe { sys::bpf_program__fd(p.as_ptr()) };
        if prog_fd < 0 {
            return Err(BpfError::new(
                format!("program {prog} is not loaded"),
                prog_fd,
            ));
        }
        let map_fd = self.map_fd(map)?;
        let value = prog_fd as u32;
        // SAFETY: a program array's key and value are u32 (an index and a program fd).
        let rc = unsafe {
            sys::bpf_map_update_elem(
                map_fd,
                &index as *const u32 as *const c_void,
                &value as *const u32 as *const c_void,
                0,
            )
        };
        check(rc, || format!("put {prog} in {map} of {}", self.name))
    }

    /// The key and value sizes of map `map`, bytes.
    pub(super) fn map_sizes(&self, map: &str) -> Result<(usize, usize), BpfError> {
        let m = self.map(map)?;
        // SAFETY: m is a map of this loaded object.
        let sizes = unsafe {
            (
                sys::bpf_map__key_size(m.as_ptr()),
                sys::bpf_map__value_size(m.as_ptr()),
            )
        };
        Ok((sizes.0 as usize, sizes.1 as usize))
    }

    fn map(&self, map: &str) -> Result<NonNull<sys::bpf_map>, BpfError> {
        find_map(self.ptr, &self.name, map)
    }

    /// How many times the kernel skipped each of this object's loaded programs, by name (its
    /// `recursion_misses`, Linux 5.12): a tracing program is not run on a CPU where a run of it
    /// is already under way, as when that run was preempted. Programs whose count cannot be
    /// read are left out.
    pub fn skipped_runs(&self) -> Vec<(String, u64)> {
        self.program_infos(|info| info.recursion_misses)
    }

    /// How many instructions the verifier went through for each loaded program, by name (its
    /// `verified_insns`, Linux 5.16; 0 before): what a load's time goes to.
    pub fn verified_instructions(&self) -> Vec<(String, u32)> {
        self.program_infos(|info| info.verified_insns)
    }

    /// `field` of the kernel's information on each of this object's loaded programs, by name;
    /// programs whose information cannot be read are left out.
    fn program_infos<T>(&self, field: impl Fn(&sys::bpf_prog_info) -> T) -> Vec<(String, T)> {
        let mut infos = Vec::new();
        let mut p = std::ptr::null_mut();
        loop {
            // SAFETY: live object; p is null or one of its programs, as the iteration requires.
            p = unsafe { sys::bpf_object__next_program(self.ptr.as_ptr(), p) };
            if p.is_null() {
                return infos;
            }
            // SAFETY: p is a program of this object; a program left out of the load has no fd.
            let fd = unsafe { sys::bpf_program__fd(p) };
            if fd < 0 {
                continue;
            }
            let mut info = sys::bpf_prog_info::default();
            let mut len = std::mem::size_of::<sys::bpf_prog_info>() as u32;
            // SAFETY: info is writable for len bytes; the kernel fills what it knows. p's name
            // is a NUL-terminated string libbpf owns for the object's life.
            unsafe {
                if sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) == 0 {
                    let name = CStr::from_ptr(sys::bpf_program__name(p));
                    infos.push((name.to_string_lossy().into_owned(), field(&info)));
                }
            }
        }
    }

    /// Whether program `prog` exists and was loaded (not left out with `set_autoload`).
    pub fn has_loaded(&self, prog: &str) -> bool {
        // SAFETY: the program belongs to this loaded object; a program left out has no fd.
        self.program(prog)
            .is_ok_and(|p| unsafe { sys::bpf_program__fd(p.as_ptr()) } >= 0)
    }

    fn program(&self, prog: &str) -> Result<NonNull<sys::bpf_program>, BpfError> {
        let cname = cstring(prog);
        // SAFETY: live object, NUL-terminated name.
        let p = unsafe { sys::bpf_object__find_program_by_name(self.ptr.as_ptr(), cname.as_ptr()) };
        NonNull::new(p).ok_or_else(|| {
            BpfError::new(
                format!("find program {prog} in {}", self.name),
                libc::ENOENT,
            )
        })
    }

    /// Attach `prog` where its section says (tracepoints, tp_btf).
    pub fn attach(&self, prog: &str) -> Result<Link<'_>, BpfError> {
        let p = self.program(prog)?;
        // SAFETY: p is a loaded program of this object.
        let link = unsafe { sys::bpf_program__attach(p.as_ptr()) };
        Link::from_raw(link, || format!("attach {prog}"))
    }

    /// Attach `prog` as a uprobe (or uretprobe) at `offset` bytes into the file `path`, for
    /// every process (`pid` -1) or one; the program reads `cookie` with bpf_get_attach_cookie.
    pub fn attach_uprobe(
        &self,
        prog: &str,
        retprobe: bool,
        pid: i32,
        path: &str,
        offset: u64,
        cookie: u64,
    ) -> Result<Link<'_>, BpfError> {
        let p = self.program(prog)?;
        let cpath = cstring(path);
        let opts = sys::bpf_uprobe_opts {
            sz: std::mem::size_of::<sys::bpf_uprobe_opts>() as sys::size_t,
            retprobe,
            bpf_cookie: cookie,
            ..Default::default()
        };
        // SAFETY: p is loaded; path is NUL-terminated; opts is initialised with sz set.
        let link = unsafe {
            sys::bpf_program__attach_uprobe_opts(
                p.as_ptr(),
                pid,
                cpath.as_ptr(),
                offset as sys::size_t,
                &opts,
            )
        };
        Link::from_raw(link, || {
            format!("attach {prog} to {path} at offset {offset:#x}")
        })
    }
}

impl LoadedObject {
    /// Attach `prog` (an uprobe.multi program) at every `(offset, cookie)` of the file `path` at
    /// once, for every process (`pid` -1) or one: one link, one grace period to detach.
    pub fn attach_uprobe_multi(
        &self,
        prog: &str,
        retprobe: bool,
        pid: i32,
        path: &str,
        sites: &[(u64, u64)],
    ) -> Result<Link<'_>, BpfError> {
        let p = self.program(prog)?;
        let cpath = cstring(path);
        let offsets: Vec<std::os::raw::c_ulong> = sites.iter().map(|s| s.0 as _).collect();
        let cookies: Vec<u64> = sites.iter().map(|s| s.1).collect();
        let opts = sys::bpf_uprobe_multi_opts {
            sz: std::mem::size_of::<sys::bpf_uprobe_multi_opts>() as sys::size_t,
            offsets: offsets.as_ptr(),
            cookies: cookies.as_ptr(),
            cnt: sites.len() as sys::size_t,
            retprobe,
            ..Default::default()
        };
        // SAFETY: p is loaded; path is NUL-terminated; offsets and cookies hold cnt elements
        // and outlive the call (libbpf copies them into the kernel request).
        let link = unsafe {
            sys::bpf_program__attach_uprobe_multi(
                p.as_ptr(),
                pid,
                cpath.as_ptr(),
                std::ptr::null(),
                &opts,
            )
        };
        Link::from_raw(link, || {
            format!("attach {prog} to {} sites of {path}", sites.len())
        })
    }
}

// SAFETY: as for OpenObject: the sole owner, moved back from the thread that loaded it.
unsafe impl Send for LoadedObject {}

impl Drop for LoadedObject {
    fn drop(&mut self) {
        // SAFETY: we own the object; links borrowing it are gone (lifetime-checked).
        unsafe { sys::bpf_object__close(self.ptr.as_ptr()) }
    }
}

/// An attached program. Dropping it detaches.
#[must_use = "dropping a Link detaches the program"]
pub struct Link<'obj> {
    ptr: NonNull<sys::bpf_link>,
    _obj: PhantomData<&'obj LoadedObject>,
}

impl<'obj> Link<'obj> {
    fn from_raw(
        ptr: *mut sys::bpf_link,
        what: impl FnOnce() -> String,
    ) -> Result<Link<'obj>, BpfError> {
        // libbpf 1.x returns NULL and sets errno on failure.
        match NonNull::new(ptr) {
            Some(ptr) => Ok(Link {
                ptr,
                _obj: PhantomData,
            }),
            None => Err(BpfError::last(what())),
        }
    }
}

impl Drop for Link<'_> {
    fn drop(&mut self) {
        // SAFETY: we own the link.
        unsafe {
            sys::bpf_link__destroy(self.ptr.as_ptr());
        }
    }
}

/// Map `map` of the object `obj` (named `name`), open or loaded.
fn find_map(
    obj: NonNull<sys::bpf_object>,
    name: &str,
    map: &str,
) -> Result<NonNull<sys::bpf_map>, BpfError> {
    let cname = cstring(map);
    // SAFETY: obj is a live object (its owner's borrow); the name is NUL-terminated.
    let m = unsafe { sys::bpf_object__find_map_by_name(obj.as_ptr(), cname.as_ptr()) };
    NonNull::new(m).ok_or_else(|| BpfError::new(format!("find map {map} in {name}"), libc::ENOENT))
}

/// The fd of map `map` of the object `obj` (named `name`), whose maps exist, valid while the
/// object lives.
fn fd_of(obj: NonNull<sys::bpf_object>, name: &str, map: &str) -> Result<c_int, BpfError> {
    let m = find_map(obj, name, map)?;
    // SAFETY: m is a map of the live object obj.
    let fd = unsafe { sys::bpf_map__fd(m.as_ptr()) };
    check(fd, || format!("map {map} of {name} has no fd"))?;
    Ok(fd)
}

/// Map `map` of the object `obj` (named `name`), whose maps exist, through a descriptor of its
/// own: for another object to use instead of its own ([`OpenObject::reuse_map`]).
fn share(obj: NonNull<sys::bpf_object>, name: &str, map: &str) -> Result<SharedMap, BpfError> {
    let fd = fd_of(obj, name, map)?;
    // SAFETY: fd is the live map fd the object owns; it is only duplicated here.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) }
        .try_clone_to_owned()
        .map_err(|e| BpfError::io(format!("share map {map} of {name}"), e))?;
    Ok(SharedMap {
        name: map.to_string(),
        fd,
    })
}

/// What a new map is ([`new_map`]).
pub(super) struct MapSpec {
    pub map_type: sys::bpf_map_type,
    pub key_size: u32,
    pub value_size: u32,
    pub entries: u32,
    pub flags: u32,
}

/// A new BPF map named `name`, as `spec` says, owned; `what` failed otherwise.
pub(super) fn new_map(
    name: &CStr,
    spec: MapSpec,
    what: impl FnOnce() -> String,
) -> Result<OwnedFd, BpfError> {
    let opts = sys::bpf_map_create_opts {
        sz: std::mem::size_of::<sys::bpf_map_create_opts>() as sys::size_t,
        map_flags: spec.flags,
        ..Default::default()
    };
    // SAFETY: the opts are zeroed but for sz and the flags; the name is NUL-terminated and
    // outlives the call.
    let fd = unsafe {
        sys::bpf_map_create(
            spec.map_type,
            name.as_ptr(),
            spec.key_size,
            spec.value_size,
            spec.entries,
            &opts,
        )
    };
    if fd < 0 {
        return Err(BpfError::last(what()));
    }
    // SAFETY: bpf_map_create returned a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A new mmapable array map of `entries` values of `value_size` bytes (u32 keys), for the
/// arrays of maps that hold such arrays.
pub(super) fn mmapable_array(
    value_size: u32,
    entries: u32,
    what: impl FnOnce() -> String,
) -> Result<OwnedFd, BpfError> {
    let spec = MapSpec {
        map_type: sys::BPF_MAP_TYPE_ARRAY,
        key_size: 4,
        value_size,
        entries,
        flags: sys::BPF_F_MMAPABLE,
    };
    new_map(c"memtrack_inner", spec, what)
}

pub(super) fn check(rc: c_int, what: impl FnOnce() -> String) -> Result<(), BpfError> {
    if rc < 0 {
        Err(BpfError::new(what(), rc))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two logs as libbpf printed them when Debian's kernels refused main's objects
    /// (../shared/notes/kernel-matrix.md): the verdict is found under the instruction trace.
    #[test]
    fn a_verifier_log_gives_its_verdict() {
        let msg = "prog 'all_mappings_scanned': -- BEGIN PROG LOAD LOG --\n\
                   0: R1=ctx() R10=fp0\n\
                   ; if (!(vma->vm_flags & VM_EXEC) || !vma->vm_file) @ discover.bpf.c:71\n\
                   41: (79) r1 = *(u64 *)(r7 +160)\n\
                   R7 pointer arithmetic on trusted_ptr_or_null_ prohibited, null-check it first\n\
                   processed 52 insns (limit 1000000) max_states_per_insn 0 total_states 3\n\
                   -- END PROG LOAD LOG --";
        let log = verifier_log_of(msg).expect("a verifier log");
        assert_eq!(log.program, "all_mappings_scanned");
        assert_eq!(
            log.reason(),
            "R7 pointer arithmetic on trusted_ptr_or_null_ prohibited, null-check it first"
        );
        let msg = "prog 'rss_fork': -- BEGIN PROG LOAD LOG --\n\
                   91: (7b) *(u64 *)(r10 -128) = r2      ; R2=scalar(id=11) R10=fp0\n\
                   92: <invalid CO-RE relocation>\n\
                   failed to resolve CO-RE relocation <byte_off> [384] struct mm_struct.rss_stat[0]\n\
                   processed 94 insns (limit 1000000) max_states_per_insn 0 total_states 5\n\
                   -- END PROG LOAD LOG --";
        let log = verifier_log_of(msg).expect("a verifier log");
        assert_eq!(
            log.reason(),
            "failed to resolve CO-RE relocation <byte_off> [384] struct mm_struct.rss_stat[0]"
        );
        assert!(verifier_log_of("prog 'x': BPF program load failed: -EACCES").is_none());
    }
}
