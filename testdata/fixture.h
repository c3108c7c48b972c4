/*
 * Shared by the C fixtures. Each fixture allocates with "fingerprint" sizes that glibc and the
 * dynamic loader never use themselves, so a test can pick the fixture's own allocations out of
 * the recording and compare them with what the fixture did, exactly.
 */
#ifndef MEMTRACK_FIXTURE_H
#define MEMTRACK_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>

/* Keep the compiler from proving an allocation unused and removing it, or from turning
 * realloc(NULL, n) into malloc(n). */
static inline void *opaque(void *p)
{
	__asm__ volatile("" : "+r"(p));
	return p;
}

/* A size the compiler cannot see, so that impossible requests reach the allocator. */
static inline size_t opaque_size(size_t n)
{
	__asm__ volatile("" : "+r"(n));
	return n;
}

#define CHECK(cond)                                                                  \
	do {                                                                         \
		if (!(cond)) {                                                       \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			exit(99);                                                    \
		}                                                                    \
	} while (0)

#endif
