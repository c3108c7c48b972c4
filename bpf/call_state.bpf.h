/* SPDX-License-Identifier: (MIT OR Apache-2.0) */
/*
 * The allocator calls in progress per thread (alloc.bpf.c), in a map walk.bpf.c shares: with
 * sampled stacks, alloc.bpf.c's entry decides which calls are walked and tail-calls the walker,
 * a program of its own loaded beside the recorded command's start (src/record/walker.rs), which
 * stores the stack it walks where the entry said. One definition, so that the two objects' maps
 * match when user space makes the walker reuse the allocator's (bpf_map__reuse_fd).
 */
#ifndef MEMTRACK_CALL_STATE_BPF_H
#define MEMTRACK_CALL_STATE_BPF_H

#include "common.bpf.h"

/* Which stack of the thread's call_state the walker fills (call_state.walk_for). */
enum walk_for {
	WALK_NONE = 0,
	WALK_CALL = 1,  /* the outermost call's, `stack` */
	WALK_LABEL = 2, /* the label's, `label_stack` */
};

/* Per thread: the outermost allocator call in progress (alloc.bpf.c). */
struct call_state {
	__u64 sp;       /* stack pointer at the outermost call's entry */
	__u64 size;     /* requested bytes */
	__u64 arg;      /* realloc: the old pointer; posix_memalign: where the result is stored */
	__u32 depth;    /* allocator calls in progress on this thread; 0 when idle */
	__u32 func;     /* enum alloc_func of the outermost call */
	__u32 layout;   /* enum alloc_layout of the outermost call */
	__u32 label;    /* enum alloc_func of a LAYOUT_LABEL entry in progress, 0 when none */
	__u64 label_sp; /* the stack pointer at that entry */
	__u64 label_size; /* the bytes it was asked for */
	__u64 free_ptr; /* the last block a free-like entry point reported, 0 once anything allocates */
	__u64 free_sp;  /* the stack pointer at that entry */
	__u32 stack;    /* the call stack id of the outermost call (stack.bpf.h), 0 if none */
	__u32 label_stack; /* the call stack id taken at the label's entry */
	__u64 countdown; /* requested bytes left before the next sampled allocation */
	__u32 draw;      /* the index of this thread's next draw in `sample_draws` */
	__u32 sampling;  /* 1 once countdown and draw are set */
	__u32 ordinal;   /* this thread's order among its process's threads to call an allocator */
	__u32 walk_for;  /* enum walk_for: the walk walk.bpf.c is to make after this entry */
};

/* Kept in the thread's own task storage, which the kernel frees with the thread: a lookup is a
 * pointer or two away, where a hash map keyed by tid cost a hash and a bucket walk on every
 * call. Only threads of tracked processes get one, so it also stands for the tracked check:
 * the hash map of tracked processes is looked up once per thread, at its first call, instead
 * of at every call (a process's tracked state never changes while it lives). Threads of other
 * processes find no state and pay that lookup on each call, as before. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct call_state);
} call_state SEC(".maps");

#endif /* MEMTRACK_CALL_STATE_BPF_H */
