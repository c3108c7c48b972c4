//! The recorder's end of the control channel (docs/control-protocol.md): it makes the control
//! FIFO and the ack FIFO next to it, reads request lines without ever blocking the drain loop,
//! answers them, and flips the measuring gate in the kernel. What a request does to the
//! recording (the event it writes, and when) is decided by `drain`, which calls in here.
//!
//! The control FIFO is held open for reading and writing, so the harness closing its end (or
//! dying) never makes it report end-of-file: there is nothing to spin on. Reads are
//! non-blocking and bounded per call; a line is at most `control::MAX_LINE_BYTES`, and a longer
//! one is dropped with an error reply. Replies are written by opening the ack FIFO without
//! blocking for each reply: when no client is waiting (none has it open), the reply is dropped
//! rather than left for the next client to read as its own.

use std::cell::Cell;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::control::{self, echo, printable, Reply, Request, MAX_LINE_BYTES};
use crate::error::Error;
use crate::sys::bpf_map::MapFd;
use crate::sys::{fifo, process, raw};

/// At most this many bytes are read per call, so a client flooding the FIFO cannot hold up the
/// drain loop.
const READ_BUDGET_BYTES: usize = 64 * 1024;

/// A part of a line left unfinished this long (a client died halfway through a write) is
/// dropped before newer data is read, so it cannot spoil the next client's request.
const STALE_LINE: Duration = Duration::from_secs(1);

/// Refusals logged one by one; after that they are only counted.
const LOGGED_REFUSALS: u64 = 10;

/// A FIFO's identity, to recognise it again by path.
type FileId = (u64, u64);

/// Bytes of an oversize line kept for its error reply and the log.
const OVERSIZE_HEAD_BYTES: usize = 64;

/// One request line as received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Received {
    /// The line as replies repeat it (`control::echo`).
    pub echo: String,
    /// The request, or why it is refused.
    pub request: Result<Request, String>,
}

impl Received {
    /// The reply to it: acted on (`refusal` `None`) or refused.
    pub fn reply(&self, refusal: Option<String>) -> Reply {
        Reply {
            request: self.echo.clone(),
            refusal,
        }
    }
}

/// The control FIFO and its ack FIFO, made for one recording and removed when dropped.
pub struct Listener {
    requests: File,
    control_path: PathBuf,
    control_id: FileId,
    ack_path: PathBuf,
    ack_id: FileId,
    /// The line being received.
    line: Vec<u8>,
    /// When its first byte arrived.
    line_since: Instant,
    /// The line being received is already too long; it is dropped up to its newline (its
    /// first bytes stay in `line`).
    oversize: bool,
    /// Commands accepted (hello not counted).
    pub accepted: u64,
    /// Requests refused with an error reply.
    pub refused: u64,
}

impl Listener {
    /// Makes the control FIFO at `path` and the ack FIFO at `path` + ".ack", mode 0600, owned by
    /// `owner` (uid, gid): the user the recorded command runs as.
    pub fn create(path: &Path, owner: (u32, u32)) -> Result<Listener, Error> {
        let (requests, control_id) = make_fifo(path, owner)?;
        let ack_path = control::ack_path(path);
        let ack_id = match make_fifo(&ack_path, owner) {
            Ok((_, id)) => id,
            Err(e) => {
                let _ = std::fs::remove_file(path);
                return Err(e);
            }
        };
        Ok(Listener {
            requests,
            control_path: path.to_path_buf(),
            control_id,
            ack_path,
            ack_id,
            line: Vec::with_capacity(MAX_LINE_BYTES),
            line_since: Instant::now(),
            oversize: false,
            accepted: 0,
            refused: 0,
        })
    }

    /// The control FIFO, to wait for requests with.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.requests.as_fd()
    }

    /// The complete request lines the harness sent since the last call, parsed, in order. A
    /// refusal's message is what the client gets back; it is logged here.
    pub fn requests(&mut self) -> Vec<Received> {
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        let mut budget = READ_BUDGET_BYTES;
        while budget > 0 {
            let want = buf.len().min(budget);
            match self.requests.read(&mut buf[..want]) {
                Ok(0) => break,
                Ok(n) => {
                    budget -= n;
                    self.take(&buf[..n], &mut out);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    log::warn!("control: cannot read {}: {e}", self.control_path.display());
                    break;
                }
            }
        }
        out
    }

    /// Adds received bytes to the line being received, finishing lines at each newline.
    fn take(&mut self, mut bytes: &[u8], out: &mut Vec<Received>) {
        if (!self.line.is_empty() || self.oversize) && self.line_since.elapsed() > STALE_LINE {
            log::warn!(
                "control: dropped an unfinished line a client left {} s ago: '{}'",
                self.line_since.elapsed().as_secs(),
                printable(&String::from_utf8_lossy(&self.line), 80)
            );
            self.line.clear();
            self.oversize = false;
        }
        while !bytes.is_empty() {
            let (part, rest, ends) = match bytes.iter().position(|&b| b == b'\n') {
                Some(end) => (&bytes[..end], &bytes[end + 1..], true),
                None => (bytes, &[][..], false),
            };
            if self.line.is_empty() && !self.oversize {
                self.line_since = Instant::now();
            }
            if !self.oversize {
                if self.line.len() + part.len() < MAX_LINE_BYTES {
                    self.line.extend_from_slice(part);
                } else {
                    self.oversize = true;
                    let head = OVERSIZE_HEAD_BYTES.saturating_sub(self.line.len());
                    self.line.extend_from_slice(&part[..head.min(part.len())]);
                    self.line.truncate(OVERSIZE_HEAD_BYTES);
                }
            }
            if ends {
                out.push(self.finish_line());
            }
            bytes = rest;
        }
    }

    /// Parses the line received in full, and starts a new one.
    fn finish_line(&mut self) -> Received {
        let (echo, parsed) = if self.oversize {
            let message = format!(
                "the line is longer than {MAX_LINE_BYTES} bytes with its newline; shorten it"
            );
            (format!("{}…", echo(&self.line)), Err(message))
        } else {
            (echo(&self.line), Request::parse(&self.line))
        };
        match &parsed {
            Ok(Request::Command(_)) => self.accepted += 1,
            Ok(Request::Hello { .. }) => {}
            Err(message) => {
                self.refused += 1;
                if self.refused <= LOGGED_REFUSALS {
                    log::warn!("control: refused '{}': {message}", printable(&echo, 80));
                }
                if self.refused == LOGGED_REFUSALS {
                    log::warn!("control: further refused requests are counted, not logged");
                }
            }
        }
        self.line.clear();
        self.oversize = false;
        Received {
            echo,
            request: parsed,
        }
    }

    /// Sends `reply` to the client waiting on the ack FIFO; drops it when none is waiting.
    pub fn reply(&self, reply: &Reply) {
        let opened = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&self.ack_path);
        let mut ack = match opened {
            Ok(f) => f,
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                log::debug!("control: no client waits for a reply; dropped {reply:?}");
                return;
            }
            Err(e) => {
                log::warn!("control: cannot open {}: {e}", self.ack_path.display());
                return;
            }
        };
        if id_of(&ack).ok() != Some(self.ack_id) {
            log::warn!(
                "control: {} is no longer the FIFO memtrack made; not replying",
                self.ack_path.display()
            );
            return;
        }
        let line = reply.to_line();
        match ack.write(line.as_bytes()) {
            Ok(n) if n == line.len() => {}
            Ok(_) | Err(_) => log::warn!(
                "control: {} is full (a client sends without reading replies); reply dropped",
                self.ack_path.display()
            ),
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        for (path, id) in [
            (&self.control_path, self.control_id),
            (&self.ack_path, self.ack_id),
        ] {
            // Only what we made: the path may have been replaced since.
            let ours = std::fs::symlink_metadata(path)
                .map(|m| (m.dev(), m.ino()) == id)
                .unwrap_or(false);
            if ours {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// Makes a FIFO at `path`, checks that what is there is the FIFO we made (not something a user
/// who can write the directory put there meanwhile), and gives it to `owner` with mode 0600.
/// Returns it open for reading and writing, without blocking.
fn make_fifo(path: &Path, owner: (u32, u32)) -> Result<(File, FileId), Error> {
    fifo::make(path, 0o600).map_err(|e| match e.kind() {
        io::ErrorKind::AlreadyExists => Error::Usage(format!(
            "--control {}: something already exists there; remove it (a FIFO left by a killed \
             memtrack) or give another path",
            path.display()
        )),
        _ => Error::io(path, e),
    })?;
    let opened = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .and_then(|f| f.metadata().map(|m| (f, m)));
    let (file, meta) = match opened {
        Ok(x) => x,
        Err(e) => {
            let _ = std::fs::remove_file(path);
            return Err(Error::io(path, e));
        }
    };
    if !meta.file_type().is_fifo() || meta.uid() != process::geteuid() {
        return Err(Error::Usage(format!(
            "--control {}: the FIFO was replaced while memtrack set it up; give a path in a \
             directory only you can write",
            path.display()
        )));
    }
    let (uid, gid) = owner;
    std::os::unix::fs::fchown(&file, Some(uid), Some(gid))
        .and_then(|()| file.set_permissions(std::fs::Permissions::from_mode(0o600)))
        .map_err(|e| {
            let _ = std::fs::remove_file(path);
            Error::io(path, e)
        })?;
    Ok((file, (meta.dev(), meta.ino())))
}

fn id_of(file: &File) -> io::Result<FileId> {
    file.metadata().map(|m| (m.dev(), m.ino()))
}

/// The listener and the gate it flips: what `drain` needs to serve the harness.
pub struct Control<'obj> {
    /// The FIFOs.
    pub listener: Listener,
    /// The BPF `gate` map (common.bpf.h).
    gate: MapFd<'obj>,
    /// What the gate was last set to (it starts open: the map is zeroed at load).
    open: Cell<bool>,
}

impl<'obj> Control<'obj> {
    /// The channel over `listener`, flipping the `gate` map.
    pub fn new(listener: Listener, gate: MapFd<'obj>) -> Control<'obj> {
        Control {
            listener,
            gate,
            open: Cell::new(true),
        }
    }

    /// Opens (`true`) or closes the gate in the kernel; once this returns, allocator calls that
    /// start are recorded (or not).
    pub fn set_gate(&self, open: bool) -> Result<(), String> {
        let state = if open {
            raw::gate_state::GATE_OPEN
        } else {
            raw::gate_state::GATE_CLOSED
        };
        self.gate
            .update_u32(0, state as u32)
            .map_err(|e| format!("the kernel refused to flip the gate: {e}"))?;
        self.open.set(open);
        Ok(())
    }

    /// Whether allocator calls are recorded now: the gate's state as last set.
    pub fn gate_open(&self) -> bool {
        self.open.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::ControlCommand;

    /// A listener on a FIFO in a fresh scratch directory.
    fn listener(name: &str) -> Listener {
        let dir =
            std::env::temp_dir().join(format!("memtrack-listen-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Listener::create(&dir.join("ctl"), process::user_ids()).unwrap()
    }

    fn client(l: &Listener) -> File {
        OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&l.control_path)
            .unwrap()
    }

    #[test]
    fn fifos_are_private_and_removed_on_drop() {
        let l = listener("private");
        let (control, ack) = (l.control_path.clone(), l.ack_path.clone());
        for p in [&control, &ack] {
            let m = std::fs::symlink_metadata(p).unwrap();
            assert!(m.file_type().is_fifo());
            assert_eq!(m.mode() & 0o777, 0o600);
        }
        drop(l);
        assert!(!control.exists() && !ack.exists());
    }

    #[test]
    fn existing_path_is_refused() {
        let l = listener("exists");
        let e = Listener::create(&l.control_path, process::user_ids())
            .err()
            .unwrap();
        assert!(e.to_string().contains("already exists"), "{e}");
    }

    #[test]
    fn lines_are_parsed_in_order_across_reads() {
        let mut l = listener("lines");
        let mut c = client(&l);
        c.write_all(b"start\nbench a b 7\nmar").unwrap();
        let got = l.requests();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].request, Ok(Request::Command(ControlCommand::Start)));
        assert_eq!(got[1].echo, "bench a b 7");
        c.write_all(b"ker round_end\n").unwrap();
        let got = l.requests();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].echo, "marker round_end");
        assert!(got[0].request.is_ok());
        assert_eq!((l.accepted, l.refused), (3, 0));
    }

    #[test]
    fn nothing_to_read_and_writer_gone_do_not_block_or_spin() {
        let mut l = listener("empty");
        assert!(l.requests().is_empty());
        drop(client(&l));
        assert!(l.requests().is_empty());
    }

    #[test]
    fn oversize_line_is_refused_once_and_the_next_line_reads() {
        let mut l = listener("oversize");
        let mut c = client(&l);
        let mut big = vec![b'x'; 10_000];
        big.extend_from_slice(b"\nstop\n");
        c.write_all(&big).unwrap();
        let mut got = Vec::new();
        for _ in 0..4 {
            got.extend(l.requests());
        }
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[0]
            .request
            .as_ref()
            .unwrap_err()
            .contains("longer than 4096"));
        assert_eq!(got[0].echo, format!("{}…", "x".repeat(64)));
        assert_eq!(got[1].request, Ok(Request::Command(ControlCommand::Stop)));
        assert_eq!(l.refused, 1);
    }

    #[test]
    fn longest_line_is_accepted() {
        let mut l = listener("longest");
        let mut c = client(&l);
        let uri = "u".repeat(MAX_LINE_BYTES - "bench  1\n".len());
        let line = format!("bench {uri} 1\n");
        assert_eq!(line.len(), MAX_LINE_BYTES);
        c.write_all(line.as_bytes()).unwrap();
        let got = l.requests();
        assert!(got[0].request.is_ok(), "{got:?}");
    }

    #[test]
    fn malformed_lines_are_refused_and_counted() {
        let mut l = listener("malformed");
        let mut c = client(&l);
        c.write_all(b"bogus\n\nbench\nstart\n\xff\xfe\n").unwrap();
        let got = l.requests();
        let ok: Vec<bool> = got.iter().map(|r| r.request.is_ok()).collect();
        assert_eq!(ok, [false, false, false, true, false]);
        assert_eq!((l.accepted, l.refused), (1, 4));
    }

    #[test]
    fn a_stale_unfinished_line_is_dropped() {
        let mut l = listener("stale");
        let mut c = client(&l);
        c.write_all(b"sta").unwrap();
        assert!(l.requests().is_empty());
        l.line_since = Instant::now() - STALE_LINE * 2;
        c.write_all(b"stop\n").unwrap();
        let got = l.requests();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].request, Ok(Request::Command(ControlCommand::Stop)));
    }

    #[test]
    fn reply_without_a_waiting_client_is_dropped() {
        let l = listener("noreader");
        let reply = Reply {
            request: "start".into(),
            refusal: None,
        };
        l.reply(&reply); // must neither block nor fail
    }

    #[test]
    fn reply_reaches_a_waiting_client() {
        let l = listener("reply");
        let mut ack = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&l.ack_path)
            .unwrap();
        l.reply(&Reply {
            request: "bogus".into(),
            refusal: Some("nope".into()),
        });
        let mut s = String::new();
        ack.read_to_string(&mut s).unwrap();
        assert_eq!(s, "err bogus: nope\n");
    }
}
