/* The program benchmark "exec" of harness.c runs through exec: it allocates argv[1] blocks of
 * 23001 bytes and frees them, then allocates 23003 bytes with calloc and exits without freeing
 * them. It makes no other allocation (no stdio), so its counts are exact. */
#include "../fixture.h"

int main(int argc, char **argv)
{
	int n;

	CHECK(argc > 1);
	n = atoi(argv[1]);
	for (int i = 0; i < n; i++)
		free(opaque(malloc(23001)));
	opaque(calloc(1, 23003));
	return 0;
}
