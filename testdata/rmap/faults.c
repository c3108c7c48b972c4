/* The cost of a page fault and its unmap, for docs/PERFORMANCE.md's rmap section: maps
 * argv[1] MiB of private anonymous memory (default 64), touches every page, unmaps it, argv[2]
 * rounds (default 7); prints the median ns per page over the rounds (fault + unmap). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

static long long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
	int rounds = argc > 2 ? atoi(argv[2]) : 7;
	size_t bytes = mib << 20, pages = bytes / 4096;
	double per[64];

	if (rounds < 1 || rounds > 64)
		return 2;
	for (int r = 0; r < rounds; r++) {
		long long t0 = now_ns();
		char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			return 1;
		/* Small pages, as most faults are (THP would make one fault of 512 pages). */
		madvise(p, bytes, MADV_NOHUGEPAGE);
		for (size_t i = 0; i < bytes; i += 4096)
			p[i] = 1;
		munmap(p, bytes);
		per[r] = (double)(now_ns() - t0) / (double)pages;
	}
	qsort(per, rounds, sizeof(per[0]), cmp);
	printf("%.0f ns per page (fault + unmap), median of %d rounds of %zu MiB\n", per[rounds / 2],
	       rounds, mib);
	return 0;
}
