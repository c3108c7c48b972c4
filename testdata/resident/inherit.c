/* Resident memory by call site (issue 35), across fork: fill() writes every page of a 16 MiB
 * malloc'd block, then the process forks. The child inherits the block's pages (its counters
 * are filled at fork, shared with the parent until written), writes the first half of them
 * from write_half(), which copy-on-write makes its own, and makes 2 MiB of its own resident
 * from own() after, so that its resident peak (and the run's, the parent waiting) is at its end. */
#include "../rss/status.h"

#include <sys/wait.h>

#define BLOCK (16 * MiB)

__attribute__((noinline)) char *fill(void)
{
	char *p = malloc(BLOCK);

	CHECK(p);
	for (size_t i = 0; i < BLOCK; i += 4096)
		((volatile char *)p)[i] = 1;
	__asm__ volatile("" ::: "memory");
	return p;
}

__attribute__((noinline)) void write_half(char *p)
{
	for (size_t i = 0; i < BLOCK / 2; i += 4096)
		((volatile char *)p)[i] = 2;
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) char *own(void)
{
	char *p = malloc(2 * MiB);

	CHECK(p);
	for (size_t i = 0; i < 2 * MiB; i += 4096)
		((volatile char *)p)[i] = 1;
	__asm__ volatile("" ::: "memory");
	return p;
}

int main(void)
{
	char *p = fill();
	int status;
	pid_t child = fork();

	CHECK(child >= 0);
	if (child == 0) {
		char *q;

		write_half(p);
		q = own();
		checkpoint("child");
		_exit(p[0] + q[0] == 3 ? 0 : 1);
	}
	CHECK(waitpid(child, &status, 0) == child);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
