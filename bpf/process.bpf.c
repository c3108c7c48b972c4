// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * Process lifecycle: which processes belong to the recorded tree, and their Fork, Exec and Exit
 * events. These are recorded whatever else is switched on or off, because every other record
 * is attributed through the tree they describe.
 */
#include "common.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* A child joins the tree the moment it is created, before it runs a single instruction, so its
 * first allocation cannot race its registration. Threads share their process's tgid and so are
 * tracked already; only new processes get an entry and a Fork event. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(sched_process_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 parent_tgid = BPF_CORE_READ(parent, tgid);
	__u32 child_tgid = BPF_CORE_READ(child, tgid);
	__u32 track = TRACK_PROCESS;
	struct fork_event *e;

	__u32 state = parent_state(parent, parent_tgid);

	if (child_tgid == parent_tgid || !state)
		return 0;
	if (bpf_map_update_elem(&tracked, &child_tgid, &track, BPF_ANY)) {
		count_lost(LOST_TRACKED_FULL);
		return 0;
	}
	/* The spawner (memtrack itself) is not part of the tree; its child is the root. */
	if (state != TRACK_PROCESS)
		return 0;
	e = reserve(sizeof(*e), LOST_RING_LIFECYCLE);
	if (!e)
		return 0;
	fill_header(&e->h, EV_FORK, parent_tgid, BPF_CORE_READ(parent, pid));
	e->child = ns_tgid_of(child, child_tgid);
	e->_pad = 0;
	submit(e);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(sched_process_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	struct exec_event *e;
	unsigned long arg_start, arg_end, len;
	const char *filename;
	long n;

	if (tracked_state(tgid) != TRACK_PROCESS)
		return 0;
	e = reserve(sizeof(*e), LOST_RING_LIFECYCLE);
	if (!e)
		return 0;
	fill_header(&e->h, EV_EXEC, tgid, BPF_CORE_READ(p, pid));

	filename = BPF_CORE_READ(bprm, filename);
	n = bpf_probe_read_kernel_str(e->filename, sizeof(e->filename), filename);
	e->filename_len = n > 0 ? n - 1 : 0;

	/* argv was copied onto the new stack by exec; current is the new image, so read it as
	 * user memory. A long command line is cut at EXEC_ARGS_MAX. */
	arg_start = BPF_CORE_READ(p, mm, arg_start);
	arg_end = BPF_CORE_READ(p, mm, arg_end);
	len = arg_end > arg_start ? arg_end - arg_start : 0;
	if (len > EXEC_ARGS_MAX - 1)
		len = EXEC_ARGS_MAX - 1;
	len &= EXEC_ARGS_MAX - 1; /* a bound the verifier can see */
	if (len && bpf_probe_read_user(e->args, len, (void *)arg_start))
		len = 0;
	e->args_len = len;
	submit(e);
	return 0;
}

/*
 * One Exit per process, reported by the last thread to leave. Every kernel drops
 * signal->live before this tracepoint (do_exit's group_dead), but hands group_dead to it only
 * from 6.16 on, so the count is read here and the program takes the one argument every kernel
 * has. Threads leaving together (exit_group) may each see the count at zero: the one whose
 * delete of the `tracked` entry succeeds reports, so a process ends in the stream once.
 */
static __always_inline int process_exit(struct task_struct *p)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	__u32 tid = BPF_CORE_READ(p, pid);
	struct exit_event *e;

	if (tracked_state(tgid) != TRACK_PROCESS)
		return 0;
	if (!group_dead(p))
		return 0;
	e = reserve(sizeof(*e), LOST_RING_LIFECYCLE);
	if (bpf_map_delete_elem(&tracked, &tgid)) {
		if (e)
			bpf_ringbuf_discard(e, 0);
		return 0;
	}
	if (e) {
		fill_header(&e->h, EV_EXIT, tgid, tid);
		e->status = BPF_CORE_READ(p, exit_code);
		e->_pad = 0;
		submit(e);
	}
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(sched_process_exit, struct task_struct *p)
{
	return process_exit(p);
}

/*
 * The same again, attached right after: the kernel does not run a tracing program on a CPU where
 * a run of the same program is under way, and tracepoints that run their programs preemptible
 * (7.2) leave a run under way while another task runs there. An exit skipped so is lost for good
 * (a Exit missing from 1 in 25 fork_tree recordings under qemu, each with one skipped run). The
 * second copy runs then, and the `tracked` delete above lets only one of the two report.
 * `Loaded::skipped_runs` counts an exit lost only where both copies were skipped.
 */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(sched_process_exit_again, struct task_struct *p)
{
	return process_exit(p);
}
