//! The leak scan: at a normal exit, tell the blocks a process still points to (still
//! reachable) from those nothing points to (definitely lost), as memcheck and LeakSanitizer do,
//! for every process of the tree, without recompiling or slowing anything down before the exit.
//!
//! Flow: the drain hands every allocator event to [`Heaps`], which keeps each process's live
//! blocks (address, size, and whether the process allocated it or inherited it at fork). The
//! kernel side (bpf/discover.bpf.c, `exit_hold`) stops a process with SIGSTOP at the entry of
//! the C library's `_exit`, after atexit handlers and stdio's flush, before exit_group; the
//! drain then [`Held::hold`]s every thread under ptrace (registers, and the certainty that no
//! thread runs), drains the ring up to where the producer is (every event the process made is
//! then in its heap), and [`Held::scan`]s its memory:
//!
//! - roots: every readable and writable mapping that holds no live block (data and bss of every
//!   module, anonymous mappings, TLS), each thread's stack from its stack pointer (less the
//!   128-byte red zone) to the end of its mapping, and each thread's general registers. A
//!   mapping holding a live block is the allocator's heap: its free chunks keep stale pointers,
//!   so only blocks reached are read from it (memcheck and LSan scan blocks, not heaps, too);
//! - marking: every aligned 8-byte word that points into a live block, its start or inside it
//!   (an interior pointer counts, as in LeakSanitizer; memcheck calls a block reached only that
//!   way "possibly lost"), reaches the block, whose words are scanned in turn. One exception,
//!   for glibc: a word equal to the address of the malloc chunk that follows a block (the
//!   arena's `top` and bin pointers, which land in a block's last 8 bytes when its size is 8
//!   more than a multiple of 16) does not reach it;
//! - inherited blocks (a forked child's copy of its parent's heap) are marked through like the
//!   others but counted only in the parent, as the report counts them.
//!
//! The whole process is stopped while it is scanned (a group stop, then ptrace stops), so the
//! scan sees one consistent image. A thread whose registers cannot be read (traced by a
//! debugger already) has its whole stack mapping scanned, which can only make more blocks
//! reachable. A process with no live block of its own is continued at once.

use std::collections::HashMap;
use std::time::Instant;

use crate::format::{Event, EventKind, Exec, LeakScan, LEAK_SCAN_MAX_LISTED};
use crate::sys::inspect::{read_memory, Seized};

/// One live block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Block {
    size: u64,
    /// Allocated by this process (not inherited from its parent at fork).
    own: bool,
}

/// The live blocks of every process of the tree, from the events the drain writes.
#[derive(Debug, Default)]
pub struct Heaps {
    by_pid: HashMap<u32, HashMap<u64, Block>>,
}

impl Heaps {
    /// Follow one event of the file.
    pub fn note(&mut self, ev: &Event) {
        match &ev.kind {
            &EventKind::Alloc { addr, size, .. } => {
                self.by_pid
                    .entry(ev.pid)
                    .or_default()
                    .insert(addr, Block { size, own: true });
            }
            &EventKind::Free { addr, .. } => {
                if let Some(h) = self.by_pid.get_mut(&ev.pid) {
                    h.remove(&addr);
                }
            }
            &EventKind::Realloc {
                old_addr,
                addr,
                size,
                ..
            } => {
                let h = self.by_pid.entry(ev.pid).or_default();
                h.remove(&old_addr);
                h.insert(addr, Block { size, own: true });
            }
            &EventKind::Fork { child } => {
                // The child's memory is a copy of the parent's: its blocks are there, reachable
                // or not, but they are the parent's in the report.
                let inherited: HashMap<u64, Block> = self
                    .by_pid
                    .get(&ev.pid)
                    .map(|h| {
                        h.iter()
                            .map(|(&a, b)| (a, Block { own: false, ..*b }))
                            .collect()
                    })
                    .unwrap_or_default();
                self.by_pid.insert(child, inherited);
            }
            EventKind::Exec(Exec { .. }) | EventKind::Exit { .. } => {
                self.by_pid.remove(&ev.pid);
            }
            _ => {}
        }
    }

    /// Whether process `pid` has live blocks of its own (else there is nothing to scan for).
    pub fn has_own(&self, pid: u32) -> bool {
        self.by_pid
            .get(&pid)
            .is_some_and(|h| h.values().any(|b| b.own))
    }
}

/// A stopped process whose threads are held under ptrace for the scan; dropping it detaches
/// them (the caller then continues the process).
pub struct Held {
    pid: u32,
    started: Instant,
    threads: u32,
    /// Register words of every thread read.
    registers: Vec<u64>,
    /// Stack pointers of the threads whose registers were read.
    stack_pointers: Vec<u64>,
    _seized: Vec<Seized>,
}

impl Held {
    /// Seize every thread of `pid` (each is stopped when this returns).
    pub fn hold(pid: u32) -> Result<Held, String> {
        let started = Instant::now();
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
            .map_err(|e| format!("cannot list the threads of pid {pid}: {e}"))?;
        let mut held = Held {
            pid,
            started,
            threads: 0,
            registers: Vec::new(),
            stack_pointers: Vec::new(),
            _seized: Vec::new(),
        };
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            held.threads += 1;
            match Seized::stop(tid) {
                Ok(s) => {
                    match s.registers() {
                        Ok((words, sp)) => {
                            held.registers.extend(words);
                            held.stack_pointers.push(sp);
                        }
                        Err(e) => log::debug!("registers of thread {tid}: {e}"),
                    }
                    held._seized.push(s);
                }
                Err(e) => log::debug!("cannot seize thread {tid} of pid {pid}: {e}"),
            }
        }
        Ok(held)
    }

    /// Scan the held process's memory against `heaps`' blocks of it.
    pub fn scan(&self, heaps: &Heaps) -> LeakScan {
        let empty = HashMap::new();
        let heap = heaps.by_pid.get(&self.pid).unwrap_or(&empty);
        let mut result = match std::fs::read_to_string(format!("/proc/{}/maps", self.pid)) {
            Ok(maps) => {
                let mut marker = Marker::new(self.pid as i32, heap);
                marker.scan_words(&self.registers);
                for (start, end) in roots(&maps, &marker.blocks, &self.stack_pointers) {
                    log::trace!("pid {}: root {start:x}-{end:x}", self.pid);
                    marker.scan_range(start, end);
                }
                marker.mark_all();
                marker.result()
            }
            Err(e) => LeakScan {
                failure: format!("cannot read its mappings: {e}"),
                ..LeakScan::default()
            },
        };
        result.threads = self.threads;
        result.registers = self.stack_pointers.len() as u32;
        result.duration_ns = self.started.elapsed().as_nanos() as u64;
        result
    }
}

/// The result for a process with no live block of its own: nothing can be lost.
pub fn nothing_live() -> LeakScan {
    LeakScan::default()
}

/// One readable and writable mapping of `/proc/PID/maps`: (start, end, path).
fn writable_mappings(maps: &str) -> Vec<(u64, u64, &str)> {
    let mut out = Vec::new();
    for line in maps.lines() {
        let mut fields = line.splitn(6, ' ');
        let (Some(range), Some(perms)) = (fields.next(), fields.next()) else {
            continue;
        };
        let path = fields.nth(3).unwrap_or("").trim_start();
        let p = perms.as_bytes();
        if p.first() != Some(&b'r') || p.get(1) != Some(&b'w') {
            continue;
        }
        if path == "[vvar]" || path == "[vvar_vclock]" || path == "[vsyscall]" {
            continue;
        }
        let Some((s, e)) = range.split_once('-') else {
            continue;
        };
        let (Ok(s), Ok(e)) = (u64::from_str_radix(s, 16), u64::from_str_radix(e, 16)) else {
            continue;
        };
        out.push((s, e, path));
    }
    out
}

/// The root ranges of a process: its writable mappings without live blocks, and its stacks
/// from each known stack pointer (less the red zone) up.
fn roots(maps: &str, blocks: &[(u64, u64, usize)], stack_pointers: &[u64]) -> Vec<(u64, u64)> {
    const RED_ZONE: u64 = 128;
    let mut out = Vec::new();
    for (start, end, _path) in writable_mappings(maps) {
        let lowest_sp = stack_pointers
            .iter()
            .filter(|&&sp| sp >= start && sp < end)
            .min();
        if let Some(&sp) = lowest_sp {
            out.push(((sp.saturating_sub(RED_ZONE) & !7).max(start), end));
            continue;
        }
        // Any live block inside? Blocks are sorted by start.
        let i = blocks.partition_point(|b| b.1 <= start);
        let holds_block = blocks.get(i).is_some_and(|b| b.0 < end);
        if !holds_block {
            out.push((start, end));
        }
    }
    out
}

/// The marking state of one scan.
struct Marker<'h> {
    pid: i32,
    /// (start, end, index into `sizes`), sorted by start; end > start.
    blocks: Vec<(u64, u64, usize)>,
    info: Vec<Block>,
    /// The word after which a pointer is the malloc chunk after the block (see the module
    /// documentation), or 0.
    next_chunk: Vec<u64>,
    marked: Vec<bool>,
    work: Vec<usize>,
    lo: u64,
    hi: u64,
    scanned_bytes: u64,
    buf: Vec<u8>,
    _heap: std::marker::PhantomData<&'h ()>,
}

/// Bytes read at once from a root or a block.
const READ_BYTES: usize = 1 << 20;
/// The most blocks read in one `process_vm_readv`.
const READ_BLOCKS: usize = 1024;

/// glibc's chunk size for a request of `size` bytes: 8 bytes of header, 16-byte aligned, 32 at
/// least.
fn glibc_chunk(size: u64) -> u64 {
    (size.saturating_add(8 + 15) & !15).max(32)
}

impl<'h> Marker<'h> {
    fn new(pid: i32, heap: &'h HashMap<u64, Block>) -> Marker<'h> {
        let mut sorted: Vec<(u64, Block)> = heap.iter().map(|(&a, &b)| (a, b)).collect();
        sorted.sort_unstable_by_key(|b| b.0);
        let mut blocks = Vec::with_capacity(sorted.len());
        let mut info = Vec::with_capacity(sorted.len());
        let mut next_chunk = Vec::with_capacity(sorted.len());
        for (i, (addr, b)) in sorted.into_iter().enumerate() {
            blocks.push((addr, addr.saturating_add(b.size.max(1)), i));
            info.push(b);
            let next = (addr + glibc_chunk(b.size)).wrapping_sub(16);
            next_chunk.push(if next > addr && next < addr + b.size {
                next
            } else {
                0
            });
        }
        let lo = blocks.first().map_or(u64::MAX, |b| b.0);
        let hi = blocks.iter().map(|b| b.1).max().unwrap_or(0);
        Marker {
            pid,
            marked: vec![false; blocks.len()],
            blocks,
            info,
            next_chunk,
            work: Vec::new(),
            lo,
            hi,
            scanned_bytes: 0,
            buf: vec![0; READ_BYTES],
            _heap: std::marker::PhantomData,
        }
    }

    /// Mark the block `w` points into, if any and not marked yet.
    #[inline]
    fn word(&mut self, w: u64) {
        if w < self.lo || w >= self.hi {
            return;
        }
        let i = self.blocks.partition_point(|b| b.0 <= w);
        if i == 0 {
            return;
        }
        let (start, end, idx) = self.blocks[i - 1];
        // Blocks may overlap only if the file missed a free; the last starting at or below w
        // is the one taken.
        let _ = start;
        if w < end && !self.marked[idx] && self.next_chunk[idx] != w {
            self.marked[idx] = true;
            self.work.push(i - 1);
        }
    }

    fn scan_words(&mut self, words: &[u64]) {
        for &w in words {
            self.word(w);
        }
    }

    fn scan_bytes(&mut self, len: usize) {
        let buf = std::mem::take(&mut self.buf);
        for chunk in buf[..len - len % 8].chunks_exact(8) {
            self.word(u64::from_ne_bytes(chunk.try_into().expect("8 bytes")));
        }
        self.buf = buf;
        self.scanned_bytes += len as u64;
    }

    /// Scan the memory from `start` to `end` (8-byte aligned start), skipping what cannot be
    /// read a page at a time.
    fn scan_range(&mut self, start: u64, end: u64) {
        let mut at = start;
        while at < end {
            let len = ((end - at) as usize).min(READ_BYTES);
            let mut buf = std::mem::take(&mut self.buf);
            let got = read_memory(self.pid, &[(at, len)], &mut buf).unwrap_or(0);
            self.buf = buf;
            if got > 0 {
                self.scan_bytes(got);
                at += got as u64;
            } else {
                at = (at & !4095) + 4096;
            }
        }
    }

    /// Scan marked blocks until none is left to scan.
    fn mark_all(&mut self) {
        while !self.work.is_empty() {
            // A batch of small blocks in one call; a big one alone, in pieces.
            let mut ranges = Vec::new();
            let mut total = 0usize;
            while let Some(&i) = self.work.last() {
                let (start, end, _) = self.blocks[i];
                // Whole words only: the blocks are read one after another into one buffer,
                // which is scanned a word at a time, and a pointer is a whole aligned word.
                let len = ((end - start) & !7) as usize;
                if len == 0 {
                    self.work.pop();
                    continue;
                }
                if len > READ_BYTES {
                    if ranges.is_empty() {
                        self.work.pop();
                        self.scan_range(start, start + len as u64);
                    }
                    break;
                }
                if total + len > READ_BYTES || ranges.len() == READ_BLOCKS {
                    break;
                }
                self.work.pop();
                ranges.push((start, len));
                total += len;
            }
            if ranges.is_empty() {
                continue;
            }
            let mut buf = std::mem::take(&mut self.buf);
            let got = read_memory(self.pid, &ranges, &mut buf).unwrap_or(0);
            self.buf = buf;
            if got == total {
                self.scan_bytes(total);
            } else {
                // Some block could not be read whole: one at a time, skipping what fails.
                for (start, len) in ranges {
                    self.scan_range(start, start + len as u64);
                }
            }
        }
    }

    /// Count the process's own blocks, lost and reachable.
    fn result(&self) -> LeakScan {
        let mut r = LeakScan {
            scanned_bytes: self.scanned_bytes,
            ..LeakScan::default()
        };
        for &(start, _, idx) in &self.blocks {
            let b = self.info[idx];
            if !b.own {
                continue;
            }
            if self.marked[idx] {
                r.reachable_blocks += 1;
                r.reachable_bytes += b.size;
            } else {
                r.lost_blocks += 1;
                r.lost_bytes += b.size;
                if r.lost.len() < LEAK_SCAN_MAX_LISTED {
                    r.lost.push(start);
                }
            }
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::AllocFunc;

    fn ev(pid: u32, kind: EventKind) -> Event {
        Event {
            ts_ns: 0,
            pid,
            tid: pid,
            kind,
        }
    }

    fn alloc(addr: u64, size: u64) -> EventKind {
        EventKind::Alloc {
            func: AllocFunc::Malloc,
            addr,
            size,
            stack_id: 0,
        }
    }

    #[test]
    fn heaps_follow_alloc_free_realloc_fork_exec() {
        let mut h = Heaps::default();
        h.note(&ev(1, alloc(0x1000, 16)));
        h.note(&ev(1, alloc(0x2000, 16)));
        h.note(&ev(
            1,
            EventKind::Free {
                func: AllocFunc::Free,
                addr: 0x1000,
            },
        ));
        h.note(&ev(
            1,
            EventKind::Realloc {
                func: AllocFunc::Realloc,
                old_addr: 0x2000,
                addr: 0x3000,
                size: 64,
                stack_id: 0,
            },
        ));
        assert_eq!(h.by_pid[&1].len(), 1);
        assert_eq!(h.by_pid[&1][&0x3000].size, 64);
        h.note(&ev(1, EventKind::Fork { child: 2 }));
        assert!(!h.has_own(2), "inherited blocks are the parent's");
        assert_eq!(h.by_pid[&2].len(), 1);
        h.note(&ev(2, alloc(0x4000, 8)));
        assert!(h.has_own(2));
        h.note(&ev(
            2,
            EventKind::Exec(Exec {
                filename: "/bin/true".into(),
                argv: vec![],
            }),
        ));
        assert!(!h.by_pid.contains_key(&2));
    }

    #[test]
    fn roots_skip_heaps_and_start_stacks_at_the_stack_pointer() {
        let maps = "\
00400000-00401000 r--p 00000000 08:01 1 /bin/x
00600000-00601000 rw-p 00000000 08:01 1 /bin/x
01000000-01100000 rw-p 00000000 00:00 0 [heap]
7ff000000000-7ff000100000 rw-p 00000000 00:00 0 [stack]
7ff100000000-7ff100001000 rw-p 00000000 00:00 0 [vvar]
";
        let blocks = [(0x0100_0010, 0x0100_0020, 0)];
        let r = roots(maps, &blocks, &[0x7ff0_0008_0000]);
        assert_eq!(
            r,
            vec![
                (0x60_0000, 0x60_1000),
                (0x7ff0_0008_0000 - 128, 0x7ff0_0010_0000)
            ]
        );
    }

    #[test]
    fn glibc_next_chunk_lands_in_the_tail_of_blocks_8_over_16() {
        assert_eq!(glibc_chunk(24), 32);
        assert_eq!(glibc_chunk(1), 32);
        assert_eq!(glibc_chunk(40), 48);
        assert_eq!(glibc_chunk(48), 64);
        let heap = HashMap::from([
            (
                0x1010,
                Block {
                    size: 24,
                    own: true,
                },
            ),
            (
                0x2010,
                Block {
                    size: 48,
                    own: true,
                },
            ),
        ]);
        let mut m = Marker::new(0, &heap);
        m.word(0x1010 + 16); // the next chunk's header: not a pointer into the block
        m.word(0x2010 + 47);
        assert_eq!(m.marked, vec![false, true]);
        m.word(0x1010 + 8);
        assert_eq!(m.marked, vec![true, true]);
        let r = m.result();
        assert_eq!(
            (r.lost_blocks, r.reachable_blocks, r.reachable_bytes),
            (0, 2, 72)
        );
    }

    #[test]
    fn blocks_of_odd_sizes_read_together_keep_their_words_aligned() {
        // Real memory of this process: two 37-byte blocks read in one call, each holding the
        // only pointer to a block of its own.
        let c = vec![0u8; 24];
        let d = vec![0u8; 24];
        let mut a = vec![0u8; 37];
        let mut a2 = vec![0u8; 37];
        a[8..16].copy_from_slice(&(c.as_ptr() as u64).to_ne_bytes());
        a2[16..24].copy_from_slice(&(d.as_ptr() as u64).to_ne_bytes());
        let own = |size| Block { size, own: true };
        let heap = HashMap::from([
            (a.as_ptr() as u64, own(37)),
            (a2.as_ptr() as u64, own(37)),
            (c.as_ptr() as u64, own(24)),
            (d.as_ptr() as u64, own(24)),
        ]);
        let mut m = Marker::new(std::process::id() as i32, &heap);
        m.scan_words(&[a.as_ptr() as u64, a2.as_ptr() as u64]);
        m.mark_all();
        let r = m.result();
        assert_eq!((r.lost_blocks, r.reachable_blocks), (0, 4), "{r:?}");
        drop((a, a2, c, d));
    }
}
