/* An allocation in an ELF constructor, before main: recorded because the command is tracked
 * from before its first instruction. */
#include "fixture.h"

static void *early;

__attribute__((constructor)) static void before_main(void)
{
	early = opaque(malloc(40009));
}

int main(void)
{
	CHECK(early);
	free(early);
	return 0;
}
