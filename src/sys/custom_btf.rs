//! A BTF blob for CO-RE relocations (record::core_btf cuts it from the kernel's), in a memfd:
//! libbpf reads the types of an object's relocations from a path, not from memory.

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A BTF blob libbpf reads CO-RE relocations' types from instead of the kernel's
/// (`btf_custom_path`), held in a memfd for the loads that read it: libbpf takes a path.
pub struct CustomBtf {
    _file: std::fs::File,
    path: CString,
}

impl CustomBtf {
    /// A memfd holding `bytes`, named by its /proc/self/fd path.
    pub fn new(bytes: &[u8]) -> std::io::Result<CustomBtf> {
        use std::io::Write;
        // SAFETY: the name is NUL-terminated; the returned fd is checked and then owned.
        let fd = unsafe { libc::memfd_create(c"memtrack-core-btf".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor nobody else owns.
        let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        file.write_all(bytes)?;
        Ok(CustomBtf {
            path: path_of(&file),
            _file: file,
        })
    }

    /// Its /proc/self/fd path, for libbpf's `btf_custom_path`.
    pub(super) fn path(&self) -> &CStr {
        &self.path
    }

    /// The same blob through a descriptor of its own, for a load on another thread.
    pub fn try_clone(&self) -> std::io::Result<CustomBtf> {
        let file = self._file.try_clone()?;
        Ok(CustomBtf {
            path: path_of(&file),
            _file: file,
        })
    }
}

fn path_of(file: &std::fs::File) -> CString {
    CString::new(format!("/proc/self/fd/{}", file.as_raw_fd())).expect("no NUL in a path")
}
