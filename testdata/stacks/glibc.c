/*
 * Allocations glibc makes inside its own functions (tests/stacks.rs): strdup of a 7810-byte
 * string (malloc(7811) inside strdup), fopen of /proc/self/status (the FILE, inside fopen), and
 * getline of its first line, "Name: ..." (the stream's buffer inside the read, and the line's
 * buffer inside getdelim), shorter than getline's first 120 bytes so nothing is reallocated.
 *
 * The calls run between two marker allocations, malloc(7901) before and malloc(7903) after, and
 * while `armed` is 1, so a test takes every allocation of that window from each tool: memtrack's
 * between the markers, gdb's from a breakpoint conditioned on `armed`. fopen and getline are
 * tail calls in Debian's glibc (to __fopen_internal, __getdelim), so they are no frames of their
 * own: gdb's bt shows them only from the debug info's call sites.
 */
#include <string.h>
#include "stacks.h"

volatile int armed;

static char text[7811];

int main(int argc, char **argv)
{
	char *line = NULL;
	size_t cap = 0;
	void *before, *after;
	char *copy;
	FILE *f;

	(void)argc;
	(void)argv;
	memset(text, 'x', sizeof text - 1);
	before = opaque(malloc(7901));
	armed = 1;
	copy = strdup(text);
	f = fopen("/proc/self/status", "r");
	CHECK(f);
	CHECK(getline(&line, &cap, f) > 0);
	armed = 0;
	after = opaque(malloc(7903));
	CHECK(copy && strlen(copy) == 7810);
	fclose(f);
	free(line);
	free(copy);
	free(before);
	free(after);
	return stacks_sink;
}
