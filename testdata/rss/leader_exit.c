/* The main thread calls pthread_exit; a worker thread then faults 64 MiB. The process lives on
 * until the worker ends: its memory is still the process's, and it exits once. */
#include <pthread.h>
#include <time.h>
#include "status.h"

/* Whether the main thread has left: its task stays, a zombie ('Z'), until the process ends. */
static int leader_left(void)
{
	char path[64], stat[512];
	int fd;
	ssize_t n;
	char *state;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)getpid());
	fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	n = read(fd, stat, sizeof(stat) - 1);
	close(fd);
	CHECK(n > 0);
	stat[n] = 0;
	state = strrchr(stat, ')');
	CHECK(state && state[1] == ' ');
	return state[2] == 'Z';
}

static void *worker(void *arg)
{
	struct timespec nap = { 0, 1000000 };

	(void)arg;
	/* The leader leaves first: wait for it, not for a guess of how long it takes. */
	while (!leader_left())
		nanosleep(&nap, NULL);
	touch_anon(64 * MiB);
	checkpoint("worker");
	return NULL;
}

int main(void)
{
	pthread_t t;

	CHECK(pthread_create(&t, NULL, worker, NULL) == 0);
	pthread_exit(NULL);
}
