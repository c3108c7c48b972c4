/*
 * Allocator functions of one instruction (issue 34, item 2), built by tests/custom_allocators.rs
 * with -O1 -foptimize-sibling-calls -fcf-protection=none so that each is exactly that:
 *   pool_free     `ret` (a bump pool frees nothing); noipa keeps its 7 calls
 *   wrap_alloc    `jmp malloc` (a tail call), 6 blocks of 3011
 *   wrap_free     `jmp free` (a tail call), the first 4 of them
 *   dropped_free  `ret` too, without noipa: gcc sees it does nothing and removes its 5 calls
 * pool_alloc hands out the bump pool's blocks: 10 of 3001 (the first 7 freed with pool_free)
 * and 5 of 3019 (the ones "freed" with dropped_free).
 */
#include "../fixture.h"

static char arena[1 << 16];
static size_t used;

__attribute__((noipa)) void *pool_alloc(size_t n)
{
	void *p = arena + used;

	used += (n + 15) & ~(size_t)15;
	return p;
}

__attribute__((noipa)) void pool_free(void *p)
{
	(void)p;
}

void dropped_free(void *p)
{
	(void)p;
}

__attribute__((noinline)) void *wrap_alloc(size_t n)
{
	return malloc(n);
}

__attribute__((noinline)) void wrap_free(void *p)
{
	free(p);
}

int main(void)
{
	void *pool[10], *dropped[5], *wrapped[6];
	int i;

	for (i = 0; i < 10; i++)
		pool[i] = opaque(pool_alloc(3001));
	for (i = 0; i < 7; i++)
		pool_free(pool[i]);
	for (i = 0; i < 5; i++)
		dropped[i] = opaque(pool_alloc(3019));
	for (i = 0; i < 5; i++)
		dropped_free(dropped[i]);
	for (i = 0; i < 6; i++)
		CHECK((wrapped[i] = opaque(wrap_alloc(3011))));
	for (i = 0; i < 4; i++)
		wrap_free(wrapped[i]);
	printf("%p %p\n", pool[9], wrapped[5]);
	return 0;
}
