#!/usr/bin/env bash
# The one test command (README, CI): set-up, formatting, lints, and the whole test suite,
# including the integration tests that load BPF programs (they need root; as another user they
# say why they skip, and under CI=true they fail instead).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
echo "== cargo fmt --check" >&2
cargo fmt --all --check
echo "== cargo clippy" >&2
cargo clippy --all-targets --locked -- -D warnings
echo "== static binary (scripts/build-static.sh)" >&2
# tests/ship.rs checks it has no dynamic dependencies and records from an empty directory.
MEMTRACK_STATIC_BIN=$(bash scripts/build-static.sh --print-path)
export MEMTRACK_STATIC_BIN
echo "== cargo test" >&2
cargo test --locked "$@"

# The kernel matrix (docs/kernels.md): Debian's 5.10, 6.1, 6.12 and sid kernels under qemu, two
# guests at a time, about 19 minutes on 2 cores. It runs under CI=true or MEMTRACK_KERNELS=1; MEMTRACK_KERNELS=0 skips it
# even under CI.
run_kernels=${MEMTRACK_KERNELS:-}
[ -n "$run_kernels" ] || { [ "${CI:-}" = true ] && run_kernels=1; }
if [ "$run_kernels" = 1 ]; then
  echo "== kernel matrix (scripts/kernels.sh)" >&2
  bash scripts/kernels.sh
else
  echo "== kernel matrix skipped (runs under CI=true or MEMTRACK_KERNELS=1; scripts/kernels.sh)" >&2
fi

# The arm64 job (scripts/arm64.sh, issue 31): the static arm64 binary and fixtures, cross-built,
# recorded inside Debian's arm64 kernel under qemu (TCG), about 5 minutes. It runs under CI=true
# or MEMTRACK_ARM64=1; MEMTRACK_ARM64=0 skips it even under CI.
run_arm64=${MEMTRACK_ARM64:-}
[ -n "$run_arm64" ] || { [ "${CI:-}" = true ] && run_arm64=1; }
if [ "$run_arm64" = 1 ]; then
  echo "== arm64 (scripts/arm64.sh)" >&2
  bash scripts/arm64.sh
else
  echo "== arm64 skipped (runs under CI=true or MEMTRACK_ARM64=1; scripts/arm64.sh)" >&2
fi
