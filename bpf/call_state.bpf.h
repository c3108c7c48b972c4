/* SPDX-License-Identifier: (MIT OR Apache-2.0) */
/*
 * The allocator calls in progress per thread (alloc.bpf.c), in a map walk.bpf.c shares: with
 * sampled stacks, alloc.bpf.c's entry decides which calls are walked and tail-calls the walker,
 * a program of its own loaded beside the recorded command's start (src/record/walker.rs), which
 * stores the stack it walks where the entry said. One definition, so that the two objects' maps
 * match when user space makes the walker reuse the allocator's (bpf_map__reuse_fd).
 *
 * A call sampled before the walker is in place is walked at its return instead, by the walker
 * tail-called from the return, which then reports the call as alloc.bpf.c's return would: so
 * the return's report (call_exit) is here too, for both objects.
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

/* The slots of alloc.bpf.c's `walkers` program array, both for walk.bpf.c's alloc_walk: one
 * for the entry's tail call, one for the return's, so that a test can leave the first empty. */
enum walker_slot {
	WALKER_AT_ENTRY = 0,  /* tail-called by the sampled entry */
	WALKER_AT_RETURN = 1, /* by the sampled return, for a walk left to it */
	WALKER_SLOTS = 2,
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
	/* A walk left to the outermost call's return (alloc.bpf.c, "Sampled stacks"): */
	__u32 walk_at_return; /* 1 while one is due */
	__u32 muted; /* 1 while the outermost call entered with the gate closed: not reported */
	__u64 return_pc; /* the walked entry's pc: the stack's first frame */
	__u64 return_sp; /* the lowest stack pointer of a frame of its callers */
	__u64 outer_sp;  /* sp at the entry of the outermost call, or of the label around it */
};

/* The exponential draws of the sampling countdowns, user space's (alloc.bpf.c, "Sampled stacks"):
 * the allocator's, and the walker's over the pages faults make resident (walk.bpf.c). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, SAMPLE_DRAWS);
	__type(key, __u32);
	__type(value, __u32);
} sample_draws SEC(".maps");

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

static __always_inline void emit(__u32 kind, __u32 func, __u64 addr, __u64 size, __u64 old_addr,
				 __u32 stack)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct alloc_event *e = reserve(sizeof(*e), LOST_RING_ALLOC);

	if (!e)
		return;
	fill_header(&e->h, kind, id >> 32, (__u32)id);
	e->addr = addr;
	e->size = size;
	e->old_addr = old_addr;
	e->func = func;
	e->stack_id = stack;
	submit(e);
}

/* The outermost call returned `ret`; say what it did. */
static __always_inline int call_exit(struct pt_regs *ctx, __u64 ret)
{
	struct call_state *st = bpf_task_storage_get(&call_state, bpf_get_current_task_btf(), 0, 0);
	__u64 addr = ret;
	__u32 func;

	if (!st || !st->depth)
		return 0;
	if (--st->depth || st->muted)
		return 0;
	func = st->func;
	switch (st->layout) {
	case LAYOUT_PTR_SIZE:
	case LAYOUT_PTR_NMEMB_SIZE:
		if (!st->arg)
			break; /* realloc(NULL, n) is an allocation */
		if (ret) {
			emit(EV_REALLOC, func, ret, st->size, st->arg, st->stack);
		} else if (!st->size) {
			emit(EV_FREE, func, st->arg, 0, 0, 0); /* realloc(p, 0) freed p */
		} else {
			emit(EV_ALLOC_FAILED, func, 0, st->size, st->arg, 0);
		}
		return 0;
	case LAYOUT_MEMPTR_ALIGN_SIZE:
		/* Returns 0 and stores the block through memptr, or an error number. */
		addr = 0;
		if ((int)ret == 0 && bpf_probe_read_user(&addr, sizeof(addr), (void *)st->arg))
			addr = 0;
		break;
	}
	if (addr)
		emit(EV_ALLOC, func, addr, st->size, 0, st->stack);
	else
		emit(EV_ALLOC_FAILED, func, 0, st->size, 0, 0);
	return 0;
}

#endif /* MEMTRACK_CALL_STATE_BPF_H */
