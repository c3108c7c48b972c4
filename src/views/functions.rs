//! The allocating functions of the text report (`--functions`): one aligned row per function,
//! what it allocated itself and what was allocated under it, in the order's measure.
//!
//! Flow: `text` calls [`write_functions`] after the sites, with the report's
//! `FunctionReport`, which the sites pass (`analyze::functions`) filled. The table is fitted by
//! `screen`, and said as `words` says; markdown writes the same cells ([`cells`]).

use std::io::{self, Write};

use super::screen::{self, FitColumn};
use super::words::*;
use crate::model::functions::{Cost, FunctionMetrics, FunctionReport};
use crate::model::measure::Measure;
use crate::model::metric::value_text;
use crate::model::metrics::Report;

/// The columns of the table, text and markdown.
pub(super) const HEADERS: [&str; 7] = [
    "#",
    "SELF",
    "SELF %",
    "CUMULATIVE",
    "CUM %",
    "ALLOCS",
    "FUNCTION",
];

/// What SELF and CUMULATIVE mean, under the table.
pub(super) const FOOTER: &str = "SELF: allocated by the function itself (the allocator's and \
     the standard library's frames folded into it); CUMULATIVE: by it and what it calls; \
     ALLOCS: its own allocations";

/// The top allocating functions of the scope (`--functions`), or the one note of a recording
/// without call stacks.
pub(super) fn write_functions(
    report: &Report,
    width: usize,
    out: &mut dyn Write,
) -> io::Result<()> {
    let Some(functions) = &report.functions else {
        return Ok(());
    };
    writeln!(out)?;
    if !functions.recorded {
        return writeln!(out, "{NO_FUNCTIONS}");
    }
    let measure = measure_of(functions);
    writeln!(
        out,
        "allocating functions by {}: {} ({}: {} in all)",
        order_label(&functions.order),
        functions_shown(functions),
        scope_title(report),
        value_text(measure.unit(), Some(functions.total.value(measure)))
    )?;
    if let Some(sampling) = &functions.sampling {
        writeln!(out, "  {}", estimates_note(sampling))?;
    }
    if functions.functions.is_empty() {
        return Ok(());
    }
    let columns = [
        FitColumn::right(HEADERS[0]),
        FitColumn::right(HEADERS[1]),
        FitColumn::right(HEADERS[2]),
        FitColumn::right(HEADERS[3]),
        FitColumn::right(HEADERS[4]),
        FitColumn::right(HEADERS[5]),
        FitColumn::text(HEADERS[6], 20),
    ];
    let rows = functions
        .functions
        .iter()
        .enumerate()
        .map(|(n, f)| cells(n + 1, f, measure, &functions.total))
        .collect();
    let fitted = screen::fit_table(&columns, rows, &["ALLOCS", "CUM %", "SELF %"], width);
    writeln!(out)?;
    for line in &fitted.lines {
        writeln!(out, "{line}")?;
    }
    screen::write_dropped(&fitted, out)?;
    writeln!(out)?;
    writeln!(out, "  {FOOTER}")
}

/// The measure the functions are sorted by, whose values the table shows.
pub(super) fn measure_of(functions: &FunctionReport) -> Measure {
    Measure::from_word(&functions.order).unwrap_or(Measure::Peak)
}

/// The cells of function `f`'s row, number `n`: its own and cumulative `measure` with their
/// shares of the scope's `total`, its own allocations, and its name.
pub(super) fn cells(n: usize, f: &FunctionMetrics, measure: Measure, total: &Cost) -> Vec<String> {
    let unit = measure.unit();
    let whole = total.value(measure);
    let (own, cumulative) = (f.own.value(measure), f.cumulative.value(measure));
    vec![
        n.to_string(),
        value_text(unit, Some(own)),
        percent(own, whole),
        value_text(unit, Some(cumulative)),
        percent(cumulative, whole),
        f.own.allocations.to_string(),
        function_text(f),
    ]
}

#[cfg(test)]
mod tests {
    use super::super::text::{write_text, TextLayout};
    use crate::analyze::accounting::analyze_sites;
    use crate::analyze::functions::FunctionOptions;
    use crate::analyze::stacks::SiteOptions;
    use crate::format::Event;
    use crate::model::metrics::Scope;
    use crate::testkit::*;

    /// The functions section of the text report of `events`, `width` wide.
    fn render(events: Vec<Event>, width: usize) -> String {
        let options = SiteOptions {
            functions: Some(FunctionOptions::default()),
            ..SiteOptions::default()
        };
        let mut report = analyze_sites(&header(), events, None, &Scope::Run, options);
        report.stacks = None;
        let layout = TextLayout {
            width,
            ..TextLayout::default()
        };
        let mut out = Vec::new();
        write_text(&report, &layout, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let at = text
            .find("allocating functions")
            .expect("a functions section");
        text[at..].to_string()
    }

    /// make_a inlined into main (4096 bytes, leaked), and an unnamed caller (100, freed): both
    /// live at the peak.
    fn events() -> Vec<Event> {
        let mut events = stack_prelude(vec![
            module(1, "/usr/lib/x86_64-linux-gnu/libc.so.6"),
            module(2, "/work/app"),
            stack_node(1, 0, 2, 0x1100),
            stack_node(2, 1, 1, 0x9a1b0),
            stack_node(4, 0, 2, 0x1234),
            stack_node(5, 4, 1, 0x9a1b0),
            symbol(1, 0x9a1b0, &[("malloc", "", 0)]),
            symbol(
                2,
                0x1100,
                &[("make_a", "/src/app.c", 7), ("main", "/src/app.c", 20)],
            ),
        ]);
        events.extend(seq(vec![
            malloc_from(2, 0x10, 4096),
            malloc_from(5, 0x20, 100),
            free(0x20),
            exit(0),
        ]));
        events
    }

    #[test]
    fn a_row_per_function_with_its_share() {
        assert_eq!(
            render(events(), 120),
            "allocating functions by live bytes at the peak: 3 functions (whole run (1 process): \
             4.1 KiB in all)\n\
             \n  #     SELF  SELF %  CUMULATIVE  CUM %  ALLOCS  FUNCTION\n  \
             1  4.0 KiB   97.6%     4.0 KiB  97.6%       1  make_a (app.c:7) in app\n  \
             2    100 B    2.4%       100 B   2.4%       1  app+0x1234\n  \
             3      0 B    0.0%     4.0 KiB  97.6%       0  main (app.c:20) in app\n\
             \n  SELF: allocated by the function itself (the allocator's and the standard \
             library's frames folded into it); CUMULATIVE:\n    by it and what it calls; \
             ALLOCS: its own allocations\n"
        );
    }

    #[test]
    fn markdown_has_the_same_cells_escaped() {
        let options = SiteOptions {
            functions: Some(FunctionOptions::default()),
            ..SiteOptions::default()
        };
        let report = analyze_sites(&header(), events(), None, &Scope::Run, options);
        let mut out = Vec::new();
        super::super::markdown::write_markdown(
            &report,
            crate::views::rows::Rows::Processes,
            crate::views::rows::RowOptions::default(),
            &mut out,
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        let at = text
            .find("#### Allocating functions")
            .expect("a functions section");
        assert_eq!(
            &text[at..],
            "#### Allocating functions by live bytes at the peak: 3 functions (whole run (1 \
             process): 4.1 KiB in all)\n\
             \n\
             | # | SELF | SELF % | CUMULATIVE | CUM % | ALLOCS | FUNCTION |\n\
             |--:|--:|--:|--:|--:|--:|:--|\n\
             | 1 | 4.0 KiB | 97.6% | 4.0 KiB | 97.6% | 1 | make\\_a (app.c:7) in app |\n\
             | 2 | 100 B | 2.4% | 100 B | 2.4% | 1 | app+0x1234 |\n\
             | 3 | 0 B | 0.0% | 4.0 KiB | 97.6% | 0 | main (app.c:20) in app |\n\
             \n\
             SELF: allocated by the function itself (the allocator's and the standard library's \
             frames folded into it); CUMULATIVE: by it and what it calls; ALLOCS: its own \
             allocations\n"
        );
    }

    #[test]
    fn sampled_functions_say_their_values_are_estimates() {
        let options = SiteOptions {
            functions: Some(FunctionOptions::default()),
            ..SiteOptions::default()
        };
        let mut report = analyze_sites(&header(), events(), None, &Scope::Run, options);
        report.stacks = None;
        let text = |report: &crate::model::metrics::Report| {
            let mut out = Vec::new();
            let layout = TextLayout {
                width: 200,
                ..TextLayout::default()
            };
            write_text(report, &layout, &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        let exact = text(&report);
        assert!(!exact.contains("estimate"), "{exact}");
        report.functions.as_mut().unwrap().sampling = Some(stack_sampling());
        let note = format!("  {SAMPLED_NOTE}\n");
        let expected = inserted_after(&exact, "4.1 KiB in all)\n", &note);
        assert_eq!(text(&report), expected);
    }

    #[test]
    fn a_recording_without_stacks_says_so() {
        let text = render(seq(vec![malloc(1, 10), exit(0)]), 200);
        assert_eq!(text, format!("{}\n", super::NO_FUNCTIONS));
    }
}
