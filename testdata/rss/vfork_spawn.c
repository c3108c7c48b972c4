/* posix_spawn (vfork + exec) of argv[1], the anon fixture, which faults 32 MiB after exec. */
#include <spawn.h>
#include <sys/wait.h>
#include "status.h"

extern char **environ;

int main(int argc, char **argv)
{
	char *child_argv[] = {argv[1], "32", NULL};
	pid_t pid;
	int status;

	CHECK(argc > 1);
	CHECK(posix_spawn(&pid, argv[1], NULL, NULL, child_argv, environ) == 0);
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	checkpoint("parent");
	return 0;
}
