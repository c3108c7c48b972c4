//! The consumer side of a BPF ring buffer, read straight from its mmapped pages.
//!
//! Layout (kernel/bpf/ringbuf.c): page 0 holds the consumer position, which we own and write;
//! from page 1 on, read-only to us, the producer position page and then the data area mapped
//! twice in a row, so a record that wraps around the end can be read as one contiguous slice.
//! Each record starts with an 8-byte header: a u32 length whose top bits say "still being
//! written" (busy) or "discarded", and a u32 the kernel uses internally. We follow libbpf's
//! `ringbuf_process_ring`: acquire the producer position, acquire each header, stop at a busy
//! record, skip a discarded one. Unlike libbpf we release the consumer position once per drain,
//! not per record, and a drain stops at the producer position it found on entry instead of
//! chasing the producer: the producer reads the consumer position on every reservation, and a
//! consumer at its heels pulls the cache lines it is writing across CPUs.

use std::os::fd::BorrowedFd;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use libbpf_sys::{BPF_RINGBUF_BUSY_BIT, BPF_RINGBUF_DISCARD_BIT, BPF_RINGBUF_HDR_SZ};
use memmap2::{Mmap, MmapMut, MmapOptions};

/// A mapped ring buffer. It borrows nothing: the mappings keep the kernel's ring alive even if
/// the map fd is closed first.
pub struct RingBuffer {
    fd: c_int,
    consumer: MmapMut,
    producer: Mmap,
    data_offset: usize,
    mask: u64,
}

impl RingBuffer {
    /// Map the ring buffer behind map fd `fd`, whose data area is `size_bytes` (a power of two,
    /// a multiple of the page size: the kernel refuses anything else at map creation).
    pub fn map(fd: c_int, size_bytes: usize) -> std::io::Result<RingBuffer> {
        let page = page_size();
        // SAFETY: the consumer page of a ring buffer map is meant to be mapped read-write by
        // user space; only we write to it, and only the position at offset 0.
        let consumer = unsafe { MmapOptions::new().len(page).map_mut(fd)? };
        // SAFETY: the producer page and the doubly mapped data area are read-only to user
        // space; the kernel writes them concurrently, which is why every read of a position or
        // header below is an atomic acquire load.
        let producer = unsafe {
            MmapOptions::new()
                .offset(page as u64)
                .len(page + 2 * size_bytes)
                .map(fd)?
        };
        Ok(RingBuffer {
            fd,
            consumer,
            producer,
            data_offset: page,
            mask: size_bytes as u64 - 1,
        })
    }

    /// The map fd, to wait for a record that asked for a wake-up. Valid while the map's owner
    /// lives (the caller keeps the BPF object alive for the whole loop).
    pub fn fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the map's owner outlives the ring (see above), so the fd stays open.
        unsafe { BorrowedFd::borrow_raw(self.fd) }
    }

    fn consumer_pos(&self) -> &AtomicU64 {
        // SAFETY: offset 0 of the consumer page is an 8-byte aligned u64 (page aligned) that
        // lives as long as the mapping; the kernel only reads it.
        unsafe { AtomicU64::from_ptr(self.consumer.as_ptr() as *mut u64) }
    }

    fn producer_pos(&self) -> &AtomicU64 {
        // SAFETY: offset 0 of the producer page is a page-aligned u64 the kernel updates with
        // release semantics after committing a reservation (pairs with our acquire load).
        unsafe { AtomicU64::from_ptr(self.producer.as_ptr() as *mut u64) }
    }

    /// Where the producer is now: every record reserved so far ends at or before it.
    pub fn producer_position(&self) -> u64 {
        self.producer_pos().load(Ordering::Acquire)
    }

    /// Whether every record that ends at or before `pos` has been handed out by `drain`.
    pub fn consumed_through(&self, pos: u64) -> bool {
        self.consumer_pos().load(Ordering::Relaxed) >= pos // only we write it
    }

    /// Bytes reserved by the producer and not yet consumed.
    pub fn unread_bytes(&self) -> u64 {
        let cons = self.consumer_pos().load(Ordering::Relaxed); // only we write it
        self.producer_position().saturating_sub(cons)
    }

    /// The size of the data area.
    pub fn capacity(&self) -> u64 {
        self.mask + 1
    }

    /// Hand every record committed up to the producer's position at entry to `f`, in order,
    /// and return how many there were. Stops at the first record still being written; it is
    /// picked up by the next call.
    pub fn drain(&mut self, mut f: impl FnMut(&[u8])) -> usize {
        self.drain_while(|record| {
            f(record);
            true
        })
    }

    /// As [`RingBuffer::drain`], but stops after the first record for which `f` returns false
    /// (that record is consumed), so the caller can act on it before reading on.
    pub fn drain_while(&mut self, mut f: impl FnMut(&[u8]) -> bool) -> usize {
        let data = self.producer.as_ptr().wrapping_add(self.data_offset);
        let start = self.consumer_pos().load(Ordering::Relaxed); // only we write it
        let prod = self.producer_pos().load(Ordering::Acquire);
        let mut cons = start;
        let mut count = 0;
        while cons < prod {
            let at = (cons & self.mask) as usize;
            // SAFETY: `at` is inside the first copy of the data area and 8-aligned (every
            // record length is rounded up to 8); the header is written by the kernel with
            // release semantics when the record is committed or discarded.
            let header = unsafe { AtomicU32::from_ptr(data.add(at) as *mut u32) };
            let len = header.load(Ordering::Acquire);
            if len & BPF_RINGBUF_BUSY_BIT != 0 {
                break;
            }
            let size = (len & !(BPF_RINGBUF_BUSY_BIT | BPF_RINGBUF_DISCARD_BIT)) as usize;
            cons += round_up_8(size + BPF_RINGBUF_HDR_SZ as usize) as u64;
            if len & BPF_RINGBUF_DISCARD_BIT != 0 {
                continue;
            }
            // SAFETY: a committed record of `size` bytes follows its header; it may run past
            // the end of the first copy, into the second mapping of the same pages.
            let record = unsafe {
                std::slice::from_raw_parts(data.add(at + BPF_RINGBUF_HDR_SZ as usize), size)
            };
            count += 1;
            if !f(record) {
                break;
            }
        }
        if cons != start {
            // Release: the kernel may reuse the space once it sees the new position.
            self.consumer_pos().store(cons, Ordering::Release);
        }
        count
    }
}

fn round_up_8(n: usize) -> usize {
    (n + 7) & !7
}

/// The system page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}
