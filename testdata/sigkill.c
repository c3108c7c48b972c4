/* Allocates 14000 bytes, then kills itself with SIGKILL: the recorder must exit 137 and leave a
 * readable file. */
#include <signal.h>
#include "fixture.h"

int main(void)
{
	CHECK(opaque(malloc(14000)));
	raise(SIGKILL);
	return 0;
}
