/*
 * The allocation mix of the benchmark's mixed and storm workloads: a deterministic sequence of
 * malloc, calloc, realloc, posix_memalign and free of varied sizes over a pool of live blocks,
 * the way a real program churns its heap. Mostly small blocks, some pages, rarely one large
 * enough for glibc to mmap it. Each operation is one allocator call, so "cost per operation"
 * compares directly with the churn workload's cost per call.
 */
#ifndef MEMTRACK_BENCH_OPS_H
#define MEMTRACK_BENCH_OPS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define POOL 1024

static inline uint64_t next_random(uint64_t *s)
{
	/* xorshift64*: fixed seed, same sequence on every run */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

static inline size_t random_size(uint64_t *s)
{
	uint64_t r = next_random(s);

	switch (r % 100) {
	case 0: /* 1 %: above glibc's mmap threshold (128 KiB) */
		return 128 * 1024 + (r >> 8) % (384 * 1024);
	case 1 ... 9: /* 9 %: a page or a few */
		return 1024 + (r >> 8) % (16 * 1024);
	default: /* 90 %: small objects */
		return 1 + (r >> 8) % 256;
	}
}

static inline void *touch(void *p, size_t n)
{
	if (p && n)
		((volatile char *)p)[0] = 1;
	return p;
}

/* Run `ops` allocator calls, then free what is left. Returns a checksum so nothing is elided. */
static inline unsigned long run_ops(long ops, uint64_t seed)
{
	void *pool[POOL] = { 0 };
	unsigned long sum = 0;
	uint64_t s = seed | 1;

	for (long i = 0; i < ops; i++) {
		uint64_t r = next_random(&s);
		unsigned slot = r % POOL;
		size_t n = random_size(&s);
		void *p = pool[slot];

		if (!p) {
			switch ((r >> 32) % 10) {
			case 0 ... 5:
				p = malloc(n);
				break;
			case 6 ... 7:
				p = calloc(1 + n / 16, 16);
				break;
			case 8:
				if (posix_memalign(&p, 64, n))
					p = NULL;
				break;
			default:
				p = realloc(NULL, n);
				break;
			}
			pool[slot] = touch(p, n);
		} else if ((r >> 32) % 4 == 0) {
			void *q = realloc(p, n);

			if (q)
				pool[slot] = touch(q, n);
		} else {
			free(p);
			pool[slot] = NULL;
		}
		sum += (uintptr_t)pool[slot] & 0xff;
	}
	for (unsigned i = 0; i < POOL; i++)
		free(pool[i]);
	return sum;
}

#endif
