#!/usr/bin/env bash
# Runs inside a kernel booted by scripts/kernels.sh (virtme-ng, the host's root read-only, root
# user): `memtrack doctor`, one recording of testdata/example.c with its JSON report, then the
# chosen integration tests, built on the host. Everything it finds goes into files of OUT (a
# directory shared read-write with the host), which the host reads: the console only carries
# progress lines, since virtio-serial output can arrive cut or late.
#
# Usage: guest.sh OUT, with OUT/plan.sh defining MEMTRACK, EXAMPLE, STEP_TIMEOUT, TEST_DIR and
# TESTS (lines "NAME BINARY TEST..." of exact test names).
set -uo pipefail
out=$1
# shellcheck source=/dev/null
. "$out/plan.sh"
uname -r >"$out/uname"
# Seconds from the kernel's start to here: the boot's share of the time.
cut -d' ' -f1 /proc/uptime >"$out/boot.secs"

# step NAME SECONDS CMD...: run CMD with its stdout and stderr into OUT/NAME.txt, its exit
# status into OUT/NAME.rc (124 when it ran out of time), its duration into OUT/NAME.secs.
step() {
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS rc
  timeout -k 5 "$limit" "$@" >"$out/$name.txt" 2>&1
  rc=$?
  echo "$rc" >"$out/$name.rc"
  echo $((SECONDS - t0)) >"$out/$name.secs"
  echo "guest $(uname -r): $name exited $rc after $((SECONDS - t0)) s"
  return 0
}

cd /tmp || exit 1
step doctor 120 "$MEMTRACK" doctor
# The example's stdout is a pipe, as on the host: glibc sizes stdout's buffer, which the example
# never frees, by the file's st_blksize (4 KiB for a pipe; 8 KiB for a file on the 9p share).
step record "$STEP_TIMEOUT" bash -o pipefail -c '"$@" | cat' record \
  "$MEMTRACK" record -o "$out/example.mt" -- "$EXAMPLE"
if [ -s "$out/example.mt" ]; then
  timeout 120 "$MEMTRACK" report --format json "$out/example.mt" >"$out/example.json" 2>"$out/report.txt"
  echo $? >"$out/report.rc"
elif [ "$(cat "$out/record.rc")" != 0 ]; then
  # Once more with -vv: libbpf's log names the program and the verifier's or CO-RE's reason.
  step record-v "$STEP_TIMEOUT" "$MEMTRACK" record -v -v -o /tmp/example-v.mt -- "$EXAMPLE"
fi

# The test binaries run where cargo runs them (the package root), as the tests expect.
cd "$TEST_DIR" || exit 1
while read -r name binary tests; do
  [ -n "$name" ] || continue
  # shellcheck disable=SC2086 # TESTS holds several names
  # --report-time (libtest's, unstable: RUSTC_BOOTSTRAP) prints each test's duration, the
  # measure the subset in scripts/kernels.sh is chosen by.
  step "test-$name" "$STEP_TIMEOUT" env RUSTC_BOOTSTRAP=1 "$binary" --exact --test-threads=1 \
    -Z unstable-options --report-time $tests
done <<<"$TESTS"
echo "guest $(uname -r): done"
