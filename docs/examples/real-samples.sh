#!/bin/bash
# The attribution analyses (docs/attribution.md), each answering a question on a real sample
# from fixtures/real: who holds the peak, state at a moment, run against run (aligned on
# ops), periodic leaks, device or host, wasted memory, and the snapshot side.
#   docs/examples/real-samples.sh [WORKDIR]     (MEMQ=path/to/memq to choose the binary)
M=${MEMQ:-memq}
F=$(cd "$(dirname "$0")/../../fixtures/real" && pwd)
W=${1:-$(mktemp -d)}
set -e
mkdir -p "$W" && cd "$W"
$M ingest $F/memscope/real/v2_compare_baseline.csv $F/memscope/real/v2_compare_leaks.csv -o cmp.memq --force >/dev/null 2>&1
$M ingest $F/memscope/insight/leaks_dump_msinsight.db -o ins.memq --force >/dev/null 2>&1
$M ingest $F/memscope/insight/memscope_host_pinned.db -o pin.memq --force >/dev/null 2>&1
$M ingest $F/snapshots/real/cuda_transformer_forward.pickle -o tf.memq --force >/dev/null 2>&1
$M ingest $F/snapshots/real/torch_npu_two_devices.pkl $F/snapshots/real/cuda_list_format.pkl -o two.memq --force >/dev/null 2>&1
q() { echo; echo "### $1"; echo '$ memq sql '"$2"' -e "'"$3"'"'; $M sql "$2" -e "$3" 2>&1 | head -${4:-14}; }
q "Who holds the HAL peak of the leaks run? (no owners or stacks were collected: the blocks and their ages)" cmp.memq "SELECT source, pool, fmt_bytes(peak_bytes) peak, hex(ptr) ptr, fmt_bytes(size) size, alloc_ts, category, COALESCE(user_frame, '-') user_frame FROM peak_blocks WHERE source LIKE '%leaks%' AND pool = 'HAL' ORDER BY size DESC LIMIT 5"
q "The peak split by category, static vs dynamic (real Insight db)" ins.memq "SELECT pool, dimension, key, fmt_bytes(bytes) bytes, fmt_bytes(static_bytes) static, fmt_bytes(dynamic_bytes) dynamic FROM peak_split WHERE dimension = 'category' ORDER BY bytes DESC LIMIT 6"
q "State at the last row of the leaks run: what is still held, per pool" cmp.memq "SELECT source, pool, kind, owner, fmt_bytes(bytes) bytes, blocks, fmt_bytes(used) used, fmt_bytes(total) total FROM mem_state_at((SELECT CAST(max(ts) AS VARCHAR) FROM events WHERE source LIKE '%leaks%')) WHERE source LIKE '%leaks%' AND kind IN ('pool', 'owner') ORDER BY kind, pool"
q "Which op does the leaks run add, and what does it allocate?" cmp.memq "SELECT key, point, a_pos, b_pos, fmt_bytes(a_alloc) a, fmt_bytes(b_alloc) b, status FROM run_diff('v2_compare_baseline.csv', 'v2_compare_leaks.csv', 'op') WHERE dimension = 'point' AND status <> 'same' ORDER BY point"
q "Run against run per owner over the whole runs" cmp.memq "SELECT key, fmt_bytes(a_alloc) a_alloc, fmt_bytes(b_alloc) b_alloc, fmt_bytes(a_held_end) a_held, fmt_bytes(b_held_end) b_held, status FROM run_diff('v2_compare_baseline.csv', 'v2_compare_leaks.csv') WHERE dimension = 'owner' AND step IS NULL"
q "Periodic leaks: memory allocated in one step and still held steps later (real Insight db, 49 steps from MSTX ranges)" ins.memq "SELECT pool, device, owner, blocks, first_step, last_step, fmt_bytes(held_last) held_last, fmt_bytes(growth_per_step) growth_per_step, r2, confidence FROM step_leaks ORDER BY growth_per_step DESC"

q "Device or host, per step: which pool grows (real Insight db; it recorded no host pool)" ins.memq "SELECT device, step, fmt_bytes(hal_end) hal_end, fmt_bytes(framework_end) framework_end, host_pool, fmt_bytes(hal_growth) hal_growth, fmt_bytes(framework_growth) framework_growth FROM device_host_steps WHERE step IN (1, 2, 48, 49) ORDER BY device, step"
q "Wasted memory (the real dumps have no ACCESS rows and no inefficient Attr: nothing listed)" ins.memq "SELECT count(*) AS rows FROM wasted_memory"
q "The true snapshot peak's largest live blocks and their user frames (real CUDA transformer)" tf.memq "SELECT device, fmt_bytes(peak_bytes) peak, rank, fmt_bytes(size) size, pct_of_peak, user_frame FROM snap_peak_blocks ORDER BY rank LIMIT 5"
q "The snapshot peak by category (categorize on the user frame; real CUDA transformer)" tf.memq "SELECT categorize(NULL, user_frame) category, count(*) blocks, fmt_bytes(sum(size)) bytes FROM snap_peak_blocks GROUP BY 1 ORDER BY sum(size) DESC"
q "Memory per annotation stage (real CUDA transformer)" tf.memq "SELECT * FROM snap_stage_memory LIMIT 4"
q "Snapshot state just after trace entry 8226, the active peak (real CUDA transformer)" tf.memq "SELECT kind, count(*) n, fmt_bytes(sum(size)) bytes FROM state_at(8226) GROUP BY kind ORDER BY kind"
q "Two snapshots by stack: only in A / only in B / changed" two.memq "SELECT kind, status, count(*) n, fmt_bytes(sum(abs(diff_bytes))) changed_bytes FROM snap_compare('torch_npu_two_devices.pkl', 'cuda_list_format.pkl') GROUP BY kind, status ORDER BY kind, status"
