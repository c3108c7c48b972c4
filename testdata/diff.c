/* The fixture of `memtrack diff` (tests/diff.rs): `diff N LEAKS CHILDREN`. grow() allocates and
 * frees N blocks of 7001 bytes one at a time (each a temporary allocation), leak_one() allocates
 * LEAKS blocks of 7002 bytes that are never freed, and the process forks CHILDREN children one
 * after the other, each of which executes argv[0] again as `diff child` and allocates one
 * block of 7003 bytes. Two runs with different arguments differ by exactly what the arguments
 * say; the children's command line is the same in both runs, so they match by tree position.
 * No stdio: its buffers would be allocations the arguments do not decide. */
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "fixture.h"

__attribute__((noinline)) static void grow(long n)
{
	for (long i = 0; i < n; i++)
		free(opaque(malloc(7001)));
}

__attribute__((noinline)) static void leak_one(void)
{
	CHECK(opaque(malloc(7002)) != NULL);
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "child") == 0) {
		free(opaque(malloc(7003)));
		return 0;
	}
	CHECK(argc == 4);
	long n = atol(argv[1]), leaks = atol(argv[2]), children = atol(argv[3]);

	grow(n);
	for (long i = 0; i < leaks; i++)
		leak_one();
	for (long i = 0; i < children; i++) {
		pid_t pid = fork();

		CHECK(pid >= 0);
		if (pid == 0) {
			execl(argv[0], argv[0], "child", (char *)NULL);
			_exit(98);
		}
		int status;
		CHECK(waitpid(pid, &status, 0) == pid);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	return 0;
}
