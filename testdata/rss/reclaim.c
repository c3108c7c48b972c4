/* Reclaim by another task: the parent maps and reads a 32 MiB file (argv[1], on disk); a child
 * pages the parent's file pages out with process_madvise(MADV_PAGEOUT). The decrease belongs to
 * the parent. Exits 77 if the kernel refuses process_madvise. */
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include "status.h"

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

int main(int argc, char **argv)
{
	static char block[1 << 20];
	size_t size = 32 * MiB;
	int fd;
	char *p;
	long sum = 0;
	pid_t parent = getpid(), pid;

	CHECK(argc > 1);
	fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	memset(block, 3, sizeof(block));
	for (size_t n = 0; n < size; n += sizeof(block))
		CHECK(write(fd, block, sizeof(block)) == (ssize_t)sizeof(block));
	CHECK(fsync(fd) == 0);
	p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	CHECK(p != MAP_FAILED);
	for (size_t i = 0; i < size; i += 4096)
		sum += p[i];
	CHECK(sum == 3L * (long)(size / 4096));
	checkpoint("parent-mapped");
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		int pidfd = syscall(SYS_pidfd_open, parent, 0);
		struct iovec iov = {.iov_base = p, .iov_len = size};
		long rc;

		CHECK(pidfd >= 0);
		rc = syscall(SYS_process_madvise, pidfd, &iov, 1, MADV_PAGEOUT, 0);
		_exit(rc < 0 ? 77 : 0);
	}
	int status;
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status));
	checkpoint("parent-reclaimed");
	unlink(argv[1]);
	return WEXITSTATUS(status);
}
