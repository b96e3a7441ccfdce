#!/usr/bin/env python3
"""Independent figures for the Ascend profiler layout fixtures (tests/it/profiler_layouts.rs).

Plain python3, standard library only (csv, fractions, json), no memq code. Reads the raw files
and writes tests/oracle/profiler_layouts.json (deterministic: re-running gives the same bytes).

    python3 tests/oracle/profiler_layouts.py

Conventions: `line` = 1-based line of the row in its file (the header is line 1); times in ns
since the Unix epoch (the file's µs × 1000, exact); sizes in bytes (MB × 1 048 576, KB × 1 024,
exact, or rounded to the nearest byte when the cell's decimals go below a byte); a peak is the
highest value, its time and line those of the first row reaching it in time order (file order
for rows of the same time).

A cell is "scientific" when it matches [+-]digits[.digits](e|E)[+-]digits; such a row is counted
as a reject (memq's choice, docs/formats/profiler.md §3), whatever its other cells.
"""

import csv
import json
import os
import re
from fractions import Fraction

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SCI = re.compile(r"^[+-]?\d*\.?\d*[eE][+-]?\d+$")


def path(rel):
    return os.path.join(ROOT, rel)


def rows_of(rel):
    """(header, [(line, cells)]) with cells stripped (the profiler ends times with a TAB)."""
    with open(path(rel), newline="", encoding="utf-8") as f:
        raw = list(csv.reader(f))
    header = [h.strip() for h in raw[0]]
    out = []
    for i, cells in enumerate(raw[1:], start=2):
        if not any(c.strip() for c in cells):
            continue
        out.append((i, [c.strip() for c in cells]))
    return header, out


def line_ends(rel):
    data = open(path(rel), "rb").read()
    return "CRLF" if b"\r\n" in data else "LF"


def exact(text, factor):
    value = Fraction(text) * factor
    if value.denominator != 1:
        decimals = len(text.split(".")[1]) if "." in text else 0
        # The digits go below the unit: the nearest whole unit is the true one.
        assert factor < 10**decimals, (text, factor)
        return round(value)
    return int(value)


def ns(text):
    return exact(text, 1000)


def unit_factor(name):
    unit = name[name.index("(") + 1 : name.index(")")]
    return {"KB": 1024, "MB": 1 << 20}[unit]


def peaks(points):
    """points: (key, ts, line, value) → {key: {peak_bytes, peak_ts_ns, peak_line, points}}."""
    out = {}
    for key, ts, line, value in sorted(points, key=lambda p: (p[1], p[2])):
        o = out.setdefault(key, {"peak_bytes": value, "peak_ts_ns": ts, "peak_line": line, "points": 0})
        o["points"] += 1
        if value > o["peak_bytes"]:
            o.update(peak_bytes=value, peak_ts_ns=ts, peak_line=line)
    return out


def module_mem(rel):
    header, rows = rows_of(rel)
    col = {h.split("(")[0]: i for i, h in enumerate(header)}
    factor = unit_factor(header[col["Total Reserved"]])
    pts = []
    device_ids = set()
    for line, c in rows:
        assert len(c) == len(header)
        ts = ns(c[col["Timestamp"]])
        reserved = exact(c[col["Total Reserved"]], factor)
        if "Device_id" in col:
            device_ids.add(c[col["Device_id"]])
        pts.append((c[col["Component"]], ts, line, reserved))
    per = peaks(pts)
    app = per["APP"]
    return {
        "file": rel,
        "line_ends": line_ends(rel),
        "header": header,
        "rows": len(rows),
        "components": len(per),
        "device_ids": sorted(device_ids),
        "devices": sorted({c[col["Device"]] for _, c in rows}),
        "min_ts_ns": min(p[1] for p in pts),
        "max_ts_ns": max(p[1] for p in pts),
        "app_peak": app,
        "largest_non_app": max(
            ({"component": k, **v} for k, v in per.items() if k != "APP"),
            key=lambda v: (v["peak_bytes"], v["component"]),
        ),
        "sum_of_peaks_bytes": sum(v["peak_bytes"] for v in per.values()),
        "negative_reserved_rows": sum(1 for p in pts if p[3] < 0),
    }


def static_op_mem(rel):
    header, rows = rows_of(rel)
    col = {h.split("(")[0]: i for i, h in enumerate(header)}
    factor = unit_factor(header[col["Size"]])
    graphs = {}
    not_whole = []
    for line, c in rows:
        size_text = c[col["Size"]]
        size = exact(size_text, factor)
        if Fraction(size_text) * factor != size:
            not_whole.append({"line": line, "cell": size_text, "bytes": size})
        g = graphs.setdefault(
            int(c[col["Graph ID"]]),
            {"operators": 0, "operator_bytes": 0, "held_to_end": 0, "total_bytes": None, "total_line": None},
        )
        if c[col["Op Name"]] == "TOTAL":
            g["total_bytes"] = size
            g["total_line"] = line
            continue
        g["operators"] += 1
        g["operator_bytes"] += size
        if c[col["Node Index End"]] == "4294967295":
            g["held_to_end"] += 1
    return {
        "file": rel,
        "line_ends": line_ends(rel),
        "header": header,
        "rows": len(rows),
        "device_ids": sorted({c[col["Device_id"]] for _, c in rows}),
        "graphs": [{"graph_id": k, **v} for k, v in sorted(graphs.items())],
        "sizes_not_whole": not_whole,
    }


def memory_record(rel):
    header, rows = rows_of(rel)
    col = {h.split("(")[0]: i for i, h in enumerate(header)}
    kept, rejects, pts = [], [], []
    for line, c in rows:
        sci = [(header[i], v) for i, v in enumerate(c) if SCI.match(v)]
        if sci:
            rejects.append({"line": line, "column": sci[0][0], "cell": sci[0][1]})
            continue
        kept.append(line)
        ts = ns(c[col["Timestamp"]])
        for metric, name in (("allocated", "Total Allocated"), ("reserved", "Total Reserved")):
            if name in col and c[col[name]] != "":
                pts.append(((c[col["Component"]], metric), ts, line, exact(c[col[name]], unit_factor(header[col[name]]))))
    per = peaks(pts)
    counts = {}
    for line, c in rows:
        if line in kept:
            counts[c[col["Component"]]] = counts.get(c[col["Component"]], 0) + 1
    return {
        "file": rel,
        "line_ends": line_ends(rel),
        "header": header,
        "rows": len(rows),
        "kept": len(kept),
        "rows_per_component": dict(sorted(counts.items())),
        "rejects": rejects,
        "peaks": [
            {"component": k[0], "metric": k[1], **v} for k, v in sorted(per.items())
        ],
    }


def main():
    out = {
        "npu_module_mem": module_mem("fixtures/profiler/npu_module_mem.csv"),
        "npu_module_mem_device_id": module_mem("fixtures/profiler/npu_module_mem_device_id.csv"),
        "npu_module_mem_crlf": module_mem("fixtures/real/profiler/layouts/npu_module_mem_crlf.csv"),
        "static_op_mem": static_op_mem("fixtures/profiler/static_op_mem.csv"),
        "memory_record_5col_2023": memory_record("fixtures/real/profiler/layouts/memory_record_5col_2023.csv"),
        "memory_record_5col_scientific_cell": memory_record(
            "fixtures/profiler/memory_record_5col_scientific_cell.csv"
        ),
        "memory_record_spreadsheet": memory_record("fixtures/profiler/memory_record_spreadsheet.csv"),
    }
    # Facts the tests rely on, checked here so that a changed fixture fails loudly.
    assert out["npu_module_mem"]["line_ends"] == "LF" and out["npu_module_mem"]["device_ids"] == []
    assert out["npu_module_mem_crlf"]["line_ends"] == "CRLF"
    assert out["npu_module_mem_device_id"]["header"][0] == "Device_id"
    assert len(out["memory_record_5col_2023"]["header"]) == 5
    assert len(out["memory_record_5col_scientific_cell"]["rejects"]) == 1
    spreadsheet = out["memory_record_spreadsheet"]
    assert spreadsheet["kept"] == 0 and len(spreadsheet["rejects"]) == spreadsheet["rows"]
    with open(path("tests/oracle/profiler_layouts.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, sort_keys=True, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
