/* vfork + exec of EXEC_TARGET (argv[1]) with argument "1"; the parent allocates 12000 bytes
 * after the child has exec'd. */
#include <sys/wait.h>
#include <unistd.h>
#include "fixture.h"

int main(int argc, char **argv)
{
	CHECK(argc > 1);
	pid_t pid = vfork();

	CHECK(pid >= 0);
	if (pid == 0) {
		execl(argv[1], argv[1], "1", (char *)NULL);
		_exit(98);
	}
	free(opaque(malloc(12000)));
	int status;
	CHECK(waitpid(pid, &status, 0) == pid);
	return 0;
}
