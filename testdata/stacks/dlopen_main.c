/*
 * A library allocating right after dlopen (tests/stacks.rs):
 *
 *   dlopen_main LIBRARY    dlopen LIBRARY, then at once main -> dl_outer -> dl_inner
 *                          -> malloc(7807) (in the library); freed
 *
 * The library is not linked in, so the recorder meets it first at the dlopen.
 */
#include <dlfcn.h>
#include "stacks.h"

typedef void *(*alloc_fn)(size_t);

int main(int argc, char **argv)
{
	void *h, *p;
	alloc_fn outer;

	CHECK(argc == 2);
	h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
		return 98;
	}
	outer = (alloc_fn)dlsym(h, "dl_outer");
	CHECK(outer);
	/* 7807 = 7804 + argc (2) + 1 (dl_outer). */
	p = outer(7804 + (size_t)argc);
	CHECK(p);
	stacks_sink++;
	free(p);
	return 0;
}
