//! The views over time on real recordings: `report --format html` opened in Debian's headless
//! chromium (testdata/node/check-page.js drives it with puppeteer-core and prints what the page
//! shows), and `--format timeline-csv` / `timeline-json`, all checked against the JSON report
//! of the same recording and against the recorded events. Run under the BPF lock:
//! `flock /tmp/memtrack-bpf.lock cargo test --test views_html -- --test-threads=1`.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use memtrack::format::EventKind;
use memtrack::units::{format_bytes, format_duration_ns};
use serde_json::Value;

use common::*;

/// The recording of example.c with stacks, made once; None when this machine cannot record.
fn recording(test: &str) -> Option<&'static Path> {
    example_with_stacks(test, "views_html")
}

/// `memtrack report PATH ARGS...` (asserted to succeed), its standard output.
fn report(path: &Path, args: &[&str]) -> String {
    let mut all = vec!["report", path.to_str().unwrap()];
    all.extend_from_slice(args);
    run(&all).expect_code(0).stdout
}

/// The page's own data: the JSON in `<script id="memtrack-data">`, as the page's script reads it
/// (the page escapes `<` as `\u003c`, which JSON reads back).
fn page_data(html: &str) -> Value {
    let open = "<script type=\"application/json\" id=\"memtrack-data\">";
    let start = html.find(open).expect("the page embeds its data") + open.len();
    let end = start + html[start..].find("</script>").expect("the data ends");
    serde_json::from_str(&html[start..end]).expect("the page's data is JSON")
}

/// What a browser shows of `page`: check-page.js's JSON, with a screenshot at `screenshot` and
/// the flame graphs searched for `term`. None (after `skip`) when chromium, node or
/// puppeteer-core is missing.
fn open_in_chromium(test: &str, page: &Path, screenshot: &Path, term: &str) -> Option<Value> {
    let chromium =
        std::env::var_os("CHROMIUM").map_or_else(|| "/usr/bin/chromium".into(), PathBuf::from);
    let node_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/node");
    if !chromium.exists() {
        skip(test, &format!("no chromium at {}", chromium.display()));
        return None;
    }
    if !node_dir.join("node_modules/puppeteer-core").exists() {
        skip(
            test,
            "puppeteer-core is not installed (scripts/setup.sh installs testdata/node)",
        );
        return None;
    }
    let mut cmd = Command::new("node");
    cmd.arg(node_dir.join("check-page.js"))
        .arg(page)
        .arg(screenshot)
        .arg(term)
        .env("CHROMIUM", &chromium);
    let run = match cmd.output() {
        Ok(output) => Run::new(format!("{cmd:?}"), output),
        Err(e) => {
            skip(test, &format!("cannot run node: {e}"));
            return None;
        }
    }
    .expect_code(0);
    Some(serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}\n{}", run.describe())))
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn int(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// One chart of the page (`heap` or `resident`) against the scope's peak `bytes` at `at_ns` and
/// the timeline's run series: the run curve is drawn, its peak mark and label carry the
/// report's value and moment, the mark sits where that moment and value map on the plot, and the
/// curve's highest point is the mark (so the peak is not drawn lower than it was).
fn check_chart(chart: &Value, key: &str, series: &str, bytes: u64, at_ns: u64, bucket_ns: u64) {
    let plot = &chart["plot"];
    let (left, right) = (num(&plot["left"]), num(&plot["right"]));
    let (top, bottom) = (num(&plot["top"]), num(&plot["bottom"]));
    let (end_ns, y_max) = (num(&plot["end_ns"]), num(&plot["y_max"]));
    let paths = chart["paths"].as_array().expect("paths");
    // The scope's curve is drawn first.
    let run = &paths[0];
    assert_eq!(run["series"], series, "{key}");
    let points = run["points"].as_array().unwrap();
    assert!(
        points.len() > 4,
        "{key}: a curve of {} points",
        points.len()
    );
    assert!(
        num(&run["width"]) > 0.99 * (right - left),
        "{key}: {}",
        run["width"]
    );
    assert!(
        num(&run["height"]) > 0.5 * (bottom - top),
        "{key}: {}",
        run["height"]
    );

    let label = &chart["label"];
    assert_eq!(int(&label["bytes"]), bytes, "{key}: {label}");
    assert_eq!(int(&label["at_ns"]), at_ns, "{key}: {label}");
    assert_eq!(
        label["text"],
        format!(
            "peak {} at {}",
            format_bytes(bytes),
            format_duration_ns(at_ns)
        ),
        "{key}"
    );
    let mark = chart["peaks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["series"] == series)
        .unwrap_or_else(|| panic!("{key}: no peak mark"));
    assert_eq!((int(&mark["bytes"]), int(&mark["at_ns"])), (bytes, at_ns));
    let x = left + (right - left) * at_ns as f64 / end_ns;
    let y = top + (bottom - top) * (1.0 - bytes as f64 / y_max);
    assert!(
        (num(&mark["cx"]) - x).abs() < 0.01,
        "{key}: mark at x {} not {x}",
        mark["cx"]
    );
    assert!(
        (num(&mark["cy"]) - y).abs() < 0.01,
        "{key}: mark at y {} not {y}",
        mark["cy"]
    );
    // The curve's highest point (smallest y) is the peak, in the bucket holding its moment.
    let (peak_x, peak_y) =
        points
            .iter()
            .map(|p| (num(&p[0]), num(&p[1])))
            .fold(
                (0.0, f64::MAX),
                |best, p| if p.1 < best.1 { p } else { best },
            );
    assert!(
        (peak_y - y).abs() < 0.01,
        "{key}: the curve peaks at y {peak_y}, the report at {y}"
    );
    let bucket_px = (right - left) * bucket_ns as f64 / end_ns;
    assert!(
        peak_x <= x + 0.01 && x - peak_x <= bucket_px + 0.01,
        "{key}: the curve peaks at x {peak_x}, the report's moment is at {x} (bucket {bucket_px} px)"
    );
}

/// The fraction, in per cent, of the folded lines of `view` (bytes) whose stack has `function`.
fn folded_share(path: &Path, view: &str, function: &str) -> f64 {
    let text = report(path, &["--format", "folded", "--view", view]);
    let (mut with, mut all) = (0u64, 0u64);
    for line in text.lines() {
        let (stack, value) = line.rsplit_once(' ').expect("stack value");
        let value: u64 = value.parse().expect("a count");
        all += value;
        if stack.split(';').any(|f| f == function) {
            with += value;
        }
    }
    if all == 0 {
        0.0
    } else {
        100.0 * with as f64 / all as f64
    }
}

#[test]
fn html_page_in_headless_chromium() {
    let test = "html_page_in_headless_chromium";
    let Some(path) = recording(test) else {
        return;
    };
    let page = scratch_file("report.html");
    report(path, &["--format", "html", "-o", page.to_str().unwrap()]);
    let artifacts = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let screenshot = artifacts.join("report-html.png");
    let _ = std::fs::remove_file(&screenshot);
    // example.c's `table` function allocates most of the heap: the flame graphs search for it.
    let Some(shown) = open_in_chromium(test, &page, &screenshot, "table") else {
        return;
    };
    let json = report_json(path, &[]);
    let timeline: Value =
        serde_json::from_str(&report(path, &["--format", "timeline-json"])).unwrap();

    assert_eq!(
        shown["problems"],
        serde_json::json!([]),
        "console errors, exceptions or requests"
    );
    assert_eq!(shown["drawn"], true);

    let heap = &json["totals"]["heap"];
    let bucket_ns = int(&timeline["bucket_ns"]);
    let totals = &json["totals"];
    for (key, peak) in [
        ("heap", [&heap["peak_live_bytes"], &heap["peak_live_at_ns"]]),
        (
            "resident",
            [
                &totals["resident"]["peak_bytes"],
                &totals["resident"]["peak_at_ns"],
            ],
        ),
    ] {
        let chart = &shown["charts"][key];
        let paths = chart["paths"].as_array().unwrap();
        assert!(paths.len() > 2, "{key}: the processes' curves are missing");
        let run = paths[0]["points"].as_array().unwrap();
        assert!(
            run.len() > 100,
            "{key}: a run curve of {} points",
            run.len()
        );
        check_chart(chart, key, "run", int(peak[0]), int(peak[1]), bucket_ns);
    }
    assert_eq!(
        shown["summary"]["peak-heap"],
        format!(
            "peak heap {} at {}",
            format_bytes(int(&heap["peak_live_bytes"])),
            format_duration_ns(int(&heap["peak_live_at_ns"]))
        )
    );

    // The process table: the JSON's processes, in its order, with their numbers.
    let header: Vec<&str> = shown["tree"]["header"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_str().unwrap())
        .collect();
    let column = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("{name}: {header:?}"))
    };
    let rows = shown["tree"]["rows"].as_array().unwrap();
    let processes = json["processes"].as_array().unwrap();
    assert_eq!(rows.len(), processes.len());
    assert!(processes.len() >= 3, "example.c forks and runs true");
    for (row, p) in rows.iter().zip(processes) {
        let cells = row["cells"].as_array().unwrap();
        let cell = |name: &str| cells[column(name)].as_str().unwrap().trim().to_string();
        let h = &p["own"]["heap"];
        assert_eq!(cell("PID"), p["pid"].to_string());
        assert_eq!(row["data"]["peak-heap"], h["peak_live_bytes"].to_string());
        assert_eq!(cell("ALLOCS"), h["allocs"].to_string());
        assert_eq!(cell("FREES"), h["frees"].to_string());
        assert_eq!(cell("ALLOCATED"), format_bytes(int(&h["bytes_allocated"])));
        assert_eq!(cell("PEAK HEAP"), format_bytes(int(&h["peak_live_bytes"])));
        assert_eq!(cell("LEAKED"), format_bytes(int(&h["leaked"]["bytes"])));
        assert_eq!(
            cell("PEAK RSS"),
            format_bytes(int(&p["own"]["resident"]["peak_bytes"]))
        );
        assert_eq!(cell("EXIT"), p["exit"]["exit_code"].to_string());
    }

    // Three flame graphs of the heap as wide as the page, and a fourth of resident memory (the
    // recording has its faults' stacks: rss_stat is on by default), each with hover details
    // and a working search.
    assert!(
        report_json(path, &["--stacks"])["stacks"]["resident"].is_object(),
        "a --stacks recording has resident sites"
    );
    let section = num(&shown["flames_section_width"]);
    let frames = shown["flames"].as_array().unwrap();
    let titles: Vec<&str> = frames
        .iter()
        .map(|f| f["title"].as_str().unwrap())
        .collect();
    assert_eq!(
        titles,
        [
            "live bytes at the heap peak",
            "bytes allocated",
            "bytes leaked",
            "resident memory at the resident peak"
        ]
    );
    let inside = shown["flame_frames"].as_array().unwrap();
    assert_eq!(inside.len(), 4);
    for ((frame, graph), view) in
        frames
            .iter()
            .zip(inside)
            .zip(["peak", "allocated", "leaked", "resident"])
    {
        assert!(
            num(&frame["width"]) >= section - 1.0,
            "{view}: frame {} of {section}",
            frame["width"]
        );
        let svg = num(&graph["svg_width"]);
        assert!(
            svg >= 0.98 * section,
            "{view}: flame graph {svg} px wide in {section} px"
        );
        assert!(
            num(&graph["scroll_width"]) <= num(&frame["width"]),
            "{view}: scrolls sideways"
        );
        assert!(
            num(&frame["height"]) >= num(&graph["svg_height"]),
            "{view}: cut off"
        );
        assert!(int(&graph["frames"]) > 3, "{view}: {graph}");
        assert_eq!(
            graph["hover_details"],
            format!("Function: {}", graph["hovered"].as_str().unwrap()),
            "{view}"
        );
        // inferno shows the matched share with one decimal, and nothing when nothing matched.
        let share = folded_share(path, view, "table");
        let matched = graph["search"]["matched"].as_str().unwrap().trim();
        if share == 0.0 {
            assert_eq!(matched, "", "{view}");
            assert_eq!(graph["search"]["highlighted"], 0, "{view}");
        } else {
            let got: f64 = matched
                .strip_prefix("Matched: ")
                .and_then(|m| m.strip_suffix('%'))
                .and_then(|m| m.parse().ok())
                .unwrap_or_else(|| panic!("{view}: {matched:?}"));
            assert!(
                (got - share).abs() <= 0.05,
                "{view}: matched {got}%, folded {share}%"
            );
            assert!(int(&graph["search"]["highlighted"]) >= 1, "{view}");
        }
    }
    assert!(
        folded_share(path, "allocated", "table") > 50.0,
        "example.c allocates in table()"
    );

    let png = std::fs::read(&screenshot).expect("the screenshot");
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 50_000,
        "{} bytes",
        png.len()
    );
    let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
    assert_eq!(width, 1400, "the screenshot is the viewport's width");
    println!("screenshot: {}", screenshot.display());
}

/// The run's live heap after each recorded event, replayed from the events alone (a block
/// belongs to the process that allocated it; a realloc frees its live old block first; exec and
/// exit drop the process's blocks), as (ns from the start, bytes), times clamped to move forward
/// as the timeline's are.
fn replayed_heap(path: &Path) -> Vec<(u64, u64)> {
    let (header, events, _) = read_recording(path);
    let mut blocks: HashMap<(u32, u64), u64> = HashMap::new();
    let mut live = 0u64;
    let mut now = 0u64;
    let mut out = Vec::new();
    let drop_process = |blocks: &mut HashMap<(u32, u64), u64>, live: &mut u64, pid: u32| {
        blocks.retain(|&(p, _), size| {
            if p == pid {
                *live -= *size;
            }
            p != pid
        });
    };
    for e in &events {
        let pid = e.pid;
        // The timeline's clock moves on the events it follows, not on module, coverage or
        // mapping records (whose times can run ahead of the events around them).
        let follows = matches!(
            e.kind,
            EventKind::Alloc { .. }
                | EventKind::Free { .. }
                | EventKind::Realloc { .. }
                | EventKind::Rss { .. }
                | EventKind::Exec(_)
                | EventKind::Exit { .. }
                | EventKind::Fork { .. }
                | EventKind::Control { .. }
        );
        if follows {
            now = now.max(e.ts_ns.saturating_sub(header.start_monotonic_ns));
        }
        match &e.kind {
            EventKind::Alloc { addr, size, .. } => {
                if let Some(old) = blocks.insert((pid, *addr), *size) {
                    live -= old;
                }
                live += size;
            }
            EventKind::Free { addr, .. } => {
                if let Some(old) = blocks.remove(&(pid, *addr)) {
                    live -= old;
                }
            }
            EventKind::Realloc {
                old_addr,
                addr,
                size,
                ..
            } => {
                if *old_addr != 0 {
                    if let Some(old) = blocks.remove(&(pid, *old_addr)) {
                        live -= old;
                    }
                }
                if *addr != 0 {
                    blocks.insert((pid, *addr), *size);
                    live += size;
                }
            }
            EventKind::Exec(_) | EventKind::Exit { .. } => {
                drop_process(&mut blocks, &mut live, pid)
            }
            _ => continue,
        }
        out.push((now, live));
    }
    out
}

#[test]
fn timeline_data_holds_the_pages_series_and_the_reports_peaks() {
    let Some(path) = recording("timeline_data_holds_the_pages_series_and_the_reports_peaks") else {
        return;
    };
    let json = report_json(path, &[]);
    let mut timeline: Value =
        serde_json::from_str(&report(path, &["--format", "timeline-json"])).unwrap();
    assert_eq!(timeline["schema_version"], json["schema_version"]);
    let page = page_data(&report(path, &["--format", "html"]));
    timeline.as_object_mut().unwrap().remove("schema_version");
    assert_eq!(
        page["timeline"], timeline,
        "the page draws the timeline-json document"
    );

    let series = timeline["series"].as_array().unwrap();
    let run = &series[0];
    assert_eq!(run["name"], "run");
    assert_eq!(int(&timeline["end_ns"]), int(&json["run"]["duration_ns"]));
    for (key, bytes, at) in [
        (
            "heap",
            &json["totals"]["heap"]["peak_live_bytes"],
            &json["totals"]["heap"]["peak_live_at_ns"],
        ),
        (
            "resident",
            &json["totals"]["resident"]["peak_bytes"],
            &json["totals"]["resident"]["peak_at_ns"],
        ),
    ] {
        let peak = &run[format!("{key}_peak")];
        assert_eq!((&peak["bytes"], &peak["at_ns"]), (bytes, at), "{key}");
        // The largest bucket maximum is the peak, first reached in the bucket holding its
        // moment (a flat top spans later buckets too).
        let points = run["points"].as_array().unwrap();
        let max = points.iter().map(|p| int(&p[format!("{key}_max")])).max();
        assert_eq!(max, bytes.as_u64(), "{key}");
        let top = points
            .iter()
            .find(|p| p[format!("{key}_max")] == *bytes)
            .unwrap();
        let start = int(&top["at_ns"]);
        assert!(
            start <= int(at) && int(at) < start + int(&run["bucket_ns"]),
            "{key}: {top}"
        );
    }
    // Each process's series peaks at its JSON peak.
    for s in &series[1..] {
        let Some(pid) = s["pid"].as_u64() else {
            continue;
        };
        let p = json["processes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["pid"] == pid)
            .unwrap();
        assert_eq!(
            s["heap_peak"]["bytes"], p["own"]["heap"]["peak_live_bytes"],
            "pid {pid}"
        );
        assert_eq!(
            s["heap_peak"]["at_ns"], p["own"]["heap"]["peak_live_at_ns"],
            "pid {pid}"
        );
        let max = s["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| int(&p["heap_max"]))
            .max();
        assert_eq!(
            max,
            p["own"]["heap"]["peak_live_bytes"].as_u64(),
            "pid {pid}"
        );
    }

    // Decimation: far fewer points than heap changes, and every bucket's maximum, minimum and
    // last value are those of the events replayed on their own.
    let replayed = replayed_heap(path);
    let points = run["points"].as_array().unwrap();
    let bucket = int(&run["bucket_ns"]);
    assert!(
        replayed.len() > 10 * points.len(),
        "{} changes in {} points",
        replayed.len(),
        points.len()
    );
    let mut want: Vec<(u64, u64, u64, u64)> = Vec::new(); // (start, max, min, last)
    let mut held = 0u64;
    for &(t, v) in &replayed {
        let start = t / bucket * bucket;
        match want.last_mut() {
            Some(b) if b.0 == start => {
                b.1 = b.1.max(v);
                b.2 = b.2.min(v);
                b.3 = v;
            }
            _ => want.push((start, v.max(held), v.min(held), v)),
        }
        held = v;
    }
    let got: Vec<(u64, u64, u64, u64)> = points
        .iter()
        .map(|p| {
            (
                int(&p["at_ns"]),
                int(&p["heap_max"]),
                int(&p["heap_min"]),
                int(&p["heap_last"]),
            )
        })
        .filter(|b| want.iter().any(|w| w.0 == b.0))
        .collect();
    let missing: Vec<_> = want
        .iter()
        .filter(|w| !got.iter().any(|g| g.0 == w.0))
        .collect();
    assert_eq!(
        got.len(),
        want.len(),
        "buckets with heap changes; not drawn: {missing:?}"
    );
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w, "bucket at {} ns: (start, max, min, last)", w.0);
    }

    // The CSV form: the same points, one row each, times in seconds with every digit.
    let csv = report(path, &["--format", "timeline-csv"]);
    let mut lines = csv.lines();
    assert!(lines
        .next()
        .unwrap()
        .starts_with("time_s,bucket_s,series,pid,heap_bytes_max"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let total: usize = series
        .iter()
        .map(|s| s["points"].as_array().unwrap().len())
        .sum();
    assert_eq!(rows.len(), total);
    let mut k = 0;
    for s in series {
        for p in s["points"].as_array().unwrap() {
            let row = &rows[k];
            k += 1;
            let ns = int(&p["at_ns"]);
            assert_eq!(
                row[0],
                format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
            );
            assert_eq!(row[2], s["name"].as_str().unwrap());
            let fields = [
                "heap_max",
                "heap_min",
                "heap_last",
                "resident_max",
                "resident_min",
                "resident_last",
            ];
            for (column, field) in row[4..10].iter().zip(fields) {
                assert_eq!(*column, p[field].to_string(), "{} {field}", s["name"]);
            }
        }
    }
}

/// testdata/fork_tree.c (a parent and three children, the third executing malloc_free): `--pid`
/// and `--tree` narrow the timeline and the page to their scope.
#[test]
fn pid_and_tree_narrow_the_timeline_and_the_page() {
    let test = "pid_and_tree_narrow_the_timeline_and_the_page";
    if !can_record(test) {
        return;
    }
    let target = fixture("malloc_free");
    let rec = record_fixture(
        "views_html_fork_tree",
        &[],
        "fork_tree",
        &[target.to_str().unwrap()],
    );
    assert_eq!(rec.run.code(), 0, "{}", rec.run.describe());
    let path = rec.path.as_path();
    let json = report_json(path, &[]);
    let processes = json["processes"].as_array().unwrap();
    assert_eq!(processes.len(), 4, "the parent and three children");
    let root = int(&processes[0]["pid"]);
    for p in processes {
        let pid = int(&p["pid"]);
        let pid_arg = pid.to_string();
        for (flag, name) in [
            ("--pid", format!("pid {pid}")),
            ("--tree", format!("tree {pid}")),
        ] {
            let want = report_json(path, &[flag, &pid_arg])["totals"].clone();
            let timeline = report(path, &["--format", "timeline-json", flag, &pid_arg]);
            let tl: Value = serde_json::from_str(&timeline).unwrap();
            let series = tl["series"].as_array().unwrap();
            let first = &series[0];
            assert_eq!(first["name"], name);
            for (key, bytes, at) in [
                (
                    "heap",
                    &want["heap"]["peak_live_bytes"],
                    &want["heap"]["peak_live_at_ns"],
                ),
                (
                    "resident",
                    &want["resident"]["peak_bytes"],
                    &want["resident"]["peak_at_ns"],
                ),
            ] {
                let peak = &first[format!("{key}_peak")];
                assert_eq!(
                    (&peak["bytes"], &peak["at_ns"]),
                    (bytes, at),
                    "{flag} {pid} {key}"
                );
                let points = first["points"].as_array().unwrap();
                let width = int(&first["bucket_ns"]);
                let max_from = |t: u64| {
                    points
                        .iter()
                        .filter(|p| int(&p["at_ns"]) + width > t)
                        .map(|p| int(&p[format!("{key}_max")]))
                        .max()
                };
                // A process's resident peak is since its last exec (the kernel's VmHWM): the
                // image it replaced may have held more, and the curve draws that too. From the
                // exec's bucket on, the curve reaches the peak; after that bucket, never above.
                let exec = (flag == "--pid" && key == "resident")
                    .then(|| {
                        tl["events"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .filter(|e| e["kind"] == "exec" && int(&e["pid"]) == pid)
                            .map(|e| int(&e["at_ns"]))
                            .max()
                    })
                    .flatten();
                match exec {
                    None => assert_eq!(
                        max_from(0),
                        bytes.as_u64(),
                        "{flag} {pid} {key}: the curve's maximum"
                    ),
                    Some(at) => {
                        let peak = bytes.as_u64().unwrap();
                        assert!(
                            max_from(at).is_some_and(|m| m >= peak),
                            "{flag} {pid} {key}: the curve reaches {peak} after the exec"
                        );
                        let after = points
                            .iter()
                            .filter(|p| int(&p["at_ns"]) > at)
                            .map(|p| int(&p[format!("{key}_max")]))
                            .max()
                            .unwrap_or(0);
                        assert!(
                            after <= peak,
                            "{flag} {pid} {key}: {after} drawn after the exec, above its peak {peak}"
                        );
                    }
                }
            }
            // Only the scope's processes: none besides the process itself for --pid.
            let drawn: Vec<u64> = series[1..]
                .iter()
                .filter_map(|s| s["pid"].as_u64())
                .collect();
            let events: Vec<u64> = tl["events"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| int(&e["pid"]))
                .collect();
            if flag == "--pid" {
                assert_eq!(series.len(), 1, "{flag} {pid}");
                // Its own lifecycle, and the fork that started it.
                assert!(
                    events.iter().all(|&e| e == pid || e == root),
                    "{flag} {pid}: {events:?}"
                );
                assert!(
                    events.contains(&pid),
                    "{flag} {pid}: its exit is on the axis"
                );
            } else if pid == root {
                assert_eq!(drawn.len(), 4, "--tree {root}: every process");
            } else {
                assert!(drawn.iter().all(|&d| d == pid), "{flag} {pid}: {drawn:?}");
            }
        }
    }

    // The page of the second child (two blocks of 11002 bytes): its curve, its peak, its row.
    let child = &processes[2];
    let pid = int(&child["pid"]);
    let pid_arg = pid.to_string();
    assert_eq!(child["own"]["heap"]["peak_live_bytes"], 11002);
    let page = scratch_file("report-pid.html");
    report(
        path,
        &[
            "--format",
            "html",
            "--pid",
            &pid_arg,
            "-o",
            page.to_str().unwrap(),
        ],
    );
    let data = page_data(&std::fs::read_to_string(&page).unwrap());
    assert_eq!(data["timeline"]["series"][0]["name"], format!("pid {pid}"));
    let screenshot = scratch_file("report-pid.png");
    let Some(shown) = open_in_chromium(test, &page, &screenshot, "main") else {
        return;
    };
    assert_eq!(shown["problems"], serde_json::json!([]));
    let h = &child["own"]["heap"];
    let chart = &shown["charts"]["heap"];
    check_chart(
        chart,
        "heap",
        &format!("pid {pid}"),
        int(&h["peak_live_bytes"]),
        int(&h["peak_live_at_ns"]),
        int(&data["timeline"]["bucket_ns"]),
    );
    assert_eq!(chart["paths"].as_array().unwrap().len(), 1);
    let rows = shown["tree"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["data"]["pid"], pid_arg);
    assert_eq!(shown["summary"]["scope"], format!("scope process {pid}"));
}
