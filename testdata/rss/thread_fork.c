/* A worker thread forks; the child faults 64 MiB: charged to the child, not the parent. */
#include <pthread.h>
#include <sys/wait.h>
#include "status.h"

static void *worker(void *arg)
{
	pid_t pid = fork();

	(void)arg;
	CHECK(pid >= 0);
	if (pid == 0) {
		touch_anon(64 * MiB);
		checkpoint("child");
		_exit(0);
	}
	CHECK(waitpid(pid, NULL, 0) == pid);
	return NULL;
}

int main(void)
{
	pthread_t t;

	CHECK(pthread_create(&t, NULL, worker, NULL) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	checkpoint("parent");
	return 0;
}
