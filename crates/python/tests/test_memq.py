"""The installed wheel, tested from a fresh venv (crates/python/ci.sh builds and installs it).

Every figure is checked against the `memq` binary of the same build (`$MEMQ_BIN`, the one
`cargo test` tested), so the module and the command line must give the same answers.
"""

import csv
import io
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import memq

ROOT = Path(os.environ.get("MEMQ_REPO", Path(__file__).resolve().parents[3]))
EXAMPLE = ROOT / "fixtures/memscope/g3_run"
REAL = ROOT / "fixtures/real"
MEMQ_BIN = os.environ.get("MEMQ_BIN")


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    # The module and the binary share a cache folder of the test's own.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def binary_csv(inputs, sql):
    """Rows of `memq sql INPUT... -e SQL --format csv` from the Rust binary, as text."""
    if not MEMQ_BIN:
        pytest.skip("MEMQ_BIN is not set")
    out = subprocess.run(
        [MEMQ_BIN, "sql", *map(str, inputs), "-e", sql, "--format", "csv"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return list(csv.reader(io.StringIO(out)))


def module_csv(result):
    """The same rows from the module, through pandas, as text."""
    df = result.to_pandas()
    rows = [list(df.columns)]
    for r in df.itertuples(index=False):
        rows.append(["" if (v is None or v != v) else str(v) for v in r])
    return rows


def same(inputs, sql):
    ds = memq.open(*inputs)
    got = module_csv(ds.sql(sql))
    want = binary_csv(inputs, sql)
    assert got == want
    assert len(got) > 1, "the query returned no rows: nothing was compared"
    return got


def test_example_peaks_equal_the_command_line():
    rows = same(
        [EXAMPLE],
        "SELECT device, pool, metric, peak_bytes FROM peaks ORDER BY device, pool, metric",
    )
    # The example's truth.json: the highest PTA live peak of device 0.
    assert any(r[1] == "PTA" for r in rows[1:])


@pytest.mark.parametrize(
    "name", ["cuda_transformer_forward.pickle", "torch_npu_two_devices.pkl", "cuda_three_gpus_expandable_oom.pickle"]
)
def test_snapshot_true_peaks_equal_the_command_line(name):
    same(
        [REAL / "snapshots/real" / name],
        "SELECT device, active_peak, reserved_peak FROM snap_peak ORDER BY device",
    )


def test_memscope_real_dump_peaks_equal_the_command_line():
    same(
        [REAL / "memscope/real/v2_compare_leaks.csv"],
        "SELECT device, pool, metric, peak_bytes FROM peaks ORDER BY device, pool, metric",
    )


def test_profiler_csv_peaks_equal_the_command_line():
    same(
        [REAL / "profiler/real/memory_record.csv", REAL / "profiler/real/operator_memory.csv"],
        "SELECT * FROM prof_component_peaks ORDER BY 1, 2",
    )


def test_params_are_values_and_errors_are_exceptions():
    ds = memq.open(EXAMPLE)
    assert ds.sql("SELECT $x + 1 AS y", x=41).to_arrow().column("y").to_pylist() == [42]
    assert ds.sql("SELECT $s AS s", s="a'b").to_arrow().column("s").to_pylist() == ["a'b"]
    with pytest.raises(memq.MemqError) as e:
        ds.sql("SELECT nosuch_column FROM peaks")
    text = str(e.value)
    assert "nosuch_column" in text and "^" in text, text
    assert e.value.exit_code == 1
    with pytest.raises(memq.MemqError, match="/nonexistent/dump.csv: No such file"):
        memq.open("/nonexistent/dump.csv")


def test_views_call_and_units():
    ds = memq.open(EXAMPLE)
    views = {v.name: v for v in ds.views()}
    assert "peaks" in views and views["peaks"].kind == "view"
    assert views["breakdown_at"].kind == "function"
    units = {c["name"]: c["unit"] for c in views["peaks"].columns}
    assert units["peak_bytes"] == "bytes"
    # A call binds its arguments as values; it equals the SQL written out.
    called = ds.call("breakdown_at", "peak", "PTA").to_pandas()
    written = ds.sql("SELECT * FROM breakdown_at('peak', 'PTA')").to_pandas()
    assert len(called) > 0
    assert called.equals(written)
    cols = dict((n, u) for n, _, u in ds.view("peaks").columns)
    assert cols["peak_bytes"] == "bytes"
    html = ds.view("peaks")._repr_html_()
    assert "<table" in html and ("MiB" in html or "GiB" in html or "KiB" in html)
    assert "peak_bytes" in repr(ds.view("peaks"))


def test_findings_report_and_check():
    ds = memq.open(EXAMPLE)
    findings = ds.findings().to_pandas()
    assert len(findings) > 0
    assert set(findings["severity"]) <= {"ok", "info", "warning", "error"}
    md = str(ds.report())
    assert "memq report" in md or "#" in md
    for f in findings["title"]:
        assert f in md
    assert ds.check(max_peak="1TiB").passed
    tight = ds.check(max_peak=1)
    assert not tight.passed and tight.exit_code == 1 and tight.result == "fail"
    # Fragmentation needs a snapshot: a dump cannot measure it, which is never a pass.
    frag = ds.check(max_frag=50)
    assert frag.exit_code == 2 and not frag


def test_report_file_is_written_atomically(tmp_path):
    ds = memq.open(EXAMPLE)
    out = tmp_path / "r.html"
    r = ds.report(out)
    text = out.read_text()
    assert text.startswith("<!DOCTYPE html") or "<html" in text
    assert "<svg" in text and "<svg" in r._repr_html_()
    assert not (tmp_path / "r.html.tmp").exists()
    with pytest.raises(memq.MemqError):
        ds.report(tmp_path / "r.txt")


def test_arrow_stream_consumers():
    import duckdb
    import polars as pl
    import pyarrow as pa

    ds = memq.open(EXAMPLE)
    q = "SELECT device, pool, metric, peak_bytes FROM peaks ORDER BY device, pool, metric"
    want = ds.sql(q).to_arrow()
    assert pa.table(ds.sql(q)).equals(want)
    assert pl.DataFrame(ds.sql(q)).equals(pl.from_arrow(want))
    streamed = ds.sql(q)
    reader = streamed.fetch_batches()
    assert pa.Table.from_batches(list(reader), schema=reader.schema).equals(want)
    with pytest.raises(RuntimeError, match="already read as a stream"):
        streamed.to_arrow()
    res = ds.sql(q)
    n = duckdb.sql("SELECT count(*) FROM res").fetchall()[0][0]
    assert n == want.num_rows
    # The unit travels with the schema.
    assert want.schema.field("peak_bytes").metadata[b"memq.unit"] == b"bytes"


def rss_bytes():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_to_arrow_does_not_copy():
    import pyarrow  # noqa: F401  (loading the library is not the conversion's memory)

    ds = memq.open(EXAMPLE)
    ds.sql("SELECT 1 AS x").to_arrow()  # pyarrow's first conversion sets up its own memory
    rows = 8_000_000  # 64 MB of BIGINT
    res = ds.sql(f"SELECT value FROM range({rows})")
    res._inner.collect_capsule()  # the engine reads the result whole; the capsule is dropped
    before = rss_bytes()
    t1 = res.to_arrow()
    grown = rss_bytes() - before
    assert t1.num_rows == rows
    column_bytes = t1.column(0).nbytes
    # pyarrow shares memq's buffers: the conversion adds almost nothing.
    assert grown < 0.1 * column_bytes, (grown, column_bytes)
    # A second conversion hands out the same buffers again.
    t2 = res.to_arrow()
    a1 = t1.column(0).chunks[0].buffers()[1].address
    a2 = t2.column(0).chunks[0].buffers()[1].address
    assert a1 == a2


def test_ctrl_c_stops_a_running_query():
    ds = memq.open(EXAMPLE)
    res = ds.sql("SELECT sum(a.value * b.value) AS s FROM range(200000) a, range(200000) b")
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    started = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        res.to_arrow()
    # The signal comes at 0.5 s; the engine looks every 50 ms.
    assert time.monotonic() - started < 1.5
    # The dataset still answers afterwards.
    assert ds.sql("SELECT 1 AS one").to_arrow().num_rows == 1


def test_ingest_with_progress_and_append(tmp_path, capfd):
    out = tmp_path / "x.memq"
    summary = memq.ingest(REAL / "memscope/real/v2_compare_baseline.csv", out=out, progress=True)
    assert "sources" in summary
    assert "ingest" in capfd.readouterr().err
    memq.ingest(REAL / "memscope/real/v2_compare_leaks.csv", out=out, append=True, progress=False)
    ds = memq.open(out)
    assert len(ds.sources()) == 2
    n = ds.sql("SELECT count(*) AS n FROM events").to_arrow().column("n")[0].as_py()
    want = binary_csv([out], "SELECT count(*) AS n FROM events")[1][0]
    assert str(n) == want


def test_chart_is_svg():
    ds = memq.open(EXAMPLE)
    svg = ds.sql("SELECT ts, used FROM curve WHERE pool = 'PTA' ORDER BY ts").chart()
    text = str(svg)
    assert text.startswith("<svg") and ("<polyline" in text or "<path" in text), text[:200]


def test_the_memq_command_runs_without_a_rust_toolchain():
    exe = Path(sys.executable).parent / "memq"
    assert exe.exists(), "the wheel installs the memq command"
    env = dict(os.environ, PATH=f"{exe.parent}:/usr/bin:/bin")
    assert shutil.which("cargo", path=env["PATH"]) is None
    assert shutil.which("rustc", path=env["PATH"]) is None
    v = subprocess.run([str(exe), "--version"], env=env, capture_output=True, text=True, check=True)
    assert v.stdout.startswith("memq ")
    sql = "SELECT device, pool, metric, peak_bytes FROM peaks ORDER BY device, pool, metric"
    out = subprocess.run(
        [str(exe), "sql", str(EXAMPLE), "-e", sql, "--format", "csv"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert list(csv.reader(io.StringIO(out))) == binary_csv([EXAMPLE], sql)
    bad = subprocess.run([str(exe), "sql", str(EXAMPLE), "-e", "SELEC"], env=env, capture_output=True, text=True)
    assert bad.returncode == 1 and "memq:" in bad.stderr
    # `python -m memq` is the same command.
    m = subprocess.run([sys.executable, "-m", "memq", "--version"], capture_output=True, text=True, check=True)
    assert m.stdout == v.stdout


def test_help_and_stubs_are_shipped():
    assert "typed value" in memq.Dataset.sql.__doc__
    pkg = Path(memq.__file__).parent
    assert (pkg / "_memq.pyi").exists() and (pkg / "py.typed").exists()


def test_progress_in_a_notebook_updates_one_display(tmp_path, monkeypatch):
    import types

    shown = []

    class Handle:
        def update(self, obj):
            shown.append(("update", obj.data))

    def display(obj, display_id=False):
        shown.append(("display", obj.data))
        return Handle()

    class HTML:
        def __init__(self, data):
            self.data = data

    fake = types.ModuleType("IPython.display")
    fake.display, fake.HTML = display, HTML
    monkeypatch.setitem(sys.modules, "IPython.display", fake)
    monkeypatch.setattr(memq, "_in_notebook", lambda: True)
    memq.ingest(REAL / "memscope/real/v2_compare_baseline.csv", out=tmp_path / "n.memq")
    # one display, then updates of it; the last one says the whole input was read
    assert shown and shown[0][0] == "display", shown
    assert all(kind == "update" for kind, _ in shown[1:])
    assert "<progress" in shown[-1][1] and "100.0%" in shown[-1][1], shown[-1]
