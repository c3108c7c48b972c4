#!/usr/bin/env bash
# Two memtrack binaries side by side on each allocator family's churn (issue 12): OLD, NEW and
# untraced alternately, RUNS rounds, printing the cost per alloc+free pair of each, net of
# `true` and of the untraced loop. Needs the workloads scripts/bench.sh builds in
# target/bench/bin (run it once, e.g. with WORKLOADS=true), and root.
#
#   sudo scripts/bench/compare.sh OLD_MEMTRACK NEW_MEMTRACK     # settings: RUNS=3, N=1000000
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ $# -eq 2 ]] || { echo "usage: $0 OLD_MEMTRACK NEW_MEMTRACK" >&2; exit 2; }
OLD=$1 NEW=$2
B=target/bench/bin
N=${N:-1000000} RUNS=${RUNS:-3}
[[ -x $B/timeit && -x $B/churn-cet ]] || { echo "run scripts/bench.sh once first" >&2; exit 1; }
declare -A cmd=(
  [glibc]="$B/churn $N 64" [cet]="$B/churn-cet $N 64" [new]="$B/cxx-churn $N"
  [newarr]="$B/cxx-churn $N array" [jemalloc]="$B/churn-jemalloc $N 64"
  [mimalloc]="$B/churn-mimalloc $N 64" [tcmalloc]="$B/churn-tcmalloc $N 64"
  [rust]="$B/churn-rust $N" [true]="/usr/bin/true"
)
order="glibc cet new newarr jemalloc mimalloc tcmalloc rust true"
out=$(mktemp)
trap 'rm -f "$out" "$out".*' EXIT
for ((r = 1; r <= RUNS; r++)); do
  for w in $order; do
    for v in old new untraced; do
      case $v in
        old) M=("$OLD" record --no-rss -q -o "$out.mt" --) ;;
        new) M=("$NEW" record --no-rss -q -o "$out.mt" --) ;;
        untraced) M=() ;;
      esac
      # shellcheck disable=SC2086 # the workload's words
      "$B/timeit" -o "$out.time" -- "${M[@]}" ${cmd[$w]} >/dev/null 2>&1
      # Not a zombie (-r): one has let go of every probe (bench.sh, settle).
      while pgrep -x -r R,S,D,T memtrack-detach >/dev/null; do sleep 0.05; done
      echo "$w $v $(awk -F'[= ]' '{print $2}' "$out.time")" >>"$out"
    done
  done
  echo "compare: round $r of $RUNS done" >&2
done
python3 - "$out" "$N" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    w, v, t = line.split()
    d[(w, v)].append(float(t))
m = {k: statistics.median(v) for k, v in d.items()}
n = float(sys.argv[2])
def per(w, v):
    return ((m[(w, v)] - m[("true", v)]) - (m[(w, "untraced")] - m[("true", "untraced")])) / n * 1e6
print("| churn | old | new | old / new |")
print("|---|---|---|---|")
for w in ["glibc", "cet", "new", "newarr", "jemalloc", "mimalloc", "tcmalloc", "rust"]:
    o, x = per(w, "old"), per(w, "new")
    print("| %s | %.2f us (%.2fx glibc's) | %.2f us (%.2fx glibc's) | %.1f |" % (
        w, o, o / per("glibc", "old"), x, x / per("glibc", "new"), o / x))
print("`true`: old %.1f ms, new %.1f ms, untraced %.1f ms" % (
    m[("true", "old")] * 1e3, m[("true", "new")] * 1e3, m[("true", "untraced")] * 1e3))
PY
