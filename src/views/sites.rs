//! The allocation sites of the text report (`--stacks`): a line of stack-walk counters, then
//! one aligned row per site with its frames under it, for the scope or for each benchmark; then
//! the scope's resident memory by the code that made it resident, when recorded.
//!
//! Flow: `text` calls [`write_stacks`] (or [`write_benchmark_stacks`] with `--by bench`) after
//! its tables, with the report's `StackReport`s, which the sites pass (`analyze::stacks`)
//! filled. Tables are fitted by `screen`, frames folded by `frames`, and said as `words` says.

use std::io::{self, Write};

use crate::units::format_bytes;

use super::frames;
use super::screen::{self, FitColumn};
use super::words::*;
use crate::model::metrics::Report;
use crate::model::sites::{ResidentSite, ResidentSites, SiteFrame, SiteMetrics, StackReport};

/// Lines of frames shown per allocation site; the JSON has them all. The innermost ones say
/// where the allocation was made; a deep stack's outer frames (main, the runtime) would push
/// the next site off the screen.
const SITE_FRAMES: usize = 12;

/// The top allocation sites of the scope (`--stacks`).
pub(super) fn write_stacks(report: &Report, width: usize, out: &mut dyn Write) -> io::Result<()> {
    match &report.stacks {
        Some(stacks) => write_sites(&scope_title(report), stacks, width, out),
        None => Ok(()),
    }
}

/// The top allocation sites of each benchmark (`--by bench --stacks`), or the one note of a
/// recording without call stacks.
pub(super) fn write_benchmark_stacks(
    report: &Report,
    width: usize,
    out: &mut dyn Write,
) -> io::Result<()> {
    match &report.stacks {
        None => return Ok(()),
        Some(stacks) if !stacks.recorded => return write_sites("", stacks, width, out),
        Some(_) => {}
    }
    for b in &report.benchmarks {
        if let Some(stacks) = &b.stacks {
            write_sites(&format!("benchmark {}", clean(&b.uri)), stacks, width, out)?;
        }
    }
    Ok(())
}

/// The top allocation sites of the scope called `title`: a line of stack-walk counters, then
/// one aligned row per site with its frames indented under it, innermost first. A narrow
/// screen drops the allocation count first, then the temporaries.
fn write_sites(
    title: &str,
    stacks: &StackReport,
    width: usize,
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(out)?;
    if !stacks.recorded {
        return writeln!(out, "{NO_STACKS}");
    }
    let shown = sites_shown(stacks);
    writeln!(
        out,
        "allocation sites by {}: {shown} ({title}: peak heap {})",
        order_label(&stacks.order),
        peak(stacks.peak_live_bytes, stacks.peak_live_at_ns)
    )?;
    write_walks(stacks, out)?;
    write_local_symbols(stacks, out)?;
    if let Some(sampling) = &stacks.sampling {
        writeln!(out, "  {}", estimates_note(sampling))?;
    }
    // A scope without an allocation site (an allocator memtrack does not know) may still
    // have made pages resident.
    if !stacks.sites.is_empty() {
        write_site_table(stacks, width, out)?;
    }
    match &stacks.resident {
        Some(resident) => write_resident(title, resident, width, out),
        None => Ok(()),
    }
}

/// The allocation sites' table, each site with its frames.
fn write_site_table(stacks: &StackReport, width: usize, out: &mut dyn Write) -> io::Result<()> {
    let with_end = stacks.sites.iter().any(|s| s.live_at_end_blocks > 0);
    let mut columns = vec![
        FitColumn::right("#"),
        FitColumn::right("AT PEAK"),
        FitColumn::right("ALLOCATED"),
        FitColumn::right("ALLOCS"),
        FitColumn::right("LEAKED"),
    ];
    if with_end {
        columns.push(FitColumn::right("LIVE AT END"));
    }
    columns.push(FitColumn::right("TEMPORARY"));
    let rows = stacks
        .sites
        .iter()
        .enumerate()
        .map(|(n, site)| site_row(n + 1, site, with_end))
        .collect();
    let fitted = screen::fit_table(
        &columns,
        rows,
        &["ALLOCS", "TEMPORARY", "LIVE AT END", "ALLOCATED"],
        width,
    );
    writeln!(out)?;
    writeln!(out, "{}", fitted.lines[0])?;
    for (line, site) in fitted.lines[1..].iter().zip(&stacks.sites) {
        writeln!(out, "{line}")?;
        write_frames(&site.frames, width, out)?;
    }
    screen::write_dropped(&fitted, out)?;
    if with_end {
        writeln!(out)?;
        writeln!(
            out,
            "  LIVE AT END: in processes still running when the recording ended (not leaks)"
        )?;
    }
    Ok(())
}

/// The scope's resident memory at its peak by the code that made it resident, the top stacks
/// with their frames, then what no walked stack made resident.
fn write_resident(
    title: &str,
    r: &ResidentSites,
    width: usize,
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(out)?;
    writeln!(out, "{}", resident_sites_heading(title, r))?;
    writeln!(out, "  {}", resident_sites_note(r))?;
    let columns = [
        FitColumn::right("#"),
        FitColumn::right("AT PEAK"),
        FitColumn::left("OF WHICH"),
        FitColumn::right("MADE RESIDENT"),
    ];
    let row = |n: String, s: &ResidentSite| {
        vec![
            n,
            format_bytes(s.resident.total_bytes),
            members(&s.resident),
            format_bytes(s.faulted.total_bytes),
        ]
    };
    let mut rows: Vec<Vec<String>> = (r.sites.iter().enumerate())
        .map(|(n, s)| row((n + 1).to_string(), s))
        .collect();
    rows.push(row("-".to_string(), &r.unattributed));
    let fitted = screen::fit_table(&columns, rows, &["OF WHICH"], width);
    writeln!(out)?;
    writeln!(out, "{}", fitted.lines[0])?;
    for (line, site) in fitted.lines[1..].iter().zip(&r.sites) {
        writeln!(out, "{line}")?;
        write_frames(&site.frames, width, out)?;
    }
    if let Some(line) = fitted.lines.get(r.sites.len() + 1) {
        writeln!(out, "{line}")?;
        writeln!(out, "       {UNATTRIBUTED}")?;
    }
    if let Some(note) = inherited_note(r) {
        writeln!(out, "  {note}")?;
    }
    screen::write_dropped(&fitted, out)
}

/// The kernel's stack-walk counters, every cause shown as lost events are.
fn write_walks(stacks: &StackReport, out: &mut dyn Write) -> io::Result<()> {
    match &stacks.walks {
        Some(_) if walker_never_walked(stacks) => writeln!(out, "  stack walks: {NO_WALKER}"),
        Some(w) => writeln!(
            out,
            "  stack walks: {}, {} truncated, {} unknown, {} unsupported, {} hash collisions, {} \
             sent uncached",
            w.walks, w.truncated, w.unknown, w.unsupported, w.collisions, w.uncached
        ),
        None => writeln!(
            out,
            "  stack walks: the file has no walk counters (they are written at the end of \
             record: it was cut short)"
        ),
    }
}

/// That the frames were named after the fact from the files of the machine the report ran on
/// (the file has no symbols: its recorder was cut short), so a saved report says so too.
fn write_local_symbols(stacks: &StackReport, out: &mut dyn Write) -> io::Result<()> {
    let Some(local) = &stacks.local_symbols else {
        return Ok(());
    };
    write!(
        out,
        "  symbols: none in the file; {} modules named from this machine's files (same build id)",
        local.named.len()
    )?;
    if !local.unnamed.is_empty() {
        write!(
            out,
            ", {} left as module+offset (missing here or another build)",
            local.unnamed.len()
        )?;
    }
    writeln!(out)
}

/// The cells of one site's row.
fn site_row(n: usize, s: &SiteMetrics, with_end: bool) -> Vec<String> {
    let leaked = if s.leaked_blocks == 0 {
        "0 B".to_string()
    } else {
        format!(
            "{} in {}",
            format_bytes(s.leaked_bytes),
            counted(s.leaked_blocks, "block", "blocks")
        )
    };
    let mut row = vec![
        n.to_string(),
        format_bytes(s.peak_live_bytes),
        format_bytes(s.allocated_bytes),
        s.allocations.to_string(),
        leaked,
    ];
    if with_end {
        row.push(format_bytes(s.live_at_end_bytes));
    }
    row.push(s.temporary.to_string());
    row
}

/// A site's frames, indented under its row, at most [`SITE_FRAMES`] lines (the standard
/// library's runs folded, `frames::for_people`), each cut to `width`.
fn write_frames(frames: &[SiteFrame], width: usize, out: &mut dyn Write) -> io::Result<()> {
    if frames.is_empty() {
        return writeln!(out, "       [no call stack recorded for these allocations]");
    }
    let room = width.saturating_sub(7).min(COMMAND_WIDTH);
    let (lines, more) = frames::for_people(frames, SITE_FRAMES);
    for line in lines {
        let text = match line {
            frames::Line::Frame(f) => frame_within(f, room),
            frames::Line::Library(n) => screen::shorten_to(&frames::library_text(n), room),
        };
        writeln!(out, "       {text}")?;
    }
    if more > 0 {
        let noun = if more == 1 { "frame" } else { "frames" };
        writeln!(
            out,
            "       … {more} more {noun} (--format json lists every frame)"
        )?;
    }
    Ok(())
}

/// [`frame_text`] in at most `width` characters. A frame too wide loses the start of its file's
/// path, not its end: the file name and line say more than the directories (Rust's standard
/// library is at `/rustc/<40 hex digits>/library/…`). A function name too wide is cut at its end.
fn frame_within(f: &SiteFrame, width: usize) -> String {
    let whole = clean(&frame_text(f));
    let chars = whole.chars().count();
    if chars <= width || f.is_mark() || f.function.is_empty() || f.file.is_empty() {
        return screen::shorten_to(&whole, width);
    }
    // `whole` ends with the place, "file:line" (`clean` keeps every character where it is).
    let head = chars - frame_place(f).chars().count();
    // Room for "…" and at least the file name's last few characters.
    if head + 8 > width {
        return screen::shorten_to(&whole, width);
    }
    let tail_from = chars - (width - head - 1);
    let head: String = whole.chars().take(head).collect();
    let tail: String = whole.chars().skip(tail_from).collect();
    format!("{head}…{tail}")
}

#[cfg(test)]
mod tests {
    use super::super::text::{write_benchmarks_text, write_text, TextLayout};
    use super::*;
    use crate::analyze::accounting::analyze_sites;
    use crate::analyze::stacks::{SiteOptions, SiteOrder};
    use crate::format::{Event, EventKind, MODULE_MARK};
    use crate::model::metrics::Scope;
    use crate::testkit::*;

    /// Two sites under main: make_a's (symbolized, one frame inlined) and a stack whose caller
    /// has no symbol and whose walk was truncated. A's block is leaked, B's is freed at once.
    fn events() -> Vec<Event> {
        let mut events = stack_prelude(vec![
            module(1, "/usr/lib/x86_64-linux-gnu/libc.so.6"),
            module(2, "/work/app"),
            stack_node(1, 0, 2, 0x1100),
            stack_node(2, 1, 1, 0x9a1b0),
            stack_node(3, 0, MODULE_MARK, 1),
            stack_node(4, 3, 2, 0x1234),
            stack_node(5, 4, 1, 0x9a1b0),
            symbol(1, 0x9a1b0, &[("malloc", "", 0)]),
            symbol(2, 0x1100, &[("make_a", "app.c", 7), ("main", "app.c", 20)]),
            stack_stats([3, 1, 0, 0, 0, 0]),
        ]);
        events.extend(seq(vec![
            malloc_from(2, 0x10, 4096),
            malloc_from(5, 0x20, 100),
            free(0x20),
            exit(0),
        ]));
        events
    }

    fn render_sites(events: Vec<Event>, top: usize) -> String {
        sites_text(&sites_report(events, top))
    }

    fn sites_report(events: Vec<Event>, top: usize) -> Report {
        let options = SiteOptions {
            order: SiteOrder::Peak,
            top,
            profile: false,
            functions: None,
        };
        analyze_sites(&header(), events, None, &Scope::Run, options)
    }

    /// The sites section of the text report of `report`, 200 columns wide.
    fn sites_text(report: &Report) -> String {
        let layout = TextLayout {
            width: 200,
            ..TextLayout::default()
        };
        let mut out = Vec::new();
        write_text(report, &layout, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let at = text.find("allocation sites").expect("a sites section");
        text[at..].to_string()
    }

    #[test]
    fn resident_sites_follow_the_allocation_sites_and_add_up_to_the_peak() {
        use crate::format::{EventKind, RssMember};
        let mut events = events();
        events.pop(); // the exit: the pages are resident at the end
        let fault = |pages, addr, stack_id| EventKind::Fault {
            member: RssMember::Anon,
            pages,
            addr,
            stack_id,
        };
        events.extend(seq(vec![
            rss(RssMember::Anon, 3, 3, true),
            rss(RssMember::Anon, 2, 5, true),
            fault(2, 0x7000, 1),
            rss(RssMember::File, 1, 1, true),
            EventKind::Fault {
                member: RssMember::File,
                pages: 1,
                addr: 0x9000,
                stack_id: 1,
            },
        ]));
        let text = render_sites(events, 10);
        let at = text
            .find("resident memory by site")
            .expect("a resident section");
        let expected = "resident memory by site: 1 of 1 (whole run (1 process): peak resident \
                        24.0 KiB at 3 ns)
  the code that made the pages resident; 2 of 3 increases walked

  #   AT PEAK  OF WHICH                    MADE RESIDENT
  1  12.0 KiB  anon 8.0 KiB, file 4.0 KiB       12.0 KiB
       make_a (inlined)  app.c:7
       main  app.c:20
  -  12.0 KiB  anon 12.0 KiB                    12.0 KiB
       [unattributed: made resident with no stack walked]
";
        assert_eq!(&text[at..], expected);
    }

    #[test]
    fn resident_sites_show_without_an_allocation_site() {
        let mut report = sites_report(events(), 10);
        let stacks = report.stacks.as_mut().unwrap();
        stacks.sites.clear();
        stacks.resident = Some(ResidentSites {
            peak_bytes: 4096,
            ..ResidentSites::default()
        });
        let text = sites_text(&report);
        assert!(text.contains("\nresident memory by site: "), "{text}");
    }

    #[test]
    fn sampled_resident_sites_say_what_their_estimates_stand_on() {
        let r = ResidentSites {
            peak_bytes: 4096,
            faults: 1789,
            walked: 33,
            sampling: Some(crate::model::sites::FaultSampling {
                mean_bytes: 256 << 10,
                walked: 33,
                increases: 1789,
            }),
            ..ResidentSites::default()
        };
        let mut out = Vec::new();
        write_resident("whole run", &r, 100, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let note = "  the code that made the pages resident; estimates: values estimated from 33 \
                    walked increases of resident memory of 1789, 1 per 256.0 KiB made resident; \
                    record with --stacks for exact values\n";
        assert!(text.contains(note), "{text}");
    }

    #[test]
    fn sites_with_no_walk_say_that_the_walker_did_not_load() {
        let mut events = events();
        let counters = events
            .iter_mut()
            .find(|e| matches!(e.kind, EventKind::StackStats(_)))
            .unwrap();
        counters.kind = stack_stats([0; 6]);
        let text = render_sites(events, 10);
        let line = format!("  stack walks: {NO_WALKER}\n");
        assert!(text.contains(&line), "{text}");
        assert!(!text.contains("0 truncated"), "{text}");
        // Without a site, no walk is no news: the counters as they are.
        let quiet = render_sites(stack_prelude(vec![stack_stats([0; 6])]), 10);
        assert!(quiet.contains("stack walks: 0, 0 truncated"), "{quiet}");
    }

    #[test]
    fn sampled_sites_say_their_values_are_estimates() {
        let exact = render_sites(events(), 10);
        assert!(!exact.contains("estimate"), "{exact}");
        let mut report = sites_report(events(), 10);
        report.stacks.as_mut().unwrap().sampling = Some(stack_sampling());
        // One line under the walk counters, and nothing else changed.
        let note = format!("  {SAMPLED_NOTE}\n");
        let expected = inserted_after(&exact, "0 sent uncached\n", &note);
        assert_eq!(sites_text(&report), expected);
    }

    /// One site's 10 bytes, allocated inside benchmark parse::small's window.
    fn benchmark_events() -> Vec<Event> {
        let mut events = stack_prelude(vec![module(1, "/a"), stack_node(1, 0, 1, 5)]);
        events.extend([
            bench(1, "parse::small", 0),
            start(2),
            at(3, 1, 1, malloc_from(1, 1, 10)),
            stop(4),
            at(5, 1, 1, exit(0)),
        ]);
        events
    }

    #[test]
    fn a_sampled_benchmarks_sites_say_so_too() {
        let events = benchmark_events();
        let mut report =
            analyze_sites(&header(), events, None, &Scope::Run, SiteOptions::default());
        let render = |report: &Report| {
            let mut out = Vec::new();
            write_benchmarks_text(report, &TextLayout::default(), &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        assert!(!render(&report).contains("estimates"));
        report.benchmarks[0].stacks.as_mut().unwrap().sampling = Some(stack_sampling());
        let text = render(&report);
        assert_eq!(
            text.matches("  estimates: values estimated from 1200 sampled")
                .count(),
            1,
            "{text}"
        );
    }

    #[test]
    fn sites_with_frames_under_them() {
        assert_eq!(
            render_sites(events(), 10),
            "allocation sites by live bytes at the peak: 2 sites (whole run (1 process): peak heap \
             4.1 KiB at 1 ns)
  stack walks: 3, 1 truncated, 0 unknown, 0 unsupported, 0 hash collisions, 0 sent uncached

  #  AT PEAK  ALLOCATED  ALLOCS              LEAKED  TEMPORARY
  1  4.0 KiB    4.0 KiB       1  4.0 KiB in 1 block          0
       malloc  libc.so.6+0x9a1b0
       make_a (inlined)  app.c:7
       main  app.c:20
  2    100 B      100 B       1                 0 B          1
       malloc  libc.so.6+0x9a1b0
       app+0x1234
       [truncated]
"
        );
    }

    #[test]
    fn top_says_how_many_there_are() {
        let text = render_sites(events(), 1);
        assert!(text.starts_with("allocation sites by live bytes at the peak: top 1 of 2 sites"));
        assert!(!text.contains("[truncated]"), "{text}");
    }

    #[test]
    fn frames_named_after_the_fact_say_so() {
        // No Symbol event for the module: the report tries this machine, which has no such file.
        let mut gone = stack_prelude(vec![
            module(1, "/nonexistent/libgone.so.3"),
            stack_node(1, 0, 1, 0x10),
        ]);
        gone.extend(seq(vec![malloc_from(1, 1, 1), exit(0)]));
        let text = render_sites(gone, 10);
        assert!(
            text.contains(
                "record: it was cut short)\n  symbols: none in the file; 0 modules named from \
                 this machine's files (same build id), 1 left as module+offset (missing here or \
                 another build)\n"
            ),
            "{text}"
        );
        assert!(text.contains("libgone.so.3+0x10\n"), "{text}");
        assert!(!render_sites(events(), 10).contains("symbols:"));
    }

    #[test]
    fn long_stacks_are_cut_in_text() {
        let mut kinds = vec![module(1, "/a")];
        for id in 1..=20 {
            kinds.push(stack_node(id, id - 1, 1, u64::from(id)));
        }
        let mut events = stack_prelude(kinds);
        events.extend(seq(vec![malloc_from(20, 1, 1), exit(0)]));
        let text = render_sites(events, 10);
        assert!(text.contains("a+0x9\n"), "{text}");
        assert!(!text.contains("a+0x8\n"), "{text}");
        assert!(
            text.ends_with("       … 8 more frames (--format json lists every frame)\n"),
            "{text}"
        );
    }

    #[test]
    fn a_frame_too_wide_loses_the_start_of_its_path_not_its_line() {
        let f = SiteFrame {
            function: "alloc::vec::Vec<T>::with_capacity".into(),
            file: "/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/alloc/src/vec/mod.rs"
                .into(),
            line: 524,
            module: "/bin/p".into(),
            offset: 0x10,
            inlined: true,
        };
        let whole = frame_text(&f);
        assert_eq!(frame_within(&f, 200), whole);
        let cut = frame_within(&f, 80);
        assert_eq!(cut.chars().count(), 80, "{cut}");
        assert!(
            cut.starts_with("alloc::vec::Vec<T>::with_capacity (inlined)  …")
                && cut.ends_with("/library/alloc/src/vec/mod.rs:524"),
            "{cut}"
        );
        // No room for the path's end beside the name: cut at the end, as any line.
        let narrow = frame_within(&f, 40);
        assert_eq!(narrow, screen::shorten_to(&whole, 40));
        // A frame without a file has no path to cut.
        let bare = SiteFrame {
            file: String::new(),
            line: 0,
            ..f
        };
        assert_eq!(
            frame_within(&bare, 30),
            screen::shorten_to(&frame_text(&bare), 30)
        );
    }

    #[test]
    fn a_recording_without_stacks_gets_one_note() {
        let events = seq(vec![malloc(1, 10), exit(0)]);
        let text = render_sites(events, 10);
        assert_eq!(
            text,
            "allocation sites: this recording has no call stacks (it was recorded with \
             --no-stacks); record again without it to see where the allocations come from\n"
        );
    }

    #[test]
    fn by_bench_lists_each_benchmarks_sites() {
        let events = benchmark_events();
        let report = analyze_sites(&header(), events, None, &Scope::Run, SiteOptions::default());
        let mut out = Vec::new();
        let layout = TextLayout {
            width: 200,
            ..TextLayout::default()
        };
        write_benchmarks_text(&report, &layout, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(
                "allocation sites by live bytes at the peak: 1 site (benchmark parse::small: \
                 peak heap 10 B at 3 ns)"
            ),
            "{text}"
        );
        assert_eq!(text.matches("allocation sites").count(), 1, "{text}");
    }

    #[test]
    fn live_at_end_gets_a_column_and_a_note() {
        let mut events = stack_prelude(vec![module(1, "/a"), stack_node(1, 0, 1, 5)]);
        events.extend(seq(vec![malloc_from(1, 1, 10)]));
        let text = render_sites(events, 10);
        assert!(text.contains("LIVE AT END"), "{text}");
        assert!(
            text.contains("still running when the recording ended"),
            "{text}"
        );
    }
}
