/* The benchmark's mixed workload: OPS (argv[1], default 1000000) allocator calls of every kind
 * and of varied sizes, in one process (ops.h). */
#include <stdio.h>
#include "ops.h"

int main(int argc, char **argv)
{
	long ops = argc > 1 ? atol(argv[1]) : 1000000;

	return run_ops(ops, 0x9e3779b97f4a7c15ULL) == 1; /* never 1; keeps the sum alive */
}
