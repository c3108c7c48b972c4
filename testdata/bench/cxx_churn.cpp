// COUNT (argv[1]) C++ allocation pairs of 64 bytes: `new Block` + `delete` (a sized delete,
// _ZdlPvm, as g++ emits it since C++14), or with argv[2] "array", `new char[64]` + `delete[]`.
// The bench's C++ churn workloads (issue 12): libstdc++'s operators wrap glibc's malloc.
#include <cstdlib>
#include <cstring>

namespace {
struct Block {
	char bytes[64];
};

template <class T> T *opaque(T *p)
{
	asm volatile("" : "+r"(p));
	return p;
}
} // namespace

int main(int argc, char **argv)
{
	long count = argc > 1 ? atol(argv[1]) : 100000;
	bool array = argc > 2 && !strcmp(argv[2], "array");

	if (array) {
		for (long i = 0; i < count; i++)
			delete[] opaque(new char[64]);
	} else {
		for (long i = 0; i < count; i++)
			delete opaque(new Block);
	}
	return 0;
}
