//! `memtrack doctor`: run the checks of `preflight` and print them as one table (what recording
//! needs, what this machine has, what a missing item disables), load the real BPF objects as
//! `record` would, print what the kernel has of each feature memtrack adapts to, then the line
//! `record` would fail with for each blocking item. Exit 0 when `record` can work here.

use std::io::{self, Write};

use crate::preflight::{self, Check, FeatureProbe, Status};
use crate::record::private::PrivateLibs;
use crate::table::{Column, Table};

/// Run the checks and print the tables to `out`; returns whether `record` can work here.
pub fn run(out: &mut impl Write) -> io::Result<bool> {
    crate::sys::bpf::route_libbpf_logs();
    let (mut checks, facts) = preflight::run();
    let privileged = checks
        .iter()
        .any(|c| c.name == "privileges" && c.status == Status::Ok);
    checks.push(private_libraries(privileged));
    let ready = !checks.iter().any(Check::blocks_recording);
    // The real objects load only where the checks before them pass: elsewhere their failure
    // would repeat the cause the table already names.
    if ready {
        checks.push(objects(&preflight::capabilities(facts)));
    }
    let private = checks
        .iter()
        .find(|c| c.name == "private libraries" && c.status != Status::Unknown)
        .map(|c| match c.status {
            Status::Ok => Ok(()),
            _ => Err(c.found.clone()),
        });
    let vmlinux = crate::sys::probe::VmlinuxBtf::load().ok();
    let features = preflight::kernel_features(vmlinux.as_ref(), private, privileged);
    render_table(&checks, out)?;
    render_features(&features, out)?;
    writeln!(out)?;
    render_verdict(&checks, out)?;
    Ok(!checks.iter().any(Check::blocks_recording))
}

/// Whether `record` can give the command private copies of the allocator libraries (issue 19):
/// the copies are made and a forked child enters a namespace with them bound over the real
/// files, exactly as the command's child will (`record::private`). `record` runs the same
/// check itself and falls back to the shared files with a warning.
fn private_libraries(privileged: bool) -> Check {
    const NAME: &str = "private libraries";
    const DISABLES: &str =
        "sparing other processes the probes (they run the probed shared files instead)";
    const FIX: &str = "allow unshare(CLONE_NEWNS) and mount (CAP_SYS_ADMIN; in a container, a \
                       seccomp profile that permits them), or record with --no-private-libs";
    if !privileged {
        return preflight::not_checked(NAME, false, DISABLES, "it needs the privileges above");
    }
    let libraries = crate::binary::allocator_libraries();
    if libraries.is_empty() {
        return Check::ok(
            NAME,
            false,
            "no allocator library found to copy".into(),
            DISABLES,
        );
    }
    match PrivateLibs::make_checked(&libraries) {
        Ok(libs) => Check::ok(
            NAME,
            false,
            format!(
                "{} allocator libraries copied ({}); the command's mount namespace works",
                libs.copies().len(),
                crate::units::format_bytes(libs.bytes())
            ),
            DISABLES,
        ),
        Err(why) => Check::missing(NAME, false, why, DISABLES, FIX),
    }
}

/// The row of the real objects: each of bpf/ loaded as `record` loads it (stacks included) and
/// unloaded, so a program this kernel's verifier refuses shows here, not at the first recording.
fn objects(caps: &preflight::Capabilities) -> Check {
    const NAME: &str = "BPF objects";
    const DISABLES: &str = "recording (required)";
    let results = crate::record::load::Loaded::try_each(caps);
    let refused: Vec<String> = results
        .iter()
        .filter_map(|(name, r)| r.as_ref().err().map(|e| format!("{name}: {e}")))
        .collect();
    let names: Vec<&str> = results.iter().map(|(name, _)| *name).collect();
    let (status, found) = if refused.is_empty() {
        (
            Status::Ok,
            format!("{} load: {}", names.len(), names.join(", ")),
        )
    } else {
        (Status::Missing, refused.join("; "))
    };
    Check {
        name: NAME,
        required: true,
        status,
        found,
        disables: DISABLES,
        fix: String::new(),
    }
}

/// The kernel features table: each feature, the first kernel with it, whether this one has
/// it, and what memtrack does without it.
pub fn render_features(features: &[FeatureProbe], out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "\nkernel features (probed, not read from the version):\n"
    )?;
    let rows = features.iter().map(|f| {
        let here = match f.present {
            Some(true) => "yes",
            Some(false) => "no",
            None => "unknown",
        };
        vec![
            f.feature.name.to_string(),
            f.feature.first.to_string(),
            here.to_string(),
            f.found.clone(),
            f.feature.without.to_string(),
        ]
    });
    write_table(
        out,
        &["FEATURE", "SINCE", "HERE", "FOUND", "WITHOUT IT, MEMTRACK"],
        rows,
    )?;
    Ok(())
}

/// `header` and `rows` as one table: the first column flush left, the others two spaces apart.
fn write_table(
    out: &mut impl Write,
    header: &[&str],
    rows: impl Iterator<Item = Vec<String>>,
) -> io::Result<()> {
    let columns = (0..header.len())
        .map(|i| Column::left(if i == 0 { "" } else { "  " }))
        .collect();
    let mut table = Table::new(columns);
    table.row(header.iter().map(|h| h.to_string()).collect());
    for row in rows {
        table.row(row);
    }
    for line in table.lines() {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// Print `checks` as the doctor's table and verdict.
pub fn render(checks: &[Check], out: &mut impl Write) -> io::Result<()> {
    render_table(checks, out)?;
    render_verdict(checks, out)
}

/// The checks' table, under its title line, and a blank line.
fn render_table(checks: &[Check], out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "memtrack {}: what recording needs, and what this machine has\n",
        env!("CARGO_PKG_VERSION")
    )?;
    let rows = checks.iter().map(|c| {
        vec![
            c.name.to_string(),
            c.status.word().to_string(),
            c.found.clone(),
            c.disables.to_string(),
        ]
    });
    write_table(
        out,
        &["CHECK", "STATUS", "THIS MACHINE", "IF MISSING, DISABLES"],
        rows,
    )?;
    writeln!(out)?;
    Ok(())
}

/// The last lines: whether `record` can work here, or the line it would stop with for each
/// blocking check.
fn render_verdict(checks: &[Check], out: &mut impl Write) -> io::Result<()> {
    let mut blocking: Vec<&Check> = checks.iter().filter(|c| c.blocks_recording()).collect();
    // Checks left unknown only follow from a missing one: name the cause alone.
    if blocking
        .iter()
        .any(|c| c.status == preflight::Status::Missing)
    {
        blocking.retain(|c| c.status == preflight::Status::Missing);
    }
    if blocking.is_empty() {
        let optional = checks
            .iter()
            .filter(|c| c.status != preflight::Status::Ok)
            .count();
        match optional {
            0 => writeln!(out, "record can work here.")?,
            n => writeln!(
                out,
                "record can work here ({n} optional item{} missing, see above).",
                if n == 1 { "" } else { "s" }
            )?,
        }
    } else {
        writeln!(out, "record cannot work here:")?;
        for c in blocking {
            writeln!(out, "  {}", c.problem())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preflight::Status;

    fn check(name: &'static str, required: bool, status: Status, fix: &str) -> Check {
        Check {
            name,
            required,
            status,
            found: format!("{name} found"),
            disables: "something",
            fix: fix.into(),
        }
    }

    fn rendered(checks: &[Check]) -> String {
        let mut out = Vec::new();
        render(checks, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn optional_missing_items_still_let_record_work() {
        let text = rendered(&[
            check("BTF", true, Status::Ok, ""),
            check("fentry", false, Status::Missing, ""),
        ]);
        assert!(
            text.contains("record can work here (1 optional item missing"),
            "{text}"
        );
        assert!(text.contains("fentry  missing  fentry found"), "{text}");
    }

    #[test]
    fn blocking_items_are_listed_with_their_fix() {
        let checks = [check(
            "privileges",
            true,
            Status::Missing,
            "run it with sudo",
        )];
        let text = rendered(&checks);
        assert!(text.contains("record cannot work here:"), "{text}");
        assert!(text.contains(&checks[0].problem()), "{text}");
    }

    #[test]
    fn columns_line_up() {
        let text = rendered(&[
            check("kernel", false, Status::Ok, ""),
            check("ring buffer", true, Status::Unknown, ""),
        ]);
        let rows: Vec<&str> = text.lines().skip(2).take(3).collect();
        assert_eq!(
            rows[0].find("THIS MACHINE"),
            rows[1].find("kernel found"),
            "{text}"
        );
        assert_eq!(
            rows[1].find("kernel found"),
            rows[2].find("ring buffer found"),
            "{text}"
        );
    }
}
