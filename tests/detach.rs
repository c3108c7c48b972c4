//! `record` leaves detaching its probes (kernel grace periods, about 0.15 s) to a background
//! process after the file is complete. That process must not hold the caller's pipes: a CI
//! runner reading memtrack's output until end of file would wait for it otherwise.

mod common;

use std::io::Read;
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};

#[test]
fn output_pipes_close_when_record_exits() {
    skip_unless_recording!("output_pipes_close_when_record_exits");
    let out = common::scratch_dir().join("detach-pipes.mt");
    let mut child = Command::new(common::memtrack())
        .args(["record", "-o"])
        .arg(&out)
        .args(["--", "true"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run memtrack");
    let status = child.wait().expect("wait for memtrack");
    let mut stderr = child.stderr.take().unwrap();
    // Read without blocking: at end of file every writer is gone; EAGAIN means someone (the
    // background detacher) still holds the pipe after memtrack exited.
    // SAFETY: the fd is the open read end of our pipe; O_NONBLOCK changes nothing else.
    unsafe { libc::fcntl(stderr.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
    let mut text = Vec::new();
    let held = stderr.read_to_end(&mut text).is_err();
    let text = String::from_utf8_lossy(&text);
    assert!(status.success(), "memtrack failed: {status}\n{text}");
    assert!(text.contains("recorded"), "no summary line:\n{text}");
    assert!(
        !held,
        "stderr was still open after memtrack exited:\n{text}"
    );
}
