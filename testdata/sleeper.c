/* For the signal tests: allocates 15000 bytes, forks a child that allocates 15001 bytes, and
 * once the child has, prints "ready CHILD_PID" and waits, as the child does, until a signal
 * ends them. alarm(60) ends both should a test forget them. */
#include <signal.h>
#include <unistd.h>
#include "fixture.h"

int main(void)
{
	int ready[2];
	char byte;

	alarm(60);
	CHECK(opaque(malloc(15000)));
	CHECK(pipe(ready) == 0);
	pid_t child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		alarm(60); /* not inherited across fork */
		CHECK(opaque(malloc(15001)));
		CHECK(write(ready[1], "x", 1) == 1);
		for (;;)
			pause();
	}
	CHECK(read(ready[0], &byte, 1) == 1);
	printf("ready %d\n", (int)child);
	fflush(stdout);
	for (;;)
		pause();
}
