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
	size_t size = 32 * MiB;
	pid_t parent = getpid(), pid;
	char *p;

	CHECK(argc > 1);
	p = map_written_file(argv[1], size, 3);
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
