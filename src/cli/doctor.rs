//! `memtrack doctor`'s flags as typed: none; its help says what the table's words mean.

use argh::FromArgs;

/// Check what recording needs against this machine: kernel, BTF, privileges, BPF features.
/// Prints one table; exits 0 when `record` can work here, 1 when it cannot (and says why).
#[derive(FromArgs, Debug)]
#[argh(
    subcommand,
    help_triggers("-h", "--help", "help"),
    name = "doctor",
    example = "sudo memtrack doctor",
    note = "Each line is ok, missing, or unknown (not checked: it needs what is missing above),
with what a missing item disables. `record` runs the same checks and stops with the same
line when a required one is missing.",
    error_code(1, "record cannot work here")
)]
pub struct DoctorArgs {}
