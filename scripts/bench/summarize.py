#!/usr/bin/env python3
"""Turn scripts/bench.sh's raw results into the markdown tables of docs/PERFORMANCE.md.

usage: summarize.py RESULTS.tsv META.env COMMANDS.txt > results.md
       summarize.py --into docs/PERFORMANCE.md results.md

RESULTS.tsv has one line per measurement: workload (or "bystander", "report"), tool (or mode,
or input), run, wall s, user s, system s, peak resident KiB, exit status, then key=value words.
Every figure is a median over the runs, with min and max where it is a time. The second form
replaces what lies between the doc's BEGIN and END markers with results.md.
"""
import statistics
import sys
from collections import defaultdict

BEGIN = "<!-- BEGIN scripts/bench.sh output -->"
END = "<!-- END scripts/bench.sh output -->"

TOOLS = ["untraced", "memtrack", "memtrack-nostacks", "memtrack-stacks", "memtrack-noscan",
         "memtrack-rss", "floor", "heaptrack", "dhat", "bpftrace"]
TOOL_NAMES = {
    "untraced": "untraced",
    "memtrack": "memtrack",
    "memtrack-nostacks": "memtrack --no-stacks",
    "memtrack-stacks": "memtrack --stacks",
    "memtrack-rss": "memtrack +rss",
    "memtrack-noscan": "memtrack --no-leak-scan",
    "memtrack-shared": "memtrack --no-private-libs",
    "floor": "floor",
    "floor-shared": "floor --no-private-libs",
    "heaptrack": "heaptrack",
    "dhat": "DHAT",
    "bpftrace": "bpftrace",
}
WORKLOADS = ["churn", "churn10", "cet", "new", "newarr", "jemalloc", "mimalloc", "tcmalloc", "rust", "mixed",
             "storm", "threads", "python", "xz", "gcc", "gxx", "sort", "git", "true"]
REAL = ["python", "xz", "gcc", "gxx", "sort", "git"]
# The churn of each allocator family (issue 12), CHURN_PAIRS alloc+free pairs each, and what
# it allocates with.
FAMILIES = [
    ("churn", "glibc malloc+free"),
    ("cet", "malloc+free built with -fcf-protection=full (endbr64)"),
    ("new", "C++ new+delete (libstdc++ over glibc)"),
    ("newarr", "C++ new[]+delete[] (libstdc++ over glibc)"),
    ("jemalloc", "jemalloc malloc+free"),
    ("mimalloc", "mimalloc malloc+free"),
    ("tcmalloc", "tcmalloc malloc+free"),
    ("rust", "Rust Box with the mimalloc crate"),
]
# The allocation loops: CHURN_PAIRS alloc+free pairs each, so a cost per pair.
CHURNS = [f[0] for f in FAMILIES] + ["churn10"]
MEMTRACKS = ["memtrack", "memtrack-rss"]
# What call stacks may cost (issue 32): each tool's median wall over memtrack-nostacks's, at most
# this much. memtrack is the default recording, which samples stacks.
STACK_TARGETS = [("memtrack", 1.05), ("memtrack-stacks", 1.3)]


class Run:
    def __init__(self, fields):
        self.wall, self.user, self.sys = (float(x) for x in fields[3:6])
        self.maxrss_kib = int(fields[6])
        self.status = int(fields[7])
        self.extra = {}
        for word in " ".join(fields[8:]).split():
            if "=" in word:
                k, v = word.split("=", 1)
                self.extra[k] = v

    def num(self, key):
        v = self.extra.get(key)
        try:
            return float(v)
        except (TypeError, ValueError):
            return None


def load(path):
    """Runs by (workload, tool); runs that exited non-zero are counted apart, not timed."""
    runs = defaultdict(list)
    failed = defaultdict(int)
    for line in open(path):
        fields = line.rstrip("\n").split("\t")
        if len(fields) < 8:
            continue
        run = Run(fields)
        if run.status != 0:
            failed[(fields[0], fields[1])] += 1
        else:
            runs[(fields[0], fields[1])].append(run)
    return runs, failed


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def secs(x):
    if x is None:
        return "-"
    if x < 0.1:
        return "%.1f ms" % (x * 1e3)
    if x < 10:
        return "%.3f s" % x
    return "%.1f s" % x


def wall_cell(rs):
    w = [r.wall for r in rs]
    return "%s (%s-%s)" % (secs(median(w)), secs(min(w)), secs(max(w)))


def size(b):
    if b is None:
        return "-"
    for unit in ["B", "KiB", "MiB", "GiB"]:
        if b < 1024 or unit == "GiB":
            return ("%.0f %s" if unit == "B" else "%.1f %s") % (b, unit)
        b /= 1024


def parse_size(s):
    """'132.3MiB' -> bytes"""
    if not s:
        return None
    for unit, mult in [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1)]:
        if s.endswith(unit):
            try:
                return float(s[: -len(unit)]) * mult
            except ValueError:
                return None
    return None


def ratio(r, target):
    """'1.02x': a ratio to compare with target, in three decimals when two would round a ratio
    over the target down onto it."""
    cell = "%.2f" % r
    if r > target and float(cell) <= target:
        cell = "%.3f" % r
    return cell + "x"


def ratio_cell(r, target):
    """'1.02x', or '1.41x (over 1.3x)': a ratio marked against its target."""
    return ratio(r, target) + (" (over %gx)" % target if r > target else "")


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def main():
    if sys.argv[1] == "--into":
        doc, part = sys.argv[2], sys.argv[3]
        text = open(doc).read()
        body = open(part).read()
        if BEGIN in text and END in text:
            head, rest = text.split(BEGIN, 1)
            tail = rest.split(END, 1)[1]
            text = head + BEGIN + "\n" + body + END + tail
        else:
            text = text.rstrip("\n") + "\n\n" + BEGIN + "\n" + body + END + "\n"
        open(doc, "w").write(text)
        return

    runs, failed_runs = load(sys.argv[1])
    meta = dict(line.rstrip("\n").split("=", 1) for line in open(sys.argv[2]) if "=" in line)
    commands = [line.rstrip("\n").split("\t") for line in open(sys.argv[3]) if line.strip()]
    tools = [t for t in TOOLS if any((w, t) in runs for w in WORKLOADS)]
    workloads = [w for w in WORKLOADS if any((w, t) in runs for t in tools)]
    out = []
    p = out.append

    def med_wall(w, t):
        rs = runs.get((w, t))
        return median([r.wall for r in rs]) if rs else None

    def default_stacks():
        """What the default recording's runs walked, from their stacks= words: the table says
        what was measured, not what the default is meant to be."""
        modes = defaultdict(int)
        for (w, t), rs in runs.items():
            for r in rs:
                # Only the workloads' runs: the bystander's recordings have no such words.
                if t == "memtrack" and w in workloads:
                    mode = {"none": "no stacks", "exact": "every stack",
                            "sampled": "sampled stacks, one walk per %s requested on average"
                            % size(r.num("sample_bytes"))}.get(r.extra.get("stacks"),
                                                               "stacks not known")
                    modes[mode] += 1
        return "; ".join("%s, in %d run%s" % (m, n, "s" if n > 1 else "")
                         for m, n in sorted(modes.items())) or "no runs"

    # --- the run ------------------------------------------------------------------------------
    foreign = sum(1 for rs in runs.values() for r in rs if (r.num("foreign") or 0) > 0)
    total = sum(len(rs) for rs in runs.values())
    failed = ["%s under %s (%d)" % (k[0], TOOL_NAMES.get(k[1], k[1]), n)
              for k, n in sorted(failed_runs.items())]
    p("Generated by `scripts/bench.sh` (%s mode) on %s: %s runs of every combination, interleaved, "
      "medians with (min-max)." % (meta.get("mode"), meta.get("date"), meta.get("runs")))
    p("")
    p("- Machine: %s, %s cores, %s, Linux %s, glibc %s. Load average at start %s, at end %s; "
      "%s s in all." % (meta.get("cpu"), meta.get("cores"), meta.get("memory"),
                        meta.get("kernel"), meta.get("glibc"), meta.get("load_start"),
                        meta.get("load_end"), meta.get("duration_s")))
    p("- Tools: memtrack %s, heaptrack %s, %s, bpftrace %s; workloads with gcc %s, Python %s, "
      "xz %s, git %s." % (meta.get("memtrack"), meta.get("heaptrack"), meta.get("valgrind"),
                          meta.get("bpftrace"), meta.get("gcc"), meta.get("python"),
                          meta.get("xz"), meta.get("git")))
    p("- bcc memleak: not measured: %s." % (meta.get("memleak_why") or "not requested"))
    p("- memtrack is the default recording (`record --no-rss`, no stack flag), which walked: "
      "%s." % default_stacks())
    p("- Sizes: churn %s malloc(64)+free pairs; mixed %s calls; storm %s calls; threads %s "
      "(processes x threads x malloc+free pairs)." % (
          meta.get("churn_pairs"), meta.get("mixed_ops"), meta.get("storm"),
          meta.get("threads")))
    p("- Measurements taken while someone else's uprobe_multi links were attached (another "
      "recording on the machine, which taxes every process): %d of %d." % (foreign, total))
    if failed:
        p("- Runs that exited non-zero, left out of every figure: %s (see target/bench/run/*.log)."
          % ", ".join(failed))
    if meta.get("mode") == "quick":
        p("- **Quick mode: a smoke run** of small inputs and few runs, to check that everything "
          "works; one slow run moves its median. Quote only a full run.")
    p("")

    # --- wall time and slowdown ----------------------------------------------------------------
    p("### Wall time")
    p("")
    p(table(["workload"] + [TOOL_NAMES[t] for t in tools],
            [[w] + [wall_cell(runs[(w, t)]) if (w, t) in runs else "-" for t in tools]
             for w in workloads]))
    p("")
    p("### Slowdown against untraced (median / median)")
    p("")
    rows = []
    for w in workloads:
        base = med_wall(w, "untraced")
        row = [w]
        for t in tools[1:]:
            m = med_wall(w, t)
            row.append("%.2fx" % (m / base) if m and base else "-")
        rows.append(row)
    p(table(["workload"] + [TOOL_NAMES[t] for t in tools[1:]], rows))
    p("")

    # --- per call ------------------------------------------------------------------------------
    def per_call(w, t, calls):
        """Added seconds per call: the tool's time on w minus its time on `true` (its fixed
        cost), minus the untraced work per call."""
        a, f = med_wall(w, t), med_wall("true", t)
        ua, uf = med_wall(w, "untraced"), med_wall("true", "untraced")
        if None in (a, f, ua, uf):
            return None
        return ((a - f) - (ua - uf)) / calls

    p("### Cost per call")
    p("")
    p("Added time per malloc(64)+free pair on churn and per allocator call on mixed: the tool's "
      "median on the workload minus its median on `true` (its fixed cost), minus the untraced "
      "time of the same work, divided by the number of pairs (calls).")
    p("")
    churn_n = float(meta.get("churn_pairs", 0) or 0)
    mixed_n = float(meta.get("mixed_ops", 0) or 0)
    cost = {}
    rows = []
    for t in tools[1:]:
        c = per_call("churn", t, churn_n) if churn_n else None
        m = per_call("mixed", t, mixed_n) if mixed_n else None
        cost[t] = (c, m)
        rows.append([TOOL_NAMES[t], "%.3f us" % (c * 1e6) if c is not None else "-",
                     "%.3f us" % (m * 1e6) if m is not None else "-"])
    p(table(["tool", "churn, per pair", "mixed, per call"], rows))
    p("")
    ratios = []
    for t in MEMTRACKS:
        if t not in cost:
            continue
        for i, w in enumerate(["churn", "mixed"]):
            mt = cost[t][i]
            fl = cost.get("floor", (None, None))[i]
            ht = cost.get("heaptrack", (None, None))[i]
            ratios.append([TOOL_NAMES[t], w,
                           "%.2f" % (mt / fl) if mt and fl else "-",
                           "%.2f" % (mt / ht) if mt and ht else "-"])
    p(table(["memtrack", "workload", "/ floor", "/ heaptrack"], ratios))
    p("")

    # --- per allocator family -----------------------------------------------------------------
    fam_cost = {}
    fam_rows = []
    for w, what in FAMILIES:
        if (w, "untraced") not in runs:
            continue
        row = [w, what]
        for t in ["memtrack", "floor", "heaptrack"]:
            c = per_call(w, t, churn_n) if churn_n and (w, t) in runs else None
            fam_cost[(w, t)] = c
            row.append("%.3f us" % (c * 1e6) if c is not None else "-")
        fam_rows.append(row)
    glibc = fam_cost.get(("churn", "memtrack"))
    if fam_rows:
        p("### Per allocator family")
        p("")
        p("Added time per alloc+free pair of each family's churn (%s pairs of 64 bytes), as in "
          "\"Cost per call\", and memtrack's cost relative to glibc's malloc+free in the same "
          "run (target: at most 1.25x). The floor is empty BPF programs on exactly memtrack's "
          "sites; C++ pairs hit more sites than a malloc+free pair (operator new, then malloc; "
          "operator delete, then free), so their floor is higher too." % meta.get("churn_pairs"))
        p("")
        for row, (w, _) in zip(fam_rows, [f for f in FAMILIES if (f[0], "untraced") in runs]):
            c, fl = fam_cost.get((w, "memtrack")), fam_cost.get((w, "floor"))
            row.append("%.2fx" % (c / glibc) if c and glibc else "-")
            row.append("%.2f" % (c / fl) if c and fl else "-")
        p(table(["workload", "allocates with", "memtrack", "floor", "heaptrack",
                 "memtrack / glibc's", "memtrack / floor"], fam_rows))
        p("")

    # --- call stacks: the default's sample and --stacks against --no-stacks (issue 32) -----------
    stack_rows = []
    over = {t: [] for t, _ in STACK_TARGETS}
    for w in workloads:
        nostacks = med_wall(w, "memtrack-nostacks")
        if nostacks is None or not any((w, t) in runs for t, _ in STACK_TARGETS):
            continue
        row = [w, secs(med_wall(w, "untraced")), secs(nostacks)]
        row += [secs(med_wall(w, t)) for t, _ in STACK_TARGETS]
        for t, target in STACK_TARGETS:
            m = med_wall(w, t)
            row.append(ratio_cell(m / nostacks, target) if m else "-")
            if m and m / nostacks > target:
                over[t].append("%s %s" % (w, ratio(m / nostacks, target)))
        # Added time per alloc+free pair, net of the fixed cost, as in "Cost per call": the
        # loops' ratios without the start-up that `true` measures.
        base = per_call(w, "memtrack-nostacks", churn_n) if w in CHURNS and churn_n else None
        base = base if base and base > 0 else None
        added = [per_call(w, t, churn_n) if base else None for t, _ in STACK_TARGETS]
        row.append(", ".join("%.2fx" % (c / base) if c else "-" for c in added) if base else "-")
        stack_rows.append(row)
    if stack_rows:
        p("### Call stacks: the default's sample and `--stacks`, against `--no-stacks`")
        p("")
        p("Median wall time of %s interleaved rounds (every tool once per round, side by side) of "
          "`record --no-rss` three ways: with `--no-stacks`; with no stack flag, the default "
          "recording (here it walked %s); and with `--stacks`, every allocation's stack. The "
          "ratios are of those medians, each against its target (issue 32): the default at "
          "most 1.05x `--no-stacks`, `--stacks` at most 1.3x, on every workload and on `true`. "
          "For the allocation loops "
          "(%s), also the ratios of added time per alloc+free pair (as in \"Cost per call\", "
          "net of each tool's time on `true`), default then `--stacks`; churn10 runs churn's "
          "loop five calls deeper, for what the depth of a walk costs."
          % (meta.get("runs", "?"), default_stacks(),
             ", ".join(w for w in CHURNS if w in workloads) or "none in this run"))
        p("")
        p(table(["workload", "untraced", "--no-stacks", "default", "--stacks",
                 "default / --no-stacks (<= 1.05x)", "--stacks / --no-stacks (<= 1.3x)",
                 "added-cost ratio: default, --stacks"], stack_rows))
        p("")

    # --- the leak scan's live map (issue 36): memtrack against memtrack --no-leak-scan --------
    scan_rows = []
    for w in workloads:
        a, b = runs.get((w, "memtrack")), runs.get((w, "memtrack-noscan"))
        if not a or not b:
            continue
        cpu = lambda rs: median([(r.num("rec_user") or 0) + (r.num("rec_sys") or 0) for r in rs])
        peak = lambda rs: median([parse_size(r.extra.get("rec_peak")) for r in rs])
        wa, wb, ca, cb = med_wall(w, "memtrack"), med_wall(w, "memtrack-noscan"), cpu(a), cpu(b)
        scan_rows.append([w, secs(wa), secs(wb), "%.2f" % (wa / wb) if wb else "-",
                          secs(ca), secs(cb), "%.2f" % (ca / cb) if cb else "-",
                          size(peak(a)), size(peak(b))])
    if scan_rows:
        p("### The leak scan's live map")
        p("")
        p("memtrack (leak scan on: the drain keeps each process's live blocks in a map, and "
          "scans each process at its exit) against `--no-leak-scan`, medians of %s runs; a "
          "ratio above 1 is the scan's cost. Recorder CPU is the recorder's own user + system "
          "time, where the map's inserts and removes are paid." % meta.get("runs", "?"))
        p("")
        p(table(["workload", "wall, scan on", "wall, --no-leak-scan", "ratio",
                 "recorder CPU, on", "recorder CPU, off", "ratio", "recorder peak, on",
                 "recorder peak, off"], scan_rows))
        p("")

    # --- memtrack's own figures ----------------------------------------------------------------
    p("### memtrack's recordings")
    p("")
    p("Events and processes of one run (median), lost events (the most in any run), bytes per "
      "event on disk (file size / events), and the recorder's own CPU time (user + system) and "
      "peak resident memory (its ring buffer, 16 MiB here, mapped twice, is most of it).")
    p("")
    rows = []
    for w in workloads:
        for t in MEMTRACKS + ["memtrack-nostacks", "memtrack-stacks", "floor"]:
            rs = runs.get((w, t))
            if not rs:
                continue
            ev = median([r.num("events") for r in rs])
            fb = median([r.num("file_bytes") for r in rs])
            lost = max((r.num("lost") or 0) for r in rs)
            cpu = median([(r.num("rec_user") or 0) + (r.num("rec_sys") or 0) for r in rs])
            peak = median([parse_size(r.extra.get("rec_peak")) for r in rs])
            rows.append([w, TOOL_NAMES[t], "%d" % ev if ev is not None else "-",
                         "%d" % median([r.num("processes") for r in rs] or [0]),
                         "%d" % lost, "%.2f" % (fb / ev) if ev and fb else "-",
                         secs(cpu), size(peak)])
    p(table(["workload", "tool", "events", "processes", "lost", "bytes/event", "recorder CPU",
             "recorder peak"], rows))
    p("")

    # --- process tree --------------------------------------------------------------------------
    p("### Did each tool see the whole process tree?")
    p("")
    p("Allocations each tool reported (processes it reported them for), median of the runs; "
      "memtrack's count is the reference. heaptrack writes one file for the command it starts; "
      "DHAT one file per process (`--trace-children=yes`); the bpftrace script counts per pid.")
    p("")
    rows = []
    for w in workloads:
        ref = runs.get((w, "memtrack"))
        if not ref or median([r.num("processes") for r in ref]) in (None, 1):
            continue
        ref_allocs = median([r.num("allocs") for r in ref])
        row = [w]
        for t in ["memtrack", "heaptrack", "dhat", "bpftrace"]:
            rs = runs.get((w, t))
            if not rs:
                row.append("-")
                continue
            a = median([r.num("allocs") for r in rs])
            n = median([r.num("processes") for r in rs])
            whole = a is not None and ref_allocs and a >= 0.9 * ref_allocs
            row.append("%s (%s): %s" % ("%d" % a if a is not None else "?",
                                        "%d" % n if n is not None else "?",
                                        "yes" if whole else "**no**"))
        rows.append(row)
    p(table(["workload", "memtrack", "heaptrack", "DHAT", "bpftrace"], rows))
    p("")

    # --- fixed cost ----------------------------------------------------------------------------
    p("### Fixed cost: `true`")
    p("")
    rows = []
    base = med_wall("true", "untraced")
    for t in tools[1:]:
        rs = runs.get(("true", t))
        if rs and base is not None:
            ds = [r.wall - base for r in rs]
            rows.append([TOOL_NAMES[t], "%s (%s-%s)" % (secs(median(ds)), secs(min(ds)),
                                                      secs(max(ds)))])
    p(table(["tool", "added to `true` (%s)" % secs(base)], rows))
    p("")

    # --- bystander -----------------------------------------------------------------------------
    by = {m: rs for (k, m), rs in runs.items() if k == "bystander"}
    if by:
        p("### An untraced process beside a recording")
        p("")
        p("The churn workload, not recorded, while a recording of `cat FIFO` runs beside it. "
          "Uprobes are attached to a file for the whole machine and filter by process in BPF. "
          "memtrack probes private copies of the allocator libraries that only the recorded "
          "tree maps (issue 19), so the churn beside it runs its untouched libc; with "
          "`--no-private-libs` (and bpftrace) the probes are on the machine's libc, and every "
          "process that calls malloc traps into the kernel.")
        p("")
        alone = median([r.wall for r in by.get("alone", [])])
        rows = []
        for m in ["alone", "memtrack", "memtrack-shared", "memtrack-rss", "floor", "floor-shared",
                  "bpftrace"]:
            if m not in by:
                continue
            w = median([r.wall for r in by[m]])
            rows.append([m if m == "alone" else "beside " + TOOL_NAMES[m], wall_cell(by[m]),
                         "%.1fx" % (w / alone) if alone else "-",
                         "%.3f us" % ((w - alone) / churn_n * 1e6) if alone and churn_n else "-"])
        p(table(["untraced churn", "wall", "slowdown", "added per pair"], rows))
        p("")

    # --- report speed --------------------------------------------------------------------------
    rep = {m: rs for (k, m), rs in runs.items() if k == "report"}
    if rep:
        p("### Report speed")
        p("")
        p("`memtrack report FILE --format json`, whole process (reading, checking, accounting, "
          "rendering).")
        p("")
        rows = []
        for name, rs in sorted(rep.items()):
            ev = median([r.num("events") for r in rs])
            w = median([r.wall for r in rs])
            cpu = median([r.user + r.sys for r in rs])
            rows.append([name, "%d" % ev, size(median([r.num("file_bytes") for r in rs])),
                         wall_cell(rs), "%.1f M" % (ev / w / 1e6),
                         "%.1f M" % (ev / cpu / 1e6) if cpu else "-",
                         size(median([r.maxrss_kib * 1024 for r in rs]))])
        p(table(["recording", "events", "file", "wall", "events/s (wall)", "events/s (CPU)",
                 "peak resident"], rows))
        p("")

    # --- targets -------------------------------------------------------------------------------
    p("### Targets")
    p("")
    rows = []
    c_mt, c_fl = cost.get("memtrack", (None,))[0], cost.get("floor", (None,))[0]
    if c_mt and c_fl:
        r = c_mt / c_fl
        rows.append(["churn: cost per pair <= 1.25 x floor",
                     "%.3f / %.3f us = %.2f" % (c_mt * 1e6, c_fl * 1e6, r),
                     "holds" if r <= 1.25 else "**fails**"])
    for w, what in FAMILIES[1:]:
        c = fam_cost.get((w, "memtrack"))
        if c and glibc:
            r = c / glibc
            rows.append(["%s: cost per pair <= 1.25 x glibc's" % w,
                         "%.3f / %.3f us = %.2f" % (c * 1e6, glibc * 1e6, r),
                         "holds" if r <= 1.25 else "**fails**"])
    for w in ["gcc", "gxx"]:
        m, u, h = med_wall(w, "memtrack"), med_wall(w, "untraced"), med_wall(w, "heaptrack")
        if m and u:
            rows.append(["%s -O2 -c: slowdown <= 3x, whole tree" % ("gcc" if w == "gcc" else "g++"),
                         "%.2fx (heaptrack %s)" % (m / u, "%.2fx" % (h / u) if h else "-"),
                         "holds" if m / u <= 3 else "**fails**"])
    for t in MEMTRACKS:
        rs = runs.get(("true", t))
        if rs and base is not None:
            d = med_wall("true", t) - base
            rows.append(["`record -- true` <= 50 ms over untraced (%s)" % TOOL_NAMES[t],
                         secs(d), "holds" if d <= 0.05 else "**fails**"])
    for t, target in STACK_TARGETS:
        measured = [med_wall(w, t) / med_wall(w, "memtrack-nostacks") for w in workloads
                    if med_wall(w, t) and med_wall(w, "memtrack-nostacks")]
        if measured:
            rows.append(["%s at most %gx `--no-stacks` on every workload and `true`" % (
                "the default recording" if t == "memtrack" else "`--stacks`", target),
                         "highest %s; over: %s" % (ratio(max(measured), target),
                                                   ", ".join(over[t]) or "none"),
                         "holds" if not over[t] else "**fails**"])

    def partial(w, t):
        """Whether tool t saw clearly fewer allocations than memtrack on w (part of the tree)."""
        ref = median([r.num("allocs") for r in runs.get((w, "memtrack"), [])])
        a = median([r.num("allocs") for r in runs.get((w, t), [])])
        return bool(ref and a is not None and a < 0.9 * ref)

    for t in MEMTRACKS:
        worse = []
        for w in workloads:
            if w == "true":
                continue
            m = med_wall(w, t)
            peers = ["bpftrace", "dhat"] + (["heaptrack"] if w in REAL else [])
            for q in peers:
                o = med_wall(w, q)
                if m and o and m >= o:
                    worse.append("%s: %s %.2fx vs %s %.2fx%s" % (
                        w, TOOL_NAMES[t], m / med_wall(w, "untraced"), TOOL_NAMES[q],
                        o / med_wall(w, "untraced"),
                        " (%s traced only part of the tree)" % TOOL_NAMES[q]
                        if partial(w, q) else ""))
        if any(med_wall(w, t) for w in workloads):
            rows.append(["slowdown below bpftrace and DHAT everywhere, below heaptrack on real "
                         "programs (%s)" % TOOL_NAMES[t],
                         "; ".join(worse) if worse else "lower on every workload",
                         "holds" if not worse else "**fails**"])
    for w, what in (("storm", "storm"), ("threads", "16-thread storm")):
        for t in MEMTRACKS:
            rs = runs.get((w, t))
            if rs:
                lost = max((r.num("lost") or 0) for r in rs)
                cpu = median([(r.num("rec_user") or 0) + (r.num("rec_sys") or 0) for r in rs])
                rows.append(["%s: zero lost events, default ring (%s)" % (what, TOOL_NAMES[t]),
                             "%d lost (most in a run); recorder CPU %s" % (lost, secs(cpu)),
                             "holds" if lost == 0 else "**fails**"])
    rs = runs.get(("churn", "memtrack"))
    if rs:
        bpe = median([r.num("file_bytes") / r.num("events") for r in rs
                      if r.num("events")])
        rows.append(["churn: <= 8 bytes per event on disk", "%.2f" % bpe,
                     "holds" if bpe <= 8 else "**fails**"])
    if rep:
        speeds = {n: median([r.num("events") for r in rs]) / median([r.wall for r in rs])
                  for n, rs in rep.items()}
        worst = min(speeds.values())
        rows.append(["report >= 20 M events/s", ", ".join(
            "%s %.1f M" % (n, s / 1e6) for n, s in sorted(speeds.items())),
            "holds" if worst >= 20e6 else "**fails**"])
    p(table(["target", "measured", ""], rows))
    p("")

    # --- commands ------------------------------------------------------------------------------
    p("### Commands")
    p("")
    p("Paths relative to the repository; `target/bench/run/W.T` is each run's output.")
    p("")
    p("```")
    for w, t, c in commands:
        p("%-6s %-17s %s" % (w, t, c))
    p("```")
    print("\n".join(out))


if __name__ == "__main__":
    main()
