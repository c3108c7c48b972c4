/*
 * One function allocating through five call paths (tests/functions.rs): grow(n) mallocs n
 * bytes and is called once from each of caller_1 ... caller_5 with 1000 + k bytes (5015 bytes
 * in 5 allocations, five sites of at most 1005 bytes), while big() mallocs 3001 bytes from one
 * call path. So `report --stacks --stacks-by allocated` lists big's site first and no site of
 * grow near it, while by function grow comes first with its 5015 bytes. main frees every block
 * at the end; no other allocation is made (no stdio), so main's cumulative is the whole heap.
 */
#include "stacks.h"

FRAME void *grow(size_t n)
{
	void *p = opaque(malloc(n));

	stacks_sink++;
	return p;
}

#define CALLER(k)                             \
	FRAME void *caller_##k(void)          \
	{                                     \
		void *p = grow(1000 + (k));   \
                                              \
		stacks_sink++;                \
		return p;                     \
	}

CALLER(1)
CALLER(2)
CALLER(3)
CALLER(4)
CALLER(5)

FRAME void *big(void)
{
	void *p = opaque(malloc(3001));

	stacks_sink++;
	return p;
}

int main(void)
{
	void *blocks[6];
	int i;

	blocks[0] = caller_1();
	blocks[1] = caller_2();
	blocks[2] = caller_3();
	blocks[3] = caller_4();
	blocks[4] = caller_5();
	blocks[5] = big();
	for (i = 0; i < 6; i++) {
		CHECK(blocks[i]);
		free(blocks[i]);
	}
	return 0;
}
