#!/usr/bin/env bash
# Runs the README's quick start as a new user would: the first shell block under
# "## Quick start" literally, from the repository root, and checks its answer against the
# generator's truth for the bundled example (fixtures/memscope/g3_run/truth.json). The second
# block, the test command, must be the one .ci/run runs. Run by .ci/run after the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
blocks=$(mktemp -d)
trap 'rm -rf "$blocks"' EXIT
# Block N of the section goes to $blocks/N.
awk -v dir="$blocks" '
  /^## / { in_section = ($0 == "## Quick start (fresh machine: Rust toolchain only)"); next }
  in_section && /^```/ { if (open) { open = 0 } else { open = 1; n++ }; next }
  in_section && open { print > (dir "/" n) }
' README.md
[ -s "$blocks/1" ] && [ -s "$blocks/2" ] || { echo "readme_quickstart: README's quick start has no two shell blocks" >&2; exit 1; }

# Each command of the block (`a && b`) must be one .ci/run runs.
test_cmd=$(cat "$blocks/2")
while IFS= read -r part; do
  part=$(printf '%s' "$part" | sed 's/^ *//; s/ *$//')
  [ -n "$part" ] || continue
  if ! grep -qE "^$part( |$)" .ci/run; then
    echo "readme_quickstart: '$part' of the README's test command '$test_cmd' is not what .ci/run runs" >&2
    exit 1
  fi
done < <(printf '%s\n' "$test_cmd" | sed 's/&&/\n/g')

echo "== README quick start:"; cat "$blocks/1"
out=$(bash -e "$blocks/1")
printf '%s\n' "$out"
# Every (device, pool) peak of the truth file is in the answer, in memq's words: the metric the
# truth was measured as (`live` where it pairs blocks, `used` where it reads the counters), the
# bytes humanized to two decimals, the exact time in ns (ISO form).
python3 - "$out" fixtures/memscope/g3_run/truth.json <<'PY'
import datetime, json, sys
out, truth = sys.argv[1], json.load(open(sys.argv[2]))
rows = [[c.strip() for c in line.strip().strip("|").split("|")]
        for line in out.splitlines() if line.startswith("|")]
def human(n):
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return "%.2f %s" % (n / scale, unit)
    return "%d B" % n
def iso(ns):
    t = datetime.datetime.fromtimestamp(ns // 10**9, datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S") + ".%09dZ" % (ns % 10**9)
checked = bad = 0
for p in truth["pools"]:
    if p["peak_used"] is None:
        continue
    metric = "live" if p["used_source"] == "pairing" else "used"
    want = [p["device"], p["pool"], metric, human(p["peak_used"])]
    hit = [r for r in rows if r[:4] == want and r[4].startswith(iso(p["peak_used_ts"]) + " ")]
    checked += 1
    if not hit:
        print("readme_quickstart: no row", want, "at", iso(p["peak_used_ts"]), file=sys.stderr)
        bad += 1
print("readme_quickstart: %d peaks checked against truth.json, %d missing" % (checked, bad))
sys.exit(1 if bad or not checked else 0)
PY
