/* A benchmark harness run under `memtrack record --control`, talking through
 * include/memtrack_ctl.h. Its root forks a noise process, then runs three benchmarks one after
 * the other, each in a process of its own that names itself with `bench URI getpid()`:
 *
 *   "own"   does its work in its own process: 10 x malloc(21001), frees 4 of them, stops, and
 *           frees the other 6 while paused (recorded: frees are, so the benchmark leaks none).
 *           It also allocates 21009 bytes before start and after stop (never recorded).
 *   "child" forks a child while paused (the child allocates 22009 bytes before it is told to
 *           go: never recorded), then starts; the child makes 5 x malloc(22001), frees them,
 *           allocates 22002 bytes and exits with them.
 *   "exec"  starts, then forks a child that execs argv[1] (worker.c) with "3": 3 x
 *           malloc(23001) freed, calloc(1, 23003) leaked.
 *
 * The noise process, a sibling of all three, mallocs and frees 24001 bytes in a loop the whole
 * time; every benchmark waits inside its window until the noise did at least 3 rounds, so noise
 * is recorded during every window and must be excluded by pid. Markers: "own" sends
 * sample_start and sample_end around its work, "child" round_start and round_end.
 *
 * Exit codes: 0 fine, 99 a failed check (message on stderr), 97 a control call failed. */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include "../fixture.h"
#include "../../include/memtrack_ctl.h"

/* Shared with the noise process: its round count, and the flag that stops it. */
struct shared {
	volatile unsigned long rounds;
	volatile int stop;
};

static struct shared *shared;

#define CTL(call)                                                                            \
	do {                                                                                 \
		if ((call) != 0) {                                                           \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,        \
				memtrack_ctl_error());                                       \
			_exit(97);                                                           \
		}                                                                            \
	} while (0)

static void nap_us(long us)
{
	struct timespec ts = { 0, us * 1000 };

	nanosleep(&ts, NULL);
}

/* Inside a window: wait until the noise process did `n` more rounds. */
static void let_noise_run(unsigned long n)
{
	unsigned long until = shared->rounds + n;

	while (shared->rounds < until)
		nap_us(100);
}

static void noise(void)
{
	while (!shared->stop) {
		free(opaque(malloc(24001)));
		shared->rounds++;
		nap_us(50);
	}
	_exit(0);
}

static void bench_own(void)
{
	void *blocks[10];

	free(opaque(malloc(21009)));
	CTL(memtrack_ctl_bench("harness::own", getpid()));
	CTL(memtrack_ctl_start());
	CTL(memtrack_ctl_marker("sample_start"));
	for (int i = 0; i < 10; i++)
		blocks[i] = opaque(malloc(21001));
	for (int i = 0; i < 4; i++)
		free(blocks[i]);
	let_noise_run(3);
	CTL(memtrack_ctl_marker("sample_end"));
	CTL(memtrack_ctl_stop());
	for (int i = 4; i < 10; i++)
		free(blocks[i]);
	free(opaque(malloc(21009)));
	_exit(0);
}

static void bench_child(void)
{
	int go[2], paused_done[2];
	pid_t child;
	char c = 'g';

	CHECK(pipe(go) == 0 && pipe(paused_done) == 0);
	CTL(memtrack_ctl_bench("harness::child", getpid()));
	child = fork(); /* while paused: the fork must still be recorded */
	CHECK(child >= 0);
	if (child == 0) {
		close(go[1]);
		close(paused_done[0]);
		free(opaque(malloc(22009)));
		CHECK(write(paused_done[1], &c, 1) == 1);
		CHECK(read(go[0], &c, 1) == 1);
		for (int i = 0; i < 5; i++)
			free(opaque(malloc(22001)));
		opaque(malloc(22002));
		_exit(0);
	}
	close(go[0]);
	close(paused_done[1]);
	/* The child's 22009 bytes come while paused: start only once it says they did. A nap of
	 * 20 ms was not always long enough in a guest under TCG beside another. */
	CHECK(read(paused_done[0], &c, 1) == 1);
	CTL(memtrack_ctl_start());
	CTL(memtrack_ctl_marker("round_start"));
	let_noise_run(3);
	CHECK(write(go[1], &c, 1) == 1);
	CHECK(waitpid(child, NULL, 0) == child);
	CTL(memtrack_ctl_marker("round_end"));
	CTL(memtrack_ctl_stop());
	_exit(0);
}

static void bench_exec(const char *worker)
{
	pid_t child;
	int status;

	CTL(memtrack_ctl_bench("harness::exec", getpid()));
	CTL(memtrack_ctl_start());
	let_noise_run(3);
	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		execl(worker, worker, "3", (char *)NULL);
		_exit(98);
	}
	CHECK(waitpid(child, &status, 0) == child);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	let_noise_run(3);
	CTL(memtrack_ctl_stop());
	_exit(0);
}

/* Runs `body` in a child and checks that it succeeded. */
static void run(void (*body)(const char *), const char *arg)
{
	pid_t pid = fork();
	int status;

	CHECK(pid >= 0);
	if (pid == 0)
		body(arg);
	CHECK(waitpid(pid, &status, 0) == pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "a benchmark process failed: status %#x\n", status);
		exit(WIFEXITED(status) ? WEXITSTATUS(status) : 99);
	}
}

static void own(const char *unused) { (void)unused; bench_own(); }
static void child(const char *unused) { (void)unused; bench_child(); }

int main(int argc, char **argv)
{
	pid_t noise_pid;

	CHECK(argc > 1);
	CTL(memtrack_ctl_hello());
	shared = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		      -1, 0);
	CHECK(shared != MAP_FAILED);
	noise_pid = fork();
	CHECK(noise_pid >= 0);
	if (noise_pid == 0)
		noise();
	run(own, NULL);
	run(child, NULL);
	run(bench_exec, argv[1]);
	shared->stop = 1;
	CHECK(waitpid(noise_pid, NULL, 0) == noise_pid);
	return 0;
}
