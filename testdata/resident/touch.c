/* Resident memory by call site (issue 35): touch_a() makes 8 MiB of a malloc'd block resident,
 * touch_b() 24 MiB, and read_c() 16 MiB of a file it writes at argv[1], maps shared and reads;
 * all of it stays resident until the checkpoint, the process's resident peak. With argv[2]
 * "free_a", touch_a's block is freed (glibc unmaps a block this large) before touch_b runs. */
#include "../rss/status.h"

/* Writes one byte of every page of a new block of `bytes`: the page faults are this
 * function's own instructions. */
static __attribute__((noinline)) char *touch(size_t bytes)
{
	char *p = malloc(bytes);

	CHECK(p);
	for (size_t i = 0; i < bytes; i += 4096)
		((volatile char *)p)[i] = 1;
	return p;
}

__attribute__((noinline)) char *touch_a(void)
{
	char *p = touch(8 * MiB);

	__asm__ volatile("" ::: "memory"); /* no tail call: touch_a stays on the stack */
	return p;
}

__attribute__((noinline)) char *touch_b(void)
{
	char *p = touch(24 * MiB);

	__asm__ volatile("" ::: "memory");
	return p;
}

__attribute__((noinline)) char *read_c(const char *path)
{
	char *p = map_written_file(path, 16 * MiB, 3);

	__asm__ volatile("" ::: "memory");
	return p;
}

int main(int argc, char **argv)
{
	char *a, *b, *c;

	CHECK(argc > 1);
	a = touch_a();
	if (argc > 2 && !strcmp(argv[2], "free_a")) {
		free(a);
		a = "\1";
	}
	b = touch_b();
	c = read_c(argv[1]);
	checkpoint("peak");
	unlink(argv[1]);
	return a[0] + b[0] + c[0] == 5 ? 0 : 1;
}
