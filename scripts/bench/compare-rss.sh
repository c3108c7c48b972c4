#!/usr/bin/env bash
# Two memtrack binaries side by side on fault-heavy workloads with the default recording
# (resident memory and sampled stacks: issue 35's cost, whose target is 1.05x of the memtrack
# before it): OLD, NEW and untraced alternately, RUNS rounds, printing the medians and NEW/OLD.
# Needs root, gcc, g++ and python3.
#
#   sudo scripts/bench/compare-rss.sh OLD_MEMTRACK NEW_MEMTRACK    # settings: RUNS=5,
#   WORKLOADS="faults python gxx" (of those and sort, true: a subset runs more rounds in the
#   same time)
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ $# -eq 2 ]] || { echo "usage: $0 OLD_MEMTRACK NEW_MEMTRACK" >&2; exit 2; }
OLD=$1 NEW=$2
RUNS=${RUNS:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/faults" testdata/rmap/faults.c
cat >"$work/dict.py" <<'PY'
import json
rows = [{"id": i, "name": "row%d" % i, "tags": [i, i * 2]} for i in range(200000)]
s = json.dumps(rows)
PY
python3 -c 'import random
random.seed(7)
print("\n".join("%08x line %d" % (random.getrandbits(32), i) for i in range(1000000)))' >"$work/lines.txt"
declare -A cmd=(
  [faults]="$work/faults 64 10"
  [python]="/usr/bin/python3 $work/dict.py"
  [gxx]="/usr/bin/g++ -O2 -c testdata/bench/templates.cpp -o $work/templates.o"
  [sort]="/usr/bin/sort -o $work/sorted.txt $work/lines.txt"
  [true]="/usr/bin/true"
)
order=${WORKLOADS:-faults python gxx}
for ((r = 1; r <= RUNS; r++)); do
  for w in $order; do
    for v in untraced old new; do
      case $v in
        old) M=("$OLD" record -q -o "$work/run.mt" --) ;;
        new) M=("$NEW" record -q -o "$work/run.mt" --) ;;
        untraced) M=() ;;
      esac
      start=$(date +%s%N)
      # shellcheck disable=SC2086 # the workload's words
      "${M[@]}" ${cmd[$w]} >/dev/null
      echo "$w $v $((($(date +%s%N) - start) / 1000))" >>"$work/times"
    done
  done
  echo "compare-rss: round $r of $RUNS done" >&2
done
python3 - "$work/times" "$order" <<'PY'
import collections, statistics, sys
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    w, v, us = line.split()
    t[w, v].append(int(us) / 1e6)
# Also each round's own ratio (old and new ran back to back, so the machine's load moves both):
# their median and range say more about a shared machine than the ratio of the medians.
print("| workload | untraced | old | new | new / old | per round: median (range) |")
print("|---|---|---|---|---|---|")
for w in sys.argv[2].split():
    m = {v: statistics.median(t[w, v]) for v in ("untraced", "old", "new")}
    rounds = [n / o for o, n in zip(t[w, "old"], t[w, "new"])]
    print(f"| {w} | {m['untraced']:.3f} s | {m['old']:.3f} s | {m['new']:.3f} s | "
          f"{m['new'] / m['old']:.3f}x | {statistics.median(rounds):.3f}x "
          f"({min(rounds):.3f}-{max(rounds):.3f}) |")
PY
