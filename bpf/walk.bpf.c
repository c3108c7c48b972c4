// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * The walker of sampled stacks (issue 32): one program, in both slots of alloc.bpf.c's
 * `walkers` array, tail-called with the registers of an allocator call's entry or return.
 * - From alloc_enter_sampled, for a call the sampling countdown picked: it walks the stack
 *   (stack.bpf.h) and stores its id in the thread's call_state, which it shares with the
 *   allocator's object, where the entry said (`walk_for`): the call's stack, which its return
 *   reports, or the label's, which the call it makes takes.
 * - From alloc_exit_sampled, for a call whose entry came before the walker was in place
 *   (`walk_at_return`): it walks the entry's stack from the return (stack_id_at_return), then
 *   reports the call as alloc_exit_sampled would have.
 * One program for both, so that the verifier goes through the walk's functions once.
 *
 * An object of its own so that user space can load it after the recorded command has started:
 * its verification (the walk is some 2,000 instructions) is most of what stacks add to a
 * recording's start (src/record/walker.rs).
 */
#include "stack.bpf.h"
#include "call_state.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* False where the verifier refuses the walk's global functions with preemption off (6.10 to
 * about 6.16): user space then loads this object again with it cleared (walker.rs). */
const volatile bool walk_preempt_off SEC(".rodata.walk") = true;

/* Walks what the thread's call_state asks for; 1 if that was a return's walk, whose call is
 * then to be reported. */
static __always_inline int walk_asked(struct pt_regs *ctx)
{
	struct call_state *st = bpf_task_storage_get(&call_state, bpf_get_current_task_btf(), 0, 0);
	__u32 id;

	if (!st)
		return 0;
	if (st->walk_for != WALK_NONE) {
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
	if (!st->walk_at_return)
		return 0;
	st->walk_at_return = 0;
	/* The call's stack, which a labelled call took from its label. */
	id = stack_id_at_return((STACK_CTX *)ctx, st->return_pc, st->return_sp);
	if (id)
		st->stack = id;
	return 1;
}

SEC("uprobe.multi")
int alloc_walk(struct pt_regs *ctx)
{
	int at_return;

	if (walk_preempt_off)
		at_return = PREEMPT_OFF(walk_asked(ctx));
	else
		at_return = walk_asked(ctx);
	if (at_return)
		PREEMPT_OFF(call_exit(ctx, PT_REGS_RC(ctx)));
	return 0;
}
