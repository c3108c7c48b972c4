//! Discovery: find the allocators of every executable file a tracked process maps, probe each
//! file once, and let the process go on.
//!
//! The kernel side (bpf/discover.bpf.c) stops a tracked process with SIGSTOP when it executes a
//! file not scanned yet, and when the dynamic loader has mapped the libraries of its start-up or
//! of a dlopen (`_dl_debug_state` with RT_CONSISTENT), and hands us a stop record. The drain loop
//! passes each to [`Discovery::handle_stop`], which reads `/proc/PID/maps`, scans every
//! executable file mapping it has not seen (by device and inode), plans its probes from the
//! catalogue and attaches them; the drain loop then sends SIGCONT. Nothing of a new file has
//! run before its probes are in place: the first allocation after dlopen returns, and the first of a statically linked
//! program, are recorded.
//!
//! Files are read and attached through `/proc/PID/map_files/`, which names exactly the mapped
//! file (also when it was deleted or replaced since). A uprobe belongs to the file's inode, so
//! one attach covers every process that maps it, before or after.
//!
//! A stopped process must never be left stopped: `handle_stop` returns whatever fails (a
//! failure to scan or attach a file is logged and recorded in the file's coverage record, 0
//! probes, never returned), and the drain loop continues every process it handled a stop of,
//! once, after all of that process's stops (drain.rs, `continue_stopped`).

use std::collections::{HashMap, HashSet};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::binary::custom::Custom;
use crate::binary::symbols::ElfSymbols;
use crate::binary::{catalogue, Stepped};
use crate::format::{Coverage, Event, EventKind};
use crate::record::attach;
use crate::record::decode::Stop;
use crate::record::file_key::FileKey;
use crate::record::stacks::Tables;
use crate::record::table_builder::TableBuilder;
use crate::sys::bpf::{BpfError, Link, LoadedObject};
use crate::sys::bpf_map::MapFd;
use crate::sys::process;

/// The BPF program at the dynamic loader's `_dl_debug_state` (bpf/discover.bpf.c).
pub const DL_DEBUG_STATE: &str = "discover_dl_debug_state";
/// The BPF program at exec (bpf/discover.bpf.c).
pub const DISCOVER_EXEC: &str = "discover_exec";
/// The BPF program at the C library's `_exit`, which holds a process for the leak scan
/// (bpf/discover.bpf.c, src/record/leakscan.rs).
pub const EXIT_HOLD: &str = "exit_hold";
/// Where a normal exit ends before exit_group: musl's `_Exit` (its `_exit` calls it), glibc's
/// `_exit` (`_Exit` is an alias of it), first found wins.
const EXIT_FUNCTIONS: [&str; 2] = ["_Exit", "_exit"];

/// Values of the `scanned` map (bpf/discover.bpf.c): the file is probed; its coverage record
/// is written too.
const SCANNED: u8 = 1;
const REPORTED: u8 = 2;

/// One executable mapping of `/proc/PID/maps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecMapping {
    /// Start address.
    pub start: u64,
    /// End address (exclusive).
    pub end: u64,
    /// The file.
    pub key: FileKey,
    /// Its path as the kernel shows it, without a " (deleted)" mark.
    pub path: String,
}

/// The executable file mappings of a `/proc/PID/maps` text.
pub fn exec_mappings(maps: &str) -> Vec<ExecMapping> {
    let mut out = Vec::new();
    for line in maps.lines() {
        let mut fields = line.splitn(6, ' ');
        let (Some(range), Some(perms), Some(_offset), Some(dev), Some(ino)) = (
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
        ) else {
            continue;
        };
        let path = fields.next().unwrap_or("").trim_start();
        if perms.as_bytes().get(2) != Some(&b'x') || path.is_empty() {
            continue;
        }
        let Ok(ino) = ino.parse::<u64>() else {
            continue;
        };
        let (Some((start, end)), Some((major, minor))) =
            (range.split_once('-'), dev.split_once(':'))
        else {
            continue;
        };
        let hex = |s: &str| u64::from_str_radix(s, 16).ok();
        let (Some(start), Some(end), Some(major), Some(minor)) =
            (hex(start), hex(end), hex(major), hex(minor))
        else {
            continue;
        };
        if ino == 0 {
            continue; // [vdso], anonymous code
        }
        out.push(ExecMapping {
            start,
            end,
            key: FileKey {
                dev: ((major as u32) << 20) | (minor as u32 & 0xfffff),
                ino,
            },
            path: path.strip_suffix(" (deleted)").unwrap_or(path).to_string(),
        });
    }
    out
}

/// What became of one file.
#[derive(Debug)]
struct Probed {
    path: String,
    allocator: String,
    probes: u32,
    /// The sites whose probe the kernel single-steps.
    stepped: Vec<Stepped>,
    /// Whether its coverage record was written (when a tracked process was first seen with it).
    reported: bool,
    /// Whether probes are attached to it (allocator sites or the loader's hook) on a file that
    /// processes outside the tree may run too: not one of the private copies (`private.rs`).
    taxes_machine: bool,
}

/// How long tracked processes stood stopped, for discovery or for the walker.
#[derive(Clone, Copy, Debug, Default)]
pub struct StopStats {
    /// Stops handled.
    pub stops: u64,
    /// Sum of the times from the stop (BPF timestamp) to SIGCONT, ns.
    pub total_ns: u64,
    /// The longest of them, ns.
    pub max_ns: u64,
}

impl StopStats {
    /// Count `stop`, continued now; returns how long it stood, ns.
    fn note(&mut self, stop: &Stop) -> u64 {
        let waited = process::monotonic_ns().saturating_sub(stop.ts_ns);
        self.stops += 1;
        self.total_ns += waited;
        self.max_ns = self.max_ns.max(waited);
        waited
    }

    /// "; N <one|many>, M µs on average", or nothing without a stop.
    fn summary(&self, one: &str, many: &str) -> String {
        match self.stops {
            0 => String::new(),
            n => format!(
                "; {n} {}, {} µs on average",
                if n == 1 { one } else { many },
                self.total_ns / n / 1000
            ),
        }
    }
}

/// A file scanned before the unwind tables were there, kept open for them.
struct WaitingTable {
    key: FileKey,
    file: std::fs::File,
    shown: String,
    pid: u32,
    /// Its number with the builder that parses it meanwhile, if it took it.
    job: Option<u64>,
}

/// The files scanned before the unwind tables were there, and the builder that parses their
/// tables while the walker loads (table_builder.rs).
#[derive(Default)]
struct Waiting {
    files: Vec<WaitingTable>,
    builder: Option<TableBuilder>,
}

impl Waiting {
    fn start() -> Waiting {
        Waiting {
            files: Vec::new(),
            builder: TableBuilder::start(),
        }
    }
}

/// The registry of probed files and the means to probe more.
pub struct Discovery<'obj> {
    alloc: &'obj LoadedObject,
    classic: bool,
    discover: &'obj LoadedObject,
    scanned: MapFd<'obj>,
    files: HashMap<FileKey, Probed>,
    links: Vec<Link<'obj>>,
    stats: StopStats,
    /// Stops for the walker of call stacks.
    walker_stats: StopStats,
    /// The `--allocator` functions to probe wherever they are defined.
    custom: Vec<Custom>,
    /// The symbols of `custom` some file defined.
    custom_found: HashSet<&'static str>,
    /// One warning per `--allocator` function probed whose body is only a return.
    custom_empty: Vec<String>,
    /// With call stacks: every scanned file's unwind table goes here too.
    tables: Option<Tables<'obj>>,
    /// With call stacks, until the walker is loaded (walker.rs): the files scanned so far,
    /// open, whose tables [`Self::set_tables`] builds then.
    waiting_tables: Option<Waiting>,
    /// The private copies of allocator libraries the tree maps instead of the real files
    /// (issue 19): copy's key → the real path, byte-identical, which unwind tables and symbols
    /// are read from so that modules keep their real path.
    copies: HashMap<FileKey, PathBuf>,
    /// Whether to hold processes at `_exit` for the leak scan.
    exit_hold: bool,
}

impl<'obj> Discovery<'obj> {
    /// A registry that attaches allocator sites with `alloc`'s programs (`classic`: one perf
    /// uprobe per site, for kernels without uprobe_multi) and the loader hook with `discover`'s.
    pub fn new(
        alloc: &'obj LoadedObject,
        classic: bool,
        discover: &'obj LoadedObject,
    ) -> Result<Discovery<'obj>, BpfError> {
        Ok(Discovery {
            alloc,
            classic,
            discover,
            scanned: MapFd::of(discover, "scanned")?,
            files: HashMap::new(),
            links: Vec::new(),
            stats: StopStats::default(),
            walker_stats: StopStats::default(),
            custom: Vec::new(),
            custom_found: HashSet::new(),
            custom_empty: Vec::new(),
            tables: None,
            waiting_tables: None,
            copies: HashMap::new(),
            exit_hold: false,
        })
    }

    /// Hold processes at the C library's `_exit` of every file scanned from now on (the leak
    /// scan).
    pub fn with_exit_hold(mut self, on: bool) -> Discovery<'obj> {
        self.exit_hold = on;
        self
    }

    /// Keep the files scanned from now on for unwind tables made later ([`Self::set_tables`]).
    pub fn with_tables_later(mut self, later: bool) -> Discovery<'obj> {
        self.waiting_tables = later.then(Waiting::start);
        self
    }

    /// Whether tables are to be made later and are not yet.
    pub fn tables_waiting(&self) -> bool {
        self.waiting_tables.is_some()
    }

    /// Build the unwind tables of every file scanned so far into `tables`, and of every file
    /// scanned from now on.
    pub fn set_tables(&mut self, mut tables: Tables<'obj>) {
        let Waiting { files, mut builder } = self.waiting_tables.take().unwrap_or_default();
        for waiting in files {
            // The file as we opened it: its process may be gone, its path replaced.
            let path = PathBuf::from(format!("/proc/self/fd/{}", waiting.file.as_raw_fd()));
            let (key, shown, pid) = (waiting.key, &waiting.shown, waiting.pid);
            let built = (builder.as_mut()).and_then(|b| b.take(waiting.job?));
            match built {
                Some(Ok(prepared)) => tables.add_prepared(key, prepared, &path, shown, pid),
                Some(Err(e)) => log::debug!("no unwind table for {shown}: {e}"),
                None => tables.add(key, &path, shown, pid),
            }
        }
        self.tables = Some(tables);
    }

    /// No tables will come: stop keeping files for them.
    pub fn set_tables_never(&mut self) {
        self.waiting_tables = None;
    }

    /// The unwind tables, with call stacks.
    pub fn tables(&self) -> Option<&Tables<'obj>> {
        self.tables.as_ref()
    }

    /// Module events of files scanned since the last call, to write before anything that
    /// refers to them.
    pub fn take_module_events(&mut self) -> Vec<Event> {
        self.tables
            .as_mut()
            .map(Tables::take_events)
            .unwrap_or_default()
    }

    /// Know the files of `copies` (key, real path) as private copies of the real ones.
    pub fn with_copies(mut self, copies: impl IntoIterator<Item = (FileKey, PathBuf)>) -> Self {
        self.copies.extend(copies);
        self
    }

    /// Probe the private copy `key`, opened by `path`, of the library at `real`, before any
    /// tracked process maps it (the C library and the dynamic loader). Returns the probes.
    pub fn probe_copy(&mut self, key: FileKey, path: &Path, real: &Path) -> Result<u32, BpfError> {
        self.copies.insert(key, real.to_path_buf());
        if let Some(p) = self.files.get(&key) {
            return Ok(p.probes);
        }
        let shown = real.display().to_string();
        self.probe(key, path, &shown, 0).map(|p| p.probes)
    }

    /// Probe the `--allocator` functions `custom` too, in every file scanned from now on.
    pub fn with_custom(mut self, custom: Vec<Custom>) -> Discovery<'obj> {
        self.custom = custom;
        self
    }

    /// The `--allocator` functions that only return, for the end-of-run warnings.
    pub fn custom_empty(&self) -> &[String] {
        &self.custom_empty
    }

    /// The `--allocator` functions no scanned file defined, for the end-of-run warning.
    pub fn custom_not_found(&self) -> Vec<Custom> {
        self.custom
            .iter()
            .filter(|c| !self.custom_found.contains(c.entry.name))
            .copied()
            .collect()
    }

    /// Probe the file at `path` before any tracked process maps it (the system's C library and
    /// dynamic loader, which nearly every process maps). Returns the probes attached.
    pub fn probe_path(&mut self, path: &Path) -> Result<u32, BpfError> {
        let meta = std::fs::metadata(path)
            .map_err(|e| BpfError::io(format!("stat {}", path.display()), e))?;
        let key = FileKey::of(&meta);
        if let Some(p) = self.files.get(&key) {
            return Ok(p.probes);
        }
        let shown = path.display().to_string();
        self.probe(key, path, &shown, 0).map(|p| p.probes)
    }

    /// A tracked process stopped: scan what it maps and probe the new files; the caller
    /// continues it. Coverage records of files this run had not reported yet go to `out`.
    pub fn handle_stop(&mut self, stop: &Stop, out: &mut Vec<Event>) {
        let pid = stop.pid;
        match std::fs::read_to_string(format!("/proc/{pid}/maps")) {
            Ok(maps) => {
                for m in exec_mappings(&maps) {
                    self.note_mapping(pid, &m, out);
                }
            }
            // The process was killed while stopped: nothing to scan.
            Err(e) => log::debug!("cannot read the mappings of pid {pid}: {e}"),
        }
        let waited = self.stats.note(stop);
        log::trace!(
            "pid {pid} stopped ({:?}) for {} µs",
            stop.why,
            waited / 1000
        );
    }

    /// A tracked process stopped for the walker of call stacks (StopWhy::Walker), now in
    /// place or failed; the caller continues it.
    pub fn walker_stop_handled(&mut self, stop: &Stop) {
        let waited = self.walker_stats.note(stop);
        log::debug!(
            "pid {} stopped for the walker for {} µs",
            stop.pid,
            waited / 1000
        );
    }

    /// Scan and probe `m` if it is new; report its coverage if not reported yet.
    fn note_mapping(&mut self, pid: u32, m: &ExecMapping, out: &mut Vec<Event>) {
        if !self.files.contains_key(&m.key) {
            let through = format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end);
            let started = Instant::now();
            if let Err(e) = self.probe(m.key, Path::new(&through), &m.path, pid) {
                log::warn!("{}: {e}; its allocations will not be recorded", m.path);
            }
            log::debug!("scanned {} in {} µs", m.path, started.elapsed().as_micros());
        }
        let Some(p) = self.files.get_mut(&m.key) else {
            return;
        };
        if !p.reported {
            p.reported = true;
            // The kernel side may now let processes that map only such files go unstopped.
            if let Err(e) = self.scanned.update_bytes(&m.key.bytes(), &[REPORTED]) {
                log::debug!("{e}");
            }
            out.push(Event {
                ts_ns: process::monotonic_ns(),
                pid,
                tid: 0,
                kind: EventKind::Coverage(Coverage {
                    path: p.path.clone(),
                    allocator: p.allocator.clone(),
                    probes: p.probes,
                }),
            });
        }
    }

    /// Scan the file `key` through `path` and attach its sites (and, with stacks, load its
    /// unwind table). The file is registered whatever happens, so it is never scanned twice.
    fn probe(
        &mut self,
        key: FileKey,
        path: &Path,
        shown: &str,
        pid: u32,
    ) -> Result<&Probed, BpfError> {
        let mut entry = Probed {
            path: shown.to_string(),
            allocator: "none".to_string(),
            probes: 0,
            stepped: Vec::new(),
            reported: false,
            taxes_machine: false,
        };
        let links_before = self.links.len();
        let result = self.scan_and_attach(path, &mut entry);
        entry.taxes_machine = self.links.len() > links_before && !self.copies.contains_key(&key);
        // A copy is read as its real file: the same bytes, and its module keeps the real path
        // (debug files are found beside it).
        let read = self.copies.get(&key).map_or(path, PathBuf::as_path);
        if let Some(tables) = &mut self.tables {
            tables.add(key, read, shown, pid);
        } else if let Some(waiting) = &mut self.waiting_tables {
            match std::fs::File::open(read) {
                Ok(file) => {
                    let job = waiting.builder.as_mut().and_then(|b| b.submit(&file));
                    waiting.files.push(WaitingTable {
                        key,
                        file,
                        shown: shown.to_string(),
                        pid,
                        job,
                    });
                }
                Err(e) => log::debug!("no unwind table for {shown}: {e}"),
            }
        }
        if let Err(e) = self.scanned.update_bytes(&key.bytes(), &[SCANNED]) {
            log::debug!("{e}");
        }
        let probed = self.files.entry(key).or_insert(entry);
        result.map(|()| &*probed)
    }

    fn scan_and_attach(&mut self, path: &Path, entry: &mut Probed) -> Result<(), BpfError> {
        let custom = &self.custom;
        let wanted = |name: &str| {
            catalogue::wants(name)
                || custom.iter().any(|c| c.entry.name == name)
                || EXIT_FUNCTIONS.contains(&name)
        };
        let symbols = match ElfSymbols::read_only(path, wanted) {
            Ok(s) => s,
            Err(e) => {
                // Not an ELF file (a JIT's memfd, say): nothing to probe.
                log::debug!("{}: {e}", entry.path);
                return Ok(());
            }
        };
        let plan = catalogue::plan_with(&symbols, &self.custom);
        for c in &self.custom {
            if symbols.get(c.entry.name).is_some() {
                self.custom_found.insert(c.entry.name);
            }
        }
        entry.allocator = plan.allocator;
        if let Some(hook) = symbols.get("_dl_debug_state") {
            // The dynamic loader: stop its processes once each set of libraries is mapped.
            let delta = symbols
                .object("_r_debug")
                .map_or(0, |r| r.wrapping_sub(hook.vaddr));
            let link = self.discover.attach_uprobe(
                DL_DEBUG_STATE,
                false,
                -1,
                &path.to_string_lossy(),
                hook.offset,
                delta,
            )?;
            self.links.push(link);
        }
        if let Some(exit) = EXIT_FUNCTIONS
            .iter()
            .find_map(|name| symbols.get(name))
            .filter(|_| self.exit_hold)
        {
            let link = self.discover.attach_uprobe(
                EXIT_HOLD,
                false,
                -1,
                &path.to_string_lossy(),
                exit.offset,
                0,
            )?;
            self.links.push(link);
        }
        if plan.sites.probes() == 0 {
            return Ok(());
        }
        let links = attach::attach(self.alloc, path, &plan.sites, self.classic)?;
        let file = Path::new(&entry.path)
            .file_name()
            .unwrap_or_default()
            .to_string_lossy();
        self.custom_empty.extend(
            plan.sites
                .empty
                .iter()
                .map(|name| crate::binary::custom::empty_warning(name, &file)),
        );
        self.links.extend(links);
        entry.probes = plan.sites.probes() as u32;
        entry.stepped = plan.sites.stepped.clone();
        if !plan.sites.stepped.is_empty() {
            let listed: Vec<String> = plan
                .sites
                .stepped
                .iter()
                .map(|s| format!("{} ({})", s.function, s.instruction))
                .collect();
            log::info!(
                "{}: {} probe site{} single-stepped, about ten times the cost of the others: {}",
                entry.path,
                listed.len(),
                if listed.len() == 1 { "" } else { "s" },
                listed.join(", ")
            );
        }
        log::debug!(
            "{}: {} probes on {}",
            entry.path,
            entry.probes,
            plan.sites.functions.join(", ")
        );
        Ok(())
    }

    /// How long processes stood stopped.
    pub fn stop_stats(&self) -> StopStats {
        self.stats
    }

    /// One line on what was found where, for the end of `record`: each file with an allocator
    /// that a tracked process mapped, and how many mapped files had none.
    pub fn summary(&self) -> String {
        let mut found: Vec<&Probed> = self
            .files
            .values()
            .filter(|p| p.reported && p.allocator != "none")
            .collect();
        found.sort_by(|a, b| a.path.cmp(&b.path));
        let without = self
            .files
            .values()
            .filter(|p| p.reported && p.allocator == "none")
            .count();
        let mut line = String::from("allocators: ");
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        if found.is_empty() {
            line.push_str(&format!(
                "none found in {without} executable file{}",
                plural(without)
            ));
        } else {
            let listed: Vec<String> = found
                .iter()
                .map(|p| {
                    format!(
                        "{} in {} ({} probes)",
                        p.allocator,
                        file_name(&p.path),
                        p.probes
                    )
                })
                .collect();
            line.push_str(&listed.join(", "));
            if without > 0 {
                line.push_str(&format!(
                    "; {without} other executable file{} without one",
                    plural(without)
                ));
            }
        }
        let stepped: Vec<String> = found
            .iter()
            .flat_map(|p| {
                let name = file_name(&p.path);
                p.stepped.iter().map(move |s| s.in_file(&name))
            })
            .collect();
        if !stepped.is_empty() {
            line.push_str(&format!(
                "; {} probe site{} single-stepped ({})",
                stepped.len(),
                plural(stepped.len()),
                stepped.join(", ")
            ));
        }
        line.push_str(&self.stats.summary("discovery stop", "discovery stops"));
        line.push_str(
            &self
                .walker_stats
                .summary("stop for the walker", "stops for the walker"),
        );
        let mut taxing: Vec<&str> = self
            .files
            .values()
            .filter(|p| p.taxes_machine)
            .map(|p| p.path.as_str())
            .collect();
        if !taxing.is_empty() {
            taxing.sort_unstable();
            line.push_str(&format!(
                "; probes on shared files (they slow every process on the machine that uses \
                 them): {}",
                taxing.join(", ")
            ));
        }
        line
    }
}

/// The last component of `path`, for the summary line.
fn file_name(path: &str) -> String {
    Path::new(path)
        .file_name()
        .map_or(path.to_string(), |n| n.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0c8a00000-55d0c8a02000 r--p 00000000 08:01 1234       /usr/bin/cat
55d0c8a02000-55d0c8a07000 r-xp 00002000 08:01 1234       /usr/bin/cat
7f1e2c000000-7f1e2c021000 rw-p 00000000 00:00 0 
7f1e2c400000-7f1e2c555000 r-xp 00028000 fe:1a 99         /usr/lib/libc.so.6
7f1e2c600000-7f1e2c601000 r-xp 00000000 00:05 4242       /memfd:jit (deleted)
7ffd5a7f0000-7ffd5a7f2000 r-xp 00000000 00:00 0          [vdso]
";

    #[test]
    fn keeps_executable_file_mappings_only() {
        let m = exec_mappings(MAPS);
        assert_eq!(m.len(), 3, "{m:?}");
        assert_eq!(m[0].path, "/usr/bin/cat");
        assert_eq!((m[0].start, m[0].end), (0x55d0c8a02000, 0x55d0c8a07000));
        assert_eq!(
            m[0].key,
            FileKey {
                dev: 8 << 20 | 1,
                ino: 1234
            }
        );
        assert_eq!(m[1].key.dev, 0xfe << 20 | 0x1a);
        assert_eq!(m[2].path, "/memfd:jit", "the deleted mark is dropped");
    }

    #[test]
    fn odd_lines_are_skipped_not_fatal() {
        assert!(exec_mappings("garbage\n\n1-2 r-xp 0 zz:01 5 /x\n").is_empty());
    }

    #[test]
    fn file_key_of_a_real_file_matches_its_maps_line() {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let meta = std::fs::metadata(&exe).unwrap();
        let mine = exec_mappings(&maps)
            .into_iter()
            .find(|m| Path::new(&m.path) == exe)
            .expect("the test binary is mapped executable");
        assert_eq!(FileKey::of(&meta), mine.key);
        assert_eq!(
            FileKey { dev: 1, ino: 2 }.bytes()[..9],
            [2, 0, 0, 0, 0, 0, 0, 0, 1]
        );
    }
}
