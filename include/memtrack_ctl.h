/* SPDX-License-Identifier: (MIT OR Apache-2.0) */
/*
 * memtrack_ctl.h: tell `memtrack record --control PATH` what a C or C++ benchmark harness is
 * doing, so that `memtrack report --by bench` can report each benchmark on its own.
 *
 * One header, nothing to link: it needs only POSIX and flock(2) (Linux, the BSDs). It never
 * allocates memory, so calling it cannot change what memtrack measures.
 *
 *     #include "memtrack_ctl.h"
 *
 *     memtrack_ctl_bench("parse::small", getpid()); // this pid and its descendants
 *     memtrack_ctl_start();                         // returns once memtrack records
 *     run_the_benchmark();
 *     memtrack_ctl_stop();                          // returns once memtrack stopped recording
 *
 * memtrack passes PATH in the MEMTRACK_CONTROL environment variable. Each function returns
 *   0                 when memtrack acted on the request (for start: the kernel records now),
 *   MEMTRACK_CTL_OFF  when MEMTRACK_CONTROL is not set: not running under memtrack, nothing done,
 *   -1                on failure, with errno set and memtrack_ctl_error() saying why.
 *
 * The protocol is in docs/control-protocol.md: one request line written to PATH, one reply line
 * read from PATH.ack. Every function here is one round trip, holding an exclusive flock on
 * PATH.ack meanwhile, so several processes of a harness may call them at once; they take turns.
 * A function waits at most MEMTRACK_CTL_TIMEOUT_MS for its turn and its reply.
 */
#ifndef MEMTRACK_CTL_H
#define MEMTRACK_CTL_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* The protocol version this header speaks. */
#define MEMTRACK_CTL_PROTOCOL 1
/* Returned when MEMTRACK_CONTROL is not set. */
#define MEMTRACK_CTL_OFF 1
/* The longest request line, newline included (PIPE_BUF: one write of it is atomic). */
#define MEMTRACK_CTL_MAX_LINE 4096
/* The longest reply line, newline included. */
#define MEMTRACK_CTL_MAX_REPLY (MEMTRACK_CTL_MAX_LINE + 512)
/* How long a request waits for its turn and its reply. */
#define MEMTRACK_CTL_TIMEOUT_MS 10000

/* Why the last call of this thread failed. */
static __thread char memtrack_ctl_errbuf[256];

static inline const char *memtrack_ctl_error(void)
{
	return memtrack_ctl_errbuf;
}

/* Copies `a`, `b` and `c` (each may be NULL) into the error buffer, sets errno to `err` and
 * returns -1. */
static inline int memtrack_ctl_fail_(int err, const char *a, const char *b, const char *c)
{
	const char *parts[3] = { a, b, c };
	size_t n = 0;

	for (int i = 0; i < 3; i++) {
		for (const char *p = parts[i]; p && *p && n + 1 < sizeof(memtrack_ctl_errbuf); p++)
			memtrack_ctl_errbuf[n++] = *p;
	}
	memtrack_ctl_errbuf[n] = '\0';
	errno = err;
	return -1;
}

static inline long long memtrack_ctl_now_ms_(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void memtrack_ctl_nap_(void)
{
	struct timespec ms = { 0, 1000000 };

	nanosleep(&ms, NULL);
}

/* Whether the reply `r` (without its newline) answers request `req`; sets *refused when it
 * says `err`. A reply repeats its request, so one meant for another client is skipped. */
static inline int memtrack_ctl_answers_(const char *r, const char *req, int *refused)
{
	size_t n = strlen(req);

	if (!strncmp(r, "ok ", 3) && !strcmp(r + 3, req)) {
		*refused = 0;
		return 1;
	}
	if (!strncmp(r, "err ", 4) && !strncmp(r + 4, req, n) && !strncmp(r + 4 + n, ": ", 2)) {
		*refused = 1;
		return 1;
	}
	return 0;
}

/* Sends the request `line` (without its newline) and waits for memtrack to act on it. */
static inline int memtrack_ctl_send(const char *line)
{
	const char *path = getenv("MEMTRACK_CONTROL");
	char ack[PATH_MAX], buf[MEMTRACK_CTL_MAX_LINE], reply[MEMTRACK_CTL_MAX_REPLY];
	size_t len = strlen(line), plen, have = 0;
	long long deadline = memtrack_ctl_now_ms_() + MEMTRACK_CTL_TIMEOUT_MS;
	int fd = -1, afd = -1, refused = 0, rc = -1, saved;

	if (!path || !*path)
		return MEMTRACK_CTL_OFF;
	plen = strlen(path);
	if (len + 1 > sizeof(buf) || strchr(line, '\n'))
		return memtrack_ctl_fail_(EMSGSIZE, "request longer than 4095 bytes or with a newline",
					  NULL, NULL);
	if (plen + sizeof(".ack") > sizeof(ack))
		return memtrack_ctl_fail_(ENAMETOOLONG, "MEMTRACK_CONTROL is too long", NULL, NULL);
	memcpy(ack, path, plen);
	memcpy(ack + plen, ".ack", sizeof(".ack"));
	memcpy(buf, line, len);
	buf[len] = '\n';

	fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		rc = memtrack_ctl_fail_(errno, errno == ENXIO ? "no memtrack listens on " :
					"cannot open ", path, NULL);
		goto out;
	}
	afd = open(ack, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (afd < 0) {
		rc = memtrack_ctl_fail_(errno, "cannot open ", ack, NULL);
		goto out;
	}
	/* One client at a time on the ack FIFO. */
	while (flock(afd, LOCK_EX | LOCK_NB)) {
		if ((errno != EWOULDBLOCK && errno != EINTR) || memtrack_ctl_now_ms_() > deadline) {
			rc = memtrack_ctl_fail_(errno == EWOULDBLOCK ? ETIMEDOUT : errno,
						"another client holds ", ack, NULL);
			goto out;
		}
		memtrack_ctl_nap_();
	}
	/* Replies left by a client that died before reading its own are not ours. */
	while (read(afd, reply, sizeof(reply)) > 0)
		;
	for (;;) {
		ssize_t w = write(fd, buf, len + 1);

		if (w == (ssize_t)(len + 1))
			break;
		if (w >= 0 || (errno != EAGAIN && errno != EINTR) ||
		    memtrack_ctl_now_ms_() > deadline) {
			rc = memtrack_ctl_fail_(w >= 0 ? EIO : errno == EAGAIN ? ETIMEDOUT : errno,
						"cannot write the request to ", path, NULL);
			goto out;
		}
		memtrack_ctl_nap_();
	}
	buf[len] = '\0';
	for (;;) {
		char *nl = (char *)memchr(reply, '\n', have);
		long long left;
		struct pollfd pfd = { afd, POLLIN, 0 };
		ssize_t r;

		if (nl) {
			size_t used = (size_t)(nl - reply) + 1;

			*nl = '\0';
			if (memtrack_ctl_answers_(reply, buf, &refused)) {
				rc = refused ? memtrack_ctl_fail_(EINVAL, "memtrack refused: ",
								 reply + 4, NULL) : 0;
				goto out;
			}
			memmove(reply, reply + used, have - used);
			have -= used;
			continue;
		}
		if (have == sizeof(reply)) {
			rc = memtrack_ctl_fail_(EPROTO, "a reply too long on ", ack, NULL);
			goto out;
		}
		left = deadline - memtrack_ctl_now_ms_();
		if (left <= 0) {
			rc = memtrack_ctl_fail_(ETIMEDOUT, "no reply on ", ack, NULL);
			goto out;
		}
		poll(&pfd, 1, (int)left);
		r = read(afd, reply + have, sizeof(reply) - have);
		if (r > 0)
			have += (size_t)r;
		else if (r == 0)
			memtrack_ctl_nap_(); /* a writer came and went: do not spin on the hang-up */
		else if (errno != EAGAIN && errno != EINTR) {
			rc = memtrack_ctl_fail_(errno, "cannot read ", ack, NULL);
			goto out;
		}
	}
out:
	saved = errno;
	if (afd >= 0)
		close(afd); /* releases the lock */
	if (fd >= 0)
		close(fd);
	errno = saved;
	return rc;
}

/* Checks that memtrack listens and speaks this header's protocol version. */
static inline int memtrack_ctl_hello(void)
{
	return memtrack_ctl_send("hello 1");
}

/* Starts measuring: once this returns 0, allocator calls are recorded. */
static inline int memtrack_ctl_start(void)
{
	return memtrack_ctl_send("start");
}

/* Stops measuring: once this returns 0, allocator calls are no longer recorded. */
static inline int memtrack_ctl_stop(void)
{
	return memtrack_ctl_send("stop");
}

/* Names the benchmark that runs from now on, in process `pid` and its descendants (0: every
 * process). `uri` is any text without control characters. */
static inline int memtrack_ctl_bench(const char *uri, pid_t pid)
{
	char line[MEMTRACK_CTL_MAX_LINE], digits[16];
	size_t ulen = strlen(uri), n = 0, d = 0;
	unsigned long v = (unsigned long)pid;

	for (const char *p = uri; *p; p++) {
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return memtrack_ctl_fail_(EINVAL, "the benchmark URI has a control character",
						  NULL, NULL);
	}
	if (pid < 0)
		return memtrack_ctl_fail_(EINVAL, "give a pid >= 0", NULL, NULL);
	do {
		digits[d++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	/* "bench URI PID" and its newline must fit in one line. */
	if (!ulen || 6 + ulen + 1 + d + 1 > sizeof(line))
		return memtrack_ctl_fail_(EMSGSIZE, "the benchmark URI is empty or too long for one line",
					  NULL, NULL);
	memcpy(line, "bench ", 6);
	n = 6;
	memcpy(line + n, uri, ulen);
	n += ulen;
	line[n++] = ' ';
	while (d)
		line[n++] = digits[--d];
	line[n] = '\0';
	return memtrack_ctl_send(line);
}

/* Marks a point of the harness's loop: "sample_start", "sample_end", "round_start" or
 * "round_end". */
static inline int memtrack_ctl_marker(const char *kind)
{
	char line[64];
	size_t n = strlen(kind);

	if (n + 8 > sizeof(line))
		return memtrack_ctl_fail_(EINVAL, "unknown marker kind ", kind, NULL);
	memcpy(line, "marker ", 7);
	memcpy(line + 7, kind, n + 1);
	return memtrack_ctl_send(line);
}

#endif /* MEMTRACK_CTL_H */
