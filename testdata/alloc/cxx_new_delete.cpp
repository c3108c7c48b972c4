/*
 * C++ operator new and delete in every variant, one fingerprint size per allocation, every
 * block released by its own delete variant (tests/allocators.rs):
 *
 *   new 20011 (delete), new 20023 (sized delete), new[] 20021 (delete[]), new[] 20029
 *   (sized delete[]), nothrow new 20033 (nothrow delete), nothrow new[] 20039 (nothrow
 *   delete[]), aligned new 20047 (aligned delete), aligned new 20051 (sized aligned delete),
 *   aligned new[] 20057 (aligned delete[]), aligned new[] 20063 (sized aligned delete[]),
 *   aligned nothrow new 20069 (aligned nothrow delete), aligned nothrow new[] 20071 (aligned
 *   nothrow delete[]); then a nothrow new that fails (returns nullptr, once), a throwing new
 *   that fails and is caught (bad_alloc; skipped with the argument "no-throw"), and a
 *   std::vector<int> of 5003 elements (20012 bytes).
 *
 * Operators are called by name, so the compiler cannot merge or drop the allocations.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <vector>

template <typename T> static T *opaque(T *p)
{
	__asm__ volatile("" : "+r"(p));
	return p;
}

static std::size_t opaque_size(std::size_t n)
{
	__asm__ volatile("" : "+r"(n));
	return n;
}

int main(int argc, char **argv)
{
	const std::align_val_t al{64};
	const std::nothrow_t &nt = std::nothrow;

	::operator delete(opaque(::operator new(20011)));
	::operator delete(opaque(::operator new(20023)), 20023);
	::operator delete[](opaque(::operator new[](20021)));
	::operator delete[](opaque(::operator new[](20029)), 20029);
	::operator delete(opaque(::operator new(20033, nt)), nt);
	::operator delete[](opaque(::operator new[](20039, nt)), nt);
	::operator delete(opaque(::operator new(20047, al)), al);
	::operator delete(opaque(::operator new(20051, al)), 20051, al);
	::operator delete[](opaque(::operator new[](20057, al)), al);
	::operator delete[](opaque(::operator new[](20063, al)), 20063, al);
	::operator delete(opaque(::operator new(20069, al, nt)), al, nt);
	::operator delete[](opaque(::operator new[](20071, al, nt)), al, nt);

	void *p = ::operator new(opaque_size(SIZE_MAX / 2), nt);
	if (p != nullptr)
		return 99;
	if (argc < 2) {
		try {
			p = ::operator new(opaque_size(SIZE_MAX / 4));
			return 98;
		} catch (const std::bad_alloc &) {
		}
	}
	(void)argv;
	{
		std::vector<int> v(opaque_size(5003));
		opaque(v.data());
	}
	std::printf("done\n");
	return 0;
}
