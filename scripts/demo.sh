#!/usr/bin/env bash
# Quick start: install what the build needs, build memtrack, record the bundled example
# program (a small process tree that allocates, frees and leaks), and show what was recorded:
# the totals, the processes, and the top allocation sites (from the default's sampled stacks).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
cargo build --release --locked
mkdir -p target/demo
cc -O2 -g -o target/demo/example testdata/example.c

sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
"${sudo_cmd[@]}" ./target/release/memtrack record -o target/demo/example.mt -- target/demo/example
echo
./target/release/memtrack report target/demo/example.mt --stacks
