//! The one updating status line `record` keeps on stderr during a long recording: elapsed
//! time, processes seen, events per second, bytes written and events lost.
//!
//! Only when stderr is a terminal and `-q` was not given; it first appears after a second (a
//! short run prints nothing but its summary), is redrawn at most four times a second (the drain
//! loop asks [`Progress::due`], which costs one clock read), and is erased before anything else
//! is printed. The command's own output shares the terminal and may be drawn over it until the
//! next redraw; `-q` turns the line off.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use crate::units::format_bytes;

/// Nothing is drawn before the recording is this old.
const FIRST_AFTER: Duration = Duration::from_secs(1);
/// Shortest time between two redraws.
const EVERY: Duration = Duration::from_millis(250);

/// What the line shows, as counted by the drain loop.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counts {
    /// Events written so far.
    pub events: u64,
    /// Processes seen so far (the command and every fork).
    pub processes: usize,
    /// Bytes of the file written so far.
    pub bytes_written: u64,
    /// Events lost so far, all causes.
    pub lost: u64,
    /// Set once the command has ended while processes it started still run: how much longer
    /// memtrack waits for them (`None`: for as long as they run, `--wait-all`).
    pub waiting: Option<Waiting>,
}

/// memtrack waits for what the command left running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Waiting {
    /// What is left of `--grace`, or `None` with `--wait-all`.
    pub remaining: Option<Duration>,
}

/// The status line, or nothing when it is off.
pub struct Progress {
    enabled: bool,
    start: Instant,
    last_draw: Instant,
    last_events: u64,
    drawn: bool,
}

impl Progress {
    /// A line on stderr unless `quiet` or stderr is not a terminal.
    pub fn for_stderr(quiet: bool) -> Progress {
        Progress::new(!quiet && std::io::stderr().is_terminal())
    }

    /// A line that is drawn only when `enabled`.
    pub fn new(enabled: bool) -> Progress {
        let now = Instant::now();
        Progress {
            enabled,
            start: now,
            last_draw: now,
            last_events: 0,
            drawn: false,
        }
    }

    /// Whether it is time to redraw.
    #[inline]
    pub fn due(&self) -> bool {
        self.enabled && self.last_draw.elapsed() >= EVERY && self.start.elapsed() >= FIRST_AFTER
    }

    /// Redraw the line with `counts`.
    pub fn draw(&mut self, counts: Counts) {
        let now = Instant::now();
        let interval = now.duration_since(self.last_draw).as_secs_f64();
        let rate = if interval > 0.0 {
            (counts.events.saturating_sub(self.last_events)) as f64 / interval
        } else {
            0.0
        };
        let text = line(now.duration_since(self.start), rate, counts);
        let mut err = std::io::stderr().lock();
        // \r and "erase to end of line": the line is redrawn in place.
        let _ = write!(err, "\r\x1b[K{text}");
        let _ = err.flush();
        self.last_draw = now;
        self.last_events = counts.events;
        self.drawn = true;
    }

    /// Erase the line, if one was drawn.
    pub fn clear(&mut self) {
        if self.drawn {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
            self.drawn = false;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.clear();
    }
}

/// The text of the line.
pub fn line(elapsed: Duration, events_per_s: f64, c: Counts) -> String {
    if let Some(w) = c.waiting {
        let how_long = match w.remaining {
            Some(r) => format!("up to {:.1} s more", r.as_secs_f64()),
            None => "until they end (--wait-all)".to_string(),
        };
        return format!(
            "memtrack: {:.1} s, the command ended; waiting {how_long} for the processes it \
             left running (Ctrl-C stops waiting)",
            elapsed.as_secs_f64()
        );
    }
    format!(
        "memtrack: {:.1} s, {} process{}, {} events/s, {} written, {} lost",
        elapsed.as_secs_f64(),
        c.processes,
        if c.processes == 1 { "" } else { "es" },
        thousands(events_per_s.round() as u64),
        format_bytes(c.bytes_written),
        c.lost
    )
}

/// `1234567` as `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_says_everything_in_one_line() {
        let c = Counts {
            events: 10,
            processes: 3,
            bytes_written: 5 << 20,
            lost: 2,
            waiting: None,
        };
        let text = line(Duration::from_millis(12_345), 182_345.4, c);
        assert_eq!(
            text,
            "memtrack: 12.3 s, 3 processes, 182,345 events/s, 5.0 MiB written, 2 lost"
        );
        let one = Counts {
            processes: 1,
            ..Counts::default()
        };
        assert!(line(Duration::ZERO, 0.0, one).contains(" 1 process, "));
    }

    #[test]
    fn waiting_says_so() {
        let c = Counts {
            waiting: Some(Waiting {
                remaining: Some(Duration::from_millis(1500)),
            }),
            ..Counts::default()
        };
        assert_eq!(
            line(Duration::from_secs(3), 0.0, c),
            "memtrack: 3.0 s, the command ended; waiting up to 1.5 s more for the processes it \
             left running (Ctrl-C stops waiting)"
        );
        let all = Counts {
            waiting: Some(Waiting { remaining: None }),
            ..Counts::default()
        };
        assert!(line(Duration::ZERO, 0.0, all).contains("until they end (--wait-all)"));
    }

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn disabled_or_young_progress_is_never_due() {
        assert!(!Progress::new(false).due());
        assert!(!Progress::new(true).due(), "nothing in the first second");
    }
}
