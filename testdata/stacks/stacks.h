/*
 * Shared by the call-stack fixtures (tests/stacks.rs). Every function of a chain is a frame of
 * its own in both gdb's backtrace and the recorder's walk: never inlined, never cloned into a
 * `.constprop` copy, never merged with a twin, and never ending in a tail call (each does work
 * after its call, so the call is not its last instruction).
 */
#ifndef MEMTRACK_STACKS_H
#define MEMTRACK_STACKS_H

#include "../fixture.h"

#define FRAME __attribute__((noinline, noclone, used))

/* Written after each call, so the call is never a tail call (one per file). */
static volatile int stacks_sink;

#endif
