#!/usr/bin/env bash
# What `record --python-objects` costs on the bench's python workload (issue 18): python alone,
# `record` (malloc's view) and `record --python-objects`, interleaved RUNS rounds, printing each
# one's median wall time and the allocations the report counts. Needs the inputs scripts/bench.sh
# writes to target/bench/in (run it once, e.g. with WORKLOADS=true), and root.
#
#   sudo scripts/bench/python-objects.sh [MEMTRACK]     # settings: RUNS=5, PYTHON=/usr/bin/python3
set -euo pipefail
cd "$(dirname "$0")/../.."
M=${1:-target/release/memtrack}
PYTHON=${PYTHON:-/usr/bin/python3} RUNS=${RUNS:-5}
B=target/bench
[[ -x $B/bin/timeit && -e $B/in/dict.py ]] || { echo "run scripts/bench.sh once first" >&2; exit 1; }
out=$(mktemp)
trap 'rm -f "$out" "$out".*' EXIT
for ((r = 1; r <= RUNS; r++)); do
  for v in alone malloc objects; do
    case $v in
      alone) C=() ;;
      malloc) C=("$M" record --no-rss -q -o "$out.$v.mt" --) ;;
      objects) C=("$M" record --no-rss -q --python-objects -o "$out.$v.mt" --) ;;
    esac
    "$B/bin/timeit" -o "$out.time" -- "${C[@]}" "$PYTHON" "$B/in/dict.py" >/dev/null 2>&1
    # Not a zombie (-r): one has let go of every probe (bench.sh, settle).
    while pgrep -x -r R,S,D,T memtrack-detach >/dev/null; do sleep 0.05; done
    allocs=-
    if [[ $v != alone ]]; then
      allocs=$("$M" report "$out.$v.mt" --format json |
        "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["totals"]["heap"]["allocs"])')
    fi
    echo "$v $(awk -F'[= ]' '{print $2}' "$out.time") $allocs" >>"$out"
  done
done
"$PYTHON" - "$out" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    v, wall, allocs = line.split()
    runs.setdefault(v, []).append((float(wall), allocs))
names = {"alone": "python alone", "malloc": "`record` (malloc view)",
         "objects": "`record --python-objects`"}
print("| run | median | runs (s) | allocations recorded |")
print("|---|---|---|---|")
for v in ["alone", "malloc", "objects"]:
    walls = sorted(w for w, _ in runs[v])
    print(f"| {names[v]} | {statistics.median(walls):.3f} s | "
          f"{' '.join(f'{w:.3f}' for w in walls)} | {runs[v][-1][1]} |")
PY
