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
  musl-tools                    # tests/musl.rs: musl-gcc links a fixture with musl, static or not
  g++                           # C++ fixtures (tests/allocators.rs)
  libjemalloc-dev libmimalloc-dev libgoogle-perftools-dev  # the allocators tests/allocators.rs records
  python3                       # a real interpreter run (tests/allocators.rs)
  binutils bsdutils passwd      # tests: readelf (static binary), script (a terminal), useradd
  util-linux                    # tests: setpriv (a recorder with ambient capabilities)
  gdb libc6-dbg                 # tests/stacks.rs: gdb's bt is the oracle for call stacks, with
                                # glibc's frames named and lined by its debug file
  heaptrack                     # scripts/bench/compare-heaptrack.sh: top sites beside memtrack's
  golang-go                     # tests/views_stacks.rs: `go tool pprof` reads --format pprof
  python3-jsonschema            # tests/views_stacks.rs: --format speedscope against the schema
                                # of the speedscope npm package (testdata/node), by /usr/bin/python3
  chromium                      # tests/views_html.rs: the HTML page in a headless browser, driven
                                # by puppeteer-core (testdata/node) without downloading one
  valgrind                      # tests/bystanders.rs: a program under Valgrind beside a recording
  busybox-static                # tests/containers.rs: the shell of the roots the tests build
  gcc-aarch64-linux-gnu g++-aarch64-linux-gnu  # the arm64 job (scripts/arm64.sh): the static
  qemu-system-arm cpio          # arm64 binary and fixtures, booted under qemu-system-aarch64
  gdb-multiarch qemu-user-static  # the arm64 job's stacks oracle: gdb's bt of the fixtures run
                                  # under qemu-aarch64-static -g on this machine
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

# The Rust target of the arm64 binary (scripts/build-static.sh --target aarch64).
if command -v rustup >/dev/null 2>&1 &&
  ! rustup target list --installed | grep -qx aarch64-unknown-linux-gnu; then
  echo "setup: adding the Rust target aarch64-unknown-linux-gnu" >&2
  rustup target add aarch64-unknown-linux-gnu >&2
fi

# Node.js and npm: a machine that has them (NodeSource's nodejs bundles npm, and conflicts with
# Debian's npm package) keeps its own; else Debian's.
if ! command -v npm >/dev/null 2>&1; then
  echo "setup: installing nodejs npm" >&2
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    nodejs npm >/dev/null
fi

# npm packages of the tests (testdata/node/package.json, locked): installed once, again only when
# the lock file changed since the last install (its copy in node_modules says which it was).
node_dir="$(cd "$(dirname "$0")/.." && pwd)/testdata/node"
if ! cmp -s "$node_dir/package-lock.json" "$node_dir/node_modules/.installed-lock.json"; then
  echo "setup: installing the npm packages of testdata/node" >&2
  # puppeteer-core drives Debian's chromium: it must never fetch a browser of its own.
  PUPPETEER_SKIP_DOWNLOAD=1 npm ci --prefix "$node_dir" --no-audit --no-fund --ignore-scripts \
    >/dev/null
  cp "$node_dir/package-lock.json" "$node_dir/node_modules/.installed-lock.json"
fi
