#!/usr/bin/env bash
# Side by side on the same msMemScope dump: memq, DuckDB (what a user would do instead) and the
# reference aggregate_dump.py. Times every step as a whole process (start-up included; median of
# RUNS runs, peak RSS from /usr/bin/time), checks that the three give the same answers, and
# prints one markdown table per dump.
#
#   benches/compare.sh [options] SIZE|DUMP.csv ...
#
#   SIZE          rows to generate with memq-gen (memq-gen -o DIR --events SIZE $GEN_ARGS); the
#                 dump is DIR's device_0 file; generated dumps are kept in $DUMP_CACHE
#   DUMP.csv      an existing msMemScope dump CSV (the reference reads one CSV)
#   --ci          small CI mode: one dump of $CI_ROWS rows (default 3000), RUNS=1; the reference
#                 is skipped when it cannot be fetched; memq and DuckDB answers are still checked
#   --no-check    time only, do not compare answers
#   --no-ref      skip the reference scripts
#   --memq PATH   memq binary (also MEMQ=...)
#
# Environment: RUNS (3), REF_RUNS (RUNS), MEMQ ($HOME/.cache/memq-release/release/memq),
# MEMQ_GEN (memq-gen next to MEMQ; built there with cargo when missing), GEN_ARGS ("--devices 1 --oom"),
# DUMP_CACHE ($HOME/.cache/memq-bench-dumps), MEMQ_BENCH_VENV ($HOME/.cache/memq-bench-venv: a
# virtualenv with the PyPI package duckdb, created when missing), KEEP=1 keeps the work folder,
# MEMQ_AS_BUILT=1 times MEMQ where it is instead of a copy (see below).
#
# Exit status: 1 when a check finds a MISMATCH or a step fails, 0 otherwise.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bench="$here/benches/compare"

ci=0 check=1 use_ref=1 inputs=()
while [ $# -gt 0 ]; do
  case $1 in
    --ci) ci=1 ;;
    --no-check) check=0 ;;
    --no-ref) use_ref=0 ;;
    --memq) MEMQ=$2; shift ;;
    --memq=*) MEMQ=${1#--memq=} ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "compare.sh: unknown option $1" >&2; exit 2 ;;
    *) inputs+=("$1") ;;
  esac
  shift
done
if [ "$ci" = 1 ]; then
  RUNS=1 REF_RUNS=1
  [ ${#inputs[@]} -gt 0 ] || inputs=("${CI_ROWS:-3000}")
fi
[ ${#inputs[@]} -gt 0 ] || { echo "usage: benches/compare.sh [--ci] [--no-check] [--no-ref] [--memq PATH] SIZE|DUMP.csv ..." >&2; exit 2; }

RUNS=${RUNS:-3}
REF_RUNS=${REF_RUNS:-$RUNS}
MEMQ=${MEMQ:-$HOME/.cache/memq-release/release/memq}
MEMQ_GEN=${MEMQ_GEN:-$(dirname "$MEMQ")/memq-gen}
# where memq was built (memq-gen is built there when missing)
built_dir=$(cd "$(dirname "$MEMQ")" && pwd)
GEN_ARGS=${GEN_ARGS:---devices 1 --oom}
DUMP_CACHE=${DUMP_CACHE:-$HOME/.cache/memq-bench-dumps}
VENV=${MEMQ_BENCH_VENV:-$HOME/.cache/memq-bench-venv}

[ -x "$MEMQ" ] || { echo "compare.sh: no memq binary at $MEMQ (build: CARGO_TARGET_DIR=\$HOME/.cache/memq-release cargo build --release, or pass --memq)" >&2; exit 2; }

# --- DuckDB: a virtualenv with the PyPI package
if ! "$VENV/bin/python" -c 'import duckdb' 2>/dev/null; then
  echo "== creating $VENV with duckdb" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet duckdb
fi
duck=("$VENV/bin/python" "$bench/duck.py")
duck_version=$("$VENV/bin/python" -c 'import duckdb; print(duckdb.__version__)')

# --- the reference (stdlib-only Python, fetched from PyPI by benches/reference.sh)
ref=""
if [ "$use_ref" = 1 ]; then
  oracle="$bench/../reference.sh"
  if [ -f "$oracle" ] && dir=$(bash "$oracle" 2>/dev/null | sed -n 's/^memscope scripts: *//p') \
     && [ -n "$dir" ] && [ -f "$dir/aggregate_dump.py" ]; then
    ref="$dir/aggregate_dump.py"
  elif [ "$ci" = 1 ]; then
    echo "== reference scripts not available: skipped (--ci)" >&2
  else
    echo "compare.sh: cannot fetch the reference scripts ($oracle); use --no-ref to skip them" >&2
    exit 2
  fi
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/memq-compare.XXXXXX")
if [ "${KEEP:-0}" = 1 ]; then echo "== work folder: $work" >&2; else trap 'rm -rf "$work"' EXIT; fi

# memq is timed as a user installs it (`cargo install` copies the binary), like the other tools'
# files: the linker's own output, while the pages it wrote are still in the page cache, is mapped
# in small pieces and starts about 3 ms slower per process (docs/performance.md, "Measuring").
# MEMQ_AS_BUILT=1 times the binary where it was built; --ci does (its debug build is 600 MB).
if [ "$ci" = 0 ] && [ "${MEMQ_AS_BUILT:-0}" != 1 ]; then
  cp "$MEMQ" "$work/memq"
  MEMQ=$work/memq
fi

status=0

# --- the generator
# (when missing, memq-gen is built next to the memq binary: same target folder and profile)
gen_bin() {
  if [ ! -x "$MEMQ_GEN" ]; then
    local dir=$built_dir profile=()
    [ "$(basename "$dir")" = release ] && profile=(--release)
    echo "== building memq-gen into $dir" >&2
    (cd "$here" && CARGO_TARGET_DIR=$(dirname "$dir") cargo build "${profile[@]}" --locked -p memq-gen >&2)
    MEMQ_GEN=$dir/memq-gen
  fi
  echo "$MEMQ_GEN"
}

# make_dump SIZE -> path of the device_0 dump CSV (cached per size and generator arguments)
make_dump() {
  local n=$1 key dir g
  key=$(echo "$n $GEN_ARGS" | cksum | cut -d' ' -f1)
  dir="$DUMP_CACHE/$n-$key"
  g=$(gen_bin)
  if [ ! -f "$dir/done" ] || [ "$g" -nt "$dir/done" ]; then
    rm -rf "$dir"
    mkdir -p "$DUMP_CACHE"
    echo "== generating $n rows: memq-gen -o $dir --events $n $GEN_ARGS" >&2
    # shellcheck disable=SC2086
    "$g" -o "$dir" --events "$n" $GEN_ARGS >&2
    touch "$dir/done"
  fi
  find "$dir" -path '*device_0/dump/memscope_dump_*.csv' | head -1
}

# measure TOOL STEP PREP CMD...: runs CMD RUNS times (REF_RUNS for the reference), PREP (a
# shell function name or :) before each run, untimed; keeps the last run's stdout in
# $out/TOOL.STEP.out; appends "TOOL STEP median_seconds max_rss_kib" to $out/times.
measure() {
  local tool=$1 step=$2 prep=$3; shift 3
  local runs=$RUNS secs=() rss=0 t0 t1 m i
  [ "$tool" = ref ] && runs=$REF_RUNS
  for ((i = 0; i < runs; i++)); do
    "$prep"
    t0=$EPOCHREALTIME
    if ! /usr/bin/time -f "%M" -o "$out/time" "$@" >"$out/$tool.$step.out" 2>"$out/$tool.$step.err"; then
      t1=$EPOCHREALTIME
      echo "FAILED: $tool $step: $*" >&2
      tail -5 "$out/$tool.$step.err" >&2
      echo "$tool $step FAILED 0" >>"$out/times"
      status=1
      return 0
    fi
    t1=$EPOCHREALTIME
    m=$(tail -1 "$out/time")
    secs+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }')")
    [ "$m" -gt "$rss" ] && rss=$m
  done
  local med
  med=$(printf '%s\n' "${secs[@]}" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
  echo "$tool $step $med $rss" >>"$out/times"
  printf '  %-5s %-16s %9.3f s %8d KiB\n' "$tool" "$step" "$med" "$rss" >&2
}

# pick FILE COLUMN [FILTERS] -> one value out of a CSV result (see check.py pick)
pick() { python3 "$bench/check.py" pick "$@"; }

nothing() { :; }

for input in "${inputs[@]}"; do
  if [[ $input =~ ^[0-9]+$ ]]; then dump=$(make_dump "$input"); else dump=$input; fi
  [ -f "$dump" ] || { echo "compare.sh: no dump file $dump" >&2; exit 2; }
  n_input=$(( ${n_input:-0} + 1 ))
  out="$work/$n_input-$(basename "$dump" .csv)"
  mkdir -p "$out"
  : >"$out/times"
  bytes=$(stat -c %s "$dump")
  echo "== $dump ($bytes bytes), RUNS=$RUNS" >&2

  # Every tool's ingest starts with the dump in the page cache (a cold first read would be
  # charged to whichever tool runs first: 30 s instead of 20 s for memq at 10 M rows).
  warm() { cat "$dump" >/dev/null; }

  # --- memq
  memq_rm() { rm -rf "$out/d.memq"; warm; }
  measure memq ingest memq_rm "$MEMQ" ingest "$dump" -o "$out/d.memq"
  mq() { local step=$1; shift; measure memq "$step" nothing "$MEMQ" sql "$out/d.memq" --format csv -e "$*"; }
  mq stats "SELECT * FROM stats"
  mq peaks "SELECT * FROM peaks"
  # the parameters of breakdown_at and window_summary: the PTA used peak, the time range
  peak_ts=$(pick "$out/memq.peaks.out" peak_ts pool=PTA metric=used || true)
  first=$(pick "$out/memq.stats.out" first_ts min || true)
  last=$(pick "$out/memq.stats.out" last_ts max || true)
  if [ -z "$peak_ts" ] || [ -z "$first" ] || [ -z "$last" ]; then
    echo "compare.sh: could not read the peak time / time range from memq's answers" >&2
    exit 1
  fi
  mid=$(( first + (last - first) / 2 ))
  echo "  PTA used peak at $peak_ts; time range $first .. $last (mid $mid)" >&2
  printf 'peak_ts=%s\nfirst=%s\nlast=%s\nmid=%s\nbytes=%s\ndump=%s\ninput=%s\n' "$peak_ts" "$first" "$last" "$mid" "$bytes" "$dump" "$input" >"$out/params"
  mq owner_peaks "SELECT * FROM owner_peaks"
  mq leak_candidates "SELECT * FROM leak_candidates"
  mq breakdown_at "SELECT * FROM breakdown_at($peak_ts, 'PTA')"
  mq fragmentation "SELECT * FROM fragmentation"
  mq trend "SELECT * FROM trend(20, 'PTA')"
  mq window_summary "SELECT * FROM window_summary($first, $mid, 'PTA')"
  mq step_peaks "SELECT * FROM step_peaks"
  mq oom_findings "SELECT * FROM oom_findings"
  mq hal_segments "SELECT * FROM hal_segments(1048576)"

  # --- DuckDB
  duck_rm() { rm -f "$out/d.duckdb" "$out/d.duckdb.wal" "$out/d.parquet"; warm; }
  measure duckdb ingest duck_rm "${duck[@]}" ingest "$dump" "$out/d.duckdb" "$out/d.parquet"
  dq() { local step=$1; shift; measure duckdb "$step" nothing "${duck[@]}" query "$out/d.duckdb" "$step" "$@"; }
  dq stats
  dq peaks
  dq owner_peaks
  dq leak_candidates
  dq breakdown_at TS="$peak_ts" POOL="'PTA'"
  dq fragmentation
  dq trend BUCKETS=20 POOL="'PTA'"
  dq window_summary T0="$first" T1="$mid" POOL="'PTA'"
  dq step_peaks
  dq oom_findings
  dq hal_segments MIN_BYTES=1048576

  # --- the reference, on a copy it sorts in place
  if [ -n "$ref" ]; then
    ref_copy() { cp "$dump" "$out/ref.csv"; }
    measure ref ingest ref_copy python3 "$ref" "$out/ref.csv" --sort --overwrite
    rq() { local step=$1; shift; measure ref "$step" nothing python3 "$ref" "$out/ref.csv" "$@"; }
    rq stats --stats
    rq peaks --peak --pool PTA
    rq owner_peaks --group-by owner --pool PTA
    rq leak_candidates --leak-candidates
    rq breakdown_at --at-timestamp "$peak_ts" --pool PTA
    rq fragmentation --fragmentation
    rq trend --trend --pool PTA
    rq window_summary --window "$first" "$mid" --pool PTA
    rq oom_findings --oom
    rq hal_segments --hal-segments --min-size 1MB
  fi

  # --- answers and table
  if [ "$check" = 1 ]; then
    # extra DuckDB queries, untimed: the reference's own rules where it is documented to differ
    if [ -n "$ref" ]; then
      "${duck[@]}" query "$out/d.duckdb" ref_rules TS="$peak_ts" POOL="'PTA'" >"$out/duckdb.ref_rules.out" 2>"$out/duckdb.ref_rules.err" || true
    fi
    python3 "$bench/check.py" check "$out" || status=1
  fi
  python3 "$bench/check.py" table "$out" "$("$MEMQ" --version 2>/dev/null | head -1 || echo 'memq ?') · DuckDB $duck_version · $(nproc) cores · RUNS=$RUNS"
  # the interactive shell on the same dataset: time from `memq DATASET` to its prompt, in a pty
  # (benches/repl_open.py; its first start is left out)
  if opened=$(python3 "$here/benches/repl_open.py" "$MEMQ" "$out/d.memq" "$RUNS"); then
    sed -n 's/^reopening the cached dataset, /The shell (`memq DATASET`) shows its prompt in: /p' <<<"$opened"
  else
    status=1
  fi
done
exit "$status"
