//! Python's objects (issue 18): with `--python-objects`, the blocks memtrack counts as live at
//! the end of a measuring window of a CPython run are the blocks tracemalloc reports live inside
//! the same run, block for block and byte for byte.
//!
//! The interpreter must call its allocator through the exported `PyObject_Malloc` family: a
//! CPython built without LTO, such as pyenv's (`/root/.pyenv/versions/3.11.*`, on every machine of
//! this kind), or the one `MEMTRACK_TEST_PYTHON` names. Debian's python3 is built with LTO and
//! inlines pymalloc into most callers, which no uprobe can see (the README says so).

mod common;

use std::ffi::OsStr;
use std::path::PathBuf;

use common::{report_json, require, run, scratch_dir};

/// A CPython that calls `PyObject_Malloc` through its exported symbol.
fn python() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("MEMTRACK_TEST_PYTHON") {
        return Ok(PathBuf::from(path));
    }
    let versions = std::path::Path::new("/root/.pyenv/versions");
    let mut found: Vec<PathBuf> = std::fs::read_dir(versions)
        .map_err(|e| format!("no pyenv CPython at {}: {e}", versions.display()))?
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("3.11."))
        .map(|entry| entry.path().join("bin/python3.11"))
        .filter(|path| path.exists())
        .collect();
    found.sort();
    found.pop().ok_or_else(|| {
        format!(
            "no python3.11 under {}; set MEMTRACK_TEST_PYTHON to a CPython built without LTO",
            versions.display()
        )
    })
}

/// The `tracemalloc BLOCKS BYTES` line the script prints.
fn tracemalloc_count(stderr: &str) -> Option<(u64, u64)> {
    let line = stderr.lines().find(|l| l.starts_with("tracemalloc "))?;
    let mut words = line.split_whitespace().skip(1);
    Some((words.next()?.parse().ok()?, words.next()?.parse().ok()?))
}

#[test]
fn live_python_blocks_of_a_window_equal_tracemalloc() {
    skip_unless_recording!("live_python_blocks_of_a_window_equal_tracemalloc");
    let Some(python) = require("live_python_blocks_of_a_window_equal_tracemalloc", python()) else {
        return;
    };
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/testdata/python/tracemalloc_window.py"
    );
    for objects in ["0", "5000"] {
        let dir = scratch_dir().join(format!("python-window-{objects}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("run.mt");
        let control = dir.join("ctl");
        let recorded = run(&[
            OsStr::new("record"),
            OsStr::new("--python-objects"),
            OsStr::new("--control"),
            control.as_os_str(),
            OsStr::new("-o"),
            file.as_os_str(),
            OsStr::new("--"),
            python.as_os_str(),
            OsStr::new(script),
            OsStr::new(objects),
        ])
        .expect_code(0);
        let traced = tracemalloc_count(&recorded.stderr)
            .unwrap_or_else(|| panic!("no tracemalloc line\n{}", recorded.describe()));

        let json = report_json(&file, &[]);
        let bench = json["benchmarks"]
            .as_array()
            .and_then(|b| b.iter().find(|b| b["uri"] == "python"))
            .unwrap_or_else(|| panic!("no benchmark `python` in {json}"));
        let heap = &bench["metrics"]["heap"];
        let leaked = (
            heap["leaked"]["blocks"].as_u64().unwrap(),
            heap["leaked"]["bytes"].as_u64().unwrap(),
        );
        // Exactly: os.readv's blocks for `stop` (an iovec, a Py_buffer, the list's calloc) are
        // freed after it, frees are recorded whatever the gate says, and tracemalloc's own
        // blocks are internal to the call that made them, even one that entered before `start`
        // (tests/control.rs, calls_inside_a_call_made_while_paused_are_not_recorded).
        assert!(
            leaked == traced,
            "{objects} objects: memtrack counts {leaked:?} (blocks, bytes) live at the end of the \
             window, tracemalloc {traced:?}\n{}",
            recorded.describe()
        );
        if objects != "0" {
            // Four kept objects per item, at least: the test measured something.
            assert!(traced.0 >= 4 * 5000, "{traced:?}");
        }
    }
}
