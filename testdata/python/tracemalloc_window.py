"""Live Python blocks of one measuring window, as tracemalloc sees them (tests/python.rs).

Run under `memtrack record --python-objects --control PATH`: it opens the control FIFOs before
tracing starts, so the client allocates nothing of its own in the window but os.readv's iovec
arrays, starts tracemalloc and then memtrack's window, builds N objects it keeps (tuples, ints,
strings, lists, bytes up to 2 KB, so pymalloc, its malloc fallback and list reallocs all count)
and N it drops, stops the window, and prints tracemalloc's count and bytes of live traced blocks
as `tracemalloc BLOCKS BYTES` on stderr, and ends with os._exit: the blocks memtrack reports as
the window's `leaked` (allocated inside it, never freed; frees after `stop` are recorded, so the
interpreter's teardown must not run) are the same blocks.
"""

import os
import sys
import tracemalloc

path = os.environ["MEMTRACK_CONTROL"]
ack = os.open(path + ".ack", os.O_RDWR)
ctl = os.open(path, os.O_WRONLY)
reply = bytearray(256)


def request(line):
    # One write of the request line, then the reply read into a buffer made before tracing:
    # os.read would allocate its result inside the window.
    os.write(ctl, line)
    os.readv(ack, [reply])


n = int(sys.argv[1])
request(b"bench python 0\n")
tracemalloc.start()
request(b"start\n")
keep = [(i, str(i), [i], b"x" * (i % 2000)) for i in range(n)]
drop = [str(i) * 3 for i in range(n)]
del drop
request(b"stop\n")
snapshot = tracemalloc.take_snapshot()
traces = snapshot.traces
print("tracemalloc", len(traces), sum(t.size for t in traces), file=sys.stderr)
sys.stderr.flush()
# No teardown: it would free the kept objects, and memtrack records frees after `stop` too.
os._exit(0)
