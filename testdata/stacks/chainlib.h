#ifndef MEMTRACK_CHAINLIB_H
#define MEMTRACK_CHAINLIB_H

#include "stacks.h"

typedef void *(*callback_fn)(size_t n);

/* lib_b calls lib_c, which calls `back(n + 2)` (two frames in the library). */
void *lib_b(callback_fn back, size_t n);
void *lib_c(callback_fn back, size_t n);

#endif
