/*
 * Linked with musl (musl-gcc, statically or not) by tests/musl.rs: 4 malloc(3001), the first 3
 * freed, the last printed (so it stays live), nothing else of those sizes. fixture.h is left
 * out: it is glibc's headers' view of stdio, and musl-gcc brings its own.
 */
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
	void *p[4];
	int i;

	for (i = 0; i < 4; i++) {
		p[i] = malloc(3001);
		__asm__ volatile("" : "+r"(p[i]));
		if (!p[i])
			return 99;
	}
	for (i = 0; i < 3; i++)
		free(p[i]);
	printf("%p\n", p[3]);
	return 0;
}
