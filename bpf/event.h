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
};

/* Why an event was lost; index into the `lost` map. Names in src/record/decode.rs. */
enum lost_cause {
	LOST_RING_ALLOC = 0,     /* ring buffer full: an allocator event */
	LOST_RING_LIFECYCLE = 1, /* ring buffer full: fork, exec or exit */
	LOST_RING_RSS = 2,       /* ring buffer full: a resident-memory change */
	LOST_STATE_FULL = 3,     /* per-thread call state map full: the call was not seen */
	LOST_TRACKED_FULL = 4,   /* tracked-process map full: a new process was not tracked */
	LOST_CAUSES = 5,
};

/* Values of the `tracked` map. */
enum tracked_state {
	TRACK_PROCESS = 1, /* record this process */
	TRACK_SPAWNER = 2, /* do not record this process, but record the children it creates */
};

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

#endif /* MEMTRACK_EVENT_H */
