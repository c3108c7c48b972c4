/* Functions whose call frame information covers every rule the unwind-table builder knows:
 * built -O2 -fomit-frame-pointer (rsp-based CFAs, pushes and pops of callee-saved registers),
 * with alloca (an rbp-based CFA even then), a stack-realigning function, a tail call, calls
 * through the PLT, and a noreturn path. tests/unwind.rs compares the builder's table of this
 * file with readelf's reading of its CFI, row by row. */
#include <alloca.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

/* Keeps a value alive across calls, so the compiler must save callee-saved registers. */
static volatile long sink;

NOINLINE long leaf(long a) { return a * 3 + 1; }

NOINLINE long saves_registers(long a, long b, long c) {
	long x = leaf(a), y = leaf(b), z = leaf(c);
	long w = leaf(x + y);
	return x * y + z * w + leaf(w);
}

/* A variable-sized alloca: the CFA becomes rbp-based even with -fomit-frame-pointer. */
NOINLINE long dynamic_frame(size_t n) {
	char *buf = alloca(n + 16);
	memset(buf, (int)n, n + 16);
	sink = buf[n / 2];
	return saves_registers((long)n, buf[0], buf[n]);
}

/* A 64-byte-aligned local makes gcc realign the stack (CFA via rbp, or an expression). */
NOINLINE long realigned(long a) {
	char big[256] __attribute__((aligned(64)));
	memset(big, (int)a, sizeof big);
	sink = big[a & 255];
	return leaf(big[7]) + dynamic_frame((size_t)(a & 63));
}

/* Allocates through the PLT (malloc, free) with a large frame. */
NOINLINE long allocates(long n) {
	char local[4096];
	char *p = malloc((size_t)n + 1);
	if (!p)
		abort(); /* noreturn */
	memset(local, 1, sizeof local);
	memset(p, 2, (size_t)n + 1);
	long r = p[n / 2] + local[n & 4095] + realigned(n);
	free(p);
	return r;
}

NOINLINE long recurse(long depth) {
	if (depth <= 0)
		return allocates(100);
	long r = recurse(depth - 1);
	sink = r;
	return r + depth;
}

/* Ends in a tail call. */
NOINLINE long tail(long a) { return recurse(a + (long)sink); }

int main(int argc, char **argv) {
	(void)argv;
	long r = tail(argc + 3);
	printf("%ld\n", r);
	return 0;
}
