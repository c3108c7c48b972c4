/*
 * Five frames across an executable and a shared library (tests/stacks.rs), built -O2 -g
 * -fomit-frame-pointer:
 *
 *   main -> chain_a (exe) -> lib_b -> lib_c (libstacks_chain.so) -> chain_d -> chain_e (exe)
 *        -> malloc(7777)
 *
 * chain_d is reached through a function pointer the library calls back. 7777 bytes once, freed.
 */
#include "chainlib.h"

FRAME void *chain_e(size_t n)
{
	void *p = opaque(malloc(n));

	stacks_sink++;
	return p;
}

FRAME void *chain_d(size_t n)
{
	void *p = chain_e(n + 1);

	stacks_sink++;
	return p;
}

FRAME void *chain_a(size_t n)
{
	void *p = lib_b(chain_d, n + 1);

	stacks_sink++;
	return p;
}

int main(int argc, char **argv)
{
	(void)argv;
	/* 7777 = 7772 + argc (1) + 1 (chain_a) + 1 (lib_b) + 1 (lib_c) + 1 (chain_d). argc, not
	 * opaque_size: its inlined asm would own the line of main's call. */
	void *p = chain_a(7772 + (size_t)argc);

	CHECK(p);
	free(p);
	return 0;
}
