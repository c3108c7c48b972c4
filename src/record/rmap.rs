//! What `record` does with the rmap hooks preflight chose (`preflight::rmap_hooks`): the line
//! a recording without them says, and the file paths of the regions their events name.

use crate::format::RmapRegion;

/// Put the path of `region`'s file in place of the name the kernel sent (its dentry's, all a
/// BPF program can read there), from `/proc/PID/map_files` while process `pid` still maps it.
/// The name stays where the link cannot be read (the process has exited or unmapped it) or
/// names another file (the range was mapped again since). A file deleted since it was mapped
/// keeps its path, without the kernel's " (deleted)" mark: the drain reads the link when it
/// gets to the event, so the mark said when that was, not what was mapped (tests/rmap.rs's
/// fixture unlinks its file before it exits, and its region read "... (deleted)" in one run).
pub fn complete_path(pid: u32, region: &mut RmapRegion) {
    if region.what != "file" && region.what != "shmem" {
        return;
    }
    let link = format!("/proc/{pid}/map_files/{:x}-{:x}", region.start, region.end);
    let Ok(path) = std::fs::read_link(link) else {
        return;
    };
    let path = path.to_string_lossy();
    let path = without_deleted_mark(&path);
    if path.rsplit('/').next() == Some(region.name.as_str()) {
        region.name = path.to_string();
    }
}

/// `path` as `/proc/PID/map_files` shows it, without the " (deleted)" the kernel appends to a
/// file unlinked since.
fn without_deleted_mark(path: &str) -> &str {
    path.strip_suffix(" (deleted)").unwrap_or(path)
}

/// The one line a recording without rmap hooks says, with why.
pub fn unavailable_line(why: &str) -> String {
    format!(
        "rmap hooks unavailable ({why}); resident memory from rss_stat alone (rmap needs fentry, \
         Linux 5.5, allowed by the kernel, and the rmap functions of Linux 6.1 or 6.8+)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deleted_file_keeps_its_path() {
        assert_eq!(without_deleted_mark("/tmp/x.data (deleted)"), "/tmp/x.data");
        assert_eq!(without_deleted_mark("/tmp/x.data"), "/tmp/x.data");
        // Only the kernel's one mark, at the end.
        assert_eq!(
            without_deleted_mark("/tmp/a (deleted) (deleted)"),
            "/tmp/a (deleted)"
        );
    }

    #[test]
    fn a_mapped_file_gets_its_path_while_mapped() {
        // This test's own executable is mapped by this process: its first mapping's range.
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let line = maps
            .lines()
            .find(|l| l.ends_with(exe.to_str().unwrap()))
            .expect("the executable is mapped");
        let (start, end) = line.split_once(' ').unwrap().0.split_once('-').unwrap();
        let region = |name: &str| RmapRegion {
            start: u64::from_str_radix(start, 16).unwrap(),
            end: u64::from_str_radix(end, 16).unwrap(),
            what: "file".into(),
            name: name.into(),
        };
        let name = exe.file_name().unwrap().to_str().unwrap();
        let mut found = region(name);
        complete_path(std::process::id(), &mut found);
        // Reading map_files takes CAP_SYS_ADMIN; without it the name stays.
        let readable = std::fs::read_link(format!("/proc/self/map_files/{start}-{end}")).is_ok();
        let want = if readable {
            exe.to_str().unwrap()
        } else {
            name
        };
        assert_eq!(found.name, want);
        // Another file's name, or a range nothing maps: the name stays.
        let mut other = region("another-file");
        complete_path(std::process::id(), &mut other);
        assert_eq!(other.name, "another-file");
        let mut gone = RmapRegion {
            start: 4096,
            end: 8192,
            ..region(name)
        };
        complete_path(std::process::id(), &mut gone);
        assert_eq!(gone.name, name);
    }
}
