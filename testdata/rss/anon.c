/* Touch MIB (argv[1], default 64) MiB of anonymous memory. */
#include "status.h"

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 64;

	touch_anon(mib * MiB);
	checkpoint("anon");
	return 0;
}
