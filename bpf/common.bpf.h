/* SPDX-License-Identifier: (MIT OR Apache-2.0) */
/*
 * Maps and helpers every BPF object of memtrack shares. Each object declares the same maps; user
 * space creates them once, with the first object, and hands their fds to the others
 * (bpf_map__reuse_fd) before loading, so all programs see one tracked set, one ring and one set
 * of loss counters.
 */
#ifndef MEMTRACK_COMMON_BPF_H
#define MEMTRACK_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "event.h"

#define MAX_TRACKED 65536

/* What a call pushes on the stack: the return address on x86-64; nothing on arm64, where it
 * goes to the link register. */
#if defined(__TARGET_ARCH_arm64)
#define RETURN_ADDRESS_BYTES 0
#else
#define RETURN_ADDRESS_BYTES 8
#endif

/* Hash maps are created with BPF_F_NO_PREALLOC: preallocating every entry of the larger maps
 * cost about 0.4 s of kernel time at start-up; entries are allocated on first use instead
 * (once per process or thread, not per event). */

/* tgid -> enum tracked_state. Filled by user space for the command, and by sched_process_fork
 * for every child of a tracked process, at the moment it is created. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MAX_TRACKED);
	__type(key, __u32);
	__type(value, __u32);
} tracked SEC(".maps");

/* Kernel -> user records (bpf/event.h). The size here is a placeholder: user space always sets
 * it before load, to --ring-size or else to record::default_ring_size_mib (2 MiB per CPU, at
 * least 16 and at most 256 MiB). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 << 20);
} events SEC(".maps");

/* Lost events per enum lost_cause. A plain array updated atomically: counters shared across
 * CPUs lose updates with a plain += (docs/kernel-facts.md). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LOST_CAUSES);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

/* The measuring gate (enum gate_state at key 0), flipped by the recorder when the harness sends
 * `start` or `stop` on the control FIFO (docs/control-protocol.md). Only allocator calls are
 * gated: Fork, Exec, Exit and resident-memory events are recorded whatever it says, so the
 * process tree stays whole while measuring is paused. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} gate SEC(".maps");

/* The increase of a resident counter that rss.bpf.c's rss_stat just recorded, when a task of
 * the owning process made it in its own context (a page fault, or a syscall touching its
 * memory): for walk.bpf.c's fault_walk, attached after it on the same tracepoint, which walks
 * that task's user stack (issue 35). Per CPU: one run of the tracepoint runs both programs
 * with preemption off; `task` tells this run's entry from a stale one. */
struct fault_pending {
	__u64 task;   /* the task_struct that made it; 0 once taken */
	__u32 pages;  /* the increase */
	__u32 member; /* rss_event's member numbers */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fault_pending);
} fault_pending SEC(".maps");

/* Per process forked from a tracked one: the anonymous pages it inherited at fork (rss.bpf.c's
 * rss_fork) not yet written, as walk.bpf.c's touch_walk counts them down. A write to an
 * inherited page is copy-on-write, which changes no resident counter (the copy replaces the
 * shared page), so rss_stat never shows it: touch_walk, at the return of the kernel's
 * write-protect fault, walks the stack of the write while this is above 0, and the report
 * moves the page from the child's "[inherited]" to the site that wrote it (issue 35). Gone at
 * exec and exit. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_TRACKED);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* most recordings never fill one */
	__type(key, __u32);
	__type(value, __s64);
} inheriting SEC(".maps");

/* A file as the kernel names it, the key of the maps that say what user space did with a file
 * (bpf/discover.bpf.c's `scanned`, bpf/stack.bpf.h's `unwind_files`). */
struct file_key {
	__u64 ino;
	__u32 dev; /* the kernel's encoding: major << 20 | minor */
	__u32 _pad;
};

/*
 * Overlayfs (every Docker, Podman and Kubernetes container root) and FUSE passthrough map a
 * file through a "backing file" (Linux 6.5 on): the mapping's vm_file is the lower or upper
 * layer's file, while the path user space stats, and exec's file, are the overlay's. The inode
 * user space knows is then the one of the backing file's user_path, which follows the struct
 * file inside struct backing_file (fs/file_table.c). FMODE_BACKING moved from bit 25 (6.5) to
 * bit 24 (6.14), and the struct is private to the kernel, so both bits are tried and the
 * candidate is believed only if it is an overlayfs or FUSE inode.
 */
#define FMODE_BACKING_6_5 (1U << 25)
#define FMODE_BACKING_6_14 (1U << 24)
#define OVERLAYFS_SUPER_MAGIC 0x794c7630
#define FUSE_SUPER_MAGIC 0x65735546

static __always_inline struct inode *user_inode(struct file *f)
{
	struct inode *inode = BPF_CORE_READ(f, f_inode);
	__u64 user_path = ((__u64)bpf_core_type_size(struct file) + 7) & ~7ULL;
	struct dentry *dentry = NULL;
	struct inode *user;
	unsigned long magic;

	if (!(BPF_CORE_READ(f, f_mode) & (FMODE_BACKING_6_5 | FMODE_BACKING_6_14)))
		return inode;
	/* struct path { struct vfsmount *mnt; struct dentry *dentry; } */
	if (bpf_probe_read_kernel(&dentry, sizeof(dentry), (void *)f + user_path + 8) || !dentry)
		return inode;
	user = BPF_CORE_READ(dentry, d_inode);
	magic = BPF_CORE_READ(user, i_sb, s_magic);
	return magic == OVERLAYFS_SUPER_MAGIC || magic == FUSE_SUPER_MAGIC ? user : inode;
}

static __always_inline void file_key_of(struct file *f, struct file_key *key)
{
	struct inode *inode = user_inode(f);

	key->ino = BPF_CORE_READ(inode, i_ino);
	key->dev = BPF_CORE_READ(inode, i_sb, s_dev);
	key->_pad = 0;
}

static __always_inline void count_lost(__u32 cause)
{
	__u64 *n = bpf_map_lookup_elem(&lost, &cause);

	if (n)
		__sync_fetch_and_add(n, 1);
}

/*
 * Uprobe programs run preemptible (Linux 6.0 on), and so do programs on the syscall
 * tracepoints where those may fault; from 6.13 the kernel also gives every such program of more
 * than 64 bytes of stack a private stack that is per CPU, not per task. A program preempted
 * there and another run of it on the same CPU then share their stack: on Debian's 7.2 under
 * qemu, a process's first malloc(23111) was recorded with the size a sibling's malloc passed
 * at the same moment, and the sibling's with 23111 (1 recording in 2). The body of every such
 * program runs with preemption off (bpf_preempt_disable, Linux 6.10, before private stacks
 * came); on older kernels the kfuncs do not exist and the calls are dropped at load.
 */
extern void bpf_preempt_disable(void) __weak __ksym;
extern void bpf_preempt_enable(void) __weak __ksym;

static __always_inline void preempt_off(void)
{
	if (bpf_ksym_exists(bpf_preempt_disable))
		bpf_preempt_disable();
}

static __always_inline void preempt_on(void)
{
	if (bpf_ksym_exists(bpf_preempt_enable))
		bpf_preempt_enable();
}

/* The value of `call` (an int), computed with preemption off: a probe program's whole body. */
#define PREEMPT_OFF(call)                                                                      \
	({                                                                                     \
		int __ret;                                                                     \
		preempt_off();                                                                 \
		__ret = (call);                                                                \
		preempt_on();                                                                  \
		__ret;                                                                         \
	})

/* The tracked state of the current process, 0 if it is not tracked. */
static __always_inline __u32 tracked_state(__u32 tgid)
{
	__u32 *state = bpf_map_lookup_elem(&tracked, &tgid);

	return state ? *state & TRACK_STATE_MASK : 0;
}

/* Whether exiting task `p` is the last of its process, at sched_process_exit: do_exit has
 * dropped signal->live by then on every kernel (the tracepoint's own group_dead argument exists
 * only from 6.16). */
static __always_inline bool group_dead(struct task_struct *p)
{
	return BPF_CORE_READ(p, signal, live.counter) == 0;
}

/* Whether allocator calls are recorded now. Checked where an outermost allocator call starts
 * (and at free), never at its return: a call is recorded whole or not at all, decided by the
 * gate at its entry (alloc.bpf.c). */
static __always_inline bool gate_open(void)
{
	__u32 key = 0;
	__u32 *state = bpf_map_lookup_elem(&gate, &key);

	return !state || *state == GATE_OPEN;
}

/* Reserve a record of `size` bytes, counting a loss for `cause` when the ring is full. */
static __always_inline void *reserve(__u64 size, __u32 cause)
{
	void *rec = bpf_ringbuf_reserve(&events, size, 0);

	if (!rec)
		count_lost(cause);
	return rec;
}

/* The recorder's pid namespace (src/record/pidns.rs): the inode number of /proc/self/ns/pid, or
 * 0 when that is the initial namespace, set by user space before load. Every map stays keyed by
 * the kernel's global tgid (what bpf_get_current_pid_tgid gives on the hot path); only the pids
 * written into records are the recorder's, because /proc, kill() and the user all speak its
 * namespace. Read-only data: on the host the verifier drops the translation as dead code. */
struct pidns_view {
	__u64 inum;
	__u64 dev; /* nsfs's device, the kernel's encoding (major << 20 | minor) */
};
const volatile struct pidns_view recorder_pidns SEC(".rodata.pidns") = {};

/* How many levels below the recorder's namespace a tracked task may sit (a command that makes
 * pid namespaces of its own, nested); deeper, its records keep the global pid. */
#define PIDNS_NESTING 8

/* A tracked process registered by user space under its pid in the recorder's namespace (the
 * spawner, which user space cannot name globally), rather than its global tgid. Global pids
 * stay below 2^22 (PID_MAX_LIMIT), so the two kinds of keys never meet. */
#define TRACKED_NS_KEY 0x80000000u

/* The number of `pid` in the recorder's namespace; `global` when it has none there. A function
 * of its own (not inlined): its reads stay off the stack of the allocator programs, whose
 * deepest calls are near the 512-byte limit. */
static __noinline __u32 nr_in_recorder_ns(struct pid *pid, __u32 global)
{
	unsigned int level = BPF_CORE_READ(pid, level);

	for (unsigned int up = 0; up < PIDNS_NESTING; up++) {
		if (up > level)
			break;
		if (BPF_CORE_READ(pid, numbers[level - up].ns, ns.inum) == recorder_pidns.inum)
			return BPF_CORE_READ(pid, numbers[level - up].nr);
	}
	return global;
}

/* The process id of `t` as the recorder sees it. */
static __always_inline __u32 ns_tgid_of(struct task_struct *t, __u32 global)
{
	if (!recorder_pidns.inum)
		return global;
	return nr_in_recorder_ns(BPF_CORE_READ(t, group_leader, thread_pid), global);
}

/* The thread id of `t` as the recorder sees it. */
static __always_inline __u32 ns_tid_of(struct task_struct *t, __u32 global)
{
	if (!recorder_pidns.inum)
		return global;
	return nr_in_recorder_ns(BPF_CORE_READ(t, thread_pid), global);
}

/* The tracked state of the process `t` (global tgid `tgid`) as a parent at fork: by its global
 * tgid, or by its pid in the recorder's namespace (how the spawner is registered there). */
static __always_inline __u32 parent_state(struct task_struct *t, __u32 tgid)
{
	__u32 state = tracked_state(tgid);

	if (!state && recorder_pidns.inum)
		state = tracked_state(TRACKED_NS_KEY | ns_tgid_of(t, 0));
	return state;
}

/* The current task's ids in `h` (its global ones) as the recorder sees them: by
 * bpf_get_ns_current_pid_tgid when the task lives in the recorder's namespace itself (one helper
 * call: the CO-RE walk cost some 330 ns per allocator record), else by the walk (a namespace
 * nested inside it). A function of its own, for the allocator programs' stack. */
static __noinline void current_ids_in_recorder_ns(struct event_header *h)
{
	/* struct bpf_pidns_info's layout (UAPI, fixed): vmlinux.h's would be CO-RE relocated, and
	 * each object's load would search the kernel's BTF for it once more. */
	struct {
		__u32 pid;
		__u32 tgid;
	} ns = {};
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct task_struct *cur;

	if (!bpf_get_ns_current_pid_tgid(recorder_pidns.dev, recorder_pidns.inum, (void *)&ns,
					 sizeof(ns))) {
		if (h->pid == tgid)
			h->pid = ns.tgid;
		h->tid = ns.pid;
		return;
	}
	cur = (struct task_struct *)bpf_get_current_task();
	if (h->pid == tgid)
		h->pid = ns_tgid_of(cur, h->pid);
	h->tid = ns_tid_of(cur, h->tid);
}

/* `pid` and `tid` are the current task's global ids (but see emit_rss, which names another
 * process's); the record carries them as the recorder sees them. */
static __always_inline void fill_header(struct event_header *h, __u32 kind, __u32 pid, __u32 tid)
{
	h->ts_ns = bpf_ktime_get_ns();
	h->pid = pid;
	h->tid = tid;
	if (recorder_pidns.inum)
		current_ids_in_recorder_ns(h);
	h->kind = kind;
	h->_pad = 0;
}

/* Hand a record to user space without a wake-up: a wake-up per event costs about 3 us here
 * (docs/kernel-facts.md); the recorder polls the ring on a short timer instead. */
static __always_inline void submit(void *rec)
{
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
}

/* Signal number of SIGSTOP on x86, arm64, riscv, s390 and powerpc (asm-generic). */
#define SIGSTOP 19

/* Stop the current process for user space, which continues it once done with `reason` (enum
 * stop_reason): bpf_send_signal(SIGSTOP) stops the whole process before it returns to user
 * space. The record is reserved before the signal is sent, so a full ring never leaves a
 * process stopped with nobody to continue it. */
static __always_inline void stop(__u32 tgid, __u32 tid, __u32 reason)
{
	struct stop_event *e = reserve(sizeof(*e), LOST_STOP);

	if (!e)
		return;
	fill_header(&e->h, EV_STOP, tgid, tid);
	e->reason = reason;
	e->_pad = 0;
	if (bpf_send_signal(SIGSTOP)) {
		bpf_ringbuf_discard(e, 0);
		return;
	}
	/* User space is waiting for this one: wake it at once (the rest are polled). */
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

#endif /* MEMTRACK_COMMON_BPF_H */
