// A C++ function template in a namespace, for the symbolizer's demangling
// (src/stacks/symbolize.rs): `make<int>` must come back as `shapes::make<int>(...)`.
namespace shapes {
template <class T> __attribute__((noinline)) T *make(int n)
{
	return new T[n];
}
} // namespace shapes

int main(int argc, char **)
{
	int *p = shapes::make<int>(argc);
	delete[] p;
	return 0;
}
