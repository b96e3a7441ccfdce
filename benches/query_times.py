#!/usr/bin/env python3
"""Times statements alone, whole processes (`memq sql DATASET -e SQL`, start-up included), for
one memq build or two compared in the same minute (their runs alternate, so both see the same
machine). Prints a Markdown table of the median (fastest) milliseconds per statement.

    benches/query_times.py DATASET MEMQ [MEMQ_B] [--runs N] [-- SQL ...]

A build given as `MEMQ@DATASET2` reads DATASET2 instead (the same sources ingested by that
build: needed when the two builds' dataset versions differ).

Without statements, times `SELECT 1` and the analyses `benches/compare.sh` runs that take no
moment (those need the dump's own timestamps: pass them, e.g.
`-- "SELECT * FROM window_summary(T0, T1, 'PTA')"`). Used for the start-up and planning table
of docs/performance.md. Each statement's rows are checked equal between the two builds.
"""
import statistics
import subprocess
import sys
import time

DEFAULT = [
    "SELECT 1",
    "SELECT * FROM stats",
    "SELECT * FROM peaks",
    "SELECT * FROM owner_peaks",
    "SELECT * FROM leak_candidates",
    "SELECT * FROM fragmentation",
    "SELECT * FROM trend(20, 'PTA')",
    "SELECT * FROM step_peaks",
    "SELECT * FROM oom_findings",
    "SELECT * FROM hal_segments(1048576)",
]


def run(memq, dataset, sql):
    """Seconds of one whole process, and its sorted CSV lines."""
    start = time.perf_counter()
    out = subprocess.run(
        [memq, "sql", dataset, "-e", sql, "--format", "csv"],
        stdout=subprocess.PIPE,
        check=True,
    ).stdout
    return time.perf_counter() - start, sorted(out.splitlines())


def main(argv):
    runs = 7
    statements = []
    if "--" in argv:
        i = argv.index("--")
        argv, statements = argv[:i], argv[i + 1 :]
    if "--runs" in argv:
        i = argv.index("--runs")
        runs = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2 :]
    if len(argv) not in (2, 3):
        sys.exit(__doc__)
    dataset, builds = argv[0], argv[1:]
    heads = " | ".join(f"build {chr(65 + k)} ms" for k in range(len(builds)))
    print(f"| statement | {heads} |")
    print("|---|" + "---:|" * len(builds))
    for sql in statements or DEFAULT:
        times = [[] for _ in builds]
        rows = [None for _ in builds]
        for _ in range(runs):
            for k, build in enumerate(builds):
                memq, _, own = build.partition("@")
                secs, rows[k] = run(memq, own or dataset, sql)
                times[k].append(secs * 1000)
        if any(r != rows[0] for r in rows):
            sys.exit(f"query_times.py: the builds answer `{sql}` differently")
        cells = " | ".join(f"{statistics.median(t):.0f} ({min(t):.0f})" for t in times)
        print(f"| `{sql}` | {cells} |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
