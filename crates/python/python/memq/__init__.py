"""memq: SQL over accelerator memory dumps, from Python.

Open msMemScope dumps (CSV or db), PyTorch memory snapshots (pickles), Ascend profiler memory
CSVs, torch.profiler traces, or a memq dataset folder, and ask in SQL; results come back as
Arrow (without a copy), pandas or polars::

    import memq
    ds = memq.open("memscope_output/")            # ingested once into the cache
    ds.view("peaks").to_pandas()                  # a canned analysis
    ds.call("breakdown_at", "peak", "PTA")        # one that takes arguments
    ds.findings()                                 # the diagnosis, as a table
    ds.sql("SELECT * FROM blocks WHERE size > $s", s=1 << 30).to_polars()

Every analysis is documented: ``ds.views()`` lists them with their columns and units, and
``help(memq.Dataset.sql)`` says how statements and parameters work.
"""

from __future__ import annotations

import builtins as _builtins
import html as _html
import json as _json
import os as _os
import sys as _sys
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional, Sequence, Union

from . import _memq
from ._memq import MemqError

__version__ = _memq.__version__
__all__ = ["open", "ingest", "Dataset", "Result", "MemqError", "View", "Check"]

PathLike = Union[str, "_os.PathLike[str]"]


def open(
    *inputs: PathLike,
    cache: bool = True,
    memory_limit: Union[int, str, None] = None,
    progress: Optional[bool] = None,
) -> "Dataset":
    """Opens a dataset folder, or dumps, output folders and snapshot pickles.

    Raw inputs are ingested first: into memq's cache (``~/.cache/memq/datasets``, reused while
    every source file is unchanged) or, with ``cache=False``, into a temporary dataset removed
    with the returned :class:`Dataset`. ``memory_limit`` (bytes, or a size such as ``"4GiB"``)
    bounds every query and ingest sort of the process; past it they spill to disk. A progress
    bar shows while ingesting, in a terminal or a notebook (``progress=False`` hides it).
    """
    if not inputs:
        raise TypeError("memq.open() needs at least one input")
    limit = _size(memory_limit) if memory_limit is not None else None
    with _Progress(progress) as bar:
        inner = _memq.open([_os.fspath(p) for p in inputs], cache, limit, bar.callback)
    return Dataset(inner)


def ingest(
    *inputs: PathLike,
    out: PathLike,
    append: bool = False,
    force: bool = False,
    strict: bool = False,
    progress: Optional[bool] = None,
) -> str:
    """Ingests inputs into the dataset folder ``out`` (as ``memq ingest``) and returns its summary.

    ``append`` adds the inputs to an existing dataset (more ranks of a job); ``force`` replaces
    one; ``strict`` fails if any record cannot be parsed (otherwise such records are kept in the
    ``rejects`` table).
    """
    if not inputs:
        raise TypeError("memq.ingest() needs at least one input")
    with _Progress(progress) as bar:
        return _memq.ingest(
            [_os.fspath(p) for p in inputs], _os.fspath(out), append, force, strict, bar.callback
        )


def _size(v: Union[int, str]) -> int:
    return v if isinstance(v, int) else _memq.parse_size(str(v))


@dataclass
class View:
    """A canned analysis: a view (``ds.view(name)``) or a table function (``ds.call(name, ...)``)."""

    name: str
    kind: str
    call: str
    summary: str
    doc: str
    params: list = field(default_factory=list)
    columns: list = field(default_factory=list)

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td><code>{_e(c['name'])}</code></td><td>{_e(c['type'])}</td>"
            f"<td>{_e(c['unit'] or '')}</td><td>{_e(c['doc'])}</td></tr>"
            for c in self.columns
        )
        return (
            f"<p><code>{_e(self.call)}</code> ({self.kind})</p><p>{_e(self.doc)}</p>"
            f"<table><tr><th>column</th><th>type</th><th>unit</th><th>meaning</th></tr>{rows}</table>"
        )


@dataclass
class Check:
    """The outcome of :meth:`Dataset.check`: each limit beside the measured value."""

    checks: list
    result: str
    exit_code: int

    @property
    def passed(self) -> bool:
        """True when every limit holds."""
        return self.exit_code == 0

    def __bool__(self) -> bool:
        return self.passed

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{_e(c['name'])}</td><td>{_e(_show(c['measured'], c['unit']))}</td>"
            f"<td>{_e(_show(c['limit'], c['unit']))}</td><td><b>{_e(c['status'])}</b></td>"
            f"<td>{_e(c.get('where') or '')}</td></tr>"
            for c in self.checks
        )
        return (
            f"<p>memq check: <b>{_e(self.result)}</b></p><table><tr><th>check</th><th>measured</th>"
            f"<th>limit</th><th>status</th><th>where</th></tr>{rows}</table>"
        )


def _show(v: Optional[float], unit: str) -> str:
    if v is None:
        return "cannot measure"
    if unit == "bytes":
        n, units = float(v), ["B", "KiB", "MiB", "GiB", "TiB"]
        i = 0
        while abs(n) >= 1024 and i < len(units) - 1:
            n, i = n / 1024, i + 1
        return f"{n:.2f} {units[i]}" if i else f"{int(n)} B"
    if unit == "percent":
        return f"{v:.2f} %"
    return f"{v:g}"


class Report:
    """The diagnosis of ``memq report``: shown inline in a notebook (HTML with its charts)."""

    def __init__(self, html: str, markdown: str) -> None:
        self.html = html
        self.markdown = markdown

    def _repr_html_(self) -> str:
        return self.html

    def __str__(self) -> str:
        return self.markdown


class Dataset:
    """An opened dataset: run SQL on it, call its canned analyses, read its diagnosis."""

    def __init__(self, inner: "_memq.Dataset") -> None:
        self._inner = inner
        self._catalog: Optional[dict] = None

    @property
    def path(self) -> str:
        """The dataset folder (the cache's folder for raw inputs)."""
        return _os.fspath(self._inner.path)

    def sql(self, query: str, **params: Any) -> "Result":
        """Runs SQL and returns the last statement's result (read lazily).

        Statements are separated by ``;``; each keyword argument is bound to ``$name`` as a
        typed value, never pasted as SQL text (``ds.sql("... WHERE size > $s", s=1 << 20)``).
        Errors raise :class:`MemqError` with memq's message, caret included. Ctrl-C stops a
        query that is running (``KeyboardInterrupt``).
        """
        return Result(self._inner.sql(query, **params))

    def view(self, name: str) -> "Result":
        """The rows of a canned view (``ds.views()`` lists them), e.g. ``ds.view("peaks")``."""
        return self.sql(f"SELECT * FROM {_ident(name)}")

    def call(self, name: str, *args: Any) -> "Result":
        """The rows of a canned table function, arguments bound as values:
        ``ds.call("breakdown_at", "peak", "PTA")``."""
        params = {f"memq_arg{i}": a for i, a in enumerate(args)}
        placeholders = ", ".join(f"$memq_arg{i}" for i in range(len(args)))
        return self.sql(f"SELECT * FROM {_ident(name)}({placeholders})", **params)

    def _cat(self) -> dict:
        if self._catalog is None:
            self._catalog = _json.loads(self._inner.catalog_json())
        return self._catalog

    def views(self) -> list:
        """The canned analyses: name, view or function, doc, parameters and each column's
        type, unit and meaning."""
        return [View(**{k: a[k] for k in View.__dataclass_fields__}) for a in self._cat()["analyses"]]

    def tables(self) -> list:
        """The tables: name, doc and columns (type, unit, meaning)."""
        return self._cat()["tables"]

    def functions(self) -> list:
        """memq's SQL functions: name, usage and doc."""
        return self._cat()["functions"]

    def sources(self) -> list:
        """The inputs the dataset was built from: kind, path, rows, rejects."""
        return _json.loads(self._inner.manifest_json())["sources"]

    def findings(self, pool: Optional[str] = None, device: Optional[str] = None):
        """The diagnosis as a pyarrow Table, one finding a row, most severe first: severity,
        kind, title, problem, evidence (lines of text), advice, and, where the input cannot
        tell, what is missing and how to collect it. ``.to_pandas()`` for a DataFrame."""
        import pyarrow as pa

        rows = _json.loads(self._inner.findings_json(pool, device))
        return pa.Table.from_pylist(
            [
                {
                    "severity": f["severity"],
                    "kind": f["kind"],
                    "title": f["title"],
                    "problem": f["problem"],
                    "evidence": f["evidence_text"],
                    "advice": f["advice"],
                    "cannot_conclude": (f.get("cannot_conclude") or {}).get("missing"),
                    "collect_with": (f.get("cannot_conclude") or {}).get("collect_with"),
                }
                for f in rows
            ],
            schema=pa.schema(
                [
                    ("severity", pa.string()),
                    ("kind", pa.string()),
                    ("title", pa.string()),
                    ("problem", pa.string()),
                    ("evidence", pa.list_(pa.string())),
                    ("advice", pa.list_(pa.string())),
                    ("cannot_conclude", pa.string()),
                    ("collect_with", pa.string()),
                ]
            ),
        )

    def report(
        self, path: Optional[PathLike] = None, pool: Optional[str] = None, device: Optional[str] = None
    ) -> Report:
        """The report of ``memq report``. With ``path`` it is also written there: HTML,
        Markdown or JSON by the extension (.html, .md, .json). In a notebook it shows inline."""
        kind = None
        if path is not None:
            ext = _os.path.splitext(_os.fspath(path))[1].lower()
            kind = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md", ".json": "json"}.get(ext)
            if kind is None:
                raise MemqError(f"{_os.fspath(path)}: the report is written as .html, .md or .json")
        rendered = {k: self._inner.report(k, pool, device) for k in {"html", "md", kind or "md"}}
        if path is not None:
            tmp = _os.fspath(path) + ".tmp"
            with _builtins.open(tmp, "w", encoding="utf-8") as f:
                f.write(rendered[kind])
            _os.replace(tmp, path)
        return Report(rendered["html"], rendered["md"])

    def check(
        self,
        max_peak: Union[int, str, None] = None,
        max_reserved: Union[int, str, None] = None,
        max_leak: Union[int, str, None] = None,
        max_frag: Optional[float] = None,
        no_oom: bool = False,
    ) -> Check:
        """``memq check``: each limit beside the measured value (sizes as bytes or ``"20GiB"``).
        ``.passed`` is true when every limit holds; a limit this input cannot measure makes the
        result ``error`` (exit code 2), never a pass."""
        out = _json.loads(
            self._inner.check_json(
                *(None if v is None else _size(v) for v in (max_peak, max_reserved, max_leak)),
                max_frag,
                no_oom,
            )
        )
        return Check(checks=out["checks"], result=out["result"], exit_code=out["exit_code"])

    def _repr_html_(self) -> str:
        srcs = self.sources()
        rows = "".join(
            f"<tr><td>{_e(s.get('kind', ''))}</td><td>{_e(s.get('path', ''))}</td>"
            f"<td>{s.get('rows', '')}</td><td>{s.get('rejects', '')}</td></tr>"
            for s in srcs
        )
        kinds = sorted({s.get("kind", "") for s in srcs})
        start = "ds.findings(), ds.view(\"peaks\"), ds.views()"
        return (
            f"<p><b>memq dataset</b> <code>{_e(self.path)}</code>: {len(srcs)} source(s) "
            f"({_e(', '.join(kinds))})</p><table><tr><th>kind</th><th>path</th><th>rows</th>"
            f"<th>rejects</th></tr>{rows}</table><p>Start with <code>{_e(start)}</code>.</p>"
        )

    def __repr__(self) -> str:
        return f"<memq.Dataset {self.path}>"


class Result:
    """A query's result. It is read once from the engine, as a whole (``to_arrow``,
    ``to_pandas``, ``to_polars``, ``show``, the notebook display, ``__arrow_c_stream__``: kept
    in memory afterwards, shared without a copy) or as a stream (``fetch_batches``)."""

    def __init__(self, inner: "_memq.Result") -> None:
        self._inner = inner

    @property
    def columns(self) -> list:
        """(name, Arrow type, unit) of each column; unit is ``bytes``, ``ns``, ``pointer``, ...
        or ``""``."""
        return self._inner.columns()

    def to_arrow(self):
        """A pyarrow Table sharing memq's buffers (no copy)."""
        import pyarrow as pa

        return pa.table(_Capsule(self._inner.collect_capsule()))

    def to_pandas(self, **kwargs: Any):
        """A pandas DataFrame (through Arrow; keyword arguments go to ``Table.to_pandas``)."""
        return self.to_arrow().to_pandas(**kwargs)

    def to_polars(self):
        """A polars DataFrame (from Arrow, without a copy where polars allows)."""
        import polars as pl

        return pl.from_arrow(self.to_arrow())

    def fetch_batches(self):
        """A pyarrow RecordBatchReader that pulls the batches as the engine makes them, without
        holding the whole result (the result cannot be read again afterwards)."""
        import pyarrow as pa

        return pa.RecordBatchReader.from_stream(_Capsule(self._inner.stream_capsule()))

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        """The Arrow PyCapsule interface (pyarrow.table(r), polars.DataFrame(r), duckdb): the
        result read whole once, then shared without a copy as often as a consumer asks (duckdb
        asks more than once)."""
        return self._inner.collect_capsule()

    def show(self, max_rows: int = 40, width: Optional[int] = None) -> None:
        """Prints the result as the memq shell does: values in their units (bytes as MiB/GiB,
        times as moments of the run), the first and last rows past ``max_rows``."""
        if width is None:
            try:
                width = _os.get_terminal_size(_sys.stdout.fileno()).columns
            except (OSError, ValueError, AttributeError):
                width = None
        print(self._inner.text(max_rows, width), end="")

    def chart(self) -> "Svg":
        """A line chart of the first numeric column over the first (a memory curve), as the
        report draws it; shown inline in a notebook, ``str()`` is the SVG."""
        return Svg(self._inner.svg())

    def _repr_html_(self) -> str:
        return self._inner.html(20)

    def __repr__(self) -> str:
        return self._inner.text(40, None)


class Svg:
    """An SVG picture: shown inline in a notebook."""

    def __init__(self, svg: str) -> None:
        self.svg = svg

    def _repr_svg_(self) -> str:
        return self.svg

    def __str__(self) -> str:
        return self.svg


class _Capsule:
    """Hands an Arrow C stream capsule to a consumer that asks through the PyCapsule protocol."""

    def __init__(self, capsule: Any) -> None:
        self._capsule = capsule

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self._capsule


class _Progress:
    """The ingest's progress: a bar updated in place in a notebook, a line on a terminal's
    stderr, nothing elsewhere (or with ``progress=False``)."""

    def __init__(self, wanted: Optional[bool]) -> None:
        self.handle = None
        self.where = None
        if wanted is False:
            return
        if _in_notebook():
            self.where = "notebook"
        elif wanted or _sys.stderr.isatty():
            self.where = "terminal"

    @property
    def callback(self):
        return self.update if self.where else None

    def update(self, done: int, total: int) -> None:
        frac = min(done / total, 1.0) if total else 0.0
        text = f"ingest {frac:6.1%}  {done / 2**20:,.1f} / {total / 2**20:,.1f} MiB"
        if self.where == "notebook":
            from IPython.display import HTML, display

            bar = (
                f"<progress value='{done}' max='{total}' style='width:30em'></progress> "
                f"<code>{_e(text)}</code>"
            )
            if self.handle is None:
                self.handle = display(HTML(bar), display_id=True)
            else:
                self.handle.update(HTML(bar))
        else:
            width = 30
            filled = int(frac * width)
            _sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {text}")
            _sys.stderr.flush()
            self.handle = True

    def __enter__(self) -> "_Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.where == "terminal" and self.handle:
            _sys.stderr.write("\r\033[K")
            _sys.stderr.flush()


def _in_notebook() -> bool:
    shell = _sys.modules.get("IPython")
    if shell is None:
        return False
    try:
        ip = shell.get_ipython()
    except Exception:
        return False
    return ip is not None and type(ip).__name__ == "ZMQInteractiveShell"


def _ident(name: str) -> str:
    if not name.replace("_", "").isalnum():
        raise MemqError(f"{name!r}: not the name of an analysis (ds.views() lists them)")
    return name


def _e(s: Any) -> str:
    return _html.escape(str(s))


