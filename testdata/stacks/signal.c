/*
 * A stack through a signal frame (tests/stacks.rs):
 *
 *   main -> deliver -> raise(SIGUSR1), and in the handler it runs:
 *   on_signal -> signal_alloc -> malloc(7853)
 *
 * The handler runs on the thread's stack above the frame the kernel pushed for the signal (the
 * interrupted registers, and glibc's `__restore_rt` as the handler's return address), so the
 * walk must read that frame to get from the handler back to raise, deliver and main. The
 * signal is raised synchronously, so malloc in the handler interrupts no other malloc.
 */
#include <signal.h>
#include <string.h>
#include "stacks.h"

static void *kept;

FRAME void *signal_alloc(size_t n)
{
	void *p = opaque(malloc(n));

	stacks_sink++;
	return p;
}

FRAME void on_signal(int sig)
{
	kept = signal_alloc(7852 + (size_t)(sig == SIGUSR1));
	stacks_sink++;
}

FRAME int deliver(void)
{
	int r = raise(SIGUSR1);

	stacks_sink++;
	return r;
}

int main(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	CHECK(deliver() == 0);
	CHECK(kept != NULL);
	free(kept);
	return 0;
}
