#!/usr/bin/env python3
"""Independent expected figures for the real input fixtures memq must ingest.

Plain python3 (stdlib only). Reads the real samples in fixtures/real/ of the repository and
writes, next to this script:

  real_inputs.json           all figures (the rules are described in README.md)
  leaks_dump_msinsight.csv   the rows of leaks_dump_msinsight.db re-written as a G1 msMemScope CSV

Nothing here uses memq code: every figure is derived directly from the files, so memq tests can
be checked against it. Run:  python3 tests/oracle/real_inputs.py
"""

import collections
import csv
import io
import json
import os
import pickle
import pickletools
import sqlite3
import sys
from decimal import Decimal

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
FIX = os.path.join(REPO, "fixtures", "real")

OUT_JSON = os.path.join(HERE, "real_inputs.json")
OUT_CSV = os.path.join(HERE, "leaks_dump_msinsight.csv")


def open_db(path):
    """Read-only, no WAL/shm side files created next to the fixture."""
    return sqlite3.connect("file:%s?mode=ro&immutable=1" % path, uri=True)


# ==========================================================================================
# 1. leaks_dump_msinsight.db  (legacy msLeaks SQLite, G1 content)
# ==========================================================================================

LEAKS_DB = os.path.join(FIX, "memscope", "insight", "leaks_dump_msinsight.db")
COLS = ["id", "event", "eventType", "name", "timestamp", "processId", "threadId",
        "deviceId", "ptr", "attr"]


def load_leaks_rows():
    con = open_db(LEAKS_DB)
    rows = []
    for r in con.execute("SELECT rowid, %s FROM leaks_dump ORDER BY rowid" % ", ".join(COLS)):
        d = dict(zip(["rowid"] + COLS, r))
        # attr is JSON text (python json.dumps style, ", " and ": " separators) or NULL
        d["attr_map"] = json.loads(d["attr"]) if d["attr"] else {}
        rows.append(d)
    con.close()
    return rows


def time_order(rows):
    """Canonical order: stable by raw timestamp, ties in db row order (rowid)."""
    return sorted(rows, key=lambda r: (r["timestamp"], r["rowid"]))


def pair_free_rows(mem_rows, key_of):
    """Classify every FREE under a pairing key.

    Walk MALLOC/FREE rows in time order. A MALLOC makes its key live (a MALLOC on a key that is
    already live is counted as 'malloc_on_live' and replaces the old block). A FREE on a live key
    closes it ('paired'); on a non-live key it is 'double_free' when the last MALLOC/FREE seen on
    that key was a FREE, otherwise 'free_without_malloc' (key never MALLOCed before).
    """
    live = {}
    last = {}
    c = collections.Counter()
    for r in mem_rows:
        k = key_of(r)
        if r["event"] == "MALLOC":
            if k in live:
                c["malloc_on_live"] += 1
            live[k] = r
        else:
            if k in live:
                del live[k]
                c["paired"] += 1
            elif last.get(k) == "FREE":
                c["double_free"] += 1
            else:
                c["free_without_malloc"] += 1
        last[k] = r["event"]
    c["live_at_end"] = len(live)
    return {k: c.get(k, 0) for k in
            ["paired", "double_free", "free_without_malloc", "malloc_on_live", "live_at_end"]}


def leaks_live_bytes(mem_rows):
    """Per (pid, device, pool) live bytes by pairing MALLOC/FREE, time order.

    Key of a block: (pid, pool, ptr). Device is NOT in the pairing key because G1 HAL FREE rows
    carry Device Id 'N/A': such a FREE pairs with the live MALLOC of the same pid/pool/ptr and its
    bytes are taken off that MALLOC's device. (On this file no two live MALLOCs ever share a
    (pid, pool, ptr) on different devices, so the rule is unambiguous; a PTA FREE always carries
    the same device as its MALLOC.) The amount removed is the MALLOC's size (G1 FREE sizes are
    negative for PTA; |FREE size| equals the MALLOC size on every paired row here).
    An unpaired FREE changes nothing. The peak is evaluated after every row; the earliest row
    reaching the maximum wins (strictly-greater update).
    """
    live = {}
    cur = collections.Counter()
    peak = {}
    settled = {}  # same, but evaluated only after all rows of one timestamp are applied
    checks = collections.Counter()
    rows = list(mem_rows)
    touched = set()
    for i, r in enumerate(rows):
        k = (r["processId"], r["eventType"], r["ptr"])
        size = int(r["attr_map"]["size"])
        if r["event"] == "MALLOC":
            if k in live:
                checks["malloc_on_live"] += 1
                odev, osz = live.pop(k)
                cur[(k[0], odev, k[1])] -= osz
            g = (k[0], r["deviceId"], k[1])
            live[k] = (r["deviceId"], size)
            cur[g] += size
        else:
            if k not in live:
                checks["unpaired_free"] += 1
                continue
            dev, msz = live.pop(k)
            if abs(size) != msz:
                checks["free_size_differs_from_malloc"] += 1
            if r["deviceId"] not in ("N/A", dev):
                checks["free_device_differs_from_malloc"] += 1
            g = (k[0], dev, k[1])
            cur[g] -= msz
        if "used" in r["attr_map"]:
            checks["used_rows"] += 1
            if int(r["attr_map"]["used"]) != cur[g]:
                checks["used_differs_from_paired_live_bytes"] += 1
        if g not in peak or cur[g] > peak[g][0]:
            peak[g] = (cur[g], r["timestamp"], r["rowid"], r["id"])
        touched.add(g)
        if i + 1 == len(rows) or rows[i + 1]["timestamp"] != r["timestamp"]:
            for gg in touched:  # all rows of this timestamp applied
                if gg not in settled or cur[gg] > settled[gg][0]:
                    settled[gg] = (cur[gg], r["timestamp"])
            touched = set()
    out = []
    for g in sorted(peak, key=lambda g: (g[0], str(g[1]), g[2])):
        v, ts, rowid, rid = peak[g]
        out.append({
            "pid": g[0], "device": g[1], "pool": g[2],
            "peak_live_bytes": v, "peak_ts_us": ts, "peak_ts_ns": ts * 1000,
            "peak_row": {"rowid": rowid, "id": rid},
            "end_live_bytes": cur[g],
            "live_blocks_at_end": sum(1 for x, (d, _) in live.items()
                                      if (x[0], d, x[1]) == g),
            "peak_same_if_ties_settled": settled.get(g, (None,))[0] == v,
        })
    return out, dict(checks)


def leaks_counter_peaks(rows):
    """Peak of the Attr 'used' and 'total' counters per (pid, device, pool), where present."""
    acc = {}
    for r in time_order(rows):
        a = r["attr_map"]
        if "used" not in a and "total" not in a:
            continue
        g = (r["processId"], r["deviceId"], r["eventType"])
        s = acc.setdefault(g, {"rows": 0})
        s["rows"] += 1
        for key in ("used", "total"):
            if key in a:
                v = int(a[key])
                if key not in s or v > s[key][0]:
                    s[key] = (v, r["timestamp"], r["rowid"])
        s["used_gt_total_rows"] = s.get("used_gt_total_rows", 0) + (
            1 if "used" in a and "total" in a and int(a["used"]) > int(a["total"]) else 0)
    out = []
    for g in sorted(acc, key=lambda g: (g[0], str(g[1]), g[2])):
        s = acc[g]
        d = {"pid": g[0], "device": g[1], "pool": g[2], "rows_with_counters": s["rows"],
             "used_gt_total_rows": s["used_gt_total_rows"]}
        for key in ("used", "total"):
            if key in s:
                v, ts, rowid = s[key]
                d["peak_" + key] = v
                d["peak_%s_ts_us" % key] = ts
                d["peak_%s_ts_ns" % key] = ts * 1000
                d["peak_%s_rowid" % key] = rowid
        out.append(d)
    return out


def attr_json_to_minilang(attr_map):
    """{"addr": "1", "size": "2"} -> {addr:1,size:2} (writer order = JSON key order)."""
    return "{" + ",".join("%s:%s" % (k, v) for k, v in attr_map.items()) + "}"


def write_leaks_csv(rows):
    """G1 msMemScope CSV as the writer prints it (memscope-format.md 2.9):
    printf-style, no CSV library: Attr wrapped in double quotes when non-empty, MSTX Name wrapped
    in double quotes, nothing else quoted, LF line ends, rows in db (rowid) order, the 10-column
    header of a G1-era writer without call-stack columns and with the Timestamp(us) label."""
    header = "ID,Event,Event Type,Name,Timestamp(us),Process Id,Thread Id,Device Id,Ptr,Attr"
    lines = [header]
    for r in rows:
        for k in ("name", "ptr", "deviceId", "event", "eventType"):
            v = r[k]
            assert v is None or ("," not in v and '"' not in v and "\n" not in v) or (
                k == "name" and r["event"] == "MSTX" and '"' not in v), (k, v)
        name = '"%s"' % r["name"] if r["event"] == "MSTX" else r["name"]
        attr = '"%s"' % attr_json_to_minilang(r["attr_map"]) if r["attr"] else ""
        lines.append(",".join(str(x) for x in [
            r["id"], r["event"], r["eventType"], name, r["timestamp"], r["processId"],
            r["threadId"], r["deviceId"], r["ptr"], attr]))
    data = "\n".join(lines) + "\n"
    with open(OUT_CSV, "w", newline="", encoding="utf-8") as f:
        f.write(data)
    # self-check: a lenient CSV reader gives back the same 10 fields per row
    back = list(csv.reader(data.splitlines()))
    assert len(back) == len(rows) + 1 and all(len(x) == 10 for x in back)
    for r, cells in zip(rows, back[1:]):  # round trip (no value here contains ',' or ':')
        a = cells[9]
        parsed = dict(item.split(":", 1) for item in a[1:-1].split(",")) if a else {}
        assert parsed == r["attr_map"] and cells[3] == r["name"] and int(cells[4]) == r["timestamp"]
    return {"path": os.path.relpath(OUT_CSV, REPO), "header": header,
            "rows": len(rows), "lines": len(lines), "bytes": len(data.encode()),
            "line_ending": "LF", "row_order": "db rowid order (file order, not time-sorted)",
            "quoted_fields": "Attr when non-empty, Name of MSTX rows",
            "empty_attr_rows": sum(1 for r in rows if not r["attr"])}


def leaks_figures():
    rows = load_leaks_rows()
    by_ev = collections.Counter((r["event"], r["eventType"]) for r in rows)
    procs = {}
    for r in rows:
        p = procs.setdefault(r["processId"], {"rows": 0, "ts": [], "ids": [], "dev": collections.Counter()})
        p["rows"] += 1
        p["ts"].append(r["timestamp"])
        p["ids"].append(r["id"])
        p["dev"][r["deviceId"]] += 1
    per_process = []
    for pid in sorted(procs):
        p = procs[pid]
        per_process.append({
            "pid": pid, "rows": p["rows"],
            "min_ts_us": min(p["ts"]), "max_ts_us": max(p["ts"]),
            "min_ts_ns": min(p["ts"]) * 1000, "max_ts_ns": max(p["ts"]) * 1000,
            "min_id": min(p["ids"]), "max_id": max(p["ids"]),
            "rows_per_device": dict(sorted(p["dev"].items())),
            "id_decreases_in_file_order": sum(1 for a, b in zip(p["ids"], p["ids"][1:]) if b < a),
            "ts_decreases_in_file_order": sum(1 for a, b in zip(p["ts"], p["ts"][1:]) if b < a),
        })
    ordered = time_order(rows)
    mem = [r for r in ordered if r["event"] in ("MALLOC", "FREE")]
    ids_seen = collections.Counter(r["id"] for r in rows)

    keying = {
        "pid_pool_ptr (the pairing rule used for the peaks)":
            pair_free_rows(mem, lambda r: (r["processId"], r["eventType"], r["ptr"])),
        "pid_device_pool_ptr strict (HAL FREE device N/A never matches)":
            pair_free_rows(mem, lambda r: (r["processId"], r["deviceId"], r["eventType"], r["ptr"])),
        "pool_ptr (no pid: the two processes collide)":
            pair_free_rows(mem, lambda r: (r["eventType"], r["ptr"])),
        "ptr only (memscope oracle quirk 2)":
            pair_free_rows(mem, lambda r: r["ptr"]),
    }
    hal_free = [r for r in rows if r["event"] == "FREE" and r["eventType"] == "HAL"]
    per_pid_ptr = collections.Counter((r["processId"], r["ptr"]) for r in hal_free)
    per_ptr = collections.Counter(r["ptr"] for r in hal_free)

    live, checks = leaks_live_bytes(mem)
    return {
        "file": os.path.relpath(LEAKS_DB, REPO),
        "table": "leaks_dump",
        "columns": COLS,
        "other_tables": ["status_info", "python_trace (0 rows)", "memory_allocation",
                         "memory_block", "sqlite_sequence"],
        "rows": len(rows),
        "rows_per_event_eventType": [{"event": e, "eventType": t, "rows": n}
                                     for (e, t), n in sorted(by_ev.items())],
        "rows_with_null_attr": sum(1 for r in rows if r["attr"] is None),
        "rows_with_empty_string_attr": sum(1 for r in rows if r["attr"] == ""),
        "attr_json_style": "json.dumps default: '{\"addr\": \"1\", \"size\": \"2\"}' (spaces after : and ,), all values strings",
        "timestamp_unit": "us (16 digits); ns = us*1000",
        "ts_decreases_in_file_order": sum(1 for a, b in zip(rows, rows[1:]) if b["timestamp"] < a["timestamp"]),
        "rows_sharing_a_timestamp_with_an_earlier_row": len(rows) - len({r["timestamp"] for r in rows}),
        "duplicate_ids_across_processes": sum(v - 1 for v in ids_seen.values() if v > 1),
        "dedup_key_pid_id_unique": len({(r["processId"], r["id"]) for r in rows}) == len(rows),
        "per_process": per_process,
        "hal_free_rows": len(hal_free),
        "hal_free_rows_device_NA": sum(1 for r in hal_free if r["deviceId"] == "N/A"),
        "hal_ptrs_freed_more_than_once_same_pid": sum(1 for v in per_pid_ptr.values() if v > 1),
        "hal_ptrs_freed_more_than_once_any_pid": sum(1 for v in per_ptr.values() if v > 1),
        "pta_free_rows_negative_size": sum(1 for r in rows if r["event"] == "FREE" and r["eventType"] == "PTA"
                                           and int(r["attr_map"]["size"]) < 0),
        "free_classification_by_pairing_key": keying,
        "double_free": keying["pid_pool_ptr (the pairing rule used for the peaks)"]["double_free"],
        "free_without_malloc": keying["pid_pool_ptr (the pairing rule used for the peaks)"]["free_without_malloc"],
        "live_bytes_peaks": live,
        "live_bytes_checks": checks,
        "counter_peaks_used_total": leaks_counter_peaks(rows),
        "csv_copy": write_leaks_csv(rows),
    }


# ==========================================================================================
# 2. memscope_host_pinned.db  (current tool db)
# ==========================================================================================

PINNED_DB = os.path.join(FIX, "memscope", "insight", "memscope_host_pinned.db")


def host_pinned_figures():
    con = open_db(PINNED_DB)
    cols = [d[1] for d in con.execute("PRAGMA table_info(memscope_dump)")]
    rows = [dict(zip(cols, r)) for r in con.execute("SELECT * FROM memscope_dump ORDER BY rowid")]
    user_version = con.execute("PRAGMA user_version").fetchone()[0]
    con.close()
    stack_cols = ["Call Stack(Python)", "Call Stack(C)"]

    def lines(s):
        return len(s.rstrip("\n").split("\n")) if s else 0

    multi = [(r["ID"], c) for r in rows for c in stack_cols if lines(r[c]) > 1]
    live, cur, peak = {}, 0, (0, None)
    for r in sorted(rows, key=lambda r: r["Timestamp(ns)"]):
        if r["Event"] not in ("MALLOC", "FREE"):
            continue
        a = json.loads(r["Attr"])
        if r["Event"] == "MALLOC":
            live[r["Ptr"]] = int(a["size"])
            cur += int(a["size"])
        elif r["Ptr"] in live:
            cur -= live.pop(r["Ptr"])
        if cur > peak[0]:
            peak = (cur, r["Timestamp(ns)"])
    return {
        "file": os.path.relpath(PINNED_DB, REPO),
        "table": "memscope_dump", "columns": cols, "pragma_user_version": user_version,
        "rows": len(rows),
        "ids": [r["ID"] for r in rows],
        "rows_per_event_eventType": [{"event": e, "eventType": t, "rows": n} for (e, t), n in
                                     sorted(collections.Counter((r["Event"], r["Event Type"]) for r in rows).items())],
        "event_kinds": sorted({r["Event"] for r in rows}),
        "device_ids": sorted({r["Device Id"] for r in rows}),
        "attr_keys_on_memory_rows": sorted({tuple(json.loads(r["Attr"]).keys()) for r in rows if r["Attr"]}),
        "rows_with_empty_attr": sum(1 for r in rows if not r["Attr"]),
        "stack_cells_multi_line": len(multi),
        "rows_with_a_multi_line_stack": len({i for i, _ in multi}),
        "python_stack_line_counts": [lines(r["Call Stack(Python)"]) for r in rows if r["Call Stack(Python)"]],
        "c_stack_line_counts": [lines(r["Call Stack(C)"]) for r in rows if r["Call Stack(C)"]],
        "stacks_end_with_newline": all(r[c].endswith("\n") for r in rows for c in stack_cols if r[c]),
        "stacks_have_literal_surrounding_quotes": any(r[c].startswith('"') for r in rows for c in stack_cols if r[c]),
        "host_pinned_peak_live_bytes": peak[0], "host_pinned_peak_ts_ns": peak[1],
        "host_pinned_live_bytes_at_end": cur, "host_pinned_live_blocks_at_end": len(live),
    }


# ==========================================================================================
# 3. Ascend PyTorch Profiler: memory_record.csv, operator_memory.csv
# ==========================================================================================

PROF = os.path.join(FIX, "profiler", "real")
MIB = 1024 * 1024


def us_to_ns(cell):
    """'1736405443756384.100\\t' -> 1736405443756384100 (exact decimal; every value has 3
    fractional digits, so no rounding happens; >3 digits would round half-even)."""
    s = cell.strip()
    if not s:
        return None
    v = Decimal(s) * 1000
    return int(v.to_integral_value())  # ROUND_HALF_EVEN, exact here


def mb_to_bytes(cell):
    s = cell.strip()
    if not s:
        return None
    v = Decimal(s) * MIB
    assert v == v.to_integral_value(), cell  # all MB values are exact binary fractions
    return int(v)


def kb_to_bytes(cell):
    v = Decimal(cell.strip()) * 1024
    assert v == v.to_integral_value(), cell
    return int(v)


def read_prof_csv(name):
    path = os.path.join(PROF, name)
    raw = open(path, "rb").read()
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    trailing_tab_cells = sum(1 for r in body for c in r if c.endswith("\t"))
    return header, body, {"crlf_lines": raw.count(b"\r\n"), "lf_lines": raw.count(b"\n"),
                          "bom": raw.startswith(b"\xef\xbb\xbf"), "quotes": raw.count(b'"'),
                          "cells_with_trailing_tab": trailing_tab_cells}


def profiler_figures():
    h1, mr, f1 = read_prof_csv("memory_record.csv")
    recs = []
    for i, r in enumerate(mr):
        recs.append({"row": i, "component": r[0], "ts_ns": us_to_ns(r[1]),
                     "allocated": mb_to_bytes(r[2]), "reserved": mb_to_bytes(r[3]),
                     "active": mb_to_bytes(r[4]), "stream": r[5], "device": r[6]})
    t_order = sorted(recs, key=lambda x: (x["ts_ns"], x["row"]))
    groups = collections.OrderedDict()
    for x in t_order:
        groups.setdefault((x["component"], x["device"]), []).append(x)
    comp_peaks = []
    for (comp, dev), xs in sorted(groups.items()):
        d = {"component": comp, "device": dev, "rows": len(xs),
             "streams": sorted({x["stream"] for x in xs}),
             "first_ts_ns": xs[0]["ts_ns"], "last_ts_ns": xs[-1]["ts_ns"]}
        for m in ("allocated", "reserved", "active"):
            vals = [x for x in xs if x[m] is not None]
            if not vals:
                d[m] = None
                continue
            best = None
            for x in vals:  # time order, earliest maximum wins
                if best is None or x[m] > best[m]:
                    best = x
            fbest = None
            for x in sorted(vals, key=lambda x: x["row"]):
                if fbest is None or x[m] > fbest[m]:
                    fbest = x
            d[m] = {"peak_bytes": best[m], "peak_mb": float(Decimal(best[m]) / MIB),
                    "same_peak_row_in_file_order": fbest is best,
                    "peak_ts_ns": best["ts_ns"], "peak_file_row": best["row"] + 1,
                    "rows_at_peak": sum(1 for x in vals if x[m] == best[m]),
                    "rows_with_value": len(vals)}
        comp_peaks.append(d)

    h2, om, f2 = read_prof_csv("operator_memory.csv")
    ops = []
    for i, r in enumerate(om):
        ops.append({"row": i, "name": r[0], "bytes": kb_to_bytes(r[1]),
                    "alloc_ns": us_to_ns(r[2]), "release_ns": us_to_ns(r[3]),
                    "active_release_ns": us_to_ns(r[4]),
                    "duration_ns": us_to_ns(r[5]), "active_duration_ns": us_to_ns(r[6]),
                    "stream": r[13], "device": r[14]})
    released = [o for o in ops if o["release_ns"] is not None]
    dur_mismatch = sum(1 for o in released if o["duration_ns"] != o["release_ns"] - o["alloc_ns"])
    largest = max(ops, key=lambda o: (o["bytes"], -o["row"]))
    longest = max(released, key=lambda o: (o["release_ns"] - o["alloc_ns"], -o["row"]))

    def op_brief(o):
        return {"name": o["name"], "bytes": o["bytes"], "alloc_ns": o["alloc_ns"],
                "release_ns": o["release_ns"], "file_row": o["row"] + 1, "stream": o["stream"]}

    live_at_peak = []
    for d in comp_peaks:
        if not d["allocated"]:
            continue
        t = d["allocated"]["peak_ts_ns"]
        live = [o for o in ops if o["alloc_ns"] <= t and (o["release_ns"] is None or t < o["release_ns"])]
        live_at_peak.append({
            "component": d["component"], "device": d["device"], "peak_ts_ns": t,
            "peak_allocated_bytes": d["allocated"]["peak_bytes"],
            "live_operator_count": len(live), "live_operator_bytes": sum(o["bytes"] for o in live),
            "live_with_stream_ptr": {"count": sum(1 for o in live if o["stream"]),
                                     "bytes": sum(o["bytes"] for o in live if o["stream"])},
            "live_without_stream_ptr": {"count": sum(1 for o in live if not o["stream"]),
                                        "bytes": sum(o["bytes"] for o in live if not o["stream"])},
            "live_operators": [op_brief(o) for o in sorted(live, key=lambda o: (o["alloc_ns"], o["row"]))]})
    return {
        "memory_record": {
            "file": "fixtures/profiler/real/memory_record.csv", "header": h1, "format": f1,
            "rows": len(recs),
            "rows_per_component": dict(collections.Counter(x["component"] for x in recs)),
            "ts_decreases_in_file_order": sum(1 for a, b in zip(recs, recs[1:]) if b["ts_ns"] < a["ts_ns"]),
            "ts_decrease_at_file_rows": [b["row"] + 1 for a, b in zip(recs, recs[1:]) if b["ts_ns"] < a["ts_ns"]],
            "peaks_per_component_device": comp_peaks,
        },
        "operator_memory": {
            "file": "fixtures/profiler/real/operator_memory.csv", "header": h2, "format": f2,
            "rows": len(ops), "operator_count": len(ops),
            "distinct_operator_names": len({o["name"] for o in ops}),
            "never_released": len(ops) - len(released),
            "released_without_active_release_time": sum(1 for o in released if o["active_release_ns"] is None),
            "duration_column_differs_from_release_minus_alloc": dur_mismatch,
            "alloc_ts_decreases_in_file_order": sum(1 for a, b in zip(ops, ops[1:]) if b["alloc_ns"] < a["alloc_ns"]),
            "total_bytes": sum(o["bytes"] for o in ops),
            "largest_allocation": op_brief(largest),
            "largest_allocation_ties": [op_brief(o) for o in ops if o["bytes"] == largest["bytes"]],
            "longest_held_by_active_duration": (lambda o: dict(op_brief(o), active_duration_ns=o["active_duration_ns"]))(
                max([o for o in released if o["active_duration_ns"] is not None],
                    key=lambda o: (o["active_duration_ns"], -o["row"]))),
            "longest_held_released": dict(op_brief(longest), held_ns=longest["release_ns"] - longest["alloc_ns"]),
            "never_released_operators": [op_brief(o) for o in ops if o["release_ns"] is None],
        },
        "operators_live_at_component_peak_allocated": live_at_peak,
    }


# ==========================================================================================
# 4. PyTorch / torch_npu memory snapshot pickles
# ==========================================================================================

SNAP = os.path.join(FIX, "snapshots", "real")
SAFE_OPS = {"PROTO", "FRAME", "STOP", "MARK", "EMPTY_DICT", "EMPTY_LIST", "EMPTY_TUPLE", "SETITEM",
            "SETITEMS", "APPEND", "APPENDS", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "MEMOIZE",
            "BINGET", "LONG_BINGET", "BINPUT", "LONG_BINPUT", "SHORT_BINUNICODE", "BINUNICODE",
            "BINUNICODE8", "BININT", "BININT1", "BININT2", "LONG1", "LONG4", "NEWTRUE",
            "NEWFALSE", "NONE", "BINFLOAT", "DICT", "LIST"}


class DataOnlyUnpickler(pickle.Unpickler):
    """Refuses every global lookup (no class or callable can be resolved)."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError("global %s.%s refused" % (module, name))

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("persistent id refused")


def load_snapshot(path):
    data = open(path, "rb").read()
    ops = collections.Counter()
    proto = None
    for op, arg, pos in pickletools.genops(data):
        if op.name not in SAFE_OPS:
            raise ValueError("%s: opcode %s at %d not allowed" % (path, op.name, pos))
        if op.name == "PROTO":
            proto = arg
        ops[op.name] += 1
    return DataOnlyUnpickler(io.BytesIO(data)).load(), proto, sorted(ops)


def memoryviz_active(trace, blocks):
    """Active Memory Timeline of MemoryViz.js (snapshot-format.md 6.2), literally.

    trace: the device list. blocks: active_allocated blocks of this device's segments.
    Returns initial, peak, the trace index of the entry after which the peak is first reached
    (-1 = the initial state), end value and the ring-buffer signs.
    """
    # annotate_snapshot: free_requested immediately followed by free_completed (same addr) -> 'free'
    merged = []
    for idx, e in enumerate(trace):
        a = e.get("action")
        if a == "free_completed" and merged and merged[-1][1] == "free_requested" \
                and merged[-1][2] == e.get("addr"):
            merged[-1] = (merged[-1][0], "free", merged[-1][2], merged[-1][3])
            continue
        merged.append((idx, a, e.get("addr"), e.get("size", 0)))
    elements, initially, actions, addr_to_alloc = [], [], [], {}
    alloc_on_held = unmatched_free = 0
    unmatched_free_bytes = 0
    for idx, a, addr, size in merged:
        if a == "alloc":
            if addr in addr_to_alloc:
                alloc_on_held += 1
            elements.append(size)
            addr_to_alloc[addr] = len(elements) - 1
            actions.append((idx, len(elements) - 1))
        elif a in ("free", "free_completed"):
            if addr in addr_to_alloc:
                actions.append((idx, addr_to_alloc.pop(addr)))
            else:
                unmatched_free += 1
                unmatched_free_bytes += size
                elements.append(size)
                initially.append(len(elements) - 1)
                actions.append((idx, len(elements) - 1))
    live_not_held = 0
    for b in blocks:
        if b["address"] not in addr_to_alloc:
            elements.append(b["requested_size"])
            initially.append(len(elements) - 1)
            live_not_held += 1
    current = set(initially)
    total = sum(elements[i] for i in initially)
    initial = total
    peak, peak_idx = total, -1
    for idx, el in actions:
        if el in current:
            current.remove(el)
            total -= elements[el]
        else:
            current.add(el)
            total += elements[el]
        if total > peak:
            peak, peak_idx = total, idx
    return {"initial": initial, "peak": peak, "peak_trace_index": peak_idx, "end": total,
            "unmatched_frees": unmatched_free, "unmatched_free_bytes": unmatched_free_bytes,
            "allocs_on_held_address": alloc_on_held,
            "outstanding_trace_allocs_at_end": len(addr_to_alloc),
            "live_blocks_not_held_by_trace": live_not_held}


def memoryviz_segments(trace, segs):
    """Active Cached Segment Timeline (segment_alloc/segment_free only; map/unmap ignored)."""
    elements, initially, actions, held = [], [], [], {}
    for idx, e in enumerate(trace):
        a = e.get("action")
        if a == "segment_alloc":
            elements.append(e["size"])
            held[e["addr"]] = len(elements) - 1
            actions.append((idx, len(elements) - 1))
        elif a == "segment_free":
            if e["addr"] in held:
                actions.append((idx, held.pop(e["addr"])))
            else:
                elements.append(e["size"])
                initially.append(len(elements) - 1)
                actions.append((idx, len(elements) - 1))
    for s in segs:
        if s["address"] not in held:
            elements.append(s["total_size"])
            initially.append(len(elements) - 1)
    current = set(initially)
    total = sum(elements[i] for i in initially)
    initial, peak, peak_idx = total, total, -1
    for idx, el in actions:
        if el in current:
            current.remove(el)
            total -= elements[el]
        else:
            current.add(el)
            total += elements[el]
        if total > peak:
            peak, peak_idx = total, idx
    return {"initial": initial, "peak": peak, "peak_trace_index": peak_idx, "end": total}


def backward_replays(trace, blocks, segs):
    """Anchor on the dump-time state and undo the trace (allocated and reserved).

    active: end = sum requested_size of active_allocated blocks; each alloc adds its size,
    each free_completed removes its size; start = end - net.
    reserved: end = sum total_size; segment_alloc/segment_map add, segment_free/segment_unmap
    remove (map/unmap INCLUDED, unlike MemoryViz's segment timeline).
    """
    res = {}
    for name, end, plus, minus in (
            ("active", sum(b["requested_size"] for b in blocks), {"alloc"}, {"free_completed"}),
            ("reserved", sum(s["total_size"] for s in segs), {"segment_alloc", "segment_map"},
             {"segment_free", "segment_unmap"})):
        deltas = []
        for idx, e in enumerate(trace):
            a = e.get("action")
            if a in plus:
                deltas.append((idx, e["size"]))
            elif a in minus:
                deltas.append((idx, -e["size"]))
        start = end - sum(d for _, d in deltas)
        cur, peak, pidx, low = start, start, -1, start
        for idx, d in deltas:
            cur += d
            low = min(low, cur)
            if cur > peak:
                peak, pidx = cur, idx
        res[name] = {"start": start, "peak": peak, "peak_trace_index": pidx, "end": cur,
                     "minimum": low, "goes_negative": low < 0}
    return res


def snapshot_figures(path):
    obj, proto, ops = load_snapshot(path)
    top_kind = type(obj).__name__
    if isinstance(obj, list):
        segments, traces, top_keys = obj, [], None
    else:
        segments, traces, top_keys = obj.get("segments", []), obj.get("device_traces", []), list(obj)
    devs = sorted({s.get("device", 0) for s in segments} | {i for i, t in enumerate(traces) if t})
    seg_keys = sorted({k for s in segments for k in s})
    block_keys = sorted({k for s in segments for b in s["blocks"] for k in b})
    entry_keys = sorted({k for t in traces for e in t for k in e})
    frame_keys, frame_kinds = set(), collections.Counter()

    def walk(fr):
        for x in fr or []:
            if isinstance(x, dict):
                frame_keys.update(x)
                frame_kinds["dict"] += 1
            else:
                frame_kinds[type(x).__name__] += 1
    for s in segments:
        walk(s.get("frames"))
        for b in s["blocks"]:
            walk(b.get("frames"))
    for t in traces:
        for e in t:
            walk(e.get("frames"))

    def find_key(o, key, depth=0):
        if isinstance(o, dict):
            return key in o or any(find_key(v, key, depth + 1) for v in o.values() if depth < 3)
        return False

    settings = None if isinstance(obj, list) else obj.get("allocator_settings")
    annotations = None if isinstance(obj, list) else obj.get("external_annotations")
    newer = {
        "pool_id_on_trace_entries": sum(1 for t in traces for e in t if "pool_id" in e),
        "segment_pool_id_values": sorted({tuple(s.get("segment_pool_id", ())) for s in segments}),
        "user_metadata_entries": sum(1 for t in traces for e in t if "user_metadata" in e),
        "user_metadata_non_empty": sum(1 for t in traces for e in t if e.get("user_metadata")),
        "compile_context_entries": sum(1 for t in traces for e in t if "compile_context" in e),
        "compile_context_values": sorted({e["compile_context"] for t in traces for e in t if "compile_context" in e}),
        "forward_frames_entries": sum(1 for t in traces for e in t if "forward_frames" in e),
        "fx_frame_keys": sorted(k for k in frame_keys if k.startswith("fx_")),
        "frame_keys": sorted(frame_keys), "frame_kinds": dict(frame_kinds),
        "skip_actions_anywhere": find_key(obj, "skip_actions") if isinstance(obj, dict) else False,
        "time_us_on_entries": sum(1 for t in traces for e in t if "time_us" in e),
        "entries_without_frames_key": sum(1 for t in traces for e in t if "frames" not in e),
        "allocator_settings_keys": sorted(settings) if isinstance(settings, dict) else None,
        "trace_alloc_overflow_keys": sorted(k for k in (settings or {}) if k.startswith("trace_alloc")),
        "external_annotations": len(annotations) if isinstance(annotations, list) else None,
        "block_states": sorted({b["state"] for s in segments for b in s["blocks"]}),
        "expandable_segments": sum(1 for s in segments if s.get("is_expandable")),
    }
    per_device = []
    for d in devs:
        segs = [s for s in segments if s.get("device", 0) == d]
        blocks = [b for s in segs for b in s["blocks"]]
        act = [b for b in blocks if b["state"] == "active_allocated"]
        pend = [b for b in blocks if b["state"] in ("active_pending_free", "active_awaiting_free")]
        trace = traces[d] if d < len(traces) else []
        actions = collections.Counter(e.get("action") for e in trace)
        addr_ok = all(b["address"] == s["address"] + sum(x["size"] for x in s["blocks"][:i])
                      for s in segs for i, b in enumerate(s["blocks"]))
        pools = collections.defaultdict(lambda: [0, 0, 0])
        for s in segs:
            p = pools[tuple(s.get("segment_pool_id", (0, 0)))]
            p[0] += 1
            p[1] += s["total_size"]
            p[2] += sum(b["size"] for b in s["blocks"] if b["state"] == "active_allocated")
        mv = memoryviz_active(trace, act)
        if mv["peak_trace_index"] >= 0:
            pe = trace[mv["peak_trace_index"]]
            mv["peak_entry"] = {"action": pe.get("action"), "addr": pe.get("addr"),
                                "size": pe.get("size"), "time_us": pe.get("time_us")}
        # ring-buffer / window signs beyond what memoryviz_active counts
        seen_alloc = set()
        mapped = []  # [start, end) ranges mapped/allocated inside the trace window
        fr_unknown = seg_unknown = seg_subrange = 0
        for e in trace:
            a = e.get("action")
            if a == "alloc":
                seen_alloc.add(e["addr"])
            elif a in ("free_requested", "free_completed") and e["addr"] not in seen_alloc:
                fr_unknown += 1
            elif a in ("segment_alloc", "segment_map"):
                mapped.append((e["addr"], e["addr"] + e["size"]))
            elif a in ("segment_free", "segment_unmap"):
                lo, hi = e["addr"], e["addr"] + e["size"]
                cov = lo
                for x, y in sorted(mapped):
                    if x <= cov < y:
                        cov = y
                if cov < hi:
                    seg_unknown += 1  # (part of) the range was mapped before the window
                elif not any(x == lo for x, _ in mapped):
                    seg_subrange += 1  # expandable unmap of a sub-range of earlier maps
                rest = []
                for x, y in mapped:
                    if y <= lo or x >= hi:
                        rest.append((x, y))
                    else:
                        if x < lo:
                            rest.append((x, lo))
                        if y > hi:
                            rest.append((hi, y))
                mapped = rest
        oom = [{"trace_index": i, "size": e.get("size"), "device_free": e.get("device_free"),
                "has_addr": "addr" in e, "time_us": e.get("time_us")}
               for i, e in enumerate(trace) if e.get("action") == "oom"]
        per_device.append({
            "device": d,
            "segments": len(segs),
            "segments_expandable": sum(1 for s in segs if s.get("is_expandable")),
            "segment_types": dict(collections.Counter(s.get("segment_type") for s in segs)),
            "blocks": len(blocks),
            "block_states": {st: {"count": n, "bytes": sum(b["size"] for b in blocks if b["state"] == st)}
                             for st, n in sorted(collections.Counter(b["state"] for b in blocks).items())},
            "reserved_bytes": sum(s["total_size"] for s in segs),
            "allocated_bytes": sum(b["size"] for b in act),
            "allocated_requested_bytes": sum(b["requested_size"] for b in act),
            "segment_allocated_size_sum": sum(s["allocated_size"] for s in segs),
            "segment_active_size_sum": sum(s["active_size"] for s in segs),
            "pending_free_blocks": len(pend), "pending_free_bytes": sum(b["size"] for b in pend),
            "block_addresses_contiguous": addr_ok,
            "pools": [{"pool": list(k), "segments": v[0], "reserved_bytes": v[1], "allocated_bytes": v[2]}
                      for k, v in sorted(pools.items())],
            "trace_entries": len(trace),
            "trace_actions": dict(sorted(actions.items())),
            "time_us_range": [min(e["time_us"] for e in trace), max(e["time_us"] for e in trace)]
            if trace and all("time_us" in e for e in trace) else None,
            "streams": len({e.get("stream") for e in trace} | {s.get("stream") for s in segs}),
            "oom_entries": oom,
            "frees_of_addresses_never_allocated_in_trace": fr_unknown,
            "segment_frees_unmaps_not_covered_by_earlier_maps": seg_unknown,
            "segment_unmaps_of_sub_ranges": seg_subrange,
            "memoryviz_active": mv,
            "memoryviz_segment_timeline": memoryviz_segments(trace, segs),
            "backward_replay": backward_replays(trace, act, segs),
        })
    return {
        "file": os.path.relpath(path, REPO), "pickle_protocol": proto, "opcodes": ops,
        "top_level": top_kind, "top_keys": top_keys,
        "device_trace_lists": len(traces) if not isinstance(obj, list) else None,
        "trace_entries_per_list": [len(t) for t in traces],
        "devices": devs,
        "segments": len(segments),
        "blocks": sum(len(s["blocks"]) for s in segments),
        "reserved_bytes": sum(s["total_size"] for s in segments),
        "allocated_bytes": sum(b["size"] for s in segments for b in s["blocks"] if b["state"] == "active_allocated"),
        "allocated_requested_bytes": sum(b["requested_size"] for s in segments for b in s["blocks"]
                                         if b["state"] == "active_allocated"),
        "segment_keys": seg_keys, "block_keys": block_keys, "trace_entry_keys": entry_keys,
        "newer_fields": newer,
        "per_device": per_device,
    }


# ==========================================================================================

def main():
    out = {
        "generated_by": "tests/oracle/real_inputs.py (python %s)" % sys.version.split()[0],
        "fixtures_root": "fixtures/real (paths below are relative to the repository root)",
        "leaks_dump_msinsight_db": leaks_figures(),
        "memscope_host_pinned_db": host_pinned_figures(),
        "profiler": profiler_figures(),
        "snapshots": {},
    }
    for name in sorted(os.listdir(SNAP)):
        if name.endswith((".pkl", ".pickle")):
            out["snapshots"][name] = snapshot_figures(os.path.join(SNAP, name))
    # sanity: published figures of snapshot-format.md 7.2 for the two older fixtures
    known = {"cuda_small_cpp_frames.pickle": (8771952, 108258676, 48748928),
             "cuda_transformer_forward.pickle": (13628553216, 17602723840, 17602723840)}
    for name, (s, p, e) in known.items():
        mv = out["snapshots"][name]["per_device"][0]["memoryviz_active"]
        assert (mv["initial"], mv["peak"], mv["end"]) == (s, p, e), (name, mv)
    with open(OUT_JSON, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print("wrote", OUT_JSON)
    print("wrote", OUT_CSV)


if __name__ == "__main__":
    main()
