/*
 * Walks at an allocator call's return (tests/sampled.rs): C++ new and new[] of several sizes,
 * from two call paths, through libstdc++'s operator new (a label: its malloc reports the block,
 * and a walk left to the return is made at that malloc's return, inside operator new), with
 * plain mallocs between. Deterministic and single-threaded, so the n-th allocation of two
 * recordings is the same call.
 */
#include <cstdlib>

#include "stacks.h"

struct Node {
	char bytes[200];
};

FRAME static Node *one(void)
{
	Node *n = new Node;

	stacks_sink++;
	return n;
}

FRAME static char *many(int i)
{
	char *p = new char[100 + (i % 7) * 900];

	stacks_sink++;
	return p;
}

FRAME static void *plain(int i)
{
	void *p = opaque(malloc(50 + i % 300));

	stacks_sink++;
	return p;
}

int main(void)
{
	for (int i = 0; i < 20000; i++) {
		delete one();
		delete[] many(i);
		free(plain(i));
	}
	return 0;
}
