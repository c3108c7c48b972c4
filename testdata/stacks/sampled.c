/*
 * Sampled stacks (tests/sampled.rs): three call paths with known totals, large enough that the
 * estimates of `record --stack-sample` are within a few per cent. small() allocates 200,000
 * blocks of 100 bytes (20 MB), medium() 20,000 of 1,000 (20 MB), large() 500 of 40,000 (20 MB,
 * each past a 16 KiB mean, so always walked). Each block is freed right away but one in ten of
 * small's, kept to the end and then freed, so the sites' peaks differ. Single-threaded and
 * deterministic: with one seed two recordings walk the same allocations.
 */
#include "stacks.h"

#define SMALL 200000
#define MEDIUM 20000
#define LARGE 500

static void *kept[SMALL / 10];

FRAME void *small(void)
{
	void *p = opaque(malloc(100));

	stacks_sink++;
	return p;
}

FRAME void *medium(void)
{
	void *p = opaque(malloc(1000));

	stacks_sink++;
	return p;
}

FRAME void *large(void)
{
	void *p = opaque(malloc(40000));

	stacks_sink++;
	return p;
}

int main(void)
{
	for (int i = 0; i < SMALL; i++) {
		void *p = small();

		if (i % 10 == 0)
			kept[i / 10] = p;
		else
			free(p);
	}
	for (int i = 0; i < MEDIUM; i++)
		free(medium());
	for (int i = 0; i < LARGE; i++)
		free(large());
	for (int i = 0; i < SMALL / 10; i++)
		free(kept[i]);
	return 0;
}
