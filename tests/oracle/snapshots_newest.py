#!/usr/bin/env python3
"""Independent figures for fixtures/snapshots-newest/ (stdlib only, no memq code).

Reads every snapshot there with Python's own `pickle` (an Unpickler that refuses every class
and persistent id: the files are pure data) or `json`, and writes snapshots_newest.json beside
this script. Re-running gives the same bytes.

Run: python3 tests/oracle/snapshots_newest.py
"""

import json
import os
import pickle
import pickletools

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
FIXTURES = os.path.join(ROOT, "fixtures", "snapshots-newest")
LIVE = ("active_allocated", "active_pending_free")


class DataOnly(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"class {module}.{name} refused")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("persistent id refused")


def load(path):
    if path.endswith(".json"):
        with open(path) as f:
            return json.load(f)
    with open(path, "rb") as f:
        return DataOnly(f).load()


def labels_of_live_blocks(segments, entries):
    """Per live block address: the user_metadata of the alloc entry that made it (replaying
    alloc / free_completed / free in order), or None when it was allocated before the window."""
    holder = {}
    for e in entries:
        if e.get("action") == "alloc":
            holder[e["addr"]] = e.get("user_metadata", "")
        elif e.get("action") in ("free_completed", "free"):
            holder.pop(e.get("addr"), None)
    out = {}
    for s in segments:
        for b in s["blocks"]:
            if b["state"] in LIVE and b["address"] in holder:
                out[b["address"]] = holder[b["address"]]
    return out


def timeline(segments, entries):
    """MemoryViz's Active Memory Timeline and the segment timeline (docs/formats/snapshot.md
    §6.2) over one trace: (start, peak, peak position, end) of active requested bytes, and of
    reserved bytes."""
    allocated = set()
    before = 0
    for e in entries:
        a = e.get("action")
        if a == "alloc":
            allocated.add(e["addr"])
        elif a in ("free_completed", "free") and e["addr"] not in allocated:
            before += e["size"]
    labels = labels_of_live_blocks(segments, entries)
    for s in segments:
        for b in s["blocks"]:
            if b["state"] in LIVE and b["address"] not in labels:
                before += b["requested_size"]
    net = 0
    for e in entries:
        if e.get("action") in ("segment_alloc", "segment_map"):
            net += e["size"]
        elif e.get("action") in ("segment_free", "segment_unmap"):
            net -= e["size"]
    reserved = sum(s["total_size"] for s in segments) - net
    active = before
    a_peak, a_seq, r_peak, r_seq = active, None, reserved, None
    for seq, e in enumerate(entries):
        a = e.get("action")
        if a == "alloc":
            active += e["size"]
        elif a in ("free_completed", "free"):
            active -= e["size"]
        elif a in ("segment_alloc", "segment_map"):
            reserved += e["size"]
        elif a in ("segment_free", "segment_unmap"):
            reserved -= e["size"]
        if active > a_peak:
            a_peak, a_seq = active, seq
        if reserved > r_peak:
            r_peak, r_seq = reserved, seq
    return {"active_start": before, "active_peak": a_peak, "active_peak_seq": a_seq,
            "active_end": active, "reserved_peak": r_peak, "reserved_peak_seq": r_seq}


def memory(segments, entries):
    live = [b for s in segments for b in s["blocks"] if b["state"] in LIVE]
    by_label = {}
    labels = labels_of_live_blocks(segments, entries)
    for b in live:
        label = labels.get(b["address"]) or None
        if label:
            by_label[label] = by_label.get(label, 0) + b["size"]
    return {
        "segments": len(segments),
        "blocks": sum(len(s["blocks"]) for s in segments),
        "trace_entries": len(entries),
        "reserved": sum(s["total_size"] for s in segments),
        "allocated": sum(b["size"] for b in live),
        "active_requested": sum(b["requested_size"] for b in live),
        "live_blocks": len(live),
        "live_bytes_per_label": dict(sorted(by_label.items())),
        **timeline(segments, entries),
    }


def protocol(path):
    """The pickle's protocol: its PROTO header, else (protocols 0 and 1 have none) the highest
    protocol of its opcodes; None for JSON."""
    if path.endswith(".json"):
        return None
    with open(path, "rb") as f:
        data = f.read()
    if data[0] == 0x80:
        return data[1]
    return max(op.proto for op, _, _ in pickletools.genops(data))


def figures(path):
    snap = load(path)
    device_entries = [e for trace in snap["device_traces"] for e in trace]
    out = {"file": os.path.relpath(path, ROOT), "protocol": protocol(path),
           "device": memory(snap["segments"], device_entries)}
    pools = {}
    for s in snap["segments"]:
        pool = "%d,%d" % tuple(s["segment_pool_id"])
        pools[pool] = pools.get(pool, 0) + s["total_size"]
    out["reserved_per_pool"] = dict(sorted(pools.items()))
    out["private_pools"] = sum(1 for p in pools if p != "0,0")
    notes = []
    for d, trace in enumerate(snap["device_traces"]):
        last_alloc = {}
        for seq, e in enumerate(trace):
            if e.get("action") == "alloc":
                last_alloc[e["addr"]] = (seq, e.get("user_metadata", ""))
            if e.get("action") == "annotate":
                alloc_seq, label = last_alloc.get(e["addr"], (None, ""))
                notes.append({"device": d, "seq": seq, "note": e["user_metadata"],
                              "alloc_seq": alloc_seq, "label": label or None})
    out["annotations"] = notes
    categories = {}
    for e in device_entries:
        if "category" in e:
            categories[e["category"]] = categories.get(e["category"], 0) + 1
    out["entries_per_category"] = dict(sorted(categories.items()))
    if "host_segments" in snap or "host_traces" in snap:
        out["host"] = memory(snap.get("host_segments", []), snap.get("host_traces", []))
    return out


def main():
    result = {}
    for name in sorted(os.listdir(FIXTURES)):
        if not (name.endswith(".pickle") or name.endswith(".json")):
            continue
        if name in ("not_a_snapshot.json", "truncated.json"):
            continue
        result[name] = figures(os.path.join(FIXTURES, name))
    # Every encoding of one snapshot has the same figures.
    for stem in ("newest", "accelerator"):
        encodings = [v for k, v in result.items() if k.startswith(stem)]
        assert len(encodings) == 6, stem
        for v in encodings:
            same = {**v, "file": "", "protocol": None}
            assert same == {**encodings[0], "file": "", "protocol": None}, v["file"]
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "snapshots_newest.json"),
              "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
