// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * Discovery: stop a tracked process at the moments it maps executable files it has not run yet,
 * so that user space can find the allocator entry points those files define and attach to them
 * before a single instruction of theirs runs (src/record/discover.rs).
 *
 * Two moments (docs/kernel-facts.md, "Attaching to code that appears later"):
 * - exec: the new executable and its dynamic loader are mapped and nothing of them has run.
 *   Needed for statically linked programs, whose allocator is in the executable; skipped when
 *   user space has scanned that executable already (the `scanned` map).
 * - the dynamic loader's debugger hook `_dl_debug_state`, called with `_r_debug.r_state` set to
 *   RT_CONSISTENT once the libraries of the start-up or of a dlopen are mapped, before their
 *   relocation and initialisers. The RT_ADD and RT_DELETE calls need no stop, and neither does
 *   RT_CONSISTENT when every executable file mapping of the process is of a file user space has
 *   scanned already (the start-up of a program run before, a dlopen of a known library): the
 *   probe walks the process's mappings with the task VMA iterator to find out.
 *
 * The stop is common.bpf.h's: the whole process stops before it returns to user space; user
 * space sends SIGCONT when it is done.
 */
#include "common.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* struct r_debug { int r_version; struct link_map *r_map; ElfW(Addr) r_brk; enum r_state; } */
#define R_STATE_OFFSET 24
#define RT_CONSISTENT 0

/* Executable files user space has scanned and probed (SCANNED), and whose coverage record it
 * has written (REPORTED, once a stopped process was seen mapping the file): their exec needs no
 * stop, nor does a dynamic loader event when every executable mapping is of a REPORTED file. */
#define SCANNED 1
#define REPORTED 2

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__type(key, struct file_key);
	__type(value, __u8);
} scanned SEC(".maps");

extern int bpf_iter_task_vma_new(struct bpf_iter_task_vma *it, struct task_struct *task,
				 __u64 addr) __weak __ksym;
extern struct vm_area_struct *bpf_iter_task_vma_next(struct bpf_iter_task_vma *it) __weak __ksym;
extern void bpf_iter_task_vma_destroy(struct bpf_iter_task_vma *it) __weak __ksym;

#define VM_EXEC 0x4

/* Whether every executable file mapping of the current process is of a reported file. The loop
 * keeps no counter: the iterator ends by itself, and a counter would keep the verifier from
 * seeing that one pass through the loop body is like the next. */
static __always_inline bool all_mappings_scanned(void)
{
	struct bpf_iter_task_vma it;
	struct vm_area_struct *vma;
	struct file_key key;
	bool all = true;
	__u8 *state;

	/* Before Linux 6.7 there is no VMA iterator: stop every time. */
	if (!bpf_ksym_exists(bpf_iter_task_vma_new))
		return false;
	if (bpf_iter_task_vma_new(&it, bpf_get_current_task_btf(), 0)) {
		bpf_iter_task_vma_destroy(&it);
		return false;
	}
	while ((vma = bpf_iter_task_vma_next(&it))) {
		/* vm_file is read, not loaded: a load of a pointer field from the iterator's
		 * trusted vma has the verifier search the kernel's whole BTF for a
		 * "vm_area_struct__safe_trusted" type (btf_nested_type_is_trusted), once per
		 * pass it makes over the loop: some 15 searches, 3 ms of every recording's start
		 * on 6.18. Read once and null-checked before use. */
		struct file *file = BPF_CORE_READ(vma, vm_file);

		if (!(vma->vm_flags & VM_EXEC) || !file)
			continue;
		file_key_of(file, &key);
		state = bpf_map_lookup_elem(&scanned, &key);
		if (!state || *state != REPORTED) {
			all = false;
			break;
		}
	}
	bpf_iter_task_vma_destroy(&it);
	return all;
}

/* Attached after process.bpf.c's sched_process_exec, so the Exec event comes first. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(discover_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	struct file_key key = {};

	if (tracked_state(tgid) != TRACK_PROCESS)
		return 0;
	file_key_of(BPF_CORE_READ(bprm, file), &key);
	if (bpf_map_lookup_elem(&scanned, &key))
		return 0;
	stop(tgid, BPF_CORE_READ(p, pid), STOP_EXEC);
	return 0;
}

/*
 * At the entry of `_dl_debug_state` (a bare `ret`). The cookie is the distance from this
 * function to `_r_debug` in the loader's image, so the probe reads r_state without knowing
 * where the loader was mapped; 0 when the loader has no `_r_debug` symbol: then every call
 * stops the process.
 */
static __always_inline int dl_debug_state(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__s64 delta = (__s64)bpf_get_attach_cookie(ctx);
	int state = -1;

	if (tracked_state(id >> 32) != TRACK_PROCESS)
		return 0;
	if (delta &&
	    !bpf_probe_read_user(&state, sizeof(state),
				 (void *)(PT_REGS_IP(ctx) + delta + R_STATE_OFFSET)) &&
	    state != RT_CONSISTENT)
		return 0;
	if (all_mappings_scanned())
		return 0;
	stop(id >> 32, (__u32)id, STOP_DL);
	return 0;
}

/* Both uprobes run with preemption off (common.bpf.h's preempt_off). */
SEC("uprobe")
int discover_dl_debug_state(struct pt_regs *ctx)
{
	return PREEMPT_OFF(dl_debug_state(ctx));
}

/*
 * At the entry of the C library's `_exit` (glibc's `_exit`, musl's `_Exit`, or the executable's
 * own in a static program), which a normal exit reaches after the atexit handlers and stdio's
 * flush, right before exit_group: stop the process so that user space can scan its memory for
 * leaks (src/record/leakscan.rs) while it is still whole. exit_group itself cannot be held: a
 * SIGSTOP sent once it is in the kernel is never acted on. Attached only when the leak scan is
 * on (not with `record --no-leak-scan`).
 */
static __always_inline int hold_at_exit(void)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 id = bpf_get_current_pid_tgid();

	if (tracked_state(id >> 32) != TRACK_PROCESS)
		return 0;
	/* A vfork or CLONE_VM child has no memory of its own to scan, and its parent waits in the
	 * kernel until it execs or exits: posix_spawn's child whose exec failed calls _exit here,
	 * and held, it would hold its parent (the recorder's guardian, or a shell) with it. */
	if (BPF_CORE_READ(task, mm) == BPF_CORE_READ(task, real_parent, mm))
		return 0;
	stop(id >> 32, (__u32)id, STOP_EXIT);
	return 0;
}

SEC("uprobe")
int exit_hold(struct pt_regs *ctx)
{
	return PREEMPT_OFF(hold_at_exit());
}
