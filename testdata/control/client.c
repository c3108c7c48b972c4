/* A harness that exercises the control protocol's edges, one mode per test (argv[1]):
 *
 *   malformed   sends refused requests (unknown, incomplete, extra arguments, a wrong hello)
 *               and, written raw without waiting for replies, a 10000-byte line and a line that
 *               is not UTF-8; checks each refusal, then measures benchmark "client::malformed":
 *               3 x malloc(26001), freed, and a URI as long as a line allows.
 *   never_stop  names "client::never_stop", starts, makes 7 x malloc(25001) and exits without
 *               freeing them or sending stop.
 *   disconnect  names "client::disconnect", starts, makes 2 x malloc(27001) freed, writes half a
 *               line ("sto", no newline) and closes the FIFO as a dying client would, sleeps
 *               1.5 s, then sends stop (which must work: the half line is dropped) and
 *               allocates 27009 bytes (paused: never recorded).
 *   concurrent N  three processes send N markers each at the same time; all must be answered.
 *   prelude     allocates 28001 bytes, then names "client::prelude", starts, allocates 28003
 *               bytes, stops.
 *   off         checks that every call says MEMTRACK_CTL_OFF (not under --control).
 *   latency N   N start/stop round trips; prints "round trip: mean M us, max X us".
 *
 * Exit codes: 0 fine, 99 a failed check (message on stderr), 97 a control call failed. */
#include <sys/wait.h>
#include "../fixture.h"
#include "../../include/memtrack_ctl.h"

#define CTL(call)                                                                            \
	do {                                                                                 \
		if ((call) != 0) {                                                           \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,        \
				memtrack_ctl_error());                                       \
			_exit(97);                                                           \
		}                                                                            \
	} while (0)

/* `call` must be refused with a message containing `what`. */
#define REFUSED(call, what)                                                                  \
	do {                                                                                 \
		CHECK((call) == -1);                                                         \
		if (!strstr(memtrack_ctl_error(), what)) {                                   \
			fprintf(stderr, "%s:%d: %s: '%s' does not say '%s'\n", __FILE__,     \
				__LINE__, #call, memtrack_ctl_error(), what);                \
			_exit(99);                                                           \
		}                                                                            \
	} while (0)

/* Writes `len` bytes to the control FIFO without waiting for a reply, as `echo > FIFO` does. */
static void raw_write(const char *bytes, size_t len)
{
	int fd = open(getenv("MEMTRACK_CONTROL"), O_WRONLY);

	CHECK(fd >= 0);
	while (len) {
		ssize_t n = write(fd, bytes, len);

		CHECK(n > 0);
		bytes += n;
		len -= (size_t)n;
	}
	close(fd);
}

static void malformed(void)
{
	static char big[10001], uri[MEMTRACK_CTL_MAX_LINE];
	size_t urilen = MEMTRACK_CTL_MAX_LINE - sizeof("bench  1234567\n") + 1;

	CTL(memtrack_ctl_hello());
	REFUSED(memtrack_ctl_send("hello 2"), "speaks control protocol version 1");
	REFUSED(memtrack_ctl_send("bogus"), "unknown command 'bogus'");
	REFUSED(memtrack_ctl_send(""), "empty line");
	REFUSED(memtrack_ctl_send("bench"), "bench URI PID");
	REFUSED(memtrack_ctl_send("bench x"), "bench URI PID");
	REFUSED(memtrack_ctl_send("start now"), "start takes no arguments");
	REFUSED(memtrack_ctl_marker("lap"), "marker needs one of");
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\n';
	raw_write(big, sizeof(big));
	raw_write("st\xff\xfe\n", 5);
	/* The recorder answers those two too; the next client skips replies that are not its own. */
	memset(uri, 'u', urilen);
	uri[urilen] = '\0';
	CTL(memtrack_ctl_bench(uri, 1234567));
	CTL(memtrack_ctl_bench("client::malformed", getpid()));
	CTL(memtrack_ctl_start());
	for (int i = 0; i < 3; i++)
		free(opaque(malloc(26001)));
	CTL(memtrack_ctl_stop());
}

static void never_stop(void)
{
	CTL(memtrack_ctl_bench("client::never_stop", getpid()));
	CTL(memtrack_ctl_start());
	for (int i = 0; i < 7; i++)
		opaque(malloc(25001));
	exit(0);
}

static void disconnect(void)
{
	struct timespec pause = { 1, 500000000 };

	CTL(memtrack_ctl_bench("client::disconnect", getpid()));
	CTL(memtrack_ctl_start());
	for (int i = 0; i < 2; i++)
		free(opaque(malloc(27001)));
	raw_write("sto", 3);
	nanosleep(&pause, NULL);
	CTL(memtrack_ctl_stop());
	free(opaque(malloc(27009)));
}

static void concurrent(int n)
{
	pid_t kids[2];

	for (int k = 0; k < 2; k++) {
		kids[k] = fork();
		CHECK(kids[k] >= 0);
		if (kids[k] == 0) {
			for (int i = 0; i < n; i++)
				CTL(memtrack_ctl_marker("sample_start"));
			_exit(0);
		}
	}
	for (int i = 0; i < n; i++)
		CTL(memtrack_ctl_marker("sample_end"));
	for (int k = 0; k < 2; k++) {
		int status;

		CHECK(waitpid(kids[k], &status, 0) == kids[k]);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
}

static void prelude(void)
{
	free(opaque(malloc(28001)));
	CTL(memtrack_ctl_bench("client::prelude", getpid()));
	CTL(memtrack_ctl_start());
	free(opaque(malloc(28003)));
	CTL(memtrack_ctl_stop());
}

static void off(void)
{
	CHECK(memtrack_ctl_hello() == MEMTRACK_CTL_OFF);
	CHECK(memtrack_ctl_start() == MEMTRACK_CTL_OFF);
	CHECK(memtrack_ctl_bench("x", 1) == MEMTRACK_CTL_OFF);
	CHECK(memtrack_ctl_stop() == MEMTRACK_CTL_OFF);
}

static long long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void latency(int n)
{
	long long total = 0, worst = 0;

	CTL(memtrack_ctl_bench("client::latency", getpid()));
	for (int i = 0; i < n; i++) {
		for (int k = 0; k < 2; k++) {
			long long t = now_us(), d;

			CTL(k ? memtrack_ctl_stop() : memtrack_ctl_start());
			d = now_us() - t;
			total += d;
			worst = d > worst ? d : worst;
		}
	}
	printf("round trip: mean %lld us, max %lld us over %d\n", total / (2 * n), worst, 2 * n);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	int n = argc > 2 ? atoi(argv[2]) : 0;

	if (!strcmp(mode, "malformed"))
		malformed();
	else if (!strcmp(mode, "never_stop"))
		never_stop();
	else if (!strcmp(mode, "disconnect"))
		disconnect();
	else if (!strcmp(mode, "concurrent"))
		concurrent(n);
	else if (!strcmp(mode, "prelude"))
		prelude();
	else if (!strcmp(mode, "off"))
		off();
	else if (!strcmp(mode, "latency"))
		latency(n);
	else
		CHECK(!"unknown mode");
	return 0;
}
