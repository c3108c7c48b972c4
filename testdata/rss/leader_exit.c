/* The main thread calls pthread_exit; a worker thread then faults 64 MiB. The process lives on
 * until the worker ends: its memory is still the process's, and it exits once. */
#include <pthread.h>
#include "status.h"

static void *worker(void *arg)
{
	(void)arg;
	usleep(50 * 1000); /* let the leader leave first */
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
