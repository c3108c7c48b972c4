/* The aligned allocators, one successful call of each with its own size, and a failing
 * posix_memalign (alignment 3 is EINVAL). */
#include <malloc.h>
#include "fixture.h"

int main(void)
{
	void *p;

	free(opaque(aligned_alloc(256, 5120)));  /* 5120 */
	free(opaque(memalign(128, 5003)));       /* 5003 */
	CHECK(posix_memalign(&p, 64, 6007) == 0); /* 6007 */
	free(p);
	CHECK(posix_memalign(&p, 3, 6011) != 0); /* fails: EINVAL */
	free(opaque(valloc(7001)));              /* 7001 */
	free(opaque(pvalloc(9001)));             /* 9001 */
	return 0;
}
