/*
 * The C allocator API, one fingerprint size per call, every block freed; built against glibc,
 * jemalloc, mimalloc or tcmalloc (linked dynamically or statically, or preloaded), with the
 * allocator's own API too when -DJEMALLOC, -DMIMALLOC or -DTCMALLOC says which it is. The
 * same totals are expected whichever allocator serves them (tests/allocators.rs).
 *
 *   malloc 30011 x10, calloc 3 x 10007 (30021), realloc 30031 -> 30037, aligned_alloc 30041,
 *   posix_memalign 30047; jemalloc: mallocx 30059, rallocx 30059 -> 30071, sdallocx, dallocx of
 *   mallocx 30089; mimalloc: mi_malloc 30059, mi_zalloc 30071, mi_realloc 30071 -> 30089,
 *   mi_free; tcmalloc: tc_malloc 30059, tc_free.
 */
#include "../fixture.h"
#include <string.h>
#if defined(JEMALLOC)
#include <jemalloc/jemalloc.h>
#elif defined(MIMALLOC)
#include <mimalloc.h>
#elif defined(TCMALLOC)
#include <gperftools/tcmalloc.h>
#endif

int main(void)
{
	void *blocks[10];
	void *p;

	for (int i = 0; i < 10; i++)
		blocks[i] = opaque(malloc(30011));
	for (int i = 0; i < 10; i++)
		free(blocks[i]);
	free(opaque(calloc(3, 10007)));
	p = opaque(malloc(30031));
	memset(p, 1, 30031); /* the block is used, so realloc must keep it */
	p = opaque(realloc(p, 30037));
	free(p);
	free(opaque(aligned_alloc(64, 30041)));
	CHECK(posix_memalign(&p, 64, 30047) == 0);
	free(p);
#if defined(JEMALLOC)
	p = opaque(mallocx(30059, 0));
	p = opaque(rallocx(p, 30071, 0));
	sdallocx(p, 30071, 0);
	dallocx(opaque(mallocx(30089, 0)), 0);
#elif defined(MIMALLOC)
	mi_free(opaque(mi_malloc(30059)));
	p = opaque(mi_zalloc(30071));
	p = opaque(mi_realloc(p, 30089));
	mi_free(p);
#elif defined(TCMALLOC)
	tc_free(opaque(tc_malloc(30059)));
#endif
	printf("done\n");
	return 0;
}
