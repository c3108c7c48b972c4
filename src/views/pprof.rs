//! `report --format pprof`: the scope's profile as gzipped profile.proto, for `go tool pprof`
//! and the tools that read it (docs/formats.md, "pprof").
//!
//! The messages are written by hand after github.com/google/pprof/proto/profile.proto, with
//! prost's derive, so the build needs no protoc. Every view is a sample type (Go's heap profile
//! names for the first four: alloc_objects, alloc_space, inuse_objects, inuse_space, where
//! "inuse" is live at the scope's heap peak; then leaked_* and temporary_*); `--view` and
//! `--weight` choose the default one. A sample is one (stack, process, benchmark) with labels
//! pid, command and benchmark, so `-tagfocus pid=...` splits a tree by process.

use std::collections::HashMap;
use std::io::{self, Write};

use flate2::write::GzEncoder;
use flate2::Compression;
use prost::Message;

use super::words::{estimates_note, estimates_of};
use crate::model::metrics::Report;
use crate::model::profile::{frame_name, Naming, Profile as Model, View, Weight, NO_STACK};
use crate::model::sites::SiteFrame;

/// profile.proto's `Profile`.
#[derive(Clone, PartialEq, Message)]
pub struct Profile {
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

/// profile.proto's `ValueType`: string-table indices of a type and its unit.
#[derive(Clone, PartialEq, Message)]
pub struct ValueType {
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// profile.proto's `Sample`: locations leaf first, one value per sample type.
#[derive(Clone, PartialEq, Message)]
pub struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

/// profile.proto's `Label`: a string (`str`) or a number (`num`).
#[derive(Clone, PartialEq, Message)]
pub struct Label {
    #[prost(int64, tag = "1")]
    pub key: i64,
    #[prost(int64, tag = "2")]
    pub str: i64,
    #[prost(int64, tag = "3")]
    pub num: i64,
}

/// profile.proto's `Mapping`.
#[derive(Clone, PartialEq, Message)]
pub struct Mapping {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    #[prost(int64, tag = "5")]
    pub filename: i64,
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
    #[prost(bool, tag = "8")]
    pub has_filenames: bool,
    #[prost(bool, tag = "9")]
    pub has_line_numbers: bool,
    #[prost(bool, tag = "10")]
    pub has_inline_frames: bool,
}

/// profile.proto's `Location`: one address, its inline chain as lines (callee first).
#[derive(Clone, PartialEq, Message)]
pub struct Location {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    #[prost(uint64, tag = "3")]
    pub address: u64,
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
}

/// profile.proto's `Line`.
#[derive(Clone, PartialEq, Message)]
pub struct Line {
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    #[prost(int64, tag = "2")]
    pub line: i64,
}

/// profile.proto's `Function`.
#[derive(Clone, PartialEq, Message)]
pub struct Function {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(int64, tag = "2")]
    pub name: i64,
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    #[prost(int64, tag = "4")]
    pub filename: i64,
}

/// The sample types, in order: (name, view, weight); the last four only in a profile with the
/// resident views ([`sample_types`]).
pub const SAMPLE_TYPES: [(&str, View, Weight); 12] = [
    ("alloc_objects", View::Allocated, Weight::Count),
    ("alloc_space", View::Allocated, Weight::Bytes),
    ("inuse_objects", View::Peak, Weight::Count),
    ("inuse_space", View::Peak, Weight::Bytes),
    ("leaked_objects", View::Leaked, Weight::Count),
    ("leaked_space", View::Leaked, Weight::Bytes),
    ("temporary_objects", View::Temporary, Weight::Count),
    ("temporary_space", View::Temporary, Weight::Bytes),
    ("resident_pages", View::Resident, Weight::Count),
    ("resident_space", View::Resident, Weight::Bytes),
    ("faulted_pages", View::Faulted, Weight::Count),
    ("faulted_space", View::Faulted, Weight::Bytes),
];

/// The sample types of `model`: the heap's, and the resident views' when it has them.
fn sample_types(model: &Model) -> &'static [(&'static str, View, Weight)] {
    model.views_in(&SAMPLE_TYPES, |t| t.1)
}

/// Each module gets its own range of fake addresses this wide: a location's address is its
/// module's start plus its file offset, so the mappings never overlap and pprof's address to
/// file offset arithmetic gives the recorded offset back.
const MODULE_SPAN: u64 = 1 << 40;

/// The string table: index 0 is "" as profile.proto requires.
#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Strings {
        let mut s = Strings::default();
        s.get("");
        s
    }

    fn get(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

/// Builds the profile.proto message of `model` for `report` (its times and command), opening
/// on `view` weighed by `weight`.
pub fn build(model: &Model, report: &Report, view: View, weight: Weight) -> Profile {
    let mut strings = Strings::new();
    let mut p = Profile {
        sample_type: sample_types(model)
            .iter()
            .map(|&(name, _, w)| ValueType {
                r#type: strings.get(name),
                unit: strings.get(if w == Weight::Bytes { "bytes" } else { "count" }),
            })
            .collect(),
        time_nanos: i64::try_from(report.run.start_wall_ns).unwrap_or(i64::MAX),
        duration_nanos: i64::try_from(report.run.duration_ns).unwrap_or(i64::MAX),
        ..Profile::default()
    };
    let default = sample_types(model)
        .iter()
        .find(|&&(_, v, w)| v == view && w == weight)
        .map_or("inuse_space", |t| t.0);
    p.default_sample_type = strings.get(default);
    let command = format!("memtrack recording of: {}", report.run.command.join(" "));
    p.comment.push(strings.get(&command));
    // The sample types stay those of an exact profile, so `go tool pprof` reads both alike;
    // a comment (`pprof -comments`) says the values are estimates.
    if let Some(sampling) = &model.sampling {
        p.comment.push(strings.get(&estimates_note(sampling)));
    }
    // The resident sample types' estimates stand on the sampled faults instead.
    if let Some(faults) = estimates_of(model, View::Resident) {
        p.comment
            .push(strings.get(&format!("resident and faulted: {faults}")));
    }

    let mut tables = Tables {
        p,
        strings,
        mapping_of: HashMap::new(),
        functions: HashMap::new(),
        locations: HashMap::new(),
    };
    tables.add_mappings(model, report.run.command.first().map(String::as_str));
    let stack_locations: Vec<Vec<u64>> = model
        .stacks
        .iter()
        .map(|stack| tables.stack_locations(model.frames_of(stack)))
        .collect();
    tables.add_samples(model, &stack_locations);
    let Tables { mut p, strings, .. } = tables;
    p.string_table = strings.table;
    p
}

/// The message being built with the tables that give each mapping, function and location its
/// id once. The order of the calls is the order of the string table.
struct Tables<'a> {
    p: Profile,
    strings: Strings,
    mapping_of: HashMap<&'a str, u64>,
    functions: HashMap<(String, String), u64>,
    /// A location per (module, offset, lines), or per mark name for frames that are no code.
    /// An address has one inline chain, but a stack started at the allocator's caller may
    /// keep only its outer part: that is another location at the same address.
    locations: HashMap<(String, u64, usize), u64>,
}

impl<'a> Tables<'a> {
    /// A mapping per module of `model`; pprof names the profile after its first mapping: the
    /// recorded command's (`main`), when known.
    fn add_mappings(&mut self, model: &'a Model, main: Option<&str>) {
        let mut modules: Vec<_> = model.modules.iter().collect();
        modules.sort_by_key(|m| Some(m.path.as_str()) != main);
        for (k, m) in modules.into_iter().enumerate() {
            let id = k as u64 + 1;
            self.mapping_of.insert(&m.path, id);
            self.p.mapping.push(Mapping {
                id,
                memory_start: id * MODULE_SPAN,
                memory_limit: (id + 1) * MODULE_SPAN,
                file_offset: 0,
                filename: self.strings.get(&m.path),
                build_id: self.strings.get(&m.build_id),
                has_functions: true,
                has_filenames: true,
                has_line_numbers: true,
                has_inline_frames: true,
            });
        }
    }

    /// The id of the function `name` in `file`, added the first time.
    fn function_id(&mut self, name: &str, file: &str) -> u64 {
        let key = (name.to_string(), file.to_string());
        if let Some(&id) = self.functions.get(&key) {
            return id;
        }
        let id = self.p.function.len() as u64 + 1;
        let name = self.strings.get(name);
        self.p.function.push(Function {
            id,
            name,
            system_name: name,
            filename: self.strings.get(file),
        });
        self.functions.insert(key, id);
        id
    }

    /// The location ids of a stack's `frames`, innermost first: one per frame that is not
    /// inlined, its lines the inline chain that ends with it.
    fn stack_locations<'f>(&mut self, frames: impl Iterator<Item = &'f SiteFrame>) -> Vec<u64> {
        let empty = SiteFrame::mark(NO_STACK, 0);
        let mut frames: Vec<&SiteFrame> = frames.collect();
        if frames.is_empty() {
            frames.push(&empty);
        }
        let mut ids = Vec::new();
        let mut chain: Vec<&SiteFrame> = Vec::new();
        for f in frames {
            chain.push(f);
            if f.inlined {
                continue; // its caller ends the chain
            }
            ids.push(self.location_id(&chain));
            chain.clear();
        }
        ids
    }

    /// The id of the location of `chain`'s last frame, added (with the lines of the whole
    /// chain) the first time.
    fn location_id(&mut self, chain: &[&SiteFrame]) -> u64 {
        let f = chain[chain.len() - 1];
        let key = if f.is_mark() {
            (f.function.clone(), u64::MAX, 1)
        } else {
            (f.module.clone(), f.offset, chain.len())
        };
        if let Some(&id) = self.locations.get(&key) {
            return id;
        }
        let id = self.p.location.len() as u64 + 1;
        let mapping_id = if f.is_mark() {
            0
        } else {
            self.mapping_of.get(f.module.as_str()).copied().unwrap_or(0)
        };
        let line = chain
            .iter()
            .map(|c| Line {
                function_id: self.function_id(&frame_name(c, Naming::Function), &c.file),
                line: i64::from(c.line),
            })
            .collect();
        self.p.location.push(Location {
            id,
            mapping_id,
            address: if mapping_id == 0 {
                0
            } else {
                mapping_id * MODULE_SPAN + f.offset.min(MODULE_SPAN - 1)
            },
            line,
        });
        self.locations.insert(key, id);
        id
    }

    /// A sample per sample of `model`, on its stack's locations, labelled with its pid, command
    /// and benchmark.
    fn add_samples(&mut self, model: &Model, stack_locations: &[Vec<u64>]) {
        let strings = &mut self.strings;
        let (pid, command, benchmark) = (
            strings.get("pid"),
            strings.get("command"),
            strings.get("benchmark"),
        );
        for s in &model.samples {
            let mut label = vec![
                Label {
                    key: pid,
                    str: 0,
                    num: i64::from(s.pid),
                },
                Label {
                    key: command,
                    str: strings.get(&s.command),
                    num: 0,
                },
            ];
            if let Some(b) = &s.benchmark {
                label.push(Label {
                    key: benchmark,
                    str: strings.get(b),
                    num: 0,
                });
            }
            self.p.sample.push(Sample {
                location_id: stack_locations.get(s.stack).cloned().unwrap_or_default(),
                value: sample_types(model)
                    .iter()
                    .map(|&(_, v, w)| i64::try_from(s.values.get(v, w)).unwrap_or(i64::MAX))
                    .collect(),
                label,
            });
        }
    }
}

/// Writes the profile of `model` as gzipped profile.proto to `out`.
pub fn write_pprof(
    model: &Model,
    report: &Report,
    view: View,
    weight: Weight,
    out: &mut dyn Write,
) -> io::Result<()> {
    let bytes = build(model, report, view, weight).encode_to_vec();
    let mut gz = GzEncoder::new(out, Compression::default());
    gz.write_all(&bytes)?;
    gz.finish()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::stacks::SiteOptions;
    use crate::testkit::*;

    /// The report and profile of two sites under main.
    fn report() -> Report {
        two_sites_report(SiteOptions {
            profile: true,
            ..SiteOptions::default()
        })
    }

    fn comments(p: &Profile) -> Vec<&str> {
        p.comment
            .iter()
            .map(|&i| p.string_table[i as usize].as_str())
            .collect()
    }

    #[test]
    fn a_sampled_profile_says_so_in_a_comment_with_the_same_sample_types() {
        let mut report = report();
        let mut model = report.profile.take().unwrap();
        let exact = build(&model, &report, View::Peak, Weight::Bytes);
        assert_eq!(comments(&exact), ["memtrack recording of: /bin/root arg"]);
        model.sampling = Some(stack_sampling());
        let sampled = build(&model, &report, View::Peak, Weight::Bytes);
        assert_eq!(
            comments(&sampled),
            ["memtrack recording of: /bin/root arg", SAMPLED_NOTE]
        );
        // The same sample types (names and units), default and values: pprof reads both alike.
        let types = |p: &Profile| -> Vec<(String, String)> {
            let s = |i: i64| p.string_table[i as usize].clone();
            p.sample_type
                .iter()
                .map(|t| (s(t.r#type), s(t.unit)))
                .collect()
        };
        assert_eq!(types(&sampled), types(&exact));
        let default = |p: &Profile| p.string_table[p.default_sample_type as usize].clone();
        assert_eq!(default(&sampled), "inuse_space");
        assert_eq!(default(&exact), "inuse_space");
        let values =
            |p: &Profile| -> Vec<Vec<i64>> { p.sample.iter().map(|s| s.value.clone()).collect() };
        assert_eq!(values(&sampled), values(&exact));
        assert_eq!(
            values(&exact),
            [[1, 64, 1, 64, 1, 64, 0, 0], [1, 32, 1, 32, 1, 32, 0, 0]]
        );
    }
}
