//! `diff --format folded|flamegraph`: the call stacks of two recordings side by side, as the
//! differential folded lines of inferno's `inferno-diff-folded` and FlameGraph's
//! `difffolded.pl` (`stack base new`, one line per stack either recording has) and as inferno's
//! differential flame graph of them.
//!
//! Flow: [`run`] reads both files with every site in a `profile::Profile` (the same pass as
//! `report --format folded`), [`lines`] folds each with frames named by function and module
//! (`profile::Naming::FunctionAndModule`, never by address, which moves with every build and
//! every run under ASLR) and pairs equal stacks, and the lines are written as text or handed to
//! `report::flamegraph::write_differential_svg`.

use std::collections::BTreeMap;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use crate::analyze::read_report_with;
use crate::analyze::stacks::{SiteOptions, SiteOrder};
use crate::error::{Error, Result};
use crate::model::metrics::Report;
use crate::model::metrics::Scope;
use crate::model::profile::{folded, Naming, Profile, View, Weight};
use crate::views::flamegraph;

use super::{DiffFormat, DiffOptions};

/// One differential line: the folded stack (root first), its base value and its new value.
pub type Line = (String, u64, u64);

/// The differential lines of `base` and `new` for `view` weighed by `weight`: every stack
/// with a value in either recording, sorted by stack, with 0 on the side that lacks it.
/// Stacks that fold to the same names (two call sites in one function) add up, as they do in
/// `report --format folded`.
pub fn lines(base: &Profile, new: &Profile, view: View, weight: Weight) -> Vec<Line> {
    let mut paired: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for (stack, value) in folded(base, view, weight, Naming::FunctionAndModule) {
        paired.entry(stack).or_default().0 = value;
    }
    for (stack, value) in folded(new, view, weight, Naming::FunctionAndModule) {
        paired.entry(stack).or_default().1 = value;
    }
    paired.into_iter().map(|(s, (b, n))| (s, b, n)).collect()
}

/// Writes `lines` as `stack base new` text lines.
pub fn write_folded(lines: &[Line], out: &mut dyn Write) -> io::Result<()> {
    for (stack, base, new) in lines {
        writeln!(out, "{stack} {base} {new}")?;
    }
    Ok(())
}

/// Runs `memtrack diff --format folded|flamegraph`: both recordings need call stacks.
pub fn run(opts: &DiffOptions, out: &mut dyn Write) -> Result<()> {
    let (base, base_profile) = read_profile(&opts.base)?;
    let (new, new_profile) = read_profile(&opts.new)?;
    for (name, report) in [("base", &base), ("new", &new)] {
        if !report.complete {
            log::warn!(
                "the {name} recording is incomplete ({}): its stacks may be short of events",
                report.incomplete_reasons.join("; ")
            );
        }
    }
    let lines = lines(&base_profile, &new_profile, opts.view, opts.weight);
    let mut out = BufWriter::new(out);
    let written = match opts.format {
        DiffFormat::Flamegraph => flamegraph::write_differential_svg(
            &lines,
            opts.weight,
            opts.view.describe(),
            &title(&base, &new, opts),
            opts.base_widths,
            &mut out,
        ),
        _ => write_folded(&lines, &mut out),
    };
    match written.and_then(|()| out.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Error::io("<output>", e)),
        Ok(()) => Ok(()),
    }
}

/// The whole run of the recording at `path` and its profile; a recording without call stacks
/// is a usage error saying to record both without `--no-stacks`.
fn read_profile(path: &Path) -> Result<(Report, Profile)> {
    let sites = SiteOptions {
        order: SiteOrder::Allocated,
        top: 0,
        profile: true,
        functions: None,
    };
    let mut report = read_report_with(path, Some((&Scope::Run, sites)))?;
    match report.profile.take() {
        Some(profile) if profile.recorded => Ok((report, profile)),
        _ => Err(Error::Usage(format!(
            "{} has no call stacks, so a differential folded or flame graph has nothing to \
             compare: record both recordings without `--no-stacks`",
            path.display()
        ))),
    }
}

/// The flame graph's title: what it weighs and the two commands, each program by its file
/// name (a full path would push the new one off the picture).
fn title(base: &Report, new: &Report, opts: &DiffOptions) -> String {
    let command = |r: &Report| {
        let mut words = r.run.command.iter();
        let program = words
            .next()
            .map_or("", |p| p.rsplit('/').next().unwrap_or(p));
        std::iter::once(program)
            .chain(words.map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    };
    format!(
        "memtrack diff: {}, in {}: {} -> {}",
        opts.view.describe(),
        opts.view.unit(opts.weight),
        command(base),
        command(new)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::profile::{Sample, Stack, Values};
    use crate::model::sites::SiteFrame;

    fn frame(function: &str, module: &str, offset: u64) -> SiteFrame {
        SiteFrame {
            module: module.into(),
            ..SiteFrame::mark(function, offset)
        }
    }

    /// A profile of `main` calling each of `functions` (name, allocations of 100 bytes), the
    /// program at `module` and its frames at `offset` (another build, another address).
    fn profile(module: &str, offset: u64, functions: &[(&str, u64)]) -> Profile {
        // Frame 0 is malloc, 1 main, 2 + i each function.
        let mut frames = vec![
            frame("malloc", "/lib/libc.so.6", 0x9a1b0),
            frame("main", module, offset + 0x100),
        ];
        frames.extend(
            functions
                .iter()
                .enumerate()
                .map(|(i, (f, _))| frame(f, module, offset + i as u64)),
        );
        let stacks = (0..functions.len())
            .map(|i| Stack {
                id: i as u32 + 1,
                frames: vec![0, 2 + i as u32, 1],
                toucher: false,
            })
            .collect();
        let samples = functions
            .iter()
            .enumerate()
            .map(|(i, &(_, n))| Sample {
                stack: i,
                pid: 1,
                command: module.into(),
                benchmark: None,
                values: Values {
                    allocations: n,
                    allocated_bytes: n * 100,
                    ..Values::default()
                },
            })
            .collect();
        Profile {
            recorded: true,
            frames,
            stacks,
            samples,
            ..Profile::default()
        }
    }

    fn stack(f: &str) -> String {
        format!("main [app];{f} [app];malloc [libc.so.6]")
    }

    #[test]
    fn stacks_pair_by_function_and_module_not_address() {
        let base = profile("/a/app", 0x1000, &[("grow", 100), ("gone", 1)]);
        let new = profile("/b/app", 0x2000, &[("grow", 200), ("fresh", 3)]);
        assert_eq!(
            lines(&base, &new, View::Allocated, Weight::Bytes),
            vec![
                (stack("fresh"), 0, 300),
                (stack("gone"), 100, 0),
                (stack("grow"), 10_000, 20_000),
            ]
        );
        assert_eq!(
            lines(&base, &new, View::Allocated, Weight::Count)[2],
            (stack("grow"), 100, 200)
        );
    }

    #[test]
    fn folded_text_is_stack_base_new() {
        let mut out = Vec::new();
        write_folded(&[("a;b".into(), 1, 2)], &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "a;b 1 2\n");
    }

    fn svg(lines: &[Line], base_widths: bool) -> String {
        let mut out = Vec::new();
        flamegraph::write_differential_svg(
            lines,
            Weight::Bytes,
            "allocated",
            "t",
            base_widths,
            &mut out,
        )
        .unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn flame_graph_widths_are_the_new_values_or_the_bases() {
        let lines = vec![(stack("grow"), 100, 300), (stack("gone"), 100, 0)];
        let new = svg(&lines, false);
        assert!(new.contains("grow [app] (300 bytes"), "{new}");
        assert!(!new.contains("gone [app]"), "{new}");
        let base = svg(&lines, true);
        assert!(base.contains("grow [app] (100 bytes"), "{base}");
        assert!(base.contains("gone [app] (100 bytes"), "{base}");
    }

    #[test]
    fn flame_graph_with_nothing_to_draw_says_so() {
        let only_base = svg(&[(stack("gone"), 100, 0)], false);
        assert!(
            only_base.contains(
                "nothing allocated in the new recording: 0 bytes (100 bytes in the base one; \
                 --base-widths draws its stacks)"
            ),
            "{only_base}"
        );
        assert!(only_base.trim_end().ends_with("</svg>"));
    }
}
