#!/usr/bin/env python3
"""Independent figures for the msMemScope 26.x fixtures (tests/it/memscope_26.rs).

Plain python3, standard library only (csv, json, os, re), no memq code. Reads the raw files of
fixtures/memscope/v26/ (their origin: fixtures/memscope/v26/README.md) and writes
tests/oracle/memscope_26.json (deterministic: re-running gives the same bytes).

    python3 tests/oracle/memscope_26.py            # rewrites tests/oracle/memscope_26.json
    python3 tests/oracle/memscope_26.py --stdout   # prints the JSON instead

The rules are the tool's own, read from its source (Ascend/msmemscope @ f069acf), not memq's:

* Blocks are tied together by the tool's `allocation_id` (csrc/analysis/dump.cpp
  Dump::DumpMemoryEvent prints the block state's id on every row of the block), not by address.
* A stream is paired only when MALLOC and FREE rows were both dumped: with rows of both kinds,
  or when the capture's config.json says dumpEventType has bits 0 (alloc) and 1 (free)
  (Dump::ShouldDumpEvent). Otherwise nothing can be concluded about leaks or live bytes:
  `leak_candidates` and `live_peaks` are null.
* A shadow FREE (Attr shadow:true) is judged by docs/formats/memscope.md §5.5, from the source:
  a START_TRACE at or after it and before any STOP_TRACE → a free during a stop period, flushed
  at that start() (MemoryStateManager::PromoteShadowStates); another block's MALLOC on the same
  (pid, pool, address) between this block's MALLOC and the FREE → the RESIDUAL_BLOCK fill-in
  (event_router.cpp AppendCleanUpFreeEvent, stamped when the tool handles that MALLOC), the
  block ended at that MALLOC; the last marker before it a STOP_TRACE and none after → exit
  while stopped (stamped last stop + 1 ns, HandleShadowEvent / AppendCleanUpFreeEvent):
  held; anything else → the PROC_EXIT fill-in of a block never freed: held.
* Live bytes of a series (pid, device, pool): +size at a block's MALLOC, -size where it ends
  (its FREE, or the MALLOC that reused its address), nothing for a block held at the end;
  rows in time order, file order for equal times; the peak is the highest value after a row,
  the first row reaching it wins.

Sizes in bytes, times in ns since the Unix epoch as written.
"""

import csv
import json
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
FIXTURES = os.path.join(ROOT, "fixtures", "memscope", "v26")
OUT = os.path.join(ROOT, "tests", "oracle", "memscope_26.json")

HEADER = [
    "ID", "Event", "Event Type", "Name", "Timestamp(ns)", "Process Id", "Thread Id",
    "Device Id", "Ptr", "Attr", "Call Stack(Python)", "Call Stack(C)",
]
KEY = re.compile(r"(?:^|,)\s*([A-Za-z_][A-Za-z0-9_ ]*):")


def attr_items(text):
    """The Attr cell's key/value pairs: a key is the text between a comma and a colon (so a
    value may hold commas, as inefficient_type:a,b does); the first key starts the body."""
    body = text.strip()
    if body.startswith("{"):
        body = body[1:]
    if body.endswith("}"):
        body = body[:-1]
    keys = list(KEY.finditer(body))
    out = {}
    for i, m in enumerate(keys):
        end = keys[i + 1].start() if i + 1 < len(keys) else len(body)
        out[m.group(1).strip()] = body[m.end():end].strip()
    return out


def read_dump(path):
    with open(path, newline="", encoding="utf-8") as f:
        raw = list(csv.reader(f))
    assert raw[0] == HEADER, f"{path}: header {raw[0]}"
    rows = []
    for n, cells in enumerate(raw[1:], start=1):
        assert len(cells) == len(HEADER), f"{path} row {n}: {len(cells)} fields"
        r = dict(zip(HEADER, cells))
        r["row"] = n
        r["id"] = int(r["ID"])
        r["ts"] = int(r["Timestamp(ns)"])
        r["pid"] = int(r["Process Id"])
        r["attr"] = attr_items(r["Attr"]) if r["Attr"] else {}
        rows.append(r)
    return rows


def config_of(path):
    """dumpEventType of the config.json of the project folder holding `path`, if any."""
    d = os.path.dirname(path)
    while d.startswith(FIXTURES) and d != FIXTURES:
        c = os.path.join(d, "config.json")
        if os.path.exists(c):
            with open(c, encoding="utf-8") as f:
                return json.load(f).get("dumpEventType")
        d = os.path.dirname(d)
    return None


def num(v):
    return int(v) if v is not None and re.fullmatch(r"[+-]?\d+", v) else None


def blocks_of(rows):
    """Every block with a MALLOC, keyed by (pid, allocation_id), with its fate."""
    memory = [r for r in rows if r["Event"] in ("MALLOC", "FREE")]
    markers = sorted(
        (r["ts"], r["Event Type"], r["pid"])
        for r in rows
        if r["Event"] == "SYSTEM" and r["Event Type"] in ("START_TRACE", "STOP_TRACE")
    )
    mallocs = {}
    frees = {}
    for r in memory:
        k = (r["pid"], int(r["attr"]["allocation_id"]))
        (mallocs if r["Event"] == "MALLOC" else frees)[k] = r
    order = lambda r: (r["ts"], r["row"])  # noqa: E731
    out = []
    for k, m in sorted(mallocs.items(), key=lambda kv: order(kv[1])):
        f = frees.get(k)
        same_key = sorted(
            (x for x in mallocs.values()
             if x is not m and (x["pid"], x["Event Type"], x["Ptr"]) == (m["pid"], m["Event Type"], m["Ptr"])
             and order(x) > order(m)),
            key=order,
        )
        reuse = same_key[0] if same_key else None
        end, fate = None, None
        if f is None:
            fate, end = ("replaced", reuse) if reuse else ("never_freed", None)
        elif f["attr"].get("shadow") != "true":
            fate, end = "released", f
        else:
            mine = [(t, kind) for (t, kind, pid) in markers if pid == m["pid"]]
            after = [kind for (t, kind) in mine if t >= f["ts"]]
            before = [kind for (t, kind) in mine if t < f["ts"]]
            if after and after[0] == "START_TRACE":
                fate, end = "stop_period_free", f
            elif reuse and order(reuse) <= order(f):
                fate, end = "residual_fill_in", reuse
            elif before and before[-1] == "STOP_TRACE" and not after:
                fate = "exit_while_stopped"
            else:
                fate = "exit_fill_in"
        out.append({
            "pid": m["pid"],
            "device": m["Device Id"],
            "pool": m["Event Type"],
            "ptr": m["Ptr"],
            "allocation_id": k[1],
            "size": int(m["attr"]["size"]),
            "alloc_ts": m["ts"],
            "alloc_row": m["row"],
            "stock": m["attr"].get("shadow") == "true",
            "fate": fate,
            "held_at_end": end is None,
            "end_ts": end["ts"] if end else None,
            "end_row": end["row"] if end else None,
        })
    lone = sorted(k for k in frees if k not in mallocs)
    return out, lone


REASON = {"never_freed": "no_free", "exit_while_stopped": "shadow_after_stop", "exit_fill_in": "shadow_fill"}


def live_peaks(blocks):
    deltas = {}
    for b in blocks:
        series = (b["pid"], b["device"], b["pool"])
        deltas.setdefault(series, []).append(((b["alloc_ts"], b["alloc_row"]), b["size"]))
        if not b["held_at_end"]:
            deltas[series].append(((b["end_ts"], b["end_row"]), -b["size"]))
    out = []
    for series, ds in sorted(deltas.items()):
        level, peak, at = 0, 0, None
        by_row = {}
        for pos, d in ds:
            by_row[pos] = by_row.get(pos, 0) + d
        for pos in sorted(by_row):
            level += by_row[pos]
            if level > peak:
                peak, at = level, pos[0]
        out.append({"pid": series[0], "device": series[1], "pool": series[2], "peak_bytes": peak, "peak_ts": at})
    return out


def counter_peaks(rows):
    """Highest used / total the tool wrote per series (pool rows only; shadow rows have none)."""
    best = {}
    for r in rows:
        if r["Event"] not in ("MALLOC", "FREE"):
            continue
        for metric in ("used", "total"):
            v = num(r["attr"].get(metric))
            if v is None or v < 0:
                continue
            k = (r["pid"], r["Device Id"], r["Event Type"], metric)
            if k not in best or v > best[k][0]:
                best[k] = (v, r["ts"])
    return [
        {"pid": k[0], "device": k[1], "pool": k[2], "metric": k[3], "peak_bytes": v[0]}
        for k, v in sorted(best.items())
    ]


def figures(rel):
    path = os.path.join(FIXTURES, rel)
    rows = read_dump(path)
    by_event = {}
    for r in rows:
        key = f"{r['Event']}/{r['Event Type']}"
        by_event[key] = by_event.get(key, 0) + 1
    malloc_rows = sum(1 for r in rows if r["Event"] == "MALLOC")
    free_rows = sum(1 for r in rows if r["Event"] == "FREE")
    dump_event_type = config_of(path)
    if malloc_rows and free_rows:
        pairing = "paired"
    elif (malloc_rows or free_rows) and dump_event_type is not None and dump_event_type & 3 == 3:
        pairing = "paired"
    elif malloc_rows:
        pairing = "malloc_only"
    elif free_rows:
        pairing = "free_only"
    else:
        pairing = "none"
    blocks, lone = blocks_of(rows)
    paired = pairing == "paired"
    fig = {
        "file": os.path.relpath(path, ROOT),
        "rows": len(rows),
        "rows_by_event": dict(sorted(by_event.items())),
        "malloc_rows": malloc_rows,
        "free_rows": free_rows,
        "dump_event_type": dump_event_type,
        "pairing": pairing,
        "frees_without_malloc": len(lone),
        "blocks": blocks,
        "leak_candidates": [
            {"pool": b["pool"], "ptr": b["ptr"], "size": b["size"], "reason": REASON[b["fate"]], "stock": b["stock"]}
            for b in blocks if b["held_at_end"]
        ] if paired else None,
        "live_peaks": live_peaks(blocks) if paired else None,
        "counter_peaks": counter_peaks(rows),
        "trace_markers": [
            {"event_type": r["Event Type"], "ts": r["ts"],
             "free": num(r["attr"].get("free")), "total": num(r["attr"].get("total"))}
            for r in sorted(rows, key=lambda r: (r["ts"], r["row"]))
            if r["Event"] == "SYSTEM" and r["Event Type"] in ("START_TRACE", "STOP_TRACE")
        ],
        "clean_up_rows": sum(1 for r in rows if r["Event"] == "CLEAN_UP"),
        "snapshots": [],
        "inefficient": [],
        "oom": [],
    }
    for r in sorted(rows, key=lambda r: (r["ts"], r["row"])):
        a = r["attr"]
        first = lambda *ks: next((a[k] for k in ks if k in a), None)  # noqa: E731
        if r["Event"] == "SNAPSHOT":
            fig["snapshots"].append({
                "name": r["Name"],
                "total_mem": num(first("total_mem", "total")),
                "free_mem": num(first("free_mem", "free")),
                "reserved": num(first("reserved")),
                "peak_reserved": num(first("peak_reserved", "max_reserved")),
                "allocated": num(first("allocated")),
                "peak_allocated": num(first("peak_allocated", "max_allocated")),
                "device_utilization": first("device_utilization", "device_rate"),
                "pt_utilization": first("pt_utilization", "reserved_rate"),
                "spelling": "doc" if ("total_mem" in a or "free_mem" in a) else "writer",
            })
        if r["Event"] == "MALLOC" and "inefficient_type" in a:
            fig["inefficient"].append({
                "allocation_id": int(a["allocation_id"]),
                "pool": r["Event Type"],
                "kinds": [k.strip() for k in a["inefficient_type"].split(",")],
            })
        if r["Event"] == "OOM_DETAIL":
            fig["oom"].append({
                "kind": {"OOM_TRIGGER": "trigger", "OOM_RECENT_ALLOC": "recent", "OOM_TOP_ALLOC": "top"}[r["Event Type"]],
                "device": r["Device Id"],
                "func": a.get("func"),
                "req_size": num(a.get("req_size")),
                "flag": a.get("flag"),
                "pool": a.get("pool"),
                "ptr": a.get("ptr"),
                "size": num(a.get("size")),
                "alloc_ts": num(a.get("timestamp")),
                "has_step_kernel_client": any(k in a for k in ("step", "kernel", "client", "ret")),
            })
    return fig


FILES = {
    "malloc_only": "malloc_only.csv",
    "free_only": "free_only.csv",
    "clean_up": "clean_up.csv",
    "trace_window": "trace_window.csv",
    "snapshot_keys": "snapshot_keys.csv",
    "inefficient": "inefficient.csv",
    "oom": "oom.csv",
    "alloc_only_run": "alloc_only_run/msmemscope_51234_20260729044000_ascend/device_0/dump/memscope_dump_20260729044000.csv",
    "paired_by_config_run": "paired_by_config_run/msmemscope_51235_20260729044000_ascend/device_0/dump/memscope_dump_20260729044000.csv",
}


def main():
    out = {key: figures(rel) for key, rel in FILES.items()}
    text = json.dumps(out, indent=1, sort_keys=True) + "\n"
    if "--stdout" in sys.argv[1:]:
        sys.stdout.write(text)
    else:
        with open(OUT, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)


if __name__ == "__main__":
    main()
