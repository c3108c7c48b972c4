/* Touch 64 MiB, MADV_DONTNEED half of it, touch that half again: the peak is 64 MiB, not 96. */
#include "status.h"

int main(void)
{
	size_t size = 64 * MiB;
	char *p = touch_anon(size);

	CHECK(madvise(p, size / 2, MADV_DONTNEED) == 0);
	for (size_t i = 0; i < size / 2; i += 4096)
		p[i] = 2;
	checkpoint("madvise");
	return 0;
}
