//! A file as the kernel names it (device and inode), the key of the BPF maps that say which
//! files are probed and which have unwind tables. Its own module because `discover` (which
//! probes files) and `stacks` and `private` (which build their tables and copies) all name
//! files by it, and none of them owns the others.

/// A file as the kernel names it: device (major << 20 | minor, the kernel's encoding, which
/// bpf/discover.bpf.c reads from the inode) and inode number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileKey {
    /// The device, kernel encoding.
    pub dev: u32,
    /// The inode number.
    pub ino: u64,
}

impl FileKey {
    /// The key of the `scanned` and `unwind_files` maps: `struct file_key { u64 ino; u32 dev;
    /// u32 pad; }` (bpf/common.bpf.h).
    pub fn bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.ino.to_ne_bytes());
        b[8..12].copy_from_slice(&self.dev.to_ne_bytes());
        b
    }

    /// The kernel's key for the file `meta` describes.
    pub fn of(meta: &std::fs::Metadata) -> FileKey {
        use std::os::unix::fs::MetadataExt;
        let dev = meta.dev();
        // st_dev is the C library's encoding; the kernel's is major << 20 | minor.
        let major = ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0xfff);
        let minor = ((dev >> 12) & 0xffff_ff00) | (dev & 0xff);
        FileKey {
            dev: ((major as u32) << 20) | (minor as u32 & 0xfffff),
            ino: meta.ino(),
        }
    }
}
