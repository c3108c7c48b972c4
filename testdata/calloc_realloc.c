/* calloc, realloc and reallocarray in every form the recorder distinguishes. */
#include <stdint.h>
#include "fixture.h"

int main(void)
{
	/* 5 x calloc(7, 1009) = 7063 bytes each, freed */
	for (int i = 0; i < 5; i++)
		free(opaque(calloc(7, 1009)));
	/* calloc overflow: fails */
	CHECK(!calloc(opaque_size(SIZE_MAX / 2), 4));

	/* realloc(NULL, n) is an allocation */
	char *p = realloc(opaque(NULL), 20011);
	CHECK(p);
	/* grow: a resize from 20011 to 30011 bytes */
	p = realloc(p, 30011);
	CHECK(p);
	/* a failing realloc leaves p alone */
	CHECK(!realloc(p, opaque_size(SIZE_MAX - 8192)));
	/* realloc(p, 0) frees p */
	CHECK(!realloc(p, 0));

	/* reallocarray(NULL, 13, 1013) = 13169 bytes; then to 17 x 1013 = 17221; overflow fails */
	char *q = reallocarray(opaque(NULL), 13, 1013);
	CHECK(q);
	q = reallocarray(q, 17, 1013);
	CHECK(q);
	CHECK(!reallocarray(q, opaque_size(SIZE_MAX / 2), 3));
	free(q);
	return 0;
}
