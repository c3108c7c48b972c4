//! Build step: compile every `bpf/*.bpf.c` into a BPF object (clang, CO-RE, BTF kept for
//! relocation) that `src/sys/objects.rs` embeds, and run bindgen on `bpf/event.h` so the Rust
//! decoder reads the exact layouts the kernel side writes.
//!
//! The BPF code includes the committed `bpf/vmlinux.h`, never the build machine's running
//! kernel: CO-RE relocates field offsets against the target kernel's BTF at load time. For an
//! arm64 target that is `bpf/vmlinux_arm64.h` (from Debian's arm64 6.1 kernel), whose
//! `struct pt_regs` and `user_pt_regs` are what bpf_tracing.h's `PT_REGS_*` read there.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let bpf_dir = Path::new("bpf");
    // libbpf-sys (links = "bpf") exports the headers of the libbpf it builds.
    let libbpf_include = env::var("DEP_BPF_INCLUDE")
        .expect("libbpf-sys exports DEP_BPF_INCLUDE; is it a dependency?");
    let clang = env::var("CLANG").unwrap_or_else(|_| "clang".to_string());

    println!("cargo:rerun-if-env-changed=CLANG");
    println!("cargo:rerun-if-changed=bpf");
    // Every call of libbpf's btf__load_vmlinux_btf, its own included, goes to
    // src/sys/kernel_btf.rs, which parses the kernel's BTF once per process instead of once
    // per object loaded.
    println!("cargo:rustc-link-arg=-Wl,--wrap=btf__load_vmlinux_btf");

    let mut sources: Vec<PathBuf> = std::fs::read_dir(bpf_dir)
        .expect("read bpf/")
        .map(|e| e.expect("read bpf/ entry").path())
        .filter(|p| p.to_string_lossy().ends_with(".bpf.c"))
        .collect();
    sources.sort();
    for src in &sources {
        let stem = src
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".bpf.c"))
            .expect("name.bpf.c");
        let obj = out_dir.join(format!("{stem}.bpf.o"));
        let status = Command::new(&clang)
            .args(["-g", "-O2", "-Wall", "-Werror", "-target", "bpf"])
            .arg(format!("-D__TARGET_ARCH_{}", target_arch()))
            .args(vmlinux_override())
            .arg("-I")
            .arg(bpf_dir)
            .arg("-I")
            .arg(&libbpf_include)
            .arg("-c")
            .arg(src)
            .arg("-o")
            .arg(&obj)
            .status()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run {clang} to build {}: {e}; run scripts/setup.sh",
                    src.display()
                )
            });
        assert!(status.success(), "{clang} failed on {}", src.display());
    }

    let bindings = bindgen::Builder::default()
        .header("bpf/event.h")
        .allowlist_type("(alloc|fork|exec|exit|rss|rmap|rmap_region|fault|stop|map|stack)_event|event_header|unwind_file")
        .allowlist_type(
            "event_kind|alloc_func|alloc_layout|arg_reg|lost_cause|tracked_state|stop_reason|gate_state|stack_end|stack_stat|cfa_rule|rbp_rule|ra_rule",
        )
        .allowlist_var(
            "EXEC_.*|COOKIE_.*|STACK_MAX_DEPTH|STACK_ID_MISSING|SAMPLE_DRAWS|RMAP_NAME_MAX|UNWIND_CHUNK.*",
        )
        .rustified_enum(
            "event_kind|alloc_func|alloc_layout|arg_reg|lost_cause|tracked_state|stop_reason|gate_state|stack_end|stack_stat|cfa_rule|rbp_rule|ra_rule",
        )
        .derive_default(true)
        .layout_tests(true)
        .generate()
        .expect("bindgen on bpf/event.h");
    bindings
        .write_to_file(out_dir.join("event.rs"))
        .expect("write event.rs bindings");
}

/// The `__TARGET_ARCH_*` name bpf_tracing.h wants for reading registers of this target.
fn target_arch() -> &'static str {
    match env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") => "x86",
        Ok("aarch64") => "arm64",
        Ok("riscv64") => "riscv",
        Ok("s390x") => "s390",
        Ok("powerpc64") => "powerpc",
        Ok(other) => panic!("memtrack's BPF code does not know target arch {other}"),
        Err(_) => panic!("CARGO_CFG_TARGET_ARCH not set"),
    }
}

/// Extra clang options that put another architecture's kernel types in place of
/// `bpf/vmlinux.h` (x86_64's). The sources include it as `"vmlinux.h"`, which clang finds beside
/// them before any `-I` directory; so the arm64 header is force-included first instead, and
/// `bpf/vmlinux.h`'s own include guard (`__VMLINUX_H__`, bpftool's, the same in both) then
/// makes it empty. x86_64 gets no option: its objects are built exactly as before.
fn vmlinux_override() -> Vec<String> {
    println!("cargo:rerun-if-env-changed=CARGO_CFG_TARGET_ARCH");
    match env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        // -fms-extensions: 7.x embeds named structs anonymously (`struct ns_tree;` in
        // ns_common), which bpftool prints as such.
        Ok("aarch64") => vec![
            "-fms-extensions".into(),
            "-Wno-microsoft-anon-tag".into(),
            "-include".into(),
            "bpf/vmlinux_arm64.h".into(),
        ],
        _ => Vec::new(),
    }
}
