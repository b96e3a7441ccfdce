//! `memq._memq`: the Python module's native half. It wraps the library API (`memq::api`) and
//! nothing else; the Python half (`python/memq/__init__.py`) adds pandas, polars and notebook
//! display on top. Every call that works releases the GIL and, while it waits, lets Ctrl-C
//! (`KeyboardInterrupt`) stop it: the work is dropped, which cancels it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use datafusion::arrow::datatypes::SchemaRef;
use memq::api::{self, Collected, Dataset as ApiDataset, Limits, OpenOptions, Params, Rows};
use memq::error::MemqError as Error;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict};

pyo3::create_exception!(
    memq,
    MemqError,
    pyo3::exceptions::PyException,
    "An error memq reports: bad input (file, line and reason), a SQL error (with its caret), \
     a usage error. `exit_code` is what the command would exit with."
);

/// One runtime for the process, with the command's thread stacks: deep expressions recurse in
/// the planner.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_stack_size(64 << 20)
            .thread_name("memq")
            .build()
            .expect("the tokio runtime starts")
    })
}

fn error(e: Error) -> PyErr {
    let err = MemqError::new_err(e.to_string());
    Python::attach(|py| {
        let _ = err.value(py).setattr("exit_code", e.exit_code());
    });
    err
}

/// Runs `work` on the runtime with the GIL released; every 50 ms it checks for Ctrl-C, and on
/// one drops the work (cancelling it) and raises `KeyboardInterrupt`. With `progress`, it is
/// called with (bytes read, bytes to read) of an ingest as they change.
fn wait<T: Send>(
    py: Python<'_>,
    work: impl std::future::Future<Output = memq::error::Result<T>>,
) -> PyResult<T> {
    wait_showing(py, work, None)
}

/// A value used on the thread that made it only: `block_on` polls the future where it is
/// called, and `detach` runs its closure on the calling thread, so neither crosses threads.
/// (Some of memq's futures are not `Send` for the compiler's lifetime reasons only.)
struct SameThread<F>(F);
// SAFETY: see above; the wrapped future holds no Python object.
unsafe impl<F> Send for SameThread<F> {}

fn wait_showing<T: Send>(
    py: Python<'_>,
    work: impl std::future::Future<Output = memq::error::Result<T>>,
    progress: Option<Py<PyAny>>,
) -> PyResult<T> {
    let work = SameThread(work);
    let outcome = py.detach(move || {
        // moved whole: a closure would otherwise capture only the field, which is not Send
        let work = work;
        let SameThread(work) = work;
        runtime().block_on(async {
            tokio::pin!(work);
            // The ticks come from a thread of their own: the runtime's timers are late while
            // every worker computes, and Ctrl-C must not wait for the query.
            let (tick, mut ticks) = tokio::sync::mpsc::channel::<()>(1);
            std::thread::spawn(move || {
                while tick.blocking_send(()).is_ok() {
                    std::thread::sleep(Duration::from_millis(50));
                }
            });
            // The counters are the process's: what an earlier ingest left is not this one's.
            let mut shown = memq::api::ingest_progress();
            loop {
                tokio::select! {
                    r = &mut work => {
                        let now = memq::api::ingest_progress();
                        if let (Some(f), true) = (&progress, now != shown && now.1 > 0) {
                            Python::attach(|py| f.call1(py, now).map(drop))?;
                        }
                        return Ok(r);
                    }
                    _ = ticks.recv() => {
                        Python::attach(|py| {
                            py.check_signals()?;
                            let now = memq::api::ingest_progress();
                            match &progress {
                                Some(f) if now != shown && now.1 > 0 => {
                                    shown = now;
                                    f.call1(py, now).map(drop)
                                }
                                _ => Ok(()),
                            }
                        })?;
                    }
                }
            }
        })
    });
    match outcome {
        Ok(r) => r.map_err(error),
        Err(e) => Err(e),
    }
}

/// A Python value as a SQL parameter: numbers and booleans typed, the rest as text (which
/// memq types as `--param` does: `0x…` an address, `42` a BIGINT).
fn param(v: &Bound<'_, PyAny>) -> PyResult<datafusion::scalar::ScalarValue> {
    use datafusion::scalar::ScalarValue;
    if v.is_none() {
        return Ok(ScalarValue::Null);
    }
    if let Ok(b) = v.cast::<pyo3::types::PyBool>() {
        return Ok(ScalarValue::Boolean(Some(b.is_true())));
    }
    if let Ok(i) = v.extract::<i64>() {
        return Ok(ScalarValue::Int64(Some(i)));
    }
    if let Ok(u) = v.extract::<u64>() {
        return Ok(ScalarValue::UInt64(Some(u)));
    }
    if let Ok(f) = v.extract::<f64>() {
        return Ok(ScalarValue::Float64(Some(f)));
    }
    Ok(api::parse_value(&v.str()?.to_string()))
}

fn params(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Params> {
    let mut bound = Params::new();
    if let Some(kwargs) = kwargs {
        for (k, v) in kwargs.iter() {
            bound.insert(k.extract::<String>()?, param(&v)?);
        }
    }
    Ok(bound)
}

/// An opened dataset (see `memq.open`).
#[pyclass(module = "memq._memq", frozen)]
struct Dataset {
    inner: Arc<ApiDataset>,
}

#[pyfunction]
#[pyo3(signature = (inputs, cache = true, memory_limit = None, progress = None))]
fn open(
    py: Python<'_>,
    inputs: Vec<PathBuf>,
    cache: bool,
    memory_limit: Option<usize>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Dataset> {
    let opts = OpenOptions {
        cache,
        progress: false,
        memory_limit,
        cluster: None,
    };
    let ds = wait_showing(
        py,
        async move { ApiDataset::open(&inputs, &opts).await },
        progress,
    )?;
    Ok(Dataset {
        inner: Arc::new(ds),
    })
}

/// Ingests `inputs` into the dataset folder `out`; returns the summary `memq ingest` prints.
#[pyfunction]
#[pyo3(signature = (inputs, out, append = false, force = false, strict = false, progress = None))]
fn ingest(
    py: Python<'_>,
    inputs: Vec<PathBuf>,
    out: PathBuf,
    append: bool,
    force: bool,
    strict: bool,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let opts = api::IngestOptions {
        output: out,
        force,
        append,
        strict,
        progress: false,
    };
    let work = async move {
        let report = api::ingest(&inputs, &opts).await?;
        Ok(report.summary())
    };
    wait_showing(py, work, progress)
}

#[pymethods]
impl Dataset {
    /// The dataset folder.
    #[getter]
    fn path(&self) -> PathBuf {
        self.inner.path().to_path_buf()
    }

    /// Runs `query` (statements separated by `;`, `$name` bound from the keyword arguments)
    /// and returns the last statement's result, not yet read.
    #[pyo3(signature = (query, **kwargs))]
    fn sql(
        &self,
        py: Python<'_>,
        query: &str,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Result> {
        let bound = params(kwargs)?;
        let ds = self.inner.clone();
        let query = query.to_string();
        let rows = wait(py, async move { ds.sql(&query, &bound).await })?;
        Ok(Result::new(rows))
    }

    /// The manifest as JSON: sources (kind, path, rows, rejects) and tables.
    fn manifest_json(&self) -> PyResult<String> {
        serde_json::to_string(self.inner.manifest())
            .map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }

    /// The tables, analyses and functions with their docs and units, as JSON.
    fn catalog_json(&self) -> PyResult<String> {
        serde_json::to_string(&api::catalog_json(&self.inner))
            .map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }

    /// The report as text: `html`, `md` or `json`.
    #[pyo3(signature = (kind, pool = None, device = None))]
    fn report(
        &self,
        py: Python<'_>,
        kind: &str,
        pool: Option<String>,
        device: Option<String>,
    ) -> PyResult<String> {
        let ds = self.inner.clone();
        let opts = api::ReportOptions { pool, device };
        let r = wait(py, async move { ds.report(&opts).await })?;
        api::render_report(&r, kind).map_err(error)
    }

    /// The findings as JSON (a list of objects: kind, severity, title, problem, evidence…).
    #[pyo3(signature = (pool = None, device = None))]
    fn findings_json(
        &self,
        py: Python<'_>,
        pool: Option<String>,
        device: Option<String>,
    ) -> PyResult<String> {
        let ds = self.inner.clone();
        let opts = api::ReportOptions { pool, device };
        let f = wait(py, async move { ds.findings(&opts).await })?;
        serde_json::to_string(&f).map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }

    /// `memq check` with sizes in bytes; returns its JSON (checks, result, exit_code).
    #[pyo3(signature = (max_peak = None, max_reserved = None, max_leak = None, max_frag = None, no_oom = false))]
    fn check_json(
        &self,
        py: Python<'_>,
        max_peak: Option<i64>,
        max_reserved: Option<i64>,
        max_leak: Option<i64>,
        max_frag: Option<f64>,
        no_oom: bool,
    ) -> PyResult<String> {
        if let Some(p) = max_frag.filter(|p| !(p.is_finite() && *p >= 0.0)) {
            return Err(PyValueError::new_err(format!(
                "max_frag={p}: a percentage >= 0"
            )));
        }
        let limits = Limits {
            max_peak,
            max_reserved,
            max_leak,
            max_frag,
            no_oom,
        };
        let ds = self.inner.clone();
        let outcome = wait(py, async move { ds.check(&limits).await })?;
        serde_json::to_string(&outcome).map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }
}

enum State {
    /// Planned, not read yet.
    Pending(Rows),
    /// Read whole; kept so that the result can be shown and converted again.
    Collected(Collected),
    /// Handed out as a stream.
    Streamed,
}

/// A query's result: read once, as a stream or whole (see `memq.Result`).
#[pyclass(module = "memq._memq", frozen)]
struct Result {
    schema: SchemaRef,
    state: Mutex<State>,
}

impl Result {
    fn new(rows: Rows) -> Result {
        Result {
            schema: rows.schema(),
            state: Mutex::new(State::Pending(rows)),
        }
    }

    /// Reads the whole result if it is still pending (interruptible).
    fn collected(&self, py: Python<'_>) -> PyResult<Collected> {
        let pending = {
            let mut state = self.state.lock().expect("not poisoned");
            match std::mem::replace(&mut *state, State::Streamed) {
                State::Collected(b) => {
                    *state = State::Collected(b.clone());
                    return Ok(b);
                }
                State::Streamed => return Err(PyRuntimeError::new_err(
                    "this result was already read as a stream (or stopped); run the query again",
                )),
                State::Pending(rows) => rows,
            }
        };
        let collected = wait(py, async move { pending.collect().await });
        let mut state = self.state.lock().expect("not poisoned");
        match collected {
            Ok(c) => {
                *state = State::Collected(c.clone());
                Ok(c)
            }
            Err(e) => Err(e),
        }
    }
}

/// An Arrow C stream in the capsule the PyCapsule interface names; dropped with the capsule
/// unless a consumer took it (which leaves it released).
fn capsule(
    py: Python<'_>,
    stream: arrow::ffi_stream::FFI_ArrowArrayStream,
) -> PyResult<Bound<'_, PyCapsule>> {
    PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
}

#[pymethods]
impl Result {
    /// Column names, Arrow types and memq units (bytes, ns, pointer, …; "" for none).
    fn columns(&self) -> Vec<(String, String, String)> {
        self.schema
            .fields()
            .iter()
            .map(|f| {
                let unit = f.metadata().get("memq.unit").cloned().unwrap_or_default();
                (f.name().clone(), f.data_type().to_string(), unit)
            })
            .collect()
    }

    /// Reads the whole result (Ctrl-C stops it) and returns it as an Arrow C stream capsule of
    /// the batches memq holds: pyarrow imports them without a copy.
    fn collect_capsule<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        let collected = self.collected(py)?;
        capsule(py, collected.c_stream())
    }

    /// The result as a stream: an Arrow C stream capsule whose consumer pulls the batches as
    /// the engine makes them (a result read whole already is handed over from memory).
    fn stream_capsule<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        let pending = {
            let mut state = self.state.lock().expect("not poisoned");
            match std::mem::replace(&mut *state, State::Streamed) {
                State::Pending(rows) => rows,
                State::Collected(b) => {
                    *state = State::Collected(b.clone());
                    return capsule(py, b.c_stream());
                }
                State::Streamed => return Err(PyRuntimeError::new_err(
                    "this result was already read as a stream (or stopped); run the query again",
                )),
            }
        };
        capsule(py, pending.into_c_stream(runtime().handle().clone()))
    }

    /// The result as an HTML table with readable units (the first and last rows past
    /// `max_rows`), and how many rows it has. Reads the result whole.
    #[pyo3(signature = (max_rows = 20))]
    fn html(&self, py: Python<'_>, max_rows: usize) -> PyResult<String> {
        self.collected(py)?.html(max_rows).map_err(error)
    }

    /// The result as the shell's table (text, readable units), at most `max_rows` rows.
    #[pyo3(signature = (max_rows = 40, width = None))]
    fn text(&self, py: Python<'_>, max_rows: usize, width: Option<usize>) -> PyResult<String> {
        self.collected(py)?.text(max_rows, width).map_err(error)
    }

    /// A line chart of the result as inline SVG: its first numeric column over its first
    /// column (a curve over time or trace entries), drawn as the report draws curves.
    fn svg(&self, py: Python<'_>) -> PyResult<String> {
        self.collected(py)?.svg().map_err(error)
    }
}

/// A size as `memq check` reads it (`16GiB`, `512MB`, `1073741824`) in bytes.
#[pyfunction]
fn parse_size(text: &str) -> PyResult<i64> {
    memq::report::parse_size(text).ok_or_else(|| {
        PyValueError::new_err(format!(
            "{text}: not a size (e.g. 16GiB, 512MB, 1073741824)"
        ))
    })
}

/// Runs the `memq` command line in this process (the `memq` command the wheel installs).
#[pyfunction]
fn run_cli(py: Python<'_>, argv: Vec<std::ffi::OsString>) -> u8 {
    py.detach(|| memq::cli::main(argv))
}

#[pymodule]
fn _memq(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("MemqError", m.py().get_type::<MemqError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<Dataset>()?;
    m.add_class::<Result>()?;
    m.add_function(wrap_pyfunction!(open, m)?)?;
    m.add_function(wrap_pyfunction!(ingest, m)?)?;
    m.add_function(wrap_pyfunction!(run_cli, m)?)?;
    m.add_function(wrap_pyfunction!(parse_size, m)?)?;
    Ok(())
}
