// Known leaks for tests/leaks.rs, each block a fingerprint size so it can be told from the C
// library's own: definitely lost (pointer overwritten, a cycle, one made by a thread, one in a
// forked child) and still reachable (a global, an interior pointer, a thread's stack, a
// register of a spinning thread, a global of the child). Exits normally, with exit(0), while
// two threads still run.
//
// Expected, parent: lost 4 blocks, 1001 + 1005 + 1006 + 1010 = 4022 bytes; reachable among
// others 1002, 1003, 1004, 1007. Child: lost 1 block, 1008 bytes; reachable 1009.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct node {
    struct node *next;
    char pad[992];
};

static void *volatile held_by_global;
static void *volatile overwritten;
static char *volatile interior;
static void *volatile child_global;
static int ready[2];
static int never[2];

// Keeps its block only in a local on its stack, then blocks forever.
static void *on_stack(void *arg) {
    (void)arg;
    void *volatile mine = malloc(1003);
    memset((void *)mine, 0, 1003);
    char c = 1;
    if (write(ready[1], &c, 1) != 1)
        abort();
    if (read(never[0], &c, 1) < 0) // never returns: nothing is written to never[1]
        abort();
    return (void *)mine;
}

// Keeps its block only in r12 and spins.
static void *in_register(void *arg) {
    (void)arg;
    register void *mine asm("r12") = malloc(1004);
    char c = 1;
    if (write(ready[1], &c, 1) != 1)
        abort();
    for (;;)
        asm volatile("" : "+r"(mine));
    return NULL;
}

// Loses its block and ends.
static void *loses(void *arg) {
    (void)arg;
    overwritten = malloc(1010);
    overwritten = NULL;
    return NULL;
}

// Two blocks that point to each other and to nothing else. Not inlined, so that its locals
// die with its frame (below main's stack pointer, which no scan reads).
__attribute__((noinline)) static void cycle(void) {
    struct node *volatile a = malloc(1005);
    struct node *volatile b = malloc(1006);
    a->next = b;
    b->next = a;
}

int main(void) {
    if (pipe(ready) || pipe(never))
        return 2;
    overwritten = malloc(1001);
    overwritten = NULL;
    held_by_global = malloc(1002);
    cycle();
    interior = (char *)malloc(1007) + 100;

    pid_t child = fork();
    if (child == 0) {
        overwritten = malloc(1008);
        overwritten = NULL;
        child_global = malloc(1009);
        exit(0);
    }
    int status;
    waitpid(child, &status, 0);

    pthread_t t;
    pthread_create(&t, NULL, loses, NULL);
    pthread_join(t, NULL);
    pthread_create(&t, NULL, on_stack, NULL);
    pthread_create(&t, NULL, in_register, NULL);
    char c[2];
    for (size_t got = 0; got < 2;) {
        ssize_t n = read(ready[0], c + got, 2 - got);
        if (n <= 0)
            return 2;
        got += (size_t)n;
    }
    printf("leaks: done\n");
    exit(0);
}
