// `lose_n LOST KEPT`: loses LOST blocks of 1111 bytes (each made by lose_one, its only pointer
// overwritten) and keeps KEPT blocks of 2222 bytes reachable from a global array, then exits
// normally. tests/leaks.rs diffs two runs: the lost figures follow LOST, the reachable KEPT.
#include <stdlib.h>
#include <string.h>

static void *volatile sink;
static void *volatile kept[64];

__attribute__((noinline)) void lose_one(void) {
    sink = malloc(1111);
    memset((void *)sink, 1, 1111);
    sink = NULL;
}

// Overwrites the dead stack below main's frame, where lose_one's and memset's slots (and so
// the last lost pointer) would otherwise stay for the exit-time scan to find.
__attribute__((noinline)) static void scrub(void) {
    volatile char dead[8192];
    for (size_t i = 0; i < sizeof dead; i++)
        dead[i] = 0;
}

int main(int argc, char **argv) {
    int lost = argc > 1 ? atoi(argv[1]) : 0;
    int keep = argc > 2 ? atoi(argv[2]) : 0;
    for (int i = 0; i < lost; i++)
        lose_one();
    for (int i = 0; i < keep && i < 64; i++)
        kept[i] = malloc(2222);
    scrub();
    return 0;
}
