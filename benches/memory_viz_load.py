#!/usr/bin/env python3
"""Load time of a snapshot in PyTorch's memory_viz beside `memq serve`, in the same headless
chromium, in the same run (docs/serve.md, "Beside memory_viz").

    benches/memory_viz_load.py --memory-viz-js MemoryViz.js --d3 d3.min.js \\
        [--memq PATH] [--chromium /usr/bin/chromium] [--timeout 600] [--shots DIR] PICKLE...

memory_viz is what `python -m torch.cuda._memory_viz trace_plot SNAPSHOT -o page.html` writes:
torch/cuda/_memory_viz.py (`_format_viz`) embeds the pickle, base64-encoded, in a page whose
module script imports MemoryViz.js and calls `add_local_files(files, 'Active Memory Timeline')`;
MemoryViz.js then decodes, unpickles and annotates the whole snapshot in the browser and draws
the timeline of the first device as SVG polygons. This script serves that same page from a local
HTTP server (the pickle's bytes embedded as `_format_viz` embeds them: padded with NUL bytes as
it pads them, base64, in the same JSON; `_format_viz` re-pickles the loaded snapshot with
Python's default protocol 4, and the pickles here already are protocol 4, so the file's bytes
are embedded as they are), with two changes that do not touch the work measured: the page
imports MemoryViz.js from this server, not from cdn.jsdelivr.net, and MemoryViz.js's imports of
d3 from cdn.skypack.dev (d3@5 and its d3-axis, d3-scale, d3-zoom, d3-brush) read the d3 5 bundle
loaded before it (`window.d3`, which holds all of them). It then times, in headless chromium
(DevTools protocol), from the navigation to the first `svg polygon` (the timeline drawn), or
reports how it failed: a script error, the renderer crashing (out of memory), or nothing drawn
within --timeout seconds.

Neither file is part of memq (they are PyTorch's and d3's code): get them once, outside the
repository, e.g.

    # MemoryViz.js: the file _memory_viz.py loads; not in the torch wheel (the page fetches it
    # from the CDN), so from the PyTorch repository at the commit you compare with:
    curl -L -o /tmp/mviz/MemoryViz.js \\
        https://raw.githubusercontent.com/pytorch/pytorch/COMMIT/torch/utils/viz/MemoryViz.js
    # d3 5 (the version MemoryViz.js imports), from npm:
    (cd /tmp/mviz && npm pack d3@5.16.0 && tar xzf d3-5.16.0.tgz package/dist/d3.min.js)

The figures in docs/serve.md were taken with the MemoryViz.js of pytorch/pytorch at commit
00067369c9339bed950762afec327514d6fa2566 (46 791 bytes, sha256 04654ea8f89d3cdf…; the page of
torch 2.15.0's _memory_viz.py, git d0f2af8b, which imports MemoryViz.js from the `main` branch,
so every torch release draws with the MemoryViz.js of its day) and d3 5.16.0.

The memq side of each PICKLE, in the same run and the same browser: `memq ingest PICKLE` once
into a temporary dataset (timed; `memq serve PICKLE` does this on its first open and caches it),
then `memq serve DATASET` and the page, timed from starting the server to the page's first
timeline drawn (`document.body.dataset.ready`, set by the page once /api/info and the first
timeline are drawn). Run it on the release build (the default binary is
$HOME/.cache/memq-release/release/memq).
"""
import argparse
import base64
import hashlib
import http.server
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

VIZ_KIND = "Active Memory Timeline"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memory-viz-js", required=True, help="torch/utils/viz/MemoryViz.js of PyTorch")
    ap.add_argument("--d3", required=True, help="d3 5's dist/d3.min.js")
    ap.add_argument("--memq", default=os.environ.get("MEMQ", os.path.expanduser("~/.cache/memq-release/release/memq")))
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--shots", help="save a screenshot of each page drawn into DIR")
    ap.add_argument("--skip-memory-viz", action="store_true")
    ap.add_argument("--skip-memq", action="store_true")
    ap.add_argument("pickles", nargs="+")
    a = ap.parse_args()
    js = open(a.memory_viz_js, encoding="utf-8").read()
    print(f"MemoryViz.js: {a.memory_viz_js} ({len(js)} bytes, sha256 {hashlib.sha256(js.encode()).hexdigest()[:16]}); d3: {a.d3}")
    print(f"chromium: {subprocess.run([a.chromium, '--version'], capture_output=True, text=True).stdout.strip()}")
    print(f"load: {open('/proc/loadavg').read().split()[:3]}")
    print()
    print("| snapshot | pickle | memory_viz: load until the timeline is drawn | memq: ingest (once, cached) | memq: server start to first timeline drawn |")
    print("|---|---:|---|---:|---:|")
    server = PageServer(patched(js), open(a.d3, "rb").read())
    try:
        for p in a.pickles:
            name = os.path.basename(p)
            size = f"{os.path.getsize(p) / 2**20:.0f} MiB"
            viz = "skipped" if a.skip_memory_viz else memory_viz(a, server, p)
            ingest, paint = ("skipped", "skipped") if a.skip_memq else memq(a, p)
            print(f"| {name} | {size} | {viz} | {ingest} | {paint} |", flush=True)
    finally:
        server.close()


def patched(js):
    """MemoryViz.js reading d3 from the bundle the page loads first instead of from the CDN."""
    imports = {
        'import * as d3 from "https://cdn.skypack.dev/d3@5";': "const d3 = window.d3;",
        'import {axisLeft} from "https://cdn.skypack.dev/d3-axis@1";': "const {axisLeft} = window.d3;",
        'import {scaleLinear} from "https://cdn.skypack.dev/d3-scale@1";': "const {scaleLinear} = window.d3;",
        'import {zoom, zoomIdentity} from "https://cdn.skypack.dev/d3-zoom@1";': "const {zoom, zoomIdentity} = window.d3;",
        'import {brushX} from "https://cdn.skypack.dev/d3-brush@1";': "const {brushX} = window.d3;",
    }
    for old, new in imports.items():
        if old not in js:
            raise SystemExit(f"MemoryViz.js: no `{old}` (another version? update the imports here)")
        js = js.replace(old, new)
    if "cdn." in js:
        raise SystemExit("MemoryViz.js: another import from a CDN")
    return js.encode()


class PageServer:
    """Serves /viz (the page _memory_viz.py writes, for the pickle set by `show`), /MemoryViz.js
    and /d3.min.js on 127.0.0.1. The page is streamed: the base64 text of a 1 GB pickle is never
    held whole in this process."""

    def __init__(self, js, d3):
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                try:
                    if self.path == "/MemoryViz.js":
                        self.send(js, "text/javascript")
                    elif self.path == "/d3.min.js":
                        self.send(d3, "text/javascript")
                    elif self.path.startswith("/viz"):
                        owner.stream_page(self)
                    else:
                        self.send_error(404)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def send(self, body, kind):
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.pickle = None
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stream_page(self, h):
        size = os.path.getsize(self.pickle)
        # _format_viz: buffer += b"\x00" * (3 - len(buffer) % 3), then base64 of the buffer
        pad = 3 - size % 3
        head = (
            '\n<!DOCTYPE html>\n<html>\n<head>\n</head>\n<body>\n'
            '<script src="/d3.min.js"></script>\n'
            '<script type="module">\nimport {add_local_files} from "/MemoryViz.js"\n'
            'const local_files = [{"name": "snapshot.pickle", "base64": "'
        ).encode()
        tail = f'"}}]\nadd_local_files(local_files, {VIZ_KIND!r})\n</script>\n</body>\n'.encode()
        b64_len = (size + pad) // 3 * 4
        h.send_response(200)
        h.send_header("Content-Type", "text/html; charset=utf-8")
        h.send_header("Content-Length", str(len(head) + b64_len + len(tail)))
        h.end_headers()
        h.wfile.write(head)
        with open(self.pickle, "rb") as f:
            while True:
                chunk = f.read(3 * 2**20)
                if not chunk:
                    break
                if len(chunk) % 3:
                    chunk += b"\x00" * pad
                h.wfile.write(base64.b64encode(chunk))
            if size % 3 == 0:
                h.wfile.write(base64.b64encode(b"\x00" * 3))
        h.wfile.write(tail)

    def close(self):
        self.httpd.shutdown()


class Browser:
    """Headless chromium driven over the DevTools protocol (a minimal WebSocket client: no
    dependency beyond Python)."""

    def __init__(self, chromium):
        self.profile = tempfile.mkdtemp(prefix="mviz-chromium-")
        self.proc = subprocess.Popen(
            [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-dev-shm-usage", "--remote-debugging-port=0", f"--user-data-dir={self.profile}",
             "--window-size=1400,900", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        port = None
        for line in self.proc.stderr:
            m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if m:
                port = int(m.group(1))
                break
        if port is None:
            raise SystemExit("chromium did not start")
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list"))
        page = next(t for t in targets if t["type"] == "page")
        self.ws = WebSocket(page["webSocketDebuggerUrl"])
        self.next_id = 0
        self.events = []
        for m in ("Page.enable", "Runtime.enable", "Inspector.enable"):
            self.call(m)

    def call(self, method, timeout=60, **params):
        self.next_id += 1
        me = self.next_id
        self.ws.send(json.dumps({"id": me, "method": method, "params": params}))
        end = time.monotonic() + timeout
        while True:
            msg = self.ws.recv(max(0.1, end - time.monotonic()))
            if msg is None:
                raise TimeoutError(method)
            m = json.loads(msg)
            if m.get("id") == me:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def failure(self):
        """Why the page failed, from the events seen so far (None: no failure)."""
        for e in self.events:
            if e.get("method") == "Inspector.targetCrashed":
                return "renderer crashed (out of memory)"
            if e.get("method") == "Runtime.exceptionThrown":
                d = e["params"]["exceptionDetails"]
                text = (d.get("exception") or {}).get("description") or d.get("text", "")
                return "script error: " + text.splitlines()[0][:120]
        return None

    def wait(self, expression, timeout, failed="''"):
        """Seconds until `expression` is true in the page, or the failure (a crash, a script
        error, or the text `failed` evaluates to in the page)."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            try:
                r = self.call("Runtime.evaluate", timeout=timeout - (time.monotonic() - t0),
                              expression=f"[{expression}, {failed}]", returnByValue=True)
            except (TimeoutError, ConnectionError, OSError) as e:
                return None, self.failure() or f"no answer ({type(e).__name__})"
            done, why = (r.get("result") or {}).get("value") or [False, ""]
            if done:
                return time.monotonic() - t0, None
            if self.failure() or why:
                return time.monotonic() - t0, self.failure() or why
            time.sleep(0.05)
        return None, self.failure() or f"nothing drawn in {timeout:.0f} s"

    def open(self, url):
        self.events.clear()
        self.call("Page.navigate", url=url)

    def heap(self):
        try:
            r = self.call("Runtime.getHeapUsage", timeout=30)
            return r.get("usedSize", 0)
        except Exception:
            return None

    def shot(self, path):
        data = self.call("Page.captureScreenshot", timeout=120)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self):
        self.ws.close()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


class WebSocket:
    """A WebSocket client for the DevTools protocol: text frames, masked as clients must."""

    def __init__(self, url):
        m = re.match(r"ws://([^:/]+):(\d+)(/.*)", url)
        self.sock = socket.create_connection((m.group(1), int(m.group(2))))
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            f"GET {m.group(3)} HTTP/1.1\r\nHost: {m.group(1)}:{m.group(2)}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            got = self.sock.recv(1)
            if not got:
                raise ConnectionError("websocket handshake")
            head += got
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise ConnectionError(head.decode(errors="replace"))
        self.buf = b""

    def send(self, text):
        data = text.encode()
        mask = os.urandom(4)
        n = len(data)
        if n < 126:
            header = struct.pack("!BB", 0x81, 0x80 | n)
        elif n < 65536:
            header = struct.pack("!BBH", 0x81, 0x80 | 126, n)
        else:
            header = struct.pack("!BBQ", 0x81, 0x80 | 127, n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        self.sock.sendall(header + mask + masked)

    def _read(self, n, deadline):
        while len(self.buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError()
            self.sock.settimeout(left)
            try:
                got = self.sock.recv(1 << 20)
            except socket.timeout:
                raise TimeoutError()
            if not got:
                raise ConnectionError("devtools connection closed")
            self.buf += got
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self, timeout):
        """The next text message, or None after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        message = b""
        try:
            while True:
                b0, b1 = self._read(2, deadline)
                n = b1 & 0x7F
                if n == 126:
                    n = struct.unpack("!H", self._read(2, deadline))[0]
                elif n == 127:
                    n = struct.unpack("!Q", self._read(8, deadline))[0]
                payload = self._read(n, deadline)
                op = b0 & 0x0F
                if op == 8:
                    raise ConnectionError("devtools connection closed")
                if op in (0, 1, 2):
                    message += payload
                    if b0 & 0x80:
                        return message.decode()
        except TimeoutError:
            return None

    def close(self):
        self.sock.close()


def memory_viz(a, server, pickle_path):
    server.pickle = pickle_path
    b = Browser(a.chromium)
    try:
        b.open(f"http://127.0.0.1:{server.port}/viz")
        # a page whose script text is longer than the browser's longest string gets an empty
        # script (no error is raised): loaded, and nothing will ever run
        chars = (os.path.getsize(pickle_path) // 3 + 1) * 4
        empty = (
            "document.readyState === 'complete' && document.scripts.length > 1 "
            "&& document.scripts[1].text.length === 0 "
            f"? 'the page loaded with its script empty: {chars / 1e9:.2f} G characters of base64, "
            "over the longest string the browser holds; nothing runs' : ''"
        )
        secs, why = b.wait("document.querySelector('svg polygon') !== null", a.timeout, empty)
        if why:
            return f"**{why}**" + (f" after {secs:.1f} s" if secs else "")
        heap = b.heap()
        if a.shots:
            b.shot(os.path.join(a.shots, f"memory_viz-{os.path.basename(pickle_path)}.png"))
        return f"{secs:.2f} s (JS heap {heap / 2**20:.0f} MiB)" if heap else f"{secs:.2f} s"
    finally:
        b.close()


def memq(a, pickle_path):
    out = tempfile.mkdtemp(prefix="mviz-memq-")
    try:
        t0 = time.monotonic()
        subprocess.run([a.memq, "ingest", pickle_path, "-o", os.path.join(out, "ds")],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ingest = time.monotonic() - t0
        b = Browser(a.chromium)
        t0 = time.monotonic()
        p = subprocess.Popen([a.memq, "serve", "--no-open", "--port", "0", os.path.join(out, "ds")],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            url = p.stdout.readline().strip()
            b.open(url)
            secs, why = b.wait("document.body && document.body.dataset.ready === '1'", a.timeout)
            total = time.monotonic() - t0
            if why:
                return f"{ingest:.1f} s", f"**{why}**"
            if a.shots:
                b.shot(os.path.join(a.shots, f"memq-{os.path.basename(pickle_path)}.png"))
            return f"{ingest:.1f} s", f"{total:.2f} s (page {secs:.2f} s)"
        finally:
            p.terminate()
            p.wait()
            b.close()
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    # a SIGTERM ends the run as Ctrl-C does: the browsers and servers started are closed
    import signal

    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    main()
