#!/usr/bin/env bash
# Puts the reference Python scripts memq is compared with (stdlib-only; PyPI package
# mindstudio-agent 26.1.3) in DIR and prints where they are:
#   benches/reference.sh [DIR]        (default: ${TMPDIR:-/tmp}/memq-reference)
# prints "memscope scripts: PATH" (aggregate_dump.py, convert_dump.py) and
#        "snapshot scripts: PATH" (snapshot_to_db.py, snapshot_analyze.py, snapshot_queries.py).
# They serve as an oracle and a stopwatch only: no code of theirs is taken into memq.
set -euo pipefail
dir=${1:-${TMPDIR:-/tmp}/memq-reference}
pkg=mindstudio-agent
version=26.1.3
mkdir -p "$dir"
if [ ! -d "$dir/pkg/resources" ]; then
  python3 -m pip download --quiet --no-deps "$pkg==$version" -d "$dir/whl"
  rm -rf "$dir/pkg"
  mkdir -p "$dir/pkg"
  (cd "$dir/pkg" && python3 -m zipfile -e "$dir"/whl/mindstudio_agent-"$version"-py3-none-any.whl .)
fi
skills="$dir/pkg/resources/configs/default/skills/profiler"
echo "memscope scripts: $skills/memory-analysis/scripts"
echo "snapshot scripts: $skills/ascend-npu-snapshot-analyzer/scripts"
