//! Aligned columns for people: the one aligner behind the text report's tables and histogram,
//! `check`'s limit lines and `doctor`'s table.
//!
//! Each renderer states its columns (alignment and the text before each cell) and adds rows of
//! cells; [`Table::lines`] pads every cell to the widest of its column, counted in characters
//! so that "µs" and "…" line up. A left-aligned last column is not padded, so no line ends in
//! spaces it did not ask for.

/// Which side of its column a cell keeps to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    /// Text: padded on the right.
    Left,
    /// Numbers: padded on the left.
    Right,
}

/// One column: how its cells align, and the fixed text before each of them (indentation for
/// the first column, the gap for the others).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Column {
    /// The side the cells keep to.
    pub align: Align,
    /// Written before every cell of the column.
    pub before: &'static str,
}

impl Column {
    /// A left-aligned column after `before`.
    pub const fn left(before: &'static str) -> Column {
        Column {
            align: Align::Left,
            before,
        }
    }

    /// A right-aligned column after `before`.
    pub const fn right(before: &'static str) -> Column {
        Column {
            align: Align::Right,
            before,
        }
    }
}

/// Rows of cells under fixed columns, rendered aligned.
#[derive(Clone, Debug)]
pub struct Table {
    columns: Vec<Column>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these columns and no rows.
    pub fn new(columns: Vec<Column>) -> Table {
        Table {
            columns,
            rows: Vec::new(),
        }
    }

    /// Adds a row: one cell per column, in order.
    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.columns.len(), "{cells:?}");
        self.rows.push(cells);
    }

    /// The rows as lines, without newlines, every column as wide as its widest cell.
    pub fn lines(&self) -> Vec<String> {
        let widths: Vec<usize> = (0..self.columns.len())
            .map(|c| {
                self.rows
                    .iter()
                    .map(|r| r[c].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let last = self.columns.len().saturating_sub(1);
        self.rows
            .iter()
            .map(|row| {
                let mut line = String::new();
                for (c, (cell, column)) in row.iter().zip(&self.columns).enumerate() {
                    let pad = " ".repeat(widths[c].saturating_sub(cell.chars().count()));
                    line.push_str(column.before);
                    match column.align {
                        Align::Right => {
                            line.push_str(&pad);
                            line.push_str(cell);
                        }
                        Align::Left => {
                            line.push_str(cell);
                            if c != last {
                                line.push_str(&pad);
                            }
                        }
                    }
                }
                line
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines of a table of `columns` and `rows`.
    fn lines(columns: Vec<Column>, rows: &[&[&str]]) -> Vec<String> {
        let mut table = Table::new(columns);
        for row in rows {
            table.row(row.iter().map(|s| s.to_string()).collect());
        }
        table.lines()
    }

    #[test]
    fn columns_are_as_wide_as_their_widest_cell() {
        let columns = vec![Column::left(""), Column::right("  ")];
        let got = lines(columns, &[&["peak", "1"], &["a", "100"]]);
        assert_eq!(got, ["peak    1", "a     100"]);
    }

    #[test]
    fn a_left_last_column_is_not_padded() {
        let columns = vec![Column::left("  "), Column::left("  ")];
        let got = lines(columns, &[&["x", "long"], &["y", ""]]);
        assert_eq!(got, ["  x  long", "  y  "]);
    }

    #[test]
    fn a_right_last_column_is_padded() {
        let got = lines(vec![Column::right("")], &[&["7"], &["123"]]);
        assert_eq!(got, ["  7", "123"]);
    }

    #[test]
    fn widths_count_characters_not_bytes() {
        let columns = vec![Column::right(""), Column::left(" ")];
        let got = lines(columns, &[&["2.0 µs", "a"], &["10 ms", "b"]]);
        assert_eq!(got, ["2.0 µs a", " 10 ms b"]);
    }

    #[test]
    fn the_text_before_a_column_is_kept() {
        let columns = vec![Column::left(""), Column::right("  limit ")];
        let got = lines(columns, &[&["a", "5"], &["b", "50"]]);
        assert_eq!(got, ["a  limit  5", "b  limit 50"]);
    }

    #[test]
    fn an_empty_table_has_no_lines() {
        assert!(lines(vec![Column::left("")], &[]).is_empty());
    }
}
