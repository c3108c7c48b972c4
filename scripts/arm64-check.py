#!/usr/bin/env python3
"""Checks the serial console of the arm64 guest (scripts/arm64.sh) against the exact counts of
its fixtures. Prints one line per check and exits 1 when any fails.

Usage: arm64-check.py CONSOLE [GDB]

GDB is gdb's backtrace of testdata/stacks/chain.c (scripts/arm64.sh, gdb_backtrace), which the
guest's recording of the same binary must equal."""
import json
import re
import sys

text = open(sys.argv[1], errors="replace").read().replace("\r", "")
gdb_text = open(sys.argv[2], errors="replace").read() if len(sys.argv) > 2 else None
steps = {}
for m in re.finditer(r"^@@@ begin (\S+)\n(.*?)^@@@ end \1 rc=(\d+)$", text, re.S | re.M):
    steps[m.group(1)] = (m.group(2), int(m.group(3)))
failed = 0


def check(name, ok, detail):
    global failed
    print(f"arm64: {'ok  ' if ok else 'FAIL'} {name}: {detail}")
    failed += not ok


def output(name):
    out, rc = steps.get(name, ("", None))
    check(name, rc == 0, f"exit {rc}" + ("" if rc == 0 else ": " + out.strip()[-400:]))
    return out


steps_report = {}


def report(name):
    out = output(name)
    try:
        steps_report[name] = json.loads(out[out.index("{") :])
        return steps_report[name]
    except ValueError:
        check(name, False, "no JSON report")
        return None


def walk_ends(name, d):
    """Every walk of the recording `d` (a report with --stacks) ended complete."""
    s = d.get("stacks") or {}
    got = (s.get("walks"), s.get("truncated"), s.get("unknown"), s.get("unsupported"))
    check(name + " walks", bool(got[0]) and got[1:] == (0, 0, 0),
          "walks/truncated/unknown/unsupported = %s/%s/%s/%s" % got)


if "@@@ done" not in text:
    check("guest", False, "did not finish; last console lines:\n" + "\n".join(text.splitlines()[-15:]))
print("arm64: kernel " + steps.get("uname", ("?", 0))[0].strip())
doctor = output("doctor")
# Which allocator entries the kernel single-steps here (the arm64 placement's verdict).
for line in doctor.splitlines():
    if line.startswith("probe sites"):
        print("arm64: doctor: " + " ".join(line.split()))

# testdata/example.c: 10,000 words of 48 bytes + their calloc'ed table and a 4096-byte stdout
# buffer (a pipe) and the leak in the parent; 50,000 of 96 + table in the worker; realloc from
# 1 KiB to 1 MiB (11 calls); the stdout buffer and the leak stay (the same numbers as on x86).
# Linked statically, glibc's own startup (_dl_non_dynamic_init: the library search paths and
# hardware-capability strings) adds 5 blocks it never frees, as on x86_64 (60020 allocs there
# too); their bytes differ by architecture, so the static run's exact figures are its allocs,
# frees, the bytes freed (the dynamic run's) and the leaked blocks.
for ex, startup in (("example", 0), ("example-static", 5)):
    output("record-" + ex)
    d = report("json-" + ex)
    if d:
        h = d["totals"]["heap"]
        got = (h["allocs"], h["frees"], h["bytes_freed"], h["leaked"]["blocks"],
               d["lost_events"]["total"])
        check(ex, got == (60015 + startup, 60013, 7856128, 2 + startup, 0),
              "allocs/frees/bytes freed/leaked blocks/lost = %s/%s/%s/%s/%s" % got)
        if not startup:
            got = (h["bytes_allocated"], h["leaked"]["bytes"])
            check(ex + " bytes", got == (7864320, 8192), "bytes allocated/leaked = %s/%s" % got)
        per = sorted((p["own"]["heap"]["allocs"], p["argv"][0].rsplit("/", 1)[-1])
                     for p in d["processes"])
        check(ex + " processes", per == [(0, "true"), (10014 + startup, ex), (50001, ex)], str(per))

def exact_example_counts(name, d):
    """The dynamic example's exact heap counts, whatever the stacks."""
    h = d["totals"]["heap"]
    got = (h["allocs"], h["frees"], h["bytes_allocated"], d["lost_events"]["total"])
    check(name, got == (60015, 60013, 7864320, 0), "allocs/frees/bytes/lost = %s/%s/%s/%s" % got)


# The example once more with --stacks: the same exact counts, and every walk complete.
output("record-stacks")
d = report("json-stacks")
if d:
    exact_example_counts("example --stacks", d)
    walk_ends("example --stacks", d)
    # What a walk per allocation costs under TCG (only the ratio means anything there; 6.1 has
    # no mm_lock_seq, so every allocation walks and looks each frame's mapping up again).
    base = (steps_report.get("json-example") or {}).get("run", {}).get("duration_ns")
    if base:
        print("arm64: TCG cost: example --stacks ran %.1f s, without %.1f s (x%.1f)"
              % (d["run"]["duration_ns"] / 1e9, base / 1e9, d["run"]["duration_ns"] / base))
# And with a sample of the stacks: the counts stay exact, the sites are estimates.
output("record-sampled")
d = report("json-sampled")
if d:
    exact_example_counts("example --stack-sample", d)
    sampling = d["stacks"].get("sampling") or {}
    check("example --stack-sample sites", sampling.get("allocations") == 60015
          and sampling.get("sampled_allocations", 0) > 0, "sampling = %s" % sampling)
    # The walker was in place before the command's first allocation: no site without frames.
    lost = [s for s in d["stacks"]["sites"]
            if not s["frames"] or s["frames"][0]["function"] == "[no stack]"]
    check("example --stack-sample walked", not lost, "sites without a stack: %s" % lost)
text_stacks = output("report-stacks")
for line in text_stacks.splitlines():
    if "stack" in line.lower() and ("unwind" in line.lower() or "truncated" in line.lower()):
        print("arm64: report --stacks: " + line.strip())

# testdata/fork_tree.c exec'ing malloc_free with "1": the parent's 11000, one 11001, two
# 11002, and malloc_free's table (8), block (10007) and leak (10009).
output("record-fork_tree")
d = report("json-fork_tree")
if d:
    per = sorted((p["own"]["heap"]["allocs"], p["own"]["heap"]["bytes_allocated"])
                 for p in d["processes"])
    check("fork_tree processes", per == [(1, 11000), (1, 11001), (2, 22004), (3, 20024)],
          "(allocs, bytes) per process " + str(per))
    h = d["totals"]["heap"]
    got = (h["frees"], h["leaked"]["blocks"], h["leaked"]["bytes"], d["lost_events"]["total"])
    check("fork_tree", got == (6, 1, 10009, 0), "frees/leaked blocks/leaked bytes/lost = %s/%s/%s/%s" % got)

# testdata/alloc/cxx_new_delete.cpp: 12 operator new variants of 20011..20071 bytes and a
# vector of 20012, each once: the only blocks between 16 and 32 KiB.
output("record-cxx")
d = report("json-cxx")
if d:
    h = d["totals"]["heap"]
    bins = {(b["min_bytes"], b["max_bytes"]): b["count"] for b in h["size_histogram"]}
    check("cxx new/delete", bins.get((16384, 32767)) == 13 and d["lost_events"]["total"] == 0,
          f"blocks of 16-32 KiB: {bins.get((16384, 32767))} (want 13), lost {d['lost_events']['total']}")



# glibc's aliases, as gdb names them: (malloc, __libc_malloc) and (raise, gsignal) have one
# address each in bookworm's and trixie's arm64 libc.so.6.
GLIBC_ALIASES = {"__libc_malloc": "malloc", "gsignal": "raise"}


def gdb_stops(name):
    """Function names of each of gdb's backtraces of fixture `name`, innermost first."""
    if not gdb_text or "==memtrack-end %s==" % name not in gdb_text:
        return None
    block = gdb_text.split("==memtrack-end %s==" % name)[0]
    stops = block.split("==memtrack-stop %s==" % name)[1:]
    return [re.findall(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(\S+)", bt, re.M) for bt in stops]


def stack_equals_gdb(name, size, gdb):
    """The one `size`-byte allocation of fixture `name`, recorded with --stacks, has the frames
    `gdb` names, innermost first; every walk of the recording ended complete."""
    output("record-" + name)
    d = report("json-" + name)
    if not d:
        return
    walk_ends(name, d)
    sites = [s for s in (d.get("stacks") or {}).get("sites", []) if s["allocated_bytes"] == size]
    ours = [f["function"] or "??" for f in sites[0]["frames"]] if len(sites) == 1 else None
    # One function, two names at one address in glibc's symbol table (readelf --dyn-syms): gdb
    # says one, memtrack may say the other; the frame is the same.
    if ours:
        ours = [GLIBC_ALIASES.get(f, f) for f in ours]
    check(name + " stack = gdb", ours is not None and ours == gdb,
          "memtrack %s, gdb %s" % (ours, gdb if gdb is not None else (gdb_text or "")[-600:]))


# testdata/stacks/chain.c: the 7777-byte allocation's frames are gdb's at it (malloc, chain_e,
# chain_d, lib_c, lib_b, chain_a, main, then libc's start code and _start); a function neither
# names (libc's local __libc_start_call_main) is "??" in both.
stops = gdb_stops("chain")
stack_equals_gdb("chain", 7777, stops[-1] if stops else None)

# testdata/stacks/signal.c: the 7853-byte allocation in the SIGUSR1 handler. gdb does not unwind
# through qemu-user's trampoline, so its frames are the handler's at malloc (up to the trampoline
# it may show as "<signal handler called>", for which memtrack records no frame) followed by the
# interrupted code's, from gdb's stop where the signal arrived.
stops = gdb_stops("signal")
if stops and len(stops) == 2:
    handler = stops[1]
    if "<signal" in handler:
        handler = handler[: handler.index("<signal")]
    stops = handler + stops[0]
stack_equals_gdb("signal", 7853, stops)

sys.exit(1 if failed else 0)
