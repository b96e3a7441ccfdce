#!/usr/bin/env bash
# Regenerates tests/golden/<sample>/*.txt from the reference scripts (fetched from PyPI by
# benches/reference.sh). Not run by CI. expected.json is then rebuilt by hand from these outputs
# (see README.md).
#   bash tests/golden/regen.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
S=$(bash "$repo/benches/reference.sh" | sed -n 's/^memscope scripts: *//p')/aggregate_dump.py
work=$(mktemp -d)
mkdir -p "$work/orig" "$work/sorted"
cp "$repo"/fixtures/real/memscope/real/*.csv "$work/orig/"
for f in "$work"/orig/*.csv; do
  python3 "$S" "$f" --sort > "$work/sorted/$(basename "$f")" 2>/dev/null   # reference's own sort (stdout)
done
cd "$work/sorted"
for f in *.csv; do
  s=${f%.csv}
  out="$here/$s"; mkdir -p "$out"
  idx="$out/commands.tsv"; printf 'slug\texit_code\targs\n' > "$idx"
  read -r first last < <(python3 -c '
import csv,sys
ts=[]
for row in csv.DictReader(open(sys.argv[1],newline="")):
    try: ts.append(int(row["Timestamp(ns)"]))
    except ValueError: pass
print(min(ts),max(ts))' "$f")
  span=$((last-first)); mid=$((first+span/2)); w0=$((first+span*2/10)); w1=$((first+span*8/10))
  peakts=$(python3 "$S" "$f" --peak --pool PTA | grep -oE -- '--at-timestamp [0-9]+' | head -1 | awk '{print $2}')
  run() {
    local slug=$1; shift
    local rc=0
    python3 "$S" "$f" "$@" > "$out/$slug.txt" 2> "$out/$slug.stderr.txt" || rc=$?
    [ -s "$out/$slug.stderr.txt" ] || rm -f "$out/$slug.stderr.txt"
    printf '%s\t%s\t%s\n' "$slug" "$rc" "$*" >> "$idx"
  }
  run stats --stats
  run peak --peak
  run peak_pool-PTA --peak --pool PTA
  run peak_pool-HAL --peak --pool HAL
  run peak_key-device_used --peak --key device_used
  run group-by_event_type_metric-peak --group-by event_type --metric peak
  run group-by_event_type_metric-total --group-by event_type --metric total
  run group-by_owner_metric-peak_pool-PTA --group-by owner --metric peak --pool PTA
  run group-by_owner_metric-total_pool-PTA --group-by owner --metric total --pool PTA
  run group-by_owner_metric-peak_pool-HAL --group-by owner --metric peak --pool HAL
  run at-timestamp_ptapeak --at-timestamp "$peakts"
  run at-timestamp_ptapeak_pool-PTA --at-timestamp "$peakts" --pool PTA
  run at-timestamp_ptapeak_pool-HAL --at-timestamp "$peakts" --pool HAL
  run at-timestamp_mid --at-timestamp $mid
  run at-timestamp_mid_pool-PTA --at-timestamp $mid --pool PTA
  run at-timestamp_mid_pool-HAL --at-timestamp $mid --pool HAL
  run leak-candidates --leak-candidates
  run leak-candidates_pool-HAL --leak-candidates --pool HAL
  run leak-candidates_pool-PTA --leak-candidates --pool PTA
  run leak-candidates_detail-50 --leak-candidates --detail 50
  run fragmentation --fragmentation
  run hal-segments_min-size-1MB --hal-segments --min-size 1MB
  run hal-segments --hal-segments
  run trend_buckets-5 --trend --buckets 5
  run trend --trend
  run window_mid60_pool-PTA --window $w0 $w1 --pool PTA
  run window_mid60 --window $w0 $w1
  run oom --oom
  run curve_limit-5 --curve --limit 5
  if [ "$s" = v2_compare_baseline ]; then   # test vectors quoted in docs/formats/memscope.md 6.13 / 7.3
    run docvec_window_pool-PTA --window 1764753084400000000 1764753084530000000 --pool PTA
    run docvec_at-timestamp --at-timestamp 1764753084500000000
    run docvec_window_pool-HAL --window 1764753084500000000 1764753084535647530 --pool HAL
  fi
done
rm -rf "$work"
