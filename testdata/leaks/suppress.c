// Leaks for `--suppress` (tests/leaks.rs): three definitely lost blocks, each from a function
// of its own so that a rule can name it: 3003 bytes in known_leak_in_parser, 4004 bytes in
// other_leak_of_cache, 2002 bytes in leaks_lib_lose of libleaks_suppress.so; and one block of
// 5005 bytes held by a global (still reachable, never suppressed). Lost: 3 blocks, 9009 bytes.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void leaks_lib_lose(void);

static void *volatile sink;
static void *volatile kept;

// The block's only pointer is overwritten; the function's locals die with its frame.
__attribute__((noinline)) void known_leak_in_parser(void) {
    sink = malloc(3003);
    memset((void *)sink, 2, 3003);
    sink = NULL;
}

__attribute__((noinline)) void other_leak_of_cache(void) {
    sink = malloc(4004);
    memset((void *)sink, 3, 4004);
    sink = NULL;
}

int main(void) {
    known_leak_in_parser();
    other_leak_of_cache();
    leaks_lib_lose();
    kept = malloc(5005);
    printf("suppress: done\n");
    return 0;
}
