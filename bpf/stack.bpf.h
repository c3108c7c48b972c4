/* SPDX-License-Identifier: (MIT OR Apache-2.0) */
/*
 * Call stacks (issue 15): the user stack of an allocator call, unwound here from the file's
 * .eh_frame rows (src/unwind/ builds them, src/record/stacks.rs loads them), since Debian's
 * glibc and most -O2 code keep no frame pointer and bpf_get_stack would return wrong stacks.
 *
 * Taken once per allocation, at the entry of the outermost allocator call (alloc.bpf.c), where
 * the stack is clean: the return probe of this call is prepared only after every entry handler
 * ran, and calls nested inside it (the malloc inside operator new) are never walked.
 *
 * Each frame is named by (module, file offset), not by its address: the kernel's VMA of the pc
 * says which file and where in it, so no per-process mapping table has to be kept, copied at
 * fork or updated at exec and dlopen, and the same call path is one stack in every process of
 * the tree whatever their address layout. A pc outside any file with a table (JIT code, the
 * vDSO, a uprobe trampoline of another tool) ends the walk, marked unknown; nothing is guessed.
 * (The vDSO only matters past a signal frame, since nothing in it allocates; its code is in no
 * file the kernel's VMA names.) Two kinds of code get rules of their own from user space: the
 * lazy PLT stubs (CFA_PLT), and signal trampolines (CFA_SIGNAL), past which the walk goes on in
 * the code the signal interrupted, with the registers the kernel saved.
 *
 * arm64 (issue 31) walks the same rows with three differences, under __TARGET_ARCH_arm64: the
 * first frame's caller may still be in the link register x30 (RA_LR: the probe is at the
 * function's entry, before its prologue saves x30); a saved return address is wherever the row
 * says (RA_AT_CFA, RA_ABOVE_FP), not at CFA-8; and every return address is stripped of its
 * pointer-authentication signature (pac-ret) with stack_pc_mask before it is looked up. A
 * caller's pc is its return address minus 4, the bl itself. arm64's signal trampoline is the
 * vDSO's __kernel_rt_sigreturn, in no file and without CFI: the walk knows it by its two
 * instructions and goes on in the code the signal interrupted (arm64_sigreturn), recording no
 * frame for the trampoline itself.
 *
 * Dedup: the frames are hashed twice as the walk goes. The first hash keys `stack_ids`, the
 * second must match what it stored: a mismatch is a collision, counted, and that stack is sent
 * again under a new id instead of being confused with the other. A new stack is sent once
 * through the ring, before the allocation event that carries its id, so user space always knows
 * an id before it sees it used.
 */
#ifndef MEMTRACK_STACK_BPF_H
#define MEMTRACK_STACK_BPF_H

#include "common.bpf.h"

/* Every file's rows, one file after another, in chunks of 2^row_chunk_shift elements that user
 * space makes as the tables need them and writes through a memory mapping of each
 * (src/record/stacks.rs). A file's rows may run on from one chunk into the next. One array
 * made whole at load was 48 MiB of kernel memory, 10 ms to clear, for the 0.4 MiB a `sort`
 * needs. The chunks are all of one size, so that the verifier still inlines their lookups. */
struct unwind_chunk {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1 << UNWIND_CHUNK_SHIFT);
	/* Sizes rather than types: clang's BTF has the value type of an inner map only as a
	 * forward declaration, and libbpf cannot size that. */
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(struct unwind_row_pair));
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, UNWIND_CHUNKS);
	__type(key, __u32);
	__array(values, struct unwind_chunk);
} unwind_rows SEC(".maps");

/* log2 of the elements per chunk: UNWIND_CHUNK_SHIFT, or smaller for tests (user space sets it,
 * with the chunks' size, before load). */
const volatile __u32 row_chunk_shift SEC(".rodata.rows") = UNWIND_CHUNK_SHIFT;

/* Where each file's rows are, by the file's (ino, dev). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__type(key, struct file_key);
	__type(value, struct unwind_file);
} unwind_files SEC(".maps");

struct stack_seen {
	__u64 check; /* the second hash of the frames */
	__u32 id;
	__u32 _pad;
};

/* Stacks sent, by the first hash of their frames. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1 << 18);
	__type(key, __u64);
	__type(value, struct stack_seen);
} stack_ids SEC(".maps");

/* Counters per enum stack_stat, per CPU: every walk counts, and one counter shared by every CPU
 * would bounce its cache line between them. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STACK_STATS);
	__type(key, __u32);
	__type(value, __u64);
} stack_stats SEC(".maps");

/* Element 0: the last stack id handed out. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} stack_next_id SEC(".maps");

/* Element 0 is 1 when stacks are recorded; user space sets it after load (`--no-stacks` leaves
 * it 0, and then no allocation pays for a walk). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} stack_config SEC(".maps");

#if defined(__TARGET_ARCH_arm64)
/* The bits of a user address, all others a return address may carry being pac-ret's signature
 * (and the top byte's tag): set by user space before load (record::stacks::pc_mask, which says
 * how it is found). All ones, nothing stripped, if it is not. */
const volatile __u64 stack_pc_mask SEC(".rodata.stack") = ~0ULL;

/* A caller's pc is its return address minus the width of the call: arm64's are 4 bytes. */
#define CALL_BACK 4
#else
/* A caller's pc is its return address minus 1, inside the variable-length call instruction. */
#define CALL_BACK 1
#endif

/* The most rows of one file: the binary search takes this many halvings. */
#define ROW_SEARCH_STEPS 24

/* A file mapping a walk found, and where the file's rows are. */
struct cached_file {
	__u64 start;
	__u64 end;
	__u64 delta; /* file offset = pc + delta */
	__u32 module;
	__u32 first;
	__u32 count;
	__u32 index; /* struct unwind_file's bucket index */
	__u32 base;
	__u32 buckets;
	__u32 shift;
};

#define CACHED_FILES 4

/*
 * The file mappings a thread's walks met, kept from one walk to the next: finding a pc's VMA
 * takes the mmap lock and walks the maple tree, by far the dearest part of a frame. The cache
 * holds while its mm's mm_lock_seq is what it was, since every change of a VMA takes the mmap
 * lock for writing, which moves that sequence (and exec gives the thread another mm).
 */
struct file_cache {
	__u64 mm;  /* the mm_struct the entries are of */
	__u64 seq; /* its mm_lock_seq when they were found */
	__u32 next;
	__u32 _pad;
	struct cached_file e[CACHED_FILES];
};

/*
 * A walk remembered, to skip the next one from the same place. Given the allocator's entry pc,
 * rsp (and rbp, if a frame's CFA was computed from the entry's rbp), the same mappings and the
 * same words at the stack addresses the walk read (each return address, and each saved rbp a
 * later CFA was computed from), a walk takes the same steps to the same frames: it is a
 * function of those and of unwind rows, which never change once loaded. So a hit compares
 * those words, a few ns each, instead of unwinding every frame again and hashing the result,
 * and a loop that allocates from one call path pays for its walk once. Only walks that ended
 * complete are kept: one that ended unknown may find its file's rows later.
 */
#define MEMO_READS 32
#define MEMOS 4

struct memo_read {
	__u64 addr;
	__u64 value;
};

struct memo {
	__u64 mm; /* the mm_struct it holds in, 0 while empty or being made */
	__u64 seq; /* the mm's mm_lock_seq (even) it holds under */
	__u64 pc;
	__u64 sp;
	__u64 bp; /* compared only if uses_bp */
	__u64 lr; /* arm64: the link register (x86-64: 0) */
	__u32 id;
	__u32 reads; /* entries of read[] */
	__u32 uses_bp;
	__u32 _pad;
	struct memo_read read[MEMO_READS];
};

/* Where the rbp the walk holds came from, for the memo: the entry's registers, or a stack
 * word that is noted in the memo once a CFA is computed from it. */
enum bp_source {
	BP_FROM_REGS = 0,
	BP_READ = 1,
	BP_READ_NOTED = 2,
};

struct walk {
	__u64 pc; /* the frame's pc: the probed site, then each return address */
	__u64 sp; /* its CFA-to-be: rsp at the frame's pc */
	__u64 bp;
	__u64 lr; /* arm64: the link register of the entry, or of the code a signal interrupted */
	__u64 hash;
	__u64 check;
	struct cached_file cur; /* the mapping the last pc was in */
	struct file_cache cache;
	__u32 depth;
	__u32 end;
	__u32 bp_lost; /* the caller's rbp could not be followed */
	__u32 exact;   /* pc is where a signal interrupted the code, not a return address */
	__u64 bp_addr; /* where the rbp was read, if bp_source is BP_READ */
	__u32 bp_source;
	__u32 memo_ok; /* the walk can be remembered in memos[memo_slot] */
	__u32 memo_slot;
	__u32 lr_ok; /* arm64: lr is this frame's x30 (the first frame, or one a signal interrupted) */
	__u64 keep_sp; /* frames below this stack pointer are unwound, not kept (stack_id_at_return) */
	__u32 only_record; /* keep the first frame, and leave its caller to the caller (the same) */
	__u16 returns_past; /* uretprobe trampolines the walk went past (past_uretprobe) */
	__u16 unwound;      /* 1 once pc is a return address, whether its frame is kept or not */
};

#define ROW_CACHE 512

struct cached_row {
	__u64 frame; /* module << 32 | offset, plus 1 (0: empty) */
	struct unwind_row row;
	__u32 _pad;
};

/* Everything a walk works on but the row cache, 5 KiB, too big for the BPF stack. Per thread,
 * in its task storage (not per CPU: a uprobe program can be preempted, and another thread's walk
 * on the same CPU would write over this one's frames); the file cache carries over to its next
 * walk. */
#define STACK_WINDOW 1024
/* How far below the word that missed a refilled window begins (read_stack). */
#define WINDOW_BELOW 64

struct walk_state {
	struct walk w;
	struct stack_event ev;
	/* A copy of the stack from `window_base`, `window_len` bytes: one bpf_probe_read_user
	 * costs about 55 ns here, so the walk reads the stack a kilobyte at a time rather than
	 * eight bytes per return address and saved rbp. */
	__u64 window_base;
	__u64 window_len;
	__u8 window[STACK_WINDOW];
	/* Walks remembered, direct-mapped by rsp. */
	struct memo memos[MEMOS];
	struct unwind_row row; /* find_row's answer */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct walk_state);
} walk_state SEC(".maps");

/*
 * The rows of the frames this thread's walks met, direct-mapped by frame: a thread walks the
 * same call paths over and over, and a hit saves the binary search. Rows never change once
 * loaded, so nothing invalidates these. 512 of them: on gcc -O2 -c (5,900 distinct frames, most
 * walks 20-40 deep) walk_frame took 42% fewer perf samples than with 64; 1024 saved 10% more
 * for twice the memory per thread.
 *
 * Two task storages of 256 rows (6 KiB) each, apart from walk_state (5 KiB): from Linux 7.x a
 * task storage element is allocated with kmalloc_nolock, which gives nothing above 8 KiB, and
 * one 17 KiB element made every walk of 7.2 fail without a word. A thread whose rows cannot be
 * had still walks, searching every row.
 */
#define ROW_HALF (ROW_CACHE / 2)

struct row_half {
	struct cached_row rows[ROW_HALF];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct row_half);
} walk_rows_even SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct row_half);
} walk_rows_odd SEC(".maps");

/* The cache slot of `frame`, or 0 if this thread has no row cache. */
static __always_inline struct cached_row *row_slot(__u64 frame)
{
	__u32 i = (frame * 0x9e3779b97f4a7c15ULL) >> 55 & (ROW_CACHE - 1);
	struct task_struct *task = bpf_get_current_task_btf();
	struct row_half *half;

	if (i & 1)
		half = bpf_task_storage_get(&walk_rows_odd, task, 0,
					    BPF_LOCAL_STORAGE_GET_F_CREATE);
	else
		half = bpf_task_storage_get(&walk_rows_even, task, 0,
					    BPF_LOCAL_STORAGE_GET_F_CREATE);
	return half ? &half->rows[(i >> 1) & (ROW_HALF - 1)] : 0;
}

static __always_inline void count_stat(__u32 stat)
{
	__u64 *n = bpf_map_lookup_elem(&stack_stats, &stat);

	/* Atomic even per CPU: a uprobe program can be preempted by another on its CPU. */
	if (n)
		__sync_fetch_and_add(n, 1);
}

/* What bpf_find_vma's callback reports: its context must be on the BPF stack of the caller. */
struct vma_found {
	__u64 start;
	__u64 end;
	__u64 delta;
	struct file_key key;
	__u32 has_file;
	__u32 _pad;
};

static long vma_of_pc(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct vma_found *v = data;
	/* A probe read, not a load through the trusted vma: the verifier answers each load of a
	 * pointer through a trusted one with a search of the kernel's BTF by name (is the field
	 * trusted too?), some 5 % of the walker's load, and this runs only on a file cache miss. */
	struct file *file = BPF_CORE_READ(vma, vm_file);

	v->start = vma->vm_start;
	v->end = vma->vm_end;
	v->delta = (vma->vm_pgoff << 12) - vma->vm_start;
	v->has_file = file != 0;
	if (file)
		file_key_of(file, &v->key);
	return 0;
}

/* Makes the file mapping that holds `pc` and its rows current; false if there is none. */
static __always_inline bool find_file(struct walk *w, __u64 pc)
{
	struct vma_found v = {};
	struct unwind_file *f;
	__u32 slot;

	for (int i = 0; i < CACHED_FILES; i++) {
		if (w->cache.e[i].start <= pc && pc < w->cache.e[i].end) {
			w->cur = w->cache.e[i];
			return true;
		}
	}
	if (bpf_find_vma(bpf_get_current_task_btf(), pc, vma_of_pc, &v, 0) || !v.has_file)
		return false;
	f = bpf_map_lookup_elem(&unwind_files, &v.key);
	if (!f)
		return false;
	w->cur.start = v.start;
	w->cur.end = v.end;
	w->cur.delta = v.delta;
	w->cur.module = f->module;
	w->cur.first = f->first;
	w->cur.count = f->count;
	w->cur.index = f->index;
	w->cur.base = f->base;
	w->cur.buckets = f->buckets;
	w->cur.shift = f->shift;
	slot = w->cache.next++ % CACHED_FILES;
	w->cache.e[slot] = w->cur;
	return true;
}

static __always_inline struct unwind_row *row_at(__u32 i)
{
	__u32 pair = i >> 1;
	__u32 chunk = pair >> row_chunk_shift;
	__u32 at = pair & ((1U << row_chunk_shift) - 1);
	struct unwind_row_pair *p;
	void *rows = bpf_map_lookup_elem(&unwind_rows, &chunk);

	if (!rows)
		return 0;
	p = bpf_map_lookup_elem(rows, &at);
	return p ? &p->rows[i & 1] : 0;
}

/* Word `k` of the current file's bucket index (struct unwind_file), in `*out`; 0 if unread. */
static __always_inline bool index_word(struct walk_state *s, __u32 k, __u32 *out)
{
	struct unwind_row *r = row_at(s->w.cur.index + k / 3);

	if (!r)
		return false;
	/* Each word through a field of its own: a word at a computed offset into the row is one
	 * the verifier cannot bound. (Both architectures are little-endian.) */
	switch (k % 3) {
	case 0:
		*out = r->pc;
		break;
	case 1:
		*out = (__u32)r->cfa_offset;
		break;
	default:
		*out = (__u16)r->rbp_offset | (__u32)r->cfa_rule << 16 | (__u32)r->rbp_rule << 24;
	}
	return true;
}

/* The last row of the current file at or before file offset `off`, copied to `s->row`; 0 if
 * there is none. The file's bucket index gives the rows of off's bucket, a few (eight on
 * average): g++'s walks missed the row cache often enough that a binary search over all of
 * cc1plus's rows, 20 halvings of two map lookups each, was the walk's dearest part (perf: a
 * quarter of what `--stacks` added to a `g++ -O2 -c`).
 *
 * The halving has no branch on the rows' contents (the comparison becomes arithmetic): with
 * one, the verifier would follow both ways at every step, 2^24 paths.
 *
 * A global function, verified once on its own. Inlined, each of its halvings is a way out of
 * the loop with other bounds on lo and hi, and the verifier went through the rest of
 * walk_frame once for each: 34,000 of the 49,000 instructions it processed for
 * the entry program that walked then (alloc_enter_stacks), 39 ms of every recording with
 * stacks. */
__noinline long find_row(struct walk_state *s, __u32 off)
{
	__u32 lo = 0, hi, mid, above, first, bucket;
	struct unwind_row *r;

	if (!s)
		return 0;
	hi = s->w.cur.count;
	first = s->w.cur.first;
	if (s->w.cur.buckets) {
		if (off < s->w.cur.base)
			return 0;
		bucket = (off - s->w.cur.base) >> (s->w.cur.shift & 31);
		if (bucket < s->w.cur.buckets) {
			/* Every row before word b starts at or before off, and none from word
			 * b + 1 on does: the answer's successor is between them. */
			if (!index_word(s, bucket, &lo) || !index_word(s, bucket + 1, &hi))
				return 0;
			if (hi > s->w.cur.count)
				hi = s->w.cur.count;
		} else {
			lo = s->w.cur.count;
		}
	}
	for (int step = 0; step < ROW_SEARCH_STEPS; step++) {
		if (lo >= hi)
			break;
		mid = lo + (hi - lo) / 2;
		r = row_at(first + mid);
		if (!r)
			return 0;
		/* All ones if the row starts after off (the answer is below mid), else zero. The
		 * barrier keeps clang from turning the masks back into a branch. */
		above = (__u32)(((__u64)off - (__u64)r->pc) >> 63);
		above = -above;
		asm volatile("" : "+r"(above));
		hi = (mid & above) | (hi & ~above);
		lo = (lo & above) | ((mid + 1) & ~above);
	}
	if (!lo || lo < hi)
		return 0;
	r = row_at(first + lo - 1);
	if (!r)
		return 0;
	s->row = *r;
	return 1;
}

/* The user word at `addr`, from the stack window, refilled from just below `addr` on a miss;
 * 1 if read.
 *
 * Just below: a frame's step reads its return address at CFA-8, then the saved rbp (arm64:
 * x29) the row names, which is below it (CFA-16 for a push of rbp after the call). A window
 * that began at the return address was read again, a kilobyte, for that word: 1.32 M refills
 * for the 175,625 walks of `git log --stat`, 0.86 M with the window starting WINDOW_BELOW bytes
 * lower (0.93 M with 256: the window then reaches less far up, where the walk goes next).
 *
 * A global function, verified once: inlined, its two ways of reading were followed again at
 * each of the walk's reads, 7,000 of the 21,000 instructions the verifier went through for
 * walk.bpf.o, most of them in memo_hit's loop. */
__noinline long read_stack(struct walk_state *s, __u64 addr, __u64 *out)
{
	__u64 off;

	if (!s || !out)
		return 0;
	off = addr - s->window_base;

	if (addr < s->window_base || off + 8 > s->window_len) {
		s->window_len = 0;
		/* Failing near the top of the stack's mapping, where no window fits, or for an
		 * address below WINDOW_BELOW, which then wraps: the word alone is read. */
		if (bpf_probe_read_user(s->window, STACK_WINDOW, (void *)(addr - WINDOW_BELOW)))
			return !bpf_probe_read_user(out, sizeof(*out), (void *)addr);
		s->window_base = addr - WINDOW_BELOW;
		s->window_len = STACK_WINDOW;
		off = WINDOW_BELOW;
	}
	off &= STACK_WINDOW - 1;
	if (off > STACK_WINDOW - 8)
		return 0;
	__builtin_memcpy(out, &s->window[off], sizeof(*out));
	return 1;
}

/* Notes that the walk read `value` at `addr` and went on from it, in the memo being made. */
static __always_inline void memo_note(struct walk_state *s, __u64 addr, __u64 value)
{
	struct memo *m = &s->memos[s->w.memo_slot & (MEMOS - 1)];
	__u32 n = m->reads;

	if (n >= MEMO_READS) {
		s->w.memo_ok = 0;
		return;
	}
	m->read[n & (MEMO_READS - 1)].addr = addr;
	m->read[n & (MEMO_READS - 1)].value = value;
	m->reads = n + 1;
}

static __always_inline void mix(struct walk *w, __u64 frame)
{
	w->hash = (w->hash ^ frame) * 0x9e3779b97f4a7c15ULL;
	w->hash ^= w->hash >> 29;
	w->check = (w->check + frame) * 0xff51afd7ed558ccdULL;
	w->check ^= w->check >> 32;
}

#if defined(__TARGET_ARCH_arm64)
/* The caller's return address of a frame whose CFA is `cfa`, in `*ra`, stripped of its pac-ret
 * signature; `row`'s rbp_rule is left with the x29 rule alone. False, with the walk's end set,
 * if it cannot be had: in x30 of a frame whose x30 is not known (only the probe's and a signal
 * frame's are), or unreadable. */
static __always_inline bool arm64_return_address(struct walk_state *s, struct unwind_row *row,
						 __u64 cfa, __u64 *ra)
{
	__u32 rule = row->rbp_rule >> 4;
	__u64 at;

	row->rbp_rule &= 15;
	if (rule == RA_LR && s->w.lr_ok) {
		*ra = s->w.lr;
	} else if (rule == RA_AT_CFA || rule == RA_ABOVE_FP) {
		at = cfa + row->rbp_offset + (rule == RA_ABOVE_FP ? 8 : 0);
		if (!read_stack(s, at, ra)) {
			s->w.end = STACK_UNSUPPORTED;
			return false;
		}
		memo_note(s, at, *ra);
	} else {
		s->w.end = STACK_UNSUPPORTED;
		return false;
	}
	*ra &= stack_pc_mask;
	s->w.lr_ok = 0;
	return true;
}

/* __kernel_rt_sigreturn (arch/arm64/kernel/vdso/sigreturn.S), where a handler returns to:
 * `mov x8, #__NR_rt_sigreturn; svc #0`, as one little-endian word. */
#define SIGRETURN_CODE 0xd4000001d2801168ULL
/* Where the interrupted x0 is from the sp the trampoline runs with: struct rt_sigframe is the
 * siginfo (128 bytes), then the ucontext, whose uc_mcontext (struct sigcontext, 16-aligned) is
 * 176 bytes in and starts with fault_address; then regs[31], sp, pc. gdb's aarch64-linux-tdep.c
 * reads the same offsets. */
#define SIGFRAME_REGS (128 + 176 + 8)

/* If the walk's pc, which no file maps, is the vDSO's signal trampoline: makes the code the
 * signal interrupted the walk's next frame, with its registers from the signal frame. */
static __always_inline bool arm64_sigreturn(struct walk_state *s)
{
	__u64 code = 0, regs = s->w.sp + SIGFRAME_REGS, sp, pc;

	if (bpf_probe_read_user(&code, sizeof(code), (void *)s->w.pc) || code != SIGRETURN_CODE)
		return false;
	if (!read_stack(s, regs + 29 * 8, &s->w.bp) || !read_stack(s, regs + 30 * 8, &s->w.lr) ||
	    !read_stack(s, regs + 31 * 8, &sp) || !read_stack(s, regs + 32 * 8, &pc))
		return false;
	s->w.memo_ok = 0; /* rare: not worth noting the signal frame's words */
	s->w.bp_lost = 0;
	s->w.sp = sp;
	s->w.pc = pc;
	s->w.exact = 1; /* where the code was, not a return address */
	s->w.lr_ok = 1;
	return true;
}
#endif

/* The kernel's record of a call whose return a uretprobe took over (kernel/events/uprobes.c):
 * the fields the walk reads, found by CO-RE in every kernel's layout. */
struct return_instance___walk {
	unsigned long orig_ret_vaddr;
	bool chained;
	struct return_instance___walk *next;
} __attribute__((preserve_access_index));

struct uprobe_task___walk {
	struct return_instance___walk *return_instances;
} __attribute__((preserve_access_index));

struct task_struct___walk {
	struct uprobe_task___walk *utask;
} __attribute__((preserve_access_index));

#define RETURNS_PAST_MAX 8

/*
 * Whether the return address w->pc is the uretprobe trampoline (memtrack's own return probes
 * on the allocators put it in place of the return address of every allocator call under way),
 * and if so, w->pc becomes the address it replaced. Only a walk from inside such a call meets
 * it: a fault in malloc's own code, walked by fault_walk. The kernel keeps the replaced
 * addresses in the thread's return instances, the latest call first, which is the order the
 * walk meets the trampolines in; a call that was tail-called from another probed one shares
 * its caller's stack slot, and its instance is `chained` to the next. Rare: the task's
 * trampoline is looked up only for a pc in no file, and the walk is not remembered in a memo,
 * since the address comes from the kernel, not from the stack's words.
 */
static __always_inline bool past_uretprobe(struct walk *w)
{
	struct task_struct___walk *task = (void *)bpf_get_current_task_btf();
	struct task_struct *t = bpf_get_current_task_btf();
	struct return_instance___walk *ri;
	__u32 skip = w->returns_past;
	__u64 tramp;

	tramp = BPF_CORE_READ(t, mm, uprobes_state.xol_area, vaddr);
	if (!tramp || w->pc != tramp)
		return false;
	ri = BPF_CORE_READ(task, utask, return_instances);
	for (int i = 0; i < RETURNS_PAST_MAX && ri; i++) {
		bool chained = BPF_CORE_READ(ri, chained);

		if (!skip && !chained) {
			w->pc = BPF_CORE_READ(ri, orig_ret_vaddr);
			w->returns_past++;
			w->memo_ok = 0;
			return true;
		}
		if (!chained)
			skip--;
		ri = BPF_CORE_READ(ri, next);
	}
	return false;
}

/* One frame: record it, then find its caller. Returns 1 to end the walk; 2 once the frame is
 * recorded, with `only_record`.
 *
 * A global function, verified once on its own: inlined into the walk's loop, the verifier
 * would go through it for every depth the walk can reach, and run out of budget. */
__noinline long walk_frame(struct walk_state *s)
{
	struct unwind_row row;
	struct cached_row *slot;
	__u64 pc, cfa, ra, frame;
	struct walk *w;
	__u32 off, depth;
	bool kept;

	if (!s)
		return 1;
	w = &s->w;
	depth = w->depth;
	if (depth >= STACK_MAX_DEPTH) {
		w->end = STACK_TRUNCATED;
		return 1;
	}
	/* A caller's return address can be the first byte past its function (a call to a
	 * noreturn function ends it): its own call instruction is the byte before. The pc a
	 * signal interrupted is the instruction itself. */
	pc = (depth || w->unwound) && !w->exact ? w->pc - CALL_BACK : w->pc;
	w->exact = 0;
	if ((pc < w->cur.start || pc >= w->cur.end) && !find_file(w, pc)) {
#if defined(__TARGET_ARCH_arm64)
		if (pc != w->pc && arm64_sigreturn(s))
			return 0;
#endif
		if (pc != w->pc && past_uretprobe(w))
			return 0;
		w->end = STACK_UNKNOWN;
		return 1;
	}
	off = (__u32)(pc + w->cur.delta);
	frame = ((__u64)w->cur.module << 32) | off;
	kept = w->sp >= w->keep_sp;
	if (kept) {
		s->ev.frames[depth] = frame;
		w->depth = depth + 1;
		mix(w, frame);
	}
	if (w->only_record) {
		w->only_record = 0;
		return 2;
	}

	slot = row_slot(frame);
	if (slot && slot->frame == frame + 1) {
		row = slot->row;
	} else {
		if (!find_row(s, off)) {
			w->end = STACK_UNKNOWN;
			return 1;
		}
		row = s->row;
		if (slot) {
			slot->frame = frame + 1;
			slot->row = row;
		}
	}
	switch (row.cfa_rule) {
	case CFA_RSP:
		cfa = w->sp + row.cfa_offset;
		break;
	case CFA_RBP:
		if (w->bp_lost) {
			w->end = STACK_UNSUPPORTED;
			return 1;
		}
		if (w->bp_source == BP_FROM_REGS) {
			s->memos[w->memo_slot & (MEMOS - 1)].uses_bp = 1;
		} else if (w->bp_source == BP_READ) {
			memo_note(s, w->bp_addr, w->bp);
			w->bp_source = BP_READ_NOTED;
		}
		cfa = w->bp + row.cfa_offset;
		break;
	case CFA_PLT:
		cfa = w->sp + 8 + ((w->pc & 15) >= 11 ? 8 : 0);
		break;
	case CFA_SIGNAL:
		/* The handler returned here: the frame is the trampoline itself (named by its own
		 * address, the byte before it being no function's), and the caller is the code the
		 * signal interrupted, whose registers the kernel saved in the sigcontext at rsp. */
		if (kept)
			s->ev.frames[depth] = frame + 1;
		w->memo_ok = 0; /* rare: not worth noting the sigcontext's words */
		if (!read_stack(s, w->sp + row.cfa_offset, &cfa) ||
		    !read_stack(s, w->sp + row.cfa_offset + 8, &ra)) {
			w->end = STACK_UNSUPPORTED;
			return 1;
		}
		w->bp_lost = row.rbp_rule != RBP_AT_SP ||
			     !read_stack(s, w->sp + row.rbp_offset, &w->bp);
		if (!ra) {
			w->end = STACK_COMPLETE;
			return 1;
		}
		w->sp = cfa;
		w->pc = ra;
		w->exact = 1;
		return 0;
	case CFA_END:
		w->end = STACK_COMPLETE;
		return 1;
	case CFA_UNKNOWN:
		w->end = STACK_UNKNOWN;
		return 1;
	default:
		w->end = STACK_UNSUPPORTED;
		return 1;
	}
#if defined(__TARGET_ARCH_arm64)
	if (!arm64_return_address(s, &row, cfa, &ra))
		return 1;
#else
	if (!read_stack(s, cfa - 8, &ra)) {
		w->end = STACK_UNSUPPORTED;
		return 1;
	}
	memo_note(s, cfa - 8, ra);
#endif
	if (row.rbp_rule == RBP_AT_CFA) {
		if (read_stack(s, cfa + row.rbp_offset, &w->bp)) {
			w->bp_addr = cfa + row.rbp_offset;
			w->bp_source = BP_READ;
		} else {
			w->bp_lost = 1;
		}
	} else if (row.rbp_rule == RBP_UNSUPPORTED) {
		w->bp_lost = 1;
	}
	if (!ra) {
		w->end = STACK_COMPLETE;
		return 1;
	}
	w->sp = cfa;
	w->pc = ra;
	w->unwound = 1;
	return 0;
}

/* 6.4-6.13: mm_lock_seq is a plain int, moved when a writer releases the mmap lock (from
 * 6.14 a seqcount_t, odd while the writer holds it). */
struct mm_struct___lock_seq_int {
	int mm_lock_seq;
} __attribute__((preserve_access_index));

/* The current mm's VMA sequence (odd while a writer holds the mmap lock); 1 on kernels without
 * it, so that nothing is cached there. The int of 6.4-6.13 is doubled to stay even: it cannot
 * say that a writer is at work, only that one has finished, which is what a cached mapping needs
 * (the allocating thread runs code from that mapping, so only another thread's change of it, in
 * that window, would go unseen). CO-RE matches each flavour only where the field's kind matches.
 *
 * A global function, verified once whatever the number of paths that reach its calls: each
 * load of a pointer through the task's BTF pointer costs the verifier a search of the kernel's
 * BTF by name (is the field a trusted pointer?), and inlined after the walk's loop, it was
 * verified again for every depth the loop can end at. */
__noinline __u64 mm_seq(void)
{
	struct task_struct *task = bpf_get_current_task_btf();

	if (bpf_core_field_exists(struct mm_struct___lock_seq_int, mm_lock_seq))
		return (__u64)(__u32)((struct mm_struct___lock_seq_int *)task->mm)->mm_lock_seq << 1;
	if (!bpf_core_field_exists(struct mm_struct, mm_lock_seq))
		return 1;
	/* Plain loads through the task's BTF pointer: a probe read costs tens of ns here. */
	return task->mm->mm_lock_seq.sequence;
}

static __always_inline bool stacks_on(void)
{
	__u32 zero = 0;
	__u32 *on = bpf_map_lookup_elem(&stack_config, &zero);

	return on && *on;
}

/* The id the memo `slot` of `s` remembers for a walk from `s->w`'s pc, sp and bp under `seq`,
 * if every word it read is as it was; 0 if none. The caller has compared the memo's mm with
 * the current one: a global function's arguments can only be scalars and pointers to memory,
 * and reading task->mm here again would cost the verifier another search of the kernel's BTF
 * (see mm_seq).
 *
 * A global function, verified once (as walk_frame). */
__noinline __u32 memo_hit(struct walk_state *s, __u32 slot, __u64 seq)
{
	struct memo *m;
	__u64 word;

	if (!s)
		return 0;
	m = &s->memos[slot & (MEMOS - 1)];
	if (!m->mm || m->seq != seq || m->pc != s->w.pc || m->sp != s->w.sp ||
	    m->lr != s->w.lr || (m->uses_bp && m->bp != s->w.bp))
		return 0;
	for (int i = 0; i < MEMO_READS; i++) {
		if (i >= m->reads)
			return m->id;
		if (!read_stack(s, m->read[i].addr, &word) || word != m->read[i].value)
			return 0;
	}
	return m->id;
}

/* The id of the stack `s` walked: the one `stack_ids` knows it by, else a new one, sent through
 * the ring first; 0 if its record could not be sent. */
static __always_inline __u32 id_of_walk(struct walk_state *s)
{
	struct stack_seen seen = {}, *known;
	struct stack_event *ev;
	__u64 *ids, key, tid;
	bool cached = true;
	__u32 depth;
	long err;

	mix(&s->w, ((__u64)s->w.end << 32) | s->w.depth);
	key = s->w.hash;
	known = bpf_map_lookup_elem(&stack_ids, &key);
	if (known) {
		if (known->check == s->w.check)
			return known->id;
		count_stat(STAT_COLLISIONS);
		cached = false;
	}

	ev = &s->ev;
	ids = bpf_map_lookup_elem(&stack_next_id, &(__u32){ 0 });
	if (!ids)
		return 0;
	depth = s->w.depth;
	if (depth > STACK_MAX_DEPTH)
		depth = STACK_MAX_DEPTH;
	tid = bpf_get_current_pid_tgid();
	fill_header(&ev->h, EV_STACK, tid >> 32, (__u32)tid);
	ev->id = (__u32)__sync_fetch_and_add(ids, 1) + 1;
	ev->depth = depth;
	ev->end = s->w.end;
	ev->_pad = 0;
	if (bpf_ringbuf_output(&events, ev, offsetof(struct stack_event, frames) + depth * 8,
			       BPF_RB_NO_WAKEUP)) {
		count_lost(LOST_RING_STACK);
		return 0;
	}
	if (cached) {
		seen.check = s->w.check;
		seen.id = ev->id;
		err = bpf_map_update_elem(&stack_ids, &key, &seen, BPF_NOEXIST);
		/* -EEXIST: another CPU sent the same stack meanwhile; both ids name it. */
		if (err && err != -17)
			count_stat(STAT_UNCACHED);
	}
	return ev->id;
}

/* This thread's walk state; 0, counted, if there is no memory for it. */
static __always_inline struct walk_state *walk_state_of(struct task_struct *task)
{
	struct walk_state *s =
		bpf_task_storage_get(&walk_state, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (!s) {
		/* No memory for this thread's walk: counted, never silent. */
		count_stat(STAT_WALKS);
		count_stat(STAT_UNSUPPORTED);
	}
	return s;
}

/* Sets `s` up to walk from the registers in s->w (pc, sp, bp, lr) in `mm` under `seq`, noting
 * the words it reads in memo `slot`, which is empty until the walk is done. */
static __always_inline void walk_begin(struct walk_state *s, __u32 slot, __u64 mm, __u64 seq)
{
	struct memo *m = &s->memos[slot & (MEMOS - 1)];

	m->mm = 0;
	m->reads = 0;
	m->uses_bp = 0;
	s->w.memo_slot = slot;
	s->w.memo_ok = 1;
	s->w.bp_source = BP_FROM_REGS;
	s->w.hash = 0xcbf29ce484222325ULL;
	s->w.check = 0x84222325cbf29ce4ULL;
	s->w.cur.start = 0;
	s->w.cur.end = 0;
	s->w.depth = 0;
	s->w.end = STACK_COMPLETE;
	s->w.bp_lost = 0;
	s->w.exact = 0;
	s->w.lr_ok = 1;
	s->w.keep_sp = 0;
	s->w.only_record = 0;
	s->w.returns_past = 0;
	s->w.unwound = 0;
	if (s->w.cache.mm != mm || s->w.cache.seq != seq || (seq & 1)) {
		__builtin_memset(&s->w.cache, 0, sizeof(s->w.cache));
		s->w.cache.mm = mm;
		s->w.cache.seq = seq;
	}
}

/* More than STACK_MAX_DEPTH: a walk from a return unwinds a frame or two it does not keep. */
#define WALK_STEPS (STACK_MAX_DEPTH + 4)

/* Walks from the frame s->w holds to the end; true if no mapping of the mm (under `seq`)
 * changed meanwhile, and the file cache is kept for the next walk. */
static __always_inline bool walk_frames(struct walk_state *s, __u64 seq)
{
	bool kept;
	int i;

	/* walk_frame is a global function, so the verifier checks its body once and this loop as
	 * so many calls (bpf_loop would cost a callback and a task storage lookup per frame). */
	for (i = 0; i < WALK_STEPS; i++) {
		if (walk_frame(s))
			break;
	}
	if (i == WALK_STEPS)
		s->w.end = STACK_TRUNCATED;
	kept = !(seq & 1) && mm_seq() == seq;
	if (!kept)
		s->w.cache.mm = 0;
	return kept;
}

static __always_inline void count_walk(struct walk_state *s)
{
	count_stat(STAT_WALKS);
	if (s->w.end != STACK_COMPLETE)
		count_stat(s->w.end); /* STAT_TRUNCATED, STAT_UNKNOWN, STAT_UNSUPPORTED */
}

/*
 * The id of the current call stack, from the allocator's entry registers (or a fault's user
 * registers): sent through the ring first if it is new. `counted`: whether the walk counts in
 * the walk counters (`stack_stats`), which are the allocations' walks; a fault's walk that ends
 * early shows as its frame mark in the resident views instead. `keep_sp`, when not 0: frames
 * below it are unwound, not kept (a fault inside an allocator call: its stack starts at the
 * allocator's caller), and the walk is neither looked up in nor kept as a memo. 0 when stacks are off, or when its record could not be sent (counted as
 * LOST_RING_STACK: the allocation is recorded without a stack).
 *
 * A global function: the verifier checks it once, not once per allocator layout it is inlined
 * into, which would exceed its instruction budget.
 */
#if defined(__TARGET_ARCH_arm64)
/* A global function's context argument must name the type the kernel gives uprobe programs
 * (bpf_user_pt_regs_t): struct pt_regs on x86_64, struct user_pt_regs on arm64, where 6.1's
 * verifier refuses `struct pt_regs *` ("FWD pt_regs ... size cannot be determined"). */
#define STACK_CTX struct user_pt_regs
#else
#define STACK_CTX struct pt_regs
#endif
__noinline __u32 stack_id(STACK_CTX *ctx, __u32 counted, __u64 keep_sp)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct walk_state *s;
	struct memo *m;
	__u64 mm, seq, pc, sp, bp, lr = 0;
	__u32 id, slot;
	bool kept;

	/* A fault's registers come as a map value (walk.bpf.c's fault_walk), which the verifier
	 * takes for possibly NULL in a global function; a uprobe's context never is. */
	if (!stacks_on() || !ctx)
		return 0;
	s = walk_state_of(task);
	if (!s)
		return 0;
	pc = PT_REGS_IP(ctx);
	sp = PT_REGS_SP(ctx);
	bp = PT_REGS_FP(ctx);
#if defined(__TARGET_ARCH_arm64)
	lr = ctx->regs[30]; /* the link register: the caller, until the prologue saves it */
#endif
	s->w.pc = pc;
	s->w.sp = sp;
	s->w.bp = bp;
	s->w.lr = lr;
	s->window_len = 0; /* the stack changed since the last walk */
	mm = (__u64)task->mm;
	seq = mm_seq();
	/* Call sites are 16-byte aligned frames apart: rsp's next bits tell nearby depths apart. */
	slot = (sp >> 4) & (MEMOS - 1);
	if (!(seq & 1) && !keep_sp) {
		id = s->memos[slot].mm == mm ? memo_hit(s, slot, seq) : 0;
		if (id) {
			if (counted)
				count_stat(STAT_WALKS);
			return id;
		}
	}
	walk_begin(s, slot, mm, seq);
	if (keep_sp) {
		s->w.keep_sp = keep_sp;
		s->w.memo_ok = 0;
	}
	kept = walk_frames(s, seq);
	if (counted)
		count_walk(s);
	id = id_of_walk(s);
	/* Kept for the next walk only if no mapping changed while this one ran. */
	if (id && kept && s->w.memo_ok && s->w.end == STACK_COMPLETE) {
		m = &s->memos[slot];
		m->seq = seq;
		m->pc = pc;
		m->sp = sp;
		m->bp = bp;
		m->lr = lr;
		m->id = id;
		m->mm = mm;
	}
	return id;
}

/*
 * The id of the stack an allocator call had at its entry, at `entry_pc`, walked at the
 * outermost call's return instead (a walk alloc.bpf.c left there: the walker was not in place
 * at the entry). The entry's own frame comes first; then the frames the return's registers
 * unwind to, from the first whose stack pointer is at least `keep_sp`, the entry's above its
 * return address. Frames below that are the allocator's, made since the entry (the labelled
 * operator new a malloc returns to). The callers' frames are as they were at the entry, so
 * this is the entry's walk frame for frame, with the same id. Rare: no memo is made or used.
 *
 * A global function, as stack_id.
 */
__noinline __u32 stack_id_at_return(STACK_CTX *ctx, __u64 entry_pc, __u64 keep_sp)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct walk_state *s;
	__u64 seq;

	if (!stacks_on())
		return 0;
	s = walk_state_of(task);
	if (!s)
		return 0;
	s->w.pc = entry_pc;
	s->w.sp = keep_sp;
	s->w.bp = 0;
	s->w.lr = 0;
	s->window_len = 0;
	seq = mm_seq();
	walk_begin(s, (keep_sp >> 4) & (MEMOS - 1), (__u64)task->mm, seq);
	s->w.memo_ok = 0;
	s->w.only_record = 1;
	if (walk_frame(s) == 2) {
		s->w.pc = PT_REGS_IP(ctx); /* the return address: the kernel put it back */
		s->w.sp = PT_REGS_SP(ctx);
		s->w.bp = PT_REGS_FP(ctx);
		s->w.lr_ok = 0; /* arm64: a caller's return address is on the stack */
		s->w.keep_sp = keep_sp;
		walk_frames(s, seq);
	}
	count_walk(s);
	return id_of_walk(s);
}

#endif /* MEMTRACK_STACK_BPF_H */
