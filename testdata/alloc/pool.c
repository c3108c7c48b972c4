/*
 * Allocates with its own pool allocator (pool_alloc.c, linked into this executable with
 * -DPOOL_STATIC, or from libpool.so) and once with malloc. Fingerprint sizes
 * (tests/custom_allocators.rs):
 *   3001  pool_alloc, 5 blocks; the first is resized by pool_realloc, the last is leaked
 *   3017  pool_calloc(7, 431), 2 blocks
 *   3023  pool_realloc of the first 3001 block
 *   3031  malloc, 1 block, freed
 *   8209  the pool's slabs (POOL_SLAB_BYTES): nested in pool_alloc, never reported
 * Every other pool block is freed with pool_free: 6 releases. Prints the slabs it took.
 */
#include "../fixture.h"
#include "pool_alloc.h"

#ifdef POOL_STATIC
#include "pool_alloc.c"
#endif

int main(void)
{
	struct pool pool = { 0 };
	void *a[5], *c[2], *r, *m;
	int i;

	for (i = 0; i < 5; i++)
		CHECK((a[i] = opaque(pool_alloc(&pool, 3001))));
	for (i = 0; i < 2; i++)
		CHECK((c[i] = opaque(pool_calloc(&pool, 7, 431))));
	CHECK((r = opaque(pool_realloc(&pool, a[0], 3023))));
	CHECK((m = opaque(malloc(3031))));
	free(m);
	for (i = 1; i < 4; i++)
		pool_free(&pool, a[i]);
	for (i = 0; i < 2; i++)
		pool_free(&pool, c[i]);
	pool_free(&pool, r);
	printf("slabs %d\n", pool.slabs);
	return 0;
}
