//! The names of the stacks' frames, found on a thread of their own while the command runs.
//!
//! Symbolizing every frame at the end cost a short run most of what stacks add to it: 46 ms of
//! the 70 that the default recording added to a 150 ms `sort`, nearly all of it inflating the
//! compressed DWARF of libc6-dbg's debug file for libc's few frames. Yet each frame is known as
//! soon as the first walk that reaches it arrives, and a command that runs one thread leaves
//! the recorder a CPU to spare. So the drain hands [`Names`] each frame the trie gains and each
//! module made since (`record::stacks::feed_names`), and its thread names them at nice 19,
//! behind the command and the drain, keeping what it read of each file for the frames that
//! come later. At the end it gets the normal priority back (the command is gone), names what
//! is left, and the recording's symbols are the same as if all were named then: one per
//! distinct frame, sorted by module and offset.
//!
//! What it costs: the recorder holds the parsed symbols of every file with frames until the
//! end, where it used to free each file's after naming it, and it spends the same CPU as
//! before, earlier. A busy machine leaves the thread little CPU during the run, and the end
//! then does what it did before.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;

use crate::format::SymbolFrame;
use crate::stacks::symbolize::{offsets_by_module, FrameNamer, ModuleFile};
use crate::stacks::trie::Frame;
use crate::sys::sched::Lowered;

/// The thread's nice value while the command runs: the lowest priority there is, so that it
/// takes only a CPU that nobody else wants.
const BACKGROUND_NICE: i32 = 19;

/// Every frame's names: the chain of functions at it, innermost first (empty: unnamed).
pub type Named = BTreeMap<Frame, Vec<SymbolFrame>>;

/// What the drain hands the thread at once: modules before the frames that need them.
#[derive(Default)]
struct Batch {
    modules: Vec<ModuleFile>,
    frames: Vec<Frame>,
}

/// The naming thread, started by the first frame it is given.
#[derive(Default)]
pub struct Names {
    started: Option<Started>,
    /// How many of the tables' modules were handed over (they are numbered in order of
    /// creation), kept by the caller.
    pub modules_sent: usize,
}

struct Started {
    batches: mpsc::Sender<Batch>,
    thread: JoinHandle<Named>,
    /// Its priority, given back at the end.
    priority: Lowered,
}

impl Names {
    /// Hands `modules` and `frames` to the thread, starting it if need be. A module's frames
    /// may come in the same call or later, never before it.
    pub fn feed(&mut self, modules: Vec<ModuleFile>, frames: Vec<Frame>) {
        if modules.is_empty() && frames.is_empty() {
            return;
        }
        let batch = Batch { modules, frames };
        let started = self.started.get_or_insert_with(start);
        // The thread only ends when the sender is dropped, or by a panic; then the frames it
        // has not named stay unnamed (`finish`).
        let _ = started.batches.send(batch);
    }

    /// Every frame handed over, named: waits for the thread, at the normal priority now.
    pub fn finish(self) -> Named {
        let Some(Started {
            batches,
            thread,
            priority,
        }) = self.started
        else {
            return Named::new();
        };
        drop(batches);
        // Not joined yet, so it still runs.
        if let Err(e) = priority.raise() {
            log::debug!("the naming thread keeps nice {BACKGROUND_NICE}: {e}");
        }
        thread.join().unwrap_or_else(|_| {
            log::warn!("naming the stacks' frames failed; they stay unnamed");
            Named::new()
        })
    }
}

fn start() -> Started {
    let (batches, received) = mpsc::channel();
    let priority = Lowered::default();
    let its_priority = priority.clone();
    let thread = std::thread::Builder::new()
        .name("name frames".into())
        .spawn(move || {
            if let Err(e) = its_priority.lower(BACKGROUND_NICE) {
                log::debug!("the naming thread keeps the normal priority: {e}");
            }
            name_all(received)
        })
        .expect("a thread can be started");
    Started {
        batches,
        thread,
        priority,
    }
}

/// The thread: names each batch's new frames, all batches waiting at once together, until
/// the sender is gone.
fn name_all(batches: mpsc::Receiver<Batch>) -> Named {
    let namer = FrameNamer::new();
    let mut paths: HashMap<u32, PathBuf> = HashMap::new();
    let mut named = Named::new();
    // Frames whose module has not come (yet): named if it does.
    let mut waiting: Vec<Frame> = Vec::new();
    while let Ok(first) = batches.recv() {
        let mut frames = std::mem::take(&mut waiting);
        for batch in std::iter::once(first).chain(batches.try_iter()) {
            paths.extend(batch.modules.into_iter().map(|m| (m.id, m.path)));
            frames.extend(batch.frames);
        }
        let (known, unknown): (Vec<Frame>, Vec<Frame>) = frames
            .into_iter()
            .filter(|f| !named.contains_key(f))
            .partition(|f| paths.contains_key(&f.module));
        waiting = unknown;
        for (module, offsets) in offsets_by_module(known) {
            named.extend(namer.name_module(module, &paths[&module], offsets));
        }
    }
    for f in waiting {
        named.entry(f).or_default();
    }
    named
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::symbolize::symbolize;
    use std::path::Path;

    /// The file offset and size of the test binary's code, from its executable mapping.
    fn code_of_the_test_binary() -> (u64, u64) {
        let exe = std::env::current_exe().unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        maps.lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() > 5 && f[1].contains('x') && Path::new(f[5]) == exe).then(|| {
                    let (lo, hi) = f[0].split_once('-').unwrap();
                    let size =
                        u64::from_str_radix(hi, 16).unwrap() - u64::from_str_radix(lo, 16).unwrap();
                    (u64::from_str_radix(f[2], 16).unwrap(), size)
                })
            })
            .expect("the test binary's code is mapped")
    }

    /// `n` offsets spread over the test binary's code from the `from`th of 100 on.
    fn frames_of(module: u32, from: u64, n: u64) -> Vec<Frame> {
        let (start, size) = code_of_the_test_binary();
        (from..from + n)
            .map(|i| Frame {
                module,
                offset: start + i * (size / 100),
            })
            .collect()
    }

    #[test]
    fn frames_named_in_batches_are_named_as_at_once() {
        let exe = std::env::current_exe().unwrap();
        let module = ModuleFile { id: 3, path: exe };
        let first = frames_of(3, 0, 40);
        let later = frames_of(3, 20, 60);
        // A frame of a module that comes later, and one of a module that never does.
        let early = Frame {
            module: 4,
            offset: 0x2000,
        };
        let orphan = Frame {
            module: 9,
            offset: 0x10,
        };
        let mut names = Names::default();
        names.feed(Vec::new(), vec![early]);
        names.feed(vec![module.clone()], first.clone());
        names.feed(
            vec![ModuleFile {
                id: 4,
                path: module.path.clone(),
            }],
            [later.clone(), vec![orphan]].concat(),
        );
        let got = names.finish();

        let mut all: Vec<Frame> = [first, later].concat();
        all.push(early);
        let modules = [
            module.clone(),
            ModuleFile {
                id: 4,
                path: module.path.clone(),
            },
        ];
        let mut expected: Named = symbolize(&modules, all).into_iter().collect();
        expected.insert(orphan, Vec::new());
        assert_eq!(got, expected);
        assert!(
            got.values().filter(|f| !f.is_empty()).count() > 10,
            "the offsets name functions: {got:?}"
        );
    }

    #[test]
    fn nothing_fed_starts_nothing() {
        let mut names = Names::default();
        names.feed(Vec::new(), Vec::new());
        assert!(names.started.is_none());
        assert!(names.finish().is_empty());
    }
}
