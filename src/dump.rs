//! `memtrack dump FILE`: a recording as JSON lines, for people debugging a recording and scripts
//! that want raw events.
//!
//! One object per line: `{"header": {...}}` first, then one per event in file order (the logical
//! `Event`, absolute values), then `{"trailer": {...}}` or, if the file is damaged,
//! `{"damaged": {"offset": N, "reason": "..."}}`. A damaged range the reader skipped, reading on
//! after it, is a `{"skipped": {"offset_bytes": N, "size_bytes": N, "reason": "..."}}` line where
//! it was found. It reads through `format::Reader`, so it streams. docs/dump-format.md describes
//! every field.

use std::io::{self, BufWriter, Write};
use std::path::Path;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::format::{Header, ReadEnd, Reader, Skipped, Trailer};

/// The `reason` of the `ReadEnd::Damaged` that `run` returns when its output was closed before
/// the end (as in `memtrack dump run.mt | head`): the file itself may be fine, so callers should
/// exit quietly rather than report damage.
pub const OUTPUT_CLOSED: &str = "output closed before the end of the recording";

/// The name I/O errors on the output are reported under.
const OUTPUT_NAME: &str = "dump output";

/// The first and last lines.
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum Line<'a> {
    Header(&'a Header),
    Trailer(&'a Trailer),
    Damaged { offset: u64, reason: &'a str },
    Skipped(&'a Skipped),
}

/// Writes the recording at `path` to `out` as JSON lines and returns how reading ended.
///
/// A damaged file is not an error: its last line and the returned `ReadEnd` say where the damage
/// starts. If `out` is closed early (broken pipe), stops quietly and returns
/// `ReadEnd::Damaged` with reason `OUTPUT_CLOSED`.
pub fn run(path: &Path, out: &mut dyn Write) -> Result<ReadEnd> {
    let mut reader = Reader::open(path)?;
    // Stdout is line-buffered; one write per event would dominate the cost.
    let mut out = BufWriter::with_capacity(1 << 16, out);
    let mut line = Vec::with_capacity(256);
    match write_all_lines(&mut reader, &mut out, &mut line) {
        Ok(end) => Ok(end),
        Err(Failure::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => {
            // Whatever is still buffered cannot be delivered either.
            let (_, _) = out.into_parts();
            Ok(reader.end().cloned().unwrap_or_else(|| ReadEnd::Damaged {
                offset: reader.offset(),
                reason: OUTPUT_CLOSED.to_string(),
            }))
        }
        Err(Failure::Output(e)) => Err(Error::io(OUTPUT_NAME, e)),
        Err(Failure::Json(e)) => Err(Error::Internal(format!("cannot write JSON: {e}"))),
    }
}

/// Why writing stopped.
enum Failure {
    Output(io::Error),
    Json(serde_json::Error),
}

fn write_all_lines<R: io::Read>(
    reader: &mut Reader<R>,
    out: &mut BufWriter<&mut dyn Write>,
    line: &mut Vec<u8>,
) -> std::result::Result<ReadEnd, Failure> {
    let header = reader.header().clone();
    write_line(out, line, &Line::Header(&header))?;
    let mut skipped = 0;
    while let Some(ev) = reader.next() {
        // The reader skips damage while looking for the next event: say so before it.
        for s in &reader.skipped()[skipped..] {
            write_line(out, line, &Line::Skipped(s))?;
        }
        skipped = reader.skipped().len();
        write_line(out, line, &ev)?;
    }
    for s in &reader.skipped()[skipped..] {
        write_line(out, line, &Line::Skipped(s))?;
    }
    let end = reader.end().cloned().unwrap_or_else(|| ReadEnd::Damaged {
        offset: reader.offset(),
        reason: "reading stopped without saying why".to_string(),
    });
    match &end {
        ReadEnd::Complete(trailer) => write_line(out, line, &Line::Trailer(trailer))?,
        ReadEnd::Damaged { offset, reason } => write_line(
            out,
            line,
            &Line::Damaged {
                offset: *offset,
                reason,
            },
        )?,
    }
    out.flush().map_err(Failure::Output)?;
    Ok(end)
}

/// Writes `value` as one JSON line, through the reused `line` buffer.
fn write_line<T: Serialize>(
    out: &mut impl Write,
    line: &mut Vec<u8>,
    value: &T,
) -> std::result::Result<(), Failure> {
    line.clear();
    serde_json::to_writer(&mut *line, value).map_err(Failure::Json)?;
    line.push(b'\n');
    out.write_all(line).map_err(Failure::Output)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{AllocFunc, Event, EventKind, Module, Symbol, Writer};
    use crate::testkit::FailingOutput;
    use std::path::PathBuf;

    /// A recording in a temporary file, removed on drop.
    struct TempRecording(PathBuf);

    impl TempRecording {
        fn new(name: &str, events: usize, finish: bool) -> TempRecording {
            let path = std::env::temp_dir()
                .join(format!("memtrack-dump-{name}-{}.mt", std::process::id()));
            let file = std::fs::File::create(&path).unwrap();
            let header = Header {
                argv: vec!["true".into()],
                ..Header::default()
            };
            let mut w = Writer::new(file, &header).unwrap();
            for i in 0..events as u64 {
                w.push(&Event {
                    ts_ns: 10 + i,
                    pid: 1,
                    tid: 2,
                    kind: EventKind::Alloc {
                        func: AllocFunc::Malloc,
                        addr: 0x1000 + 16 * i,
                        size: 16,
                        stack_id: 0,
                    },
                })
                .unwrap();
            }
            if finish {
                w.finish(&Trailer::default()).unwrap();
            } else {
                w.flush_chunk().unwrap();
            }
            TempRecording(path)
        }
    }

    impl Drop for TempRecording {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn lines(out: &[u8]) -> Vec<serde_json::Value> {
        std::str::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn complete_file_is_header_events_trailer() {
        let rec = TempRecording::new("complete", 3, true);
        let mut out = Vec::new();
        let end = run(&rec.0, &mut out).unwrap();
        assert!(matches!(end, ReadEnd::Complete(ref t) if t.events == 3));
        let lines = lines(&out);
        assert_eq!(lines.len(), 5);
        assert_eq!(lines[0]["header"]["argv"][0], "true");
        assert_eq!(lines[1]["ts_ns"], 10);
        assert_eq!(lines[1]["kind"]["type"], "alloc");
        assert_eq!(lines[3]["kind"]["addr"], 0x1020);
        assert_eq!(lines[4]["trailer"]["events"], 3);
    }

    #[test]
    fn cut_file_ends_with_damaged_line() {
        let rec = TempRecording::new("cut", 2, false);
        let mut out = Vec::new();
        let end = run(&rec.0, &mut out).unwrap();
        let lines = lines(&out);
        assert_eq!(lines.len(), 4);
        let ReadEnd::Damaged { offset, .. } = end else {
            panic!("{end:?}")
        };
        assert_eq!(lines[3]["damaged"]["offset"], offset);
        assert!(lines[3]["damaged"]["reason"]
            .as_str()
            .unwrap()
            .contains("without a trailer"));
    }

    #[test]
    fn skipped_damage_is_a_line_where_it_was_found() {
        let rec = TempRecording::new("skipped", 3, true);
        let mut bytes = std::fs::read(&rec.0).unwrap();
        // The only chunk's first payload byte: its checksum fails, the trailer still reads.
        let header_end = {
            let r = Reader::open(&rec.0).unwrap();
            r.offset() as usize
        };
        bytes[header_end + 13] ^= 1;
        std::fs::write(&rec.0, &bytes).unwrap();
        let mut out = Vec::new();
        run(&rec.0, &mut out).unwrap();
        let lines = lines(&out);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(lines[1]["skipped"]["offset_bytes"], header_end);
        assert!(lines[1]["skipped"]["size_bytes"].as_u64().unwrap() > 13);
        assert!(lines[2]["trailer"].is_object(), "{lines:?}");
    }

    #[test]
    fn broken_pipe_ends_quietly() {
        let rec = TempRecording::new("pipe", 100_000, true);
        let end = run(
            &rec.0,
            &mut FailingOutput {
                left: 100,
                error: io::ErrorKind::BrokenPipe,
            },
        )
        .unwrap();
        assert!(matches!(end, ReadEnd::Damaged { ref reason, .. } if reason == OUTPUT_CLOSED));
    }

    #[test]
    fn other_output_errors_are_errors() {
        let rec = TempRecording::new("full", 1, true);
        assert!(matches!(
            run(
                &rec.0,
                &mut FailingOutput {
                    left: 0,
                    error: io::ErrorKind::Other,
                },
            ),
            Err(Error::Io { .. })
        ));
    }

    #[test]
    fn stack_events_are_lines_with_a_hex_build_id() {
        use crate::format::SymbolFrame;
        use serde_json::json;
        let line = |kind| {
            let ev = Event {
                ts_ns: 5,
                pid: 0,
                tid: 0,
                kind,
            };
            let mut out = Vec::new();
            write_line(&mut out, &mut Vec::new(), &ev).unwrap_or_else(|_| panic!("json"));
            serde_json::from_slice::<serde_json::Value>(&out).unwrap()["kind"].clone()
        };
        let module = EventKind::Module(Module {
            id: 1,
            path: "/lib/libc.so.6".into(),
            build_id: vec![0x0a, 0xff, 0x00],
            dev: 2049,
            ino: 77,
        });
        assert_eq!(
            line(module),
            json!({"type": "module", "id": 1, "path": "/lib/libc.so.6",
                   "build_id": "0aff00", "dev": 2049, "ino": 77})
        );
        let node = EventKind::StackNode {
            id: 2,
            parent: 1,
            module: 1,
            offset: 4096,
        };
        assert_eq!(
            line(node),
            json!({"type": "stack_node", "id": 2, "parent": 1, "module": 1, "offset": 4096})
        );
        let symbol = EventKind::Symbol(Symbol {
            module: 1,
            offset: 4096,
            frames: vec![SymbolFrame {
                function: "main".into(),
                file: "main.c".into(),
                line: 3,
            }],
        });
        assert_eq!(
            line(symbol),
            json!({"type": "symbol", "module": 1, "offset": 4096,
                   "frames": [{"function": "main", "file": "main.c", "line": 3}]})
        );
        let stats = EventKind::StackStats(crate::format::StackWalks {
            walks: 9,
            truncated: 1,
            unknown: 2,
            unsupported: 3,
            collisions: 4,
            uncached: 5,
        });
        assert_eq!(
            line(stats),
            json!({"type": "stack_stats", "walks": 9, "truncated": 1, "unknown": 2,
                   "unsupported": 3, "collisions": 4, "uncached": 5})
        );
    }

    #[test]
    fn missing_file_is_an_error() {
        let mut out = Vec::new();
        let err = run(Path::new("/nonexistent/x.mt"), &mut out).unwrap_err();
        assert!(matches!(err, Error::Io { .. }));
        assert!(out.is_empty());
    }
}
