/*
 * The shared-library half of chain.c (tests/stacks.rs): the walk enters this library from the
 * executable and leaves it through a callback back into the executable.
 */
#include "chainlib.h"

FRAME void *lib_c(callback_fn back, size_t n)
{
	void *p = back(n + 1);

	stacks_sink++;
	return p;
}

FRAME void *lib_b(callback_fn back, size_t n)
{
	void *p = lib_c(back, n + 1);

	stacks_sink++;
	return p;
}
