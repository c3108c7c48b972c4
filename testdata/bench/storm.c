/* The benchmark's allocation storm: PROCS (argv[1], default 16) processes forked at once, each
 * making OPS (argv[2], default 200000) allocator calls of the mixed kind (ops.h) with its own
 * seed, all running together; the parent waits for them. It checks that the recorder keeps up,
 * with no events lost at the default ring size, when many processes allocate at once. */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
#include "ops.h"

int main(int argc, char **argv)
{
	int procs = argc > 1 ? atoi(argv[1]) : 16;
	long ops = argc > 2 ? atol(argv[2]) : 200000;
	int failed = 0;

	for (int i = 0; i < procs; i++) {
		pid_t pid = fork();

		if (pid < 0) {
			perror("storm: fork");
			return 1;
		}
		if (pid == 0)
			_exit(run_ops(ops, 0x9e3779b97f4a7c15ULL * (i + 1)) == 1);
	}
	for (int i = 0; i < procs; i++) {
		int status;

		if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
			failed = 1;
	}
	return failed;
}
