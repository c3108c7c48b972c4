/*
 * Shared by the resident-memory fixtures: checkpoint() appends what the kernel says about this
 * process (/proc/thread-self/status: it still answers after the main thread has left) to the side file named by $MEMTRACK_STATUS_FILE, one line:
 *   NAME PID VmHWM RssAnon RssFile RssShmem     (kB)
 * so a test can compare memtrack's estimate with the kernel's own numbers.
 */
#ifndef MEMTRACK_RSS_STATUS_H
#define MEMTRACK_RSS_STATUS_H

#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MiB (1024UL * 1024UL)

#define CHECK(cond)                                                                      \
	do {                                                                             \
		if (!(cond)) {                                                           \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			exit(99);                                                        \
		}                                                                        \
	} while (0)

static inline long status_kb(const char *status, const char *key)
{
	const char *at = strstr(status, key);

	return at ? atol(at + strlen(key)) : -1;
}

static inline void checkpoint(const char *name)
{
	char status[8192];
	const char *path = getenv("MEMTRACK_STATUS_FILE");
	int fd = open("/proc/thread-self/status", O_RDONLY);
	ssize_t n;
	FILE *out;

	CHECK(fd >= 0);
	n = read(fd, status, sizeof(status) - 1);
	CHECK(n > 0);
	status[n] = 0;
	close(fd);
	if (!path)
		return;
	out = fopen(path, "a");
	CHECK(out);
	fprintf(out, "%s %d %ld %ld %ld %ld\n", name, getpid(), status_kb(status, "VmHWM:"),
		status_kb(status, "RssAnon:"), status_kb(status, "RssFile:"),
		status_kb(status, "RssShmem:"));
	fclose(out);
}

/* Map `bytes` of private anonymous memory and write every page. */
static inline char *touch_anon(size_t bytes)
{
	char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	CHECK(p != MAP_FAILED);
	for (size_t i = 0; i < bytes; i += 4096)
		p[i] = 1;
	return p;
}

/* Write `bytes` of `fill` to a new file at `path` (on disk, not tmpfs, so its pages are file
 * pages), map it shared and read every page: `bytes` of resident file memory. */
static inline char *map_written_file(const char *path, size_t bytes, char fill)
{
	static char block[1 << 20];
	long sum = 0;
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	char *p;

	CHECK(fd >= 0);
	memset(block, fill, sizeof(block));
	for (size_t done = 0; done < bytes; done += sizeof(block))
		CHECK(write(fd, block, sizeof(block)) == (ssize_t)sizeof(block));
	CHECK(fsync(fd) == 0);
	p = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
	CHECK(p != MAP_FAILED);
	for (size_t i = 0; i < bytes; i += 4096)
		sum += p[i];
	CHECK(sum == (long)fill * (long)(bytes / 4096));
	return p;
}

#endif
