// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * Allocator probes: a uprobe at each entry point, a uretprobe where the result is needed, and
 * the free-like entry points, which need no return. The programs are short adapters over
 * call_enter and call_exit, and serve every allocator alike (glibc, C++ operator new/delete,
 * jemalloc, mimalloc, tcmalloc, wherever they are linked): the attach cookie says which label
 * the entry point reports (enum alloc_func) and how it takes its arguments (enum alloc_layout).
 *
 * Exactly once: allocators call each other and themselves (operator new calls malloc;
 * realloc(NULL, n) and memalign with a small alignment reach glibc's malloc; realloc(p, 0)
 * reaches free; docs/kernel-facts.md). So each thread keeps the outermost call in progress in
 * `call_state`: a call that starts while another is in progress on the same thread, deeper on
 * the stack, is internal and produces no event; only the outermost call's return does. A tail
 * call (operator new[] jumping to operator new, realloc(NULL, n) to malloc) enters at the same
 * stack pointer and is nested too: the kernel runs both return probes at the one return, and
 * the outermost label stays. The stack pointer makes this robust against a return that was
 * never seen (a longjmp out of an allocator): a call that starts above the recorded frame
 * cannot be nested in it, so the stale state is replaced.
 *
 * Free-like entry points have no return probe, so their nesting cannot be told by depth:
 * operator delete calls (or tail-jumps to) free with the same pointer, one frame deeper or in
 * the same frame. The thread remembers the last block it reported freed and the stack pointer
 * of that entry; a free of the same block at or below that frame is the same release. Any
 * allocation clears it, so a later release of a block reusing the address counts again.
 *
 * Labels: a uretprobe replaces the return address on the stack, and C++ unwinding cannot pass
 * through such a frame (std::terminate instead of the bad_alloc a program would catch; also
 * inside libstdc++'s nothrow new, which throws and catches internally). So operator new that
 * only wraps a probed malloc (libstdc++, libc++) gets no return probe: its entry (LAYOUT_LABEL)
 * marks the thread, and the malloc it calls reports the block under the label of the
 * outermost operator new.
 *
 * The measuring gate (common.bpf.h) is read where an outermost call starts, never at a return
 * (frees are recorded whatever it says, see free_enter): a call that entered while the gate was
 * open is recorded even if it returns after `stop`, and one that entered while it was closed is
 * not recorded even if it returns after `start`. Calls nested in a call in progress follow
 * their outer call, so flipping the gate never leaves half a call recorded: a call entered
 * while closed is followed like any other, muted, so that the blocks an allocator makes for
 * its own bookkeeping after `start` (tracemalloc's hooks inside PyMem_Calloc) stay internal.
 */
#include "call_state.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* This thread's state if its process is tracked, created on its first call; NULL otherwise. */
static __always_inline struct call_state *thread_state(__u32 tgid)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct call_state *st = bpf_task_storage_get(&call_state, task, 0, 0);
	__u32 *tracked_value;

	if (st)
		return st;
	tracked_value = bpf_map_lookup_elem(&tracked, &tgid);
	if (!tracked_value || (*tracked_value & TRACK_STATE_MASK) != TRACK_PROCESS)
		return 0;
	st = bpf_task_storage_get(&call_state, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st) {
		count_lost(LOST_STATE_FULL);
		return 0;
	}
	/* Numbered in the process's own count, which its tracked entry carries (event.h). Read,
	 * then added to: a fetching add needs -mcpu=v3, and two threads that race to their first
	 * call (and may share a number) would not sample reproducibly anyway. */
	st->ordinal = *tracked_value >> TRACK_THREAD_SHIFT;
	__sync_fetch_and_add(tracked_value, 1u << TRACK_THREAD_SHIFT);
	return st;
}

/*
 * Sampled stacks (issue 32; docs/PERFORMANCE.md, "Sampled stacks"). With `stack_sample_mean` R set,
 * the stack of an allocation is walked when a Poisson process over the thread's requested bytes
 * (mean interval R) has a point inside it: each thread counts down the bytes to its next point,
 * drawn from an exponential distribution; an allocation of s bytes is walked when the countdown
 * is at most s, and the next interval is drawn afresh, the part of this one past the point
 * discarded. By the exponential's lack of memory, the countdown at any allocation is a fresh
 * draw, so an allocation of s bytes is walked with probability 1 - exp(-s/R) whatever came
 * before, which the report's estimator inverts. An allocation of R bytes or more is always
 * walked and leaves the countdown alone. A zero-byte allocation counts as one byte.
 *
 * The draws are user space's (it has floating point and a seeded generator): `sample_draws`
 * holds SAMPLE_DRAWS of them, and each thread reads them in order from a start its ordinal in
 * its process picks, so two recordings of a deterministic program walk the same allocations.
 *
 * The walker is a program of its own (walk.bpf.c), loaded beside the command's start, not before
 * it. A call sampled before it is in place is walked at the outermost call's return instead: the
 * entry stops the process (STOP_WALKER), user space continues it once the walker is in place,
 * and the return tail-calls the walker, which walks from there, then reports the call. Its
 * callers' frames are as they were at the entry, so that walk gives the entry's stack exactly
 * (stack.bpf.h, stack_id_at_return), and every sampled call is walked, however late the walker:
 * the sample stays reproducible and the command is held only when, and as long as, a sampled
 * call needs the walker.
 *
 * `--stacks` is the same with a mean of 0: every call is sampled, and the walker walks each.
 */
const volatile __u64 stack_sample_mean SEC(".rodata.sample") = 0; /* 0: walk every one */

static __always_inline __u64 next_interval(struct call_state *st)
{
	__u32 i = st->draw++ & (SAMPLE_DRAWS - 1);
	__u32 *v = bpf_map_lookup_elem(&sample_draws, &i);

	return v && *v ? *v : stack_sample_mean;
}

/* Whether the stack of an allocation of `size` bytes is walked (see above). */
static __always_inline bool sampled(struct call_state *st, __u64 size)
{
	__u64 mean = stack_sample_mean;

	if (!mean || size >= mean)
		return true;
	if (!size)
		size = 1;
	if (!st->sampling) {
		/* Threads start far apart in the draws: 10,126 is about 2^14 / phi. */
		st->draw = st->ordinal * 10126u;
		st->countdown = next_interval(st);
		st->sampling = 1;
	}
	if (st->countdown > size) {
		st->countdown -= size;
		return false;
	}
	st->countdown = next_interval(st);
	return true;
}

/* How an entry program walks stacks: a constant of each (alloc_enter, alloc_enter_sampled), so
 * that clang leaves out what a program does not do. */
enum walks {
	WALKS_NONE = 0,  /* no stacks (`--no-stacks`) */
	WALKS_LATER = 1, /* walked by walk.bpf.c's program, tail-called after the entry: a sample,
			  * or every stack (`--stacks`, a mean of 0) */
};

/* The stack id an outermost call (or label, `walk_for`) of `size` bytes carries: 0 if not
 * walked; one left to the walker is STACK_ID_MISSING until the walker replaces it
 * (`st->walk_for` says where; see alloc_enter_sampled). */
static __always_inline __u32 stack_of(struct pt_regs *ctx, struct call_state *st, __u64 size,
				      enum walks walks, __u32 walk_for)
{
	if (walks == WALKS_NONE)
		return 0;
	if (!sampled(st, size))
		return 0;
	st->walk_for = walk_for;
	return STACK_ID_MISSING;
}

static __always_inline __u64 mul_saturating(__u64 a, __u64 b)
{
	__u64 limit;

	if (!a || !((a | b) >> 32))
		return a * b;
	limit = ~0ULL / a;
	/* Keep clang from turning the check into a 128-bit multiply, which BPF lacks. */
	asm volatile("" : "+r"(limit));
	return b > limit ? ~0ULL : a * b;
}

/* Returns 1 when the walker is to walk this call's stack (WALKS_LATER), else 0. */
static __always_inline int call_enter(struct pt_regs *ctx, __u32 func, __u32 layout, __u64 size,
				      __u64 arg, enum walks walks)
{
	__u64 sp = PT_REGS_SP(ctx);
	struct call_state *st = thread_state(bpf_get_current_pid_tgid() >> 32);
	bool labelled;

	if (!st)
		return 0;
	if (st->depth && sp <= st->sp) {
		st->depth++; /* nested inside an allocator call: internal */
		return 0;
	}
	if (!gate_open()) {
		/* Followed, muted, to its return, so that what it calls is internal; a stale
		 * call, label or remembered free goes with it. A realloc still releases its old
		 * block, which may be one allocated while measuring (see free_enter): it is
		 * reported as a free at the entry, since the return reports nothing (a failed
		 * realloc, which keeps the block, is the one case this counts wrong, as freed). */
		st->sp = sp;
		st->outer_sp = sp;
		st->depth = 1;
		st->muted = 1;
		st->label = 0;
		st->free_ptr = 0;
		st->walk_at_return = 0;
		if ((layout == LAYOUT_PTR_SIZE || layout == LAYOUT_PTR_NMEMB_SIZE) && arg)
			emit(EV_FREE, func, arg, 0, 0, 0);
		return 0;
	}
	st->muted = 0;
	labelled = false;
	if (st->label) {
		if (sp <= st->label_sp) {
			/* The block operator new asked for (aligned new rounds the size it passes on
			 * to aligned_alloc up), and the stack taken at its entry. */
			func = st->label;
			size = st->label_size;
			st->stack = st->label_stack;
			labelled = true;
		}
		st->label = 0;
	}
	st->walk_for = WALK_NONE;
	if (!labelled) {
		/* A label's walk left to the return carries over to the call it labels. */
		st->walk_at_return = 0;
		st->stack = stack_of(ctx, st, size, walks, WALK_CALL);
	}
	st->sp = sp;
	st->outer_sp = labelled ? st->label_sp : sp;
	st->size = size;
	st->arg = arg;
	st->depth = 1;
	st->func = func;
	st->layout = layout;
	st->free_ptr = 0;
	return st->walk_for != WALK_NONE;
}

/* An entry that only labels the allocator call it makes (see "Labels" above). The outermost
 * label wins: operator new[] calling operator new reports new[]. */
static __always_inline int label_enter(struct pt_regs *ctx, __u32 func, __u64 size,
				       enum walks walks)
{
	__u64 sp = PT_REGS_SP(ctx);
	struct call_state *st = thread_state(bpf_get_current_pid_tgid() >> 32);

	if (!st)
		return 0;
	if (st->depth) {
		if (sp <= st->sp)
			return 0; /* inside an allocator call already */
		st->depth = 0; /* a stale call whose return was never seen */
	}
	if (st->label && sp <= st->label_sp)
		return 0; /* inside an outer label (or jumped to from it) */
	st->label = func;
	st->label_sp = sp;
	st->label_size = size;
	st->walk_for = WALK_NONE;
	st->walk_at_return = 0;
	st->label_stack = walks != WALKS_NONE && gate_open() ?
				  stack_of(ctx, st, size, walks, WALK_LABEL) : 0;
	return st->walk_for != WALK_NONE;
}

/* Argument `i` (0-based) of the function whose probe fired, where the cookie says the
 * function's first instructions copied it before the site (enum arg_reg,
 * src/record/placement.rs), or `own` (its ABI register) when they did not. `regs` is a copy of
 * the context on the stack: the verifier allows only constant offsets into the context, and
 * clang turns a switch over context fields into one load at a computed offset. */
static __always_inline __u64 arg_at(const struct pt_regs *regs, __u64 cookie, int i, __u64 own)
{
#if defined(__TARGET_ARCH_arm64)
	/* arm64 placement (src/binary/placement.rs) keeps every probe at the function's entry, so
	 * each argument is still in its own register there (x0-x2): no cookie names another one. */
	return own;
#else
	switch ((cookie >> (COOKIE_ARGS_SHIFT + i * COOKIE_ARG_BITS)) & 0xf) {
	case ARG_RDI: return regs->di;
	case ARG_RSI: return regs->si;
	case ARG_RDX: return regs->dx;
	case ARG_RCX: return regs->cx;
	case ARG_R8: return regs->r8;
	case ARG_R9: return regs->r9;
	case ARG_RAX: return regs->ax;
	case ARG_R10: return regs->r10;
	case ARG_R11: return regs->r11;
	case ARG_RBX: return regs->bx;
	case ARG_RBP: return regs->bp;
	case ARG_R12: return regs->r12;
	case ARG_R13: return regs->r13;
	case ARG_R14: return regs->r14;
	case ARG_R15: return regs->r15;
	default: return own; /* ARG_OWN_REG */
	}
#endif
}

/* The first three arguments at the site, in a[0..2] (see arg_at). Most sites read them from
 * their own registers and skip the copy. */
static __always_inline void args_at(struct pt_regs *ctx, __u64 cookie, __u64 a[3])
{
	struct pt_regs regs;

	a[0] = PT_REGS_PARM1(ctx);
	a[1] = PT_REGS_PARM2(ctx);
	a[2] = PT_REGS_PARM3(ctx);
	if (!(cookie >> COOKIE_ARGS_SHIFT))
		return;
	__builtin_memcpy(&regs, ctx, sizeof(regs));
	a[0] = arg_at(&regs, cookie, 0, a[0]);
	a[1] = arg_at(&regs, cookie, 1, a[1]);
	a[2] = arg_at(&regs, cookie, 2, a[2]);
}

/*
 * One entry program serves every entry point that returns a block: the attach cookie holds the
 * enum alloc_func the site reports, the enum alloc_layout that says how to read its arguments,
 * and where they are. One program means one uprobe_multi link per file for all of them, and one
 * kernel grace period to detach them all.
 */
static __always_inline int alloc_enter_with(struct pt_regs *ctx, enum walks walks)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u32 func = cookie & COOKIE_FUNC_MASK;
	__u32 layout = (cookie >> COOKIE_LAYOUT_SHIFT) & 0xff;
	__u64 a[3], a1, a2, a3;

	args_at(ctx, cookie, a);
	a1 = a[0];
	a2 = a[1];
	a3 = a[2];

	/* A call_enter per layout, each inlined: one call_enter for all of them made a shorter
	 * program, but a stack frame 32 bytes deeper, past what 6.1's verifier allowed the
	 * entry and the walk's three calls together (512 bytes) when the entry walked inline. */
	switch (layout) {
	case LAYOUT_NMEMB_SIZE:
		return call_enter(ctx, func, layout, mul_saturating(a1, a2), 0, walks);
	case LAYOUT_PTR_SIZE:
		return call_enter(ctx, func, layout, a2, a1, walks);
	case LAYOUT_PTR_NMEMB_SIZE:
		return call_enter(ctx, func, layout, mul_saturating(a2, a3), a1, walks);
	case LAYOUT_ALIGN_SIZE:
		return call_enter(ctx, func, layout, a2, 0, walks);
	case LAYOUT_MEMPTR_ALIGN_SIZE:
		return call_enter(ctx, func, layout, a3, a1, walks);
	case LAYOUT_LABEL:
		return label_enter(ctx, func, a1, walks);
	default: /* LAYOUT_SIZE */
		return call_enter(ctx, func, LAYOUT_SIZE, a1, 0, walks);
	}
}

/* Loaded when no stacks are recorded (user space switches the others off before load). A probe
 * program returns 0: a classic uprobe's perf event would otherwise be written too. */
SEC("uprobe.multi")
int alloc_enter(struct pt_regs *ctx)
{
	PREEMPT_OFF(alloc_enter_with(ctx, WALKS_NONE));
	return 0;
}

/* The walker of sampled stacks, walk.bpf.c's programs (enum walker_slot), once user space has
 * loaded them (their verification is most of what stacks add to a recording's start, so they
 * load beside the command's start rather than before it: src/record/walker.rs) and the unwind
 * tables of the files found so far. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, WALKER_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} walkers SEC(".maps");

/* Element 0 is 1 once the walker will never be in place (it failed to load; user space sets it,
 * src/record/walker.rs): a sampled call then keeps no stack, reported as such ("[no stack]"),
 * instead of stopping its process for nothing, once per sampled call: every call, with
 * `--stacks`. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} walker_failed SEC(".maps");

/* The entry found no walker to tail-call: leave the walk to the outermost call's return, and
 * stop the process until user space has put the walker in place (see "Sampled stacks"). */
static __always_inline int walk_at_return(struct pt_regs *ctx)
{
	struct call_state *st = bpf_task_storage_get(&call_state, bpf_get_current_task_btf(), 0, 0);
	__u64 id = bpf_get_current_pid_tgid();
	__u32 zero = 0, *failed;

	if (!st)
		return 0;
	st->walk_for = WALK_NONE;
	failed = bpf_map_lookup_elem(&walker_failed, &zero);
	if (failed && *failed)
		return 0;
	st->walk_at_return = 1;
	st->return_pc = PT_REGS_IP(ctx);
	st->return_sp = PT_REGS_SP(ctx) + RETURN_ADDRESS_BYTES;
	stop(id >> 32, (__u32)id, STOP_WALKER);
	return 0;
}

/* Loaded when a sample of the stacks is walked: the entry decides which calls are (countdown in
 * `call_state`), and tail-calls the walker for them, with preemption back on, as the walk needs
 * on some kernels (see walk_preempt_off). Until the walker is in `walkers` the tail call does
 * nothing, and the walk is left to the return. */
SEC("uprobe.multi")
int alloc_enter_sampled(struct pt_regs *ctx)
{
	if (PREEMPT_OFF(alloc_enter_with(ctx, WALKS_LATER))) {
		bpf_tail_call(ctx, &walkers, WALKER_AT_ENTRY);
		PREEMPT_OFF(walk_at_return(ctx));
	}
	return 0;
}

/* One return program serves every entry point: the state says which call it was. */
SEC("uretprobe.multi")
int BPF_URETPROBE(alloc_exit, __u64 ret)
{
	return PREEMPT_OFF(call_exit(ctx, ret));
}

/* Whether the outermost call returning now has its walk left to its return. */
static __always_inline bool walk_due(void)
{
	struct call_state *st = bpf_task_storage_get(&call_state, bpf_get_current_task_btf(), 0, 0);

	return st && st->walk_at_return && st->depth == 1;
}

/* The return program with sampled stacks: as alloc_exit, but a call whose walk was left to its
 * return goes to the walker, which walks, then reports the call. Should the walker be missing
 * (it failed to load), the call is reported here, its stack STACK_ID_MISSING: a "[no stack]"
 * site, shown, never dropped. */
SEC("uretprobe.multi")
int BPF_URETPROBE(alloc_exit_sampled, __u64 ret)
{
	if (PREEMPT_OFF(walk_due()))
		bpf_tail_call(ctx, &walkers, WALKER_AT_RETURN);
	return PREEMPT_OFF(call_exit(ctx, ret));
}

/* Free-like entry points (free, operator delete, dallocx, mi_free, ...) need no return probe;
 * the cookie is the enum alloc_func they report, and where their argument is. A free inside another allocator call
 * (realloc(p, 0) reaching free) is internal: the outer call reports it. A free of the block
 * this thread just reported, in the same frame or deeper, is that release passed on (operator
 * delete to free). */
static __always_inline int free_enter_with(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u64 sp = PT_REGS_SP(ctx);
	struct call_state *st;
	__u64 a[3];
	void *ptr;

	args_at(ctx, cookie, a);
	ptr = (void *)a[0];

	if (!ptr)
		return 0;
	st = thread_state(bpf_get_current_pid_tgid() >> 32);
	if (!st)
		return 0;
	if (st->depth) {
		if (sp <= st->sp)
			return 0;
		st->depth = 0; /* a stale call whose return was never seen */
	}
	if (st->free_ptr == (__u64)ptr && sp <= st->free_sp)
		return 0;
	st->free_ptr = (__u64)ptr;
	st->free_sp = sp;
	/* Recorded whatever the gate says: a block allocated while measuring is often freed
	 * after `stop` (a harness's bookkeeping for the command that stops it), and without its
	 * free it would count as a leak of the benchmark. The report ignores a paused free of a
	 * block it never saw allocated. */
	emit(EV_FREE, cookie & COOKIE_FUNC_MASK, (__u64)ptr, 0, 0, 0);
	return 0;
}

SEC("uprobe.multi")
int free_enter(struct pt_regs *ctx)
{
	return PREEMPT_OFF(free_enter_with(ctx));
}
