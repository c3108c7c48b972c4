/* A thread storm: PROCS processes (argv[1], default 4), each with THREADS threads (argv[2],
 * default 4), each thread making PAIRS (argv[3], default 50000) malloc+free pairs in a tight
 * loop, all released at once. Thread t of process p allocates 23100 + p * THREADS + t bytes (a
 * fingerprint size, fixture.h), so a test counts exactly PAIRS allocations and PAIRS frees of
 * each of the PROCS * THREADS sizes. With more allocating threads than CPUs, the recorder must
 * get CPU time from the threads it records: the case that lost events (issue 13). */
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>
#include "fixture.h"

#define MAX_THREADS 64

static pthread_barrier_t go;
static long pairs = 50000;

static void *work(void *arg)
{
	size_t size = (size_t)arg;

	pthread_barrier_wait(&go);
	for (long i = 0; i < pairs; i++)
		free(opaque(malloc(size)));
	return NULL;
}

static int run(int proc, int threads)
{
	pthread_t t[MAX_THREADS];

	CHECK(pthread_barrier_init(&go, NULL, threads) == 0);
	for (long i = 0; i < threads; i++)
		CHECK(pthread_create(&t[i], NULL, work,
				     (void *)(23100 + (long)proc * threads + i)) == 0);
	for (int i = 0; i < threads; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	return 0;
}

int main(int argc, char **argv)
{
	int procs = argc > 1 ? atoi(argv[1]) : 4;
	int threads = argc > 2 ? atoi(argv[2]) : 4;
	int failed = 0;

	if (argc > 3)
		pairs = atol(argv[3]);
	CHECK(procs > 0 && threads > 0 && threads <= MAX_THREADS && pairs > 0);
	for (int p = 0; p < procs; p++) {
		pid_t pid = fork();

		CHECK(pid >= 0);
		if (pid == 0)
			_exit(run(p, threads));
	}
	for (int p = 0; p < procs; p++) {
		int status;

		if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
			failed = 1;
	}
	return failed;
}
