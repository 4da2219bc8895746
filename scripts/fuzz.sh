#!/usr/bin/env bash
# Fuzzes the native core with cargo fuzz (libFuzzer, AddressSanitizer, a nightly toolchain): the block scanner and
# column gatherer (target gather_block, the default) or the remoting frame decoder (FUZZ_TARGET=decode_frame).
# Installs what it lacks: the nightly toolchain through rustup, and cargo-fuzz from crates.io. Arguments go to
# libFuzzer, e.g. scripts/fuzz.sh -max_total_time=600.
# New inputs go to native/fuzz/corpus (not committed); the committed seeds are native/fuzz/seeds.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
die() { echo "error: $*" >&2; exit 1; }

command -v rustup >/dev/null 2>&1 || die "rustup was not found: cargo fuzz needs a nightly toolchain (https://rustup.rs)."
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
TARGET="${FUZZ_TARGET:-gather_block}"
mkdir -p "$ROOT/native/fuzz/corpus/$TARGET" "$ROOT/native/fuzz/seeds/$TARGET"
cd "$ROOT/native"
exec cargo +nightly fuzz run "$TARGET" "fuzz/corpus/$TARGET" "fuzz/seeds/$TARGET" -- "$@"
