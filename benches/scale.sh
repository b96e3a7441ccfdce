#!/usr/bin/env bash
# Scale-out figures (docs/scale-out.md): a generated job of NODES × RANKS_PER_NODE ranks with
# EVENTS dump rows per rank; its ingest (time, peak RSS, input and dataset size); then every
# cross-rank analysis locally and on a local Ballista cluster with 1 and 2 executors (time per
# query as a whole `memq sql` process, peak RSS of each process), the answers checked equal
# after sorting their rows.
#
#   benches/scale.sh            # 8 nodes × 8 ranks × 1 M events (about 11 GiB of CSV)
#   NODES=2 RANKS_PER_NODE=4 EVENTS=100000 benches/scale.sh
#
# Environment: MEMQ ($HOME/.cache/memq-release/release/memq), MEMQ_GEN (beside MEMQ), WORK
# ($HOME/.cache/memq-scale: the job and its dataset are kept there, and reused when the same
# size is asked again), CONCURRENCY (2 tasks per executor), PORT (50150: scheduler; executors
# take the ports above it). When the disk cannot hold the job (about 190 bytes per event of CSV
# plus a third of that for the dataset), the rank count is lowered and the table says so.
#
# Exit status: 1 when an answer differs between local and cluster, or a step fails.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
MEMQ=${MEMQ:-$HOME/.cache/memq-release/release/memq}
MEMQ_GEN=${MEMQ_GEN:-$(dirname "$MEMQ")/memq-gen}
NODES=${NODES:-8} RANKS_PER_NODE=${RANKS_PER_NODE:-8} EVENTS=${EVENTS:-1000000}
CONCURRENCY=${CONCURRENCY:-2} PORT=${PORT:-50150}
WORK=${WORK:-$HOME/.cache/memq-scale}
ANALYSES=(job_ranks rank_peaks rank_step_heat step_skew job_peak rank_leaks)
for bin in "$MEMQ" "$MEMQ_GEN"; do
  [ -x "$bin" ] || { echo "missing $bin: cargo build --release -p memq -p memq-gen (CARGO_TARGET_DIR=$HOME/.cache/memq-release)" >&2; exit 1; }
done
mkdir -p "$WORK"

# What the disk holds: bytes per event of CSV (measured on memq-gen output) plus the dataset.
need_per_rank=$(( EVENTS * 190 * 4 / 3 ))
free=$(df -B1 --output=avail "$WORK" | tail -1)
ranks=$(( NODES * RANKS_PER_NODE ))
note=""
if [ $(( need_per_rank * ranks )) -gt $(( free * 9 / 10 )) ]; then
  fit=$(( free * 9 / 10 / need_per_rank / RANKS_PER_NODE ))
  [ "$fit" -ge 1 ] || { echo "the disk holds less than one node of this job" >&2; exit 1; }
  note="(asked for $NODES nodes; the disk holds $fit)"
  NODES=$fit
  ranks=$(( NODES * RANKS_PER_NODE ))
fi
job="$WORK/job-${NODES}x${RANKS_PER_NODE}-$EVENTS"
ds="$job.memq"
out="$WORK/out"
rm -rf "$out"; mkdir -p "$out"

secs() { python3 -c "import sys; print(f'{float(sys.argv[1]):.2f}')" "$1"; }
# Runs a command under /usr/bin/time; sets T (seconds) and RSS (MiB).
timed() {
  /usr/bin/time -f "%e %M" -o "$out/time" "$@"
  read -r T kb < "$out/time"
  RSS=$(( kb / 1024 ))
}

if [ ! -f "$job/job_truth.json" ]; then
  rm -rf "$job"
  timed "$MEMQ_GEN" -o "$job" --nodes "$NODES" --ranks-per-node "$RANKS_PER_NODE" --events "$EVENTS"
  gen_t=$T
else
  gen_t="(kept)"
fi
input_bytes=$(du -sb "$job" | cut -f1)
rm -rf "$ds"
timed "$MEMQ" ingest "$job" -o "$ds"
ingest_t=$T ingest_rss=$RSS
ds_bytes=$(du -sb "$ds" | cut -f1)
rows=$("$MEMQ" sql "$ds" --format csv -e "SELECT SUM(rows) FROM sources" | tail -1)

# One query as a whole process; its rows sorted into FILE.
query() { # NAME FILE [--cluster URL]
  local name=$1 file=$2; shift 2
  timed "$MEMQ" sql "$@" "$ds" --format csv -o "$out/raw.csv" -e "SELECT * FROM $name" >/dev/null 2>"$out/err" || {
    cat "$out/err" >&2; return 1; }
  { head -1 "$out/raw.csv"; tail -n +2 "$out/raw.csv" | LC_ALL=C sort; } > "$file"
}

declare -A local_t local_rss c1_t c1_rss c2_t c2_rss
for a in "${ANALYSES[@]}"; do
  query "$a" "$out/$a.local.csv"
  local_t[$a]=$T local_rss[$a]=$RSS
done

pids=()
stop_cluster() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; pids=(); }
trap stop_cluster EXIT
hwm() { awk '/VmHWM/ {print int($2/1024)}' "/proc/$1/status" 2>/dev/null || echo "?"; }
start_executor() { # N
  local n=$1
  "$MEMQ" cluster executor --scheduler "df://127.0.0.1:$PORT" --concurrency "$CONCURRENCY" \
    --bind 127.0.0.1 --port $(( PORT + 2 * n - 1 )) --grpc-port $(( PORT + 2 * n )) \
    --work-dir "$out/exec$n" >"$out/exec$n.log" 2>&1 &
  pids+=($!)
}
mkdir -p "$out/exec1" "$out/exec2"
"$MEMQ" cluster scheduler --bind "127.0.0.1:$PORT" >"$out/scheduler.log" 2>&1 &
pids+=($!)
sleep 2
start_executor 1
sleep 3
status=0
for a in "${ANALYSES[@]}"; do
  query "$a" "$out/$a.c1.csv" --cluster "df://127.0.0.1:$PORT"
  c1_t[$a]=$T c1_rss[$a]=$RSS
  cmp -s "$out/$a.local.csv" "$out/$a.c1.csv" || { echo "MISMATCH $a: local vs 1 executor" >&2; status=1; }
done
sched_rss1=$(hwm "${pids[0]}") exec1_rss1=$(hwm "${pids[1]}")
start_executor 2
sleep 3
for a in "${ANALYSES[@]}"; do
  query "$a" "$out/$a.c2.csv" --cluster "df://127.0.0.1:$PORT"
  c2_t[$a]=$T c2_rss[$a]=$RSS
  cmp -s "$out/$a.local.csv" "$out/$a.c2.csv" || { echo "MISMATCH $a: local vs 2 executors" >&2; status=1; }
done
sched_rss=$(hwm "${pids[0]}") exec1_rss=$(hwm "${pids[1]}") exec2_rss=$(hwm "${pids[2]}")
stop_cluster

gib() { python3 -c "import sys; print(f'{int(sys.argv[1])/2**30:.2f} GiB')" "$1"; }
echo
echo "## Job of $ranks ranks ($NODES nodes × $RANKS_PER_NODE) × $EVENTS events per rank $note"
echo
echo "$(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/2^20}' /proc/meminfo); memq $("$MEMQ" --version | awk '{print $2}')"
echo
echo "| step | figure |"
echo "|---|---|"
echo "| generate (memq-gen) | $gen_t s |"
echo "| input | $(gib "$input_bytes"), $rows rows |"
echo "| ingest | $(secs "$ingest_t") s ($(python3 -c "print(f'{$input_bytes/2**20/$ingest_t:.0f}')") MiB/s), peak RSS $ingest_rss MiB |"
echo "| dataset | $(gib "$ds_bytes") ($(python3 -c "print(f'{$ds_bytes/$input_bytes*100:.0f}')") % of the input) |"
echo
echo "| analysis | rows | local s (RSS MiB) | 1 executor s (client RSS) | 2 executors s (client RSS) | same answers |"
echo "|---|---|---|---|---|---|"
for a in "${ANALYSES[@]}"; do
  n=$(( $(wc -l < "$out/$a.local.csv") - 1 ))
  same=yes
  cmp -s "$out/$a.local.csv" "$out/$a.c1.csv" && cmp -s "$out/$a.local.csv" "$out/$a.c2.csv" || same=NO
  echo "| $a | $n | $(secs "${local_t[$a]}") (${local_rss[$a]}) | $(secs "${c1_t[$a]}") (${c1_rss[$a]}) | $(secs "${c2_t[$a]}") (${c2_rss[$a]}) | $same |"
done
echo
echo "Peak RSS of the cluster processes: scheduler $sched_rss MiB; executor 1 $exec1_rss1 MiB after the 1-executor round, $exec1_rss MiB at the end; executor 2 $exec2_rss MiB (concurrency $CONCURRENCY each)."
exit $status
