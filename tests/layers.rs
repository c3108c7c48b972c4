//! The layers of `src/`: which top-level modules may name which, and no import circle, between
//! top-level modules or between files (issue #33). Data flows one way (kernel, ring, decode,
//! writer, file, reader, analysis, model, views); an import against the flow, or a circle,
//! fails here with the file that has it.
//!
//! The code read is each file's part before its first top-level `#[cfg(test)]` (unit tests may
//! build what they test from anywhere), without `//` comment lines; a name is every `crate::a`
//! and `crate::{a, b}` path, and `super::` paths for the file graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level modules that may not name others: (from, to, why).
const FORBIDDEN: &[(&str, &str, &str)] = &[
    (
        "model",
        "analyze",
        "the model is plain values; the pass fills it",
    ),
    (
        "model",
        "views",
        "the model is plain values; the views read it",
    ),
    (
        "model",
        "report",
        "the model is plain values; the commands use it",
    ),
    (
        "model",
        "check",
        "the model is plain values; the commands use it",
    ),
    (
        "model",
        "diff",
        "the model is plain values; the commands use it",
    ),
    ("views", "analyze", "a view reads the model, never the pass"),
    (
        "views",
        "report",
        "the commands pick the view, not the other way",
    ),
    (
        "views",
        "check",
        "the commands pick the view, not the other way",
    ),
    (
        "views",
        "diff",
        "the commands pick the view, not the other way",
    ),
    (
        "analyze",
        "views",
        "the pass produces the model; it does not render",
    ),
    ("analyze", "report", "the pass serves the commands"),
    ("analyze", "check", "the pass serves the commands"),
    ("analyze", "diff", "the pass serves the commands"),
    (
        "format",
        "error",
        "format keeps its own error type (STYLE.md)",
    ),
    (
        "binary",
        "record",
        "what a binary offers is read without recording",
    ),
    ("preflight", "record", "record takes what preflight decided"),
    ("record", "report", "both use format, never each other"),
    ("report", "record", "both use format, never each other"),
];

/// A source file: its path, its module path (`views::text`), and the code that counts.
struct Source {
    path: String,
    module: Vec<String>,
    code: String,
}

fn sources() -> Vec<Source> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let rel = file
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let mut module: Vec<String> = rel
            .trim_end_matches(".rs")
            .split('/')
            .map(str::to_string)
            .collect();
        if module.last().map(String::as_str) == Some("mod") {
            module.pop();
        }
        // The crate roots, and the unit tests' own helpers.
        if matches!(
            module.first().map(String::as_str),
            Some("lib" | "main" | "testkit" | "xorshift")
        ) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let code: Vec<&str> = text
            .lines()
            .take_while(|l| *l != "#[cfg(test)]")
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect();
        out.push(Source {
            path: format!("src/{rel}"),
            module,
            code: code.join("\n"),
        });
    }
    out
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every path after `prefix` (`crate::` or `super::`) in `code`, as its segments; a brace
/// group gives one path per member.
fn paths(code: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + prefix.len()..];
        if before.is_some_and(|c| is_ident(c) || c == ':') {
            continue; // `foo::crate::` does not occur; `x_super::` is not ours
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for member in group[..end].split(',') {
                let segs = segments(member.trim());
                if !segs.is_empty() {
                    out.push(segs);
                }
            }
            continue;
        }
        out.push(segments(rest));
    }
    out
}

/// The `a::b::c` at the start of `s`.
fn segments(s: &str) -> Vec<String> {
    let mut segs = Vec::new();
    let mut s = s;
    loop {
        let end = s.find(|c: char| !is_ident(c)).unwrap_or(s.len());
        if end == 0 {
            break;
        }
        segs.push(s[..end].to_string());
        match s[end..].strip_prefix("::") {
            Some(more) if more.starts_with(|c: char| is_ident(c)) => s = more,
            _ => break,
        }
    }
    segs
}

/// The files' graph: each file's module to the modules (files) it names.
fn file_graph(sources: &[Source]) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<Vec<String>> = sources.iter().map(|s| s.module.clone()).collect();
    let mut graph = BTreeMap::new();
    for s in sources {
        let mut targets = BTreeSet::new();
        let mut named = paths(&s.code, "crate::");
        let parent = &s.module[..s.module.len() - 1];
        for p in paths(&s.code, "super::") {
            named.push(parent.iter().cloned().chain(p).collect());
        }
        for p in named {
            let Some(target) = (1..=p.len())
                .rev()
                .map(|n| p[..n].to_vec())
                .find(|m| modules.contains(m))
            else {
                continue;
            };
            // A module naming its own children (or itself) is no edge between files.
            if !target.starts_with(&s.module) && !s.module.starts_with(&target) {
                targets.insert(target.join("::"));
            }
        }
        graph.insert(s.module.join("::"), targets);
    }
    graph
}

/// The top-level modules' graph: each to the top-level modules it names, with the file.
fn top_graph(sources: &[Source]) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for s in sources {
        let from = s.module[0].clone();
        let entry = graph.entry(from.clone()).or_default();
        for p in paths(&s.code, "crate::") {
            if p[0] != from {
                entry.entry(p[0].clone()).or_insert_with(|| s.path.clone());
            }
        }
    }
    graph
}

/// The circles of `graph` (its strongly connected components of more than one node).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Kosaraju: finish order on the graph, then components on its reverse.
    fn visit(
        v: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        seen: &mut BTreeSet<String>,
        order: &mut Vec<String>,
    ) {
        if !seen.insert(v.to_string()) {
            return;
        }
        for w in graph.get(v).into_iter().flatten() {
            visit(w, graph, seen, order);
        }
        order.push(v.to_string());
    }
    let mut reverse: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (v, ws) in graph {
        for w in ws {
            reverse.entry(w.clone()).or_default().insert(v.clone());
        }
    }
    let (mut seen, mut order) = (BTreeSet::new(), Vec::new());
    for v in graph.keys() {
        visit(v, graph, &mut seen, &mut order);
    }
    let mut assigned = BTreeSet::new();
    let mut out = Vec::new();
    for v in order.iter().rev() {
        let mut component = Vec::new();
        visit(v, &reverse, &mut assigned, &mut component);
        if component.len() > 1 {
            component.sort();
            out.push(component);
        }
    }
    out
}

#[test]
fn no_forbidden_import_between_folders() {
    let mut found = Vec::new();
    for s in sources() {
        let from = s.module[0].as_str();
        for p in paths(&s.code, "crate::") {
            let to = p[0].as_str();
            let rule = FORBIDDEN.iter().find(|(f, t, _)| *f == from && *t == to);
            if let Some((_, _, why)) = rule {
                found.push(format!("{} names crate::{}: {why}", s.path, p.join("::")));
            }
        }
    }
    found.dedup();
    assert!(
        found.is_empty(),
        "imports against the flow:\n{}",
        found.join("\n")
    );
}

#[test]
fn no_circle_between_top_level_modules() {
    let top = top_graph(&sources());
    let graph: BTreeMap<String, BTreeSet<String>> = top
        .iter()
        .map(|(v, ws)| (v.clone(), ws.keys().cloned().collect()))
        .collect();
    let left = circles(&graph);
    let explain = |c: &Vec<String>| {
        c.iter()
            .flat_map(|v| {
                c.iter()
                    .filter_map(|w| top.get(v).and_then(|ws| ws.get(w)))
                    .map(move |file| format!("  {v} -> ({file})"))
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        left.is_empty(),
        "import circles between top-level modules:\n{}",
        left.iter().map(explain).collect::<Vec<_>>().join("\n\n")
    );
}

#[test]
fn no_circle_between_files() {
    let graph = file_graph(&sources());
    let found = circles(&graph);
    assert!(found.is_empty(), "import circles between files: {found:?}");
}

/// The parser finds what it must, so the tests above cannot pass by reading nothing.
#[test]
fn paths_are_read() {
    let code = "use crate::views::{self, Format};\nuse crate::{analyze, model::metrics};\n\
                let x = crate::output::write(); super::rows::Rows";
    let crate_paths = paths(code, "crate::");
    assert!(crate_paths.contains(&vec!["views".to_string()]));
    assert!(crate_paths.contains(&vec!["analyze".to_string()]));
    assert!(crate_paths.contains(&vec!["model".to_string(), "metrics".to_string()]));
    assert!(crate_paths.contains(&vec!["output".to_string(), "write".to_string()]));
    assert_eq!(paths(code, "super::"), vec![vec!["rows", "Rows"]]);
    let graph = file_graph(&sources());
    assert!(graph["report"].contains("views"), "{:?}", graph["report"]);
    assert!(graph["views::markdown"].contains("views::rows"));
}

/// The most lines a file's code part (before its `#[cfg(test)]`) may have (#33).
const MOST_FILE_LINES: usize = 800;

/// The most lines a function may have, from `fn` to its closing brace (#33).
const MOST_FN_LINES: usize = 120;

/// Functions allowed to be longer: one arm per variant of the wire format, which reads best
/// whole. (file, function)
const LONG_CODEC_MATCHES: &[(&str, &str)] = &[
    ("src/format/wire/decoder.rs", "event_kind"),
    ("src/format/wire/encoder.rs", "encode"),
];

/// Every file of src/ with its code part's lines, comments included.
fn code_parts() -> Vec<(String, Vec<String>)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|file| {
            let rel = file.strip_prefix(&src).unwrap().to_string_lossy();
            let text = std::fs::read_to_string(&file).unwrap();
            let code = (text.lines())
                .take_while(|l| *l != "#[cfg(test)]")
                .map(str::to_string)
                .collect();
            (format!("src/{rel}"), code)
        })
        .collect()
}

/// The functions of `code`: (name, lines from its `fn` line to the brace that closes it at
/// the same indentation). A one-line or bodiless fn is not counted.
fn functions(code: &[String]) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for (i, line) in code.iter().enumerate() {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let mut rest = trimmed;
        for prefix in [
            "pub(crate) ",
            "pub(super) ",
            "pub ",
            "const ",
            "unsafe ",
            "extern \"C\" ",
        ] {
            rest = rest.strip_prefix(prefix).unwrap_or(rest);
        }
        let Some(after) = rest.strip_prefix("fn ") else {
            continue;
        };
        let name: String = after.chars().take_while(|&c| is_ident(c)).collect();
        let close = format!("{indent}}}");
        if let Some(end) = code[i + 1..].iter().position(|l| *l == close) {
            out.push((name, end + 2));
        }
    }
    out
}

#[test]
fn no_file_or_function_over_the_floors() {
    let mut found = Vec::new();
    for (path, code) in code_parts() {
        if code.len() > MOST_FILE_LINES {
            found.push(format!(
                "{path}: {} lines of code before its tests (at most {MOST_FILE_LINES})",
                code.len()
            ));
        }
        for (name, lines) in functions(&code) {
            if lines > MOST_FN_LINES && !LONG_CODEC_MATCHES.contains(&(path.as_str(), &*name)) {
                found.push(format!(
                    "{path}: fn {name} has {lines} lines (at most {MOST_FN_LINES})"
                ));
            }
        }
    }
    assert!(found.is_empty(), "over the floors:\n{}", found.join("\n"));
}

/// The codec matches excused above are still there and still long: an excuse that excuses
/// nothing goes.
#[test]
fn the_long_codec_matches_are_still_long() {
    let parts = code_parts();
    for (path, name) in LONG_CODEC_MATCHES {
        let code = &parts.iter().find(|(p, _)| p == path).expect(path).1;
        let lines = functions(code)
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, l)| l);
        assert!(
            lines.is_some_and(|l| l > MOST_FN_LINES),
            "{path}: fn {name} is {lines:?} lines: remove it from LONG_CODEC_MATCHES"
        );
    }
}

#[test]
fn functions_are_measured_brace_to_brace() {
    let code: Vec<String> = "pub fn a() {\n    1\n}\nfn b(x: u8) -> u8 { x }\n    pub(super) fn c() {\n        if x {\n        }\n    }\n"
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(
        functions(&code),
        vec![("a".to_string(), 3), ("c".to_string(), 4)]
    );
}
