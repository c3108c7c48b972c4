// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * Resident memory from the kernel's reverse-mapping (rmap) functions: every time pages of a
 * folio are mapped into or unmapped from a process's page tables, one record with the pages'
 * kind (anon, file, shmem), their signed number and the user address of the first one. The
 * report keeps a signed running sum per process and kind (src/report/rmap.rs) and joins the
 * addresses with the recorded mappings.
 *
 * fentry programs, so only where the kernel lets them attach (not on locked-down kernels: the
 * recorder says so once and keeps rss_stat alone). The functions changed names and arguments:
 * Linux 6.1 has page_add_new_anon_rmap, page_add_anon_rmap, page_add_file_rmap and
 * page_remove_rmap (a `compound` flag for PMD mappings); 6.8 on has folio_add_new_anon_rmap,
 * folio_add_{anon,file}_rmap_{ptes,pmd} and folio_remove_rmap_{ptes,pmd}. User space reads the
 * kernel's BTF and loads the programs of one generation (src/record/rmap.rs); every program
 * whose generation is not chosen is turned off before load.
 *
 * Not hooked, by design: fork copies page tables through the folio_*_dup_* helpers (inline),
 * so a child's inherited pages produce no adds under its pid; unmapping them produces removes
 * with no matching adds (the "fork-inherited unmap" contract: sums go negative, never clamped).
 * hugetlb pages (their own functions, and not in rss_stat either) and PUD mappings (DAX) are
 * not counted.
 */
#include "common.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define KIND_FILE 0
#define KIND_ANON 1
#define KIND_SHMEM 3
#define TMPFS_MAGIC 0x01021994
#define PAGE_MAPPING_ANON 1UL
#define PAGE_SHIFT_ 12
/* Pages of a PMD mapping on x86_64 and arm64 with 4 KiB pages (HPAGE_PMD_NR). */
#define PMD_PAGES 512

/* Linux 6.1's struct folio kept the order in a byte of its own (6.12 keeps it in _flags_1). */
struct folio___order_byte {
	unsigned char _folio_order;
} __attribute__((preserve_access_index));

/* 7.x's mm_struct without CONFIG_MEMCG has no owner: then the current task is the owner when
 * it runs on the mm, and changes made from elsewhere (reclaim, another process) are dropped. */
struct mm_struct___owner {
	struct task_struct *owner;
} __attribute__((preserve_access_index));

/* The numeric value of a pointer argument: fentry arguments are trusted BTF pointers, and the
 * verifier refuses arithmetic between one and a number read from memory (a page's offset in its
 * folio); copied through the stack, it is a plain number (as rss.bpf.c's address_of). */
static __always_inline __u64 scalar(const void *p)
{
	__u64 v = 0;

	bpf_probe_read_kernel(&v, sizeof(v), &p);
	return v;
}

/* The head page of `page` (a folio's first page): compound_head with bit 0 set on tail pages,
 * the first word after flags on every kernel memtrack supports. */
static __always_inline struct page *head_of(struct page *page)
{
	__u64 p = scalar(page);
	__u64 head = 0;

	bpf_probe_read_kernel(&head, sizeof(head), (void *)(p + 8));
	return (struct page *)(head & 1 ? head - 1 : p);
}

/* The flags word, read raw: `unsigned long flags` before 6.18, `memdesc_flags_t flags` (one
 * unsigned long) after; either way the first word of the page. */
static __always_inline __u64 flags_of(struct page *page)
{
	__u64 flags = 0;

	bpf_probe_read_kernel(&flags, sizeof(flags), page);
	return flags;
}

/* Pages in the folio whose head is `head`. */
static __always_inline __s32 folio_pages(struct page *head)
{
	struct folio *folio = (struct folio *)head;
	__u64 order = 0;

	if (!(flags_of(head) & (1UL << bpf_core_enum_value(enum pageflags, PG_head))))
		return 1;
	if (bpf_core_field_exists(struct folio___order_byte, _folio_order)) {
		order = BPF_CORE_READ((struct folio___order_byte *)folio, _folio_order);
	} else {
		bpf_probe_read_kernel(&order, sizeof(order),
				      (void *)folio + bpf_core_field_offset(struct folio, _flags_1));
		order &= 0xff;
	}
	return order < 20 ? 1 << order : 1;
}

/* Anon, shmem (a tmpfs inode: shmem files, memfd, MAP_SHARED anonymous, SysV shm) or file,
 * as rss_stat's members count them, from the folio's mapping. */
static __always_inline __u32 kind_of(struct page *head)
{
	__u64 mapping = (__u64)BPF_CORE_READ((struct folio *)head, mapping);
	struct address_space *as;

	if (mapping & PAGE_MAPPING_ANON)
		return KIND_ANON;
	as = (struct address_space *)mapping;
	if (as && BPF_CORE_READ(as, host, i_sb, s_magic) == TMPFS_MAGIC)
		return KIND_SHMEM;
	return KIND_FILE;
}

/* The user address where `page` is mapped in `vma`: its page offset in the mapped object (the
 * file's, or the anon_vma's linear index) relative to the vma's first one. */
static __always_inline __u64 address_of_page(struct page *page, struct vm_area_struct *vma)
{
	struct page *head = head_of(page);
	__u64 size = bpf_core_type_size(struct page);
	__u64 index = BPF_CORE_READ((struct folio *)head, index);
	__u64 pgoff;

	if (size)
		index += (scalar(page) - scalar(head)) / size;
	pgoff = BPF_CORE_READ(vma, vm_pgoff);
	return BPF_CORE_READ(vma, vm_start) + ((index - pgoff) << PAGE_SHIFT_);
}

/* The mappings whose region record was sent: (tgid, start) -> end. LRU: a forgotten entry only
 * sends its region again. */
struct region_key {
	__u32 tgid;
	__u32 _pad;
	__u64 start;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct region_key);
	__type(value, __u64);
} regions_sent SEC(".maps");

/* Send what `vma` is, the first time an rmap record of process `tgid` falls into it. */
static __noinline void note_region(struct vm_area_struct *vma, struct mm_struct *mm,
				   struct task_struct *owner, __u32 tgid)
{
	struct region_key key = { .tgid = tgid, .start = BPF_CORE_READ(vma, vm_start) };
	__u64 end = BPF_CORE_READ(vma, vm_end);
	__u64 *sent = bpf_map_lookup_elem(&regions_sent, &key);
	struct rmap_region_event *e;
	struct file *file;
	const unsigned char *name;

	if (sent && *sent == end)
		return;
	bpf_map_update_elem(&regions_sent, &key, &end, BPF_ANY);
	e = reserve(sizeof(*e), LOST_RING_RMAP);
	if (!e)
		return;
	fill_header(&e->h, EV_RMAP_REGION, tgid, (__u32)bpf_get_current_pid_tgid());
	e->h.pid = ns_tgid_of(owner, tgid);
	e->start = key.start;
	e->end = end;
	e->name_len = 0;
	file = BPF_CORE_READ(vma, vm_file);
	if (file) {
		struct inode *inode = BPF_CORE_READ(file, f_inode);
		long n;

		e->region = BPF_CORE_READ(inode, i_sb, s_magic) == TMPFS_MAGIC ? REGION_SHMEM
									       : REGION_FILE;
		name = BPF_CORE_READ(file, f_path.dentry, d_name.name);
		n = bpf_probe_read_kernel_str(e->name, sizeof(e->name), name);
		e->name_len = n > 0 ? n - 1 : 0;
	} else if (key.start <= BPF_CORE_READ(mm, brk) && end > BPF_CORE_READ(mm, start_brk)) {
		e->region = REGION_HEAP;
	} else if (key.start <= BPF_CORE_READ(mm, start_stack) &&
		   end > BPF_CORE_READ(mm, start_stack)) {
		e->region = REGION_STACK;
	} else {
		e->region = REGION_ANON;
	}
	submit(e);
}

/* Record `pages` (signed) of `kind` at `addr` in the mm of `vma`, for a tracked process. */
static __always_inline void emit_rmap(struct vm_area_struct *vma, __u32 kind, __s32 pages,
				      __u64 addr)
{
	struct task_struct *current = bpf_get_current_task_btf();
	struct mm_struct *mm = BPF_CORE_READ(vma, vm_mm);
	struct task_struct *owner = NULL;
	struct rmap_event *e;
	__u32 tgid;

	if (!mm)
		return;
	if (bpf_core_field_exists(struct mm_struct___owner, owner))
		owner = BPF_CORE_READ((struct mm_struct___owner *)mm, owner);
	else if (current->mm == mm)
		owner = current;
	if (!owner)
		return;
	tgid = BPF_CORE_READ(owner, tgid);
	if (tracked_state(tgid) != TRACK_PROCESS)
		return;
	/* As rss.bpf.c: an mm being set up by exec, and the old one torn down after it, or at
	 * exit after exit_mm, belong to no process image the stream describes (the rss_exec
	 * baseline covers the new image's starting pages). */
	if (tgid == current->tgid &&
	    (current->mm != mm || BPF_CORE_READ_BITFIELD_PROBED(current, in_execve)))
		return;
	if (pages > 0)
		note_region(vma, mm, owner, tgid);
	e = reserve(sizeof(*e), LOST_RING_RMAP);
	if (!e)
		return;
	fill_header(&e->h, EV_RMAP, tgid, (__u32)bpf_get_current_pid_tgid());
	e->h.pid = ns_tgid_of(owner, tgid); /* the owner need not be the current task */
	e->addr = addr;
	e->pages = pages;
	e->kind = kind;
	submit(e);
}

/* ---- Linux 6.8 on: folio_*_rmap_{ptes,pmd} ---- */

SEC("fentry/folio_add_new_anon_rmap")
int BPF_PROG(rmap_new_anon, struct folio *folio, struct vm_area_struct *vma, unsigned long address)
{
	struct page *head = (struct page *)scalar(folio);

	emit_rmap(vma, KIND_ANON, folio_pages(head), address);
	return 0;
}

SEC("fentry/folio_add_anon_rmap_ptes")
int BPF_PROG(rmap_anon_ptes, struct folio *folio, struct page *page, int nr_pages,
	     struct vm_area_struct *vma, unsigned long address)
{
	emit_rmap(vma, KIND_ANON, nr_pages, address);
	return 0;
}

SEC("fentry/folio_add_anon_rmap_pmd")
int BPF_PROG(rmap_anon_pmd, struct folio *folio, struct page *page, struct vm_area_struct *vma,
	     unsigned long address)
{
	emit_rmap(vma, KIND_ANON, PMD_PAGES, address);
	return 0;
}

SEC("fentry/folio_add_file_rmap_ptes")
int BPF_PROG(rmap_file_ptes, struct folio *folio, struct page *page, int nr_pages,
	     struct vm_area_struct *vma)
{
	struct page *head = (struct page *)scalar(folio);

	emit_rmap(vma, kind_of(head), nr_pages, address_of_page(page, vma));
	return 0;
}

SEC("fentry/folio_add_file_rmap_pmd")
int BPF_PROG(rmap_file_pmd, struct folio *folio, struct page *page, struct vm_area_struct *vma)
{
	struct page *head = (struct page *)scalar(folio);

	emit_rmap(vma, kind_of(head), PMD_PAGES, address_of_page(page, vma));
	return 0;
}

SEC("fentry/folio_remove_rmap_ptes")
int BPF_PROG(rmap_remove_ptes, struct folio *folio, struct page *page, int nr_pages,
	     struct vm_area_struct *vma)
{
	struct page *head = (struct page *)scalar(folio);

	emit_rmap(vma, kind_of(head), -nr_pages, address_of_page(page, vma));
	return 0;
}

SEC("fentry/folio_remove_rmap_pmd")
int BPF_PROG(rmap_remove_pmd, struct folio *folio, struct page *page, struct vm_area_struct *vma)
{
	struct page *head = (struct page *)scalar(folio);

	emit_rmap(vma, kind_of(head), -PMD_PAGES, address_of_page(page, vma));
	return 0;
}

/* ---- Linux 6.1: page_*_rmap, PMD mappings flagged by `compound` ---- */

/* rmap_t's RMAP_COMPOUND (6.1): the page is mapped by a PMD. */
#define RMAP_COMPOUND_6_1 2

SEC("fentry/page_add_new_anon_rmap")
int BPF_PROG(rmap_page_new_anon, struct page *page, struct vm_area_struct *vma,
	     unsigned long address)
{
	/* 6.1 maps a new anon page whole: a THP's head, by a PMD, or a small page. */
	emit_rmap(vma, KIND_ANON, folio_pages(page), address);
	return 0;
}

SEC("fentry/page_add_anon_rmap")
int BPF_PROG(rmap_page_anon, struct page *page, struct vm_area_struct *vma, unsigned long address,
	     unsigned int flags)
{
	emit_rmap(vma, KIND_ANON, flags & RMAP_COMPOUND_6_1 ? PMD_PAGES : 1, address);
	return 0;
}

SEC("fentry/page_add_file_rmap")
int BPF_PROG(rmap_page_file, struct page *page, struct vm_area_struct *vma, bool compound)
{
	emit_rmap(vma, kind_of(head_of(page)), compound ? PMD_PAGES : 1,
		  address_of_page(page, vma));
	return 0;
}

SEC("fentry/page_remove_rmap")
int BPF_PROG(rmap_page_remove, struct page *page, struct vm_area_struct *vma, bool compound)
{
	emit_rmap(vma, kind_of(head_of(page)), compound ? -PMD_PAGES : -1,
		  address_of_page(page, vma));
	return 0;
}
