/* The contract of shared/reference/fork-inherited-unmap-contract.txt: map and touch 32 MiB,
 * fork; the child munmaps the inherited region and exits. With argv[1] = "touch", the child then
 * touches a fresh 16 MiB (flooring the child's resident estimate at zero would get its peak
 * wrong). */
#include <sys/wait.h>
#include "status.h"

int main(int argc, char **argv)
{
	size_t size = 32 * MiB;
	char *p = touch_anon(size);
	pid_t pid;

	checkpoint("parent-before");
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		CHECK(munmap(p, size) == 0);
		checkpoint("child-unmapped");
		if (argc > 1 && !strcmp(argv[1], "touch")) {
			touch_anon(16 * MiB);
			checkpoint("child-touched");
		}
		_exit(0);
	}
	CHECK(waitpid(pid, NULL, 0) == pid);
	checkpoint("parent-after");
	return 0;
}
