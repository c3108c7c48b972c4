# shellcheck shell=bash
# Sourced by scripts/arm64.sh and scripts/build-static.sh: Debian's arm64 packages this x86
# machine needs to build and run an arm64 memtrack (issue 31), through the private apt
# configuration of scripts/kernels/fetch.sh (APT::Architecture=arm64; the machine's dpkg
# architectures are never changed). Everything is cached under $ARM64_DIR (target/arm64).

: "${ARM64_DIR:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/target/arm64}"
# The suite of the packages: the host's (bookworm), whose glibc is the one the cross gcc
# (gcc-aarch64-linux-gnu, libc6-dev-arm64-cross) links against.
: "${ARM64_SUITE:=bookworm}"
# shellcheck source=scripts/kernels/fetch.sh
. "$(dirname "${BASH_SOURCE[0]}")/kernels/fetch.sh"

# arm64_debs NAME PKG...: download PKG... (arm64, ARM64_SUITE) and unpack them all into
# $ARM64_DIR/NAME; print that directory. Cached: a second call downloads nothing.
arm64_debs() {
  local name=$1
  shift
  local dir="$ARM64_DIR/$name"
  if [ -f "$dir/.done" ] && [ "$(cat "$dir/.done")" = "$*" ]; then
    echo "$dir"
    return 0
  fi
  local apt="$ARM64_DIR/apt-$ARM64_SUITE"
  local -a opts
  mapfile -t opts < <(kernels_apt_opts "$apt" arm64)
  if [ ! -f "$apt/.updated" ]; then
    local mirror
    mirror=$(kernels_mirror debian) || return 1
    mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
    echo "deb [arch=arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $ARM64_SUITE main" \
      >"$apt/sources.list"
    echo "arm64: apt-get update ($ARM64_SUITE, arm64) from $mirror" >&2
    apt-get -q "${opts[@]}" update >"$apt/update.log" 2>&1 || {
      echo "arm64: apt-get update of $ARM64_SUITE (arm64) failed (log: $apt/update.log)" >&2
      return 1
    }
    touch "$apt/.updated"
  fi
  rm -rf "$dir.new" && mkdir -p "$dir.new/debs"
  echo "arm64: downloading $* (arm64)" >&2
  (cd "$dir.new/debs" && apt-get -q "${opts[@]}" download "$@" >"$dir.new/download.log" 2>&1) || {
    echo "arm64: apt-get download of $* failed (log: $dir.new/download.log)" >&2
    return 1
  }
  local deb
  for deb in "$dir.new"/debs/*.deb; do
    dpkg-deb -x "$deb" "$dir.new/root"
  done
  echo "$*" >"$dir.new/.done"
  rm -rf "$dir" && mv "$dir.new" "$dir"
  echo "$dir"
}

# arm64_kernel: Debian's arm64 kernel of ARM64_SUITE (vmlinuz-<release>, lib/modules), laid out
# by kernel_fetch; print its directory.
arm64_kernel() {
  KERNELS_DIR="$ARM64_DIR" kernel_fetch arm64 "$ARM64_SUITE"
}
