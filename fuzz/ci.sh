#!/usr/bin/env bash
# The time-boxed fuzz run of CI: every target for MEMQ_FUZZ_SECONDS (default 30) seconds, then
# the proptest generators. Exit 1 if anything failed.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/memq-target}"
crashes=$(mktemp -d)
cargo run --locked -q -p memq-fuzz -- all --seconds "${MEMQ_FUZZ_SECONDS:-30}" --crashes "$crashes"
cargo test --locked -q -p memq-fuzz
rmdir "$crashes" 2>/dev/null || { echo "fuzz inputs that failed are in $crashes" >&2; exit 1; }
