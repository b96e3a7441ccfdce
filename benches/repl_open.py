#!/usr/bin/env python3
"""Times how long the interactive shell takes to open (the target: a cached dataset
opens in <= 50 ms): `memq INPUT` is started in a pseudo-terminal, the clock stops when the
`memq> ` prompt is printed, then `\\q` quits. The first start ingests a raw INPUT into the cache
and is not counted (printed apart); the next RUNS starts reopen the cached dataset.

    benches/repl_open.py MEMQ INPUT [RUNS=7]

Prints the first start, then the fastest and median of the cached ones, in milliseconds.
"""
import os
import pty
import select
import statistics
import sys
import time

PROMPT = b"memq> "


def open_once(memq, target, limit=120.0):
    """Seconds from exec to the first prompt; the shell is then told to quit."""
    started = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(memq, [memq, target])
    seen = b""
    opened = None
    try:
        while time.perf_counter() - started < limit:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
            if PROMPT in seen:
                opened = time.perf_counter() - started
                os.write(fd, b"\\q\r")
                break
        # drain until the shell exits
        while True:
            ready, _, _ = select.select([fd], [], [], 5.0)
            if not ready:
                break
            try:
                if not os.read(fd, 65536):
                    break
            except OSError:
                break
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    if opened is None:
        sys.exit(f"repl_open.py: no prompt from {memq} {target}; it printed:\n{seen.decode(errors='replace')[-2000:]}")
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"repl_open.py: {memq} {target} exited with {os.waitstatus_to_exitcode(status)}")
    return opened


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    memq, target = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    first = open_once(memq, target)
    times = sorted(open_once(memq, target) for _ in range(runs))
    print(f"first start (ingest into the cache when INPUT is raw): {first * 1000:.1f} ms")
    print(f"reopening the cached dataset, {runs} run{'s' if runs != 1 else ''}: fastest {times[0] * 1000:.1f} ms, "
          f"median {statistics.median(times) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
