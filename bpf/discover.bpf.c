// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * Discovery: stop a tracked process at the moments it maps executable files it has not run yet,
 * so that user space can find the allocator entry points those files define and attach to them
 * before a single instruction of theirs runs (src/record/discover.rs).
 *
 * Two moments (KERNEL-FACTS.md, "Attach mechanisms"):
 * - exec: the new executable and its dynamic loader are mapped and nothing of them has run.
 *   Needed for statically linked programs, whose allocator is in the executable; skipped when
 *   user space has scanned that executable already (the `scanned` map).
 * - the dynamic loader's debugger hook `_dl_debug_state`, called with `_r_debug.r_state` set to
 *   RT_CONSISTENT once the libraries of the start-up or of a dlopen are mapped, before their
 *   relocation and initialisers. The RT_ADD and RT_DELETE calls need no stop.
 *
 * The stop is bpf_send_signal(SIGSTOP): the whole process stops before it returns to user
 * space; user space sends SIGCONT when it is done. The record is reserved before the signal is
 * sent, so a full ring never leaves a process stopped with nobody to continue it.
 */
#include "common.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* Signal number of SIGSTOP on x86, arm64, riscv, s390 and powerpc (asm-generic). */
#define SIGSTOP 19
/* struct r_debug { int r_version; struct link_map *r_map; ElfW(Addr) r_brk; enum r_state; } */
#define R_STATE_OFFSET 24
#define RT_CONSISTENT 0

struct file_key {
	__u64 ino;
	__u32 dev; /* the kernel's encoding: major << 20 | minor */
	__u32 _pad;
};

/* Executable files user space has scanned and probed: their exec needs no stop. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct file_key);
	__type(value, __u8);
} scanned SEC(".maps");

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

/* Attached after process.bpf.c's sched_process_exec, so the Exec event comes first. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(discover_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	struct file_key key = {};

	if (tracked_state(tgid) != TRACK_PROCESS)
		return 0;
	key.ino = BPF_CORE_READ(bprm, file, f_inode, i_ino);
	key.dev = BPF_CORE_READ(bprm, file, f_inode, i_sb, s_dev);
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
SEC("uprobe")
int discover_dl_debug_state(struct pt_regs *ctx)
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
	stop(id >> 32, (__u32)id, STOP_DL);
	return 0;
}
