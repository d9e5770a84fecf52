#!/usr/bin/env bash
# The long variants the README's test command skips (#[ignore]): full-size load, the
# 1,000-member group wait, a longer decoder fuzz campaign, and the long screen differential
# (2,000 random output/resize/read runs against a grid fed from the start, 16 MiB between a
# mode change and the read). Release build; ~5 minutes
# on 2 cores. MAXX_LOAD_ROUNDS=30 makes the full-size load a soak (~8 minutes more; see
# docs/reliability.md, "Soak").
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release --test main -- --ignored --nocapture --test-threads 1
PROPTEST_CASES="${PROPTEST_CASES:-100000}" cargo test --release -p maxx-protocol --test fuzz_decode
cargo test --release -p maxx-actors --lib -- --ignored --nocapture
