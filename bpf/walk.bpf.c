// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * The walker of sampled stacks (issue 32): two programs in alloc.bpf.c's `walkers` array.
 * - alloc_walk, tail-called by alloc_enter_sampled for an allocator call the sampling countdown
 *   picked, with the entry's registers. It walks the stack (stack.bpf.h) and stores its id in
 *   the thread's call_state, which it shares with the allocator's object, where the entry said
 *   (`walk_for`): the call's stack, which its return reports, or the label's, which the call it
 *   makes takes.
 * - alloc_walk_return, tail-called by alloc_exit_sampled for a call whose entry came before the
 *   walker was in place: it walks the entry's stack from the return (stack_id_at_return), then
 *   reports the call as alloc_exit_sampled would have.
 *
 * An object of its own so that user space can load it after the recorded command has started:
 * its verification (the walk is some 2,000 instructions) and its 48 MiB rows array are most of
 * what stacks add to a recording's start (src/record/walker.rs).
 */
#include "stack.bpf.h"
#include "call_state.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* As alloc.bpf.c's: false where the verifier refuses the walk's global functions with
 * preemption off (6.10 to about 6.16), and user space loads this object again. */
const volatile bool walk_preempt_off SEC(".rodata.walk") = true;

static __always_inline int walk_for_entry(struct pt_regs *ctx)
{
	struct call_state *st = bpf_task_storage_get(&call_state, bpf_get_current_task_btf(), 0, 0);
	__u32 id;

	if (!st || st->walk_for == WALK_NONE)
		return 0;
	id = stack_id((STACK_CTX *)ctx);
	if (id) {
		if (st->walk_for == WALK_LABEL)
			st->label_stack = id;
		else
			st->stack = id;
	}
	st->walk_for = WALK_NONE;
	return 0;
}

SEC("uprobe.multi")
int alloc_walk(struct pt_regs *ctx)
{
	if (walk_preempt_off)
		PREEMPT_OFF(walk_for_entry(ctx));
	else
		walk_for_entry(ctx);
	return 0;
}

static __always_inline int walk_for_return(struct pt_regs *ctx)
{
	struct call_state *st = bpf_task_storage_get(&call_state, bpf_get_current_task_btf(), 0, 0);
	__u32 id;

	if (!st || !st->walk_at_return)
		return 0;
	st->walk_at_return = 0;
	/* The call's stack, which a labelled call took from its label. */
	id = stack_id_at_return((STACK_CTX *)ctx, st->return_pc, st->return_sp);
	if (id)
		st->stack = id;
	return 0;
}

SEC("uretprobe.multi")
int BPF_URETPROBE(alloc_walk_return, __u64 ret)
{
	if (walk_preempt_off)
		PREEMPT_OFF(walk_for_return(ctx));
	else
		walk_for_return(ctx);
	return PREEMPT_OFF(call_exit(ctx, ret));
}
