/* A parent with three children: the first allocates one block of 11001 bytes, the second two of
 * 11002, the third execs EXEC_TARGET (argv[1]) with argument "1", which allocates through its
 * own code. The parent allocates 11000 bytes once, and waits for all three. */
#include <sys/wait.h>
#include <unistd.h>
#include "fixture.h"

int main(int argc, char **argv)
{
	CHECK(argc > 1);
	free(opaque(malloc(11000)));
	for (int i = 1; i <= 3; i++) {
		pid_t pid = fork();

		CHECK(pid >= 0);
		if (pid)
			continue;
		if (i == 3) {
			execl(argv[1], argv[1], "1", (char *)NULL);
			_exit(98);
		}
		for (int n = 0; n < i; n++)
			free(opaque(malloc(11000 + i)));
		_exit(10 + i);
	}
	for (int i = 0; i < 3; i++)
		CHECK(wait(NULL) > 0);
	return 0;
}
