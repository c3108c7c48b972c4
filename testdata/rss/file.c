/* Write a 64 MiB file at argv[1] (on disk, not tmpfs), map it and read every page. */
#include "status.h"

int main(int argc, char **argv)
{
	CHECK(argc > 1);
	map_written_file(argv[1], 64 * MiB, 7);
	checkpoint("file");
	unlink(argv[1]);
	return 0;
}
