/* A function inlined into another, for the symbolizer's inline chain
 * (src/stacks/symbolize.rs): built with -O2 -g, `grow` is always inlined into `make`, so the
 * malloc call inside `make` has the chain grow (innermost), make. The test finds the lines by
 * their markers. */
#include <stdlib.h>
#include <string.h>

static inline __attribute__((always_inline)) void *grow(size_t n)
{
	void *p = malloc(n * 3); /* LINE_INNER */
	if (p)
		memset(p, 1, 1);
	return p;
}

__attribute__((noinline)) void *make(size_t n)
{
	void *p = grow(n + 1); /* LINE_CALL */
	return p;
}

int main(int argc, char **argv)
{
	(void)argv;
	free(make((size_t)argc));
	return 0;
}
