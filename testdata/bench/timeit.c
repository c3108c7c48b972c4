/* scripts/bench.sh's stopwatch: run a command, wait for it, and print one line to stderr (or
 * to the file given with -o): wall seconds, user and system CPU seconds, peak resident KiB and
 * the exit status. CPU and peak cover the command and every descendant it waited for, as
 * wait4(2) reports them. Wall time is CLOCK_MONOTONIC around fork and wait, so unlike
 * /usr/bin/time it resolves microseconds, which the fixed cost on `true` needs.
 *
 *   timeit [-o FILE] -- CMD [ARGS...]
 *   -> "wall_s=0.001234 user_s=0.000800 sys_s=0.000300 maxrss_kib=1234 status=0"
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/wait.h>

static double seconds(struct timeval tv)
{
	return tv.tv_sec + tv.tv_usec / 1e6;
}

int main(int argc, char **argv)
{
	const char *out = NULL;
	int i = 1;
	struct timespec t0, t1;
	struct rusage ru;
	int status;
	pid_t pid;
	FILE *f = stderr;

	if (i + 1 < argc && !strcmp(argv[i], "-o")) {
		out = argv[i + 1];
		i += 2;
	}
	if (i < argc && !strcmp(argv[i], "--"))
		i++;
	if (i >= argc) {
		fprintf(stderr, "usage: timeit [-o FILE] -- CMD [ARGS...]\n");
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid = fork();
	if (pid < 0) {
		perror("timeit: fork");
		return 125;
	}
	if (pid == 0) {
		execvp(argv[i], argv + i);
		fprintf(stderr, "timeit: cannot run %s: %m\n", argv[i]);
		_exit(127);
	}
	if (wait4(pid, &status, 0, &ru) < 0) {
		perror("timeit: wait4");
		return 125;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (out && !(f = fopen(out, "w"))) {
		fprintf(stderr, "timeit: cannot write %s: %m\n", out);
		return 125;
	}
	fprintf(f, "wall_s=%.6f user_s=%.6f sys_s=%.6f maxrss_kib=%ld status=%d\n",
		(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9, seconds(ru.ru_utime),
		seconds(ru.ru_stime), ru.ru_maxrss,
		WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
	if (out)
		fclose(f);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
