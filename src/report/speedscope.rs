//! `report --format speedscope`: speedscope's JSON file format.

use std::io::{self, Write};

use super::profile::{Profile, View, Weight};

/// Writes the profile as a speedscope file.
pub fn write_speedscope(
    _profile: &Profile,
    _view: View,
    _weight: Weight,
    _title: &str,
    _out: &mut dyn Write,
) -> io::Result<()> {
    Err(io::Error::other("--format speedscope is not built yet"))
}
