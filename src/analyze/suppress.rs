//! Leak suppressions (`report --suppress FILE`, `check --suppress FILE`): LeakSanitizer's file
//! syntax, matched against the call stack that allocated each definitely lost block.
//!
//! The syntax (docs/report-schema.md, "Suppressions"): one rule per line, `leak:PATTERN`;
//! blank lines and lines starting with `#` are ignored; any other line is an error naming its
//! line number. A PATTERN matches a stack when it matches any of its frames' function name,
//! source file or module (the executable file's path), as LSan matches function, file and
//! module names: as a substring, `*` standing for any run of characters, a leading `^` and a
//! trailing `$` anchoring the pattern at the start and the end. A suppressed block leaves the
//! definitely lost count for the suppressed one, counted per rule; a rule that matched nothing
//! is listed as unused, so a stale file shows.
//!
//! Flow: `cli` parses the file into [`Suppressions`]; `stacks::StackPass::suppress` applies it
//! to the lost blocks of each site at the end of the accounting pass (when every symbol is
//! known), and the report carries [`SuppressionReport`].

use crate::model::metrics::Blocks;
use crate::model::metrics::{RuleUse, SuppressionReport};
use crate::model::sites::SiteFrame;

/// The rules of one suppression file, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Suppressions {
    /// The file, as given (for the report's lines).
    pub file: String,
    /// The rules, in file order.
    pub rules: Vec<Rule>,
}

/// One `leak:PATTERN` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Its line number in the file, from 1.
    pub line: usize,
    /// The pattern after `leak:`.
    pub pattern: String,
}

impl Suppressions {
    /// Parses the text of suppression file `file`. A bad line is an error naming its number
    /// and what was expected.
    pub fn parse(file: &str, text: &str) -> Result<Suppressions, String> {
        let mut rules = Vec::new();
        for (n, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = || format!("{file}:{}", n + 1);
            let Some((kind, pattern)) = line.split_once(':') else {
                return Err(format!(
                    "{}: '{line}' is not a suppression: write leak:PATTERN (a function, source \
                     file or module name, * for any characters), or # for a comment",
                    at()
                ));
            };
            if kind.trim() != "leak" {
                return Err(format!(
                    "{}: '{}:' suppressions are not supported: memtrack suppresses leaks only \
                     (leak:PATTERN)",
                    at(),
                    kind.trim()
                ));
            }
            let pattern = pattern.trim();
            if pattern.is_empty() || pattern.trim_matches(['^', '$', '*']).is_empty() {
                return Err(format!(
                    "{}: leak: needs a pattern that names something (a function, source file \
                     or module); '{pattern}' would match every stack",
                    at()
                ));
            }
            rules.push(Rule {
                line: n + 1,
                pattern: pattern.to_string(),
            });
        }
        Ok(Suppressions {
            file: file.to_string(),
            rules,
        })
    }

    /// The first rule that matches a frame of `frames`, by index.
    pub fn matching(&self, frames: &[SiteFrame]) -> Option<usize> {
        self.rules.iter().position(|r| {
            frames.iter().any(|f| {
                [&f.function, &f.file, &f.module]
                    .into_iter()
                    .any(|name| !name.is_empty() && matches(&r.pattern, name))
            })
        })
    }
}

/// An empty report of `s`: every rule unused so far.
pub fn empty_report(s: &Suppressions) -> SuppressionReport {
    SuppressionReport {
        file: s.file.clone(),
        suppressed: Blocks::default(),
        rules: s
            .rules
            .iter()
            .map(|r| RuleUse {
                line: r.line,
                rule: format!("leak:{}", r.pattern),
                suppressed: Blocks::default(),
            })
            .collect(),
        unmatchable: Blocks::default(),
    }
}

/// Whether LSan-style `pattern` matches `name`: `*` any run of characters, `^` at the start
/// and `$` at the end anchor it, otherwise it may match anywhere in `name`.
pub fn matches(pattern: &str, name: &str) -> bool {
    let (start, pattern) = match pattern.strip_prefix('^') {
        Some(rest) => (true, rest),
        None => (false, pattern),
    };
    let (end, pattern) = match pattern.strip_suffix('$') {
        Some(rest) => (true, rest),
        None => (false, pattern),
    };
    let parts: Vec<&str> = pattern.split('*').collect();
    let mut at = 0usize;
    for (k, part) in parts.iter().enumerate() {
        let first = k == 0;
        let last = k == parts.len() - 1;
        if part.is_empty() {
            continue;
        }
        if first && start {
            if !name.starts_with(part) {
                return false;
            }
            at = part.len();
            continue;
        }
        if last && end {
            // The last part must end the name, after what matched so far.
            return name.len() >= at + part.len() && name[at..].ends_with(part);
        }
        match name[at..].find(part) {
            Some(i) => at += i + part.len(),
            None => return false,
        }
    }
    // An anchored end with a trailing `*` (or an empty last part) matches whatever follows.
    !end || parts.last().is_some_and(|p| p.is_empty()) || at == name.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str, file: &str, module: &str) -> SiteFrame {
        SiteFrame {
            function: function.into(),
            file: file.into(),
            line: 0,
            module: module.into(),
            offset: 0,
            inlined: false,
        }
    }

    #[test]
    fn patterns_match_as_lsan_does() {
        assert!(matches("loses", "loses"));
        assert!(matches("lose", "loses_more"));
        assert!(!matches("^lose$", "loses"));
        assert!(matches("^lo*es$", "loses"));
        assert!(matches("los*", "xloses"));
        assert!(!matches("^los*", "xloses"));
        assert!(matches("libfoo*.so", "/usr/lib/libfoo-1.2.so.3"));
        assert!(matches("cache$", "make_cache"));
        assert!(!matches("cache$", "cache_make"));
        assert!(matches("a*b*c", "xxaYYbZZc"));
        assert!(!matches("a*b*c", "xxaYYcZZb"));
        assert!(matches("^a*", "abc"));
        assert!(matches("^abc$", "abc"));
        assert!(!matches("^ab$", "abab"));
        assert!(matches("ab$", "abab"));
    }

    #[test]
    fn parse_takes_leak_rules_and_comments() {
        let s = Suppressions::parse(
            "s.supp",
            "# known\n\nleak:loses\n  leak: lib*.so  \n#leak:off\n",
        )
        .unwrap();
        assert_eq!(
            s.rules,
            vec![
                Rule {
                    line: 3,
                    pattern: "loses".into()
                },
                Rule {
                    line: 4,
                    pattern: "lib*.so".into()
                }
            ]
        );
    }

    #[test]
    fn bad_lines_name_their_number() {
        let e = Suppressions::parse("s.supp", "leak:a\nloses\n").unwrap_err();
        assert!(
            e.starts_with("s.supp:2: 'loses' is not a suppression"),
            "{e}"
        );
        let e = Suppressions::parse("s.supp", "race:x\n").unwrap_err();
        assert!(e.starts_with("s.supp:1: 'race:' suppressions"), "{e}");
        let e = Suppressions::parse("s.supp", "\n\nleak:*\n").unwrap_err();
        assert!(e.starts_with("s.supp:3: leak: needs a pattern"), "{e}");
    }

    #[test]
    fn a_rule_matches_any_frame_by_function_file_or_module() {
        let s = Suppressions::parse("s", "leak:^keep_\nleak:cache.c\nleak:libz*").unwrap();
        let stack = |f: &str, file: &str, m: &str| {
            vec![frame("malloc", "", "/lib/libc.so.6"), frame(f, file, m)]
        };
        assert_eq!(s.matching(&stack("keep_it", "", "/bin/a")), Some(0));
        assert_eq!(s.matching(&stack("x", "/src/cache.c", "/bin/a")), Some(1));
        assert_eq!(s.matching(&stack("x", "", "/usr/lib/libz.so.1")), Some(2));
        assert_eq!(s.matching(&stack("do_keep_it", "", "/bin/a")), None);
    }
}
