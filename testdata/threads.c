/* 4 threads, each 1000 malloc+free pairs of 13000+N bytes (N = 1..4, the thread's number). */
#include <pthread.h>
#include "fixture.h"

static void *work(void *arg)
{
	size_t size = 13000 + (size_t)arg;

	for (int i = 0; i < 1000; i++)
		free(opaque(malloc(size)));
	return NULL;
}

int main(void)
{
	pthread_t t[4];

	for (long i = 0; i < 4; i++)
		CHECK(pthread_create(&t[i], NULL, work, (void *)(i + 1)) == 0);
	for (int i = 0; i < 4; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	return 0;
}
