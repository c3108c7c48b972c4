/* Write a 64 MiB file at argv[1] (on disk, not tmpfs), map it and read every page. */
#include "status.h"

int main(int argc, char **argv)
{
	static char block[1 << 20];
	size_t size = 64 * MiB;
	int fd;
	char *p;
	long sum = 0;

	CHECK(argc > 1);
	fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	memset(block, 7, sizeof(block));
	for (size_t done = 0; done < size; done += sizeof(block))
		CHECK(write(fd, block, sizeof(block)) == (ssize_t)sizeof(block));
	CHECK(fsync(fd) == 0);
	p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	CHECK(p != MAP_FAILED);
	for (size_t i = 0; i < size; i += 4096)
		sum += p[i];
	CHECK(sum == 7L * (long)(size / 4096));
	checkpoint("file");
	unlink(argv[1]);
	return 0;
}
