//! What `record` does with the rmap hooks preflight chose (`preflight::rmap_hooks`): the line
//! a recording without them says, and the file paths of the regions their events name.

use crate::format::RmapRegion;

/// Put the path of `region`'s file in place of the name the kernel sent (its dentry's, all a
/// BPF program can read there), from `/proc/PID/map_files` while process `pid` still maps it.
/// The name stays where the link cannot be read (the process has exited or unmapped it) or
/// names another file (the range was mapped again since).
pub fn complete_path(pid: u32, region: &mut RmapRegion) {
    if region.what != "file" && region.what != "shmem" {
        return;
    }
    let link = format!("/proc/{pid}/map_files/{:x}-{:x}", region.start, region.end);
    let Ok(path) = std::fs::read_link(link) else {
        return;
    };
    let path = path.to_string_lossy();
    let last = path.trim_end_matches(" (deleted)").rsplit('/').next();
    if last == Some(region.name.as_str()) {
        region.name = path.into_owned();
    }
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
