/* COUNT (argv[1], default 100000) malloc(SIZE)+free pairs (SIZE argv[2], default 77): the
 * allocator hot path, and the benchmark's churn workload. */
#include "fixture.h"

int main(int argc, char **argv)
{
	long count = argc > 1 ? atol(argv[1]) : 100000;
	size_t size = argc > 2 ? (size_t)atol(argv[2]) : 77;

	for (long i = 0; i < count; i++)
		free(opaque(malloc(size)));
	return 0;
}
