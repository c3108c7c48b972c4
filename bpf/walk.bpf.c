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
 * fault_walk, attached to rss_stat after rss.bpf.c's program, walks the user stack of a task
 * that made its own process's pages resident (issue 35): see below.
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
		id = stack_id((STACK_CTX *)ctx, 1, 0);
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

/*
 * Resident memory by call site (issue 35). rss.bpf.c's rss_stat leaves an increase of a
 * resident counter that a task of the owning process made in its own context in
 * `fault_pending` (common.bpf.h); this program, attached after it on the same tracepoint, takes
 * it and walks the stack of the task's user registers: the instruction that faulted, or the
 * caller of the syscall that touched the memory (a read() into a fresh buffer, MAP_POPULATE).
 *
 * Sampled like allocations, by a countdown over the bytes made resident (pages times the page
 * size) with the same draws, scaled to a mean FAULT_SAMPLE_FACTOR times theirs (a walk per
 * fault of 4 KiB at the allocations' 16 KiB took a fifth of the faults: some 300 ns a fault
 * where the rest of memtrack takes about 1 us), and exact when the mean is 0 (`--stacks`): an increase of
 * s bytes is walked with probability 1 - exp(-s/R), which the report's estimator inverts. The
 * countdown is each CPU's, not each thread's: an exponential countdown has no memory, so how
 * the increases are shared out among countdowns leaves each one's chance as it is, and a
 * per-CPU value is a few nanoseconds where task storage was most of the program's cost on
 * every fault. (Faults are not reproducible from run to run anyway: fault-around, huge pages
 * and the page cache move them, so the allocations' reason for per-thread draws does not
 * hold.) Kernels before 6.2 hand a thread's faults to the counters 64 at a
 * time, so there an increase, and its stack, stand for the faults since the last.
 */
const volatile __u64 stack_sample_mean SEC(".rodata.sample") = 0; /* 0: walk every one */
const volatile __u32 page_size SEC(".rodata.page") = 4096;
/* The faults' mean interval is this many times the allocations' (src/record/stacks.rs,
 * FAULT_SAMPLE_FACTOR): the draws, made for the allocations, are scaled by it. */
const volatile __u32 fault_sample_factor SEC(".rodata.faults") = 1;

/* Per CPU: the countdown to the next walked increase, apart from the allocations' so that
 * faults do not move which allocations are sampled. */
struct fault_state {
	__u64 left;  /* bytes made resident before the next walked increase; 0 before the first */
	__u32 draw;  /* the index of the CPU's next draw in `sample_draws` */
	__u32 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fault_state);
} fault_states SEC(".maps");

/* The fault under way of a task (from the programs below, at its start), in the slot of
 * `fault_notes` its task_struct's address hashes to: not per CPU, since a task that sleeps in
 * its fault (reading the file in, reclaim) may come back on another CPU, and another task may
 * fault on its CPU meanwhile (the kernel matrix's 7.2 guest lost 7 of a child's 2,048 writes
 * to inherited pages so, with one per-CPU note). Two tasks of one slot faulting at once leave
 * the first's address unknown (0) and its write to an inherited page unseen. */
struct fault_note {
	__u64 task;	  /* the task_struct whose fault `addr` is; 0 once an increase took it */
	__u64 addr;	  /* its faulting address */
	__u64 touch_task; /* `task` until an increase of the fault (6.2 on) says it was no touch */
	/* Before 6.2, the task's own cached anon count as the fault began, and whether the fault
	 * hands the cache to the mm first (touch_walk, below). */
	__s32 split_anon;
	__u32 split_syncs;
};

#define FAULT_NOTE_BITS 12

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << FAULT_NOTE_BITS);
	__type(key, __u32);
	__type(value, struct fault_note);
} fault_notes SEC(".maps");

/* The current task's slot: Fibonacci hashing of its task_struct's address, whose low bits the
 * slab's alignment fixes. The address as a number (bpf_get_current_task), which the verifier
 * lets a program multiply, as it does not a pointer's. */
static __always_inline struct fault_note *fault_note_of_current(void)
{
	__u32 i = (bpf_get_current_task() * 0x9E3779B97F4A7C15ull) >> (64 - FAULT_NOTE_BITS);

	return bpf_map_lookup_elem(&fault_notes, &i);
}

/* Where a CPU's fault draws start in `sample_draws`: away from the allocations', and from the
 * other CPUs'. */
#define FAULT_DRAWS_START 8191u
#define FAULT_DRAWS_PER_CPU 1021u

static __always_inline __u64 fault_interval(struct fault_state *c)
{
	__u32 i = c->draw++ & (SAMPLE_DRAWS - 1);
	__u32 *v = bpf_map_lookup_elem(&sample_draws, &i);

	return (__u64)(v && *v ? *v : stack_sample_mean) * fault_sample_factor;
}

/* Whether an increase of `bytes` is walked, by this CPU's countdown `c`. */
static __always_inline bool fault_sampled(struct fault_state *c, __u64 bytes)
{
	__u64 mean = stack_sample_mean * fault_sample_factor;

	if (!mean || bytes >= mean)
		return true;
	if (!c->left) {
		c->draw = FAULT_DRAWS_START + bpf_get_smp_processor_id() * FAULT_DRAWS_PER_CPU;
		c->left = fault_interval(c);
	}
	if (c->left > bytes) {
		c->left -= bytes;
		return false;
	}
	c->left = fault_interval(c);
	return true;
}

/*
 * Before 6.2 (commit f1a7941243c1) a task counted its own faults' pages in task->rss_stat and
 * handed them to the mm (and rss_stat) every 64 faults, at the start of handle_mm_fault. There
 * an increase of a fault shows in that cache, not in rss_stat: the cache as the fault began,
 * and whether the fault hands it over first (emptying it), say what the fault itself added.
 */
struct task_rss_stat___split {
	int events;
	int count[4];
};

struct task_struct___split_rss {
	struct task_rss_stat___split rss_stat;
} __attribute__((preserve_access_index));

#define TASK_RSS_EVENTS_THRESH 64

static __always_inline bool split_rss(void)
{
	return bpf_core_field_exists(struct task_struct___split_rss, rss_stat);
}

static __always_inline void note_split_rss(struct fault_note *c, struct task_struct *task)
{
	struct task_struct___split_rss *t = (void *)task;

	c->split_anon = BPF_CORE_READ(t, rss_stat.count[1]);
	c->split_syncs = BPF_CORE_READ(t, rss_stat.events) > TASK_RSS_EVENTS_THRESH;
}

/* Whether the cached anon count grew in the fault that note_split_rss saw begin. */
static __always_inline bool split_rss_grew(struct fault_note *c, struct task_struct *task)
{
	struct task_struct___split_rss *t = (void *)task;
	int now = BPF_CORE_READ(t, rss_stat.count[1]);

	return now > (c->split_syncs ? 0 : c->split_anon);
}

/* The task's user registers, copied where the walk's global function can take them: a map
 * value is memory of a known size, as the uprobe's context is. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, STACK_CTX);
} fault_regs SEC(".maps");

/* Walks the stack of `task`'s user registers and sends it as a Fault of `pages` pages of
 * `member` at `addr` (0 pages: a write to an inherited page, touch_walk). */
static __always_inline int send_fault(struct task_struct *task, __u64 addr, __u32 pages,
				      __u32 member)
{
	struct call_state *st;
	struct fault_event *e;
	STACK_CTX *regs;
	__u32 zero = 0, id;
	__u64 id_pid, keep_sp = 0;

	regs = bpf_map_lookup_elem(&fault_regs, &zero);
	if (!regs)
		return 0;
	if (bpf_probe_read_kernel(regs, sizeof(*regs), (void *)bpf_task_pt_regs(task)))
		return 0;
	/* A fault in the allocator's own code (the chunk header of a fresh heap page) belongs to
	 * its caller, as the allocation does: the frames below the outermost call's entry go, or
	 * below the entry of the label around it (operator new around malloc). */
	st = bpf_task_storage_get(&call_state, task, 0, 0);
	if (st && st->depth && PT_REGS_SP(regs) <= st->sp)
		keep_sp = st->outer_sp;
	id = stack_id(regs, 0, keep_sp);
	e = reserve(sizeof(*e), LOST_RING_FAULT);
	if (!e)
		return 0;
	id_pid = bpf_get_current_pid_tgid();
	fill_header(&e->h, EV_FAULT, id_pid >> 32, (__u32)id_pid);
	e->addr = addr;
	e->pages = pages;
	e->member = member;
	e->stack_id = id;
	e->_pad = 0;
	submit(e);
	return 0;
}

static __always_inline int walk_fault(void)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct fault_state *c;
	struct fault_pending *f;
	struct fault_note *n;
	__u32 zero = 0, pages, member;
	__u64 addr = 0;

	f = bpf_map_lookup_elem(&fault_pending, &zero);
	if (!f || f->task != (__u64)task)
		return 0;
	f->task = 0;
	pages = f->pages;
	member = f->member;
	n = fault_note_of_current();
	if (n && n->task == (__u64)task) {
		addr = n->addr;
		n->task = 0;
		/* The fault made a page resident: a write to the zero page, or to a private file
		 * page, which copy-on-write replaced with a new anonymous page. Not a write to an
		 * inherited page (touch_walk). Before 6.2 the increase seen may be earlier faults',
		 * and the cached count tells instead. */
		if (!split_rss())
			n->touch_task = 0;
	}
	c = bpf_map_lookup_elem(&fault_states, &zero);
	if (!c || !fault_sampled(c, (__u64)pages * page_size))
		return 0;
	return send_fault(task, addr, pages, member);
}

/* Keeps `address`, the current task's fault under way, for the increase it makes (fault_walk)
 * and for touch_walk, whatever the task: a test of `tracked` would cost more than the stores.
 * Before 6.2 the increase seen may be an earlier fault's, handed over with this one (see
 * above). */
static __always_inline int note_fault(unsigned long address)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct fault_note *n = fault_note_of_current();

	if (n) {
		n->task = (__u64)task;
		n->touch_task = (__u64)task;
		n->addr = address;
		if (split_rss())
			note_split_rss(n, task);
	}
	return 0;
}

/* Where a fault's address is seen (src/record/walker.rs attaches what this architecture has):
 * x86's exception tracepoints, for faults in user code and in the kernel (a syscall touching
 * user memory, copy_to_user); elsewhere every fault's entry, handle_mm_fault, which
 * get_user_pages (MAP_POPULATE, madvise) goes through too, by kprobe. */
#if defined(__TARGET_ARCH_x86)
SEC("tp_btf/page_fault_user")
int BPF_PROG(fault_address_user, unsigned long address, struct pt_regs *regs, unsigned long code)
{
	return note_fault(address);
}

SEC("tp_btf/page_fault_kernel")
int BPF_PROG(fault_address_kernel, unsigned long address, struct pt_regs *regs,
	     unsigned long code)
{
	return note_fault(address);
}
#else
SEC("kprobe/handle_mm_fault")
int BPF_KPROBE(fault_address, struct vm_area_struct *vma, unsigned long address)
{
	return note_fault(address);
}
#endif

/*
 * A write to a page the process inherited at fork (issue 35's "[inherited]"). Copy-on-write
 * replaces the shared page with the process's own copy, or takes it over when no one else
 * maps it any more, and either way no resident counter changes: rss_stat never sees it. The
 * kernel's write-protect fault, do_wp_page, does, and at its return (fexit: a kretprobe's
 * program is a kprobe's, whose walk would take only its own registers) a fault that made no
 * page resident (the increases above clear `touch_task`) was such a write, or the write that
 * ends a process's own sharing with a child it forked, or the first write to a page made
 * read-only for another reason (soft-dirty, uffd-wp): the report takes a page from
 * "[inherited]" for it only while the process has some left, and here only a process with
 * inherited pages not yet written counts (common.bpf.h's `inheriting`). Sampled as faults
 * are, a page at a time; sent as a Fault of 0 pages (src/format/event.rs). Loaded only where
 * fentry programs load and the kernel's BTF has do_wp_page (src/preflight, `touches`).
 */
#define TOUCH_UNDONE                                                                       \
	(VM_FAULT_OOM | VM_FAULT_SIGBUS | VM_FAULT_HWPOISON | VM_FAULT_HWPOISON_LARGE |       \
	 VM_FAULT_SIGSEGV | VM_FAULT_RETRY | VM_FAULT_FALLBACK | VM_FAULT_COMPLETED)

static __always_inline int walk_touch(vm_fault_t ret)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 zero = 0, tgid = bpf_get_current_pid_tgid() >> 32;
	struct fault_state *c;
	struct fault_note *n;
	__s64 *left;

	if (ret & TOUCH_UNDONE)
		return 0;
	left = bpf_map_lookup_elem(&inheriting, &tgid);
	if (!left || *left <= 0)
		return 0;
	n = fault_note_of_current();
	if (!n || n->touch_task != (__u64)task)
		return 0;
	n->touch_task = 0;
	if (split_rss() && split_rss_grew(n, task))
		return 0;
	__sync_fetch_and_add(left, -1);
	c = bpf_map_lookup_elem(&fault_states, &zero);
	if (!c || !fault_sampled(c, page_size))
		return 0;
	return send_fault(task, n->addr, 0, 1);
}

SEC("fexit/do_wp_page")
int BPF_PROG(touch_walk, struct vm_fault *vmf, vm_fault_t ret)
{
	if (walk_preempt_off)
		return PREEMPT_OFF(walk_touch(ret));
	return walk_touch(ret);
}

SEC("tp_btf/rss_stat")
int BPF_PROG(fault_walk, struct mm_struct *mm, int member)
{
	if (walk_preempt_off)
		return PREEMPT_OFF(walk_fault());
	return walk_fault();
}
