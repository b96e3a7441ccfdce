#!/usr/bin/env python3
"""Independent figures for the torch.profiler trace fixtures (tests/it/traces.rs).

Plain python3, standard library only (json, decimal), no memq code. Reads the raw files and
writes tests/oracle/traces.json (deterministic: re-running gives the same bytes).

    python3 tests/oracle/traces.py

Conventions: numbers are read as exact decimals (json parse_float=Decimal); a moment is
baseTimeNanoseconds (0 when absent) + ts × 1000, in ns since the Unix epoch, and must be an
integer; `event` = 0-based position in traceEvents; device = "cpu" for Device Type 0 with a
negative Device Id, else "<type>:<id>" (c10::DeviceType: 0 cpu, 1 cuda, 20 npu).
Time order = by (ts, event). A peak is the highest value, its moment and event those of the
first event reaching it in time order. The op of an event = among the `ph: X`, `cat: cpu_op`
events of the same (pid, tid) with ts ≤ t ≤ ts + dur, the one with the latest start, then the
shortest, then the later in the file (brute force here). Totals missing from an event
(2021 layout) = running sum of Bytes of its device in time order; reserved stays missing.
"""

import json
import os
from decimal import Decimal

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
FILES = {
    "real": "fixtures/real/profiler/traces/gpu_working_chrome_trace.json",
    "no_totals_2021": "fixtures/trace/no_totals_2021.pt.trace.json",
}
TYPES = {0: "cpu", 1: "cuda", 20: "npu"}


def ns(base, us):
    v = Decimal(us) * 1000
    assert v == v.to_integral_value(), us
    return base + int(v)


def figures(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        doc = json.load(f, parse_float=Decimal)
    base = int(doc.get("baseTimeNanoseconds", 0))
    events = doc["traceEvents"]
    ops = []
    rows = []
    for i, e in enumerate(events):
        if e.get("ph") == "X" and e.get("cat") == "cpu_op":
            start = ns(base, e["ts"])
            ops.append((e["pid"], e["tid"], start, start + int(Decimal(e["dur"]) * 1000), i, e["name"]))
        elif e.get("name") == "[memory]" and e.get("ph") in ("i", "I"):
            a = e["args"]
            t = a["Device Type"]
            dev = TYPES.get(t, "type %d" % t)
            if a["Device Id"] >= 0:
                dev = "%s:%d" % (dev, a["Device Id"])
            rows.append({
                "event": i, "ts": ns(base, e["ts"]), "device": dev, "bytes": a["Bytes"],
                "allocated": a.get("Total Allocated"), "reserved": a.get("Total Reserved"),
                "pid": e["pid"], "tid": e["tid"],
            })
    rows.sort(key=lambda r: (r["ts"], r["event"]))
    sums = {}
    for r in rows:
        sums[r["device"]] = sums.get(r["device"], 0) + r["bytes"]
        r["rebuilt"] = r["allocated"] is None
        if r["rebuilt"]:
            r["allocated"] = sums[r["device"]]
        holding = [o for o in ops if o[0] == r["pid"] and o[1] == r["tid"] and o[2] <= r["ts"] <= o[3]]
        best = max(holding, key=lambda o: (o[2], -o[3], o[4]), default=None)
        r["op"] = best[5] if best else None
    devices = sorted({r["device"] for r in rows})
    peaks = []
    for d in devices:
        for metric in ("allocated", "reserved"):
            pts = [r for r in rows if r["device"] == d and r[metric] is not None]
            if not pts:
                continue
            top = max(r[metric] for r in pts)
            first = next(r for r in pts if r[metric] == top)
            peaks.append({"device": d, "metric": metric, "peak_bytes": top, "peak_ts": first["ts"],
                          "peak_event": first["event"], "op": first["op"], "events": len(pts)})
    by_op = {}
    for r in rows:
        k = (r["device"], r["op"] or "")
        g = by_op.setdefault(k, [0, 0, 0, 0])
        if r["bytes"] > 0:
            g[0] += 1
            g[1] += r["bytes"]
        elif r["bytes"] < 0:
            g[2] += 1
            g[3] -= r["bytes"]
    out = {
        "file": rel,
        "events": len(events),
        "cpu_ops": len(ops),
        "memory_rows": len(rows),
        "rows_per_device": {d: sum(1 for r in rows if r["device"] == d) for d in devices},
        "rows_with_op": sum(1 for r in rows if r["op"] is not None),
        "rebuilt_rows": sum(1 for r in rows if r["rebuilt"]),
        "first_ts": rows[0]["ts"],
        "last_ts": rows[-1]["ts"],
        "peaks": peaks,
        "by_op": [{"device": d, "op": o or None, "allocations": g[0], "allocated_bytes": g[1],
                   "frees": g[2], "freed_bytes": g[3], "retained_bytes": g[1] - g[3]}
                  for (d, o), g in sorted(by_op.items())],
    }
    if out["rebuilt_rows"]:
        out["running_allocated"] = [[r["event"], r["allocated"]] for r in rows]
    return out


def main():
    result = {k: figures(v) for k, v in FILES.items()}
    with open(os.path.join(ROOT, "tests", "oracle", "traces.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
