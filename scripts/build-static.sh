#!/usr/bin/env bash
# Builds the one file to copy onto a CI runner: a static-pie memtrack with glibc, libbpf,
# libelf and zlib inside, no dynamic dependencies (docs/kernel-facts.md,
# "Building"). It lands in target/static/memtrack; pass --print-path to print only that path.
#
# Its own target directory (target/static) keeps the normal debug and release builds intact.
# --target is given explicitly so that +crt-static applies to memtrack alone, not to build
# scripts (bindgen loads libclang with dlopen, which a static build script cannot do).
set -euo pipefail
cd "$(dirname "$0")/.."

print_path=0
arch=$(uname -m)
while (($#)); do
  case "$1" in
    --print-path) print_path=1 ;;
    # --target aarch64 on an x86_64 machine: the arm64 binary (issue 31), cross-built with
    # gcc-aarch64-linux-gnu against Debian's arm64 libelf.a and libz.a (scripts/arm64-fetch.sh).
    --target) arch=${2:?--target needs aarch64 or x86_64} && shift ;;
    *) echo "build-static: unknown option $1; usage: build-static.sh [--target aarch64|x86_64] [--print-path]" >&2 && exit 2 ;;
  esac
  shift
done

target=$arch-unknown-linux-gnu
libdir=/usr/lib/$arch-linux-gnu
out=target/static/memtrack
if [ "$arch" != "$(uname -m)" ]; then
  [ "$arch" = aarch64 ] || { echo "build-static: cross-building for $arch is not supported (aarch64 is)" >&2; exit 2; }
  command -v aarch64-linux-gnu-gcc >/dev/null ||
    { echo "build-static: aarch64-linux-gnu-gcc is missing; run scripts/setup.sh (gcc-aarch64-linux-gnu)" >&2; exit 1; }
  rustup target list --installed 2>/dev/null | grep -qx "$target" ||
    { echo "build-static: the Rust target $target is missing; run scripts/setup.sh (rustup target add)" >&2; exit 1; }
  # shellcheck source=scripts/arm64-fetch.sh
  . scripts/arm64-fetch.sh
  libdir="$(arm64_debs dev libelf-dev zlib1g-dev libelf1 zlib1g)/root/usr/lib/aarch64-linux-gnu" || exit 1
  export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
  export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
  out=target/static/memtrack-aarch64
fi
for lib in libelf.a libz.a; do
  if [ ! -e "$libdir/$lib" ]; then
    echo "build-static: $libdir/$lib is missing; run scripts/setup.sh (libelf-dev, zlib1g-dev)" >&2
    exit 1
  fi
done

# The release profile, without its debug info (10 MiB against 3.5 MiB; symbols stay).
LIBBPF_SYS_LIBRARY_PATH="$libdir" \
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
  cargo build --release --locked --features static --target "$target" \
    --target-dir target/static --config 'profile.release.strip="debuginfo"' >&2

bin=target/static/$target/release/memtrack
cp "$bin" "$out"
if ((print_path)); then
  echo "$PWD/$out"
else
  echo "build-static: $PWD/$out ($(du -h "$out" | cut -f1))" >&2
fi
