/* A 32 MiB memfd, mapped shared and written: resident shmem. */
#include "status.h"

int main(void)
{
	size_t size = 32 * MiB;
	int fd = memfd_create("memtrack-shmem", 0);
	char *p;

	CHECK(fd >= 0);
	CHECK(ftruncate(fd, size) == 0);
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(p != MAP_FAILED);
	for (size_t i = 0; i < size; i += 4096)
		p[i] = 1;
	checkpoint("shmem");
	return 0;
}
