/* Write a 16 MiB file at argv[1], map it shared and read every page, then exit with it still
 * mapped: its pages are resident under the file's name at the process's rmap peak. */
#include "../rss/status.h"

int main(int argc, char **argv)
{
	CHECK(argc > 1);
	map_written_file(argv[1], 16 * MiB, 5);
	checkpoint("file");
	unlink(argv[1]);
	return 0;
}
