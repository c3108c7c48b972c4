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
[ "${1:-}" = "--print-path" ] && print_path=1

target=x86_64-unknown-linux-gnu
[ "$(uname -m)" = "aarch64" ] && target=aarch64-unknown-linux-gnu
libdir=/usr/lib/$(uname -m)-linux-gnu
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
cp "$bin" target/static/memtrack
if ((print_path)); then
  echo "$PWD/target/static/memtrack"
else
  echo "build-static: $PWD/target/static/memtrack ($(du -h target/static/memtrack | cut -f1))" >&2
fi
