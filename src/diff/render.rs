//! `diff` for people (aligned text within 80 columns) and for scripts (JSON, the same content
//! as [`Diff`] serializes it; docs/diff-schema.md).

use std::io::{self, Write};

use crate::table::{Column, Table};
use crate::views::{frames, words};

use super::resident::ResidentDiff;
use super::sites::SitesDiff;
use super::{Diff, ProcessDiff, ProcessSide};
use crate::model::metric::{difference, signed, value_text, Change, Unit};
use crate::model::sites::SiteFrame;

/// Lines of frames of a changed site shown in text (the innermost ones, the standard
/// library's runs folded; JSON has all).
const SITE_FRAMES: usize = 6;

/// Widest command text in a process heading, so the line fits 80 columns.
const COMMAND_WIDTH: usize = 40;

/// Writes `diff` as pretty JSON.
pub fn write_json(diff: &Diff, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, diff).map_err(io::Error::other)?;
    writeln!(out)
}

/// Writes `diff` as text: the two recordings and the notes, the run's metrics, each
/// benchmark's, each process's (changed metrics only) and the changed sites.
pub fn write_text(diff: &Diff, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "memtrack diff: {} -> {}",
        diff.base.file, diff.new.file
    )?;
    for (name, side) in [("base", &diff.base), ("new ", &diff.new)] {
        writeln!(
            out,
            "  {name}  {} ({})",
            shorten(&clean(&side.command.join(" ")), 60),
            counted(side.processes, "process", "processes")
        )?;
    }
    for note in &diff.notes {
        for (i, line) in wrap(&clean(note), 70).iter().enumerate() {
            let lead = if i == 0 { "  note: " } else { "        " };
            writeln!(out, "{lead}{line}")?;
        }
    }
    writeln!(out)?;
    write_changes(out, "whole run", &diff.run, false)?;
    for b in &diff.benchmarks {
        writeln!(out)?;
        let title = format!("benchmark {} ({})", shorten(&clean(&b.uri), 50), b.status);
        write_changes(out, &title, &b.metrics, false)?;
    }
    write_processes(diff, out)?;
    if let Some(sites) = &diff.sites {
        write_sites(sites, out)?;
    }
    if let Some(resident) = &diff.resident_sites {
        write_resident(resident, out)?;
    }
    Ok(())
}

/// A metrics table under `title`: metric, base, new, change, relative; with `changed_only`,
/// the rows that did not change are left out (and "unchanged" said when none did).
fn write_changes(
    out: &mut dyn Write,
    title: &str,
    changes: &[Change],
    changed_only: bool,
) -> io::Result<()> {
    let mut table = Table::new(vec![
        Column::left("  "),
        Column::right("  "),
        Column::right("  "),
        Column::right("  "),
        Column::right("  "),
    ]);
    table.row(
        [title, "base", "new", "change", "relative"]
            .map(String::from)
            .to_vec(),
    );
    let mut rows = 0;
    for c in changes {
        if changed_only && c.unchanged() {
            continue;
        }
        rows += 1;
        table.row(vec![
            format!("  {}", c.metric.label()),
            value_text(c.unit, c.base),
            value_text(c.unit, c.new),
            c.change_text(),
            c.relative_text(),
        ]);
    }
    let lines = table.lines();
    if rows == 0 {
        // The heading without its columns.
        return writeln!(out, "  {title}: unchanged");
    }
    for line in lines {
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

/// The processes: a count per rule, then each with its changed metrics.
fn write_processes(diff: &Diff, out: &mut dyn Write) -> io::Result<()> {
    let count = |f: &dyn Fn(&ProcessDiff) -> bool| diff.processes.iter().filter(|p| f(p)).count();
    let by_position = count(&|p| p.rule == super::Rule::TreePosition);
    let by_command = count(&|p| p.rule == super::Rule::Command);
    let added = count(&|p| p.status == "added");
    let removed = count(&|p| p.status == "removed");
    writeln!(out)?;
    writeln!(
        out,
        "processes: {} matched ({by_position} by tree position, {by_command} by command), \
         {added} added, {removed} removed",
        by_position + by_command
    )?;
    for p in &diff.processes {
        writeln!(out)?;
        let (heading, position) = match (&p.base, &p.new) {
            (Some(b), Some(n)) => (
                format!(
                    "pid {} -> {} (by {}): {}",
                    b.pid,
                    n.pid,
                    p.rule.name(),
                    command_text(n)
                ),
                &n.position,
            ),
            (None, Some(n)) => (
                format!("added: pid {}: {}", n.pid, command_text(n)),
                &n.position,
            ),
            (Some(b), None) => (
                format!("removed: pid {}: {}", b.pid, command_text(b)),
                &b.position,
            ),
            (None, None) => continue,
        };
        writeln!(out, "  {}", shorten(&heading, 78))?;
        writeln!(out, "    at {}", shorten(&clean(position), 73))?;
        write_changes(out, "  own", &p.metrics, true)?;
    }
    Ok(())
}

/// A process's name for a heading, as the report's views name it.
fn command_text(p: &ProcessSide) -> String {
    shorten(&p.name, COMMAND_WIDTH)
}

/// The changed sites, largest change of bytes first, each with its innermost frames.
fn write_sites(sites: &SitesDiff, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "allocation sites: {} changed of {} in the base and {} in the new recording",
        sites.changed_total, sites.base_sites, sites.new_sites
    )?;
    for (name, sampling) in [("base", &sites.base_sampling), ("new", &sites.new_sampling)] {
        if let Some(sampling) = sampling {
            write_estimates(name, &words::estimated_from(sampling), out)?;
        }
    }
    for (n, s) in sites.changed.iter().enumerate() {
        writeln!(
            out,
            "  #{} {}: allocated {} ({} -> {}), count {}, leaked {}",
            n + 1,
            s.status,
            signed(Unit::Bytes, s.allocated_bytes_change),
            value_text(Unit::Bytes, Some(s.base.allocated_bytes)),
            value_text(Unit::Bytes, Some(s.new.allocated_bytes)),
            signed(Unit::Count, s.allocations_change),
            signed(Unit::Bytes, s.leaked_bytes_change),
        )?;
        write_frames(&s.frames, out)?;
    }
    Ok(())
}

/// "estimates: the base recording's site values are estimated from ...", wrapped.
fn write_estimates(name: &str, estimated_from: &str, out: &mut dyn Write) -> io::Result<()> {
    let line = format!(
        "estimates: the {name} recording's site values are {estimated_from} (record with \
         --stacks for exact values)"
    );
    for (i, line) in wrap(&line, 76).iter().enumerate() {
        let lead = if i == 0 { "  " } else { "    " };
        writeln!(out, "{lead}{line}")?;
    }
    Ok(())
}

/// A changed site's innermost frames, the standard library's runs folded.
fn write_frames(site_frames: &[SiteFrame], out: &mut dyn Write) -> io::Result<()> {
    let (lines, more) = frames::for_people(site_frames, SITE_FRAMES);
    for line in lines {
        let text = match line {
            frames::Line::Frame(f) => {
                let module = f.module.rsplit('/').next().unwrap_or(&f.module);
                clean(&match (f.function.is_empty(), module.is_empty()) {
                    (false, true) => f.function.clone(),
                    (false, false) => format!("{}  {module}", f.function),
                    (true, _) => format!("{module}+{:#x}", f.offset),
                })
            }
            frames::Line::Library(n) => frames::library_text(n),
        };
        writeln!(out, "      {}", shorten(&text, 72))?;
    }
    if more > 0 {
        writeln!(out, "      … {more} more frames")?;
    }
    Ok(())
}

/// The resident sites that changed, the largest change at the peak first, each with its
/// innermost frames; what no walked stack made resident as "[unattributed]".
fn write_resident(r: &ResidentDiff, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "resident memory by site: {} changed of {} in the base and {} in the new recording",
        r.changed_total, r.base_sites, r.new_sites
    )?;
    writeln!(
        out,
        "  peak resident {} ({} -> {})",
        signed(Unit::Bytes, difference(r.base_peak_bytes, r.new_peak_bytes)),
        value_text(Unit::Bytes, Some(r.base_peak_bytes)),
        value_text(Unit::Bytes, Some(r.new_peak_bytes)),
    )?;
    for (name, sampling) in [("base", &r.base_sampling), ("new", &r.new_sampling)] {
        if let Some(sampling) = sampling {
            write_estimates(name, &words::estimated_from_faults(sampling), out)?;
        }
    }
    for (n, s) in r.changed.iter().enumerate() {
        writeln!(
            out,
            "  #{} {}: at the peak {} ({} -> {}), made resident {}",
            n + 1,
            if s.unattributed {
                "unattributed"
            } else {
                s.status
            },
            signed(Unit::Bytes, s.resident_bytes_change),
            value_text(Unit::Bytes, Some(s.base.resident_bytes)),
            value_text(Unit::Bytes, Some(s.new.resident_bytes)),
            signed(Unit::Bytes, s.faulted_bytes_change),
        )?;
        if s.unattributed {
            writeln!(
                out,
                "      [unattributed: made resident with no stack walked]"
            )?;
        }
        write_frames(&s.frames, out)?;
    }
    Ok(())
}

/// `text` broken at spaces into lines of at most `width` characters (a longer word is a line
/// of its own).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    lines.push(line);
    lines
}

/// `text` cut to `width` characters, ending with "…" when cut.
fn shorten(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut short: String = text.chars().take(width.saturating_sub(1)).collect();
    short.push('…');
    short
}

/// Text from a recording with control characters replaced, so that an argument cannot break
/// the table or the terminal.
fn clean(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// `n` with the noun in the right number.
fn counted(n: u64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::compare;
    use crate::testkit::{at, exit, fork, free, malloc, run};

    fn report(n: u64, children: u32) -> crate::model::metrics::Report {
        let mut events = Vec::new();
        let mut t = 0;
        for i in 0..n {
            t += 2;
            events.push(at(t, 1, 1, malloc(0x100 + i, 4096)));
            events.push(at(t + 1, 1, 1, free(0x100 + i)));
        }
        for c in 0..children {
            t += 3;
            events.push(at(t, 1, 1, fork(10 + c)));
            events.push(at(t + 1, 10 + c, 10 + c, malloc(0x50, 7)));
            events.push(at(t + 2, 10 + c, 10 + c, exit(0)));
        }
        events.push(at(t + 5, 1, 1, exit(0)));
        run(events)
    }

    fn text(diff: &Diff) -> String {
        let mut out = Vec::new();
        write_text(diff, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn fits_80_columns_and_names_everything() {
        let t = text(&compare(&report(100, 1), &report(250, 2), 0));
        for line in t.lines() {
            assert!(line.chars().count() <= 80, "{line:?}\n{t}");
        }
        assert!(t.contains("whole run"), "{t}");
        assert!(
            t.contains(
                "processes: 2 matched (2 by tree position, 0 by command), 1 added, 0 removed"
            ),
            "{t}"
        );
        assert!(
            t.contains("  added: pid 11: root arg\n    at root[0]/root[1]\n"),
            "{t}"
        );
        // 100 -> 250 allocations of 4 KiB in the root: +150, +150.0%.
        let allocations = t
            .lines()
            .find(|l| l.trim_start().starts_with("allocations"))
            .unwrap();
        let cells: Vec<&str> = allocations.split_whitespace().collect();
        assert_eq!(
            cells,
            vec!["allocations", "101", "252", "+151", "+149.5%"],
            "{t}"
        );
    }

    #[test]
    fn unchanged_process_says_so() {
        let t = text(&compare(&report(3, 1), &report(3, 1), 0));
        assert!(t.contains("    own: unchanged"), "{t}");
    }

    #[test]
    fn json_is_the_same_content() {
        let d = compare(&report(1, 0), &report(2, 0), 0);
        let mut out = Vec::new();
        write_json(&d, &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["schema_version"], 1);
        let allocations = v["run"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["metric"] == "allocations")
            .unwrap();
        assert_eq!(allocations["change"], 1);
        assert_eq!(allocations["relative_percent"], 100.0);
        assert_eq!(v["processes"][0]["rule"], "tree position");
    }

    #[test]
    fn sampled_sides_say_their_sites_are_estimates() {
        use crate::diff::sites::SitesDiff;
        let sites = |base, new| SitesDiff {
            base_sites: 0,
            new_sites: 0,
            changed_total: 0,
            changed: Vec::new(),
            base_sampling: base,
            new_sampling: new,
        };
        let render = |s: SitesDiff| {
            let mut out = Vec::new();
            write_sites(&s, &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        let head = "\nallocation sites: 0 changed of 0 in the base and 0 in the new recording\n";
        assert_eq!(render(sites(None, None)), head);
        let sampled = Some(crate::testkit::stack_sampling());
        let side = |name: &str| {
            format!(
                "  estimates: the {name} recording's site values are estimated from 1200 sampled\n    \
                 allocations of 52000, 1 per 512.0 KiB (record with --stacks for exact\n    \
                 values)\n"
            )
        };
        assert_eq!(
            render(sites(None, sampled)),
            format!("{head}{}", side("new"))
        );
        assert_eq!(
            render(sites(sampled, None)),
            format!("{head}{}", side("base"))
        );
        let both = render(sites(sampled, sampled));
        assert_eq!(both, format!("{head}{}{}", side("base"), side("new")));
        for line in both.lines() {
            assert!(line.chars().count() <= 80, "{line:?}");
        }
    }

    #[test]
    fn wrap_breaks_at_spaces() {
        assert_eq!(wrap("aa bb cc", 5), vec!["aa bb", "cc"]);
        assert_eq!(wrap("toolongword x", 4), vec!["toolongword", "x"]);
    }

    #[test]
    fn shorten_cuts_with_an_ellipsis() {
        assert_eq!(shorten("abcdef", 4), "abc…");
        assert_eq!(shorten("abc", 4), "abc");
    }
}
