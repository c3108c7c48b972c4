//! `report --format folded`: the scope's profile as folded stacks, one `root;...;leaf value`
//! line per distinct stack, the input of flamegraph.pl, inferno and speedscope's importer.
//! Frames are named by `profile::frame_name` (docs/formats.md, "folded").

use std::io::{self, Write};

use crate::model::profile::{folded, Naming, Profile, View, Weight};

/// Writes the folded lines of `view` weighed by `weight` to `out`.
pub fn write_folded(
    profile: &Profile,
    view: View,
    weight: Weight,
    out: &mut dyn Write,
) -> io::Result<()> {
    for (stack, value) in folded(profile, view, weight, Naming::Function) {
        writeln!(out, "{stack} {value}")?;
    }
    Ok(())
}
