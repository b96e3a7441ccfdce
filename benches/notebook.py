#!/usr/bin/env python3
"""A notebook's job, side by side in one run: memq's Python module, DuckDB's Python API and
pandas alone open the same msMemScope dump and answer four questions into pandas DataFrames —
peaks, owner peaks, leak candidates and the breakdown by owner at the pool's peak — and the
answers are checked equal.

    benches/notebook.py [--ci] [--rows N] [--runs R] [--dump FILE.csv] [--pool POOL] [--keep]
                        [--sides memq,duckdb,pandas] [--no-snapshot]

    --rows N      rows asked of memq-gen (default 1000000): `memq-gen -o DIR --events N
                  --devices 1 --oom`, the dump is DIR's device_0 file, kept in $DUMP_CACHE
                  (default ~/.cache/memq-bench-dumps; the same cache, keys and layout as
                  benches/compare.sh)
    --dump FILE   an existing msMemScope dump CSV instead (G3: timestamps in ns)
    --runs R      runs per tool (default $RUNS or 3); the median is reported
    --ci          fast sanity mode: 3000 rows, 1 run
    --pool POOL   the pool of breakdown_at (default PTA)
    --keep        keep the work folder (answers as Parquet, one file per tool and question)
    --no-snapshot skip the second part (a real PyTorch snapshot pickle's true peak)

    /tmp/memq-py-test/bin/python benches/notebook.py --ci        # sanity: 3000 rows, 1 run
    /tmp/memq-py-test/bin/python benches/notebook.py             # 1 M rows, 3 runs

Needs a Python with the memq wheel, pandas, pyarrow and duckdb (e.g. /tmp/memq-py-test, or a
venv with /tmp/wheels-release/*.whl + pandas pyarrow duckdb); every tool runs with this same
interpreter (sys.executable). memq-gen: $MEMQ_GEN, else the first of
~/.cache/memq-release/release, ~/.cache/memq-target/release, ~/.cache/memq-target/debug and PATH.

Each tool runs in its own process (`notebook.py --side memq|duckdb|pandas ...`), one after the
other, the runs interleaved, the dump read into the page cache before each (untimed). Timed:
from the moment the parent starts the process to the moment the child holds its four
DataFrames — interpreter start-up, `import pandas` and the tool, the load, the four answers
(writing them out for the check afterwards is not timed). The load is also given alone:
  memq    memq.open(dump, cache=False)   (ingest into a temporary dataset)
  DuckDB  benches/compare/duckdb/ingest.sql + views.sql on an in-memory database, as
          benches/compare/duck.py runs them ($CSV, $PARQUET replaced; the Parquet copy of
          ingest.sql is written to the work folder)
  pandas  pd.read_csv(dump)  (every column, as `pd.read_csv` is called in a notebook)
Peak RSS: the child's own getrusage(RUSAGE_SELF).ru_maxrss when it holds its answers; the whole
process's (os.wait4, answers written) is printed below the table.

The questions, per (pid, device, pool) series as memq answers them:
  peaks             memq ds.view("peaks") — metrics used, total, live (memq's process_used and
                    device_used have no DuckDB query; compared where both have them)
  owner_peaks       ds.view("owner_peaks")
  leak_candidates   ds.view("leak_candidates")
  breakdown_at      ds.call("breakdown_at", "peak", POOL): each series at its own live peak; DuckDB
                    and pandas take that moment from their own peaks answer
DuckDB runs benches/compare/duckdb/{peaks,owner_peaks,leak_candidates,breakdown_at}.sql; pandas
is the same logic written in pandas (a translation of those files, which implement memq's rules:
docs/formats/memscope.md §5.5, crates/memscope/sql). The answers are compared on key columns and
values, rows sorted (as benches/compare/check.py does); a difference prints MISMATCH and the
script exits 1. Reconciled in the comparison, not in the answers: memq's peaks are compared on
peak_ts_raw (the time as written, what the SQL files return); memq's leak ptr is a number, Ptr's
text (0x...) is parsed for the others; memq's reason 'shadow_after_stop' (an exit fill-in while
collection was stopped) is 'shadow_fill' in views.sql, which keeps the two held fates as one.

Second part (unless --no-snapshot; same runs, same table): the true peak of a real PyTorch
snapshot, fixtures/real/snapshots/real/cuda_transformer_forward.pickle: memq
`memq.open(pickle, cache=False)` + `ds.sql("SELECT device, active_peak, reserved_peak FROM
snap_peak")` against `pickle.load` + pandas replaying the trace the MemoryViz way
(docs/formats/snapshot.md §6.2, as memq's snap_timeline / snap_allocations: allocations from
before the ring-buffer window included). DuckDB has no reader for pickles: it is not in this part.

Exit status: 1 when an answer differs (MISMATCH) or a tool fails, 0 otherwise.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DUCK_SQL = os.path.join(HERE, "compare", "duckdb")
SNAPSHOT = os.path.join(ROOT, "fixtures", "real", "snapshots", "real", "cuda_transformer_forward.pickle")
GEN_ARGS = "--devices 1 --oom"
SIDES = ("memq", "duckdb", "pandas")
TOOL_NAME = {"memq": "memq", "duckdb": "DuckDB", "pandas": "pandas"}
ANSWERS = ("peaks", "owner_peaks", "leak_candidates", "breakdown_at")


# =============================================================================================
# The three notebooks. Each returns (t_imported, t_loaded, {answer: DataFrame}); the caller
# stamps the end of the job.

def side_memq(dump, pool, work):
    import memq
    import pandas as pd  # noqa: F401  (a notebook's first cell; to_pandas needs it)

    t_imported = time.time()
    ds = memq.open(dump, cache=False, progress=False)
    t_loaded = time.time()
    out = {
        "peaks": ds.view("peaks").to_pandas(),
        "owner_peaks": ds.view("owner_peaks").to_pandas(),
        "leak_candidates": ds.view("leak_candidates").to_pandas(),
        "breakdown_at": ds.call("breakdown_at", "peak", pool).to_pandas(),
    }
    side_memq.keep = ds  # the temporary dataset lives until the process ends
    return t_imported, t_loaded, out


def duck_sql(name, params):
    """A file of benches/compare/duckdb with its $KEYs replaced (as benches/compare/duck.py)."""
    with open(os.path.join(DUCK_SQL, name + ".sql"), encoding="utf-8") as f:
        text = f.read()
    for key in sorted(params, key=len, reverse=True):
        text = text.replace("$" + key, params[key])
    return text


def sql_quote(s):
    return "'" + s.replace("'", "''") + "'"


def side_duckdb(dump, pool, work):
    import duckdb
    import pandas as pd

    t_imported = time.time()
    con = duckdb.connect()  # in memory
    con.execute(duck_sql("ingest", {"CSV": sql_quote(dump),
                                    "PARQUET": sql_quote(os.path.join(work, "duckdb-events.parquet"))}))
    con.execute(duck_sql("views", {}))
    t_loaded = time.time()
    peaks = con.execute(duck_sql("peaks", {})).df()
    out = {
        "peaks": peaks,
        "owner_peaks": con.execute(duck_sql("owner_peaks", {})).df(),
        "leak_candidates": con.execute(duck_sql("leak_candidates", {})).df(),
    }
    # breakdown_at(TS, POOL) at each series' own live peak (memq's 'peak'), from the peaks above
    parts = []
    at = peaks[(peaks["pool"] == pool) & (peaks["metric"] == "live")]
    for ts in sorted(set(int(t) for t in at["peak_ts"])):
        df = con.execute(duck_sql("breakdown_at", {"TS": str(ts), "POOL": sql_quote(pool)})).df()
        series = at[at["peak_ts"] == ts][["pid", "device"]]
        parts.append(df.merge(series, on=["pid", "device"]))  # rows of the series peaking at ts
    out["breakdown_at"] = pd.concat(parts, ignore_index=True) if parts else con.execute(
        duck_sql("breakdown_at", {"TS": "0", "POOL": sql_quote(pool)})).df()
    return t_imported, t_loaded, out


def side_pandas(dump, pool, work):
    from collections import defaultdict

    import numpy as np
    import pandas as pd

    t_imported = time.time()
    # Empty cells are missing values, nothing else is (as DuckDB's read_csv): 'N/A' stays a Ptr.
    ev = pd.read_csv(dump, dtype=defaultdict(lambda: str, {"ID": "Int64", "Timestamp(ns)": "Int64"}),
                     keep_default_na=False, na_values=[""])
    t_loaded = time.time()
    ev["row_idx"] = np.arange(len(ev))  # file order: the tie-breaker after the timestamp

    def attr_int(attr, key):
        # ',key:' — never the first key of a MALLOC/FREE Attr, so not req_size, process_used...
        return pd.to_numeric(attr.str.extract(f",{key}:(-?[0-9]+)", expand=False), errors="coerce",
                             dtype_backend="numpy_nullable").astype("Int64")

    def to_pid(s):
        return pd.to_numeric(s, errors="coerce", dtype_backend="numpy_nullable").astype("Int64")

    # --- mem: the MALLOC/FREE rows with an address, memory fields pulled out of Attr
    m = ev[ev["Event"].isin(["MALLOC", "FREE"]) & ev["Ptr"].notna() & (ev["Ptr"] != "N/A")]
    attr = m["Attr"]
    owner = attr.str.extract(",owner:([^,}]*)", expand=False).str.strip(" ")
    mem = pd.DataFrame({
        "row_idx": m["row_idx"], "event": m["Event"], "pool": m["Event Type"], "ts": m["Timestamp(ns)"],
        "pid": to_pid(m["Process Id"]), "device": m["Device Id"], "ptr": m["Ptr"],
        "size": attr_int(attr, "size"), "used": attr_int(attr, "used"), "total": attr_int(attr, "total"),
        "owner": owner.mask(owner == ""), "shadow": attr.str.contains("shadow:true", regex=False, na=False),
    })
    series = ["pid", "device", "pool"]

    # --- blocks: each MALLOC with the next row on its (pid, device, pool, ptr), in time order
    # (ts, then file order; rows without ts last). A FREE with no MALLOC before it is a block
    # without allocation time: no answer below counts those (alloc_ts IS NOT NULL), so they are
    # not built.
    gid = mem.groupby(series + ["ptr"], sort=False, dropna=False).ngroup().to_numpy()
    ts_key = mem["ts"].to_numpy(dtype="int64", na_value=np.iinfo("int64").max)
    k = mem.iloc[np.lexsort((mem["row_idx"].to_numpy(), ts_key, gid))].reset_index(drop=True)
    g = pd.Series(np.sort(gid, kind="stable"))  # gid of k's rows (k is sorted by gid first)
    same1, same2 = g.eq(g.shift(-1)), g.eq(g.shift(-2))
    next_event = k["event"].shift(-1).where(same1)
    next_free = next_event.eq("FREE").fillna(False).astype(bool)
    next_malloc = next_event.eq("MALLOC").fillna(False).astype(bool)
    next_shadow = k["shadow"].shift(-1, fill_value=False).astype(bool) & same1
    next2_malloc = k["event"].shift(-2).where(same2).eq("MALLOC").fillna(False).astype(bool)
    is_malloc = k["event"].eq("MALLOC").to_numpy(bool)
    b = k[is_malloc].rename(columns={"ts": "alloc_ts", "row_idx": "alloc_row", "shadow": "stock"})
    b["size"] = b["size"].fillna(0)
    b["free_kind"] = np.select([next_free & next_shadow, next_free, next_malloc],
                               ["shadow", "real", "replaced"], "none")[is_malloc]
    b["free_ts"] = k["ts"].shift(-1).where(same1)[is_malloc]
    b["ending_row"] = k["row_idx"].astype("Int64").shift(-1).where(same1)[is_malloc]
    b["reused_after_free"] = (next_free & next2_malloc)[is_malloc]

    # --- fates (views.sql block_fates): a shadow FREE followed (at or after its time, same pid)
    # by a START_TRACE released the block while collection was stopped; one whose address is
    # allocated again is a residual fill-in; any other is a fill-in at exit: the block is held.
    mk = ev[(ev["Event"] == "SYSTEM") & ev["Event Type"].isin(["START_TRACE", "STOP_TRACE"])
            & ev["Timestamp(ns)"].notna()]
    markers = pd.DataFrame({"pid": to_pid(mk["Process Id"]), "mts": mk["Timestamp(ns)"].astype("int64"),
                            "marker": mk["Event Type"]}).dropna(subset=["pid"])
    markers["pid"] = markers["pid"].astype("int64")
    sh = b[(b["free_kind"] == "shadow") & b["pid"].notna()][["pid", "free_ts"]]
    b["marker_after"] = None
    if len(sh) and len(markers):
        left = pd.DataFrame({"pid": sh["pid"].astype("int64"), "free_ts": sh["free_ts"].astype("int64"),
                             "i": sh.index}).sort_values("free_ts")
        placed = pd.merge_asof(left, markers.sort_values("mts"), left_on="free_ts", right_on="mts",
                               by="pid", direction="forward")
        b.loc[placed["i"].to_numpy(), "marker_after"] = placed["marker"].to_numpy()
    fk = b["free_kind"]
    b["fate"] = np.select(
        [fk == "real", fk == "replaced", fk == "none", b["marker_after"].eq("START_TRACE").fillna(False).astype(bool),
         b["reused_after_free"]],
        ["released", "replaced", "never_freed", "stop_period_free", "residual_fill_in"], "exit_fill_in")
    b["held_at_end"] = b["fate"].isin(["exit_fill_in", "never_freed"])
    b["end_ts"] = b["free_ts"].mask(b["held_at_end"])
    b["end_row"] = b["ending_row"].mask(b["held_at_end"])
    b = b[b["alloc_ts"].notna()]
    b["owner"] = b["owner"].fillna(pd.Series(np.where(b["stock"], "(stock)", b["pool"]), index=b.index))

    def plus_minus(cols):
        """Each block twice: +size at its MALLOC, -size at the row that really ends it."""
        plus = b[cols].assign(ts=b["alloc_ts"], row_idx=b["alloc_row"], delta=b["size"], allocation=1)
        e = b[b["end_ts"].notna()]
        minus = e[cols].assign(ts=e["end_ts"], row_idx=e["end_row"], delta=-e["size"], allocation=0)
        return pd.concat([plus, minus], ignore_index=True)

    def first_max(df, keys, value, out):
        """Per keys: the highest value and the ts of the first row (ts, then file order) reaching it."""
        top = df.sort_values(keys + [value, "ts", "row_idx"], ascending=[True] * len(keys) + [False, True, True],
                             na_position="last").drop_duplicates(keys)
        return top[keys + [value, "ts"]].rename(columns={value: out, "ts": "peak_ts"})

    # --- peaks: the counters written on the rows (used, total) and live (running sum of blocks)
    d = plus_minus(series).groupby(series + ["ts", "row_idx"], dropna=False)["delta"].sum().reset_index()
    d["value"] = d.groupby(series, dropna=False)["delta"].cumsum()
    pts = [mem[mem[c] >= 0][series + ["ts", "row_idx"]].assign(metric=c, value=mem[c]) for c in ("used", "total")]
    pts.append(d[d["value"] >= 0][series + ["ts", "row_idx", "value"]].assign(metric="live"))
    peaks = first_max(pd.concat(pts, ignore_index=True), series + ["metric"], "value", "peak_bytes")

    # --- owner_peaks: the running sum per owner (ends before allocations on the same row)
    od = plus_minus(series + ["owner"]).sort_values(series + ["owner", "ts", "row_idx", "delta"])
    od["live"] = od.groupby(series + ["owner"], dropna=False)["delta"].cumsum()
    owner_peaks = first_max(od, series + ["owner"], "live", "peak_bytes").merge(
        od.assign(alloc_bytes=od["delta"].where(od["allocation"] == 1))
          .groupby(series + ["owner"], dropna=False)
          .agg(total_bytes=("alloc_bytes", "sum"), blocks=("allocation", "sum"), end_bytes=("delta", "sum"))
          .reset_index(), on=series + ["owner"])

    # --- leak_candidates: blocks still held at the end
    lc = b[b["held_at_end"]].sort_values(series + ["alloc_ts", "alloc_row"])
    leaks = pd.DataFrame({
        "pid": lc["pid"], "device": lc["device"], "pool": lc["pool"], "ptr": lc["ptr"], "size": lc["size"],
        "owner": lc["owner"], "alloc_ts": lc["alloc_ts"],
        "last_shadow_ts": lc["free_ts"].where(lc["free_kind"] == "shadow"),
        "reason": np.where(lc["fate"] == "never_freed", "no_free", "shadow_fill"), "stock": lc["stock"],
    }).reset_index(drop=True)

    # --- breakdown_at(peak, pool): blocks live at each series' own live peak (allocated at or
    # before it, not freed by then), bytes and blocks per owner (duckdb/breakdown_at.sql)
    at = peaks[(peaks["pool"] == pool) & (peaks["metric"] == "live")][series + ["peak_ts"]]
    live = b[b["pool"] == pool].merge(at, on=series)
    live = live[(live["alloc_ts"] <= live["peak_ts"])
                & (live["free_ts"].isna() | (live["free_ts"] > live["peak_ts"])).fillna(False).astype(bool)]
    bd = live.groupby(series + ["owner"], dropna=False).agg(bytes=("size", "sum"), blocks=("size", "size")).reset_index()
    tot = bd.groupby(series, dropna=False)["bytes"].transform("sum")
    bd["share"] = (100.0 * bd["bytes"] / tot.where(tot != 0)).astype("Float64")
    bd = bd.sort_values(series + ["bytes", "owner"], ascending=[True, True, True, False, True])
    return t_imported, t_loaded, {"peaks": peaks.reset_index(drop=True), "owner_peaks": owner_peaks,
                                  "leak_candidates": leaks, "breakdown_at": bd.reset_index(drop=True)}


# --- second part: a real PyTorch snapshot's true peak -----------------------------------------

SNAP_SQL = "SELECT device, active_peak, reserved_peak FROM snap_peak"


def snap_memq(pickle_path, pool, work):
    import memq
    import pandas as pd  # noqa: F401

    t_imported = time.time()
    ds = memq.open(pickle_path, cache=False, progress=False)
    t_loaded = time.time()
    out = {"snap_peak": ds.sql(SNAP_SQL).to_pandas()}
    snap_memq.keep = ds
    return t_imported, t_loaded, out


def snap_pandas(pickle_path, pool, work):
    """The true peaks the MemoryViz way (docs/formats/snapshot.md §6.2; memq's snap_timeline and
    snap_allocations): per device, active = requested bytes of live allocations, starting with
    those made before the trace window (frees of addresses the window never allocated, and final
    live blocks no alloc of the window still holds), +size at `alloc`, -size of the allocation a
    `free_completed` ends; reserved = segment bytes, likewise from segment_alloc/segment_free
    (and segment_map/unmap of expandable segments, as memq). Peak = max(start, every entry)."""
    import pickle

    import numpy as np
    import pandas as pd

    t_imported = time.time()
    with open(pickle_path, "rb") as f:
        snap = pickle.load(f)
    t_loaded = time.time()
    if isinstance(snap, list):  # legacy: a list of segments, no trace
        snap = {"segments": snap, "device_traces": []}
    segs = snap.get("segments") or []
    seg = pd.DataFrame({"device": [s["device"] for s in segs], "address": [s["address"] for s in segs],
                        "total_size": [s["total_size"] for s in segs],
                        "expandable": [bool(s.get("is_expandable", False)) for s in segs]},
                       columns=["device", "address", "total_size", "expandable"])
    live = pd.DataFrame([(s["device"], b["address"], b.get("requested_size", b["size"]))
                         for s in segs for b in s.get("blocks", [])
                         if b.get("state") in ("active_allocated", "active_pending_free", "active_awaiting_free")],
                        columns=["device", "address", "requested_size"])
    tr = pd.DataFrame([(dev, i, e["action"], e.get("addr"), e.get("size", 0))
                       for dev, entries in enumerate(snap.get("device_traces") or []) for i, e in enumerate(entries)],
                      columns=["device", "seq", "action", "addr", "size"])
    tr["addr"] = tr["addr"].astype("Int64") if len(tr) else tr["addr"]

    def paired(actions, opens):
        """Events of `actions` by address in trace order, with the previous one's action and size,
        and whether each is the last on its address."""
        e = tr[tr["action"].isin(actions) & tr["addr"].notna()].sort_values(["device", "addr", "seq"])
        g = e.groupby(["device", "addr"], sort=False)
        e = e.assign(prev_action=g["action"].shift(), prev_size=g["size"].shift(),
                     last=~e.duplicated(["device", "addr"], keep="last"))
        ends = e["action"] != opens
        e["delta"] = np.where(~ends, e["size"], np.where(e["prev_action"].eq(opens).fillna(False).astype(bool),
                                                         -e["prev_size"].fillna(0), -e["size"]))
        # an end with no open before it: made before the window (counted in the start level)
        e["before"] = np.where(ends & ~e["prev_action"].eq(opens).fillna(False).astype(bool), e["size"], 0)
        held = e[e["last"] & ~ends][["device", "addr"]]
        return e, held

    def not_held(final, held, key):
        m = final.merge(held.rename(columns={"addr": key}), on=["device", key], how="left", indicator=True)
        return m[m["_merge"] == "left_only"]

    blk, blk_held = paired(["alloc", "free_completed", "free"], "alloc")
    sg, sg_held = paired(["segment_alloc", "segment_free"], "segment_alloc")
    mp = tr[tr["action"].isin(["segment_map", "segment_unmap"])]
    mp_delta = np.where(mp["action"] == "segment_map", mp["size"], -mp["size"])
    fixed = seg[~seg["expandable"]]
    active_start = (blk.groupby("device")["before"].sum()
                    .add(not_held(live, blk_held, "address").groupby("device")["requested_size"].sum(), fill_value=0))
    reserved_start = (sg.groupby("device")["before"].sum()
                      .add(not_held(fixed, sg_held, "address").groupby("device")["total_size"].sum(), fill_value=0)
                      .add(seg[seg["expandable"]].groupby("device")["total_size"].sum(), fill_value=0)
                      .add(pd.Series(-mp_delta, index=mp["device"]).groupby(level=0).sum(), fill_value=0))
    d = tr[["device", "seq"]].assign(active=0, reserved=0)
    d.loc[blk.index, "active"] = blk["delta"]
    d.loc[sg.index, "reserved"] = sg["delta"]
    d.loc[mp.index, "reserved"] = mp_delta
    d = d.sort_values(["device", "seq"])
    rows = []
    for dev in sorted(set(seg["device"]) | set(tr["device"])):
        a0, r0 = int(active_start.get(dev, 0)), int(reserved_start.get(dev, 0))
        x = d[d["device"] == dev]
        if len(x):
            active_peak = max(a0, a0 + int(x["active"].cumsum().max()))
            reserved_peak = max(r0, r0 + int(x["reserved"].cumsum().max()))
        else:  # no entries: the final state
            active_peak = int(live.loc[live["device"] == dev, "requested_size"].sum())
            reserved_peak = int(seg.loc[seg["device"] == dev, "total_size"].sum())
        rows.append((dev, active_peak, reserved_peak))
    return t_imported, t_loaded, {"snap_peak": pd.DataFrame(rows, columns=["device", "active_peak", "reserved_peak"])}


def run_side(job, side, dump, pool, work):
    """The child: does the job, stamps its end and peak RSS, then writes the answers (untimed)."""
    import resource

    t_imported, t_loaded, out = JOBS[job][side](dump, pool, work)
    t_done = time.time()
    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for name, df in out.items():
        df.to_parquet(os.path.join(work, f"{side}.{name}.parquet"), index=False)
    print(json.dumps({"t_imported": t_imported, "t_loaded": t_loaded, "t_done": t_done, "rss_kib": rss_kib,
                      "rows": {k: len(v) for k, v in out.items()}}))
    sys.stdout.flush()
    return 0


# =============================================================================================
# The parent: inputs, runs, answers, table

def gen_bin():
    cands = [os.environ.get("MEMQ_GEN", "")]
    home = os.path.expanduser("~")
    cands += [os.path.join(home, ".cache", d, "memq-gen") for d in
              ("memq-release/release", "memq-target/release", "memq-target/debug")]
    cands.append(shutil.which("memq-gen") or "")
    for c in cands:
        if c and os.access(c, os.X_OK):
            return c
    sys.exit("notebook.py: no memq-gen (set MEMQ_GEN, or build it: cargo build -p memq-gen)")


def make_dump(n):
    """The device_0 dump of `memq-gen --events n --devices 1 --oom`, cached as benches/compare.sh does."""
    key = subprocess.run(["cksum"], input=f"{n} {GEN_ARGS}\n", capture_output=True, text=True,
                         check=True).stdout.split()[0]
    cache = os.environ.get("DUMP_CACHE", os.path.expanduser("~/.cache/memq-bench-dumps"))
    d = os.path.join(cache, f"{n}-{key}")
    done = os.path.join(d, "done")
    g = gen_bin()
    if not os.path.exists(done) or os.path.getmtime(g) > os.path.getmtime(done):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(cache, exist_ok=True)
        print(f"== generating {n} rows: {g} -o {d} --events {n} {GEN_ARGS}", file=sys.stderr)
        subprocess.run([g, "-o", d, "--events", str(n)] + GEN_ARGS.split(), check=True, stdout=sys.stderr)
        open(done, "w").close()
    for root, _, files in sorted(os.walk(d)):
        if root.endswith(os.path.join("device_0", "dump")):
            for f in sorted(files):
                if f.startswith("memscope_dump_") and f.endswith(".csv"):
                    return os.path.join(root, f)
    sys.exit(f"notebook.py: no device_0 dump in {d}")


def warm(path):
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def run_child(job, side, dump, pool, work):
    """One timed run: returns (times, rss) or None when the child failed."""
    cmd = [sys.executable, os.path.abspath(__file__), "--job", job, "--side", side, "--dump", dump, "--pool", pool,
           "--work", work]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.time()
        p = subprocess.Popen(cmd, stdout=out, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)  # this child's own rusage
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        out, err = out.read(), err.read()
    if p.returncode != 0:
        print(f"FAILED: {side}: exit {p.returncode}\n{err.decode(errors='replace')[-3000:]}", file=sys.stderr)
        return None
    r = json.loads(out.decode().strip().splitlines()[-1])
    return {"job": r["t_done"] - t0, "startup": r["t_imported"] - t0, "load": r["t_loaded"] - r["t_imported"],
            "answers": r["t_done"] - r["t_loaded"], "rss_kib": r["rss_kib"], "process_rss_kib": ru.ru_maxrss,
            "rows": r["rows"]}


# --- answers -----------------------------------------------------------------------------------

KEYS = {
    "peaks": (["pid", "device", "pool", "metric"], ["peak_bytes", "peak_ts"]),
    "owner_peaks": (["pid", "device", "pool", "owner"], ["peak_bytes", "peak_ts", "total_bytes", "blocks", "end_bytes"]),
    "leak_candidates": (["pid", "device", "pool", "ptr", "alloc_ts"], ["size", "owner", "last_shadow_ts", "reason", "stock"]),
    "breakdown_at": (["pid", "device", "pool", "owner"], ["bytes", "blocks", "share"]),
    "snap_peak": (["device"], ["active_peak", "reserved_peak"]),
}


def cell(v):
    """A comparable Python value: None for missing, int for integral numbers, floats to 9 digits."""
    import math
    if v is None:
        return None
    try:
        import pandas as pd
        if pd.isna(v):
            return None
    except (TypeError, ValueError):
        pass
    if isinstance(v, bool) or type(v).__name__ in ("bool", "bool_"):
        return bool(v)
    if isinstance(v, str):
        return v
    if isinstance(v, (int,)) or type(v).__name__.startswith(("int", "uint")):
        return int(v)
    if isinstance(v, float) or type(v).__name__.startswith("float"):
        f = float(v)
        return int(f) if f.is_integer() and abs(f) < 2 ** 53 else float(f"{f:.9g}") if math.isfinite(f) else f
    return v


def normalise(side, name, df, peaks_raw=None):
    """The answer as sorted (key, values) tuples, on the columns the three tools share."""
    keys, vals = KEYS[name]
    df = df.copy()
    if side == "memq":
        if name == "peaks":
            # DuckDB's and pandas' peaks know the metrics used, total and live; memq also lists the
            # counters process_used / device_used when a dump writes them. The time as written.
            df = df[df["metric"].isin(["used", "total", "live"])]
            df["peak_ts"] = df["peak_ts_raw"]
    if name == "leak_candidates":
        # memq's ptr is the address as a number; DuckDB and pandas keep Ptr's text (0x...)
        if side != "memq":
            df["ptr"] = [None if p is None or p != p else int(str(p), 16) for p in df["ptr"]]
        if side == "memq":
            # memq tells an exit fill-in written while collection was stopped apart
            # (shadow_after_stop); views.sql folds both into one held fate ('shadow_fill')
            df["reason"] = df["reason"].replace({"shadow_after_stop": "shadow_fill"})
    rows = []
    for rec in df[keys + vals].itertuples(index=False, name=None):
        rows.append(tuple(cell(v) for v in rec))
    return sorted(rows, key=lambda r: tuple((x is None, str(type(x)), x if x is not None else 0) for x in r))


def compare(work, sides, answers):
    import pandas as pd
    mismatches = 0
    print()
    print("== answers (rows compared on key columns and values, sorted)")
    for name in answers:
        keys, vals = KEYS[name]
        norm = {}
        for side in sides:
            path = os.path.join(work, f"{side}.{name}.parquet")
            norm[side] = normalise(side, name, pd.read_parquet(path)) if os.path.exists(path) else None
        base = "memq" if "memq" in sides else sides[0]
        for other in sides:
            if other == base:
                continue
            a, b = norm[base], norm[other]
            label = f"{name}: {TOOL_NAME[base]} vs {TOOL_NAME[other]}"
            if a is None or b is None:
                print(f"MISMATCH {label}: no answer")
                mismatches += 1
                continue
            if a == b:
                print(f"OK       {label}: {len(a)} rows equal" + (" (EMPTY: nothing was compared)" if not a else ""))
                continue
            mismatches += 1
            nk = len(keys)
            ma = {r[:nk]: r[nk:] for r in a}
            mb = {r[:nk]: r[nk:] for r in b}
            only_a = sorted(set(ma) - set(mb), key=str)
            only_b = sorted(set(mb) - set(ma), key=str)
            diff = sorted((k for k in set(ma) & set(mb) if ma[k] != mb[k]), key=str)
            print(f"MISMATCH {label}: {len(a)} vs {len(b)} rows; {len(only_a)} only in {TOOL_NAME[base]}, "
                  f"{len(only_b)} only in {TOOL_NAME[other]}, {len(diff)} keys with other values"
                  + ("" if len(ma) == len(a) and len(mb) == len(b) else " (duplicate keys)"))
            print(f"         key = {keys}, values = {vals}")
            for k in only_a[:3]:
                print(f"         only {TOOL_NAME[base]}: {k} -> {ma[k]}")
            for k in only_b[:3]:
                print(f"         only {TOOL_NAME[other]}: {k} -> {mb[k]}")
            for k in diff[:5]:
                print(f"         {k}: {TOOL_NAME[base]}={ma[k]} {TOOL_NAME[other]}={mb[k]}")
    print(f"== {mismatches} mismatch(es)")
    return mismatches


STEPS = {
    "dump": [("**notebook job** (start-up, imports, load, 4 answers)", "job"),
             ("start-up + `import pandas` and the tool", "startup"),
             ("load: memq.open (ingest) / ingest.sql + views.sql / pd.read_csv", "load"),
             ("the 4 answers into DataFrames", "answers")],
    "snapshot": [("**true peak of a snapshot** (start-up, imports, load, answer)", "job"),
                 ("start-up + `import pandas` and the tool", "startup"),
                 ("load: memq.open (ingest) / pickle.load", "load"),
                 ("snap_peak into a DataFrame / the MemoryViz replay in pandas", "answers")],
}


def table(job, results, sides, title):
    def med(side, part):
        v = [r[part] for r in results[side]]
        return statistics.median(v) if v else None

    print()
    print(f"### {title}")
    print()
    print("step | tool | median s | peak RSS MiB | s / memq s")
    print("---|---|---:|---:|---:")
    for label, part in STEPS[job]:
        for side in sides:
            s = med(side, part)
            base = med("memq", part) if "memq" in sides else None
            rss = max(r["rss_kib"] for r in results[side]) / 1024 if part == "job" and results[side] else None
            ratio = f"{s / base:.2f}×" if s is not None and base else "—"
            print(f"{label} | {TOOL_NAME[side]} | {'FAILED' if s is None else f'{s:.3f}'} | "
                  f"{'' if rss is None else f'{rss:.0f}'} | {ratio}")
    print()
    print("Seconds: median wall clock from starting the process to holding the answer DataFrames "
          "(writing them out for the check is not timed). Peak RSS: the largest of the runs, the child's "
          "getrusage maximum at that moment; of the whole process (answers written as well): "
          + ", ".join(f"{TOOL_NAME[sd]} {max(r['process_rss_kib'] for r in results[sd]) / 1024:.0f} MiB"
                      for sd in sides if results[sd]) + ".")


def measure(job, path, sides, runs, pool, work):
    """RUNS runs of every side, interleaved, the input read into the page cache before each."""
    results = {s: [] for s in sides}
    failed = False
    for i in range(runs):
        for side in sides:
            warm(path)
            r = run_child(job, side, path, pool, work)
            if r is None:
                failed = True
                continue
            results[side].append(r)
            print(f"  {job} run {i + 1}: {side:6} {r['job']:8.3f} s (load {r['load']:.3f} s)  "
                  f"{r['rss_kib'] / 1024:7.0f} MiB", file=sys.stderr)
    return results, failed


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ci", action="store_true")
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--dump")
    ap.add_argument("--pool", default="PTA")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--sides", default=",".join(SIDES))
    ap.add_argument("--no-snapshot", action="store_true")
    ap.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)
    ap.add_argument("--job", choices=("dump", "snapshot"), default="dump", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)

    if a.side:
        return run_side(a.job, a.side, a.dump, a.pool, a.work)

    runs = a.runs or (1 if a.ci else int(os.environ.get("RUNS", "3")))
    rows = a.rows or (3000 if a.ci else 1000000)
    sides = [s for s in a.sides.split(",") if s]
    bad = [s for s in sides if s not in SIDES]
    if bad:
        sys.exit(f"notebook.py: unknown side(s) {bad}; choose from {','.join(SIDES)}")
    dump = os.path.abspath(a.dump) if a.dump else make_dump(rows)
    if not os.path.isfile(dump):
        sys.exit(f"notebook.py: no dump file {dump}")
    work = tempfile.mkdtemp(prefix="memq-notebook.")
    versions = tool_versions()
    mism = 0
    try:
        size = os.path.getsize(dump)
        print(f"== {dump} ({size / 1e6:.1f} MB), pool {a.pool}, RUNS={runs}, python {sys.executable}",
              file=sys.stderr)
        os.makedirs(os.path.join(work, "dump"))
        results, failed = measure("dump", dump, sides, runs, a.pool, os.path.join(work, "dump"))
        mism += compare(os.path.join(work, "dump"), sides, ANSWERS)
        title = (f"a notebook's job on {os.path.basename(dump)} ({size / 1e6:.1f} MB"
                 + (f", {rows:,} rows asked of memq-gen" if not a.dump else "") + f"), pool {a.pool} — "
                 + versions + f" · {os.cpu_count()} cores · RUNS={runs}")
        table("dump", results, sides, title)
        if results.get("memq"):
            print("Rows of memq's answers: "
                  + ", ".join(f"{k} {v}" for k, v in results["memq"][0]["rows"].items()) + ".")

        snap_sides = [sd for sd in sides if sd in JOBS["snapshot"]]
        if not a.no_snapshot and len(snap_sides) > 1:
            print(f"== {SNAPSHOT} ({os.path.getsize(SNAPSHOT) / 1e6:.1f} MB), RUNS={runs}", file=sys.stderr)
            os.makedirs(os.path.join(work, "snapshot"))
            sres, sfailed = measure("snapshot", SNAPSHOT, snap_sides, runs, a.pool, os.path.join(work, "snapshot"))
            failed = failed or sfailed
            mism += compare(os.path.join(work, "snapshot"), snap_sides, JOB_ANSWERS["snapshot"])
            table("snapshot", sres, snap_sides,
                  f"true peak of a real PyTorch snapshot, {os.path.relpath(SNAPSHOT, ROOT)} "
                  f"({os.path.getsize(SNAPSHOT) / 1e6:.1f} MB) — {versions} · {os.cpu_count()} cores · RUNS={runs}")
            if sres.get("memq"):
                import pandas as pd
                peaks = pd.read_parquet(os.path.join(work, "snapshot", "memq.snap_peak.parquet"))
                print("memq: " + "; ".join(f"device {r.device}: active peak {r.active_peak:,} B, reserved peak "
                                           f"{r.reserved_peak:,} B" for r in peaks.itertuples()) + ".")
        if a.keep:
            print(f"== work folder: {work}", file=sys.stderr)
        return 1 if (mism or failed) else 0
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


def tool_versions():
    code = ("import memq, duckdb, pandas, pyarrow; "
            "print(f'memq {memq.__version__} · DuckDB {duckdb.__version__} · pandas {pandas.__version__} "
            "· pyarrow {pyarrow.__version__}')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return r.stdout.strip() or "versions ?"


JOBS = {"dump": {"memq": side_memq, "duckdb": side_duckdb, "pandas": side_pandas},
        "snapshot": {"memq": snap_memq, "pandas": snap_pandas}}
JOB_ANSWERS = {"dump": ANSWERS, "snapshot": ("snap_peak",)}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
