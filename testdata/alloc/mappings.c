/*
 * Raw mappings made with syscalls, apart from any allocator (tests/allocators.rs):
 *
 *   mmap 20487 bytes (rounded to 6 pages) anonymous private read-write; munmap its second page;
 *   mremap its first page to 7 pages (may move); munmap those 7 pages and the last 4 pages of
 *   the first mapping; grow the break by 64 KiB and shrink it back; a failing mmap
 *   (fd -1 without MAP_ANONYMOUS: EBADF) and a failing munmap (unaligned: EINVAL), not recorded.
 */
#define _GNU_SOURCE
#include <sys/mman.h>
#include <unistd.h>
#include "../fixture.h"

int main(void)
{
	const long page = sysconf(_SC_PAGESIZE);
	char *a = mmap(NULL, 20487, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *b;
	char *before, *after;

	CHECK(a != MAP_FAILED);
	CHECK(munmap(a + page, page) == 0);
	b = mremap(a, page, 7 * page, MREMAP_MAYMOVE);
	CHECK(b != MAP_FAILED);
	CHECK(munmap(b, 7 * page) == 0);
	CHECK(munmap(a + 2 * page, 4 * page) == 0);

	before = sbrk(0);
	CHECK(sbrk(65536) == before);
	after = sbrk(0);
	CHECK(after == before + 65536);
	CHECK(sbrk(-65536) == after);

	CHECK(mmap(NULL, page, PROT_READ, MAP_PRIVATE, -1, 0) == MAP_FAILED);
	CHECK(munmap(a + 1, page) != 0);
	printf("%p %p %p\n", (void *)a, (void *)b, (void *)before);
	return 0;
}
