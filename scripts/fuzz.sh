#!/usr/bin/env bash
# The long robustness run: the mutator of tests/robustness.rs over CASES (default 2,000,000)
# damaged copies of a real recording, in a release build. Each case must end in a report or a
# clean error; a panic names its case number for replay.
set -euo pipefail
cd "$(dirname "$0")/.."
cases="${CASES:-2000000}"
MEMTRACK_FUZZ_CASES="$cases" cargo test --release --locked --test robustness \
  thousands_of_damaged_files_report_or_fail_cleanly -- --nocapture
