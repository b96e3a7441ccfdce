#!/usr/bin/env python3
"""Latency of `memq serve` as the page sees it (docs/serve.md, "How it stays fast").

    benches/serve_latency.py [--memq PATH] [--runs N] [--px 1400] INPUT [INPUT...]

For each INPUT (a dataset folder, a dump, a pickle) it starts `memq serve INPUT --no-open
--port 0`, and times over HTTP, the way the page asks:
  start      from spawning the server to its URL on stdout (open + ingest when not cached)
  first      the first paint's requests: /api/info, then the largest series' whole timeline
  zoom       /api/timeline of windows 1/4, 1/64, 1/4096 … of the series around its peak
  pan        /api/timeline of the 1/64 window moved by half its width, 20 times
  moment     /api/moment at the peak (once when it takes over 10 s)
  findings   when /api/findings answers, from the start: the report is judged in the background
             from the start, so the requests before share the cores with it (--settle: wait for
             it after the first paint, and time the rest on an idle server)
Each request is timed RUNS times (default 20); the table gives the median and the 95th
percentile in ms. The targets (docs/serve.md): a pan or zoom request <= 50 ms, the first paint
<= 1 s. Run it on the release build (the default binary is $HOME/.cache/memq-release/release/memq).
"""
import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memq", default=os.environ.get("MEMQ", os.path.expanduser("~/.cache/memq-release/release/memq")))
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--px", type=int, default=1400)
    ap.add_argument("--moment-timeout", type=float, default=600)
    ap.add_argument("--settle", action="store_true", help="wait for the findings before the zooms")
    ap.add_argument("inputs", nargs="+")
    a = ap.parse_args()
    # the box is shared: the load beside the figures
    print(f"load average {' '.join(open('/proc/loadavg').read().split()[:3])}, {os.cpu_count()} cpus")
    print("| input | request | median ms | p95 ms | buckets |")
    print("|---|---|---:|---:|---:|")
    for inp in a.inputs:
        bench(a, inp)


def bench(a, inp):
    t = time.monotonic()
    p = subprocess.Popen([a.memq, "serve", "--no-open", "--port", "0", inp], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        url = p.stdout.readline().strip()
        start_ms = (time.monotonic() - t) * 1000
        rest = url.split("http://127.0.0.1:", 1)[1]
        port, token = rest.split("/?token=")
        port = int(port)
        headers = {"Host": f"127.0.0.1:{port}", "Cookie": f"memq_token={token}"}

        def get(path, timeout=120):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
            c.request("GET", path, headers=headers)
            r = c.getresponse()
            body = r.read()
            if r.status != 200:
                raise SystemExit(f"{path}: {r.status} {body[:200]!r}")
            return json.loads(body)

        name = os.path.basename(inp.rstrip("/"))
        row(name, "start (open, ingest if not cached)", [start_ms], "")
        times = []
        for _ in range(3):
            t0 = time.monotonic()
            info = get("/api/info")
            s = max(info["series"], key=lambda x: x.get("points", 0))
            get(f"/api/timeline?series={s['id']}&px={a.px}")
            times.append((time.monotonic() - t0) * 1000)
        row(name, f"first paint requests ({s['label']})", times, "")
        if a.settle:
            # the zooms below without the findings being judged beside them
            get("/api/findings", a.moment_timeout)
            row(name, "findings ready (waited for, --settle)", [(time.monotonic() - t) * 1000], "")
        span = s["x_max_rel"] - s["x_min_rel"]
        peak = (s.get("peak") or {}).get("x_rel", span / 2)
        for div in (1, 4, 64, 4096, 262144):
            w = span / div
            if w < 2:
                break
            x0 = max(s["x_min_rel"], peak - w / 2)
            path = f"/api/timeline?series={s['id']}&x0={x0}&x1={x0 + w}&px={a.px}"
            ts, n = timed(get, path, a.runs)
            row(name, f"zoom 1/{div}", ts, n)
        w = span / 64
        x0 = max(s["x_min_rel"], peak - w / 2)
        ts = []
        for i in range(a.runs):
            x = x0 + (i - a.runs / 2) * w / 2
            t0 = time.monotonic()
            get(f"/api/timeline?series={s['id']}&x0={x}&x1={x + w}&px={a.px}")
            ts.append((time.monotonic() - t0) * 1000)
        row(name, "pan (1/64 window)", ts, "")
        # a slow moment is timed once (its figure is then the one run)
        ts = []
        for _ in range(max(3, a.runs // 4)):
            t0 = time.monotonic()
            try:
                get(f"/api/moment?series={s['id']}&x={peak}", a.moment_timeout)
            except (TimeoutError, OSError):
                print(f"| {name} | moment at the peak | > {a.moment_timeout:.0f} s | | |", flush=True)
                break
            ts.append((time.monotonic() - t0) * 1000)
            if ts[-1] > 10_000:
                break
        if ts:
            row(name, "moment at the peak", ts, "")
        # the report's findings are judged in the background from the start (the requests above
        # share the cores with them): when they are ready, counted from the start
        try:
            get("/api/findings", a.moment_timeout)
            row(name, "findings ready (from the start, in the background)", [(time.monotonic() - t) * 1000], "")
        except (TimeoutError, OSError):
            print(f"| {name} | findings ready | > {(time.monotonic() - t):.0f} s | | |", flush=True)
    finally:
        p.terminate()
        p.wait()


def timed(get, path, runs):
    ts, n = [], 0
    for _ in range(runs):
        t0 = time.monotonic()
        v = get(path)
        ts.append((time.monotonic() - t0) * 1000)
        if "buckets" in v:
            n = len(v["buckets"]["x0"])
    return ts, n


def row(name, what, ts, n):
    ts = sorted(ts)
    p95 = ts[min(len(ts) - 1, int(len(ts) * 0.95))]
    print(f"| {name} | {what} | {statistics.median(ts):.1f} | {p95:.1f} | {n} |", flush=True)


if __name__ == "__main__":
    main()
