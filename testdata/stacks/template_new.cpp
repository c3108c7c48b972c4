/*
 * C++ operator new called inside a template (tests/stacks.rs), built -O2 -g
 * -fomit-frame-pointer:
 *
 *   main -> build<Blob<7781>> -> Factory<Blob<7781>>::make -> operator new(7781)
 *
 * One new of 7781 bytes, deleted.
 */
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <new>

static volatile int stacks_sink;

template <std::size_t N> struct Blob {
	char bytes[N];
};

template <typename T> struct Factory {
	__attribute__((noinline, noclone)) static T *make()
	{
		T *p = new T;

		stacks_sink++;
		return p;
	}
};

template <typename T> __attribute__((noinline, noclone)) T *build()
{
	T *p = Factory<T>::make();

	stacks_sink++;
	return p;
}

int main()
{
	static_assert(sizeof(Blob<7781>) == 7781, "the fingerprint size");
	Blob<7781> *b = build<Blob<7781>>();

	stacks_sink++;
	delete b;
	return 0;
}
