// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * Resident memory from the kernel's rss_stat tracepoint: every change of an mm's file, anon,
 * swap-entry and shmem counters, charged to the process that owns the mm (mm->owner), not to
 * whichever task ran (reclaim, process_madvise, a parent filling a child's counters at fork).
 *
 * Values are exact: mm->rss_stat[m] is a percpu_counter whose `count` lags by up to the per-CPU
 * batch; the exact value adds every CPU's pending part (see rss_exact).
 *
 * The stream carries, per change, the signed delta since the last value seen for that process
 * and member, and the new absolute value; the report keeps the signed per-pid accounting.
 */
#include "common.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define MAX_CPUS 512
#define NR_MEMBERS 4

/* A member not seen yet in `struct rss_last`: its first change is its whole value. */
#define RSS_UNSEEN ((__s64)1 << 63)

/* Per process, the last value seen of each member, in pages: the base of the next delta. */
struct rss_last {
	__s64 pages[NR_MEMBERS];
};

/* tgid -> its members' last values. One entry per process, not per member: a hash map's
 * buckets are allocated and set up at creation, however empty, and MAX_TRACKED * NR_MEMBERS
 * of them were 4 MiB of every recording's start. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MAX_TRACKED);
	__type(key, __u32);
	__type(value, struct rss_last);
} rss_last SEC(".maps");

/* The last values of process `tgid`, made (every member unseen) if it has none. */
static __always_inline struct rss_last *rss_last_of(__u32 tgid)
{
	struct rss_last *last = bpf_map_lookup_elem(&rss_last, &tgid);
	struct rss_last unseen = {
		.pages = { RSS_UNSEEN, RSS_UNSEEN, RSS_UNSEEN, RSS_UNSEEN },
	};
	_Static_assert(NR_MEMBERS == 4, "one RSS_UNSEEN above per member");

	if (last)
		return last;
	/* Another CPU may make it first (two members of one process changing at once): then
	 * NOEXIST fails and the lookup finds that one. */
	bpf_map_update_elem(&rss_last, &tgid, &unseen, BPF_NOEXIST);
	return bpf_map_lookup_elem(&rss_last, &tgid);
}

/* One-entry per-CPU array whose element addresses reveal each CPU's per-CPU offset. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} cpu_probe SEC(".maps");

/* The numeric value of a pointer, which the verifier would otherwise not let us do arithmetic
 * on (map pointers, map values): copied out of the stack slot it is spilled to. */
static __always_inline __u64 address_of(const void *p)
{
	__u64 v = 0;

	bpf_probe_read_kernel(&v, sizeof(v), &p);
	return v;
}

struct pending_sum {
	__u64 counters; /* the percpu_counter's __percpu s32 array */
	__u64 base;     /* cpu_probe's raw per-CPU pointer */
	__s64 value;
};

/* bpf_loop body: add CPU `cpu`'s pending part; stop past the last possible CPU. */
static long add_pending(__u64 cpu, void *data)
{
	struct pending_sum *sum = data;
	__u32 zero = 0;
	void *elem = bpf_map_lookup_percpu_elem(&cpu_probe, &zero, cpu);
	__s32 pending = 0;

	if (!elem)
		return 1;
	if (!bpf_probe_read_kernel(&pending, sizeof(pending),
				   (void *)(sum->counters + address_of(elem) - sum->base)))
		sum->value += pending;
	return 0;
}

/*
 * The exact value of one percpu_counter: its count plus every CPU's pending delta. The kernel's
 * per-CPU offsets are not available as symbols here (no CONFIG_KALLSYMS_ALL), and `counters`
 * is plain memory to the verifier, so each CPU's offset is learned from cpu_probe: the address
 * of its element on that CPU minus the array's raw per-CPU pointer (struct bpf_array's
 * pptrs[0]) (docs/kernel-facts.md). bpf_loop keeps verification to one pass over the body: an
 * unrolled loop over MAX_CPUS cost about 0.4 s of start-up in the verifier.
 */
static __always_inline __s64 counter_exact(struct percpu_counter *c)
{
	struct pending_sum sum = {
		.counters = (__u64)BPF_CORE_READ(c, counters),
		.value = BPF_CORE_READ(c, count),
	};

	if (!sum.counters)
		return sum.value;
	if (bpf_probe_read_kernel(&sum.base, sizeof(sum.base),
				  (void *)(address_of(&cpu_probe) +
					   bpf_core_field_offset(struct bpf_array, pptrs))))
		return sum.value;
	bpf_loop(MAX_CPUS, add_pending, &sum, 0);
	return sum.value;
}

/*
 * Before 6.2 (commit f1a7941243c1, "mm: convert mm's rss stats into percpu_counter") the
 * counters were atomics in a struct mm_rss_stat, exact as read: what /proc/PID/status shows
 * too. (Those kernels also cache a thread's own faults in task->rss_stat and add them to the mm
 * every 64 faults; rss_stat fires then, with the mm's new value.)
 */
struct mm_rss_stat___atomic {
	atomic_long_t count[NR_MEMBERS];
};

struct mm_struct___atomic_rss {
	struct mm_rss_stat___atomic rss_stat;
} __attribute__((preserve_access_index));

/* Whether this kernel keeps the old atomic counters (a struct field where later kernels have an
 * array of percpu_counter: CO-RE finds the field only where its kind matches). */
static __always_inline bool rss_atomic(void)
{
	return bpf_core_field_exists(struct mm_struct___atomic_rss, rss_stat);
}

/*
 * Counter `member` of `mm`, one function per layout. The verifier allows only constant offsets
 * into kernel structs, so each member is its own access. The two are separate functions, not
 * branches: the layout a kernel lacks leaves relocations libbpf cannot resolve (it poisons
 * them), and in one function the compiler hoists the offsets above the test, where the
 * verifier would meet them; a call it never makes is never verified.
 */
static __noinline __s64 rss_exact_atomic(struct mm_struct *mm, __u32 member)
{
	struct mm_struct___atomic_rss *old = (void *)mm;

	switch (member) {
	case 0:
		return BPF_CORE_READ(old, rss_stat.count[0].counter);
	case 1:
		return BPF_CORE_READ(old, rss_stat.count[1].counter);
	case 2:
		return BPF_CORE_READ(old, rss_stat.count[2].counter);
	default:
		return BPF_CORE_READ(old, rss_stat.count[3].counter);
	}
}

static __noinline __s64 rss_exact_percpu(struct mm_struct *mm, __u32 member)
{
	switch (member) {
	case 0:
		return counter_exact(&mm->rss_stat[0]);
	case 1:
		return counter_exact(&mm->rss_stat[1]);
	case 2:
		return counter_exact(&mm->rss_stat[2]);
	default:
		return counter_exact(&mm->rss_stat[3]);
	}
}

static __always_inline __s64 rss_exact(struct mm_struct *mm, __u32 member)
{
	return rss_atomic() ? rss_exact_atomic(mm, member) : rss_exact_percpu(mm, member);
}

/* Emit the change of `member` of process `tgid` (the task `owner`) to `value` pages; returns
 * the change from the last value seen, 0 if there was none or this is the first (the whole
 * counter, no one change's). */
static __always_inline __s64 emit_rss(struct task_struct *owner, __u32 tgid, __u32 member,
				      __s64 value, __u32 by_owner)
{
	struct rss_last *last = rss_last_of(tgid);
	__s64 delta = value, change = 0;
	struct rss_event *e;

	if (last) {
		__s64 *seen = &last->pages[member & 3];

		if (*seen != RSS_UNSEEN) {
			delta = value - *seen;
			if (!delta)
				return 0; /* the batch moved between count and pending: no change */
			change = delta;
		}
		*seen = value;
	}
	e = reserve(sizeof(*e), LOST_RING_RSS);
	if (!e)
		return change;
	fill_header(&e->h, EV_RSS, tgid, (__u32)bpf_get_current_pid_tgid());
	e->h.pid = ns_tgid_of(owner, tgid); /* the owner need not be the current task */
	e->delta_pages = delta;
	e->value_pages = value;
	e->member = member;
	e->by_owner = by_owner;
	submit(e);
	return change;
}

/* Whether walk.bpf.c's fault_walk will take the increases handed over below: false without
 * stacks (`--no-stacks`), where nothing would, and user space clears it before load (load.rs). */
const volatile bool faults_walked SEC(".rodata.faults_walked") = true;

/* Hands an increase made by the owner's own task to the fault walker (common.bpf.h). Swap
 * entries are not resident pages. */
static __always_inline void pend_fault(struct task_struct *current, __u32 member, __s64 delta)
{
	__u32 zero = 0;
	struct fault_pending *f;

	if (!faults_walked || delta <= 0 || member == 2)
		return;
	f = bpf_map_lookup_elem(&fault_pending, &zero);
	if (!f)
		return;
	f->task = (__u64)current;
	f->pages = delta > 0xffffffff ? 0xffffffff : (__u32)delta;
	f->member = member;
}

SEC("tp_btf/rss_stat")
int BPF_PROG(rss_stat, struct mm_struct *mm, int member)
{
	struct task_struct *current = bpf_get_current_task_btf();
	struct task_struct *owner = BPF_CORE_READ(mm, owner);
	__u32 owner_tgid, current_tgid;
	__s64 delta;

	if (!owner || member < 0 || member >= NR_MEMBERS)
		return 0;
	owner_tgid = BPF_CORE_READ(owner, tgid);
	if (tracked_state(owner_tgid) != TRACK_PROCESS)
		return 0;
	/*
	 * Changes that belong to no process image the stream describes: a child's counters
	 * filled by its parent during fork (the child still carries its parent's tgid then;
	 * rss_fork reads the result as the child's baseline), the mm torn down at exit after the
	 * Exit event, and, during exec, the old image's teardown and the new image's set-up
	 * (rss_exec reads the new image's starting values instead).
	 */
	/* The tgid, a number, is loaded; the mm, a pointer, is read: a pointer loaded from the
	 * trusted task has the verifier search the kernel's whole BTF for a __safe_trusted type. */
	current_tgid = current->tgid;
	if (owner_tgid == current_tgid &&
	    (BPF_CORE_READ(current, mm) != mm || BPF_CORE_READ_BITFIELD_PROBED(current, in_execve)))
		return 0;
	if (owner_tgid != current_tgid) {
		emit_rss(owner, owner_tgid, member, rss_exact(mm, member), 0);
		return 0;
	}
	delta = emit_rss(owner, owner_tgid, member, rss_exact(mm, member), 1);
	pend_fault(current, member, delta);
	return 0;
}

/* A new process starts with the counters the kernel copied for it during fork: its baseline,
 * recorded as changes made by another task before the child runs. Threads share the mm and
 * need nothing. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(rss_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 child_tgid = BPF_CORE_READ(child, tgid);
	struct mm_struct *mm = BPF_CORE_READ(child, mm);

	/* The parent's state, not the child's: this program may run before the one that tracks
	 * the child. The spawner's child (the command) gets a baseline too; its exec resets it. */
	if (child_tgid == BPF_CORE_READ(parent, tgid) || !mm)
		return 0;
	if (!parent_state(parent, BPF_CORE_READ(parent, tgid)))
		return 0;
	/* vfork and CLONE_VM children share their parent's mm: no copy, no baseline. */
	if (mm == BPF_CORE_READ(parent, mm))
		return 0;
	for (__u32 m = 0; m < NR_MEMBERS; m++) {
		__s64 value = rss_exact(mm, m);

		if (value)
			emit_rss(child, child_tgid, m, value, 0);
		/* Its anonymous pages, shared with the parent until written (common.bpf.h). */
		if (m == 1 && value > 0 && faults_walked)
			bpf_map_update_elem(&inheriting, &child_tgid, &value, BPF_ANY);
	}
	return 0;
}

/* A process image ends at exec and at exit: drop its last values. */
static __always_inline void forget(__u32 tgid)
{
	bpf_map_delete_elem(&rss_last, &tgid);
	bpf_map_delete_elem(&inheriting, &tgid);
}

/* After the Exec event (the program that writes it is attached first), the new image's
 * starting values, made while exec set it up: its baseline from zero. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(rss_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	struct mm_struct *mm = BPF_CORE_READ(p, mm);

	if (tracked_state(tgid) != TRACK_PROCESS)
		return 0;
	forget(tgid);
	if (!mm)
		return 0;
	for (__u32 m = 0; m < NR_MEMBERS; m++) {
		__s64 value = rss_exact(mm, m);

		if (value)
			emit_rss(p, tgid, m, value, 1);
	}
	return 0;
}

static __always_inline int exit_forget(struct task_struct *p)
{
	if (group_dead(p))
		forget(BPF_CORE_READ(p, tgid));
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(rss_exit, struct task_struct *p)
{
	return exit_forget(p);
}

/*
 * The same again, attached right after, as process.bpf.c's sched_process_exit_again: the kernel
 * skips a run of a program on a CPU where a run of it is under way (preempted, 7.2), and a
 * skipped forget leaves the process's last values for a later process of the same tgid to be
 * measured against (sid's matrix saw one in a fork_tree recording). A second delete is harmless.
 */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(rss_exit_again, struct task_struct *p)
{
	return exit_forget(p);
}
