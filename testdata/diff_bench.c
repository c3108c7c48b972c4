/* The benchmark fixture of `memtrack check --baseline --by bench` (tests/diff.rs), run under
 * `memtrack record --control`: `diff_bench N`. The process names two benchmarks one after the
 * other, each measured only inside its own start/stop window:
 *
 *   "diff::steady"  allocates and frees 10 blocks of 31001 bytes, whatever N is;
 *   "diff::grows"   allocates and frees N blocks of 32001 bytes.
 *
 * So `diff_bench 100` against `diff_bench 200` regresses diff::grows by exactly 100 allocations
 * (and 100 x 32001 bytes, 100 temporary allocations) and leaves diff::steady exactly as it was.
 * Nothing else runs inside a window: memtrack_ctl.h does not allocate. */
#include <unistd.h>
#include "fixture.h"
#include "../include/memtrack_ctl.h"

#define CTL(call)                                                                            \
	do {                                                                                 \
		if ((call) != 0) {                                                           \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,        \
				memtrack_ctl_error());                                       \
			exit(97);                                                            \
		}                                                                            \
	} while (0)

__attribute__((noinline)) static void churn(long n, size_t size)
{
	for (long i = 0; i < n; i++)
		free(opaque(malloc(size)));
}

static void bench(const char *uri, long n, size_t size)
{
	CTL(memtrack_ctl_bench(uri, getpid()));
	CTL(memtrack_ctl_start());
	churn(n, size);
	CTL(memtrack_ctl_stop());
}

int main(int argc, char **argv)
{
	CHECK(argc == 2);
	long n = atol(argv[1]);

	CTL(memtrack_ctl_hello());
	bench("diff::steady", 10, 31001);
	bench("diff::grows", n, 32001);
	return 0;
}
