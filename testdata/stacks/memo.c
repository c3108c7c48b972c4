/*
 * Two call paths that enter malloc at one rsp through the same innermost frames, for the
 * walk's memo (bpf/stack.bpf.h; tests/stacks.rs), built -O2 -g with and without frame pointers:
 *
 *   main -> path_a -> middle -> leaf -> malloc(7901)
 *   main -> path_b -> middle -> leaf -> malloc(7901)
 *
 * path_a and path_b have frames of one size, so every malloc is entered at the same rsp from
 * the same leaf and middle: only middle's return address tells the paths apart. ROUNDS times
 * (argv[1], default 1000) path_a, then path_b; each block is freed at once. A memo that
 * compared fewer words than the walk read would give path_b's allocations path_a's stack.
 * Exits 3 if leaf's rsp differs between the paths, which would make the test prove nothing.
 */
#include <stdint.h>

#include "stacks.h"

static uintptr_t leaf_sp;
static int sp_differs;

FRAME void *leaf(size_t n)
{
	uintptr_t sp;
	void *p;

	__asm__ volatile("mov %%rsp, %0" : "=r"(sp));
	if (leaf_sp && sp != leaf_sp)
		sp_differs = 1;
	leaf_sp = sp;
	p = opaque(malloc(n));
	stacks_sink++;
	return p;
}

FRAME void *middle(size_t n)
{
	void *p = leaf(n);

	stacks_sink++;
	return p;
}

FRAME void *path_a(size_t n)
{
	void *p = middle(n);

	stacks_sink += 1;
	return p;
}

FRAME void *path_b(size_t n)
{
	void *p = middle(n);

	stacks_sink += 2;
	return p;
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 1000;

	for (long i = 0; i < rounds; i++) {
		free(path_a(7901));
		free(path_b(7901));
	}
	return sp_differs ? 3 : 0;
}
