#!/usr/bin/env bash
# Installs every Debian package that building memtrack and running its tests need.
# Idempotent: packages already present are not downloaded again, and apt's lists are
# refreshed only when something is missing.
set -euo pipefail

packages=(
  clang llvm libclang-dev      # BPF objects (-target bpf) and bindgen's libclang
  bpftool                       # only to regenerate bpf/vmlinux.h; the build uses the committed copy
  libelf-dev zlib1g-dev pkg-config make  # vendored libbpf (libbpf-sys) links against these;
                                         # their libelf.a and libz.a go into the static binary
  gcc libc6-dev                 # C fixtures in testdata/
  g++                           # C++ fixtures (tests/allocators.rs)
  libjemalloc-dev libmimalloc-dev libgoogle-perftools-dev  # the allocators tests/allocators.rs records
  python3                       # a real interpreter run (tests/allocators.rs)
  binutils bsdutils passwd      # tests: readelf (static binary), script (a terminal), useradd
  util-linux                    # tests: setpriv (a recorder with ambient capabilities)
  gdb libc6-dbg                 # tests/stacks.rs: gdb's bt is the oracle for call stacks, with
                                # glibc's frames named and lined by its debug file
  heaptrack                     # scripts/bench/compare-heaptrack.sh: top sites beside memtrack's
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo not found; install a Rust toolchain (rustup) first" >&2
  exit 1
fi
