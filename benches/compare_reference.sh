#!/usr/bin/env bash
# Side-by-side timing of memq against the reference scripts on one msMemScope dump (the
# reference reads a single CSV). Usage:
#
#   benches/compare_reference.sh DUMP.csv [MEMQ_BINARY]
#
# Make a 1M-row dump with:  memq-gen -o /tmp/g1d --devices 1 --events 1000000
# The reference scripts are fetched by ../shared/tools/reference-oracle.sh. Prints one line per
# step: name, seconds, max RSS (KiB). memq's analyses run on the dataset ingested once.
set -euo pipefail
dump=${1:?usage: compare_reference.sh DUMP.csv [MEMQ_BINARY]}
memq=${2:-target/release/memq}
here=$(cd "$(dirname "$0")/.." && pwd)
ref=$(bash "$here/../shared/tools/reference-oracle.sh" | sed -n 's/^memscope scripts: //p')/aggregate_dump.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

measure() { # name, command...
  local name=$1; shift
  /usr/bin/time -f "%e %M" -o "$work/time" "$@" >"$work/out" 2>"$work/err" || { echo "$name FAILED"; cat "$work/err"; return 0; }
  read -r secs rss <"$work/time"
  printf '%-34s %8.2f s %10d KiB\n' "$name" "$secs" "$rss"
}

echo "== reference ($ref)"
cp "$dump" "$work/dump.csv"
measure "ref --sort --overwrite" python3 "$ref" "$work/dump.csv" --sort --overwrite
python3 "$ref" "$work/dump.csv" --peak --pool PTA >"$work/peak.txt"
peak_ts=$(grep -o 'at-timestamp [0-9]*' "$work/peak.txt" | head -1 | cut -d' ' -f2 || true)
python3 "$ref" "$work/dump.csv" --stats >"$work/stats.txt"
read -r first last < <(grep -oE '[0-9]{12,} ~ [0-9]{12,}' "$work/stats.txt" | head -1 | tr -d '~')
echo "peak ts ${peak_ts:-?}; time range $first .. $last"
mid=$(( first + (last - first) / 2 ))
measure "ref --stats" python3 "$ref" "$work/dump.csv" --stats
measure "ref --peak" python3 "$ref" "$work/dump.csv" --peak --pool PTA
measure "ref --group-by owner" python3 "$ref" "$work/dump.csv" --group-by owner --pool PTA
measure "ref --at-timestamp" python3 "$ref" "$work/dump.csv" --at-timestamp "${peak_ts:-$mid}"
measure "ref --leak-candidates" python3 "$ref" "$work/dump.csv" --leak-candidates
measure "ref --fragmentation" python3 "$ref" "$work/dump.csv" --fragmentation
measure "ref --hal-segments" python3 "$ref" "$work/dump.csv" --hal-segments --min-size 1MB
measure "ref --trend" python3 "$ref" "$work/dump.csv" --trend --pool PTA
measure "ref --window" python3 "$ref" "$work/dump.csv" --window "$first" "$mid" --pool PTA
measure "ref --oom" python3 "$ref" "$work/dump.csv" --oom

echo "== memq ($memq)"
measure "memq ingest" "$memq" ingest "$dump" -o "$work/d.memq"
q() { measure "memq $1" "$memq" sql "$work/d.memq" --format csv -e "$2"; }
q stats "SELECT * FROM stats"
q peaks "SELECT * FROM peaks"
q owner_peaks "SELECT * FROM owner_peaks"
q breakdown_at "SELECT * FROM breakdown_at(${peak_ts:-$mid}, 'HAL')"
q leak_candidates "SELECT * FROM leak_candidates"
q fragmentation "SELECT * FROM fragmentation"
q pool_expansions "SELECT * FROM pool_expansions"
q hal_segments "SELECT * FROM hal_segments(1048576)"
q "trend(20)" "SELECT * FROM trend(20, 'PTA')"
q window_summary "SELECT * FROM window_summary($first, $mid, 'PTA')"
q oom_findings "SELECT * FROM oom_findings"
q step_peaks "SELECT * FROM step_peaks"
q curve_buckets "SELECT * FROM curve_buckets(100)"
