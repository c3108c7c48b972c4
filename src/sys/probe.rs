//! Cheap questions to the kernel about what it lets us do, for `preflight` (which both
//! `doctor` and `record` run): create a map of a kind, load a two-instruction program of a
//! kind and attach it where memtrack's real programs go. Every program here returns 0 and
//! touches nothing; each fd is closed before the probe returns, which detaches what it attached.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::raw::{c_int, c_ulong};
use std::ptr::NonNull;

use libbpf_sys as sys;

use crate::sys::bpf::{new_map, BpfError, MapSpec};

/// `r0 = 0; exit`, as raw `struct bpf_insn`s (8 bytes each, little-endian on our targets):
/// BPF_ALU64|BPF_MOV|BPF_K (0xb7) to r0 with imm 0, then BPF_JMP|BPF_EXIT (0x95).
const RETURN_ZERO: [u64; 2] = [0xb7, 0x95];

/// The error of a libbpf call that returns a negative errno (or -1 and errno).
fn last_error(what: &str, rc: c_int) -> BpfError {
    let errno = if rc == -1 {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(1)
    } else {
        -rc
    };
    BpfError {
        what: what.to_string(),
        errno,
        verifier: None,
    }
}

/// Take ownership of `fd` if it is one, so it is closed when dropped.
fn own(fd: c_int, what: &str) -> Result<OwnedFd, BpfError> {
    if fd < 0 {
        return Err(last_error(what, fd));
    }
    // SAFETY: libbpf returned a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Create (and close again) a BPF map of `map_type` with `max_entries` entries.
fn create_map(
    map_type: sys::bpf_map_type,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    what: &str,
) -> Result<(), BpfError> {
    let spec = MapSpec {
        map_type,
        key_size,
        value_size,
        entries: max_entries,
        flags: 0,
    };
    new_map(c"memtrack_probe", spec, || what.to_string()).map(drop)
}

/// Whether the bpf() syscall works for us at all: create a one-entry array map.
pub fn bpf_syscall() -> Result<(), BpfError> {
    create_map(sys::BPF_MAP_TYPE_ARRAY, 4, 4, 1, "bpf()")
}

/// Whether BPF ring buffers exist (Linux 5.8): create the smallest one.
pub fn ring_buffer(page_size: u32) -> Result<(), BpfError> {
    create_map(
        sys::BPF_MAP_TYPE_RINGBUF,
        0,
        0,
        page_size,
        "BPF_MAP_TYPE_RINGBUF",
    )
}

/// Load the two-instruction program as `prog_type` with the given attach type and target.
fn load(
    prog_type: sys::bpf_prog_type,
    attach_type: sys::bpf_attach_type,
    attach_btf_id: u32,
    what: &str,
) -> Result<OwnedFd, BpfError> {
    let name = CString::new("memtrack_probe").unwrap_or_default();
    let license = CString::new("GPL").unwrap_or_default();
    let mut opts = sys::bpf_prog_load_opts {
        sz: std::mem::size_of::<sys::bpf_prog_load_opts>() as sys::size_t,
        expected_attach_type: attach_type,
        attach_btf_id,
        ..Default::default()
    };
    // SAFETY: RETURN_ZERO is two valid 8-byte bpf_insn records (bpf_insn is repr(C), 8 bytes,
    // align 4 < align of u64); the strings are NUL-terminated; opts has sz set.
    let fd = unsafe {
        sys::bpf_prog_load(
            prog_type,
            name.as_ptr(),
            license.as_ptr(),
            RETURN_ZERO.as_ptr() as *const sys::bpf_insn,
            RETURN_ZERO.len() as sys::size_t,
            &mut opts,
        )
    };
    own(fd, what)
}

/// The kernel's own BTF (the process's one parse, `kernel_btf`), for the probes that name a
/// kernel function or tracepoint.
pub struct VmlinuxBtf {
    ptr: NonNull<sys::btf>,
    /// The ids found (or not) by name and kind: libbpf searches every type once per name, some
    /// 0.15-0.4 ms, and preflight asks for most names twice (`rmap::choose`).
    found: RefCell<HashMap<(String, u32), Option<u32>>>,
}

impl VmlinuxBtf {
    /// /sys/kernel/btf/vmlinux (or wherever libbpf finds the running kernel's BTF), parsed on
    /// the process's first call.
    pub fn load() -> Result<VmlinuxBtf, BpfError> {
        crate::sys::kernel_btf::kernel()
            .map(|ptr| VmlinuxBtf {
                ptr,
                found: RefCell::default(),
            })
            .map_err(|errno| BpfError {
                what: "the kernel's BTF".to_string(),
                errno,
                verifier: None,
            })
    }

    /// Its bytes, as read (libbpf keeps them while the BTF is unchanged).
    pub fn raw_bytes(&self) -> &[u8] {
        let mut size = 0u32;
        // SAFETY: self.ptr is a live btf; the data lives as long as it does, which the
        // returned borrow cannot outlive.
        let data = unsafe { sys::btf__raw_data(self.ptr.as_ptr(), &mut size) };
        if data.is_null() {
            return &[];
        }
        // SAFETY: libbpf says `data` holds `size` bytes.
        unsafe { std::slice::from_raw_parts(data as *const u8, size as usize) }
    }

    fn find(&self, name: &str, kind: u32) -> Result<u32, BpfError> {
        let known = self.found.borrow().get(&(name.to_string(), kind)).copied();
        let id = known.unwrap_or_else(|| {
            let cname = CString::new(name).unwrap_or_default();
            // SAFETY: self.ptr is a live btf; the name is NUL-terminated.
            let id =
                unsafe { sys::btf__find_by_name_kind(self.ptr.as_ptr(), cname.as_ptr(), kind) };
            let id = u32::try_from(id).ok().filter(|&id| id > 0);
            self.found.borrow_mut().insert((name.to_string(), kind), id);
            id
        });
        let Some(id) = id else {
            // errno 0: not a refusal, the kernel simply has no such thing.
            return Err(BpfError {
                what: format!("{name} is not in the kernel's BTF"),
                errno: 0,
                verifier: None,
            });
        };
        Ok(id)
    }

    /// Find every one of `names` of BTF kind `kind` in one pass over the kernel's types, for
    /// the next [`has`](Self::has) and `find`s of them: libbpf's search is a pass per name, and
    /// functions come late in the BTF (0.4 ms each on 6.18, 3 ms for the rmap hooks' seven).
    pub fn look_up(&self, names: &[&str], kind: u32) {
        let btf = self.ptr.as_ptr();
        let mut found: HashMap<&[u8], u32> = HashMap::with_capacity(names.len());
        let firsts: Vec<u8> = names.iter().filter_map(|n| n.bytes().next()).collect();
        // SAFETY: btf is live; type ids run from 1 to type_cnt - 1 (split views included), and
        // libbpf returns NULL for a bad id or name offset.
        for id in 1..unsafe { sys::btf__type_cnt(btf) } {
            let Some(t) = (unsafe { sys::btf__type_by_id(btf, id).as_ref() }) else {
                continue;
            };
            if (t.info >> 24) & 0x1f != kind {
                continue;
            }
            let name = unsafe { sys::btf__name_by_offset(btf, t.name_off) };
            // Most names differ in their first byte: only those that do not are measured.
            // SAFETY: a non-NULL name has at least its NUL.
            if name.is_null() || !firsts.contains(&(unsafe { *name } as u8)) {
                continue;
            }
            // SAFETY: libbpf's strings are NUL-terminated and live as long as btf.
            let name = unsafe { CStr::from_ptr(name) }.to_bytes();
            if let Some(wanted) = names.iter().find(|n| n.as_bytes() == name) {
                found.entry(wanted.as_bytes()).or_insert(id);
            }
        }
        let mut cache = self.found.borrow_mut();
        for name in names {
            let id = found.get(name.as_bytes()).copied();
            cache.insert((name.to_string(), kind), id);
        }
    }

    /// Whether the kernel's BTF has the type `name` of BTF kind `kind` (a struct, a kfunc...).
    pub fn has(&self, name: &str, kind: u32) -> bool {
        self.find(name, kind).is_ok()
    }

    /// The BTF kind of member `member` of struct `strukt` (typedefs and qualifiers seen
    /// through: `seqcount_t` is a struct, `atomic_long_t` a struct, `int` an int), or None
    /// when the struct or the member does not exist. Anonymous struct and union members are
    /// searched too, as CO-RE does.
    pub fn member_kind(&self, strukt: &str, member: &str) -> Option<u32> {
        let id = self.find(strukt, sys::BTF_KIND_STRUCT).ok()?;
        self.member_kind_in(id, member, 0)
    }

    fn member_kind_in(&self, id: u32, member: &str, nesting: u32) -> Option<u32> {
        let btf = self.ptr.as_ptr();
        // SAFETY: btf is live and id one of its type ids; libbpf returns NULL for a bad id.
        let t = unsafe { sys::btf__type_by_id(btf, id).as_ref()? };
        let kind = (t.info >> 24) & 0x1f;
        if kind != sys::BTF_KIND_STRUCT && kind != sys::BTF_KIND_UNION {
            return None;
        }
        let vlen = (t.info & 0xffff) as usize;
        // SAFETY: a struct or union's btf_type is followed by vlen btf_member records.
        let members = unsafe {
            std::slice::from_raw_parts(
                (t as *const sys::btf_type).add(1) as *const sys::btf_member,
                vlen,
            )
        };
        for m in members {
            // SAFETY: name_off is an offset into btf's string section.
            let name = unsafe { CStr::from_ptr(sys::btf__name_by_offset(btf, m.name_off)) };
            if name.to_bytes() == member.as_bytes() {
                return Some(self.resolved_kind(m.type_));
            }
            if name.to_bytes().is_empty() && nesting < 4 {
                if let Some(k) = self.member_kind_in(self.resolved_id(m.type_), member, nesting + 1)
                {
                    return Some(k);
                }
            }
        }
        None
    }

    /// `id` with typedefs and qualifiers seen through.
    fn resolved_id(&self, id: u32) -> u32 {
        // SAFETY: btf is live; libbpf returns a negative error for a bad id.
        let resolved = unsafe { sys::btf__resolve_type(self.ptr.as_ptr(), id) };
        if resolved < 0 {
            id
        } else {
            resolved as u32
        }
    }

    fn resolved_kind(&self, id: u32) -> u32 {
        // SAFETY: btf is live and the id resolved within it.
        unsafe { sys::btf__type_by_id(self.ptr.as_ptr(), self.resolved_id(id)).as_ref() }
            .map_or(0, |t| (t.info >> 24) & 0x1f)
    }

    /// The number of parameters of the tracepoint `tracepoint`'s BTF prototype (tp_btf
    /// programs see them; the first, `void *__data`, is not counted).
    pub fn tracepoint_arity(&self, tracepoint: &str) -> Option<usize> {
        let btf = self.ptr.as_ptr();
        let id = self
            .find(&format!("btf_trace_{tracepoint}"), sys::BTF_KIND_TYPEDEF)
            .ok()?;
        // SAFETY: btf is live; typedef -> pointer -> func_proto, each checked.
        let ptr = unsafe { sys::btf__type_by_id(btf, id).as_ref()? };
        let proto = unsafe { sys::btf__type_by_id(btf, ptr.__bindgen_anon_1.type_).as_ref()? };
        let proto = unsafe { sys::btf__type_by_id(btf, proto.__bindgen_anon_1.type_).as_ref()? };
        if (proto.info >> 24) & 0x1f != sys::BTF_KIND_FUNC_PROTO {
            return None;
        }
        Some(((proto.info & 0xffff) as usize).saturating_sub(1))
    }

    /// Load a tp_btf program for the raw tracepoint `tracepoint`, and with `attach` attach it
    /// (then detach).
    pub fn tp_btf(&self, tracepoint: &str, attach: Attach) -> Result<(), BpfError> {
        let id = self.find(&format!("btf_trace_{tracepoint}"), sys::BTF_KIND_TYPEDEF)?;
        let what = format!("tp_btf/{tracepoint}");
        let prog = load(sys::BPF_PROG_TYPE_TRACING, sys::BPF_TRACE_RAW_TP, id, &what)?;
        attach.try_on(&prog, &what)
    }

    /// Load an fentry program on the kernel function `function`, and with `attach` attach it
    /// (then detach).
    pub fn fentry(&self, function: &str, attach: Attach) -> Result<(), BpfError> {
        let id = self.find(function, sys::BTF_KIND_FUNC)?;
        let what = format!("fentry/{function}");
        let prog = load(sys::BPF_PROG_TYPE_TRACING, sys::BPF_TRACE_FENTRY, id, &what)?;
        attach.try_on(&prog, &what)
    }
}

/// Whether a check of a tracing program attaches it after loading it. `doctor` attaches, to
/// show all that the kernel allows. `record` only loads, because it attaches its own programs
/// a moment later and each attach and detach of a probe costs it time: the tracepoint's
/// second attach after a detach waits for an RCU grace period (tracepoint_add_func's
/// tp_rcu_cond_sync, 5-17 ms of `record -- true` on 6.18), and an fentry's trampoline is made
/// and freed again. Loading already checks the target against the kernel's BTF and what the
/// kernel allows (a locked-down kernel refuses fentry at load).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attach {
    Yes,
    LoadOnly,
}

impl Attach {
    fn try_on(self, prog: &OwnedFd, what: &str) -> Result<(), BpfError> {
        match self {
            Attach::Yes => attach_tracing(prog, &format!("{what} attach")),
            Attach::LoadOnly => Ok(()),
        }
    }
}

/// Attach a loaded tracing program where its attach_btf_id says; the link closes on return.
fn attach_tracing(prog: &OwnedFd, what: &str) -> Result<(), BpfError> {
    use std::os::fd::AsRawFd;
    // SAFETY: prog is a live program fd; a NULL name means "the program's own target".
    let fd = unsafe { sys::bpf_raw_tracepoint_open(std::ptr::null(), prog.as_raw_fd()) };
    own(fd, what).map(drop)
}

/// Whether programs of type `prog_type` may call BPF helper `helper` on this kernel
/// (libbpf loads a program that calls it and reads the verifier's answer).
pub fn helper(prog_type: sys::bpf_prog_type, helper: sys::bpf_func_id) -> Result<bool, BpfError> {
    // SAFETY: no options (NULL is allowed); returns 1, 0 or a negative errno.
    let rc = unsafe { sys::libbpf_probe_bpf_helper(prog_type, helper, std::ptr::null()) };
    match rc {
        1 => Ok(true),
        0 => Ok(false),
        rc => Err(last_error("probe a BPF helper", rc)),
    }
}

/// Whether uprobe programs load (BPF_PROG_TYPE_KPROBE, which uprobes use).
pub fn uprobe_program() -> Result<(), BpfError> {
    load(sys::BPF_PROG_TYPE_KPROBE, 0, 0, "uprobe program").map(drop)
}

/// Attach a uprobe_multi link (Linux 6.6) at `offset` of the file `path`, for this process
/// only, and detach it again.
pub fn uprobe_multi(path: &str, offset: u64) -> Result<(), BpfError> {
    uprobe_multi_link(path, offset, std::process::id()).map(drop)
}

/// Whether this kernel has uprobe_multi links (Linux 6.6), asked without attaching anything, as
/// libbpf's `probe_uprobe_multi_link` does: a link on a directory is refused with EBADF only
/// by a kernel that took the request for a uprobe_multi one and looked at its path. Nothing is
/// attached, so nothing waits for a grace period to detach.
pub fn uprobe_multi_links() -> Result<(), BpfError> {
    match uprobe_multi_link("/", 0, 0) {
        Err(e) if e.errno == libc::EBADF => Ok(()),
        other => other.map(drop),
    }
}

/// A uprobe_multi link of the two-instruction program at `offset` of `path`, for process `pid`
/// (0: every process); closing the fd detaches it.
fn uprobe_multi_link(path: &str, offset: u64, pid: u32) -> Result<OwnedFd, BpfError> {
    use std::os::fd::AsRawFd;
    let prog = load(
        sys::BPF_PROG_TYPE_KPROBE,
        sys::BPF_TRACE_UPROBE_MULTI,
        0,
        "uprobe_multi program",
    )?;
    let cpath = CString::new(path).unwrap_or_default();
    let offsets: [c_ulong; 1] = [offset as c_ulong];
    let mut opts = sys::bpf_link_create_opts {
        sz: std::mem::size_of::<sys::bpf_link_create_opts>() as sys::size_t,
        ..Default::default()
    };
    opts.__bindgen_anon_1.uprobe_multi = sys::bpf_link_create_opts__bindgen_ty_1__bindgen_ty_3 {
        cnt: 1,
        path: cpath.as_ptr(),
        offsets: offsets.as_ptr(),
        pid,
        ..Default::default()
    };
    // SAFETY: prog is a live program fd; path and offsets outlive the call, cnt matches; the
    // union member set is the one BPF_TRACE_UPROBE_MULTI reads.
    let fd =
        unsafe { sys::bpf_link_create(prog.as_raw_fd(), 0, sys::BPF_TRACE_UPROBE_MULTI, &opts) };
    own(fd, &format!("uprobe_multi link on {path}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-pass look-up finds what libbpf's search per name finds, and remembers misses.
    #[test]
    fn look_up_finds_what_libbpf_finds() {
        let Ok(btf) = VmlinuxBtf::load() else {
            eprintln!("skipped: this kernel has no BTF to parse");
            return;
        };
        let names = [
            "do_exit",
            "vfs_read",
            "memtrack_no_such_function",
            "do_exit",
        ];
        let libbpf: Vec<Option<u32>> = names
            .iter()
            .map(|n| {
                let c = CString::new(*n).unwrap();
                // SAFETY: btf is live; the name is NUL-terminated.
                let id = unsafe {
                    sys::btf__find_by_name_kind(btf.ptr.as_ptr(), c.as_ptr(), sys::BTF_KIND_FUNC)
                };
                u32::try_from(id).ok().filter(|&id| id > 0)
            })
            .collect();
        assert!(libbpf[0].is_some() && libbpf[2].is_none(), "{libbpf:?}");
        btf.look_up(&names, sys::BTF_KIND_FUNC);
        for (name, id) in names.iter().zip(&libbpf) {
            let cached = btf
                .found
                .borrow()
                .get(&(name.to_string(), sys::BTF_KIND_FUNC))
                .copied();
            assert_eq!(cached, Some(*id), "{name}");
        }
        assert!(btf.has("vfs_read", sys::BTF_KIND_FUNC));
        assert!(!btf.has("memtrack_no_such_function", sys::BTF_KIND_FUNC));
    }
}
