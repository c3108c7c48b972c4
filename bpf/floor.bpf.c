// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * The cost floor: programs that do nothing, attached by `memtrack record --probe-floor` at
 * exactly the sites and with exactly the links the allocator programs of alloc.bpf.c use (same
 * names, same sections). What a workload pays under them is the kernel's own price for the
 * probes; scripts/bench.sh compares memtrack against it.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

SEC("uprobe.multi")
int alloc_enter(void *ctx)
{
	return 0;
}

SEC("uretprobe.multi")
int alloc_exit(void *ctx)
{
	return 0;
}

SEC("uprobe.multi")
int free_enter(void *ctx)
{
	return 0;
}
