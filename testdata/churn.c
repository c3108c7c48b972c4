/* COUNT (argv[1], default 100000) malloc(SIZE)+free pairs (SIZE argv[2], default 77): the
 * allocator hot path, and the benchmark's churn workload. With DEPTH (argv[3], default 0) the
 * loop runs that many calls deeper, for what a call stack costs by its depth (the benchmark's
 * churn10 runs it at 5: ten frames from malloc to _start). */
#include "fixture.h"

static __attribute__((noinline)) long churn(long count, size_t size, int depth)
{
	long done = 0;

	if (depth > 0) {
		done = churn(count, size, depth - 1);
		/* Not a tail call: the frame stays on the stack. */
		__asm__ volatile("" : "+r"(done));
		return done;
	}
	for (long i = 0; i < count; i++)
		free(opaque(malloc(size)));
	return count;
}

int main(int argc, char **argv)
{
	long count = argc > 1 ? atol(argv[1]) : 100000;
	size_t size = argc > 2 ? (size_t)atol(argv[2]) : 77;
	int depth = argc > 3 ? atoi(argv[3]) : 0;

	return churn(count, size, depth) == count ? 0 : 1;
}
