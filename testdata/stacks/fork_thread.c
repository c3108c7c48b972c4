/*
 * Stacks in a forked child and in a thread (tests/stacks.rs):
 *
 *   fork_thread fork      main -> in_child (child of fork) -> child_alloc -> malloc(7817);
 *                         the parent waits for the child
 *   fork_thread thread    thread_main (a pthread) -> thread_alloc -> malloc(7823); joined
 *
 * Each block is freed.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "stacks.h"

FRAME void *child_alloc(size_t n)
{
	void *p = opaque(malloc(n));

	stacks_sink++;
	return p;
}

FRAME int in_child(size_t n)
{
	void *p = child_alloc(n + 1);

	stacks_sink++;
	free(p);
	return p ? 0 : 1;
}

FRAME void *thread_alloc(size_t n)
{
	void *p = opaque(malloc(n));

	stacks_sink++;
	return p;
}

FRAME void *thread_main(void *arg)
{
	void *p = thread_alloc((size_t)arg + 1);

	stacks_sink++;
	free(p);
	return NULL;
}

int main(int argc, char **argv)
{
	CHECK(argc == 2);
	if (strcmp(argv[1], "fork") == 0) {
		pid_t child = fork();
		int status;

		CHECK(child >= 0);
		if (child == 0)
			_exit(in_child(7814 + (size_t)argc));
		CHECK(waitpid(child, &status, 0) == child);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	} else {
		pthread_t t;

		CHECK(strcmp(argv[1], "thread") == 0);
		CHECK(pthread_create(&t, NULL, thread_main, (void *)(uintptr_t)7822) == 0);
		CHECK(pthread_join(t, NULL) == 0);
	}
	return 0;
}
