//! The allocator catalogue: every entry point memtrack knows, in every allocator it knows, and
//! the plan of probes for one ELF file from the symbols it defines.
//!
//! Each entry names a symbol, the label its events carry (`enum alloc_func`) and how it takes
//! its arguments (`enum alloc_layout`), or that it releases a block. The same table serves a
//! shared library, an executable with an allocator linked in statically, and a library loaded
//! with dlopen: `plan` looks up whatever the file defines in `.dynsym` and `.symtab`.
//!
//! Aliases: allocators export one function under several names (tcmalloc's `malloc` is
//! `tc_malloc`, mimalloc's `free` is `mi_free` and `operator delete`). One address gets one probe,
//! or a call would count twice; the first entry of the table that names it gives the label.

use std::collections::HashSet;

use crate::binary::custom::{self, Custom};
use crate::binary::entry::{Entry, Role};
use crate::binary::placement;
use crate::binary::symbols::{ElfSymbols, FuncSymbol};
use crate::binary::{Sites, Stepped};
use crate::sys::raw::{
    alloc_func, alloc_layout, COOKIE_ARGS_SHIFT, COOKIE_ARG_BITS, COOKIE_LAYOUT_SHIFT,
};

use alloc_func::*;
use alloc_layout::*;

const fn alloc(name: &'static str, func: alloc_func, layout: alloc_layout) -> Entry {
    Entry {
        name,
        func,
        role: Role::Alloc(layout),
    }
}

const fn free(name: &'static str, func: alloc_func) -> Entry {
    Entry {
        name,
        func,
        role: Role::Free,
    }
}

/// The C allocator API: glibc, and the replacements jemalloc, mimalloc and tcmalloc export
/// under the same names.
const C_API: &[Entry] = &[
    alloc("malloc", FUNC_MALLOC, LAYOUT_SIZE),
    alloc("calloc", FUNC_CALLOC, LAYOUT_NMEMB_SIZE),
    alloc("realloc", FUNC_REALLOC, LAYOUT_PTR_SIZE),
    alloc("reallocarray", FUNC_REALLOCARRAY, LAYOUT_PTR_NMEMB_SIZE),
    alloc("aligned_alloc", FUNC_ALIGNED_ALLOC, LAYOUT_ALIGN_SIZE),
    alloc("memalign", FUNC_MEMALIGN, LAYOUT_ALIGN_SIZE),
    alloc(
        "posix_memalign",
        FUNC_POSIX_MEMALIGN,
        LAYOUT_MEMPTR_ALIGN_SIZE,
    ),
    alloc("valloc", FUNC_VALLOC, LAYOUT_SIZE),
    alloc("pvalloc", FUNC_PVALLOC, LAYOUT_SIZE),
    alloc("reallocf", FUNC_REALLOC, LAYOUT_PTR_SIZE),
    free("free", FUNC_FREE),
    free("cfree", FUNC_FREE),
];

/// C++ operator new and delete, by their Itanium ABI names (libstdc++, libc++, and the
/// allocators that replace them): plain, array, nothrow, aligned, sized. x86_64 and the other
/// LP64 targets mangle `size_t` as `m`.
const CXX: &[Entry] = &[
    alloc("_Znwm", FUNC_NEW, LAYOUT_SIZE),
    alloc("_ZnwmRKSt9nothrow_t", FUNC_NEW, LAYOUT_SIZE),
    alloc("_ZnwmSt11align_val_t", FUNC_NEW, LAYOUT_SIZE),
    alloc("_ZnwmSt11align_val_tRKSt9nothrow_t", FUNC_NEW, LAYOUT_SIZE),
    alloc("_Znam", FUNC_NEW_ARRAY, LAYOUT_SIZE),
    alloc("_ZnamRKSt9nothrow_t", FUNC_NEW_ARRAY, LAYOUT_SIZE),
    alloc("_ZnamSt11align_val_t", FUNC_NEW_ARRAY, LAYOUT_SIZE),
    alloc(
        "_ZnamSt11align_val_tRKSt9nothrow_t",
        FUNC_NEW_ARRAY,
        LAYOUT_SIZE,
    ),
    free("_ZdlPv", FUNC_DELETE),
    free("_ZdlPvm", FUNC_DELETE),
    free("_ZdlPvRKSt9nothrow_t", FUNC_DELETE),
    free("_ZdlPvSt11align_val_t", FUNC_DELETE),
    free("_ZdlPvmSt11align_val_t", FUNC_DELETE),
    free("_ZdlPvSt11align_val_tRKSt9nothrow_t", FUNC_DELETE),
    free("_ZdaPv", FUNC_DELETE_ARRAY),
    free("_ZdaPvm", FUNC_DELETE_ARRAY),
    free("_ZdaPvRKSt9nothrow_t", FUNC_DELETE_ARRAY),
    free("_ZdaPvSt11align_val_t", FUNC_DELETE_ARRAY),
    free("_ZdaPvmSt11align_val_t", FUNC_DELETE_ARRAY),
    free("_ZdaPvSt11align_val_tRKSt9nothrow_t", FUNC_DELETE_ARRAY),
];

/// jemalloc's own API (its C API is in `C_API`; a build with `--with-jemalloc-prefix=je_`
/// exports both under `je_` names, see `JE_PREFIXED`).
const JEMALLOC: &[Entry] = &[
    alloc("mallocx", FUNC_MALLOCX, LAYOUT_SIZE),
    alloc("rallocx", FUNC_RALLOCX, LAYOUT_PTR_SIZE),
    free("dallocx", FUNC_DALLOCX),
    free("sdallocx", FUNC_DALLOCX),
];

/// jemalloc built with the `je_` prefix.
const JE_PREFIXED: &[Entry] = &[
    alloc("je_malloc", FUNC_MALLOC, LAYOUT_SIZE),
    alloc("je_calloc", FUNC_CALLOC, LAYOUT_NMEMB_SIZE),
    alloc("je_realloc", FUNC_REALLOC, LAYOUT_PTR_SIZE),
    alloc("je_aligned_alloc", FUNC_ALIGNED_ALLOC, LAYOUT_ALIGN_SIZE),
    alloc("je_memalign", FUNC_MEMALIGN, LAYOUT_ALIGN_SIZE),
    alloc(
        "je_posix_memalign",
        FUNC_POSIX_MEMALIGN,
        LAYOUT_MEMPTR_ALIGN_SIZE,
    ),
    alloc("je_valloc", FUNC_VALLOC, LAYOUT_SIZE),
    alloc("je_mallocx", FUNC_MALLOCX, LAYOUT_SIZE),
    alloc("je_rallocx", FUNC_RALLOCX, LAYOUT_PTR_SIZE),
    free("je_free", FUNC_FREE),
    free("je_dallocx", FUNC_DALLOCX),
    free("je_sdallocx", FUNC_DALLOCX),
];

/// jemalloc as the Rust crates `tikv-jemallocator`/`jemallocator` build it: every symbol
/// prefixed with `_rjem_`.
const RJEM_PREFIXED: &[Entry] = &[
    alloc("_rjem_malloc", FUNC_MALLOC, LAYOUT_SIZE),
    alloc("_rjem_calloc", FUNC_CALLOC, LAYOUT_NMEMB_SIZE),
    alloc("_rjem_realloc", FUNC_REALLOC, LAYOUT_PTR_SIZE),
    alloc("_rjem_aligned_alloc", FUNC_ALIGNED_ALLOC, LAYOUT_ALIGN_SIZE),
    alloc(
        "_rjem_posix_memalign",
        FUNC_POSIX_MEMALIGN,
        LAYOUT_MEMPTR_ALIGN_SIZE,
    ),
    alloc("_rjem_mallocx", FUNC_MALLOCX, LAYOUT_SIZE),
    alloc("_rjem_rallocx", FUNC_RALLOCX, LAYOUT_PTR_SIZE),
    free("_rjem_free", FUNC_FREE),
    free("_rjem_dallocx", FUNC_DALLOCX),
    free("_rjem_sdallocx", FUNC_DALLOCX),
];

/// mimalloc's `mi_*` API (the heap-object `mi_heap_*` functions are not probed).
const MIMALLOC: &[Entry] = &[
    alloc("mi_malloc", FUNC_MALLOC, LAYOUT_SIZE),
    alloc("mi_malloc_small", FUNC_MALLOC, LAYOUT_SIZE),
    alloc("mi_zalloc", FUNC_ZALLOC, LAYOUT_SIZE),
    alloc("mi_zalloc_small", FUNC_ZALLOC, LAYOUT_SIZE),
    alloc("mi_calloc", FUNC_CALLOC, LAYOUT_NMEMB_SIZE),
    alloc("mi_mallocn", FUNC_CALLOC, LAYOUT_NMEMB_SIZE),
    alloc("mi_realloc", FUNC_REALLOC, LAYOUT_PTR_SIZE),
    alloc("mi_reallocf", FUNC_REALLOC, LAYOUT_PTR_SIZE),
    alloc("mi_rezalloc", FUNC_REALLOC, LAYOUT_PTR_SIZE),
    alloc("mi_reallocn", FUNC_REALLOCARRAY, LAYOUT_PTR_NMEMB_SIZE),
    alloc("mi_recalloc", FUNC_REALLOCARRAY, LAYOUT_PTR_NMEMB_SIZE),
    alloc("mi_malloc_aligned", FUNC_ALIGNED_ALLOC, LAYOUT_SIZE),
    alloc("mi_malloc_aligned_at", FUNC_ALIGNED_ALLOC, LAYOUT_SIZE),
    alloc("mi_zalloc_aligned", FUNC_ZALLOC, LAYOUT_SIZE),
    alloc("mi_zalloc_aligned_at", FUNC_ZALLOC, LAYOUT_SIZE),
    alloc("mi_calloc_aligned", FUNC_CALLOC, LAYOUT_NMEMB_SIZE),
    alloc("mi_calloc_aligned_at", FUNC_CALLOC, LAYOUT_NMEMB_SIZE),
    alloc("mi_realloc_aligned", FUNC_REALLOC, LAYOUT_PTR_SIZE),
    alloc("mi_realloc_aligned_at", FUNC_REALLOC, LAYOUT_PTR_SIZE),
    alloc("mi_rezalloc_aligned", FUNC_REALLOC, LAYOUT_PTR_SIZE),
    alloc("mi_rezalloc_aligned_at", FUNC_REALLOC, LAYOUT_PTR_SIZE),
    alloc(
        "mi_recalloc_aligned",
        FUNC_REALLOCARRAY,
        LAYOUT_PTR_NMEMB_SIZE,
    ),
    alloc("mi_new", FUNC_NEW, LAYOUT_SIZE),
    alloc("mi_new_aligned", FUNC_NEW, LAYOUT_SIZE),
    alloc("mi_new_nothrow", FUNC_NEW, LAYOUT_SIZE),
    alloc("mi_new_aligned_nothrow", FUNC_NEW, LAYOUT_SIZE),
    alloc("mi_new_n", FUNC_NEW, LAYOUT_NMEMB_SIZE),
    alloc("mi_new_realloc", FUNC_REALLOC, LAYOUT_PTR_SIZE),
    alloc("mi_new_reallocn", FUNC_REALLOCARRAY, LAYOUT_PTR_NMEMB_SIZE),
    free("mi_free", FUNC_FREE),
    free("mi_free_size", FUNC_FREE),
    free("mi_free_aligned", FUNC_FREE),
    free("mi_free_size_aligned", FUNC_FREE),
];

/// gperftools tcmalloc's `tc_*` API (its C and C++ names are aliases of these).
const TCMALLOC: &[Entry] = &[
    alloc("tc_malloc", FUNC_MALLOC, LAYOUT_SIZE),
    alloc("tc_malloc_skip_new_handler", FUNC_MALLOC, LAYOUT_SIZE),
    alloc("tc_calloc", FUNC_CALLOC, LAYOUT_NMEMB_SIZE),
    alloc("tc_realloc", FUNC_REALLOC, LAYOUT_PTR_SIZE),
    alloc("tc_memalign", FUNC_MEMALIGN, LAYOUT_ALIGN_SIZE),
    alloc(
        "tc_posix_memalign",
        FUNC_POSIX_MEMALIGN,
        LAYOUT_MEMPTR_ALIGN_SIZE,
    ),
    alloc("tc_valloc", FUNC_VALLOC, LAYOUT_SIZE),
    alloc("tc_pvalloc", FUNC_PVALLOC, LAYOUT_SIZE),
    alloc("tc_new", FUNC_NEW, LAYOUT_SIZE),
    alloc("tc_new_nothrow", FUNC_NEW, LAYOUT_SIZE),
    alloc("tc_new_aligned", FUNC_NEW, LAYOUT_SIZE),
    alloc("tc_new_aligned_nothrow", FUNC_NEW, LAYOUT_SIZE),
    alloc("tc_newarray", FUNC_NEW_ARRAY, LAYOUT_SIZE),
    alloc("tc_newarray_nothrow", FUNC_NEW_ARRAY, LAYOUT_SIZE),
    alloc("tc_newarray_aligned", FUNC_NEW_ARRAY, LAYOUT_SIZE),
    alloc("tc_newarray_aligned_nothrow", FUNC_NEW_ARRAY, LAYOUT_SIZE),
    free("tc_free", FUNC_FREE),
    free("tc_cfree", FUNC_FREE),
    free("tc_free_sized", FUNC_FREE),
    free("tc_delete", FUNC_DELETE),
    free("tc_delete_sized", FUNC_DELETE),
    free("tc_delete_nothrow", FUNC_DELETE),
    free("tc_delete_aligned", FUNC_DELETE),
    free("tc_delete_sized_aligned", FUNC_DELETE),
    free("tc_delete_aligned_nothrow", FUNC_DELETE),
    free("tc_deletearray", FUNC_DELETE_ARRAY),
    free("tc_deletearray_sized", FUNC_DELETE_ARRAY),
    free("tc_deletearray_nothrow", FUNC_DELETE_ARRAY),
    free("tc_deletearray_aligned", FUNC_DELETE_ARRAY),
    free("tc_deletearray_sized_aligned", FUNC_DELETE_ARRAY),
    free("tc_deletearray_aligned_nothrow", FUNC_DELETE_ARRAY),
];

/// The whole catalogue, in label-preference order.
const TABLES: [&[Entry]; 7] = [
    C_API,
    CXX,
    JEMALLOC,
    JE_PREFIXED,
    RJEM_PREFIXED,
    MIMALLOC,
    TCMALLOC,
];

/// Allocator families and the symbols that identify each, in the order a coverage record
/// names them. A statically linked copy keeps only what its program uses (a Rust program with
/// mimalloc as its global allocator has mi_free but no mi_malloc), hence several marks each.
/// When none is found: "glibc" (which the others also imitate by defining
/// `__libc_malloc`), "malloc" for a C allocator nothing else explains (musl, a custom one),
/// "c++" for operator new without an allocator of its own (libstdc++, libc++).
const FAMILIES: [(&str, &[&str]); 3] = [
    (
        "jemalloc",
        &[
            "mallocx",
            "sdallocx",
            "je_malloc",
            "je_free",
            "_rjem_malloc",
            "_rjem_free",
            "_rjem_sdallocx",
        ],
    ),
    ("mimalloc", &["mi_malloc", "mi_free"]),
    ("tcmalloc", &["tc_malloc", "tc_free"]),
];

/// musl's C library, which defines `__libc_malloc` as glibc does (so it was called glibc), and
/// its allocator, by the symbols only musl has. A static program keeps musl's internal
/// symbols: mallocng's `__malloc_alloc_meta` (musl 1.2.1 on) or oldmalloc's `__bin_chunk`. The
/// shared libc.so (also the dynamic loader) exports none of them, but its loader's `__dls3`;
/// there `reallocarray` (musl 1.2.2 on, whose allocator is mallocng unless built with
/// `--with-malloc=oldmalloc`) tells the allocator, else it is only "musl".
const MUSL: [(&str, &str); 3] = [
    ("musl (mallocng)", "__malloc_alloc_meta"),
    ("musl (oldmalloc)", "__bin_chunk"),
    ("musl", "__init_libc"),
];

/// The loader stage only musl's libc.so exports (ldso/dynlink.c).
const MUSL_SHARED: &str = "__dls3";

/// Whether `name` is a symbol the catalogue looks at: an entry point, a family's mark, or the
/// dynamic loader's hook and `_r_debug` (for `ElfSymbols::read_only`).
pub fn wants(name: &str) -> bool {
    static NAMES: std::sync::OnceLock<HashSet<&'static str>> = std::sync::OnceLock::new();
    let names = NAMES.get_or_init(|| {
        let mut names: HashSet<&'static str> = TABLES
            .iter()
            .flat_map(|t| t.iter().map(|e| e.name))
            .collect();
        names.extend(FAMILIES.iter().flat_map(|(_, marks)| marks.iter().copied()));
        names.extend(["__libc_malloc", "_dl_debug_state", "_r_debug"]);
        names.extend(MUSL.iter().map(|(_, mark)| *mark));
        names.extend([MUSL_SHARED, "reallocarray"]);
        names
    });
    names.contains(name)
}

/// What one file gets probed with.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// The allocator families found, e.g. "glibc", "jemalloc+c++"; "none" when nothing was.
    pub allocator: String,
    /// Where the probes go.
    pub sites: Sites,
}

/// The cookie of an allocating site: its label and its argument layout.
pub fn cookie(func: alloc_func, layout: alloc_layout) -> u64 {
    func as u64 | (layout as u64) << COOKIE_LAYOUT_SHIFT
}

/// Plan the probes of the file whose symbols are `symbols`.
///
/// Operator new gets a return probe only in an allocator that implements it itself (jemalloc,
/// mimalloc, tcmalloc). Elsewhere it calls malloc, which reports the block under new's label:
/// a return probe on a function that throws would turn the exception into std::terminate
/// (bpf/alloc.bpf.c, "Labels"). Those allocators' own new then still cannot throw through the
/// probe: a program catching their bad_alloc terminates instead, at out-of-memory only.
pub fn plan(symbols: &ElfSymbols) -> Plan {
    plan_with(symbols, &[])
}

/// As [`plan`], with the allocators named with `record --allocator` (`custom`) as well: each
/// that the file defines is probed, and its family joins the file's.
pub fn plan_with(symbols: &ElfSymbols, custom: &[Custom]) -> Plan {
    let mut sites = Sites::default();
    let mut seen = HashSet::new();
    let mut allocator = families(symbols);
    let own_new = FAMILIES.iter().any(|(name, _)| allocator.contains(name));
    for entry in TABLES.iter().flat_map(|t| t.iter()) {
        let Some(sym) = symbols.get(entry.name) else {
            continue;
        };
        if !seen.insert(sym.offset) {
            log::trace!("{} shares its address with another entry point", entry.name);
            continue;
        }
        if let Some(to) = forwarded_release(symbols, sym, entry) {
            log::debug!("{} only jumps to {to}, whose probe reports it", entry.name);
            sites.forwarded.push(entry.name);
            continue;
        }
        let is_cxx_new = CXX.iter().any(|e| e.name == entry.name);
        let role = match entry.role {
            Role::Alloc(_) if is_cxx_new && !own_new => Role::Label,
            role => role,
        };
        add_site(&mut sites, symbols, sym, entry, role, None);
    }
    let mut custom_families: Vec<&str> = Vec::new();
    for c in custom {
        let Some(sym) = symbols.get(c.entry.name) else {
            continue;
        };
        if !seen.insert(sym.offset) {
            log::debug!(
                "{}: {} shares its address with an entry point probed already",
                c.flag,
                c.entry.name
            );
            continue;
        }
        add_site(&mut sites, symbols, sym, &c.entry, c.entry.role, Some(c));
        if !custom_families.contains(&c.family) {
            custom_families.push(c.family);
        }
    }
    if !custom_families.is_empty() {
        let mut parts: Vec<&str> = Vec::new();
        if allocator != "none" {
            parts.push(&allocator);
        }
        parts.extend(custom_families);
        allocator = parts.join("+");
    }
    Plan { allocator, sites }
}

/// Place and add the site of `entry` (defined at `sym`) in `role`; `custom` when it is a
/// `--allocator` function, whose arguments may be at other positions than the layout's.
fn add_site(
    sites: &mut Sites,
    symbols: &ElfSymbols,
    sym: FuncSymbol,
    entry: &Entry,
    role: Role,
    custom: Option<&Custom>,
) {
    let mut needs = needs(role);
    if let Some(c) = custom {
        needs.args = c.positions[..custom::arity(c)]
            .iter()
            .map(|&p| p as usize)
            .max()
            .unwrap_or(1);
    }
    let (code, complete) = symbols.code(sym);
    if custom.is_some() && placement::only_returns(code, sym.vaddr) {
        sites.empty.push(entry.name);
    }
    let placed = placement::place(code, sym.vaddr, complete, needs);
    let site = sym.offset + placed.skip;
    log::debug!(
        "site {}+{}: {}{}",
        entry.name,
        placed.skip,
        placed.instruction(),
        if placed.emulated {
            ""
        } else {
            ", single-stepped"
        }
    );
    if !placed.emulated {
        sites.stepped.push(Stepped {
            function: entry.name,
            instruction: placed.instruction(),
        });
    }
    let args = match custom {
        None => placed.cookie_bits(),
        // Each argument the layout reads, from the register that holds the one the spec names.
        Some(c) => c.positions[..custom::arity(c)]
            .iter()
            .enumerate()
            .fold(0, |bits, (i, &p)| {
                bits | (placed.registers[p as usize - 1] as u64)
                    << (COOKIE_ARGS_SHIFT as u64 + i as u64 * COOKIE_ARG_BITS as u64)
            }),
    };
    match role {
        Role::Label => sites
            .enter
            .push((site, cookie(entry.func, LAYOUT_LABEL) | args)),
        Role::Alloc(layout) => {
            let cookie = cookie(entry.func, layout) | args;
            sites.enter.push((site, cookie));
            sites.exit.push((site, cookie));
        }
        Role::Free => sites.free.push((site, entry.func as u64 | args)),
    }
    sites.functions.push(entry.name);
}

/// The release function `sym` (the entry point `entry`) only jumps to, when that one is a
/// release of the same label: libstdc++'s sized `operator delete` jumps to the unsized one, which
/// is probed wherever it is defined and reports the same block under the same label, with the
/// caller's arguments and stack. A probe on the forwarder would add a trap and nothing else.
/// Allocating entry points keep theirs: their labels differ (new[] jumps to new).
fn forwarded_release(symbols: &ElfSymbols, sym: FuncSymbol, entry: &Entry) -> Option<&'static str> {
    if entry.role != Role::Free {
        return None;
    }
    let to = symbols.forwards_to(sym)?;
    TABLES
        .iter()
        .flat_map(|t| t.iter())
        .find(|e| {
            e.name == to && e.role == Role::Free && e.func == entry.func && e.name != entry.name
        })
        .map(|e| e.name)
}

/// What the BPF program at the site of an entry point in `role` relies on (`alloc_enter`,
/// `alloc_exit` and `free_enter` of bpf/alloc.bpf.c): the integer arguments it reads, and the
/// entry's stack pointer, which a label alone does not need (`label_enter` only compares
/// deeper calls with it).
fn needs(role: Role) -> placement::Needs {
    let args = match role {
        Role::Label | Role::Free | Role::Alloc(LAYOUT_SIZE) => 1,
        Role::Alloc(LAYOUT_PTR_NMEMB_SIZE | LAYOUT_MEMPTR_ALIGN_SIZE) => 3,
        Role::Alloc(_) => 2,
    };
    placement::Needs {
        args,
        entry_sp: role != Role::Label,
    }
}

/// The allocator families `symbols` defines, joined by `+`, or "none".
fn families(symbols: &ElfSymbols) -> String {
    let found: Vec<&str> = FAMILIES
        .iter()
        .filter(|(_, marks)| marks.iter().any(|m| symbols.get(m).is_some()))
        .map(|(name, _)| *name)
        .collect();
    if !found.is_empty() {
        return found.join("+");
    }
    if let Some(musl) = musl(symbols) {
        return musl.to_string();
    }
    let fallback = [
        ("glibc", "__libc_malloc"),
        ("malloc", "malloc"),
        ("c++", "_Znwm"),
    ];
    fallback
        .iter()
        .find(|(_, mark)| symbols.get(mark).is_some())
        .map_or("none", |(name, _)| name)
        .to_string()
}

/// The musl family `symbols` is, if it is musl's C library or a program linked with it
/// statically (`MUSL`).
fn musl(symbols: &ElfSymbols) -> Option<&'static str> {
    if let Some((name, _)) = MUSL.iter().find(|(_, mark)| symbols.get(mark).is_some()) {
        return Some(name);
    }
    symbols.get(MUSL_SHARED).map(|_| {
        if symbols.get("reallocarray").is_some() {
            "musl (mallocng)"
        } else {
            "musl"
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn plan_of(path: &str) -> Option<Plan> {
        let path = Path::new(path);
        if !path.exists() {
            eprintln!("skipped: {} is not installed", path.display());
            return None;
        }
        Some(plan(&ElfSymbols::read(path).unwrap()))
    }

    fn offsets_unique(plan: &Plan) -> bool {
        let mut all: Vec<u64> = plan.sites.enter.iter().map(|s| s.0).collect();
        all.extend(plan.sites.free.iter().map(|s| s.0));
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        all.len() == n
    }

    #[test]
    fn every_name_is_listed_once() {
        let mut names = HashSet::new();
        for e in TABLES.iter().flat_map(|t| t.iter()) {
            assert!(names.insert(e.name), "{} listed twice", e.name);
        }
    }

    #[test]
    fn cookie_keeps_label_and_layout_apart() {
        let c = cookie(FUNC_ZALLOC, LAYOUT_PTR_NMEMB_SIZE);
        assert_eq!(c & 0xffff, FUNC_ZALLOC as u64);
        assert_eq!(c >> COOKIE_LAYOUT_SHIFT, LAYOUT_PTR_NMEMB_SIZE as u64);
    }

    #[test]
    fn glibc_is_found_and_probed_once_per_address() {
        let Some(libc) = crate::binary::find_libc() else {
            eprintln!("skipped: no glibc at the usual paths");
            return;
        };
        let plan = plan(&ElfSymbols::read(&libc).unwrap());
        assert_eq!(plan.allocator, "glibc");
        assert!(offsets_unique(&plan));
        assert!(plan.sites.functions.contains(&"malloc"));
        assert_eq!(plan.sites.free.len(), 1, "free (cfree is an alias)");
    }

    #[test]
    fn libstdcxx_is_operator_new_and_delete() {
        let Some(plan) = plan_of("/usr/lib/x86_64-linux-gnu/libstdc++.so.6") else {
            return;
        };
        assert_eq!(plan.allocator, "c++");
        // new only labels the malloc it calls: no return probe to break exceptions.
        assert_eq!(plan.sites.enter.len(), 8, "{:?}", plan.sites.functions);
        assert!(plan.sites.exit.is_empty());
        assert!(plan
            .sites
            .enter
            .iter()
            .all(|s| (s.1 >> COOKIE_LAYOUT_SHIFT) & 0xff == LAYOUT_LABEL as u64));
        // Six of the twelve deletes only jump to another of the same label (issue 12): the
        // sized and nothrow forms to the plain ones, which report their blocks.
        assert_eq!(plan.sites.free.len(), 6, "{:?}", plan.sites.functions);
        let mut forwarded = plan.sites.forwarded.clone();
        forwarded.sort_unstable();
        assert_eq!(
            forwarded,
            [
                "_ZdaPvRKSt9nothrow_t",
                "_ZdaPvSt11align_val_tRKSt9nothrow_t",
                "_ZdaPvm",
                "_ZdlPvRKSt9nothrow_t",
                "_ZdlPvSt11align_val_tRKSt9nothrow_t",
                "_ZdlPvm",
            ]
        );
    }

    #[test]
    fn tcmalloc_aliases_get_one_probe_each() {
        let Some(plan) = plan_of("/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4") else {
            return;
        };
        assert_eq!(plan.allocator, "tcmalloc");
        assert!(offsets_unique(&plan));
        // free, tc_free, tc_delete, operator delete and delete[] are one function.
        assert!(plan.sites.functions.contains(&"free"));
        assert!(!plan.sites.functions.contains(&"tc_free"));
    }

    #[test]
    fn jemalloc_and_mimalloc_are_named() {
        if let Some(plan) = plan_of("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2") {
            assert_eq!(plan.allocator, "jemalloc");
            assert!(plan.sites.functions.contains(&"mallocx"));
            assert!(plan.sites.functions.contains(&"sdallocx"));
            assert!(offsets_unique(&plan));
        }
        if let Some(plan) = plan_of("/usr/lib/x86_64-linux-gnu/libmimalloc.so.2") {
            assert_eq!(plan.allocator, "mimalloc");
            assert!(plan.sites.functions.contains(&"mi_zalloc"));
            assert!(offsets_unique(&plan));
        }
    }

    /// The `--python-objects` preset in Debian's python3, which defines the functions in its
    /// executable: each of the eight probed, family "python" beside no C allocator; and a
    /// custom spec reads its argument from the register of the position it names.
    #[test]
    fn python_preset_is_planned_in_python3() {
        let Ok(python) = std::fs::canonicalize("/usr/bin/python3") else {
            eprintln!("skipped: no /usr/bin/python3");
            return;
        };
        let symbols = ElfSymbols::read(&python).unwrap();
        let plan = plan_with(&symbols, &custom::python());
        assert_eq!(plan.allocator, "python");
        assert_eq!(plan.sites.functions.len(), 8, "{:?}", plan.sites.functions);
        assert_eq!(plan.sites.probes(), 6 * 2 + 2);
        assert!(plan
            .sites
            .enter
            .iter()
            .all(|s| s.1 & 0xffff >= alloc_func::FUNC_CUSTOM_ALLOC as u64));

        // PyMem_Realloc(ptr, size) named as if its size were at position 1 and its pointer at 2:
        // the layout's first slot (the pointer) then reads rsi, its second rdi, wherever the
        // prologue left them.
        let swapped = custom::parse("PyMem_Realloc=realloc(ptr=arg2,size=arg1)").unwrap();
        let plan = plan_with(&symbols, &[swapped]);
        let (_, cookie) = plan.sites.enter[0];
        let slot = |i: u64| (cookie >> (COOKIE_ARGS_SHIFT as u64 + i * 4)) & 0xf;
        assert_ne!(slot(0), 0, "always an explicit register");
        assert_ne!(slot(0), slot(1));
        let straight = custom::parse("PyMem_Realloc=realloc(ptr=arg1,size=arg2)").unwrap();
        let plan = plan_with(&symbols, &[straight]);
        let (_, c2) = plan.sites.enter[0];
        let slot2 = |i: u64| (c2 >> (COOKIE_ARGS_SHIFT as u64 + i * 4)) & 0xf;
        assert_eq!((slot(0), slot(1)), (slot2(1), slot2(0)));
    }

    /// Every site of the allocator libraries installed here reaches an instruction the kernel
    /// emulates (issue 12), but glibc's reallocarray: it starts `mov %rsi,%rax; mul %rdx`, and
    /// `mul` writes rdx, its third argument, before any emulated instruction.
    #[test]
    fn installed_allocators_single_step_nowhere() {
        let libraries = [
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
            "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
            "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
            "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2",
            "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
            "/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4",
        ];
        for lib in libraries {
            let Some(plan) = plan_of(lib) else {
                continue;
            };
            assert!(plan.sites.probes() > 0, "{lib}: no probes");
            let stepped: Vec<&str> = plan.sites.stepped.iter().map(|s| s.function).collect();
            let expected: &[&str] = if lib.ends_with("/libc.so.6") {
                &["reallocarray"]
            } else {
                &[]
            };
            assert_eq!(stepped, expected, "{lib}: {:?}", plan.sites.stepped);
        }
    }
}
