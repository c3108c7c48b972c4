//! The control protocol between a benchmark harness and `memtrack record --control PATH`
//! (docs/control-protocol.md): the request and reply lines, and the client `memtrack ctl` uses.
//!
//! Flow: a client writes one request line into the control FIFO (`PATH`) and reads its reply
//! line from the ack FIFO next to it (`PATH.ack`). The recorder's end (`record::listen`) parses
//! requests with [`Request::parse`], acts on them in its drain loop, and answers with
//! [`Reply::to_line`]. A request line is at most [`MAX_LINE_BYTES`] bytes with its newline,
//! which is `PIPE_BUF` on Linux, so one `write` of a line is atomic: two harness processes
//! writing at once never interleave their requests. Replies come in request order on one ack
//! FIFO, so a client holds an exclusive `flock` on the ack FIFO from before its request until
//! it has read its reply (concurrent clients take turns), and each reply repeats its request
//! (a client skips replies meant for clients that wrote without waiting for one).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::format::{Bench, ControlCommand, MarkerKind};
use crate::sys::fifo;

/// The protocol version this memtrack speaks; `hello` replies with it.
pub const PROTOCOL_VERSION: u32 = 1;

/// The longest request or reply line, newline included: `PIPE_BUF`, so that a line written
/// with one `write` reaches the FIFO whole.
pub const MAX_LINE_BYTES: usize = 4096;

/// The environment variable through which `record --control PATH` tells the command the path.
pub const ENV_VAR: &str = "MEMTRACK_CONTROL";

/// How long a client waits for its reply (or for its turn on the ack FIFO's lock).
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// The ack FIFO that belongs to the control FIFO at `control`: the same path plus ".ack".
pub fn ack_path(control: &Path) -> PathBuf {
    let mut p = control.as_os_str().to_owned();
    p.push(".ack");
    PathBuf::from(p)
}

/// Whether an exec of `filename` with `argv` runs `memtrack ctl`: a control client of the
/// harness. A shell harness runs `memtrack ctl stop` as a child of the measured shell while
/// measuring, so the recorder records no allocator call of such a process and the report
/// leaves it out of every benchmark (for files recorded before the recorder did).
pub fn is_client_exec(filename: &str, argv: &[String]) -> bool {
    let name = filename.rsplit('/').next().unwrap_or(filename);
    name.starts_with("memtrack") && argv.get(1).is_some_and(|a| a == "ctl")
}

/// One request line, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// `hello VERSION`: the protocol version the client speaks; refused unless the recorder
    /// speaks it too.
    Hello { version: u32 },
    /// `start`, `stop`, `bench URI PID` or `marker KIND`: a command the recorder acts on and
    /// writes into the recording.
    Command(ControlCommand),
}

/// What every refusal says about the grammar.
const GRAMMAR: &str = "expected hello VERSION, start, stop, bench URI PID or marker KIND";

impl Request {
    /// Parses one line without its newline (a trailing carriage return is ignored). The error
    /// says what is wrong and what was expected, on one line.
    pub fn parse(line: &[u8]) -> Result<Request, String> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = std::str::from_utf8(line)
            .map_err(|_| "the line is not UTF-8; send UTF-8 text".to_string())?;
        let (verb, rest) = match line.split_once(' ') {
            Some((verb, rest)) => (verb, Some(rest)),
            None => (line, None),
        };
        let no_arguments = |command: ControlCommand| match rest {
            None => Ok(Request::Command(command)),
            Some(_) => Err(format!("{verb} takes no arguments")),
        };
        match verb {
            "hello" => {
                let version = rest
                    .and_then(|v| v.parse::<u32>().ok())
                    .filter(|&v| v >= 1)
                    .ok_or("hello needs the client's protocol version, e.g. hello 1")?;
                if version != PROTOCOL_VERSION {
                    return Err(format!(
                        "this memtrack speaks control protocol version {PROTOCOL_VERSION}; \
                         send hello {PROTOCOL_VERSION} and use that version"
                    ));
                }
                Ok(Request::Hello { version })
            }
            "start" => no_arguments(ControlCommand::Start),
            "stop" => no_arguments(ControlCommand::Stop),
            "bench" => {
                let usage = "bench needs a URI and a pid: bench URI PID (PID 0: every process)";
                let (uri, pid) = rest.and_then(|r| r.rsplit_once(' ')).ok_or(usage)?;
                let pid = pid.parse::<u32>().map_err(|_| usage)?;
                if uri.is_empty() {
                    return Err(usage.to_string());
                }
                if uri.chars().any(char::is_control) {
                    return Err("the benchmark URI contains a control character".to_string());
                }
                let uri = uri.to_string();
                Ok(Request::Command(ControlCommand::Bench(Bench { uri, pid })))
            }
            "marker" => {
                let kind = rest.and_then(MarkerKind::from_name).ok_or_else(|| {
                    let kinds: Vec<&str> = MarkerKind::ALL.iter().map(|k| k.name()).collect();
                    format!("marker needs one of: {}", kinds.join(", "))
                })?;
                Ok(Request::Command(ControlCommand::Marker { kind }))
            }
            "" => Err(format!("empty line; {GRAMMAR}")),
            other => Err(format!(
                "unknown command '{}'; {GRAMMAR}",
                printable(other, 40)
            )),
        }
    }

    /// The request as one line, newline included.
    pub fn to_line(&self) -> String {
        match self {
            Request::Hello { version } => format!("hello {version}\n"),
            Request::Command(ControlCommand::Start) => "start\n".to_string(),
            Request::Command(ControlCommand::Stop) => "stop\n".to_string(),
            Request::Command(ControlCommand::Bench(Bench { uri, pid })) => {
                format!("bench {uri} {pid}\n")
            }
            Request::Command(ControlCommand::Marker { kind }) => {
                format!("marker {}\n", kind.name())
            }
        }
    }
}

/// One reply line. It repeats the request it answers, so a client can tell its own reply from
/// one meant for a client that did not stay to read it (`echo start > $MEMTRACK_CONTROL`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The request line answered, without its newline, as [`echo`] shows it.
    pub request: String,
    /// Why the request was refused (it then had no effect); `None` when it was acted on.
    pub refusal: Option<String>,
}

/// The longest refusal message in a reply.
const MAX_MESSAGE_BYTES: usize = 400;

/// The longest reply line, newline included: `err`, the request, and the message.
pub const MAX_REPLY_BYTES: usize = MAX_LINE_BYTES + 512;

const _: () = assert!(MAX_MESSAGE_BYTES + "err : \n".len() < MAX_REPLY_BYTES - MAX_LINE_BYTES);

impl Reply {
    /// The reply as one line, newline included: `ok REQUEST` or `err REQUEST: MESSAGE`.
    pub fn to_line(&self) -> String {
        match &self.refusal {
            None => format!("ok {}\n", self.request),
            Some(m) => format!(
                "err {}: {}\n",
                self.request,
                printable(m, MAX_MESSAGE_BYTES)
            ),
        }
    }

    /// What the reply `line` (without its newline) says about `request` (a request line
    /// without its newline): acted on, refused with a message, or `None` when it answers
    /// another request.
    pub fn answer(line: &str, request: &str) -> Option<Result<(), String>> {
        if line.strip_prefix("ok ") == Some(request) {
            return Some(Ok(()));
        }
        let message = line
            .strip_prefix("err ")?
            .strip_prefix(request)?
            .strip_prefix(": ")?;
        Some(Err(message.to_string()))
    }
}

/// A received request line (without its newline) as replies repeat it: a trailing carriage
/// return dropped, control characters replaced, at most [`MAX_LINE_BYTES`]. A well-formed
/// request comes back exactly as it was sent.
pub fn echo(line: &[u8]) -> String {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    printable(&String::from_utf8_lossy(line), MAX_LINE_BYTES)
}

/// `text` cut to at most `max` bytes (on a character boundary, with "…"), control characters
/// replaced, so it fits on one line of a reply or a log.
pub fn printable(text: &str, max: usize) -> String {
    let clean = |c: char| if c.is_control() { '?' } else { c };
    if text.len() <= max {
        return text.chars().map(clean).collect();
    }
    let mut out = String::new();
    for c in text.chars() {
        if out.len() + c.len_utf8() > max.saturating_sub('…'.len_utf8()) {
            break;
        }
        out.push(clean(c));
    }
    out.push('…');
    out
}

/// What `memtrack ctl` sends, and where: the options `cli` validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CtlOptions {
    /// The control FIFO: `--control PATH`, or `$MEMTRACK_CONTROL`.
    pub fifo: PathBuf,
    /// `hello`, or the command to send.
    pub request: Request,
}

/// `memtrack ctl`: sends the request to the recorder at `opts.fifo` and waits until the
/// recorder acted on it; after `hello`, prints the protocol both speak on `out`.
pub fn ctl(opts: &CtlOptions, out: &mut dyn Write) -> Result<(), Error> {
    send(&opts.fifo, &opts.request)?;
    if let Request::Hello { .. } = opts.request {
        writeln!(out, "memtrack control protocol {PROTOCOL_VERSION}")
            .map_err(|e| Error::io("standard output", e))?;
    }
    Ok(())
}

/// Sends `request` to the recorder listening at `control` and waits until it acted on it; a
/// refusal is an error that says why. Waits at most [`REPLY_TIMEOUT`] for its turn and its
/// reply.
pub fn send(control: &Path, request: &Request) -> Result<(), Error> {
    let line = request.to_line();
    if line.len() > MAX_LINE_BYTES {
        return Err(Error::Usage(format!(
            "the request is {} bytes, more than the {MAX_LINE_BYTES} one line may have; shorten \
             the benchmark URI",
            line.len()
        )));
    }
    let deadline = Instant::now() + REPLY_TIMEOUT;
    let mut requests = open_fifo(control, false)?;
    let ack = ack_path(control);
    let mut replies = open_fifo(&ack, true)?;
    lock(&replies, &ack, deadline)?;
    // Replies nobody read (a client killed before reading its own) are not ours.
    discard_pending(&mut replies);
    write_line(&mut requests, line.as_bytes(), control, deadline)?;
    let sent = line.trim_end_matches('\n');
    read_reply(&mut replies, &ack, sent, deadline)?.map_err(|message| {
        Error::Control(format!(
            "memtrack refused '{}': {message}",
            printable(sent, 80)
        ))
    })
}

/// Opens the FIFO at `path` without blocking: for reading (`read`), or for writing, which
/// fails at once when no recorder holds it open.
fn open_fifo(path: &Path, read: bool) -> Result<File, Error> {
    let file = OpenOptions::new()
        .read(read)
        .write(!read)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENXIO) => Error::Control(format!(
                "no memtrack is listening on {}; is `memtrack record --control {}` still running?",
                path.display(),
                path.display()
            )),
            Some(libc::ENOENT) => Error::Control(format!(
                "{} does not exist; start the harness under `memtrack record --control PATH` and \
                 use the PATH it gives in ${ENV_VAR}",
                path.display()
            )),
            _ => Error::io(path, e),
        })?;
    let is_fifo = file.metadata().map(|m| m.file_type().is_fifo());
    if !is_fifo.map_err(|e| Error::io(path, e))? {
        return Err(Error::Control(format!(
            "{} is not a FIFO; give the path `memtrack record --control` created",
            path.display()
        )));
    }
    Ok(file)
}

/// Takes the exclusive lock on the ack FIFO that makes concurrent clients take turns.
fn lock(replies: &File, ack: &Path, deadline: Instant) -> Result<(), Error> {
    while !fifo::try_lock(replies).map_err(|e| Error::io(ack, e))? {
        if Instant::now() >= deadline {
            return Err(Error::Control(format!(
                "another client held {} for {} s; is a harness process stuck?",
                ack.display(),
                REPLY_TIMEOUT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// Reads and drops whatever the ack FIFO holds now.
fn discard_pending(replies: &mut File) {
    let mut buf = [0u8; 512];
    while matches!(replies.read(&mut buf), Ok(n) if n > 0) {}
}

/// Writes `line` with one `write` (atomic, since it is at most `PIPE_BUF`), waiting while the
/// FIFO is full.
fn write_line(
    requests: &mut File,
    line: &[u8],
    path: &Path,
    deadline: Instant,
) -> Result<(), Error> {
    loop {
        match requests.write(line) {
            Ok(n) if n == line.len() => return Ok(()),
            Ok(n) => {
                return Err(Error::Control(format!(
                    "only {n} of {} bytes reached {}",
                    line.len(),
                    path.display()
                )))
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Err(Error::Control(format!(
                    "{} stayed full for {} s; is the recorder stuck?",
                    path.display(),
                    REPLY_TIMEOUT.as_secs()
                )))
            }
            Err(e) => return Err(Error::io(path, e)),
        }
    }
}

/// Reads reply lines from the ack FIFO until the one that answers `request`; replies to other
/// requests (sent by clients that did not stay for them) are skipped.
fn read_reply(
    replies: &mut File,
    ack: &Path,
    request: &str,
    deadline: Instant,
) -> Result<Result<(), String>, Error> {
    let mut got = Vec::new();
    let mut buf = [0u8; 512];
    loop {
        while let Some(end) = got.iter().position(|&b| b == b'\n') {
            let line = String::from_utf8_lossy(&got[..end]).into_owned();
            got.drain(..=end);
            if let Some(answer) = Reply::answer(&line, request) {
                return Ok(answer);
            }
            log::debug!(
                "skipped a reply to another request: {}",
                printable(&line, 80)
            );
        }
        if got.len() > MAX_REPLY_BYTES {
            return Err(Error::Control(format!(
                "a reply on {} is longer than {MAX_REPLY_BYTES} bytes; is it the ack FIFO of a \
                 memtrack recorder?",
                ack.display()
            )));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::Control(format!(
                "no reply on {} within {} s; is the recorder stuck?",
                ack.display(),
                REPLY_TIMEOUT.as_secs()
            )));
        }
        fifo::wait_readable(replies, left).map_err(|e| Error::io(ack, e))?;
        match replies.read(&mut buf) {
            Ok(0) => {
                // A writer came and went without a whole line; poll would report that at once
                // again, so wait a little instead of spinning.
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock
                    || e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io(ack, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<Request, String> {
        Request::parse(line.as_bytes())
    }

    fn command(line: &str) -> ControlCommand {
        match parse(line) {
            Ok(Request::Command(c)) => c,
            other => panic!("{line:?}: {other:?}"),
        }
    }

    #[test]
    fn start_and_stop() {
        assert_eq!(command("start"), ControlCommand::Start);
        assert_eq!(command("stop\r"), ControlCommand::Stop);
    }

    #[test]
    fn hello_carries_a_version() {
        assert_eq!(parse("hello 1"), Ok(Request::Hello { version: 1 }));
        for bad in ["hello", "hello 0", "hello x", "hello -1", "hello 7"] {
            assert!(parse(bad).unwrap_err().contains("hello 1"), "{bad}");
        }
        assert!(parse("hello 7")
            .unwrap_err()
            .contains("speaks control protocol version 1"));
    }

    #[test]
    fn bench_takes_the_last_word_as_pid() {
        assert_eq!(
            command("bench suite::parse[size 64] 4242"),
            ControlCommand::Bench(Bench {
                uri: "suite::parse[size 64]".into(),
                pid: 4242
            })
        );
        assert_eq!(
            command("bench all 0"),
            ControlCommand::Bench(Bench {
                uri: "all".into(),
                pid: 0
            })
        );
    }

    #[test]
    fn bench_without_pid_or_uri_is_refused() {
        for bad in [
            "bench",
            "bench x",
            "bench  12",
            "bench x -1",
            "bench x 99999999999",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains("bench URI PID"), "{bad}: {e}");
        }
    }

    #[test]
    fn bench_uri_with_control_characters_is_refused() {
        assert!(parse("bench a\tb 1")
            .unwrap_err()
            .contains("control character"));
    }

    #[test]
    fn markers() {
        for kind in MarkerKind::ALL {
            assert_eq!(
                command(&format!("marker {}", kind.name())),
                ControlCommand::Marker { kind }
            );
        }
        let e = parse("marker lap").unwrap_err();
        assert!(
            e.contains("sample_start, sample_end, round_start, round_end"),
            "{e}"
        );
    }

    #[test]
    fn extra_arguments_are_refused() {
        assert_eq!(parse("start now").unwrap_err(), "start takes no arguments");
    }

    #[test]
    fn unknown_and_empty_lines_say_the_grammar() {
        for bad in ["", "STOP", "bogus stuff", " start"] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains("expected hello VERSION, start"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn non_utf8_is_refused() {
        assert!(Request::parse(b"start\xff").unwrap_err().contains("UTF-8"));
    }

    #[test]
    fn unknown_command_is_shown_shortened_and_printable() {
        let e = parse(&format!("\x1b[31m{} x", "y".repeat(200))).unwrap_err();
        assert!(e.starts_with("unknown command '?[31myyy"), "{e}");
        assert!(e.len() < 200, "{e}");
    }

    #[test]
    fn requests_round_trip_through_lines() {
        let requests = [
            Request::Hello { version: 1 },
            Request::Command(ControlCommand::Start),
            Request::Command(ControlCommand::Stop),
            Request::Command(ControlCommand::Bench(Bench {
                uri: "a b::c".into(),
                pid: 9,
            })),
            Request::Command(ControlCommand::Marker {
                kind: MarkerKind::RoundEnd,
            }),
        ];
        for r in requests {
            let line = r.to_line();
            assert!(line.ends_with('\n'));
            assert_eq!(
                Request::parse(line.trim_end_matches('\n').as_bytes()),
                Ok(r)
            );
        }
    }

    #[test]
    fn replies_repeat_their_request() {
        let ok = Reply {
            request: "bench a: b 7".into(),
            refusal: None,
        };
        assert_eq!(ok.to_line(), "ok bench a: b 7\n");
        let err = Reply {
            request: "bench a: b 7".into(),
            refusal: Some("no".into()),
        };
        assert_eq!(err.to_line(), "err bench a: b 7: no\n");
    }

    #[test]
    fn a_client_recognises_only_its_own_reply() {
        let answer = |line: &str, request| Reply::answer(line, request);
        assert_eq!(answer("ok start", "start"), Some(Ok(())));
        assert_eq!(answer("ok stop", "start"), None);
        assert_eq!(answer("ok start now", "start"), None);
        assert_eq!(
            answer("err bench a: b x: bench needs", "bench a: b x"),
            Some(Err("bench needs".into()))
        );
        assert_eq!(answer("err bogus: unknown", "start"), None);
        assert_eq!(answer("maybe", "start"), None);
    }

    #[test]
    fn echo_gives_back_a_well_formed_request_exactly() {
        let line = "bench suite::parse[ünï 64] 12";
        assert_eq!(echo(line.as_bytes()), line);
        assert_eq!(echo(b"stop\r"), "stop");
        assert_eq!(echo(b"a\tb\xff"), "a?b\u{fffd}");
    }

    #[test]
    fn replies_stay_one_bounded_line() {
        let line = Reply {
            request: echo("x".repeat(MAX_LINE_BYTES - 1).as_bytes()),
            refusal: Some("x\ny".repeat(5000)),
        }
        .to_line();
        assert!(line.len() <= MAX_REPLY_BYTES, "{}", line.len());
        assert_eq!(line.matches('\n').count(), 1);
    }

    #[test]
    fn printable_cuts_on_character_boundaries() {
        assert_eq!(printable("éééé", 7), "éé…");
        assert_eq!(printable("abc", 3), "abc");
        assert_eq!(printable("a\nb", 3), "a?b");
    }

    #[test]
    fn ack_path_is_next_to_the_control_path() {
        assert_eq!(
            ack_path(Path::new("/run/x/ctl")),
            Path::new("/run/x/ctl.ack")
        );
    }

    #[test]
    fn sending_to_a_missing_fifo_says_what_to_do() {
        let e = send(
            Path::new("/nonexistent/memtrack-ctl"),
            &Request::Command(ControlCommand::Start),
        )
        .unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
    }
}
