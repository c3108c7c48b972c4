// The shared library of suppress.c: loses one block of 2002 bytes in leaks_lib_lose, so that a
// suppression can name its module (libleaks_suppress.so).
#include <stdlib.h>
#include <string.h>

void *volatile leaks_lib_sink;

__attribute__((noinline)) void leaks_lib_lose(void) {
    leaks_lib_sink = malloc(2002);
    memset((void *)leaks_lib_sink, 1, 2002);
    leaks_lib_sink = NULL;
}
