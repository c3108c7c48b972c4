//! `report --format flamegraph`: the folded lines of one view drawn as an SVG flame graph by
//! inferno, whose SVG embeds its own script (hover details, search, zoom), so the file works
//! offline. The HTML report embeds the heap's three and the resident one through [`write_svg`].
//!
//! Drawn to be read on the first screen: upside down (an icicle graph, the root at the top), so
//! the wide frames are right under the title however deep the thin towers go (a Python
//! program's 70-frame stacks left 800 px of empty space above them), and each frame labelled
//! with its function's name without the C++ parameter list (`profile::label`), which inferno
//! cuts from the left when it does not fit, so the function's own name is what stays.

use std::io::{self, Write};

use inferno::flamegraph::{self, Direction, Options, TextTruncateDirection};

use super::words;
use crate::model::profile::{folded, Naming, Profile, View, Weight};

/// Writes the flame graph of `view` weighed by `weight`, titled `title`, to `out`. A view
/// with nothing in it (no leaks, say) is a small SVG that says so, rather than inferno's error
/// picture, so a page embedding several views always gets a valid one.
pub fn write_svg(
    profile: &Profile,
    view: View,
    weight: Weight,
    title: &str,
    out: &mut dyn Write,
) -> io::Result<()> {
    let lines: Vec<String> = folded(profile, view, weight, Naming::Label)
        .into_iter()
        .map(|(stack, value)| format!("{stack} {value}"))
        .collect();
    if lines.is_empty() {
        return write_empty(view, weight, title, out);
    }
    let mut options = Options::default();
    options.title = title.to_string();
    // Under the title, that the widths are estimates from sampled stacks, when they are.
    options.subtitle = words::estimates_of(profile, view);
    options.count_name = view.unit(weight).to_string();
    options.name_type = "Function:".to_string();
    // The root at the top: the widest frames on the first screen.
    options.direction = Direction::Inverted;
    // inferno's script relabels every frame on load from its title; cut from the left, a
    // label keeps its end, which `Naming::Label` makes the function's name.
    options.text_truncate_direction = TextTruncateDirection::Left;
    // The same recording gives the same file (inferno otherwise colors frames at random).
    options.deterministic = true;
    options.hash = true;
    flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), out)
}

/// Writes the differential flame graph of `lines` (`stack base new`, sorted by stack, as
/// `memtrack diff --format folded` prints them) to `out`, as inferno draws one: frame widths
/// from the new values, the hue from the change, red where the new recording has more and blue
/// where it has less. With `base_widths`, the widths are the base's (so stacks the new
/// recording no longer has are visible), with the hues kept: red is still more in the new one.
/// `subject` names what the values are ("allocated", ...) for the message of a graph whose
/// widths are all 0, which is an SVG that says so rather than inferno's error picture.
pub fn write_differential_svg(
    lines: &[(String, u64, u64)],
    weight: Weight,
    subject: &str,
    title: &str,
    base_widths: bool,
    out: &mut dyn Write,
) -> io::Result<()> {
    // inferno takes the width from the last column and colors by last minus first; swapping
    // the columns and negating the hues draws the base's widths with the same colors.
    let folded: Vec<String> = lines
        .iter()
        .map(|(stack, base, new)| match base_widths {
            false => format!("{stack} {base} {new}"),
            true => format!("{stack} {new} {base}"),
        })
        .collect();
    let (widths, other) = if base_widths {
        ("base", "new")
    } else {
        ("new", "base")
    };
    let total = |column: fn(&(String, u64, u64)) -> u64| {
        lines.iter().map(column).fold(0u64, u64::saturating_add)
    };
    let (base_total, new_total) = (total(|l| l.1), total(|l| l.2));
    let (drawn, undrawn) = if base_widths {
        (base_total, new_total)
    } else {
        (new_total, base_total)
    };
    if drawn == 0 {
        let hint = if base_widths || undrawn == 0 {
            ""
        } else {
            "; --base-widths draws its stacks"
        };
        let unit = weight.unit();
        let message = format!(
            "nothing {subject} in the {widths} recording: 0 {unit} ({undrawn} {unit} in the \
             {other} one{hint})"
        );
        return write_message(title, &message, out);
    }
    let mut options = Options::default();
    options.title = title.to_string();
    options.subtitle = Some(format!(
        "widths: the {widths} recording; red: more in the new recording than in the base, \
         blue: less"
    ));
    options.count_name = weight.unit().to_string();
    options.name_type = "Function:".to_string();
    options.negate_differentials = base_widths;
    options.deterministic = true;
    options.hash = true;
    flamegraph::from_lines(&mut options, folded.iter().map(String::as_str), out)
}

/// An SVG with the title and a line saying the view is empty.
fn write_empty(view: View, weight: Weight, title: &str, out: &mut dyn Write) -> io::Result<()> {
    let message = format!(
        "nothing {} in this scope: 0 {}",
        view.describe(),
        view.unit(weight)
    );
    write_message(title, &message, out)
}

/// An SVG with the title and one line of `message` under it.
fn write_message(title: &str, message: &str, out: &mut dyn Write) -> io::Result<()> {
    write!(
        out,
        "<?xml version=\"1.0\" standalone=\"no\"?>\n\
         <svg version=\"1.1\" width=\"1200\" height=\"80\" viewBox=\"0 0 1200 80\" \
         xmlns=\"http://www.w3.org/2000/svg\">\n\
         <text x=\"600\" y=\"24\" text-anchor=\"middle\" font-family=\"Verdana\" \
         font-size=\"17\">{}</text>\n\
         <text x=\"600\" y=\"56\" text-anchor=\"middle\" font-family=\"Verdana\" \
         font-size=\"12\">{}</text>\n</svg>\n",
        xml_escape(title),
        xml_escape(message)
    )
}

/// `s` as XML text.
fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::profile::{Sample, Stack, Values};
    use crate::model::sites::SiteFrame;

    fn profile() -> Profile {
        let frame = |function: &str| SiteFrame {
            function: function.into(),
            file: String::new(),
            line: 0,
            module: "/a".into(),
            offset: 1,
            inlined: false,
        };
        Profile {
            recorded: true,
            frames: vec![frame("malloc"), frame("main")],
            stacks: vec![Stack {
                id: 1,
                frames: vec![0, 1],
                toucher: false,
            }],
            samples: vec![Sample {
                stack: 0,
                pid: 1,
                command: "/a".into(),
                benchmark: None,
                values: Values {
                    allocations: 3,
                    allocated_bytes: 1234,
                    ..Values::default()
                },
            }],
            ..Profile::default()
        }
    }

    #[test]
    fn svg_names_frames_with_their_values() {
        let mut out = Vec::new();
        write_svg(
            &profile(),
            View::Allocated,
            Weight::Bytes,
            "t <1>",
            &mut out,
        )
        .unwrap();
        let svg = String::from_utf8(out).unwrap();
        assert!(
            svg.contains("<title>malloc (1,234 bytes, 100.00%)</title>"),
            "{svg}"
        );
        assert!(svg.contains("t &lt;1&gt;"), "{svg}");
    }

    /// The y of the rectangle of the frame titled `title…`.
    fn frame_y(svg: &str, title: &str) -> f64 {
        let at = svg.find(&format!("<title>{title}")).expect(title);
        let rect = &svg[at..];
        let y = &rect[rect.find(" y=\"").expect("y") + 4..];
        y[..y.find('"').unwrap()].parse().unwrap()
    }

    #[test]
    fn long_cxx_names_keep_the_function_name_and_the_root_is_on_top() {
        let mut p = profile();
        let make = "Factory<Blob<(unsigned long)7781> >::make(std::__cxx11::basic_string<char, \
                    std::char_traits<char>, std::allocator<char> >&&, std::vector<int, \
                    std::allocator<int> > const&)";
        p.frames = vec![
            SiteFrame {
                function: make.into(),
                ..p.frames[1].clone()
            },
            SiteFrame {
                function: "Blob<(unsigned long)7781>* build<Blob<(unsigned long)7781> >()".into(),
                ..p.frames[1].clone()
            },
            p.frames[1].clone(),
        ];
        p.stacks[0].frames = vec![0, 1, 2];
        let mut out = Vec::new();
        write_svg(&p, View::Allocated, Weight::Bytes, "t", &mut out).unwrap();
        let svg = String::from_utf8(out).unwrap();
        // The label and the hover title: the name without its parameters, whole (the frame
        // is the whole width); no parameter list anywhere.
        let label = "Factory&lt;Blob&lt;(unsigned long)7781&gt; &gt;::make";
        assert!(svg.contains(&format!(">{label}</text>")), "{svg}");
        assert!(
            svg.contains(&format!("<title>{label} (1,234 bytes")),
            "{svg}"
        );
        assert!(svg.contains(">build</text>"), "{svg}");
        assert!(!svg.contains("basic_string"), "{svg}");
        // An icicle: main, the root's child, above build, above make; all under the title.
        let (root, main) = (frame_y(&svg, "all ("), frame_y(&svg, "main ("));
        let (build, leaf) = (frame_y(&svg, "build ("), frame_y(&svg, "Factory"));
        assert!(root < main && main < build && build < leaf, "{svg}");
        assert!(root < 100.0, "the root is at the top: {root}");
        assert!(svg.contains("var truncate_text_right = false;"), "{svg}");
    }

    #[test]
    fn a_sampled_profile_says_its_widths_are_estimates_under_the_title() {
        let svg = |p: &Profile| {
            let mut out = Vec::new();
            write_svg(p, View::Allocated, Weight::Bytes, "t", &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        let mut p = profile();
        assert!(!svg(&p).contains("estimate"));
        p.sampling = Some(crate::testkit::stack_sampling());
        let sampled = svg(&p);
        let subtitle = format!(">{}</text>", crate::testkit::SAMPLED);
        assert!(sampled.contains(&subtitle), "{sampled}");
    }

    #[test]
    fn an_empty_view_is_a_valid_svg_that_says_so() {
        let mut out = Vec::new();
        write_svg(&profile(), View::Leaked, Weight::Count, "t", &mut out).unwrap();
        let svg = String::from_utf8(out).unwrap();
        assert!(
            svg.contains("nothing leaked in this scope: 0 allocations"),
            "{svg}"
        );
        assert!(svg.trim_end().ends_with("</svg>"));
    }
}
