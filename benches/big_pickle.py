#!/usr/bin/env python3
"""Builds a large snapshot pickle from a real one for the snapshot benchmarks:
the device trace entries are repeated, each copy shifted in address space and in time, until
the file reaches the wanted size; segments and the other keys stay as they are. Frame lists are
shared between copies (pickle stores them once, as the real writer does for repeated stacks).

    benches/big_pickle.py SRC.pickle OUT.pickle [MEGABYTES=100]

The >= 1 GB pickle of the streaming-ingest benchmark (16.9 M trace entries of the G4 format:
compile_context on every entry, three devices, an oom entry), and a 200 MB one to see how
memory scales:

    python3 benches/big_pickle.py \
        fixtures/real/snapshots/real/cuda_three_gpus_expandable_oom.pickle /tmp/big.pickle 1100
    python3 benches/big_pickle.py \
        fixtures/real/snapshots/real/cuda_three_gpus_expandable_oom.pickle /tmp/mid.pickle 200
    /usr/bin/time -v memq ingest /tmp/big.pickle -o /tmp/big.memq --force
    memq sql /tmp/big.memq -e "SELECT * FROM snap_peak"

(`cuda_transformer_forward.pickle`, one device of the G3 format, gives 19.9 M entries for
1 100 MB.) Building the 1 100 MB file holds the whole repeated trace in Python: about 8 GB of
memory and a minute.
"""
import pickle
import sys


def main():
    src, out = sys.argv[1], sys.argv[2]
    want = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    with open(src, "rb") as f:
        snap = pickle.load(f)
    traces = snap["device_traces"]
    base = len(pickle.dumps(snap, protocol=4))
    span = 0
    for t in traces:
        times = [e.get("time_us", 0) for e in t]
        if times:
            span = max(span, max(times) - min(times) + 1)
    shift_addr = 1 << 40

    def repeated(copies):
        return [
            [shifted(e, k) for k in range(copies) for e in t]
            for t in traces
        ]

    def shifted(e, k):
        c = dict(e)
        if "addr" in c:
            c["addr"] = c["addr"] + k * shift_addr
        if "time_us" in c:
            c["time_us"] = c["time_us"] + k * span
        return c

    # What one more copy adds (frame lists are stored once whatever the copies).
    snap["device_traces"] = repeated(2)
    per_copy = max(1, len(pickle.dumps(snap, protocol=4)) - base)
    copies = max(1, ((want << 20) - base) // per_copy + 1)
    snap["device_traces"] = repeated(copies)
    with open(out, "wb") as f:
        pickle.dump(snap, f, protocol=4)
    print(f"{out}: {copies} copies of {sum(len(t) for t in traces)} trace entries")


if __name__ == "__main__":
    main()
