/* Processes that allocate at the same time on one CPU, each with sizes of its own: a noise
 * process mallocs and frees 31001 bytes in a loop, while 40 children start one after the other
 * and each makes one malloc(20000 + i) and free of it, its first allocator call (the one that
 * creates the thread's probe state, the longest run of the entry program). The test asserts that
 * every recorded size belongs to the process that passed it: a probe program preempted on a
 * kernel that gives it a per-CPU stack (Linux 6.13+) swapped sizes between processes.
 *
 * The whole tree is pinned to one CPU, so the children and the noise share it. Exit codes: 0
 * fine, 99 a failed check. */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "fixture.h"

#define CHILDREN 40

int main(void)
{
	volatile unsigned long *rounds;
	cpu_set_t one;
	pid_t noise;

	CPU_ZERO(&one);
	CHECK(sched_getaffinity(0, sizeof(one), &one) == 0);
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (CPU_ISSET(cpu, &one)) {
			CPU_ZERO(&one);
			CPU_SET(cpu, &one);
			break;
		}
	}
	CHECK(sched_setaffinity(0, sizeof(one), &one) == 0);
	rounds = mmap(NULL, sizeof(*rounds), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		      -1, 0);
	CHECK(rounds != MAP_FAILED);
	noise = fork();
	CHECK(noise >= 0);
	if (noise == 0) {
		struct timespec ts = { 0, 20000 };

		for (;;) {
			free(opaque(malloc(31001)));
			(*rounds)++;
			nanosleep(&ts, NULL);
		}
	}
	/* The noise runs before the first child starts. */
	while (*rounds < 3)
		sched_yield();
	for (int i = 0; i < CHILDREN; i++) {
		pid_t child = fork();
		int status;

		CHECK(child >= 0);
		if (child == 0) {
			free(opaque(malloc(20000 + i)));
			_exit(0);
		}
		CHECK(waitpid(child, &status, 0) == child);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	kill(noise, SIGKILL);
	CHECK(waitpid(noise, NULL, 0) == noise);
	return 0;
}
