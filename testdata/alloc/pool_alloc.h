/* The pool allocator of testdata/alloc/pool_alloc.c. */
#ifndef MEMTRACK_POOL_ALLOC_H
#define MEMTRACK_POOL_ALLOC_H

#include <stddef.h>

/* The bytes of each slab the pool takes from malloc: a fingerprint size no block of the
 * fixture has, so a test sees that the nested malloc was not reported. */
#define POOL_SLAB_BYTES 8209

struct pool {
	char *slab;
	size_t used;
	struct block *free;
	int slabs;
};

/* Real calls, never inlined or cloned into the caller: memtrack probes the symbols. */
#define POOL_API __attribute__((noipa, visibility("default")))

POOL_API void *pool_alloc(struct pool *p, size_t size);
POOL_API void *pool_calloc(struct pool *p, size_t n, size_t size);
POOL_API void *pool_realloc(struct pool *p, void *ptr, size_t size);
POOL_API void pool_free(struct pool *p, void *ptr);

#endif
