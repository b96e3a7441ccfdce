#!/usr/bin/env bash
# The diagnosis scorecard: every labelled scenario of tests/diagnosis/scenarios.json reported by
# memq, its problem-level findings compared with the expected ones; prints hits, false alarms
# and misses per rule and the contradictions (the test fails on any of them).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --locked --test it diagnosis:: -- --nocapture 2>&1 | sed -n '/^scorecard/,/^contradictions/p;/panicked\|: wrong\|: missed \|: false alarm \|: leak and no_leak/p'
