/* SPDX-License-Identifier: (MIT OR Apache-2.0) */
/*
 * The one definition of every record the kernel side hands to user space through the ring
 * buffer. build.rs runs bindgen on this file, so the Rust decoder (src/record/decode.rs) reads
 * exactly these layouts. Keep every struct naturally aligned with explicit padding: the ring
 * buffer gives 8-byte aligned records and both sides read them in place.
 */
#ifndef MEMTRACK_EVENT_H
#define MEMTRACK_EVENT_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* What a record is; the first field of every record's header. */
enum event_kind {
	EV_ALLOC = 1,        /* struct alloc_event: a successful allocation */
	EV_FREE = 2,         /* struct alloc_event: addr released */
	EV_REALLOC = 3,      /* struct alloc_event: old_addr resized to addr */
	EV_ALLOC_FAILED = 4, /* struct alloc_event: the call returned failure */
	EV_FORK = 5,         /* struct fork_event */
	EV_EXEC = 6,         /* struct exec_event */
	EV_EXIT = 7,         /* struct exit_event */
	EV_RSS = 8,          /* struct rss_event */
	EV_STOP = 9,         /* struct stop_event: the process was stopped for discovery */
	EV_MMAP = 10,        /* struct map_event: a successful mmap */
	EV_MUNMAP = 11,      /* struct map_event: a successful munmap */
	EV_MREMAP = 12,      /* struct map_event: a successful mremap */
	EV_BRK = 13,         /* struct map_event: brk moved the break from old_addr to addr */
	EV_STACK = 14,       /* struct stack_event: a call stack seen for the first time */
	EV_RMAP = 15,        /* struct rmap_event: pages mapped into or unmapped from an mm */
	EV_RMAP_REGION = 16, /* struct rmap_region_event: the mapping rmap events fall into */
	EV_FAULT = 17,       /* struct fault_event: pages the process's own code made resident */
};

/* Allocator entry points; numbered as AllocFunc in src/format/event.rs (on disk). */
enum alloc_func {
	FUNC_MALLOC = 0,
	FUNC_CALLOC = 1,
	FUNC_REALLOC = 2,
	FUNC_REALLOCARRAY = 3,
	FUNC_ALIGNED_ALLOC = 4,
	FUNC_MEMALIGN = 5,
	FUNC_POSIX_MEMALIGN = 6,
	FUNC_VALLOC = 7,
	FUNC_PVALLOC = 8,
	FUNC_FREE = 9,
	FUNC_NEW = 10,          /* C++ operator new, every non-array variant */
	FUNC_NEW_ARRAY = 11,    /* operator new[] */
	FUNC_DELETE = 12,       /* operator delete, every non-array variant */
	FUNC_DELETE_ARRAY = 13, /* operator delete[] */
	FUNC_MALLOCX = 14,      /* jemalloc mallocx */
	FUNC_RALLOCX = 15,      /* jemalloc rallocx */
	FUNC_DALLOCX = 16,      /* jemalloc dallocx, sdallocx */
	FUNC_ZALLOC = 17,       /* mimalloc mi_zalloc and its aligned forms */
	/* Allocators named with `record --allocator` or a preset (src/record/custom.rs); which
	 * one is the family of the file's coverage record. */
	FUNC_CUSTOM_ALLOC = 18,   /* alloc(size=argN) */
	FUNC_CUSTOM_CALLOC = 19,  /* calloc(n=argN,size=argM) */
	FUNC_CUSTOM_REALLOC = 20, /* realloc(ptr=argN,size=argM) */
	FUNC_CUSTOM_FREE = 21,    /* free(ptr=argN) */
};

/*
 * How an entry point takes its arguments: bits 16..23 of an attach cookie, beside the
 * enum alloc_func in bits 0..15. One table for every allocator: mi_calloc and calloc read
 * their arguments alike, only their labels differ.
 */
enum alloc_layout {
	LAYOUT_SIZE = 0,           /* (size, ...): malloc, new, mallocx, mi_zalloc, mi_malloc_aligned */
	LAYOUT_NMEMB_SIZE = 1,     /* (nmemb, size, ...): calloc, mi_mallocn */
	LAYOUT_PTR_SIZE = 2,       /* (ptr, size, ...): realloc, rallocx, mi_realloc */
	LAYOUT_PTR_NMEMB_SIZE = 3, /* (ptr, nmemb, size): reallocarray, mi_reallocn */
	LAYOUT_ALIGN_SIZE = 4,     /* (alignment, size): aligned_alloc, memalign */
	LAYOUT_MEMPTR_ALIGN_SIZE = 5, /* (memptr, alignment, size): posix_memalign, result in *memptr */
	LAYOUT_LABEL = 6, /* entry only: the allocator call it makes reports, under this label */
};

#define COOKIE_FUNC_MASK 0xffff
#define COOKIE_LAYOUT_SHIFT 16

/*
 * Where each of the first three integer arguments is at a probe site that was moved past the
 * function's first instructions (src/record/placement.rs): 4 bits per argument from bit 24 of
 * the cookie, argument 1 lowest. ARG_OWN_REG (0) means the register the ABI passes it in
 * (rdi, rsi, rdx); otherwise the register a plain `mov` copied it to before the site
 * (mimalloc's malloc moves its size to rsi to call its heap function).
 */
enum arg_reg {
	ARG_OWN_REG = 0,
	ARG_RDI = 1,
	ARG_RSI = 2,
	ARG_RDX = 3,
	ARG_RCX = 4,
	ARG_R8 = 5,
	ARG_R9 = 6,
	ARG_RAX = 7,
	ARG_R10 = 8,
	ARG_R11 = 9,
	ARG_RBX = 10,
	ARG_RBP = 11,
	ARG_R12 = 12,
	ARG_R13 = 13,
	ARG_R14 = 14,
	ARG_R15 = 15,
};

#define COOKIE_ARGS_SHIFT 24
#define COOKIE_ARG_BITS 4

/* Why a process was stopped (struct stop_event). */
enum stop_reason {
	STOP_EXEC = 1, /* it executed a file not yet scanned */
	STOP_DL = 2,   /* the dynamic loader finished mapping libraries (dlopen, start-up) */
	STOP_EXIT = 3, /* it called the C library's _exit: scan its heap before it goes (leaks) */
	STOP_WALKER = 4, /* an allocation was sampled before the walker was in place: wait for it */
};

/* Why an event was lost; index into the `lost` map. Names in src/record/decode.rs. */
enum lost_cause {
	LOST_RING_ALLOC = 0,     /* ring buffer full: an allocator event */
	LOST_RING_LIFECYCLE = 1, /* ring buffer full: fork, exec or exit */
	LOST_RING_RSS = 2,       /* ring buffer full: a resident-memory change */
	LOST_STATE_FULL = 3,     /* no memory for a thread's call state (an allocator's or a mapping
				  * syscall's): the call was not seen */
	LOST_TRACKED_FULL = 4,   /* tracked-process map full: a new process was not tracked */
	LOST_RING_MAP = 5,       /* ring buffer full: a mapping change (mmap, munmap, mremap, brk) */
	LOST_STOP = 6,           /* ring buffer full: a new file was not scanned before it ran */
	LOST_RING_STACK = 7,     /* ring buffer full: a new call stack (its allocation has none) */
	LOST_RING_RMAP = 8,      /* ring buffer full: an rmap change (pages mapped or unmapped) */
	LOST_SKIPPED_CALL = 9,   /* the kernel skipped both copies of a mapping call's entry or exit
				  * program for a tracked thread (mmap.bpf.c): the call was not seen */
	LOST_RING_FAULT = 10,    /* ring buffer full: a sampled fault's stack (its pages count as
				  * unattributed) */
	LOST_CAUSES = 11,
};

/* Values of the `tracked` map. */
enum tracked_state {
	TRACK_PROCESS = 1, /* record this process */
	TRACK_SPAWNER = 2, /* do not record this process, but record the children it creates */
};

/* A `tracked` value is the enum tracked_state in its low 16 bits; the bits above count the
 * process's threads that have called an allocator (alloc.bpf.c), which numbers each thread's
 * sampling draws by its order in the process rather than by its tid. */
#define TRACK_STATE_MASK 0xffffu
#define TRACK_THREAD_SHIFT 16

/* The stack id of an allocation whose stack was sampled but could not be taken (the ring was
 * full, no memory for the walk): its site is "[no stack]", where stack id 0 means "not
 * sampled". Only sampled recordings send it; with every stack walked, 0 stays "none". */
#define STACK_ID_MISSING 0xffffffffu

/* Draws of the sampling countdown (alloc.bpf.c's `sample_draws`): exponential intervals in
 * bytes, drawn by user space from the recording's seed before the command starts (16 Ki of
 * them take 0.4 ms; a thread reads them over and over only after 16 Ki walks, 256 MiB at a
 * 16 KiB mean). */
#define SAMPLE_DRAWS (1u << 14)

/* Values of element 0 of the `gate` map: whether allocator calls are recorded. A zeroed map is
 * open, so a recording without a control FIFO records everything without any set-up. */
enum gate_state {
	GATE_OPEN = 0,   /* allocator calls are recorded */
	GATE_CLOSED = 1, /* measuring is paused: allocator calls are not recorded */
};

#define EXEC_FILENAME_MAX 256
#define EXEC_ARGS_MAX 512

struct event_header {
	__u64 ts_ns; /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	__u32 pid;   /* tgid of the process the event is charged to */
	__u32 tid;   /* the thread that ran */
	__u32 kind;  /* enum event_kind */
	__u32 _pad;
};

struct alloc_event {
	struct event_header h;
	__u64 addr;     /* returned (alloc, realloc) or released (free) address */
	__u64 size;     /* requested bytes; nmemb*size saturated for calloc and reallocarray */
	__u64 old_addr; /* EV_REALLOC: the block that was resized */
	__u32 func;     /* enum alloc_func */
	__u32 stack_id; /* 0 until call stacks are recorded */
};

struct fork_event {
	struct event_header h; /* pid: the parent */
	__u32 child;
	__u32 _pad;
};

struct exec_event {
	struct event_header h;
	__u32 filename_len; /* bytes of filename used, without the NUL */
	__u32 args_len;     /* bytes of args used: NUL-separated argv, possibly cut short */
	char filename[EXEC_FILENAME_MAX];
	char args[EXEC_ARGS_MAX];
};

struct exit_event {
	struct event_header h;
	__s32 status; /* task->exit_code: (code << 8) | signal */
	__u32 _pad;
};

struct rss_event {
	struct event_header h; /* pid: the mm's owner; tid: the task that ran */
	__s64 delta_pages;     /* signed change since the previous value seen for this member */
	__u64 value_pages;     /* exact new value: count plus every CPU's pending part */
	__u32 member;          /* 0 file, 1 anon, 2 swap entries, 3 shmem */
	__u32 by_owner;        /* 1 if a task of the owning process made the change */
};

/* An increase of a resident counter made by a task of the owning process in its own context (a
 * page fault, or a syscall that touched its memory), with the user stack of the task's user
 * registers: the instruction that faulted, or the syscall's caller (issue 35). Sent right after
 * the rss_event of the same change, only for the increases the page countdown picks (every one
 * with `--stacks`). */
struct fault_event {
	struct event_header h; /* pid: the process; tid: the task that faulted */
	__u64 addr;            /* the faulting address, 0 where it is not known */
	__u32 pages;           /* the change's pages (the rss_event's delta) */
	__u32 member;          /* rss_event's member numbers: 0 file, 1 anon, 3 shmem */
	__u32 stack_id;        /* the user stack, 0 if it could not be walked */
	__u32 _pad;
};

/* Pages of one folio mapped into (pages > 0) or unmapped from (pages < 0) a process's page
 * tables, seen at the kernel's rmap functions (bpf/rmap.bpf.c). */
struct rmap_event {
	struct event_header h; /* pid: the mm's owner; tid: the task that ran */
	__u64 addr;            /* user virtual address of the first page */
	__s32 pages;           /* signed: + mapped, - unmapped */
	__u32 kind;            /* rss_event's member numbers: 0 file, 1 anon, 3 shmem */
};

#define RMAP_NAME_MAX 64

/* What a mapping is (struct rmap_region_event). */
enum region_kind {
	REGION_ANON = 0,  /* anonymous memory: mmap, or private copies of a file's pages */
	REGION_HEAP = 1,  /* the brk heap */
	REGION_STACK = 2, /* the main thread's stack */
	REGION_FILE = 3,  /* a mapped file (name: its file name; user space reads its path) */
	REGION_SHMEM = 4, /* shmem: tmpfs and memfd files, MAP_SHARED anonymous memory, SysV shm */
};

/* The mapping [start, end) of the record's process that the next rmap records fall into, sent
 * the first time an rmap record falls into it (and again when its end moved). */
struct rmap_region_event {
	struct event_header h; /* pid: the mm's owner */
	__u64 start;
	__u64 end;
	__u32 region;   /* enum region_kind */
	__u32 name_len; /* bytes of name used: the file's name (its last path component) */
	char name[RMAP_NAME_MAX];
};

/* The process was stopped (SIGSTOP from BPF) before running the code of newly mapped files;
 * user space scans its mappings, attaches, and continues it. Never written to the file. */
struct stop_event {
	struct event_header h;
	__u32 reason; /* enum stop_reason */
	__u32 _pad;
};

/* A mapping change made by a successful syscall. */
struct map_event {
	struct event_header h;
	__u64 addr;     /* mmap, mremap: the new mapping; munmap: the start; brk: the new break */
	__u64 len;      /* bytes; brk: 0 */
	__u64 old_addr; /* mremap: the old mapping; brk: the old break */
	__u64 old_len;  /* mremap: the old length */
	__u32 prot;     /* mmap: PROT_* */
	__u32 flags;    /* mmap: MAP_*; mremap: MREMAP_* */
};


/* Unwind tables (src/unwind/): one file's call frame information as rows sorted by pc, built
 * in user space from .eh_frame and binary-searched by the BPF stack walk. A row applies from
 * its pc up to the next row's pc; where the return address is says its enum ra_rule (at CFA-8
 * on x86-64). Numbered as CfaRule, RbpRule and RaRule in src/unwind/row.rs.
 *
 * One layout for both machines: on arm64 "rsp" is sp and "rbp" is x29, the frame pointer, and
 * the high four bits of rbp_rule say where the return address is (x30 or a stack slot at any
 * offset); x86-64 rows keep them 0. A bigger row would cost 16 MiB more kernel memory. */
enum cfa_rule {
	CFA_RSP = 0,         /* CFA = rsp (arm64: sp) + cfa_offset */
	CFA_RBP = 1,         /* CFA = rbp (arm64: x29) + cfa_offset */
	CFA_PLT = 2,         /* .plt: CFA = rsp + 8 + ((rip & 15) >= 11 ? 8 : 0) */
	CFA_END = 3,         /* the return address is undefined: the outermost frame, walk complete */
	CFA_UNKNOWN = 4,     /* no CFI covers this pc: end the walk, marked unknown */
	CFA_UNSUPPORTED = 5, /* CFI the walk cannot compute (an expression): end, count */
	CFA_SIGNAL = 6,      /* a signal trampoline: the interrupted code's rsp is saved at
	                      * rsp + cfa_offset and its rip 8 bytes above (the sigcontext) */
};

enum rbp_rule {
	RBP_SAME = 0,        /* the caller's rbp is this frame's rbp */
	RBP_AT_CFA = 1,      /* saved at CFA + rbp_offset */
	RBP_UNSUPPORTED = 2, /* unknown: a caller whose CFA is rbp-based cannot be found */
	RBP_AT_SP = 3,       /* saved at rsp + rbp_offset (a signal frame's sigcontext) */
};

/* Where the return address is: unwind_row.rbp_rule >> 4. */
enum ra_rule {
	RA_CFA_MINUS_8 = 0, /* at CFA-8 (x86-64's call pushed it) */
	RA_LR = 1,          /* arm64: still in x30, known only for the first frame */
	RA_AT_CFA = 2,      /* arm64: at CFA + rbp_offset; x29 not saved beside it */
	RA_ABOVE_FP = 3,    /* arm64: at CFA + rbp_offset + 8, x29 at CFA + rbp_offset */
};

struct unwind_row {
	__u32 pc;         /* ELF virtual address; the walk subtracts the mapping's load bias */
	__s32 cfa_offset;
	__s16 rbp_offset;
	__u8 cfa_rule;    /* enum cfa_rule */
	__u8 rbp_rule;    /* enum rbp_rule | enum ra_rule << 4 */
};

/* A file with an unwind table: the value of the `unwind_files` map, keyed by the file's
 * (ino, dev) as bpf/discover.bpf.c's `scanned` map is. */
struct unwind_file {
	__u32 module; /* the recording's module id (EventKind::Module), from 1 */
	__u32 first;  /* index of its first row in `unwind_rows`, across the chunks */
	__u32 count;  /* its rows */
	/* Its bucket index (src/unwind/index.rs), which narrows the walk's search for a row to a
	 * few: bucket b holds the offsets from base + (b << shift), and the index's word b is how
	 * many rows start before that. Words 0..=buckets, three to a row's 12 bytes, in the rows
	 * from `index` on. No index when buckets is 0. */
	__u32 index;
	__u32 base;
	__u32 buckets;
	__u32 shift;
};

/* Two rows per element of the `unwind_rows` array: array elements are padded to 8 bytes, and
 * two 12-byte rows fill 24 without a byte wasted. Row i is rows[i & 1] of element i >> 1. */
struct unwind_row_pair {
	struct unwind_row rows[2];
};

/* The `unwind_rows` chunks (bpf/stack.bpf.h): 2^UNWIND_CHUNK_SHIFT elements each (256 Ki rows,
 * 3 MiB: one holds a Python run's tables, three a C++ compile's), and at most UNWIND_CHUNKS of
 * them, 8 Mi rows in all. */
#define UNWIND_CHUNK_SHIFT 17
#define UNWIND_CHUNKS 32

/* The most frames a walk records; a deeper stack keeps its innermost STACK_MAX_DEPTH frames and
 * is marked truncated. */
#define STACK_MAX_DEPTH 127

/* How a walk ended; numbered as the MARK_* pseudo-frames of src/format/event.rs. */
enum stack_end {
	STACK_COMPLETE = 0,    /* at the outermost frame (_start, a thread's clone) */
	STACK_TRUNCATED = 1,   /* STACK_MAX_DEPTH frames, and more above */
	STACK_UNKNOWN = 2,     /* at a pc no unwind table covers (JIT code, a file not scanned) */
	STACK_UNSUPPORTED = 3, /* at CFI the walk cannot compute, or a stack it could not read */
};

/* Counters of the walks, per index of the `stack_stats` map. */
enum stack_stat {
	STAT_WALKS = 0,
	STAT_TRUNCATED = 1,
	STAT_UNKNOWN = 2,
	STAT_UNSUPPORTED = 3,
	STAT_COLLISIONS = 4, /* two stacks with one hash: the second was sent uncached */
	STAT_UNCACHED = 5,   /* the dedup map was full: the stack was sent uncached */
	STACK_STATS = 6,
};

/* A call stack seen for the first time: allocation events carry `id` in their stack_id. The
 * record is sent with only `depth` frames. */
struct stack_event {
	struct event_header h;
	__u32 id;    /* from 1 */
	__u32 depth; /* frames used */
	__u32 end;   /* enum stack_end */
	__u32 _pad;
	/* Innermost first: module << 32 | file offset. The first frame is the allocator's site;
	 * each caller's offset is its return address minus 1, inside the call instruction. */
	__u64 frames[STACK_MAX_DEPTH];
};

#endif /* MEMTRACK_EVENT_H */
