/*
 * The shared-library half of ends.c (tests/stacks.rs, issue 32): its constructor allocates, so
 * the walk goes through the loader's _dl_init to _dl_start_user, the code at ld.so's entry
 * point, which Debian's glibc 2.36 gives no CFI. That walk is complete, not unknown.
 */
#include "stacks.h"

void *ends_early;

FRAME void *ends_lib_alloc(size_t n)
{
	void *p = opaque(malloc(n));

	stacks_sink++;
	return p;
}

/* 7861 bytes, freed by ends.c's main. */
__attribute__((constructor)) static void ends_lib_init(void)
{
	ends_early = ends_lib_alloc(7861);
	stacks_sink++;
}
