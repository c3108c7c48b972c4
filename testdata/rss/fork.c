/* The parent touches 32 MiB and forks; the child touches 32 MiB more. */
#include <sys/wait.h>
#include "status.h"

int main(void)
{
	pid_t pid;

	touch_anon(32 * MiB);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		touch_anon(32 * MiB);
		checkpoint("child");
		_exit(0);
	}
	CHECK(waitpid(pid, NULL, 0) == pid);
	checkpoint("parent");
	return 0;
}
