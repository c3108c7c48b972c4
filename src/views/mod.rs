//! The views: one module per output format, each reading the same `model` values the pass
//! produced, never the pass itself. `text` (fitted to the width by `screen`, its rows chosen by
//! `rows`, its frames by `frames`), `markdown`, `json`, `html` (its page template, script and
//! styles in `views/html/`), the stack formats over the model's `Profile` (`folded`,
//! `flamegraph`, `pprof`, `speedscope`) and the timeline as data (`timeline_data`); `words` is
//! the phrasebook text, markdown, html and `check` share.
//!
//! [`FORMATS`] is the one table of `report --format`: a new format is a new file here and one
//! row, and `cli` (parsing, errors), `report` (what the pass must find, which writer) and the
//! docs follow from the row.

pub mod flamegraph;
pub mod folded;
pub mod frames;
mod functions;
pub mod html;
pub mod json;
pub mod markdown;
pub mod pprof;
pub mod rows;
pub mod screen;
mod sites;
pub mod speedscope;
pub mod text;
pub mod timeline_data;
pub mod words;

use std::fmt;
use std::io::{self, Write};

use crate::model::metrics::Report;
use crate::model::profile::{Profile, View, Weight};

use rows::Rows;
use text::TextLayout;

/// One `report --format`: its name, what it writes, what it needs of the pass, and its writer.
/// Every format is one row of [`FORMATS`]; parsing `--format`, its error and docs/formats.md
/// come from the rows.
pub struct Format {
    /// Its `--format` name.
    pub name: &'static str,
    /// What it writes, for people choosing one (docs/formats.md, "Every format").
    pub help: &'static str,
    /// What the pass must find for it beyond the report's metrics.
    pub needs: Needs,
    /// How it writes.
    pub write: Writer,
}

/// What a format needs of the pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Needs {
    /// Which allocation sites.
    pub sites: Sites,
    /// Memory over time of the scope (`Report::timeline`).
    pub timeline: bool,
    /// It lists every process and benchmark, so `--top`, `--all` and `--sort` mean nothing.
    pub every_row: bool,
    /// It shows the allocating functions (`--functions`) when asked.
    pub functions: bool,
}

impl Needs {
    /// Only the report: the sites `--stacks` asks for, the functions `--functions` asks for,
    /// no timeline, rows as asked.
    const REPORT: Needs = Needs {
        sites: Sites::AsAsked,
        timeline: false,
        every_row: false,
        functions: true,
    };

    /// A stack format's: every site with its frames.
    const PROFILE: Needs = Needs {
        sites: Sites::Profile,
        functions: false,
        ..Needs::REPORT
    };
}

/// The allocation sites a format needs of the sites pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sites {
    /// Those `--stacks`, `--stacks-by` and `--stacks-top` ask for, if any.
    AsAsked,
    /// Every site of the scope with its frames (the model's `Profile`), per process: a stack
    /// format. `--view` and `--weight` choose what it weighs.
    Profile,
    /// The profile, and the listed sites ordered by what is definitely lost (the page's flame
    /// graphs and its list of lost sites).
    ProfileLostFirst,
}

/// A format's writer: of the whole report, or of the scope's profile (the stack formats, which
/// have nothing to show without call stacks).
#[derive(Clone, Copy)]
pub enum Writer {
    /// Writes the report.
    Report(fn(&Report, &ViewOptions, &mut dyn Write) -> io::Result<()>),
    /// Writes the profile; the report gives its run facts.
    Profile(fn(&Profile, &Report, &ViewOptions, &mut dyn Write) -> io::Result<()>),
}

/// What the flags of `report` chose besides the format, as the views take it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ViewOptions {
    /// Rows of the text and markdown forms (`--by`).
    pub rows: Rows,
    /// Width and rows of the text form; markdown takes its rows.
    pub layout: TextLayout,
    /// What a stack format weighs (`--view`).
    pub view: View,
    /// What a stack format weighs blocks by (`--weight`).
    pub weight: Weight,
    /// The title of a flame graph or speedscope profile.
    pub title: String,
}

impl Format {
    /// Whether it is a stack format: every allocation site, from the scope's `Profile`.
    pub fn is_stack_format(&self) -> bool {
        matches!(self.write, Writer::Profile(_))
    }
}

impl PartialEq for Format {
    fn eq(&self, other: &Format) -> bool {
        self.name == other.name
    }
}

impl Eq for Format {}

impl fmt::Debug for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Format({})", self.name)
    }
}

/// The default format: text.
impl Default for &'static Format {
    fn default() -> Self {
        &FORMATS[0]
    }
}

/// Every `report --format`, the default first; `--help`, errors and docs list them in this
/// order.
pub static FORMATS: &[Format] = &[
    Format {
        name: "text",
        help: "aligned text for people (the default)",
        needs: Needs::REPORT,
        write: Writer::Report(|report, o, out| match o.rows {
            Rows::Processes => text::write_text(report, &o.layout, out),
            Rows::Benchmarks => text::write_benchmarks_text(report, &o.layout, out),
        }),
    },
    Format {
        name: "json",
        help: "JSON for scripts (docs/report-schema.md)",
        needs: Needs {
            every_row: true,
            ..Needs::REPORT
        },
        write: Writer::Report(|report, _, out| json::write_json(report, out)),
    },
    Format {
        name: "markdown",
        help: "a summary for CI job summaries and pull-request comments (GitHub markdown)",
        needs: Needs::REPORT,
        write: Writer::Report(|report, o, out| {
            markdown::write_markdown(report, o.rows, o.layout.rows, out)
        }),
    },
    Format {
        name: "html",
        help: "one self-contained page: memory over time, the process tree, flame graphs",
        needs: Needs {
            sites: Sites::ProfileLostFirst,
            timeline: true,
            every_row: false,
            functions: false,
        },
        write: Writer::Report(|report, _, out| html::write_html(report, out)),
    },
    Format {
        name: "timeline-csv",
        help: "the decimated timeline as CSV, one row per point (docs/report-schema.md)",
        needs: Needs {
            timeline: true,
            functions: false,
            ..Needs::REPORT
        },
        write: Writer::Report(|report, _, out| timeline_data::write_csv(report, out)),
    },
    Format {
        name: "timeline-json",
        help: "the decimated timeline as JSON (docs/report-schema.md)",
        needs: Needs {
            timeline: true,
            functions: false,
            ..Needs::REPORT
        },
        write: Writer::Report(|report, _, out| timeline_data::write_json(report, out)),
    },
    Format {
        name: "folded",
        help: "folded stacks, one `root;...;leaf value` line per stack (flamegraph.pl, inferno)",
        needs: Needs::PROFILE,
        write: Writer::Profile(|profile, _, o, out| {
            folded::write_folded(profile, o.view, o.weight, out)
        }),
    },
    Format {
        name: "flamegraph",
        help: "a flame graph SVG (inferno)",
        needs: Needs::PROFILE,
        write: Writer::Profile(|profile, _, o, out| {
            flamegraph::write_svg(profile, o.view, o.weight, &o.title, out)
        }),
    },
    Format {
        name: "pprof",
        help: "gzipped pprof profile.proto (`go tool pprof`)",
        needs: Needs::PROFILE,
        write: Writer::Profile(|profile, report, o, out| {
            pprof::write_pprof(profile, report, o.view, o.weight, out)
        }),
    },
    Format {
        name: "speedscope",
        help: "speedscope's JSON file format",
        needs: Needs::PROFILE,
        write: Writer::Profile(|profile, _, o, out| {
            speedscope::write_speedscope(profile, o.view, o.weight, &o.title, out)
        }),
    },
];

/// The format named `name`, if there is one.
pub fn format(name: &str) -> Option<&'static Format> {
    FORMATS.iter().find(|f| f.name == name)
}

/// The names of `formats` for a sentence: "a, b or c".
pub fn names<'a>(formats: impl IntoIterator<Item = &'a Format>) -> String {
    words::either(formats.into_iter().map(|f| f.name))
}

/// The stack formats, in table order.
pub fn stack_formats() -> impl Iterator<Item = &'static Format> {
    FORMATS.iter().filter(|f| f.is_stack_format())
}

/// The formats that show the allocating functions (`report --functions`).
pub fn function_formats() -> impl Iterator<Item = &'static Format> {
    FORMATS.iter().filter(|f| f.needs.functions)
}

/// The section of docs/formats.md that lists every format: one table row per format.
pub fn formats_doc_table() -> String {
    let mut table = String::from("| `--format` | writes |\n|---|---|\n");
    for f in FORMATS {
        table.push_str(&format!(
            "| `{}` | {} |\n",
            f.name,
            f.help.replace('|', "\\|")
        ));
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found() {
        for (i, f) in FORMATS.iter().enumerate() {
            assert_eq!(format(f.name).map(|g| g.name), Some(f.name));
            assert!(FORMATS[..i].iter().all(|g| g.name != f.name), "{}", f.name);
        }
        assert!(format("xml").is_none());
    }

    #[test]
    fn names_make_a_sentence() {
        assert_eq!(
            names(stack_formats()),
            "folded, flamegraph, pprof or speedscope"
        );
        assert_eq!(names(&FORMATS[..1]), "text");
    }

    #[test]
    fn the_default_is_text() {
        let default: &Format = Default::default();
        assert_eq!(default.name, "text");
    }

    /// docs/formats.md lists every format as the table does.
    #[test]
    fn the_docs_list_every_format() {
        let doc = include_str!("../../docs/formats.md");
        assert!(
            doc.contains(&formats_doc_table()),
            "docs/formats.md must hold, under \"Every format\", exactly:\n{}",
            formats_doc_table()
        );
    }
}
