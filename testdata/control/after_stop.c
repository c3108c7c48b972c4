/* Blocks allocated while measuring and released after `stop`: benchmark "after_stop::free"
 * allocates 3 x malloc(25001) in its window, then after `stop` frees one, reallocs one to
 * 250001 bytes (a move: the old block is released) and reallocs one to 25000 bytes (smaller:
 * glibc keeps the address). None of them is a leak of the benchmark; 25009 bytes
 * allocated inside the window and never freed are. Exit codes: 97 a control call failed. */
#include "../fixture.h"
#include "../../include/memtrack_ctl.h"

#define CTL(call)                                                                            \
	do {                                                                                 \
		if ((call) != 0) {                                                           \
			fprintf(stderr, "%s: %s\n", #call, memtrack_ctl_error());            \
			_exit(97);                                                           \
		}                                                                            \
	} while (0)

int main(void)
{
	void *a, *b, *c;

	CTL(memtrack_ctl_bench("after_stop::free", getpid()));
	CTL(memtrack_ctl_start());
	CHECK(a = opaque(malloc(25001)));
	CHECK(b = opaque(malloc(25001)));
	CHECK(c = opaque(malloc(25001)));
	CHECK(opaque(malloc(25009)));
	CTL(memtrack_ctl_stop());
	free(a);
	CHECK(b = opaque(realloc(b, 250001)));
	CHECK(c = opaque(realloc(c, 25000)));
	free(opaque(malloc(25011))); /* paused: its free is of a block never seen */
	return 0;
}
