//! Typed access to the maps of a loaded BPF object, through their fds: lookups, updates and
//! sums over CPUs ([`MapFd`]), an mmapped array's values ([`MappedArray`]), and an array of
//! such arrays filled as it is needed ([`ArrayChunks`]). Apart from
//! bpf.rs, which owns the objects, since it is most of what the recorder does with them once
//! they are loaded.

use std::marker::PhantomData;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::raw::{c_int, c_void};

use libbpf_sys as sys;

use super::bpf::{check, BpfError, LoadedObject, SharedMap};

/// Typed access to a map through its fd (borrowed from the [`LoadedObject`] that owns it).
#[derive(Clone, Copy)]
pub struct MapFd<'obj> {
    fd: c_int,
    name: &'static str,
    key_size: usize,
    value_size: usize,
    _obj: PhantomData<&'obj LoadedObject>,
}

impl<'obj> MapFd<'obj> {
    /// The map `name` of `obj`.
    pub fn of(obj: &'obj LoadedObject, name: &'static str) -> Result<MapFd<'obj>, BpfError> {
        let (key_size, value_size) = obj.map_sizes(name)?;
        Ok(MapFd {
            fd: obj.map_fd(name)?,
            name,
            key_size,
            value_size,
            _obj: PhantomData,
        })
    }

    /// The raw fd, for mmap (the ring buffer).
    pub fn fd(&self) -> c_int {
        self.fd
    }

    /// Set the key whose bytes are `key` to the value whose bytes are `value`; both must be
    /// exactly the map's sizes (the layouts of the BPF side's key and value structs).
    pub fn update_bytes(&self, key: &[u8], value: &[u8]) -> Result<(), BpfError> {
        if key.len() != self.key_size || value.len() != self.value_size {
            return Err(BpfError::new(
                format!(
                    "update map {}: {}-byte key and {}-byte value given, the map has {} and {}",
                    self.name,
                    key.len(),
                    value.len(),
                    self.key_size,
                    self.value_size
                ),
                libc::EINVAL,
            ));
        }
        // SAFETY: key and value hold exactly the map's key and value sizes (checked above).
        let rc = unsafe {
            sys::bpf_map_update_elem(
                self.fd,
                key.as_ptr() as *const c_void,
                value.as_ptr() as *const c_void,
                sys::BPF_ANY as u64,
            )
        };
        check(rc, || format!("update map {}", self.name))
    }

    /// Set `key` to `value`.
    pub fn update_u32(&self, key: u32, value: u32) -> Result<(), BpfError> {
        // SAFETY: the fd is this live map's (the object's borrow).
        let fd = unsafe { BorrowedFd::borrow_raw(self.fd) };
        update_u32(fd, key, value, || format!("update map {}", self.name))
    }

    /// Remove `key` (missing keys are fine).
    pub fn delete_u32(&self, key: u32) {
        // SAFETY: key is the map's key size.
        unsafe {
            sys::bpf_map_delete_elem(self.fd, &key as *const u32 as *const c_void);
        }
    }

    /// The values of this array map (created `BPF_F_MMAPABLE` with `entries` elements), mapped
    /// read-write, so that user space fills them with plain stores rather than a syscall per
    /// element.
    pub fn map_array(&self, entries: usize) -> Result<MappedArray, BpfError> {
        // SAFETY: the fd is this live map's (the object's borrow).
        let fd = unsafe { BorrowedFd::borrow_raw(self.fd) };
        mapped_array(fd, self.value_size, entries)
            .map_err(|e| BpfError::io(format!("map the values of {}", self.name), e))
    }

    /// The sum over every CPU of the u64 at `key` of a per-CPU array map.
    pub fn lookup_percpu_u64_sum(&self, key: u32) -> Result<u64, BpfError> {
        // SAFETY: a plain query of the machine's possible CPUs.
        let cpus = unsafe { sys::libbpf_num_possible_cpus() };
        if cpus <= 0 {
            return Err(BpfError::new("count the possible CPUs", -cpus));
        }
        // The kernel writes each CPU's value rounded up to 8 bytes: u64 values exactly.
        let mut values = vec![0u64; cpus as usize];
        // SAFETY: key is u32; values holds one u64 per possible CPU, what the kernel copies
        // out for a per-CPU map with 8-byte values.
        let rc = unsafe {
            sys::bpf_map_lookup_elem(
                self.fd,
                &key as *const u32 as *const c_void,
                values.as_mut_ptr() as *mut c_void,
            )
        };
        check(rc, || format!("read map {}", self.name))?;
        Ok(values.iter().sum())
    }

    /// Read the u64 at `key` of an array map.
    pub fn lookup_u64(&self, key: u32) -> Result<u64, BpfError> {
        let mut value = 0u64;
        // SAFETY: key is u32 and value u64, the map's sizes.
        let rc = unsafe {
            sys::bpf_map_lookup_elem(
                self.fd,
                &key as *const u32 as *const c_void,
                &mut value as *mut u64 as *mut c_void,
            )
        };
        check(rc, || format!("read map {}", self.name))?;
        Ok(value)
    }
}

/// Set `key` to `value` in the map `fd`, whose keys and values are 4 bytes; `what` failed
/// otherwise.
fn update_u32(
    fd: BorrowedFd<'_>,
    key: u32,
    value: u32,
    what: impl FnOnce() -> String,
) -> Result<(), BpfError> {
    // SAFETY: key and value are the map's key and value sizes (u32, u32).
    let rc = unsafe {
        sys::bpf_map_update_elem(
            fd.as_raw_fd(),
            &key as *const u32 as *const c_void,
            &value as *const u32 as *const c_void,
            sys::BPF_ANY as u64,
        )
    };
    check(rc, what)
}

/// The values of the mmapable array map `fd`, of `entries` values of `value_size` bytes, mapped
/// read-write.
fn mapped_array(
    fd: BorrowedFd<'_>,
    value_size: usize,
    entries: usize,
) -> std::io::Result<MappedArray> {
    let stride = value_size.next_multiple_of(8);
    let len = (stride * entries).next_multiple_of(super::ring::page_size());
    // SAFETY: an mmapable array map's values are meant to be mapped shared read-write; the
    // BPF side reads them concurrently, so the caller must publish each range (for the unwind
    // tables: the `unwind_files` entry that points at it) only after writing it.
    let map = unsafe { memmap2::MmapOptions::new().len(len).map_mut(fd.as_raw_fd()) }?;
    Ok(MappedArray { map, stride })
}

/// The values of an mmapable array map (`MapFd::map_array`). The mapping keeps the map alive
/// even if its fd is closed first.
pub struct MappedArray {
    map: memmap2::MmapMut,
    stride: usize,
}

impl MappedArray {
    /// The values as one byte slice: element `i` at `i * stride()`.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.map
    }

    /// Bytes from one element to the next (the value size rounded up to 8).
    pub fn stride(&self) -> usize {
        self.stride
    }
}

/// An array of maps whose elements are mmapable arrays of one size, made one at a time as they
/// are needed and written through their mappings (the unwind tables' chunks of rows).
pub struct ArrayChunks {
    outer: SharedMap,
    value_size: u32,
    entries: u32,
    chunks: Vec<MappedArray>,
}

impl ArrayChunks {
    /// The array of maps `outer`, whose inner maps hold `entries` values of `value_size`
    /// bytes; none made yet.
    pub fn new(outer: SharedMap, value_size: u32, entries: u32) -> ArrayChunks {
        ArrayChunks {
            outer,
            value_size,
            entries,
            chunks: Vec::new(),
        }
    }

    /// The chunks made so far.
    pub fn len(&self) -> usize {
        self.chunks.len()
    }

    /// The values each chunk holds.
    pub fn entries(&self) -> u32 {
        self.entries
    }

    /// Make the next chunk and put it in the array. The kernel then waits for the BPF programs
    /// running to end (an RCU grace period, some 10 ms): a wait, not work.
    pub fn grow(&mut self) -> Result<(), BpfError> {
        let slot = self.chunks.len() as u32;
        let name = self.outer.name();
        let inner = super::bpf::mmapable_array(self.value_size, self.entries, || {
            format!("make element {slot} of map {name}")
        })?;
        let values = mapped_array(
            inner.as_fd(),
            self.value_size as usize,
            self.entries as usize,
        )
        .map_err(|e| BpfError::io(format!("map the values of element {slot} of {name}"), e))?;
        // An array of maps' values are the fds of the maps put in it.
        let inner_fd = inner.as_raw_fd() as u32;
        update_u32(self.outer.as_fd(), slot, inner_fd, || {
            format!("put element {slot} in map {name}")
        })?;
        self.chunks.push(values);
        Ok(())
    }

    /// Chunk `i`'s values, element `e` at `e * stride()`.
    pub fn chunk_mut(&mut self, i: usize) -> &mut [u8] {
        self.chunks[i].bytes_mut()
    }
}
