//! The dynamic loader's cache, /etc/ld.so.cache: which file a soname resolves to on this
//! machine, as `ldconfig -p` lists them. `record` copies the allocator libraries it names
//! (`binary::allocator_libraries`), so it must find them where the loader does.
//!
//! Layout (glibc `sysdeps/generic/dl-cache.h`): optionally the old "ld.so-1.7.0" table, then
//! the new header "glibc-ld.so.cache1.1", `nlibs`, `len_strings`, flags and padding (48 bytes
//! in all), then `nlibs` entries of 24 bytes (`flags: i32, key: u32, value: u32,
//! osversion: u32, hwcap: u64`) whose key (soname) and value (path) are offsets of
//! NUL-terminated strings from the start of the new header.

/// Where glibc keeps the cache.
pub const LD_SO_CACHE: &str = "/etc/ld.so.cache";

const OLD_MAGIC: &[u8] = b"ld.so-1.7.0";
const NEW_MAGIC: &[u8] = b"glibc-ld.so.cache1.1";
const NEW_HEADER_BYTES: usize = 48;
const NEW_ENTRY_BYTES: usize = 24;
const OLD_ENTRY_BYTES: usize = 12;

/// Every (soname, path) of a cache file's bytes; empty for anything else.
pub fn entries(bytes: &[u8]) -> Vec<(String, String)> {
    let Some(start) = new_header(bytes) else {
        return Vec::new();
    };
    let new = &bytes[start..];
    let u32_at = |b: &[u8], at: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
    };
    let Some(nlibs) = u32_at(new, NEW_MAGIC.len()) else {
        return Vec::new();
    };
    let string = |at: u32| -> Option<String> {
        let tail = new.get(at as usize..)?;
        let end = tail.iter().position(|&b| b == 0)?;
        Some(String::from_utf8_lossy(&tail[..end]).into_owned())
    };
    (0..nlibs as usize)
        .map_while(|i| {
            let at = NEW_HEADER_BYTES + i * NEW_ENTRY_BYTES;
            Some((u32_at(new, at + 4)?, u32_at(new, at + 8)?))
        })
        .filter_map(|(key, value)| Some((string(key)?, string(value)?)))
        .collect()
}

/// Where the new-format header starts: at 0, or after the old format's table.
fn new_header(bytes: &[u8]) -> Option<usize> {
    if bytes.starts_with(NEW_MAGIC) {
        return Some(0);
    }
    if !bytes.starts_with(OLD_MAGIC) {
        return None;
    }
    // The old header is the magic padded to 12 bytes and `nlibs`; the new one follows the
    // table, aligned to 8 bytes.
    let nlibs = u32::from_ne_bytes(bytes.get(12..16)?.try_into().ok()?) as usize;
    let end = 16usize.checked_add(nlibs.checked_mul(OLD_ENTRY_BYTES)?)?;
    let start = end.checked_add(7)? & !7;
    bytes.get(start..)?.starts_with(NEW_MAGIC).then_some(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new-format cache of `libs`, as ldconfig writes it.
    fn cache(libs: &[(&str, &str)]) -> Vec<u8> {
        let mut strings = Vec::new();
        let table = NEW_HEADER_BYTES + libs.len() * NEW_ENTRY_BYTES;
        let mut entries = Vec::new();
        for (soname, path) in libs {
            let key = (table + strings.len()) as u32;
            strings.extend_from_slice(soname.as_bytes());
            strings.push(0);
            let value = (table + strings.len()) as u32;
            strings.extend_from_slice(path.as_bytes());
            strings.push(0);
            entries.extend_from_slice(&0x303i32.to_ne_bytes());
            entries.extend_from_slice(&key.to_ne_bytes());
            entries.extend_from_slice(&value.to_ne_bytes());
            entries.extend_from_slice(&[0; 12]);
        }
        let mut out = NEW_MAGIC.to_vec();
        out.extend_from_slice(&(libs.len() as u32).to_ne_bytes());
        out.extend_from_slice(&(strings.len() as u32).to_ne_bytes());
        out.resize(NEW_HEADER_BYTES, 0);
        out.extend(entries);
        out.extend(strings);
        out
    }

    #[test]
    fn reads_what_it_wrote() {
        let libs = [
            ("libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6"),
            ("libjemalloc.so.2", "/usr/lib/libjemalloc.so.2"),
        ];
        let got = entries(&cache(&libs));
        let want: Vec<(String, String)> = libs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn damaged_caches_give_what_they_hold_and_never_panic() {
        let whole = cache(&[
            ("libc.so.6", "/lib/libc.so.6"),
            ("libm.so.6", "/lib/libm.so.6"),
        ]);
        for cut in 0..whole.len() {
            assert!(entries(&whole[..cut]).len() <= 2);
        }
        assert!(entries(b"not a cache").is_empty());
        let mut old = OLD_MAGIC.to_vec();
        old.resize(12, 0);
        old.extend_from_slice(&u32::MAX.to_ne_bytes());
        assert!(entries(&old).is_empty());
    }

    #[test]
    fn the_machines_cache_names_its_libc() {
        let Ok(bytes) = std::fs::read(LD_SO_CACHE) else {
            return;
        };
        assert!(
            entries(&bytes)
                .iter()
                .any(|(soname, _)| soname == "libc.so.6"),
            "no libc.so.6 in {LD_SO_CACHE}"
        );
    }
}
