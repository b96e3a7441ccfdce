#!/usr/bin/env bash
# Times memq's ingest of each snapshot pickle beside the reference converter
# (snapshot_to_db.py) on the same file, in one run. Usage:
#
#   benches/snapshot_vs_reference.sh [MEMQ_BINARY] [PICKLE...]
#
# Default pickles: fixtures/real/snapshots/real/*.pickle and *.pkl. The two tools take turns (ref,
# memq, ref, memq, ...) so that both see the same machine; prints seconds and max RSS of the
# fastest of RUNS runs of each (default 7), and the speed-up. MEMQ_AS_BUILT=1: see below.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
memq=${1:-$here/target/release/memq}
shift || true
pickles=("$@")
[ ${#pickles[@]} -gt 0 ] || pickles=("$here"/fixtures/real/snapshots/real/*.pickle "$here"/fixtures/real/snapshots/real/*.pkl)
ref=$(bash "$here/benches/reference.sh" | sed -n 's/^snapshot scripts: *//p')/snapshot_to_db.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# memq is timed as a user installs it, a copy (benches/compare.sh says why); MEMQ_AS_BUILT=1
# times the binary where it was built.
if [ "${MEMQ_AS_BUILT:-0}" != 1 ]; then
  cp "$memq" "$work/memq"
  memq=$work/memq
fi

runs=${RUNS:-7}

once() { # runs a command once; prints "seconds rss_kib" (wall clock in µs resolution)
  local t0 t1 m
  rm -rf "$work/out.memq" "$work/out.db"
  t0=$EPOCHREALTIME
  /usr/bin/time -f "%M" -o "$work/t" "$@" >/dev/null 2>&1
  t1=$EPOCHREALTIME
  read -r m <"$work/t"
  echo "$(awk "BEGIN{printf \"%.4f\", $t1 - $t0}") $m"
}

faster() { # "seconds rss" of the faster of two measurements ($1 may be empty)
  if [ -z "$1" ] || awk "BEGIN{exit !(${2% *} < ${1% *})}"; then echo "$2"; else echo "$1"; fi
}

printf '%-36s %10s %12s %10s %12s %8s\n' pickle "ref s" "ref KiB" "memq s" "memq KiB" speedup
for p in "${pickles[@]}"; do
  ref_best="" memq_best=""
  for _ in $(seq "$runs"); do
    ref_best=$(faster "$ref_best" "$(once python3 "$ref" "$p" -o "$work/out.db")")
    memq_best=$(faster "$memq_best" "$(once "$memq" ingest "$p" -o "$work/out.memq")")
  done
  read -r rs rm_ <<<"$ref_best"
  read -r ms mm <<<"$memq_best"
  printf '%-36s %10s %12s %10s %12s %7.1fx\n' "$(basename "$p")" "$rs" "$rm_" "$ms" "$mm" "$(awk "BEGIN{print $rs / ($ms > 0 ? $ms : 0.01)}")"
done

# BIG_MB=100: also a pickle of about that size built from the largest real one by
# benches/big_pickle.py (trace entries repeated), ingested by memq only (BIG_REF=1 adds the
# reference, which takes minutes): seconds, MB/s and max RSS against the file size.
if [ -n "${BIG_MB:-}" ]; then
  src=$(ls -S "$here"/fixtures/real/snapshots/real/*.pickle | head -1)
  big="$work/big.pickle"
  python3 "$here/benches/big_pickle.py" "$src" "$big" "$BIG_MB" >/dev/null
  bytes=$(stat -c %s "$big")
  memq_best=""
  for _ in $(seq "$runs"); do memq_best=$(faster "$memq_best" "$(once "$memq" ingest "$big" -o "$work/out.memq")"); done
  read -r ms mm <<<"$memq_best"
  printf '%-36s %10s %12s %10s %12s %7.1f MB/s, RSS %.2fx the file\n' "big.pickle ($((bytes >> 20)) MiB)" - - "$ms" "$mm" \
    "$(awk "BEGIN{print $bytes / 1e6 / $ms}")" "$(awk "BEGIN{print $mm * 1024 / $bytes}")"
  if [ -n "${BIG_REF:-}" ]; then
    read -r rs rm_ <<<"$(once python3 "$ref" "$big" -o "$work/out.db")"
    printf '%-36s %10s %12s %10s %12s %7.1fx\n' "big.pickle, reference once" "$rs" "$rm_" "$ms" "$mm" "$(awk "BEGIN{print $rs / $ms}")"
  fi
fi
