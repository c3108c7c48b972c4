#!/usr/bin/env bash
# The overhead benchmark (issue #7): memtrack against no tracing, against the floor (empty BPF
# programs on exactly memtrack's probe sites) and against heaptrack, Valgrind DHAT, a bpftrace
# uprobe script and bcc's memleak, and memtrack's default recording against itself without any
# call stack and with every one (issue 32), on synthetic and real workloads, every tool side by
# side within one run, interleaved round by round, each combination RUNS times. Writes the tables
# to target/bench/results.md and, for a full run, into docs/PERFORMANCE.md between its markers.
#
#   sudo scripts/bench.sh                 # full run (RUNS=5), rewrites the doc's tables
#   sudo QUICK=1 scripts/bench.sh         # smoke run: smaller inputs, RUNS=2, doc untouched
#
# Settings (environment): RUNS, QUICK=1, WORKLOADS="churn mixed ...", TOOLS="untraced ...",
# PARTS=workloads (only the workload table: no bystander or report-speed runs), WRITE_DOC=0|1
# (default: 1 for a full run with every workload and tool, else 0), QUIET_WAIT
# (seconds to wait before each run for other people's uprobes to go away: 10, quick 2).
# Needs root (BPF, apt). Not part of scripts/test.sh. How long a run takes here: a full one about
# 90 minutes (its first round of every workload and tool took 17.5 on 2026-12-07, g++ and gcc 7
# of them); a quick one about 4 (more on a busy machine, which it waits out); the call stacks'
# tools alone (TOOLS="untraced memtrack memtrack-nostacks memtrack-stacks" PARTS=workloads
# QUIET_WAIT=2) about 26.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

QUICK=${QUICK:-0}
if [[ $QUICK == 1 ]]; then
  MODE=quick RUNS=${RUNS:-2}
  CHURN_PAIRS=100000 MIXED_OPS=100000 STORM_PROCS=16 STORM_OPS=20000 REPORT_PAIRS=1000000
  THREADS_PAIRS=20000
else
  MODE=full RUNS=${RUNS:-5}
  CHURN_PAIRS=1000000 MIXED_OPS=1000000 STORM_PROCS=16 STORM_OPS=200000 REPORT_PAIRS=5000000
  THREADS_PAIRS=200000
fi
ALL_WORKLOADS="churn churn10 cet new newarr jemalloc mimalloc tcmalloc rust mixed storm threads python xz gcc gxx sort git true"
# memtrack is the default recording, what a plain `record` does (with sampled stacks, issue 32);
# memtrack-nostacks and memtrack-stacks are the same without any stack and with every stack, the
# two sides of what the default's stacks cost.
ALL_TOOLS="untraced memtrack memtrack-nostacks memtrack-stacks memtrack-rss floor heaptrack dhat bpftrace memleak"
WORKLOADS=${WORKLOADS:-$ALL_WORKLOADS}
TOOLS=${TOOLS:-$ALL_TOOLS}
if [[ $MODE == full && $WORKLOADS == "$ALL_WORKLOADS" && $TOOLS == "$ALL_TOOLS" ]]; then
  WRITE_DOC=${WRITE_DOC:-1}
else
  WRITE_DOC=${WRITE_DOC:-0}
fi

B=$ROOT/target/bench
BIN=$B/bin
IN=$B/in
RUN=$B/run
RESULTS=$B/results.tsv
META=$B/meta.env
COMMANDS=$B/commands.txt
MEMTRACK=$ROOT/target/release/memtrack
TIMEIT=$BIN/timeit
export LC_ALL=C

say() { echo "bench: $*" >&2; }

if [[ $(id -u) -ne 0 ]]; then
  echo "bench: run as root (sudo): recording loads BPF programs, and set-up uses apt" >&2
  exit 1
fi

# --- set-up: build dependencies, peers, the release build, workloads and inputs ----------------
bash scripts/setup.sh
peers=(heaptrack valgrind bpftrace bpfcc-tools xz-utils git python3 procps bpftool)
missing=()
for p in "${peers[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
cargo build --release --locked
mkdir -p "$BIN" "$RUN"
cc -O2 -Wall -o "$BIN/churn" -I testdata testdata/churn.c
# The thread storm (issue 13): 4 processes x 4 threads of tight malloc+free loops, 16
# allocating threads on however many CPUs; tests/storm.rs runs it too.
cc -O2 -Wall -pthread -o "$BIN/threads" -I testdata testdata/thread_storm.c
for w in mixed storm timeit; do
  cc -O2 -Wall -o "$BIN/$w" -I testdata/bench "testdata/bench/$w.c"
done
# One churn per allocator family (issue 12): the same loop on jemalloc, mimalloc and tcmalloc;
# C++ new/delete and new[]/delete[] through libstdc++; a malloc built with -fcf-protection=full
# (endbr64 at every entry, as Ubuntu's and Fedora's glibc); Rust with the mimalloc crate.
cc -O2 -Wall -o "$BIN/churn-jemalloc" -I testdata testdata/churn.c -ljemalloc
cc -O2 -Wall -o "$BIN/churn-mimalloc" -I testdata testdata/churn.c -lmimalloc
cc -O2 -Wall -o "$BIN/churn-tcmalloc" -I testdata testdata/churn.c -ltcmalloc_minimal
cc -O2 -Wall -fcf-protection=full -o "$BIN/churn-cet" -I testdata testdata/churn.c \
  testdata/bench/cetmalloc.c
c++ -O2 -Wall -o "$BIN/cxx-churn" testdata/bench/cxx_churn.cpp
cargo build --release --locked --quiet --manifest-path testdata/rust-alloc/Cargo.toml \
  --target-dir "$B/rust" --bin churn
cp "$B/rust/release/churn" "$BIN/churn-rust"
/usr/bin/python3 scripts/bench/inputs.py "$IN" "$MODE"
LIBC=$(readlink -f /lib/x86_64-linux-gnu/libc.so.6 2>/dev/null || true)
[[ -e $LIBC ]] || { say "no glibc at /lib/x86_64-linux-gnu/libc.so.6"; exit 1; }
sed "s#LIBC#$LIBC#g" testdata/bench/uprobes.bt >"$B/uprobes.bt"

# --- the workloads: each writes nothing to stdout, so tool logs stay small ---------------------
workload_cmd() {
  case $1 in
    churn) CMD=("$BIN/churn" "$CHURN_PAIRS" 64) ;;
    churn10) CMD=("$BIN/churn" "$CHURN_PAIRS" 64 5) ;;
    cet) CMD=("$BIN/churn-cet" "$CHURN_PAIRS" 64) ;;
    new) CMD=("$BIN/cxx-churn" "$CHURN_PAIRS") ;;
    newarr) CMD=("$BIN/cxx-churn" "$CHURN_PAIRS" array) ;;
    jemalloc | mimalloc | tcmalloc) CMD=("$BIN/churn-$1" "$CHURN_PAIRS" 64) ;;
    rust) CMD=("$BIN/churn-rust" "$CHURN_PAIRS") ;;
    mixed) CMD=("$BIN/mixed" "$MIXED_OPS") ;;
    storm) CMD=("$BIN/storm" "$STORM_PROCS" "$STORM_OPS") ;;
    threads) CMD=("$BIN/threads" 4 4 "$THREADS_PAIRS") ;;
    python) CMD=(/usr/bin/python3 "$IN/dict.py") ;;
    xz) CMD=(/usr/bin/xz -9 -k -f -T1 "$IN/xz-input.txt") ;;
    gcc) CMD=(/usr/bin/gcc -O2 -c "$IN/gen.c" -o "$RUN/gen.o") ;;
    gxx) CMD=(/usr/bin/g++ -O2 -c "$ROOT/testdata/bench/templates.cpp" -o "$RUN/templates.o") ;;
    sort) CMD=(/usr/bin/sort -o /dev/null "$IN/lines.txt") ;;
    git) CMD=(/usr/bin/git -C "$IN/repo" log --stat --output=/dev/null) ;;
    true) CMD=(/usr/bin/true) ;;
    *) say "unknown workload $1"; exit 1 ;;
  esac
}

# --- bcc memleak: it compiles its BPF program at start-up and needs the running kernel's headers
# for that. Try it once and say why it cannot run. Where it can, it still has no place in the
# table yet: `memleak -c CMD` starts CMD before its probes are attached and never exits when CMD
# does, so timing it needs a harness of its own (start CMD stopped, attach with -p, continue).
MEMLEAK_WHY=""
if [[ " $TOOLS " == *" memleak "* ]]; then
  if ! command -v memleak-bpfcc >/dev/null; then
    MEMLEAK_WHY="memleak-bpfcc is not installed"
  else
    timeout 120 memleak-bpfcc -c /usr/bin/true 1 1 >"$RUN/memleak-probe.log" 2>&1 || true
    if grep -q "Traceback\|Failed to compile\|Unable to find kernel headers" "$RUN/memleak-probe.log"; then
      if grep -q "Unable to find kernel headers" "$RUN/memleak-probe.log"; then
        MEMLEAK_WHY="bcc cannot compile its BPF program without the running kernel's headers, and"
        MEMLEAK_WHY+=" Linux $(uname -r) has none (no /lib/modules/$(uname -r)/build, no"
        MEMLEAK_WHY+=" /sys/kernel/kheaders.tar.xz)"
      else
        MEMLEAK_WHY="its BPF program failed to compile (see $RUN/memleak-probe.log)"
      fi
    else
      MEMLEAK_WHY="it compiled, but the bench has no harness for it yet (memleak -c starts the command before attaching and does not exit with it)"
    fi
  fi
  say "bcc memleak is not measured: $MEMLEAK_WHY"
fi

# --- running one measurement -------------------------------------------------------------------
# Wait until no memtrack detaches probes in the background (ours or anyone's), so one run's
# probes never tax the next run. A zombie memtrack-detach has let go of every probe (its files
# close before it exits), and this machine's init reaps it some 1.4 s after its 0.3 s of
# detaching: waiting for it too cost every recorded run that long.
settle() {
  local i
  for ((i = 0; i < 500; i++)); do
    pgrep -x -r R,S,D,T memtrack-detach >/dev/null || break
    sleep 0.01
  done
  sleep 0.1
}

# uprobe_multi links attached right now by anyone (other recordings on a shared machine tax
# every process that calls malloc): reported per run, so a noisy table says why.
foreign_probes() {
  bpftool link list 2>/dev/null | grep -cE "uprobe_multi|^[0-9]+: type 12 " || true
}

# Wait up to $1 seconds for the machine to be free of other uprobe_multi links, so that a run is
# not taxed (or, under Valgrind, killed) by someone else's probes. Returns at once when quiet.
if [[ $MODE == quick ]]; then QUIET_WAIT=${QUIET_WAIT:-2} DHAT_QUIET_WAIT=20; else
  QUIET_WAIT=${QUIET_WAIT:-10} DHAT_QUIET_WAIT=60; fi
wait_quiet() {
  local end=$((SECONDS + $1))
  while ((SECONDS < end)) && (($(foreign_probes) > 0)); do sleep 0.5; done
}

# tool_cmd TOOL OUTPREFIX: the command line measuring $CMD under TOOL, into FULL.
tool_cmd() {
  local tool=$1 out=$2
  case $tool in
    untraced) FULL=("${CMD[@]}") ;;
    memtrack) FULL=("$MEMTRACK" -v record --no-rss -o "$out.mt" -- "${CMD[@]}") ;;
    memtrack-nostacks) FULL=("$MEMTRACK" -v record --no-rss --no-stacks -o "$out.mt" -- "${CMD[@]}") ;;
    memtrack-stacks) FULL=("$MEMTRACK" -v record --no-rss --stacks -o "$out.mt" -- "${CMD[@]}") ;;
    memtrack-rss) FULL=("$MEMTRACK" -v record -o "$out.mt" -- "${CMD[@]}") ;;
    # Without the leak scan (issue 36): no _exit probe and no per-process live map in the drain;
    # against `memtrack`, the map's cost. Not in ALL_TOOLS: name it in TOOLS.
    memtrack-noscan) FULL=("$MEMTRACK" -v record --no-rss --no-leak-scan -o "$out.mt" -- "${CMD[@]}") ;;
    floor) FULL=("$MEMTRACK" -v record --no-rss --probe-floor -o "$out.mt" -- "${CMD[@]}") ;;
    heaptrack) FULL=(heaptrack -o "$out" "${CMD[@]}") ;;
    dhat) FULL=(valgrind --tool=dhat --trace-children=yes "--dhat-out-file=$out.dhat.%p.json" "${CMD[@]}") ;;
    bpftrace) FULL=(env BPFTRACE_MAP_KEYS_MAX=262144 bpftrace -q -o "$out.bt.txt" "$B/uprobes.bt" -c "${CMD[*]}") ;;
  esac
}

# Tool-specific figures of one run, as key=value words.
extras() {
  local tool=$1 out=$2 log=$3
  case $tool in
    memtrack | memtrack-nostacks | memtrack-stacks | memtrack-rss | memtrack-noscan | floor)
      local usage
      usage=$(grep -o "recorder: .*" "$log" | head -1 | sed 's/recorder: //; s/ (.*//') || true
      # stacks= says which stacks the recording walked (none, exact, sampled), so the tables
      # say what the default recording measured rather than assume it.
      "$MEMTRACK" report "$out.mt" --format json --stacks --stacks-top 1 2>/dev/null |
        /usr/bin/python3 -c '
import json, os, sys
d = json.load(sys.stdin)
print("events=%d lost=%d processes=%d allocs=%d file_bytes=%d" % (d["run"]["events"],
      d["lost_events"]["total"], d["run"]["processes"], d["totals"]["heap"]["allocs"],
      os.path.getsize(sys.argv[1])), end="")
s = d.get("stacks", {})
sampling = s.get("sampling")
print(" stacks=%s" % ("sampled" if sampling else "exact" if s.get("recorded") else "none"), end="")
if sampling:
    print(" sample_bytes=%d walked=%d" % (sampling["mean_bytes"], sampling["sampled_allocations"]),
          end="")' "$out.mt" || echo -n "report=failed"
      # "0.015 s user, 0.030 s system CPU, peak resident 132.3 MiB"
      echo "$usage" | awk '{printf " rec_user=%s rec_sys=%s rec_peak=%s%s", $1, $4, $10, $11}'
      ;;
    heaptrack)
      awk '/allocations:/ && !/leaked|temporary/ {printf "allocs=%s", $2; exit}' "$log"
      echo -n " processes=$(ls "$out".*.zst "$out".zst "$out".gz 2>/dev/null | wc -l)"
      ;;
    dhat)
      awk '/== Total:/ {gsub(/,/, "", $(NF-1)); n += $(NF-1); p[$1] = 1}
           END {printf "allocs=%d processes=%d", n, length(p)}' "$log"
      ;;
    bpftrace)
      # "@allocs[PID]: N", one line per process that allocated
      sed -n 's/^@allocs\[\([0-9]*\)\]: *\([0-9]*\)$/\1 \2/p' "$out.bt.txt" 2>/dev/null |
        awk '{n += $2; p++} END {printf "allocs=%d processes=%d", n, p}'
      ;;
  esac
}

run_one() { # WORKLOAD TOOL RUN
  local w=$1 tool=$2 r=$3 out="$RUN/$1.$2" log="$RUN/$1.$2.log" foreign after status
  # heaptrack hooks the C library's malloc; on a program with a malloc of its own (cet) it hangs
  # before the program starts (heaptrack 1.4, seen here), so it has no figure there.
  [[ $w == cet && $tool == heaptrack ]] && return
  workload_cmd "$w"
  tool_cmd "$tool" "$out"
  rm -f "$out".* 2>/dev/null || true
  local attempt
  for attempt in 1 2 3 4 5; do
    if [[ $tool == dhat ]]; then wait_quiet "$DHAT_QUIET_WAIT"; else wait_quiet "$QUIET_WAIT"; fi
    foreign=$(foreign_probes)
    status=0
    "$TIMEIT" -o "$RUN/time" -- "${FULL[@]}" >"$log" 2>&1 </dev/null || status=$?
    # Before and after: a run overlapping someone's recording is noted. After our own
    # memtrack-detach has let go of this run's links, or they would count as someone's.
    settle
    after=$(foreign_probes)
    ((after <= foreign)) || foreign=$after
    # Valgrind reads the code it runs from memory, so it meets the int3 of any uprobe that
    # someone attached machine-wide and dies of SIGTRAP (128+5): try again a little later.
    [[ $tool == dhat && $status == 133 ]] || break
    say "$w under $tool died of SIGTRAP (another tool's uprobes on the machine); again"
  done
  local t
  t=$(tr ' ' '\t' <"$RUN/time" | sed 's/[a-z_]*=//g')
  printf '%s\t%s\t%s\t%s\t%s foreign=%s\n' "$w" "$tool" "$r" "$t" "$(extras "$tool" "$out" "$log")" \
    "$foreign" >>"$RESULTS"
  if ((status != 0)); then
    say "$w under $tool exited with $status (log: $log)"
  fi
}

# --- the run -----------------------------------------------------------------------------------
: >"$RESULTS"
: >"$COMMANDS"
read -ra tools <<<"$TOOLS"
active=()
for t in "${tools[@]}"; do
  if [[ $t == memleak && -n $MEMLEAK_WHY ]]; then continue; fi
  active+=("$t")
done
{
  echo "mode=$MODE"
  echo "runs=$RUNS"
  echo "date=$(date -u +%Y-%m-%dT%H:%MZ)"
  echo "kernel=$(uname -r)"
  echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "cores=$(nproc)"
  echo "memory=$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
  echo "glibc=$(ldd --version | head -1 | awk '{print $NF}')"
  echo "memtrack=$("$MEMTRACK" --help >/dev/null 2>&1; git -C "$ROOT" describe --always --dirty)"
  echo "heaptrack=$(heaptrack --version 2>/dev/null | awk '{print $2}')"
  echo "valgrind=$(valgrind --version 2>/dev/null)"
  echo "bpftrace=$(bpftrace --version 2>/dev/null | awk '{print $2}')"
  echo "gcc=$(gcc -dumpfullversion)"
  echo "python=$(/usr/bin/python3 --version | awk '{print $2}')"
  echo "xz=$(xz --version | head -1 | awk '{print $NF}')"
  echo "git=$(/usr/bin/git --version | awk '{print $3}')"
  echo "memleak_why=$MEMLEAK_WHY"
  echo "churn_pairs=$CHURN_PAIRS"
  echo "mixed_ops=$MIXED_OPS"
  echo "storm=$STORM_PROCS x $STORM_OPS"
  echo "threads=4 x 4 x $THREADS_PAIRS"
  echo "load_start=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$META"

started=$(date +%s)
for w in $WORKLOADS; do
  workload_cmd "$w"
  for t in "${active[@]}"; do
    tool_cmd "$t" "$RUN/$w.$t"
    echo "$w	$t	${FULL[*]//$ROOT\//}" >>"$COMMANDS"
  done
done
# Round by round, every workload under every tool: figures compared across workloads (each
# allocator family against glibc's churn) are then taken as close together in time as those
# of one workload, and a burst of load on a shared machine moves one round, not one workload.
for ((r = 1; r <= RUNS; r++)); do
  for w in $WORKLOADS; do
    say "$w: run $r of $RUNS ($(($(date +%s) - started)) s so far)"
    # Rotate the order of the tools from run to run, so none always runs first or last.
    n=${#active[@]}
    for ((i = 0; i < n; i++)); do
      run_one "$w" "${active[$(((i + r - 1) % n))]}" "$r"
    done
  done
done

PARTS=${PARTS:-all}
if [[ $PARTS == all ]]; then
# --- untraced processes beside a recording (machine-wide probes tax them) ----------------------
# The recorded command is `cat FIFO`: it opens the FIFO only once the tool has attached its
# probes and started it, which is when our own open of the FIFO returns; closing our end then
# ends it. (Not a signal: the recorded command currently inherits memtrack's blocked SIGTERM.)
# memtrack probes private copies of the allocator libraries by default (issue 19), which spare
# the churn; the -shared modes probe the machine's files (--no-private-libs), as bpftrace does.
say "bystander: untraced churn beside a recording"
beside=(alone memtrack memtrack-shared memtrack-rss floor floor-shared bpftrace)
fifo=$RUN/beside.fifo
rm -f "$fifo"
mkfifo "$fifo"
for ((r = 1; r <= RUNS; r++)); do
  for ((i = 0; i < ${#beside[@]}; i++)); do
    mode=${beside[$(((i + r - 1) % ${#beside[@]}))]}
    [[ " $TOOLS " == *" ${mode%%-*} "* || $mode == alone ]] || continue
    pid=""
    wait_quiet "$QUIET_WAIT"
    foreign=$(foreign_probes)
    case $mode in
      memtrack) "$MEMTRACK" record --no-rss -q -o "$RUN/beside.mt" -- cat "$fifo" >/dev/null & pid=$! ;;
      memtrack-shared) "$MEMTRACK" record --no-rss --no-private-libs -q -o "$RUN/beside.mt" -- cat "$fifo" >/dev/null & pid=$! ;;
      memtrack-rss) "$MEMTRACK" record -q -o "$RUN/beside.mt" -- cat "$fifo" >/dev/null & pid=$! ;;
      floor) "$MEMTRACK" record --no-rss --probe-floor -q -o "$RUN/beside.mt" -- cat "$fifo" >/dev/null & pid=$! ;;
      floor-shared) "$MEMTRACK" record --no-rss --probe-floor --no-private-libs -q -o "$RUN/beside.mt" -- cat "$fifo" >/dev/null & pid=$! ;;
      bpftrace) bpftrace -q -o "$RUN/beside.bt.txt" "$B/uprobes.bt" -c "/usr/bin/cat $fifo" >/dev/null 2>&1 & pid=$! ;;
    esac
    if [[ -n $pid ]]; then
      # cat starts once the tool's probes are attached; then open our end (cat opens its own).
      # Found by its command line: it is not the tool's child (memtrack starts it through its
      # guardian process).
      started() { pgrep -f -- "cat $fifo\$" >/dev/null; }
      for ((k = 0; k < 3000; k++)); do
        started && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.01
      done
      if ! started; then
        say "bystander: $mode did not start its command; skipped"
        # Never wait on a tool that is still waiting: stop it, and let a late cat's open return.
        kill -INT "$pid" 2>/dev/null || true
        exec {hold}<>"$fifo"
        exec {hold}>&-
        wait "$pid" || true
        continue
      fi
      exec {hold}>"$fifo"
    fi
    "$TIMEIT" -o "$RUN/time" -- "$BIN/churn" "$CHURN_PAIRS" 64 </dev/null
    printf 'bystander\t%s\t%s\t%s\tforeign=%s\n' "$mode" "$r" \
      "$(tr ' ' '\t' <"$RUN/time" | sed 's/[a-z_]*=//g')" "$foreign" >>"$RESULTS"
    if [[ -n $pid ]]; then
      exec {hold}>&- # cat reads end of file and exits; the tool finishes
      wait "$pid" || true
    fi
    settle
  done
done
rm -f "$fifo"

# --- report speed: a long churn recording, read back with `memtrack report` -------------------
say "report speed"
"$MEMTRACK" record --no-rss -q -o "$RUN/report-input.mt" -- "$BIN/churn" "$REPORT_PAIRS" 64
settle
report_inputs=("$RUN/report-input.mt")
[[ -e $RUN/storm.memtrack-rss.mt ]] && report_inputs+=("$RUN/storm.memtrack-rss.mt")
for f in "${report_inputs[@]}"; do
  events=$("$MEMTRACK" report "$f" --format json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["run"]["events"])')
  for ((r = 1; r <= RUNS; r++)); do
    wait_quiet "$QUIET_WAIT"
    "$TIMEIT" -o "$RUN/time" -- "$MEMTRACK" report "$f" --format json >/dev/null
    printf 'report\t%s\t%s\t%s\tevents=%s file_bytes=%s\n' "$(basename "$f" .mt)" "$r" \
      "$(tr ' ' '\t' <"$RUN/time" | sed 's/[a-z_]*=//g')" "$events" "$(stat -c %s "$f")" >>"$RESULTS"
  done
done
fi # PARTS == all

echo "load_end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$META"
echo "duration_s=$(($(date +%s) - started))" >>"$META"

# --- tables --------------------------------------------------------------------------------------
/usr/bin/python3 scripts/bench/summarize.py "$RESULTS" "$META" "$COMMANDS" >"$B/results.md"
cat "$B/results.md"
if [[ $WRITE_DOC == 1 ]]; then
  /usr/bin/python3 scripts/bench/summarize.py --into docs/PERFORMANCE.md "$B/results.md"
  say "tables written into docs/PERFORMANCE.md"
fi
say "done in $(($(date +%s) - started)) s; raw results in $RESULTS, logs in $RUN"
