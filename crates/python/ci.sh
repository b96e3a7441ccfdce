#!/usr/bin/env bash
# Builds the wheel with maturin (the dev profile, sharing the build cache and DataFusion of
# `cargo test`), installs it into a fresh venv with pyarrow, pandas, polars and duckdb from
# PyPI, and runs the pytest suite against it. Needs python3 (>= 3.9) with venv and network
# access to PyPI (or a pip cache). MEMQ_BIN: the `memq` binary the answers are compared with.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/memq-target}"
build_venv="${MEMQ_PY_BUILD_VENV:-$HOME/.cache/memq-py-build}"
if [ ! -x "$build_venv/bin/maturin" ]; then
  python3 -m venv "$build_venv"
  "$build_venv/bin/pip" install -q "maturin>=1.5,<2"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# --strip: the dev profile keeps line tables, which would make the wheel several times larger.
"$build_venv/bin/maturin" build --profile dev --strip --manifest-path "$here/Cargo.toml" \
  --out "$work/wheels" --interpreter python3
wheel="$(ls "$work"/wheels/memq-*.whl)"
echo "== wheel: $(basename "$wheel") ($(du -h "$wheel" | cut -f1))"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q "$wheel" pyarrow pandas polars duckdb pytest
cd "$work"
status=0
MEMQ_REPO="$repo" MEMQ_BIN="${MEMQ_BIN:-$CARGO_TARGET_DIR/debug/memq}" \
  "$work/venv/bin/python" -m pytest -q -p no:cacheprovider --junitxml="$work/junit.xml" "$here/tests" || status=$?
# The example notebook's code, run as a plain script on the bundled example.
(cd "$repo" && XDG_CACHE_HOME="$work/cache" "$work/venv/bin/python" docs/examples/run_notebook.py \
  docs/examples/why_did_memory_peak.ipynb) || status=$?
# One line in cargo's shape, so that .ci/run's summary counts these tests too.
"$work/venv/bin/python" - "$work/junit.xml" <<'PY'
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suites = [root] if root.tag == "testsuite" else list(root)
total = sum(int(s.get("tests", 0)) for s in suites)
bad = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
skipped = sum(int(s.get("skipped", 0)) for s in suites)
print(f"test result: {'ok' if bad == 0 else 'FAILED'}. {total - bad - skipped} passed; {bad} failed; {skipped} ignored (python, pytest)")
PY
exit "$status"
