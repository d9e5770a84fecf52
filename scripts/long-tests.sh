#!/usr/bin/env bash
# The long variants the README's test command skips (#[ignore]): full-size load, the
# 1,000-member group wait, and a longer decoder fuzz campaign. Release build; ~5 minutes
# on 2 cores. MAXX_LOAD_ROUNDS=30 makes the full-size load a soak (~8 minutes more; see
# docs/reliability.md, "Soak").
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release --test main -- --ignored --nocapture --test-threads 1
PROPTEST_CASES="${PROPTEST_CASES:-100000}" cargo test --release -p maxx-protocol --test fuzz_decode
