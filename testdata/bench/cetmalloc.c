/*
 * A small allocator that replaces malloc in the executable it is linked into, for the bench's
 * "cet" workload (issue 12): built with -fcf-protection=full, every entry point starts with
 * endbr64, as glibc's do on Ubuntu and Fedora. Size classes of 16 bytes up to 4 KiB from a
 * free list each, refilled from mmap; larger blocks mmap'd whole. A 16-byte header holds the
 * block's size. Single-threaded use only (the bench's churn).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define HEADER 16
#define CLASSES 256 /* 16 .. 4096 bytes */
#define REFILL (1 << 20)

struct block {
	struct block *next;
};

static struct block *free_list[CLASSES];
static char *bump, *bump_end;

static size_t *header_of(void *p)
{
	return (size_t *)((char *)p - HEADER);
}

static void *big(size_t size)
{
	size_t total = size + HEADER;
	char *p = mmap(0, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return 0;
	*(size_t *)p = total;
	return p + HEADER;
}

void *malloc(size_t size)
{
	size_t cls = (size + 15) / 16;
	struct block *b;
	size_t total;

	if (size > 16 * (CLASSES - 1))
		return big(size);
	b = free_list[cls];
	if (b) {
		free_list[cls] = b->next;
		return b;
	}
	total = cls * 16 + HEADER;
	if (bump_end - bump < (intptr_t)total) {
		bump = mmap(0, REFILL, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (bump == MAP_FAILED) {
			bump = bump_end = 0;
			errno = ENOMEM;
			return 0;
		}
		bump_end = bump + REFILL;
	}
	*(size_t *)bump = cls;
	bump += total;
	return bump - total + HEADER;
}

void free(void *p)
{
	size_t cls;

	if (!p)
		return;
	cls = *header_of(p);
	if (cls >= CLASSES) {
		munmap(header_of(p), cls);
		return;
	}
	((struct block *)p)->next = free_list[cls];
	free_list[cls] = p;
}

static size_t usable(void *p)
{
	size_t cls = *header_of(p);

	return cls >= CLASSES ? cls - HEADER : cls * 16;
}

void *calloc(size_t n, size_t size)
{
	void *p;

	if (size && n > SIZE_MAX / size) {
		errno = ENOMEM;
		return 0;
	}
	p = malloc(n * size);
	if (p)
		memset(p, 0, n * size);
	return p;
}

void *realloc(void *old, size_t size)
{
	void *p;

	if (!old)
		return malloc(size);
	if (!size) {
		free(old);
		return 0;
	}
	if (size <= usable(old))
		return old;
	p = malloc(size);
	if (p) {
		memcpy(p, old, usable(old));
		free(old);
	}
	return p;
}
