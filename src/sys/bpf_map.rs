//! Typed access to the maps of a loaded BPF object, through their fds: lookups, updates and
//! sums over CPUs ([`MapFd`]), and an mmapped array's values ([`MappedArray`]). Apart from
//! bpf.rs, which owns the objects, since it is most of what the recorder does with them once
//! they are loaded.

use std::marker::PhantomData;
use std::os::raw::{c_int, c_void};

use libbpf_sys as sys;

use super::bpf::{check, BpfError, LoadedObject};

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
        // SAFETY: key and value are the map's key and value sizes (u32, u32).
        let rc = unsafe {
            sys::bpf_map_update_elem(
                self.fd,
                &key as *const u32 as *const c_void,
                &value as *const u32 as *const c_void,
                sys::BPF_ANY as u64,
            )
        };
        check(rc, || format!("update map {}", self.name))
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
        let stride = self.value_size.next_multiple_of(8);
        let len = (stride * entries).next_multiple_of(super::ring::page_size());
        // SAFETY: an mmapable array map's values are meant to be mapped shared read-write; the
        // BPF side reads them concurrently, so the caller must publish each range (here: the
        // `unwind_files` entry that points at it) only after writing it.
        let map = unsafe { memmap2::MmapOptions::new().len(len).map_mut(self.fd) }
            .map_err(|e| BpfError::io(format!("map the values of {}", self.name), e))?;
        Ok(MappedArray { map, stride })
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
