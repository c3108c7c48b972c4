/* malloc/free: COUNT (argv[1], default 1000) blocks of 10007 bytes, all live at once, then
 * freed; then one block of 10009 bytes that is never freed (a leak); exit code argv[2]. */
#include "fixture.h"

int main(int argc, char **argv)
{
	int count = argc > 1 ? atoi(argv[1]) : 1000;
	int code = argc > 2 ? atoi(argv[2]) : 0;
	void **blocks = calloc(count, sizeof(void *)); /* 8*count bytes, calloc */

	CHECK(blocks);
	for (int i = 0; i < count; i++)
		CHECK(blocks[i] = opaque(malloc(10007)));
	for (int i = 0; i < count; i++)
		free(blocks[i]);
	free(blocks);
	CHECK(opaque(malloc(10009)));
	free(opaque(NULL)); /* free(NULL) is not an event */
	return code;
}
