/*
 * The library dlopen_main.c opens with dlopen and calls the moment dlopen returns
 * (tests/stacks.rs): dl_outer -> dl_inner -> malloc(7807).
 */
#include "stacks.h"

FRAME void *dl_inner(size_t n)
{
	void *p = opaque(malloc(n));

	stacks_sink++;
	return p;
}

FRAME void *dl_outer(size_t n)
{
	void *p = dl_inner(n + 1);

	stacks_sink++;
	return p;
}
