#!/usr/bin/env bash
# Times memq's ingest of each snapshot pickle beside the reference converter
# (snapshot_to_db.py) on the same file, in one run. Usage:
#
#   benches/snapshot_vs_reference.sh [MEMQ_BINARY] [PICKLE...]
#
# Default pickles: ../shared/fixtures/snapshots/real/*.pickle. Prints seconds and max RSS of
# each, best of 5 runs, and the speed-up.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
memq=${1:-$here/target/release/memq}
shift || true
pickles=("$@")
[ ${#pickles[@]} -gt 0 ] || pickles=("$here"/../shared/fixtures/snapshots/real/*.pickle)
ref=$(bash "$here/../shared/tools/reference-oracle.sh" | sed -n 's/^snapshot scripts: *//p')/snapshot_to_db.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

best() { # prints "seconds rss_kib" of the fastest of 5 runs (wall clock in µs resolution)
  local b="" rss=0 s m t0 t1
  for _ in 1 2 3 4 5; do
    rm -rf "$work/out.memq" "$work/out.db"
    t0=$EPOCHREALTIME
    /usr/bin/time -f "%M" -o "$work/t" "$@" >/dev/null 2>&1
    t1=$EPOCHREALTIME
    s=$(awk "BEGIN{printf \"%.4f\", $t1 - $t0}")
    read -r m <"$work/t"
    if [ -z "$b" ] || awk "BEGIN{exit !($s < $b)}"; then b=$s; rss=$m; fi
  done
  echo "$b $rss"
}

printf '%-36s %10s %12s %10s %12s %8s\n' pickle "ref s" "ref KiB" "memq s" "memq KiB" speedup
for p in "${pickles[@]}"; do
  read -r rs rm_ < <(best python3 "$ref" "$p" -o "$work/out.db")
  read -r ms mm < <(best "$memq" ingest "$p" -o "$work/out.memq")
  printf '%-36s %10s %12s %10s %12s %7.1fx\n' "$(basename "$p")" "$rs" "$rm_" "$ms" "$mm" "$(awk "BEGIN{print $rs / ($ms > 0 ? $ms : 0.01)}")"
done
