/* Leaks per benchmark (tests/leaks.rs), under `memtrack record --control`. One process runs
 * two benchmarks one after the other and outlives both windows; its leak scan at its exit
 * splits each benchmark's leaked blocks:
 *
 *   "leaks::first"  loses 1 block of 1111 bytes (lose(), its only pointer overwritten) and
 *                   keeps 1 block of 2222 bytes in a global: lost 1111, reachable 2222;
 *   "leaks::second" loses 1 block of 3333 bytes: lost 3333, reachable 0;
 *   "leaks::killed" runs in a child that allocates 4444 bytes in its window and is killed by
 *                   SIGKILL: not scanned, 4444.
 *
 * Exit codes: 0 fine, 99 a failed check, 97 a control call failed. */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "../fixture.h"
#include "../../include/memtrack_ctl.h"

#define CTL(call)                                                                            \
	do {                                                                                 \
		if ((call) != 0) {                                                           \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,        \
				memtrack_ctl_error());                                       \
			_exit(97);                                                           \
		}                                                                            \
	} while (0)

static void *volatile sink;
static void *volatile kept;

__attribute__((noinline)) static void lose(size_t n)
{
	sink = malloc(n);
	memset((void *)sink, 1, n);
	sink = NULL;
}

/* Overwrites the dead stack below main's frame, where lose()'s slots would stay. */
__attribute__((noinline)) static void scrub(void)
{
	volatile char dead[8192];

	for (size_t i = 0; i < sizeof dead; i++)
		dead[i] = 0;
}

int main(void)
{
	int ready[2];
	char c;
	pid_t child;

	CTL(memtrack_ctl_bench("leaks::first", getpid()));
	CTL(memtrack_ctl_start());
	lose(1111);
	kept = malloc(2222);
	CTL(memtrack_ctl_stop());

	CTL(memtrack_ctl_bench("leaks::second", getpid()));
	CTL(memtrack_ctl_start());
	lose(3333);
	CTL(memtrack_ctl_stop());

	CHECK(pipe(ready) == 0);
	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		CTL(memtrack_ctl_bench("leaks::killed", getpid()));
		CTL(memtrack_ctl_start());
		sink = malloc(4444);
		CTL(memtrack_ctl_stop());
		CHECK(write(ready[1], "r", 1) == 1);
		for (;;)
			pause();
	}
	CHECK(read(ready[0], &c, 1) == 1);
	CHECK(kill(child, SIGKILL) == 0);
	CHECK(waitpid(child, NULL, 0) == child);
	scrub();
	printf("bench_leaks: done\n");
	return 0;
}
