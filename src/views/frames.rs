//! Which of a site's frames the views for people show (text, markdown, `diff`): the
//! standard library's frames between the allocator and the program's own code folded into one
//! line, so that the caller a reader looks for stays in the first few lines.
//!
//! A Rust `Vec::with_capacity` reaches malloc through some nine inlined frames of `alloc::`
//! (`RawVec`, `Global::allocate`, `alloc::alloc::alloc`), a C++ `vector::push_back` through
//! `_M_realloc_insert` and `new_allocator`: with five or twelve lines to show, the program's
//! frame fell off. Folded, the run keeps its outermost frame (the library function the program
//! called) and says how many it stands for. Which frames are the allocator's and the standard
//! library's is decided once, in `model::sites` (`allocator_frames`, `SiteFrame::is_library`),
//! which the stack formats use to start their stacks at the allocator's caller
//! (`model::sites::callers_start`) and the functions view (`analyze::functions`) to count
//! them for the program's function that called them. The JSON keeps every frame.

use crate::model::sites::{allocator_frames, SiteFrame};

/// A run of library frames shorter than this stays as it is: folding two lines into one line
/// that says "2 frames" hides them for nothing.
const FOLD_AT_LEAST: usize = 3;

/// One line of a site's frames.
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// A frame as it is.
    Frame(&'a SiteFrame),
    /// This many standard-library frames, the ones between the line before and the next.
    Library(usize),
}

/// The first `lines` lines of `frames` (innermost first) for people, and how many frames are
/// left beyond them.
pub fn for_people(frames: &[SiteFrame], lines: usize) -> (Vec<Line<'_>>, usize) {
    let mut shown = Vec::with_capacity(lines.min(frames.len()));
    // The innermost frames are the allocator function the probe is on: always themselves.
    let allocator = allocator_frames(frames);
    let mut i = 0;
    while i < frames.len() && shown.len() < lines {
        let run = if i < allocator {
            0
        } else {
            frames[i..].iter().take_while(|f| f.is_library()).count()
        };
        if run >= FOLD_AT_LEAST {
            // The run's outermost frame stays: it is what the program called.
            shown.push(Line::Library(run - 1));
            i += run - 1;
        } else {
            shown.push(Line::Frame(&frames[i]));
            i += 1;
        }
    }
    (shown, frames.len() - i)
}

/// The words of a folded run: "… 8 standard-library frames".
pub fn library_text(n: usize) -> String {
    let noun = if n == 1 { "frame" } else { "frames" };
    format!("… {n} standard-library {noun}")
}

/// A site for one line: its first three frames with a name beyond the allocator's, each
/// "function (file:line)", outermost last.
pub fn site_name(frames: &[SiteFrame]) -> String {
    let named: Vec<String> = frames
        .iter()
        .skip(1)
        .filter(|f| !f.function.is_empty() && !f.function.starts_with('['))
        .take(3)
        .map(|f| {
            let file = f.file.rsplit('/').next().unwrap_or("");
            match (file, f.line) {
                ("", _) => f.function.clone(),
                (file, 0) => format!("{} ({file})", f.function),
                (file, line) => format!("{} ({file}:{line})", f.function),
            }
        })
        .collect();
    if named.is_empty() {
        let module = frames.get(1).map_or("", |f| f.module.as_str());
        return format!("no function names (module {module})");
    }
    named.join(" <- ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::site_frame as frame;

    const STD: &str =
        "/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/alloc/src/vec/mod.rs";

    /// malloc, nine frames of alloc::, then the program: what rustc -O gives for
    /// `Vec::with_capacity` (testdata/stacks/rust_chain.rs).
    fn rust_site() -> Vec<SiteFrame> {
        let mut frames = vec![frame("__GI___libc_malloc", "./malloc/malloc.c")];
        for k in 0..9 {
            frames.push(frame(&format!("alloc::f{k}"), STD));
        }
        frames.push(frame("rust_chain::rust_inner", "/src/rust_chain.rs"));
        frames.push(frame("rust_chain::rust_outer", "/src/rust_chain.rs"));
        frames.push(frame("rust_chain::main", "/src/rust_chain.rs"));
        frames
    }

    fn names(lines: &[Line<'_>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| match l {
                Line::Frame(f) => f.function.clone(),
                Line::Library(n) => library_text(*n),
            })
            .collect()
    }

    #[test]
    fn a_run_of_library_frames_is_one_line_before_its_outermost_frame() {
        let frames = rust_site();
        let (lines, left) = for_people(&frames, 12);
        assert_eq!(
            names(&lines),
            [
                "__GI___libc_malloc",
                "… 8 standard-library frames",
                "alloc::f8",
                "rust_chain::rust_inner",
                "rust_chain::rust_outer",
                "rust_chain::main",
            ]
        );
        assert_eq!(left, 0);
    }

    #[test]
    fn the_line_limit_counts_lines_and_says_how_many_frames_are_left() {
        let frames = rust_site();
        let (all, _) = for_people(&frames, 12);
        let (lines, left) = for_people(&frames, 4);
        assert_eq!(lines, all[..4], "up to rust_inner");
        assert_eq!(left, 2, "rust_outer and main");
        // A limit inside the folded run: the run is one line, the rest left.
        let (lines, left) = for_people(&frames, 2);
        assert_eq!(lines.len(), 2);
        assert_eq!(left, frames.len() - 9);
    }

    #[test]
    fn short_runs_and_the_allocator_frame_stay_as_they_are() {
        let mut frames = vec![frame("std::f", STD), frame("std::g", STD)];
        frames.push(frame("alloc::h", STD));
        frames.push(frame("user", "/src/u.rs"));
        // The innermost frame is never folded; the two after it are too few to fold.
        let (lines, left) = for_people(&frames, 12);
        assert_eq!(names(&lines), ["std::f", "std::g", "alloc::h", "user"]);
        assert_eq!(left, 0);
    }

    #[test]
    fn a_run_at_the_outer_end_keeps_its_outermost_frame() {
        let mut frames = vec![frame("malloc", ""), frame("user", "/src/u.rs")];
        for k in 0..4 {
            frames.push(frame(&format!("std::rt::f{k}"), STD));
        }
        let (lines, _) = for_people(&frames, 12);
        assert_eq!(
            names(&lines),
            [
                "malloc",
                "user",
                "… 3 standard-library frames",
                "std::rt::f3"
            ]
        );
    }
}
