//! Fitting the text report to the screen: how wide it may be, tables that drop their least
//! important columns and shorten their text column rather than wrap a row, and prose lines
//! wrapped at spaces.
//!
//! Flow: `report::run` finds the width with [`width`] (`$COLUMNS`, else the terminal on
//! standard output, else [`DEFAULT_WIDTH`]); `text` lays its tables out with [`fit_table`] and
//! writes everything through [`Wrap`], which leaves lines that fit alone, so a fitted table
//! reaches the screen as it was laid out.

use std::io::{self, Write};

use crate::table::{Align, Column, Table};

/// The width when standard output is not a terminal and `$COLUMNS` is not set: what a pipe,
/// a file or a CI log gets.
pub const DEFAULT_WIDTH: usize = 80;
/// The narrowest layout; a narrower `$COLUMNS` is taken as this (a table needs its PID, its
/// peak and some of its command).
pub const MIN_WIDTH: usize = 20;

/// The width of the text report: `columns` (the value of `$COLUMNS`) when it is a positive
/// number, else `terminal` (the width of the terminal on standard output, when it is one),
/// else [`DEFAULT_WIDTH`]; never below [`MIN_WIDTH`].
pub fn width(columns: Option<&str>, terminal: Option<usize>) -> usize {
    let from_env = columns.and_then(|c| c.trim().parse::<usize>().ok().filter(|&n| n > 0));
    from_env
        .or(terminal)
        .unwrap_or(DEFAULT_WIDTH)
        .max(MIN_WIDTH)
}

/// A column of a table to fit: its header, its alignment, and whether it is the text column
/// that is shortened to the width left (the command, the benchmark).
#[derive(Clone, Copy, Debug)]
pub struct FitColumn {
    /// Its header.
    pub header: &'static str,
    /// Its alignment.
    pub align: Align,
    /// Whether its cells are shortened with "…" to the width the others leave.
    pub flexible: bool,
    /// The characters a flexible column keeps before another column is dropped.
    pub min_chars: usize,
}

impl FitColumn {
    /// A column of numbers.
    pub const fn right(header: &'static str) -> FitColumn {
        FitColumn {
            header,
            align: Align::Right,
            flexible: false,
            min_chars: 0,
        }
    }

    /// A column of short text.
    pub const fn left(header: &'static str) -> FitColumn {
        FitColumn {
            header,
            align: Align::Left,
            flexible: false,
            min_chars: 0,
        }
    }

    /// The text column that takes the width left, keeping at least `min_chars` of each cell
    /// (or all of it, when shorter) before another column is dropped.
    pub const fn text(header: &'static str, min_chars: usize) -> FitColumn {
        FitColumn {
            header,
            align: Align::Left,
            flexible: true,
            min_chars,
        }
    }
}

/// A table laid out to fit.
pub struct Fitted {
    /// The header line, then one line per row, without trailing spaces.
    pub lines: Vec<String>,
    /// The headers of the columns dropped to fit, in the order they were dropped.
    pub dropped: Vec<&'static str>,
}

/// Lays out `rows` under `columns` (two spaces before each) in at most `width` characters:
/// while the table is too wide, the next column of `drop_order` goes (the least important
/// first), then the flexible column's cells are shortened with "…" to the width left. A row
/// is never wrapped; should the kept columns alone be too wide, each line is cut at `width`.
pub fn fit_table(
    columns: &[FitColumn],
    rows: Vec<Vec<String>>,
    drop_order: &[&str],
    width: usize,
) -> Fitted {
    let cell_width = |c: usize| {
        rows.iter()
            .map(|r| r[c].chars().count())
            .chain([columns[c].header.chars().count()])
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..columns.len()).map(cell_width).collect();
    let mut kept = vec![true; columns.len()];
    let needed = |kept: &[bool]| -> usize {
        (0..columns.len())
            .filter(|&c| kept[c])
            .map(|c| {
                let w = if columns[c].flexible {
                    widths[c].min(columns[c].min_chars)
                } else {
                    widths[c]
                };
                2 + w
            })
            .sum()
    };
    let mut dropped = Vec::new();
    for name in drop_order {
        if needed(&kept) <= width {
            break;
        }
        if let Some(c) = columns.iter().position(|col| col.header == *name) {
            if kept[c] {
                kept[c] = false;
                dropped.push(columns[c].header);
            }
        }
    }
    // The width the flexible column gets: what the others leave.
    let others: usize = (0..columns.len())
        .filter(|&c| kept[c] && !columns[c].flexible)
        .map(|c| 2 + widths[c])
        .sum();
    let text_width = width.saturating_sub(others + 2).max(1);
    let mut table = Table::new(
        (0..columns.len())
            .filter(|&c| kept[c])
            .map(|c| Column {
                align: columns[c].align,
                before: "  ",
            })
            .collect(),
    );
    let header = columns.iter().map(|c| c.header.to_string()).collect();
    for row in std::iter::once(header).chain(rows) {
        table.row(
            row.into_iter()
                .enumerate()
                .filter(|&(c, _)| kept[c])
                .map(|(c, cell)| {
                    if columns[c].flexible {
                        shorten_to(&cell, text_width)
                    } else {
                        cell
                    }
                })
                .collect(),
        );
    }
    let lines = table
        .lines()
        .into_iter()
        .map(|line| shorten_to(line.trim_end(), width))
        .collect();
    Fitted { lines, dropped }
}

/// `text` cut to at most `width` characters, ending with "…" when cut.
pub fn shorten_to(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut short: String = text.chars().take(width.saturating_sub(1)).collect();
    short.push('…');
    short
}

/// A writer that wraps every line longer than `width` at spaces, continuing it indented two
/// more than it starts; a word longer than a line is cut across lines. Lines that fit pass
/// through unchanged. Call [`Wrap::finish`] to write a last line without a newline.
pub struct Wrap<'a> {
    out: &'a mut dyn Write,
    width: usize,
    line: Vec<u8>,
}

impl<'a> Wrap<'a> {
    /// Wraps what is written at `width` characters before passing it to `out`.
    pub fn new(out: &'a mut dyn Write, width: usize) -> Wrap<'a> {
        Wrap {
            out,
            width: width.max(MIN_WIDTH),
            line: Vec::new(),
        }
    }

    /// Writes what is left of the last line.
    pub fn finish(mut self) -> io::Result<()> {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.write_line(&String::from_utf8_lossy(&line), false)?;
        }
        self.out.flush()
    }

    fn write_line(&mut self, line: &str, newline: bool) -> io::Result<()> {
        let end = if newline { "\n" } else { "" };
        for (i, part) in wrap_line(line, self.width).iter().enumerate() {
            let sep = if i == 0 { "" } else { "\n" };
            write!(self.out, "{sep}{part}")?;
        }
        write!(self.out, "{end}")
    }
}

impl Write for Wrap<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut rest = buf;
        while let Some(at) = rest.iter().position(|&b| b == b'\n') {
            self.line.extend_from_slice(&rest[..at]);
            let line = std::mem::take(&mut self.line);
            self.write_line(&String::from_utf8_lossy(&line), true)?;
            rest = &rest[at + 1..];
        }
        self.line.extend_from_slice(rest);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// `line` as lines of at most `width` characters, broken at its last space that fits (the
/// spacing before it kept, so aligned labels stay aligned), each continuation indented two
/// more than the line; a word longer than a line is cut.
fn wrap_line(line: &str, width: usize) -> Vec<String> {
    let indent = line.chars().take_while(|&c| c == ' ').count();
    let hanging = " ".repeat((indent + 2).min(width / 2));
    let mut lines = Vec::new();
    let mut rest: Vec<char> = line.chars().collect();
    let mut prefix = String::new();
    loop {
        let room = width - prefix.chars().count();
        if rest.len() <= room {
            lines.push(format!("{prefix}{}", rest.iter().collect::<String>()));
            return lines;
        }
        // The last space within the room that has text before it; else cut the word.
        let first_text = rest.iter().position(|&c| c != ' ').unwrap_or(0);
        let cut = (first_text + 1..=room)
            .rev()
            .find(|&i| rest[i] == ' ')
            .unwrap_or(room);
        let head: String = rest[..cut].iter().collect();
        lines.push(format!("{prefix}{}", head.trim_end()));
        let skip = rest[cut..].iter().take_while(|&&c| c == ' ').count();
        rest.drain(..cut + skip);
        if rest.is_empty() {
            return lines;
        }
        prefix.clone_from(&hanging);
    }
}

/// Which columns a narrow screen dropped, and how to see them.
pub fn write_dropped(fitted: &Fitted, out: &mut dyn Write) -> io::Result<()> {
    if fitted.dropped.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "  (left out to fit the width: {}; widen the terminal or set COLUMNS)",
        fitted.dropped.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_overrides_the_terminal() {
        assert_eq!(width(Some("60"), Some(200)), 60);
        assert_eq!(width(None, Some(200)), 200);
        assert_eq!(width(None, None), DEFAULT_WIDTH);
    }

    #[test]
    fn a_bad_columns_is_ignored() {
        assert_eq!(width(Some("wide"), Some(100)), 100);
        assert_eq!(width(Some("0"), None), DEFAULT_WIDTH);
        assert_eq!(width(Some(""), None), DEFAULT_WIDTH);
    }

    #[test]
    fn too_narrow_is_the_minimum() {
        assert_eq!(width(Some("5"), None), MIN_WIDTH);
    }

    fn rows(cells: &[&[&str]]) -> Vec<Vec<String>> {
        cells
            .iter()
            .map(|r| r.iter().map(|c| c.to_string()).collect())
            .collect()
    }

    const COLUMNS: [FitColumn; 4] = [
        FitColumn::left("PID"),
        FitColumn::right("ALLOCS"),
        FitColumn::right("FREES"),
        FitColumn::text("COMMAND", 10),
    ];

    #[test]
    fn a_table_that_fits_is_unchanged() {
        let f = fit_table(&COLUMNS, rows(&[&["1", "10", "9", "./a"]]), &["FREES"], 80);
        assert_eq!(
            f.lines,
            ["  PID  ALLOCS  FREES  COMMAND", "  1        10      9  ./a"]
        );
        assert!(f.dropped.is_empty());
    }

    #[test]
    fn a_narrow_table_drops_columns_then_shortens_the_command() {
        let long = "./program --with a very long list of arguments";
        let f = fit_table(
            &COLUMNS,
            rows(&[&["1", "10", "9", long]]),
            &["FREES", "ALLOCS"],
            31,
        );
        assert_eq!(f.dropped, ["FREES"]);
        assert_eq!(f.lines[0], "  PID  ALLOCS  COMMAND");
        assert_eq!(f.lines[1], "  1        10  ./program --wit…");
        assert!(f.lines.iter().all(|l| l.chars().count() <= 31));
    }

    #[test]
    fn columns_not_in_the_drop_order_stay() {
        let f = fit_table(&COLUMNS, rows(&[&["1", "10", "9", "x"]]), &[], 20);
        assert!(f.dropped.is_empty());
        assert!(
            f.lines.iter().all(|l| l.chars().count() <= 20),
            "{f:?}",
            f = f.lines
        );
    }

    #[test]
    fn short_lines_pass_through() {
        assert_eq!(wrap_line("  peak heap  3 KiB", 20), ["  peak heap  3 KiB"]);
    }

    #[test]
    fn long_lines_wrap_at_spaces_with_a_hanging_indent() {
        let got = wrap_line("INCOMPLETE: 7 events were lost while recording", 20);
        assert_eq!(
            got,
            ["INCOMPLETE: 7 events", "  were lost while", "  recording"]
        );
    }

    #[test]
    fn long_words_are_cut() {
        let got = wrap_line(&"x".repeat(45), 20);
        assert_eq!(got.len(), 3);
        assert!(got.iter().all(|l| l.chars().count() <= 20), "{got:?}");
        assert_eq!(got.concat().matches('x').count(), 45);
    }

    #[test]
    fn the_writer_wraps_each_line() {
        let mut out = Vec::new();
        let mut w = Wrap::new(&mut out, 20);
        write!(w, "short\na much longer line that wraps\nend").unwrap();
        w.finish().unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "short\na much longer line\n  that wraps\nend"
        );
    }
}
