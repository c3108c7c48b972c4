#!/usr/bin/env bash
# Issue 15's "names the same top sites as heaptrack": runs heaptrack and memtrack on the same
# commands (`git log -n 200` in this repository, a python3 run) and prints, for each, the top
# allocation sites of both tools side by side, by number of calls and by live bytes at the heap
# peak, and how many of the top N each names that the other also has.
#
#   flock /tmp/memtrack-bpf.lock scripts/bench/compare-heaptrack.sh [MEMTRACK]
#       MEMTRACK   the binary to compare (default target/debug/memtrack); needs root
#       TOP=10     sites per list        OUT=target/bench/compare-heaptrack   the files of both
#
# A site is where the allocator was called from, as heaptrack_print merges its backtraces: the
# innermost frame that is not an allocator function (malloc, operator new, ...). memtrack's
# sites (one per call stack, `report --stacks --stacks-top 0 --format json`) are summed by that
# frame too. A frame is named by its function and file:line; the frames neither tool can name
# (git and python3 are stripped) are one site per module, MODULE+?, since heaptrack_print
# merges them so. heaptrack records raw (-r) and is interpreted here. (Not with ASLR off,
# setarch -R: heaptrack 1.4 then names libz's frames with libm's debug info.)
#
# Two kinds of heaptrack's sites are heaptrack's own, and are marked: those in a module the
# program does not load without heaptrack (its preload library is C++ and brings libstdc++,
# whose emergency exception pool is 72.7 KB at start-up) are left out of its lists; the
# dynamic loader's strdup of each library path counts the libraries heaptrack adds too (5 calls
# under heaptrack, 1 without, in python3's run), so that site may differ.
#
# heaptrack follows one process and sees malloc's callers only (it interposes malloc with
# LD_PRELOAD); memtrack follows the whole tree. Both commands here run one process.
set -euo pipefail
cd "$(dirname "$0")/../.."
MEMTRACK=${1:-target/debug/memtrack}
TOP=${TOP:-10}
OUT=${OUT:-target/bench/compare-heaptrack}
interpret=/usr/lib/heaptrack/libexec/heaptrack_interpret
for tool in heaptrack heaptrack_print $interpret zstd ldd python3; do
  command -v "$tool" >/dev/null || { echo "compare-heaptrack: no $tool (scripts/setup.sh installs it)" >&2; exit 1; }
done
[[ -x $MEMTRACK ]] || { echo "compare-heaptrack: no $MEMTRACK (cargo build first, or name a binary)" >&2; exit 1; }
mkdir -p "$OUT"

repo=$PWD
py_code='import json; d = {str(i): list(range(i)) for i in range(300)}; print(len(json.dumps(d)))'
names=(git-log python)
declare -A commands=(
  [git-log]="git --no-pager -C $repo log -n 200"
  [python]="/usr/bin/python3 -c $py_code"
)

for name in "${names[@]}"; do
  # The words of the command: the python code is one argument.
  case $name in
    git-log) cmd=(git --no-pager -C "$repo" log -n 200) ;;
    python) cmd=(/usr/bin/python3 -c "$py_code") ;;
  esac
  echo "compare-heaptrack: $name: ${commands[$name]}" >&2
  rm -f "$OUT/$name.ht.raw.zst" "$OUT/$name.ht.zst" "$OUT/$name.mt" "$OUT/$name.json"
  heaptrack -r -o "$OUT/$name.ht" "${cmd[@]}" >/dev/null 2>"$OUT/$name.ht.log" \
    || { echo "compare-heaptrack: heaptrack failed, see $OUT/$name.ht.log" >&2; exit 1; }
  zstdcat "$OUT/$name.ht.raw.zst" | "$interpret" 2>>"$OUT/$name.ht.log" | zstd -q >"$OUT/$name.ht.zst"
  heaptrack_print -f "$OUT/$name.ht.zst" -t 0 -a 1 -p 1 -T 0 -n 100000 -s 0 \
    >"$OUT/$name.ht.txt" 2>/dev/null
  "$MEMTRACK" record -q --stacks -o "$OUT/$name.mt" -- "${cmd[@]}" >/dev/null 2>"$OUT/$name.mt.log" \
    || { echo "compare-heaptrack: memtrack record failed, see $OUT/$name.mt.log" >&2; exit 1; }
  # A memtrack without `report --stacks` (an old binary): only heaptrack's side is printed.
  "$MEMTRACK" report "$OUT/$name.mt" --stacks --stacks-top 0 --format json \
    >"$OUT/$name.json" 2>"$OUT/$name.json.log" || rm -f "$OUT/$name.json"
  python3 - "$name" "${cmd[0]}" "$OUT/$name.ht.txt" "$OUT/$name.json" "$TOP" <<'PY'
import json, os, re, shutil, subprocess, sys

name, exe, ht_path, mt_path = sys.argv[1:5]
top = int(sys.argv[5])
exe = os.path.realpath(shutil.which(exe) or exe)


def base(path):
    return path.rsplit("/", 1)[-1]


ALLOCATOR = re.compile(
    r"^(__GI_)?(__libc_)?(malloc|calloc|realloc|reallocarray|posix_memalign|aligned_alloc|"
    r"memalign|valloc|pvalloc)$|^operator new")


def without_parameters(function):
    """gdb and DWARF name C++ functions without parameters, demanglers with them."""
    if function.endswith(")") and not function.endswith("operator()"):
        depth = 0
        for i in range(len(function) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(function[i], 0)
            if depth == 0:
                return function[:i]
    return function


def label(function, file, line, module):
    """A site's name. Frames without a function name are one site per module, MODULE+?:
    heaptrack_print merges every frame of a module it cannot name into one entry (git's four
    x*alloc wrappers are one `git+0x281c98` there, with the calls of all four), so memtrack's
    are merged the same way to compare like with like."""
    if function:
        where = " (%s:%d)" % (base(file), line) if file and line else ""
        return without_parameters(function) + where
    return "%s+?" % module_name(module)


def module_name(path):
    """A module by its file name without the version after .so (libz.so.1.2.13 is the
    libz.so.1 that heaptrack names by the loader's path)."""
    name = base(os.path.realpath(path) if path.startswith("/") else path)
    m = re.match(r"^(.*\.so)(\.\d+)*$", name)
    return m.group(1) if m else name


def key(lab):
    """What two labels must share to be one site: the function without file:line (one tool may
    have the line and the other not) and without glibc's internal prefixes (__GI___strdup is
    strdup), or the module and offset."""
    function = lab.split(" (")[0]
    if "+" in function and " " not in function:
        return function
    return re.sub(r"^(__GI_)?_*", "", function)


def heaptrack_sites(path):
    """{"calls": [(label, calls, peak)], "peak": [...]} from heaptrack_print's text, in its order."""
    sections = {"MOST CALLS TO ALLOCATION FUNCTIONS": "calls", "PEAK MEMORY CONSUMERS": "peak"}
    calls_re = re.compile(r"^(\d+) calls to allocation functions with (\S+) peak consumption from$")
    peak_re = re.compile(r"^(\S+) peak memory consumed over (\d+) calls from$")
    sites = {"calls": [], "peak": []}
    section, entry = None, None
    for raw in open(path):
        line = raw.rstrip("\n")
        if line in sections:
            section, entry = sections[line], None
            continue
        if section is None or not line or line.startswith("  and "):
            continue
        m = calls_re.match(line) if section == "calls" else peak_re.match(line)
        if m:
            calls, peak = (m.group(1), m.group(2)) if section == "calls" else (m.group(2), m.group(1))
            entry = {"calls": int(calls), "peak": parse_size(peak), "location": None, "file": "",
                     "line": 0, "module": ""}
            sites[section].append(entry)
        elif entry is not None and entry["location"] is None and not line.startswith(" "):
            entry["location"] = line
        elif entry is not None and line.startswith("  at "):
            file, _, number = line[5:].rpartition(":")
            entry["file"], entry["line"] = file, int(number)
        elif entry is not None and line.startswith("  in "):
            entry["module"] = line[5:]
        elif line.startswith("total runtime") or line.isupper():
            section = None
    result = {}
    for key, entries in sites.items():
        result[key] = []
        for e in entries:
            loc = e["location"] or ""
            if re.fullmatch(r"0x[0-9a-f]+", loc):
                # An address heaptrack could not name (the first of its module's unnamed frames
                # it met; see label()).
                lab = label("", "", 0, e["module"])
            else:
                lab = label(loc, e["file"], e["line"], e["module"])
            result[key].append((lab, e["calls"], e["peak"], e["module"]))
    return result


def parse_size(text):
    """heaptrack_print's sizes: 64B, 7.16K, 1.79M (powers of 1000)."""
    m = re.fullmatch(r"([0-9.]+)([BKMGT])", text)
    if not m:
        return 0
    return int(float(m.group(1)) * 1000 ** "BKMGT".index(m.group(2)))


def memtrack_sites(path):
    """The same lists from `memtrack report --stacks --format json`, summed by call site."""
    report = json.load(open(path))
    sums = {}
    for site in report.get("stacks", {}).get("sites", []):
        frames = site.get("frames", [])
        # The allocator's own frames (the leaf; operator new above malloc) are not the site.
        i = 0
        while i < len(frames) and ALLOCATOR.match(without_parameters(frames[i].get("function", ""))):
            i += 1
        if i == len(frames):
            continue
        f = frames[i]
        lab = label(f.get("function", ""), f.get("file", ""), f.get("line", 0), f.get("module", ""))
        s = sums.setdefault(lab, [0, 0])
        s[0] += site.get("allocations", 0)
        s[1] += site.get("peak_live_bytes", 0)
    rows = [(lab, calls, peak) for lab, (calls, peak) in sums.items()]
    return {"calls": sorted(rows, key=lambda r: (-r[1], -r[2], r[0])),
            "peak": sorted(rows, key=lambda r: (-r[2], -r[1], r[0]))}


def size(n):
    for unit in "BKMGT":
        if n < 1000 or unit == "T":
            return "%dB" % n if unit == "B" else "%.2f%s" % (n, unit)
        n /= 1000.0


def own_modules(exe):
    """The module names the program loads by itself: itself and ldd's closure."""
    out = subprocess.run(["ldd", exe], capture_output=True, text=True).stdout
    names = {module_name(exe)}
    for line in out.splitlines():
        w = line.split()
        path = w[2] if len(w) >= 3 and w[1] == "=>" else (w[0] if w else "")
        if path.startswith("/"):
            names.add(module_name(path))
    return names


def without_heaptrack_itself(sites, own):
    """heaptrack's sites less those in modules only heaptrack brings in: its preload library
    is C++, so a C program under it loads libstdc++, whose emergency exception pool (72.7 KB at
    start-up) is then the program's biggest "site". Returned with the names dropped."""
    dropped = set()
    kept = {}
    for cost, rows in sites.items():
        kept[cost] = []
        for row in rows:
            if row[3] and module_name(row[3]) not in own:
                dropped.add(row[0])
                continue
            kept[cost].append(row)
    return kept, sorted(dropped)


ht = heaptrack_sites(ht_path)
ht, heaptrack_own = without_heaptrack_itself(ht, own_modules(exe))
if heaptrack_own:
    print("\n(left out of heaptrack's lists: %s, in modules %s does not load without heaptrack)"
          % (", ".join(heaptrack_own), base(exe)))
mt = memtrack_sites(mt_path) if os.path.exists(mt_path) else None
for cost, title in (("calls", "most calls"), ("peak", "live bytes at the heap peak")):
    print("\n== %s: top %d sites by %s" % (name, top, title))
    print("%-3s %-56s %10s  | %-56s %10s" % ("#", "heaptrack", cost, "memtrack", cost))
    a = ht[cost][:top]
    b = mt[cost][:top] if mt else []
    value = (lambda r: str(r[1])) if cost == "calls" else (lambda r: size(r[2]))
    keys_a, keys_b = {key(r[0]) for r in a}, {key(r[0]) for r in b}
    # "=" marks a site the other tool's list has too.
    for i in range(max(len(a), len(b))):
        left = a[i] if i < len(a) else None
        right = b[i] if i < len(b) else None
        print("%-3d %-56.56s %10s %s| %-56.56s %10s %s" % (
            i + 1, left[0] if left else "", value(left) if left else "",
            "=" if left and key(left[0]) in keys_b else " ",
            right[0] if right else "", value(right) if right else "",
            "=" if right and key(right[0]) in keys_a else " "))
    if mt is None:
        print("memtrack: `report --stacks --format json` failed (no call stacks in this binary "
              "yet?); heaptrack's side only")
        continue
    missing = [r[0] for r in a if key(r[0]) not in keys_b]
    # The same number too: calls exactly, peak bytes as heaptrack prints them (3 digits).
    shown = {(key(r[0]), value(r)) for r in b}
    same = sum(1 for r in a if (key(r[0]), value(r)) in shown)
    print("in memtrack's top %d: %d of heaptrack's %d sites, %d of them with the same %s "
          "(not in memtrack's: %s)" % (top, len(a) - len(missing), len(a), same, cost,
                                       ", ".join(missing) or "none"))
PY
done
