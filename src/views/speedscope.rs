//! `report --format speedscope`: the scope's profile in speedscope's JSON file format
//! (https://www.speedscope.app/file-format-schema.json), one sampled profile per view and
//! weight (8), opening on `--view` / `--weight` (docs/formats.md, "speedscope").
//!
//! A profile's samples are the distinct stacks of its view (root first), weighed by its value:
//! the processes of a stack add up, as in the folded lines; speedscope has no labels to keep
//! them apart. Frame names are `profile::frame_name`'s, with the file and line when known.

use std::collections::HashMap;
use std::io::{self, Write};

use serde::Serialize;

use super::words::estimates_of;
use crate::model::profile::{frame_name, Naming, Profile, View, Weight, NO_STACK};

/// speedscope's `FileFormat.File`.
#[derive(Serialize)]
struct File<'a> {
    #[serde(rename = "$schema")]
    schema: &'static str,
    name: &'a str,
    exporter: String,
    #[serde(rename = "activeProfileIndex")]
    active_profile_index: usize,
    shared: Shared,
    profiles: Vec<Sampled>,
}

#[derive(Serialize)]
struct Shared {
    frames: Vec<Frame>,
}

/// speedscope's `FileFormat.Frame`.
#[derive(Serialize, PartialEq, Eq, Hash, Clone)]
struct Frame {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u32>,
}

/// speedscope's `FileFormat.SampledProfile`.
#[derive(Serialize)]
struct Sampled {
    r#type: &'static str,
    name: String,
    unit: &'static str,
    #[serde(rename = "startValue")]
    start_value: u64,
    #[serde(rename = "endValue")]
    end_value: u64,
    samples: Vec<Vec<usize>>,
    weights: Vec<u64>,
}

/// The views and weights in the order of the file's profiles; the last four only in a profile
/// with the resident views ([`profiles_of`]).
pub const PROFILES: [(View, Weight); 12] = [
    (View::Peak, Weight::Bytes),
    (View::Allocated, Weight::Bytes),
    (View::Leaked, Weight::Bytes),
    (View::Temporary, Weight::Bytes),
    (View::Peak, Weight::Count),
    (View::Allocated, Weight::Count),
    (View::Leaked, Weight::Count),
    (View::Temporary, Weight::Count),
    (View::Resident, Weight::Bytes),
    (View::Faulted, Weight::Bytes),
    (View::Resident, Weight::Count),
    (View::Faulted, Weight::Count),
];

/// The views and weights of `profile`'s file: the heap's, and the resident views' when it has
/// them.
fn profiles_of(profile: &Profile) -> &'static [(View, Weight)] {
    profile.views_in(&PROFILES, |p| p.0)
}

/// The name of the profile of `view` weighed by `weight`, as speedscope's profile menu shows
/// it: "live at the heap peak (bytes)", then, when the values are estimates from sampled
/// stacks, `words::estimates_of`.
fn profile_name(profile: &Profile, view: View, weight: Weight) -> String {
    let name = format!("{} ({})", view.describe(), view.unit(weight));
    match estimates_of(profile, view) {
        Some(estimates) => format!("{name}, {estimates}"),
        None => name,
    }
}

/// Writes the speedscope file of `profile`, named `title`, opening on `view` weighed by
/// `weight`, to `out`.
pub fn write_speedscope(
    profile: &Profile,
    view: View,
    weight: Weight,
    title: &str,
    out: &mut dyn Write,
) -> io::Result<()> {
    // Every stack's frame indices, root first, with frames shared by all profiles.
    let mut frames: Vec<Frame> = Vec::new();
    let mut index: HashMap<Frame, usize> = HashMap::new();
    let mut intern = |f: Frame| {
        *index.entry(f.clone()).or_insert_with(|| {
            frames.push(f);
            frames.len() - 1
        })
    };
    let stacks: Vec<Vec<usize>> = profile
        .stacks
        .iter()
        .map(|s| {
            if s.frames.is_empty() {
                return vec![intern(Frame {
                    name: NO_STACK.to_string(),
                    file: None,
                    line: None,
                })];
            }
            profile
                .frames_of(s)
                .rev()
                .map(|f| {
                    intern(Frame {
                        name: frame_name(f, Naming::Function),
                        file: (!f.file.is_empty()).then(|| f.file.clone()),
                        line: (f.line > 0).then_some(f.line),
                    })
                })
                .collect()
        })
        .collect();
    let profiles = profiles_of(profile)
        .iter()
        .map(|&(v, w)| {
            let mut per_stack = vec![0u64; stacks.len()];
            for s in &profile.samples {
                if let Some(x) = per_stack.get_mut(s.stack) {
                    *x = x.saturating_add(s.values.get(v, w));
                }
            }
            let (samples, weights): (Vec<Vec<usize>>, Vec<u64>) = per_stack
                .iter()
                .enumerate()
                .filter(|(_, &x)| x > 0)
                .map(|(k, &x)| (stacks[k].clone(), x))
                .unzip();
            Sampled {
                r#type: "sampled",
                name: profile_name(profile, v, w),
                unit: if w == Weight::Bytes { "bytes" } else { "none" },
                start_value: 0,
                end_value: weights.iter().fold(0u64, |a, &b| a.saturating_add(b)),
                samples,
                weights,
            }
        })
        .collect();
    let file = File {
        schema: "https://www.speedscope.app/file-format-schema.json",
        name: title,
        exporter: format!("memtrack {}", env!("CARGO_PKG_VERSION")),
        active_profile_index: profiles_of(profile)
            .iter()
            .position(|&p| p == (view, weight))
            .unwrap_or(0),
        shared: Shared { frames },
        profiles,
    };
    serde_json::to_writer(&mut *out, &file).map_err(io::Error::other)?;
    writeln!(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{stack_sampling, two_sites_report, SAMPLED};

    /// The profile names of the speedscope file of `profile`.
    fn names(profile: &Profile) -> Vec<String> {
        let mut out = Vec::new();
        write_speedscope(profile, View::Peak, Weight::Bytes, "t", &mut out).unwrap();
        let file: serde_json::Value = serde_json::from_slice(&out).unwrap();
        file["profiles"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn sampled_profiles_say_their_values_are_estimates_in_their_names() {
        let mut profile = two_sites_report(crate::analyze::stacks::SiteOptions {
            profile: true,
            ..Default::default()
        })
        .profile
        .unwrap();
        let exact = names(&profile);
        assert_eq!(exact[1], "allocated (bytes)");
        profile.sampling = Some(stack_sampling());
        let sampled = names(&profile);
        assert_eq!(sampled.len(), profiles_of(&profile).len());
        for (e, s) in exact.iter().zip(&sampled) {
            assert_eq!(*s, format!("{e}, {SAMPLED}"));
        }
    }
}
