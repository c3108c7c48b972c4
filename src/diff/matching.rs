//! Which process of one recording is which process of the other. Pids differ between runs, so
//! a process is known by what it ran and where it sits in the tree: its command (the file name
//! of what it executed) and, from the root down, each ancestor's command with its ordinal among
//! same-command siblings ("the 3rd `cc1` under `make`").
//!
//! Two rules, tried in order, and each pairing says which one made it:
//! 1. "tree position": the same path of (command, ordinal) from the root and the same
//!    arguments (the program itself by file name, so a checkout in another directory matches);
//! 2. "command": among the processes left, the n-th with a command and arguments in one
//!    recording and the n-th with both in the other, in tree order (a sibling inserted before
//!    it shifted its ordinal, or an ancestor changed); then, among those still left, the n-th
//!    with the command alone (its arguments changed).
//!
//! What is left is "unmatched": removed (only in the base) or added (only in the new one).

use std::collections::{HashMap, VecDeque};

use serde::Serialize;

use crate::model::metrics::ProcessMetrics;

/// How a process was matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Rule {
    /// The same command path from the root and the same arguments.
    #[serde(rename = "tree position")]
    TreePosition,
    /// The same command, at the same ordinal among the processes left with it.
    #[serde(rename = "command")]
    Command,
    /// Only one recording has it.
    #[serde(rename = "unmatched")]
    Unmatched,
}

impl Rule {
    /// The rule's name, as JSON and text say it.
    pub fn name(self) -> &'static str {
        match self {
            Rule::TreePosition => "tree position",
            Rule::Command => "command",
            Rule::Unmatched => "unmatched",
        }
    }
}

/// One process of either or both recordings: indexes into the base's and the new report's
/// `processes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pairing {
    /// The process in the base recording; absent for an added one.
    pub base: Option<usize>,
    /// The process in the new recording; absent for a removed one.
    pub new: Option<usize>,
    /// Which rule matched them.
    pub rule: Rule,
}

/// The command of a process: the file name of what it executed, else of its first argument.
pub fn command(p: &ProcessMetrics) -> String {
    let path = p
        .executable
        .as_deref()
        .or(p.argv.first().map(String::as_str))
        .unwrap_or("?");
    file_name(path).to_string()
}

/// The last component of a path.
fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Where a process sits: (command, ordinal among same-command siblings) of each process from
/// the root to it, itself included.
pub type Position = Vec<(String, u32)>;

/// The position of each process of `processes` (in tree order, each parent before its
/// children, `depth` counted from the listing's roots).
pub fn positions(processes: &[ProcessMetrics]) -> Vec<Position> {
    // The path of the last process seen at each depth, and per parent path how many children
    // of each command it has had so far.
    let mut ancestors: Vec<Position> = Vec::new();
    let mut seen: HashMap<(Position, String), u32> = HashMap::new();
    let mut out = Vec::with_capacity(processes.len());
    for p in processes {
        let depth = (p.depth as usize).min(ancestors.len());
        ancestors.truncate(depth);
        let parent = ancestors.last().cloned().unwrap_or_default();
        let name = command(p);
        let n = seen.entry((parent.clone(), name.clone())).or_insert(0);
        let mut path = parent;
        path.push((name, *n));
        *n += 1;
        ancestors.push(path.clone());
        out.push(path);
    }
    out
}

/// The arguments compared by the tree-position rule: the program by file name, the rest as
/// they are.
fn arguments(p: &ProcessMetrics) -> Vec<&str> {
    p.argv
        .iter()
        .enumerate()
        .map(|(i, a)| if i == 0 { file_name(a) } else { a.as_str() })
        .collect()
}

/// Pairs the processes of `base` with those of `new`; every process of both is in exactly one
/// pairing. Matched pairs come in the new recording's tree order, then the removed ones in the
/// base's order.
pub fn pair(base: &[ProcessMetrics], new: &[ProcessMetrics]) -> Vec<Pairing> {
    let base_positions = positions(base);
    let new_positions = positions(new);
    let mut base_of_new: Vec<Option<(usize, Rule)>> = vec![None; new.len()];
    let mut base_taken = vec![false; base.len()];

    // 1. Tree position: the path and the arguments, each base process taken once.
    let mut by_position: HashMap<(&Position, Vec<&str>), usize> = HashMap::new();
    for (i, p) in base.iter().enumerate() {
        by_position
            .entry((&base_positions[i], arguments(p)))
            .or_insert(i);
    }
    for (j, p) in new.iter().enumerate() {
        if let Some(i) = by_position.remove(&(&new_positions[j], arguments(p))) {
            base_of_new[j] = Some((i, Rule::TreePosition));
            base_taken[i] = true;
        }
    }

    // 2. Command: first the n-th process left with a command and arguments pairs with the
    // n-th left with both (a sibling inserted before it moved its ordinal), then the n-th left
    // with the command alone with the n-th left with it (its arguments changed).
    pair_left(base, new, &mut base_of_new, &mut base_taken, |p| {
        (command(p), arguments(p).join("\0"))
    });
    pair_left(base, new, &mut base_of_new, &mut base_taken, |p| {
        (command(p), String::new())
    });

    let mut pairings: Vec<Pairing> = base_of_new
        .iter()
        .enumerate()
        .map(|(j, m)| match m {
            Some((i, rule)) => Pairing {
                base: Some(*i),
                new: Some(j),
                rule: *rule,
            },
            None => Pairing {
                base: None,
                new: Some(j),
                rule: Rule::Unmatched,
            },
        })
        .collect();
    pairings.extend(
        base_taken
            .iter()
            .enumerate()
            .filter(|(_, taken)| !**taken)
            .map(|(i, _)| Pairing {
                base: Some(i),
                new: None,
                rule: Rule::Unmatched,
            }),
    );
    pairings
}

/// Pairs, by the "command" rule, the processes neither side has paired yet that share `key`:
/// the n-th left in `base` with the n-th left in `new`, in tree order.
fn pair_left<K: std::hash::Hash + Eq>(
    base: &[ProcessMetrics],
    new: &[ProcessMetrics],
    base_of_new: &mut [Option<(usize, Rule)>],
    base_taken: &mut [bool],
    key: impl Fn(&ProcessMetrics) -> K,
) {
    let mut left: HashMap<K, VecDeque<usize>> = HashMap::new();
    for (i, p) in base.iter().enumerate().filter(|(i, _)| !base_taken[*i]) {
        left.entry(key(p)).or_default().push_back(i);
    }
    for (j, p) in new.iter().enumerate() {
        if base_of_new[j].is_some() {
            continue;
        }
        if let Some(i) = left.get_mut(&key(p)).and_then(VecDeque::pop_front) {
            base_of_new[j] = Some((i, Rule::Command));
            base_taken[i] = true;
        }
    }
}

/// A position for people: "make[0]/cc1[2]" (ordinals count from 0).
pub fn position_text(position: &Position) -> String {
    position
        .iter()
        .map(|(c, n)| format!("{c}[{n}]"))
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process at `depth` running `argv` (its executable is argv[0]).
    fn p(pid: u32, depth: u32, argv: &[&str]) -> ProcessMetrics {
        crate::testkit::process_running(pid, depth, argv)
    }

    /// (base pid, new pid, rule) of each pairing.
    fn pairs(base: &[ProcessMetrics], new: &[ProcessMetrics]) -> Vec<(u32, u32, Rule)> {
        pair(base, new)
            .iter()
            .map(|m| {
                (
                    m.base.map_or(0, |i| base[i].pid),
                    m.new.map_or(0, |j| new[j].pid),
                    m.rule,
                )
            })
            .collect()
    }

    fn make_tree(first: u32) -> Vec<ProcessMetrics> {
        vec![
            p(first, 0, &["/usr/bin/make", "-j2"]),
            p(first + 1, 1, &["/usr/bin/cc1", "a.c"]),
            p(first + 2, 1, &["/usr/bin/cc1", "b.c"]),
            p(first + 3, 1, &["/usr/bin/ld", "-o", "x"]),
        ]
    }

    #[test]
    fn same_tree_matches_by_position() {
        use Rule::TreePosition as T;
        assert_eq!(
            pairs(&make_tree(10), &make_tree(50)),
            vec![(10, 50, T), (11, 51, T), (12, 52, T), (13, 53, T)]
        );
    }

    #[test]
    fn positions_count_same_command_siblings() {
        let texts: Vec<String> = positions(&make_tree(1)).iter().map(position_text).collect();
        assert_eq!(
            texts,
            vec![
                "make[0]",
                "make[0]/cc1[0]",
                "make[0]/cc1[1]",
                "make[0]/ld[0]"
            ]
        );
    }

    #[test]
    fn changed_arguments_fall_back_to_command() {
        let mut new = make_tree(50);
        new[2].argv[1] = "c.c".into();
        let got = pairs(&make_tree(10), &new);
        assert_eq!(got[2], (12, 52, Rule::Command));
        assert_eq!(got[1], (11, 51, Rule::TreePosition));
    }

    #[test]
    fn program_directory_does_not_matter() {
        let mut new = make_tree(50);
        new[0].argv[0] = "/opt/other/make".into();
        new[0].executable = Some("/opt/other/make".into());
        assert_eq!(pairs(&make_tree(10), &new)[0], (10, 50, Rule::TreePosition));
    }

    #[test]
    fn added_and_removed_are_unmatched() {
        let base = make_tree(10);
        let mut new = make_tree(50);
        new.remove(3); // ld gone
        new.push(p(60, 1, &["/usr/bin/as", "a.s"]));
        let got = pairs(&base, &new);
        assert_eq!(got[3], (0, 60, Rule::Unmatched));
        assert_eq!(got[4], (13, 0, Rule::Unmatched));
        assert_eq!(got.len(), 5);
    }

    #[test]
    fn an_inserted_sibling_is_added_and_the_others_match_by_command() {
        // A third cc1 before the others takes a.c's ordinal but not its arguments: a.c and b.c
        // (now ordinals 1 and 2) match by command and arguments, z.c is the added one.
        let base = make_tree(10);
        let mut new = make_tree(50);
        new.insert(1, p(70, 1, &["/usr/bin/cc1", "z.c"]));
        let got = pairs(&base, &new);
        assert_eq!(got[0], (10, 50, Rule::TreePosition));
        assert_eq!(got[1], (0, 70, Rule::Unmatched));
        assert_eq!(got[2], (11, 51, Rule::Command));
        assert_eq!(got[3], (12, 52, Rule::Command));
        assert_eq!(got[4], (13, 53, Rule::TreePosition));
    }

    #[test]
    fn a_deeper_subtree_keeps_its_path() {
        let base = vec![
            p(1, 0, &["sh"]),
            p(2, 1, &["make"]),
            p(3, 2, &["cc1", "x"]),
            p(4, 1, &["make"]),
            p(5, 2, &["cc1", "x"]),
        ];
        let new: Vec<ProcessMetrics> = base
            .iter()
            .map(|q| ProcessMetrics {
                pid: q.pid + 100,
                ..q.clone()
            })
            .collect();
        let got = pairs(&base, &new);
        assert!(got.iter().all(|m| m.2 == Rule::TreePosition), "{got:?}");
        assert_eq!(got[4], (5, 105, Rule::TreePosition));
    }

    #[test]
    fn empty_sides() {
        assert!(pair(&[], &[]).is_empty());
        assert_eq!(
            pairs(&[], &make_tree(1))
                .iter()
                .filter(|m| m.2 == Rule::Unmatched)
                .count(),
            4
        );
    }

    #[test]
    fn a_process_without_executable_or_arguments_is_named() {
        let mut q = p(1, 0, &[]);
        q.executable = None;
        assert_eq!(command(&q), "?");
    }
}
