#!/usr/bin/env bash
# The kernel matrix (issue 29): boots Debian's own kernels under qemu with this machine's root
# file system shared read-only, and in each runs `memtrack doctor`, one recording of
# testdata/example.c (its exact counts compared with the host's) and a measured subset of the
# integration tests, built once here. Prints one table, kernel by kernel, and exits non-zero when
# a kernel misses its expectation: 5.10 must be refused up front with the reason (a one-line
# error naming the Linux version needed), the others must record exactly what the host records.
#
#   scripts/kernels.sh                 every kernel (5.10 6.1 6.12 sid), the full test subset
#   scripts/kernels.sh --quick         one test per kernel instead of the subset
#   KERNELS="6.1 6.12" scripts/kernels.sh
#   KERNELS_LOCK=/tmp/memtrack-heavy.lock scripts/kernels.sh   each boot under the shared lock
#   KERNELS_JOBS=1 scripts/kernels.sh   one guest at a time (default 2, one per core)
#   MEMTRACK_TREE=DIR scripts/kernels.sh   build memtrack and its tests from another checkout
#
# Kernels are fetched through a private apt configuration (the machine's sources are only read,
# for the mirror) and cached under target/kernels/: a second run downloads nothing. Docs:
# docs/kernels.md.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
KERNELS_DIR="$repo/target/kernels"
export KERNELS_DIR
. scripts/kernels/fetch.sh
. scripts/kernels/boot.sh

quick=0
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "kernels: unknown argument $arg (try --help)" >&2
      exit 2
      ;;
  esac
done

# Each kernel: the Debian suite it comes from, and what memtrack must do on it.
declare -A suite=([5.10]=bullseye-security [6.1]=bookworm [6.12]=trixie [sid]=sid)
declare -A expect=([5.10]=refused [6.1]=exact [6.12]=exact [sid]=exact)
read -r -a kernels <<<"${KERNELS:-5.10 6.1 6.12 sid}"
for k in "${kernels[@]}"; do
  [ -n "${suite[$k]:-}" ] || {
    echo "kernels: unknown kernel $k in KERNELS (known: ${!suite[*]})" >&2
    exit 2
  }
done
arch=$(dpkg --print-architecture)

# The tests run in each guest: "BINARY TEST..." per line, exact names. Chosen by measurement
# under TCG (docs/kernels.md): record exactness, rss, stacks and bench scoping, within about 15
# minutes for the four kernels on 2 cores. Left out: endings' daemon test bounds the recorder's
# end in wall-clock seconds that emulation exceeds (7.7 s under TCG), and the bystanders test,
# during which one guest ended without a word (not explained).
if ((quick)); then
  tests_wanted="record malloc_and_free_are_recorded_exactly"
else
  tests_wanted="record malloc_and_free_are_recorded_exactly calloc_realloc_reallocarray fork_tree_with_exec four_threads_allocating command_not_found_exits_127 sizes_stay_with_their_process_on_a_shared_cpu core_relocations_equal_the_kernels_whole_btf
rss anon_64_mib fork_child_touches_more
stacks walks_from_one_place_tell_their_callers_apart
sampled sampled_sites_estimate_the_exact_ones walks_at_the_return_are_the_entrys_walks
control each_benchmark_counts_exactly_its_pid_tree_inside_its_window
resident the_resident_view_names_the_code_that_made_each_page_resident an_unmapped_block_leaves_the_resident_view_and_stays_faulted a_forked_childs_writes_leave_what_it_inherited
rmap rmap_fork_inherited_unmap_contract rmap_resident_equals_rss_stat rmap_mapped_file_appears_under_its_path"
fi
tests_wanted=${KERNEL_TESTS:-$tests_wanted}

# --- Tools: qemu, busybox (virtme-ng's initramfs), kmod (depmod), udev (the guest's
# virtio-serial port names; without it --exec has no I/O ports).
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v busybox >/dev/null || need+=(busybox-static)
command -v depmod >/dev/null || need+=(kmod)
[ -x /lib/systemd/systemd-udevd ] || need+=(udev)
if ((${#need[@]})); then
  echo "kernels: installing ${need[*]}" >&2
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    "${need[@]}" >/dev/null
fi
kernels_vng >/dev/null

# --- Build memtrack, the example and the test binaries once, on the host.
tree=$(cd "${MEMTRACK_TREE:-$repo}" && pwd)
echo "kernels: building memtrack and the test binaries in $tree" >&2
(cd "$tree" && cargo build --locked -q)
memtrack="$tree/target/debug/memtrack"
declare -A test_bin=()
tests_args=()
while read -r name _; do [ -n "$name" ] && tests_args+=(--test "$name"); done <<<"$tests_wanted"
while IFS=' ' read -r name exe; do test_bin[$name]=$exe; done < <(
  cd "$tree" && cargo test --locked -q --no-run --message-format=json "${tests_args[@]}" |
    python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "test" in m["target"]["kind"]:
        print(m["target"]["name"], m["executable"])'
)
plan_tests=""
while read -r name names; do
  [ -n "$name" ] || continue
  [ -n "${test_bin[$name]:-}" ] || {
    echo "kernels: cargo built no test binary named $name" >&2
    exit 1
  }
  plan_tests+="$name ${test_bin[$name]} $names"$'\n'
done <<<"$tests_wanted"
mkdir -p "$KERNELS_DIR/bin"
example="$KERNELS_DIR/bin/example"
# The tests' own flags (tests/common/mod.rs, fixture()).
cc -O2 -g -Wall -Werror -pthread -I testdata -o "$example" testdata/example.c

# The exact counts of one JSON report: allocations, frees, bytes allocated, leaked blocks and
# bytes, lost events (a field missing prints as "?").
counts() {
  python3 -c '
import json, sys
try:
    d = json.load(open(sys.argv[1]))
    h = d["totals"]["heap"]
    print("%d/%d/%d/%d/%d/%d" % (h["allocs"], h["frees"], h["bytes_allocated"],
          h["leaked"]["blocks"], h["leaked"]["bytes"], d["lost_events"]["total"]))
except Exception:
    print("?")' "$1"
}

# --- The host's counts, the reference every kernel must equal.
results="$KERNELS_DIR/results"
# KERNELS_REUSE=1 reads the guests' files of the last run again instead of booting (to work on
# this script's verdicts).
[ -n "${KERNELS_REUSE:-}" ] || rm -rf "$results"
mkdir -p "$results/host"
lock=()
[ -z "${KERNELS_LOCK:-}" ] || lock=(flock "$KERNELS_LOCK")
# The example's stdout is a pipe here as in the guest (guest.sh says why).
(cd /tmp && "${lock[@]}" "$memtrack" record -q -o "$results/host/example.mt" -- "$example" | cat) \
  >"$results/host/record.txt" 2>&1 || true
"$memtrack" report --format json "$results/host/example.mt" >"$results/host/example.json" 2>/dev/null || true
host_counts=$(counts "$results/host/example.json")
[ "$host_counts" != "?" ] || {
  echo "kernels: the host itself cannot record the example: $(tail -n 1 "$results/host/record.txt")" >&2
  exit 1
}
echo "kernels: host $(uname -r): allocs/frees/bytes/leaked blocks/leaked bytes/lost = $host_counts" >&2

# --- Each kernel: fetched one after another (apt), then booted KERNELS_JOBS at a time.
# Each guest has one vCPU (boot.sh says why), but qemu serves the 9p root file system from a
# second busy thread, so one guest keeps about 1.6 of a 2-core machine's cores busy. Two at a
# time the four kernels took 18.5 minutes instead of 23, each guest 1.4-2.2 times as long
# (docs/kernels.md); the step timeout (450 s) leaves the slowest step, 179 s, room for a loaded
# machine. Under KERNELS_LOCK every boot still waits its turn.
declare -A kdir=() boot_pid=()
for k in "${kernels[@]}"; do
  kdir[$k]=$(kernel_fetch "$arch" "${suite[$k]}")
done
jobs_max=${KERNELS_JOBS:-2}
[[ "$jobs_max" =~ ^[1-9][0-9]*$ ]] || {
  echo "kernels: KERNELS_JOBS must be a number of guests at a time, 1 or more (got $jobs_max)" >&2
  exit 2
}
# The KVM probe, once before the guests boot side by side (each would otherwise make its own).
[ -n "${KERNELS_REUSE:-}" ] || kernels_accel "$arch" "${kdir[${kernels[0]}]}" >/dev/null

# boot_one K: boots kernel K with the guest's plan; writes its exit status and its time to the
# kernel's result directory (it runs in a subshell of its own).
boot_one() {
  local k=$1 out="$results/$1" t0=$SECONDS rc=0
  KERNELS_LOCK_WAIT=0
  # target/tmp (the tests' CARGO_TARGET_TMPDIR) is writable in the guest, its changes dropped.
  kernel_boot "$arch" "${kdir[$k]}" "bash $repo/scripts/kernels/guest.sh $out" \
    --rwdir "$out" --overlay-rwdir "$tree/target/tmp" >"$out/console.txt" || rc=$?
  echo "$rc" >"$out/boot.rc"
  # The kernel's time: booting and the guest's work, without the wait for the shared lock.
  echo $((SECONDS - t0 - KERNELS_LOCK_WAIT)) >"$out/total.secs"
}

# The guests boot in the background, each under timeout(1) in a process group of its own: a
# signal to this script alone (kill PID, or ^C, which reaches only this group) would leave them
# running. On TERM, INT or HUP, and on a failing exit, the guests still booting are stopped:
# each boot_one subshell and every process under it (timeout, vng, qemu, flock) gets SIGTERM.
# The tree is listed before any of it is signalled, as a dead subshell's children go to init.
descendants() {
  local child
  for child in $(pgrep -P "$1"); do
    echo "$child"
    descendants "$child"
  done
}
stop_guests() {
  local job pids=()
  for job in $(jobs -rp); do
    pids+=("$job")
    mapfile -t -O "${#pids[@]}" pids < <(descendants "$job")
  done
  ((${#pids[@]})) || return 0
  echo "kernels: stopping the guests still booting" >&2
  kill -TERM "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
}
on_signal() {
  trap - EXIT
  stop_guests
  exit "$1"
}
trap 'on_signal 143' TERM
trap 'on_signal 130' INT
trap 'on_signal 129' HUP
trap 'rc=$?; ((rc == 0)) || stop_guests; exit "$rc"' EXIT

mkdir -p "$tree/target/tmp"
running=0
for k in "${kernels[@]}"; do
  out="$results/$k"
  mkdir -p "$out"
  cat >"$out/plan.sh" <<PLAN
MEMTRACK=$memtrack
EXAMPLE=$example
TEST_DIR=$tree
STEP_TIMEOUT=$((quick ? 120 : 450))
TESTS='$([ "${expect[$k]}" = refused ] || echo "$plan_tests")'
PLAN
  if [ -n "${KERNELS_REUSE:-}" ]; then
    echo "kernels: $k: reading the last run's results" >&2
    continue
  fi
  if ((running >= jobs_max)); then
    wait -n || true
    running=$((running - 1))
  fi
  echo "kernels: booting $k ($(cat "${kdir[$k]}/release"))" >&2
  boot_one "$k" &
  boot_pid[$k]=$!
  running=$((running + 1))
done

declare -A row_doctor row_counts row_tests row_secs row_boot row_verdict row_why row_libbpf
failed=0
for k in "${kernels[@]}"; do
  out="$results/$k"
  [ -z "${boot_pid[$k]:-}" ] || wait "${boot_pid[$k]}" || true
  boot_rc=$(cat "$out/boot.rc" 2>/dev/null || echo "-")
  grep '^guest ' "$out/console.txt" >&2 || true
  row_secs[$k]=$(cat "$out/total.secs" 2>/dev/null || echo "-")
  row_boot[$k]=$(cut -d. -f1 "$out/boot.secs" 2>/dev/null || echo "-")

  # What the guest found.
  rc() { cat "$out/$1.rc" 2>/dev/null || echo "-"; }
  case "$(rc doctor)" in
    0) row_doctor[$k]="ok" ;;
    -) row_doctor[$k]="did not run" ;;
    *) row_doctor[$k]="refuses (exit $(rc doctor))" ;;
  esac
  got=$( [ -f "$out/example.json" ] && counts "$out/example.json" || echo "-")
  row_counts[$k]=$got
  passed=0 failed_tests=0 tests_cell=""
  while read -r name _; do
    [ -n "$name" ] || continue
    p=$(grep -ho '[0-9]* passed' "$out/test-$name.txt" 2>/dev/null | tail -n 1 | cut -d' ' -f1 || true)
    f=$(grep -ho '[0-9]* failed' "$out/test-$name.txt" 2>/dev/null | tail -n 1 | cut -d' ' -f1 || true)
    case "$(rc "test-$name")" in
      -) [ "${expect[$k]}" = refused ] || tests_cell+=" $name:not run" ;;
      124) tests_cell+=" $name:timeout" ;;
      *) tests_cell+=" $name:${p:-0}/$(( ${p:-0} + ${f:-0} ))" ;;
    esac
    passed=$((passed + ${p:-0}))
    failed_tests=$((failed_tests + ${f:-0}))
  done <<<"$tests_wanted"
  row_tests[$k]="$passed passed, $failed_tests failed:${tests_cell:- none run (a refused kernel)}"
  record_err=$(grep -m 1 '^memtrack: ' "$out/record.txt" 2>/dev/null ||
    grep -m 1 . "$out/record.txt" 2>/dev/null || echo "record did not run (boot exit $boot_rc)")
  # libbpf's reason, from the -v run the guest makes after a failed recording: the program that
  # failed and the verifier's or CO-RE's complaint.
  record_why=$(awk '
    /libbpf: prog .*: BPF program load failed/ || /failed to resolve CO-RE/ { sub(/^.*libbpf: /, ""); print }
    /-- BEGIN PROG LOAD LOG --/ { inlog = 1; last = ""; next }
    /-- END PROG LOAD LOG --/ { if (last != "") print "verifier: " last; inlog = 0; next }
    inlog && NF && !/processed [0-9]+ insns/ && !/verification time/ { last = $0; sub(/^[[:space:]]+/, "", last) }
  ' "$out/record-v.txt" 2>/dev/null | head -n 4 || true)

  # The verdict against the expectation.
  verdict=ok why=""
  case "${expect[$k]}" in
    exact)
      if [ "$got" != "$host_counts" ]; then
        verdict=FAIL why="record: ${record_err}"
        [ "$got" = "-" ] || why="counts $got differ from the host's $host_counts"
      elif [ "$failed_tests" -ne 0 ] || [[ "$tests_cell" == *"not run"* || "$tests_cell" == *timeout* ]]; then
        verdict=FAIL why="tests:$tests_cell"
      elif [ "$(rc doctor)" != 0 ]; then
        verdict=FAIL why="doctor exited $(rc doctor)"
      fi
      ;;
    refused)
      # A refusal up front: record fails without writing a recording, with a one-line reason
      # that names the Linux version it needs (not a verifier error passed off as a privilege
      # problem), and doctor says record cannot work (non-zero exit).
      r=$(rc record)
      lines=$(grep -c . "$out/record.txt" 2>/dev/null || echo 0)
      if [ "$r" = 0 ] || [ "$r" = - ] || [ -s "$out/example.mt" ]; then
        verdict=FAIL why="not refused: record exited $r"
      elif [ "$lines" -ne 1 ] || ! grep -qE 'Linux [0-9]+\.[0-9]+' "$out/record.txt"; then
        verdict=FAIL why="refused, but not with one line naming the Linux version needed: $record_err"
      elif [ "$(rc doctor)" = 0 ]; then
        verdict=FAIL why="record refuses, but doctor says record can work here"
      else
        why=$record_err
      fi
      ;;
  esac
  row_verdict[$k]=$verdict
  row_libbpf[$k]=$record_why
  row_why[$k]=$why
  [ "$verdict" = ok ] || failed=1
  echo "kernels: $k: $verdict after ${row_secs[$k]} s${why:+ ($why)}" >&2
done

# --- The table.
echo
echo "Kernel matrix ($(date -u +%Y-%m-%dT%H:%MZ), memtrack from $tree @ $(git -C "$tree" rev-parse --short HEAD), accel $(kernels_accel "$arch" "${kdir[${kernels[0]}]}"))"
echo "example counts = allocations/frees/bytes allocated/leaked blocks/leaked bytes/lost events; host $(uname -r): $host_counts"
printf '%-5s %-24s %-8s %-22s %-32s %-6s %-6s %s\n' kernel release expect doctor "example counts" "boot s" "total s" verdict
for k in "${kernels[@]}"; do
  printf '%-5s %-24s %-8s %-22s %-32s %-6s %-6s %s\n' "$k" "$(cat "$results/$k/uname" 2>/dev/null || echo "?")" \
    "${expect[$k]}" "${row_doctor[$k]}" "${row_counts[$k]}" "${row_boot[$k]}" "${row_secs[$k]}" "${row_verdict[$k]}"
  echo "      tests: ${row_tests[$k]}"
  [ -z "${row_why[$k]}" ] || echo "      ${row_why[$k]}"
  [ -z "${row_libbpf[$k]}" ] || sed 's/^/      libbpf: /' <<<"${row_libbpf[$k]}"
done
echo "(logs: $results/KERNEL/{console,doctor,record,test-*}.txt)"
exit "$failed"
