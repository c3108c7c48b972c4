//! Allocators memtrack does not know: the functions a user names with `record --allocator`, and
//! the `--python-objects` preset for CPython's object allocator.
//!
//! A spec names one function, what it does, and which argument holds what:
//!
//! ```text
//! [FAMILY:]SYMBOL=alloc(size=argN)
//! [FAMILY:]SYMBOL=calloc(n=argN,size=argM)
//! [FAMILY:]SYMBOL=realloc(ptr=argN,size=argM)
//! [FAMILY:]SYMBOL=free(ptr=argN)
//! ```
//!
//! N and M are argument positions 1 to 6 (the integer registers of the x86_64 ABI). FAMILY is the
//! name the coverage line, the report and JSON give the files that define the symbol; without
//! it, the symbol's own name. `pool:pool_alloc=alloc(size=arg1)` and `pool:pool_free=free(ptr=arg1)`
//! make one family "pool" of two functions.
//!
//! The functions are probed like the catalogue's (`catalogue::plan`), in every file of the tree
//! that defines the symbol, and nested calls count once at the outermost: a pool_alloc that
//! calls malloc for a new slab reports one allocation, pool_alloc's.

use crate::binary::entry::{Entry, Role};
use crate::sys::raw::{alloc_func, alloc_layout};

/// One function to probe as an allocator.
#[derive(Clone, Copy, Debug)]
pub struct Custom {
    /// Where it came from, for messages: "--allocator pool_alloc", "--python-objects".
    pub flag: &'static str,
    /// The family its files are reported under.
    pub family: &'static str,
    /// The symbol, its label and how it is probed.
    pub entry: Entry,
    /// The argument positions (1-based) of what the layout reads first, second and third.
    pub positions: [u8; 3],
}

/// The `--python-objects` preset: CPython's object and memory domains, which pymalloc serves from
/// its own arenas (and which fall back to malloc for blocks above 512 bytes, nested once).
pub const PYTHON: &[(&str, &str)] = &[
    ("PyObject_Malloc", "alloc(size=arg1)"),
    ("PyObject_Calloc", "calloc(n=arg1,size=arg2)"),
    ("PyObject_Realloc", "realloc(ptr=arg1,size=arg2)"),
    ("PyObject_Free", "free(ptr=arg1)"),
    ("PyMem_Malloc", "alloc(size=arg1)"),
    ("PyMem_Calloc", "calloc(n=arg1,size=arg2)"),
    ("PyMem_Realloc", "realloc(ptr=arg1,size=arg2)"),
    ("PyMem_Free", "free(ptr=arg1)"),
];

/// The entries of the `--python-objects` preset, family "python".
pub fn python() -> Vec<Custom> {
    PYTHON
        .iter()
        .map(|(symbol, what)| {
            parse(&format!("python:{symbol}={what}"))
                .map(|mut c| {
                    c.flag = "--python-objects";
                    c
                })
                .expect("the preset's specs parse")
        })
        .collect()
}

/// Parse one `--allocator` spec; the error says what is wrong and the form it takes.
pub fn parse(spec: &str) -> Result<Custom, String> {
    let form = "give [FAMILY:]SYMBOL=alloc(size=argN), calloc(n=argN,size=argM), \
                realloc(ptr=argN,size=argM) or free(ptr=argN), N and M from 1 to 6, e.g. \
                'pool_alloc=alloc(size=arg1)'";
    let bad = |why: &str| format!("--allocator '{spec}': {why}; {form}");
    let (name, what) = spec
        .split_once('=')
        .ok_or_else(|| bad("no '=' between the symbol and what it does"))?;
    let (family, symbol) = match name.split_once(':') {
        Some((f, s)) => (f.trim(), s.trim()),
        None => (name.trim(), name.trim()),
    };
    let ident = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '$')
    };
    if !ident(symbol) {
        return Err(bad(&format!("'{symbol}' is not a symbol name")));
    }
    if !ident(family) {
        return Err(bad(&format!("'{family}' is not a family name")));
    }
    let what = what.trim();
    let (kind, args) = what
        .strip_suffix(')')
        .and_then(|w| w.split_once('('))
        .ok_or_else(|| bad(&format!("'{what}' is not KIND(ARGS)")))?;
    let params: &[&str] = match kind.trim() {
        "alloc" => &["size"],
        "calloc" => &["n", "size"],
        "realloc" => &["ptr", "size"],
        "free" => &["ptr"],
        other => {
            return Err(bad(&format!(
                "'{other}' is not alloc, calloc, realloc or free"
            )))
        }
    };
    let mut positions = [1u8, 2, 3];
    let given: Vec<&str> = args.split(',').map(str::trim).collect();
    if given.len() != params.len() {
        return Err(bad(&format!(
            "{} takes {}",
            kind.trim(),
            params
                .iter()
                .map(|p| format!("{p}=argN"))
                .collect::<Vec<_>>()
                .join(",")
        )));
    }
    for (i, (param, arg)) in params.iter().zip(&given).enumerate() {
        let (p, pos) = arg
            .split_once('=')
            .ok_or_else(|| bad(&format!("'{arg}' is not {param}=argN")))?;
        if p.trim() != *param {
            return Err(bad(&format!("'{arg}': expected {param}=argN here")));
        }
        let n: u8 = pos
            .trim()
            .strip_prefix("arg")
            .and_then(|n| n.parse().ok())
            .filter(|n| (1..=6).contains(n))
            .ok_or_else(|| bad(&format!("'{}' is not arg1 to arg6", pos.trim())))?;
        positions[i] = n;
    }
    if params.len() == 2 && positions[0] == positions[1] {
        return Err(bad("both arguments name the same position"));
    }
    let (func, role) = match kind.trim() {
        "alloc" => (
            alloc_func::FUNC_CUSTOM_ALLOC,
            Role::Alloc(alloc_layout::LAYOUT_SIZE),
        ),
        "calloc" => (
            alloc_func::FUNC_CUSTOM_CALLOC,
            Role::Alloc(alloc_layout::LAYOUT_NMEMB_SIZE),
        ),
        "realloc" => (
            alloc_func::FUNC_CUSTOM_REALLOC,
            Role::Alloc(alloc_layout::LAYOUT_PTR_SIZE),
        ),
        _ => (alloc_func::FUNC_CUSTOM_FREE, Role::Free),
    };
    // The specs live as long as the recording; leaking the few names lets them be the catalogue's
    // `&'static str` entries.
    let leak = |s: &str| -> &'static str { Box::leak(s.to_string().into_boxed_str()) };
    let symbol = leak(symbol);
    Ok(Custom {
        flag: leak(&format!("--allocator {symbol}")),
        family: if family == symbol {
            symbol
        } else {
            leak(family)
        },
        entry: Entry {
            name: symbol,
            func,
            role,
        },
        positions,
    })
}

/// Refuse a symbol named twice (two specs, or a spec and the preset): one address gets one
/// probe, so only one of them could be meant.
pub fn check_unique(custom: &[Custom]) -> Result<(), String> {
    for (i, c) in custom.iter().enumerate() {
        if let Some(first) = custom[..i].iter().find(|o| o.entry.name == c.entry.name) {
            return Err(format!(
                "{} is named twice ({} and {}); give each function once",
                c.entry.name, first.flag, c.flag
            ));
        }
    }
    Ok(())
}

/// One warning per flag whose functions no file of the tree defined (`missing`, from
/// `Discovery::custom_not_found`). A preset warns once, and only when none of its functions was
/// found (a Python without `PyMem_Calloc` still has its others).
pub fn not_found_warnings(missing: &[Custom]) -> Vec<String> {
    let mut out = Vec::new();
    let python_missing = missing
        .iter()
        .filter(|c| c.flag == "--python-objects")
        .count();
    if python_missing > 0 && python_missing == PYTHON.len() {
        out.push(
            "--python-objects: no file of the recorded tree defines PyObject_Malloc (no \
             python3.X or libpython3.X.so ran); nothing was recorded for it"
                .to_string(),
        );
    }
    for c in missing.iter().filter(|c| c.flag != "--python-objects") {
        out.push(format!(
            "{}: no file of the recorded tree defines {}; nothing was recorded for it",
            c.flag, c.entry.name
        ));
    }
    out
}

/// The warning for the `--allocator` function `name`, defined in the file named `file` as a
/// bare return: its probe is attached and works, but a compiler that saw the empty body may
/// have dropped the calls (gcc does from -O1 in the same file), and then nothing fires.
pub fn empty_warning(name: &str, file: &str) -> String {
    format!(
        "--allocator {name}: {name} in {file} is a bare `ret` (it does nothing), so a compiler \
         that sees it may remove the calls to it (gcc does from -O1) and a removed call records \
         nothing; build {name} with __attribute__((noipa)) or in its own file to keep the calls"
    )
}

/// How many leading arguments the layout of `c` reads.
pub fn arity(c: &Custom) -> usize {
    match c.entry.role {
        Role::Alloc(alloc_layout::LAYOUT_SIZE) | Role::Free | Role::Label => 1,
        Role::Alloc(_) => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse() {
        let c = parse("pool_alloc=alloc(size=arg1)").unwrap();
        assert_eq!((c.family, c.entry.name), ("pool_alloc", "pool_alloc"));
        assert_eq!(c.entry.func, alloc_func::FUNC_CUSTOM_ALLOC);
        assert_eq!(c.positions[0], 1);
        let c = parse("pool: pool_realloc = realloc(ptr=arg2, size=arg4)").unwrap();
        assert_eq!((c.family, c.entry.name), ("pool", "pool_realloc"));
        assert_eq!(c.entry.role, Role::Alloc(alloc_layout::LAYOUT_PTR_SIZE));
        assert_eq!(&c.positions[..2], &[2, 4]);
        assert_eq!(c.flag, "--allocator pool_realloc");
        let c = parse("pool_free=free(ptr=arg1)").unwrap();
        assert_eq!(c.entry.role, Role::Free);
        let c = parse("xcalloc=calloc(n=arg1,size=arg2)").unwrap();
        assert_eq!(c.entry.func, alloc_func::FUNC_CUSTOM_CALLOC);
        assert_eq!(python().len(), 8);
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        for (spec, says) in [
            ("pool_alloc", "no '='"),
            ("pool_alloc=alloc", "is not KIND(ARGS)"),
            ("pool_alloc=grab(size=arg1)", "'grab' is not alloc"),
            ("pool_alloc=alloc(size=arg7)", "'arg7' is not arg1 to arg6"),
            ("pool_alloc=alloc(n=arg1)", "expected size=argN"),
            (
                "pool_alloc=alloc(size=arg1,n=arg2)",
                "alloc takes size=argN",
            ),
            ("pool_realloc=realloc(ptr=arg1,size=arg1)", "same position"),
            ("=alloc(size=arg1)", "is not a symbol name"),
            ("a b=alloc(size=arg1)", "is not a symbol name"),
        ] {
            let e = parse(spec).unwrap_err();
            assert!(e.contains(says), "{spec}: {e}");
            assert!(e.starts_with(&format!("--allocator '{spec}': ")), "{e}");
            assert!(!e.contains('\n'));
        }
    }
}
