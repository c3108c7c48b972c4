/* The gate opening while an allocator call is in progress (tests/control.rs): wrapped_alloc,
 * probed with `--allocator wrap:wrapped_alloc=alloc(size=arg1)`, keeps a bookkeeping block of
 * its own for each block it makes, both from malloc, as tracemalloc's hooks do inside
 * PyMem_Malloc. Its first call enters while measuring is paused and sends `start` from
 * inside: that call is not recorded, nor are the two mallocs it makes after `start`. The
 * second call, inside the window, is one block of 2000 bytes; its mallocs are internal.
 * Benchmark "gate::mid_call" allocates 2000 bytes, never freed. Exit codes: 97 a control call
 * failed. */
#include "../fixture.h"
#include "../../include/memtrack_ctl.h"

static void *kept[2];
static int calls;

__attribute__((noinline)) void *wrapped_alloc(size_t size)
{
	if (calls == 0 && memtrack_ctl_start() != 0) {
		fprintf(stderr, "memtrack_ctl_start: %s\n", memtrack_ctl_error());
		_exit(97);
	}
	kept[calls++] = opaque(malloc(24));
	return opaque(malloc(size));
}

int main(void)
{
	if (memtrack_ctl_bench("gate::mid_call", getpid()) != 0) {
		fprintf(stderr, "memtrack_ctl_bench: %s\n", memtrack_ctl_error());
		_exit(97);
	}
	CHECK(wrapped_alloc(1000));
	CHECK(wrapped_alloc(2000));
	if (memtrack_ctl_stop() != 0) {
		fprintf(stderr, "memtrack_ctl_stop: %s\n", memtrack_ctl_error());
		_exit(97);
	}
	return 0;
}
