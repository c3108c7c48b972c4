//! Which programs of `bpf/rmap.bpf.c` this kernel gets: the kernel's rmap functions changed
//! names and arguments between releases, so the running kernel's BTF is read and one
//! generation of programs is chosen ([`choose`]), by preflight's `fentry` check; `record`
//! loads those (`record::load` sets the others' autoload off). Where none fits, or fentry is
//! refused, the recording says so once and resident memory comes from rss_stat alone.

use crate::sys::probe::VmlinuxBtf;

/// One program of rmap.bpf.c and the kernel function its section attaches to.
#[derive(Debug, PartialEq, Eq)]
pub struct Hook {
    /// The program's name in rmap.bpf.c.
    pub program: &'static str,
    /// The kernel function (its `SEC("fentry/...")`).
    pub function: &'static str,
    /// Whether the generation is whole without it (PMD mappings: kernels built without
    /// transparent huge pages lack those functions, and then nothing is mapped by a PMD).
    pub optional: bool,
}

/// A set of rmap functions one range of kernels has.
pub struct Generation {
    /// The kernels it was read from, for messages.
    pub kernels: &'static str,
    pub hooks: &'static [Hook],
}

const fn hook(program: &'static str, function: &'static str, optional: bool) -> Hook {
    Hook {
        program,
        function,
        optional,
    }
}

/// Every generation, newest first. Kernels 6.2 to 6.7 mixed the two (folio_add_new_anon_rmap
/// next to page_add_file_rmap, then folio_add_file_rmap_range): neither set is whole there, so
/// they get no rmap hooks rather than a count that misses file pages.
pub const GENERATIONS: &[Generation] = &[
    Generation {
        kernels: "6.8 and later (folio_*_rmap_ptes/_pmd)",
        hooks: &[
            hook("rmap_new_anon", "folio_add_new_anon_rmap", false),
            hook("rmap_anon_ptes", "folio_add_anon_rmap_ptes", false),
            hook("rmap_anon_pmd", "folio_add_anon_rmap_pmd", true),
            hook("rmap_file_ptes", "folio_add_file_rmap_ptes", false),
            hook("rmap_file_pmd", "folio_add_file_rmap_pmd", true),
            hook("rmap_remove_ptes", "folio_remove_rmap_ptes", false),
            hook("rmap_remove_pmd", "folio_remove_rmap_pmd", true),
        ],
    },
    Generation {
        kernels: "6.1 (page_*_rmap)",
        hooks: &[
            hook("rmap_page_new_anon", "page_add_new_anon_rmap", false),
            hook("rmap_page_anon", "page_add_anon_rmap", false),
            hook("rmap_page_file", "page_add_file_rmap", false),
            hook("rmap_page_remove", "page_remove_rmap", false),
        ],
    },
];

/// Every program of rmap.bpf.c, in every generation.
pub fn all_programs() -> impl Iterator<Item = &'static str> {
    GENERATIONS
        .iter()
        .flat_map(|g| g.hooks.iter().map(|h| h.program))
}

/// The programs to load on a kernel whose BTF has the functions `has` says, or why none fit.
pub fn choose(has: impl Fn(&str) -> bool) -> Result<Vec<&'static Hook>, String> {
    for generation in GENERATIONS {
        if generation
            .hooks
            .iter()
            .all(|h| h.optional || has(h.function))
        {
            return Ok(generation
                .hooks
                .iter()
                .filter(|h| has(h.function))
                .collect());
        }
    }
    Err(
        "the kernel's BTF has neither set of rmap functions memtrack hooks (folio_*_rmap_ptes, \
         Linux 6.8 on; page_*_rmap, 6.1)"
            .into(),
    )
}

/// The kernels of the generation `hook` belongs to, for messages.
pub fn kernels_of(hook: &Hook) -> &'static str {
    GENERATIONS
        .iter()
        .find(|g| g.hooks.iter().any(|h| h.program == hook.program))
        .map_or("?", |g| g.kernels)
}

/// [`choose`] on the kernel's BTF `btf`, every generation's functions looked up in one pass.
pub fn choose_in(btf: &VmlinuxBtf) -> Result<Vec<&'static Hook>, String> {
    let functions: Vec<&str> = (GENERATIONS.iter())
        .flat_map(|g| g.hooks.iter().map(|h| h.function))
        .collect();
    btf.look_up(&functions, libbpf_sys::BTF_KIND_FUNC);
    choose(|f| btf.has(f, libbpf_sys::BTF_KIND_FUNC))
}

/// [`choose`] on the running kernel's BTF.
pub fn choose_here() -> Result<Vec<&'static Hook>, String> {
    let btf = VmlinuxBtf::load().map_err(|e| format!("cannot read the kernel's BTF: {e}"))?;
    choose_in(&btf)
}

/// Whether this kernel's rss counters lag the pages its rmap functions see: before 6.2 (the
/// atomic `struct mm_rss_stat`, no per-CPU counters) a task batches its own faults in
/// `task->rss_stat` and adds them to the mm every 64 (TASK_RSS_EVENTS_THRESH), so what exec
/// set up shows in rss_stat only at the next flush, and the rmap accounting's inherited
/// baseline, read at the image's first rmap event, misses up to that many pages.
pub fn rss_counters_lag() -> bool {
    VmlinuxBtf::load().is_ok_and(|btf| {
        btf.member_kind("mm_struct", "rss_stat") != Some(libbpf_sys::BTF_KIND_ARRAY)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINUX_6_12: &[&str] = &[
        "folio_add_new_anon_rmap",
        "folio_add_anon_rmap_ptes",
        "folio_add_anon_rmap_pmd",
        "folio_add_file_rmap_ptes",
        "folio_add_file_rmap_pmd",
        "folio_remove_rmap_ptes",
        "folio_remove_rmap_pmd",
        "folio_add_file_rmap_pud",
    ];

    #[test]
    fn each_kernel_gets_its_own_generation() {
        let names = |hooks: Vec<&Hook>| hooks.iter().map(|h| h.program).collect::<Vec<_>>();
        let new = choose(|f| LINUX_6_12.contains(&f)).unwrap();
        assert_eq!(names(new).len(), 7);
        let old = [
            "page_add_new_anon_rmap",
            "page_add_anon_rmap",
            "page_add_file_rmap",
            "page_remove_rmap",
            "page_move_anon_rmap",
        ];
        let got = choose(|f| old.contains(&f)).unwrap();
        assert_eq!(
            names(got),
            [
                "rmap_page_new_anon",
                "rmap_page_anon",
                "rmap_page_file",
                "rmap_page_remove"
            ]
        );
    }

    #[test]
    fn no_thp_leaves_the_pmd_hooks_out_and_a_mixed_kernel_gets_none() {
        let no_pmd = |f: &str| LINUX_6_12.contains(&f) && !f.ends_with("_pmd");
        let got = choose(no_pmd).unwrap();
        assert!(got.iter().all(|h| !h.function.ends_with("_pmd")));
        assert_eq!(got.len(), 4);
        // 6.5: folio_add_new_anon_rmap with page_add_file_rmap and page_remove_rmap.
        let mixed = [
            "folio_add_new_anon_rmap",
            "page_add_anon_rmap",
            "page_add_file_rmap",
            "folio_add_file_rmap_range",
            "page_remove_rmap",
        ];
        let why = choose(|f| mixed.contains(&f)).err().unwrap();
        assert!(why.contains("neither set"), "{why}");
    }

    #[test]
    fn every_program_is_named_once() {
        let mut all: Vec<_> = all_programs().collect();
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n);
    }
}
