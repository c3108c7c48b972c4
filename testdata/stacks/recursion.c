/*
 * Recursion deeper than the recorder's maximum walk (127 frames; tests/stacks.rs): main ->
 * recurse(200) -> recurse(199) -> ... -> recurse(1) -> malloc(7829), 205 frames from malloc to
 * _start. Freed.
 */
#include "stacks.h"

FRAME void *recurse(int depth, size_t n)
{
	void *p = depth > 1 ? recurse(depth - 1, n) : opaque(malloc(n));

	stacks_sink++;
	return p;
}

int main(int argc, char **argv)
{
	void *p;

	(void)argv;
	/* 7829 = 7828 + argc (1). */
	p = recurse(200, 7828 + (size_t)argc);
	CHECK(p);
	free(p);
	return 0;
}
