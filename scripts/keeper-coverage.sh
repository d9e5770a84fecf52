#!/bin/sh
# Line and region coverage of src/keeper/ under the keeper's own tests (docs/recovery.md,
# "Keeper tests"). Needs llvm-profdata and llvm-cov that read the toolchain's raw profiles:
# Debian's llvm-19 reads rustc 1.95's (LLVM 22). Only the maxx crate is instrumented.
set -eu
LLVM=${LLVM:-/usr/lib/llvm-19/bin}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target/keeper-cov}
out=$CARGO_TARGET_DIR/keeper-cov
rm -rf "$out" && mkdir -p "$out/prof"
wrapper=$out/rustc-cov.sh
cat >"$wrapper" <<'W'
#!/bin/sh
rustc="$1"; shift
case " $* " in
  *" --crate-name maxx "*) exec "$rustc" "$@" -C instrument-coverage ;;
  *) exec "$rustc" "$@" ;;
esac
W
chmod +x "$wrapper"
export RUSTC_WRAPPER=$wrapper
export LLVM_PROFILE_FILE=$out/prof/%p-%m.profraw
exe() { sed -n "s|.*Executable $1 (\(.*\))|\1|p"; }
unit=$(cargo test --bin maxx --no-run 2>&1 | exe 'unittests src/main.rs')
main=$(cargo test --test main --no-run 2>&1 | exe 'tests/main.rs')
"$unit" keeper
"$main" keeper recovery_screens --test-threads=2
"$LLVM/llvm-profdata" merge -sparse "$out"/prof/*.profraw -o "$out/keeper.profdata"
"$LLVM/llvm-cov" report "$CARGO_TARGET_DIR/debug/maxx" -object "$unit" \
  -instr-profile="$out/keeper.profdata" src/keeper/mod.rs src/keeper/state.rs
"$LLVM/llvm-cov" show "$CARGO_TARGET_DIR/debug/maxx" -object "$unit" \
  -instr-profile="$out/keeper.profdata" src/keeper/mod.rs src/keeper/state.rs >"$out/keeper.txt"
echo "annotated: $out/keeper.txt (lines with count 0 and ^0 regions were not run)"
