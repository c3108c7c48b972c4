// The C++ program with one leak of its own: lose_widget() loses a 1500-byte Widget
// (its only pointer overwritten). check --max-leaked 0 fails on it and names lose_widget.
#include <cstdio>
#include <string>

struct Widget {
    char data[1500];
};

static Widget *volatile sink;

__attribute__((noinline)) void lose_widget() {
    sink = new Widget();
    sink = nullptr;
}

int main() {
    std::string s(100, 120);
    lose_widget();
    puts(s.c_str());
}
