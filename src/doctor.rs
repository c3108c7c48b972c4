//! `memtrack doctor`: run the checks of `preflight` and print them as one table (what recording
//! needs, what this machine has, what a missing item disables), then the line `record` would
//! fail with for each blocking item. Exit 0 when `record` can work here.

use std::io::{self, Write};

use crate::preflight::{self, Check};

/// Run the checks and print the table to `out`; returns whether `record` can work here.
pub fn run(out: &mut impl Write) -> io::Result<bool> {
    crate::sys::bpf::route_libbpf_logs();
    let checks = preflight::run();
    render(&checks, out)?;
    Ok(!checks.iter().any(Check::blocks_recording))
}

/// Print `checks` as the doctor's table and verdict.
pub fn render(checks: &[Check], out: &mut impl Write) -> io::Result<()> {
    let header = ["CHECK", "STATUS", "THIS MACHINE", "IF MISSING, DISABLES"];
    let width = |col: usize, cell: &dyn Fn(&Check) -> usize| {
        checks
            .iter()
            .map(cell)
            .max()
            .unwrap_or(0)
            .max(header[col].len())
    };
    let w0 = width(0, &|c| c.name.len());
    let w1 = width(1, &|c| c.status.word().len());
    let w2 = width(2, &|c| c.found.chars().count());
    writeln!(
        out,
        "memtrack {}: what recording needs, and what this machine has\n",
        env!("CARGO_PKG_VERSION")
    )?;
    writeln!(
        out,
        "{:w0$}  {:w1$}  {:w2$}  {}",
        header[0], header[1], header[2], header[3]
    )?;
    for c in checks {
        writeln!(
            out,
            "{:w0$}  {:w1$}  {:w2$}  {}",
            c.name,
            c.status.word(),
            c.found,
            c.disables
        )?;
    }
    writeln!(out)?;
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
