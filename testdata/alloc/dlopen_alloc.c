/*
 * Allocators loaded with dlopen, used the moment dlopen returns (tests/allocators.rs).
 *
 *   dlopen_alloc TCMALLOC MIMALLOC          one thread: dlopen tcmalloc, tc_malloc(40009) at
 *                                            once, then mimalloc, mi_malloc(40013) at once; both
 *                                            freed
 *   dlopen_alloc TCMALLOC MIMALLOC threads  two threads released together: one dlopens tcmalloc
 *                                            and tc_malloc(40019)s, the other mimalloc and
 *                                            mi_malloc(40021)s; both freed
 *
 * The libraries are opened RTLD_LOCAL, so they serve only the calls made through dlsym.
 * (jemalloc cannot be dlopened: it needs static TLS.)
 */
#include <dlfcn.h>
#include <pthread.h>
#include "../fixture.h"

typedef void *(*malloc_fn)(size_t);
typedef void (*free_fn)(void *);

static const char *tcmalloc_path, *mimalloc_path;
static pthread_barrier_t start;

static void *open_or_die(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
		exit(98);
	}
	return h;
}

/* Open `path` and allocate `size` bytes with its `alloc` the moment dlopen returns. */
static void use(const char *path, const char *alloc, const char *release, size_t size)
{
	void *h = open_or_die(path);
	malloc_fn alloc_fn = (malloc_fn)dlsym(h, alloc);
	free_fn release_fn = (free_fn)dlsym(h, release);
	void *p;

	CHECK(alloc_fn && release_fn);
	p = opaque(alloc_fn(size));
	CHECK(p);
	release_fn(p);
}

static void use_tcmalloc(size_t size)
{
	use(tcmalloc_path, "tc_malloc", "tc_free", size);
}

static void use_mimalloc(size_t size)
{
	use(mimalloc_path, "mi_malloc", "mi_free", size);
}

static void *tcmalloc_thread(void *arg)
{
	pthread_barrier_wait(&start);
	use_tcmalloc(40019);
	return arg;
}

static void *mimalloc_thread(void *arg)
{
	pthread_barrier_wait(&start);
	use_mimalloc(40021);
	return arg;
}

int main(int argc, char **argv)
{
	pthread_t a, b;

	if (argc < 3)
		return 2;
	tcmalloc_path = argv[1];
	mimalloc_path = argv[2];
	if (argc == 3) {
		use_tcmalloc(40009);
		use_mimalloc(40013);
	} else {
		CHECK(pthread_barrier_init(&start, NULL, 2) == 0);
		CHECK(pthread_create(&a, NULL, tcmalloc_thread, NULL) == 0);
		CHECK(pthread_create(&b, NULL, mimalloc_thread, NULL) == 0);
		pthread_join(a, NULL);
		pthread_join(b, NULL);
	}
	printf("done\n");
	return 0;
}
