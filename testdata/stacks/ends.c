/*
 * How walks end (tests/stacks.rs, issue 32), built -O2 -g -fomit-frame-pointer and linked with
 * libstacks_ends.so (endslib.c), whose constructor allocates 7861 bytes before main: a walk that
 * ends at the loader's entry code, complete.
 *
 * Then main allocates 7862 bytes through one frame of its own (a walk that ends at _start,
 * complete), and with the argument `jit` 7863 bytes from code it wrote into an anonymous
 * executable mapping, as a JIT compiler does: a frame no file's unwind table covers, where the
 * walk ends unknown.
 */
#include <string.h>
#include <sys/mman.h>

#include "stacks.h"

extern void *ends_early;

FRAME void *ends_alloc(size_t n)
{
	void *p = opaque(malloc(n));

	stacks_sink++;
	return p;
}

typedef void *(*jit_fn)(size_t n);

/* x86-64 code for `void *f(size_t n) { return malloc(n); }`, through a frame of its own: the
 * call is not a tail call, so the walk finds f's return address in malloc's caller frame. */
static jit_fn jit_malloc(void)
{
	static const unsigned char code[] = {
		0x48, 0x83, 0xec, 0x08, /* sub $8, %rsp */
		0x48, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, /* movabs $malloc, %rax */
		0xff, 0xd0, /* call *%rax */
		0x48, 0x83, 0xc4, 0x08, /* add $8, %rsp */
		0xc3, /* ret */
	};
	void *(*target)(size_t) = malloc;
	unsigned char *page = mmap(0, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
				   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	CHECK(page != MAP_FAILED);
	memcpy(page, code, sizeof(code));
	memcpy(page + 6, &target, sizeof(target));
	return (jit_fn)(void *)page;
}

int main(int argc, char **argv)
{
	void *p = ends_alloc(7862);

	CHECK(ends_early && p);
	free(ends_early);
	free(p);
	if (argc > 1 && !strcmp(argv[1], "jit")) {
		p = jit_malloc()(7863);
		CHECK(p);
		free(p);
	}
	return 0;
}
