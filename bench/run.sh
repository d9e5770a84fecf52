#!/bin/sh
# maxx vs tmux benchmark: builds the release maxx and the harness, then runs it.
#
#   bench/run.sh                 full run (~12 min on 2 cores), writes bench/results/latest.json
#   bench/run.sh --quick         smaller sizes, 1-2 runs each, no ten_thousand (~1-2 min)
#   bench/run.sh --only spawn,group [--runs N]
#       scenarios: spawn throughput scale group durable fanout queries recovery remote fleet ten_thousand
#
# MAXX_BIN=/path/to/maxx skips building maxx. MAXX_BENCH_PERF=<dir> records a perf profile
# of every daemon the harness starts (see bench/README.md).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
if [ -z "${MAXX_BIN:-}" ]; then
    (cd "$root" && cargo build --release --locked --bin maxx)
    MAXX_BIN="$root/target/release/maxx"
fi
cargo build --release --locked --manifest-path "$here/Cargo.toml"
# Run a private copy, so a rebuild of target/release/maxx mid-run cannot swap binaries.
tmp=$(mktemp -d /tmp/maxx-bench-bin.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
cp "$MAXX_BIN" "$tmp/maxx"
"$here/target/release/maxx-bench" --maxx "$tmp/maxx" --out "$here/results/latest.json" "$@"
