//! `report --format pprof`: gzipped profile.proto.

use std::io::{self, Write};

use super::metrics::Report;
use super::profile::{Profile, View, Weight};

/// Writes the profile as gzipped profile.proto.
pub fn write_pprof(
    _profile: &Profile,
    _report: &Report,
    _view: View,
    _weight: Weight,
    _out: &mut dyn Write,
) -> io::Result<()> {
    Err(io::Error::other("--format pprof is not built yet"))
}
