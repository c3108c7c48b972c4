// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * Raw mappings: mmap, munmap, mremap and brk made by tracked processes, from the raw syscall
 * tracepoints (tp_btf sys_enter/sys_exit; fentry is refused here, docs/kernel-facts.md). The entry
 * keeps the arguments per thread, the exit reports the call only when it succeeded. These are
 * every mapping the process makes itself, allocators' own arenas included; the report keeps
 * them apart from the heap.
 *
 * The tracepoints fire for every syscall on the machine, so both programs look at the syscall
 * number before anything else.
 */
#include "common.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#if defined(__TARGET_ARCH_x86)
#define NR_MMAP 9
#define NR_MUNMAP 11
#define NR_BRK 12
#define NR_MREMAP 25
#define SYSCALL_NR(regs) ((regs)->orig_ax)
#elif defined(__TARGET_ARCH_arm64) || defined(__TARGET_ARCH_riscv)
#define NR_MMAP 222
#define NR_MUNMAP 215
#define NR_BRK 214
#define NR_MREMAP 216
#define SYSCALL_NR(regs) ((regs)->regs[8])
#else
#error "mmap.bpf.c: syscall numbers of this architecture are not known"
#endif

/* The arguments of a mapping call in progress. */
struct map_call {
	__u64 a1, a2, a3, a4; /* the syscall's first four arguments */
	__u64 old_brk;        /* brk: the break before the call */
	__u32 nr;
	__u32 done; /* the exit's first copy reported the call; its copy deletes the entry */
};

/* tid -> the mapping call it is in, deleted at the call's exit. Not LRU: an LRU map is always
 * preallocated, and its 65536 entries cost about 10% of a recording's start-up CPU (clearing
 * 6 MiB, docs/PERFORMANCE.md); entries are made on first use as common.bpf.h's maps are. A
 * full map counts the call lost (LOST_STATE_FULL) instead of evicting another thread's. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MAX_TRACKED);
	__type(key, __u32);
	__type(value, struct map_call);
} map_calls SEC(".maps");

static __always_inline int is_mapping_call(long nr)
{
	return nr == NR_MMAP || nr == NR_MUNMAP || nr == NR_BRK || nr == NR_MREMAP;
}

/* Whether the `_again` copies are attached (load.rs: where the syscall tracepoints run
 * preemptible, Linux 6.13's faultable tracepoints); set before load. */
const volatile bool copies_attached SEC(".rodata.copies") = true;

/*
 * Skipped runs. The kernel does not run a program on a CPU where a run of it is under way (one
 * preempted there), and only counts the skip (recursion_misses). These tracepoints fire for
 * every syscall of the machine and run preemptible where they may fault: on 7.2 under qemu
 * 3 to 15 runs of these programs were skipped per test (docs/kernels.md), each of which may have
 * been the tree's call or any other process's. So there each program is attached twice, the
 * copy right after the first, and the copy does the work only where the first did not; and where
 * both were skipped for a tracked thread, the programs see it and count the call lost
 * (LOST_SKIPPED_CALL), which tells the tree's losses from other processes' skips:
 *   - both entries skipped: the exit's first copy finds no call, or the last call's, done;
 *   - both exits skipped: the next entry's first copy, or the thread's exit, finds the last
 *     call not done.
 * Three skips in a row for one thread (both exits, then the first entry, whose copy finds a
 * stored call with its own arguments) go unseen.
 */
static __always_inline int sys_enter(struct pt_regs *regs, long id, bool again)
{
	__u64 pid_tgid;
	__u32 tid;
	struct map_call call = {};
	struct map_call *stored;

	pid_tgid = bpf_get_current_pid_tgid();
	if (tracked_state(pid_tgid >> 32) != TRACK_PROCESS)
		return 0;
	tid = (__u32)pid_tgid;
	call.nr = id;
	call.a1 = PT_REGS_PARM1_CORE_SYSCALL(regs);
	call.a2 = PT_REGS_PARM2_CORE_SYSCALL(regs);
	call.a3 = PT_REGS_PARM3_CORE_SYSCALL(regs);
	call.a4 = PT_REGS_PARM4_CORE_SYSCALL(regs);
	stored = bpf_map_lookup_elem(&map_calls, &tid);
	if (stored && !stored->done) {
		/* The copy finds the call its first stored. */
		if (again && stored->nr == call.nr && stored->a1 == call.a1 &&
		    stored->a2 == call.a2 && stored->a3 == call.a3 && stored->a4 == call.a4)
			return 0;
		/* Otherwise the last call's exits were both skipped. */
		count_lost(LOST_SKIPPED_CALL);
	}
	if (id == NR_BRK)
		call.old_brk = BPF_CORE_READ(bpf_get_current_task_btf(), mm, brk);
	if (bpf_map_update_elem(&map_calls, &tid, &call, BPF_ANY))
		count_lost(LOST_STATE_FULL);
	return 0;
}

/* Preemption is off around the work of every program (common.bpf.h's preempt_off), after the
 * syscall number was looked at: every other syscall of the machine costs only that look (the
 * kfunc calls doubled the programs' cost per syscall, docs/PERFORMANCE.md). */
SEC("tp_btf/sys_enter")
int BPF_PROG(mmap_sys_enter, struct pt_regs *regs, long id)
{
	if (!is_mapping_call(id))
		return 0;
	return PREEMPT_OFF(sys_enter(regs, id, false));
}

SEC("tp_btf/sys_enter")
int BPF_PROG(mmap_sys_enter_again, struct pt_regs *regs, long id)
{
	if (!is_mapping_call(id))
		return 0;
	return PREEMPT_OFF(sys_enter(regs, id, true));
}

/* The call's exit: its first copy reports the call and marks it done, the second deletes it; a
 * second that finds it not done reports it in the first's place. */
static __always_inline int sys_exit(long nr, long ret, bool again)
{
	__u64 pid_tgid;
	__u32 tid, kind;
	struct map_call *call;
	struct map_event *e;

	pid_tgid = bpf_get_current_pid_tgid();
	tid = (__u32)pid_tgid;
	call = bpf_map_lookup_elem(&map_calls, &tid);
	if (!call) {
		/* Both entries skipped (the second copy cannot tell it from its first's delete). */
		if (!again && tracked_state(pid_tgid >> 32) == TRACK_PROCESS)
			count_lost(LOST_SKIPPED_CALL);
		return 0;
	}
	if (call->done) {
		/* The copy deletes what its first reported; for the first copy the entry is the
		 * last call's, and this call's entries were both skipped. */
		if (!again)
			count_lost(LOST_SKIPPED_CALL);
		goto forget;
	}
	if (call->nr != nr) {
		/* Another call's arguments: its exits and this call's entries were all skipped. */
		count_lost(LOST_SKIPPED_CALL);
		count_lost(LOST_SKIPPED_CALL);
		goto forget;
	}
	switch (nr) {
	case NR_MMAP:
	case NR_MREMAP:
		kind = nr == NR_MMAP ? EV_MMAP : EV_MREMAP;
		if (ret < 0 && ret >= -4095)
			goto done; /* an error number */
		break;
	case NR_MUNMAP:
		kind = EV_MUNMAP;
		if (ret != 0)
			goto done;
		break;
	default:
		/* brk returns the new break, or the old one when it could not move it. */
		kind = EV_BRK;
		if ((__u64)ret == call->old_brk)
			goto done;
		break;
	}
	e = reserve(sizeof(*e), LOST_RING_MAP);
	if (!e)
		goto done;
	fill_header(&e->h, kind, pid_tgid >> 32, tid);
	e->prot = 0;
	e->flags = 0;
	e->old_addr = 0;
	e->old_len = 0;
	switch (kind) {
	case EV_MMAP:
		e->addr = ret;
		e->len = call->a2;
		e->prot = call->a3;
		e->flags = call->a4;
		break;
	case EV_MUNMAP:
		e->addr = call->a1;
		e->len = call->a2;
		break;
	case EV_MREMAP:
		e->addr = ret;
		e->len = call->a3;
		e->old_addr = call->a1;
		e->old_len = call->a2;
		e->flags = call->a4;
		break;
	default:
		e->addr = ret;
		e->len = 0;
		e->old_addr = call->old_brk;
		break;
	}
	submit(e);
done:
	if (!again && copies_attached) {
		call->done = 1;
		return 0;
	}
forget:
	bpf_map_delete_elem(&map_calls, &tid);
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(mmap_sys_exit, struct pt_regs *regs, long ret)
{
	long nr = SYSCALL_NR(regs);

	if (!is_mapping_call(nr))
		return 0;
	return PREEMPT_OFF(sys_exit(nr, ret, false));
}

SEC("tp_btf/sys_exit")
int BPF_PROG(mmap_sys_exit_again, struct pt_regs *regs, long ret)
{
	long nr = SYSCALL_NR(regs);

	if (!is_mapping_call(nr))
		return 0;
	return PREEMPT_OFF(sys_exit(nr, ret, true));
}

/* A thread leaves: a call it made that no exit reported had both its exits skipped (a thread
 * killed inside a call still passes the syscall's exit first). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(mmap_thread_exit, struct task_struct *p)
{
	__u32 tid = BPF_CORE_READ(p, pid);
	struct map_call *call = bpf_map_lookup_elem(&map_calls, &tid);

	if (!call)
		return 0;
	if (!call->done)
		count_lost(LOST_SKIPPED_CALL);
	bpf_map_delete_elem(&map_calls, &tid);
	return 0;
}
