/*
 * A program's own pool allocator, which memtrack knows only through `record --allocator`
 * (tests/custom_allocators.rs). Blocks come from slabs the pool takes from malloc: the malloc
 * is nested in pool_alloc and must not be reported, only the pool's block. Built into the
 * executable (testdata/alloc/pool.c with -DPOOL_STATIC) and as the shared library libpool.so.
 *
 * The pool is the first argument of every function, so the sizes and pointers memtrack reads
 * are at positions 2 and 3: pool_alloc=alloc(size=arg2), pool_calloc=calloc(n=arg2,size=arg3),
 * pool_realloc=realloc(ptr=arg2,size=arg3), pool_free=free(ptr=arg2).
 */
#include <stdlib.h>
#include <string.h>

#include "pool_alloc.h"

/* Each block starts with its size; a freed block goes on a list and is handed out again to a
 * request of exactly its size. */
struct block {
	size_t size;
	struct block *next_free;
};

#define HEADER (sizeof(struct block))

POOL_API void *pool_alloc(struct pool *p, size_t size)
{
	struct block **link;
	struct block *b;
	size_t need = HEADER + ((size + 15) & ~(size_t)15);

	for (link = &p->free; *link; link = &(*link)->next_free) {
		if ((*link)->size == size) {
			b = *link;
			*link = b->next_free;
			return b + 1;
		}
	}
	if (need > POOL_SLAB_BYTES)
		return NULL;
	if (!p->slab || p->used + need > POOL_SLAB_BYTES) {
		p->slab = malloc(POOL_SLAB_BYTES); /* nested: one allocation, pool_alloc's */
		if (!p->slab)
			return NULL;
		p->used = 0;
		p->slabs++;
	}
	b = (struct block *)(p->slab + p->used);
	p->used += need;
	b->size = size;
	b->next_free = NULL;
	return b + 1;
}

POOL_API void *pool_calloc(struct pool *p, size_t n, size_t size)
{
	void *q = pool_alloc(p, n * size); /* nested: reported once, as pool_calloc */

	if (q)
		memset(q, 0, n * size);
	return q;
}

POOL_API void pool_free(struct pool *p, void *ptr)
{
	struct block *b;

	if (!ptr)
		return;
	b = (struct block *)ptr - 1;
	b->next_free = p->free;
	p->free = b;
}

POOL_API void *pool_realloc(struct pool *p, void *ptr, size_t size)
{
	struct block *old;
	void *q;

	if (!ptr)
		return pool_alloc(p, size);
	old = (struct block *)ptr - 1;
	q = pool_alloc(p, size);
	if (!q)
		return NULL;
	memcpy(q, ptr, old->size < size ? old->size : size);
	pool_free(p, ptr); /* nested: the realloc reports the old block */
	return q;
}
