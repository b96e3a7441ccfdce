//! The library API: what the `memq` command, the shell and the Python module call to reach the
//! engine. A [`Dataset`] is an opened input; [`Dataset::sql`] runs statements and streams the
//! last result as Arrow batches ([`Rows`]), which leave the process without a copy through the
//! Arrow C stream interface ([`Rows::into_c_stream`]); the canned analyses, tables and functions
//! come with their docs and units; [`Dataset::report`], [`Dataset::findings`] and
//! [`Dataset::check`] are the diagnosis and the CI gate.
//!
//! Cancellation: dropping a [`Rows`] (or the future of any call) stops its work. The memory
//! limit ([`OpenOptions::memory_limit`]) bounds every query and ingest sort of the process.
//!
//! ```no_run
//! use memq::api::{Dataset, OpenOptions, Params};
//!
//! # async fn demo() -> memq::error::Result<()> {
//! // An msMemScope output folder, ingested once into the cache, then opened.
//! let ds = Dataset::open(&["fixtures/memscope/g3_run".into()], &OpenOptions::default()).await?;
//! let mut rows = ds.sql("SELECT device, pool, metric, peak_bytes FROM peaks", &Params::new()).await?;
//! while let Some(batch) = rows.next_batch().await {
//!     println!("{} rows", batch?.num_rows());
//! }
//! for finding in ds.findings(&Default::default()).await? {
//!     println!("{:?} {}", finding.severity, finding.title);
//! }
//! # Ok(())
//! # }
//! ```

use std::path::{Path, PathBuf};

use arrow::ffi_stream::FFI_ArrowArrayStream;
use datafusion::arrow::array::Array;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchIterator, RecordBatchReader};
use memq_core::catalog::TableDef;
use memq_core::dataset::Manifest;
use memq_core::error::{MemqError, Result};
use memq_core::format::Function;
use memq_engine::library::Analysis;
use memq_engine::Engine;

use std::sync::Arc;

use memq_core::catalog::Unit;
use memq_engine::facts::Steps;

pub use crate::exec::Statements;
use crate::exec::{self, StatementResult};
use crate::export;
pub use crate::export::{Index as ExportIndex, Selection};
use crate::open::{self, IngestTarget, Opened};
use crate::output::cells;
use crate::output::{ResultWriter, TableOptions};
use crate::report::{self, check, Finding, Report};
use crate::report::{BandBucket, LineChart, Series};
pub use memq_memscope::to_db::ToDbReport;

pub use crate::output::Format;
pub use crate::params::{parse_value, Params};
pub use crate::report::check::{Limits, Outcome};
pub use crate::report::Options as ReportOptions;
pub use memq_ingest::{progress as ingest_progress, IngestOptions, IngestReport};

/// How [`Dataset::open`] opens its inputs.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// Raw inputs go through the ingest cache (reused while the sources are unchanged); false
    /// ingests into a temporary dataset removed with the [`Dataset`].
    pub cache: bool,
    /// A progress bar on stderr while ingesting, when stderr is a terminal.
    pub progress: bool,
    /// Bytes queries and ingest sorts may use before spilling to disk, for the whole process
    /// (as `--memory-limit`); `None` keeps the current limit (8 GiB or `$MEMQ_MEMORY_LIMIT_MB`).
    pub memory_limit: Option<usize>,
    /// Run the statements on the memq cluster at `df://HOST:PORT` (docs/scale-out.md).
    pub cluster: Option<String>,
}

impl OpenOptions {
    /// The defaults with a progress bar (the command line's).
    pub fn with_progress() -> OpenOptions {
        OpenOptions {
            progress: true,
            ..OpenOptions::default()
        }
    }
}

impl Default for OpenOptions {
    fn default() -> OpenOptions {
        OpenOptions {
            cache: true,
            progress: false,
            memory_limit: None,
            cluster: None,
        }
    }
}

/// An opened input: a dataset folder, or dumps, folders and pickles ingested into one.
pub struct Dataset {
    opened: Opened,
    /// The inputs as named, for the report's title.
    input: String,
}

impl Dataset {
    /// Opens `inputs`: one dataset folder as it is, anything else ingested first (through the
    /// cache unless `opts.cache` is false).
    pub async fn open(inputs: &[PathBuf], opts: &OpenOptions) -> Result<Dataset> {
        if inputs.is_empty() {
            return Err(MemqError::Usage(
                "give a dataset folder, or dumps, folders and pickles to open".into(),
            ));
        }
        if let Some(bytes) = opts.memory_limit {
            memq_core::set_memory_limit(bytes.max(1 << 20));
        }
        let target = match opts.cache {
            true => open::default_target(),
            false => IngestTarget::Temporary,
        };
        let mut opened = open::open_inputs(inputs, opts.progress, &target).await?;
        if let Some(url) = &opts.cluster {
            opened.connect(url).await?;
        }
        Ok(Dataset::from_opened(opened, inputs))
    }

    /// The dataset of inputs opened already.
    fn from_opened(opened: Opened, inputs: &[PathBuf]) -> Dataset {
        let input = inputs
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(" ");
        Dataset { opened, input }
    }

    /// The engine: its DataFusion session, dataset folder and manifest, for the faces of this
    /// crate that read the session's catalog (the shell's completion, the server's read-only
    /// guard); everything else goes through the methods here.
    pub(crate) fn engine(&self) -> &Engine {
        &self.opened.engine
    }

    /// The inputs as the caller named them.
    pub fn input(&self) -> &str {
        &self.input
    }

    /// The dataset folder (a cache or temporary folder for raw inputs).
    pub fn path(&self) -> &Path {
        &self.opened.engine.dataset
    }

    /// What the dataset holds: its sources (kind, rows, rejects) and tables.
    pub fn manifest(&self) -> &Manifest {
        &self.opened.engine.manifest
    }

    /// Runs the statements of `sql` (separated by `;`, `$name` bound from `params`) and returns
    /// the last one's result as a stream; earlier statements run to their end first. DDL
    /// (`CREATE VIEW`) takes effect in this dataset's session.
    pub async fn sql(&self, sql: &str, params: &Params) -> Result<Rows> {
        let ctx = &self.opened.engine.ctx;
        let mut statements = self.statements(sql, params, "")?;
        loop {
            let Some(next) = statements.next().await else {
                unreachable!("exec::statements refuses a text without statements")
            };
            let mut result = next?;
            if statements.remaining() == 0 {
                return Ok(Rows {
                    result,
                    ctx: ctx.clone(),
                });
            }
            while let Some(batch) = result.next_batch().await {
                batch?;
            }
        }
    }

    /// The statements of `sql`, each planned and started when the one before has been
    /// consumed, so that a face can print or write every result as it streams (`memq sql`,
    /// `memq run`). `origin` names the text in errors (a file name; empty for typed text).
    pub fn statements<'a>(
        &'a self,
        sql: &'a str,
        params: &'a Params,
        origin: &'a str,
    ) -> Result<Statements<'a>> {
        exec::statements(&self.opened.engine.ctx, sql, params, origin)
    }

    /// An owned handle on the dataset's session, for statements run on another task or
    /// runtime (the shell runs each on a runtime it drops to cancel it).
    pub fn session(&self) -> Session {
        Session {
            ctx: self.opened.engine.ctx.clone(),
        }
    }

    /// Runs the statements on the memq cluster at `url` (`df://HOST:PORT`) from now on.
    pub async fn connect(&mut self, url: &str) -> Result<()> {
        self.opened.connect(url).await
    }

    /// Back to this process's own session after [`Dataset::connect`].
    pub fn disconnect(&mut self) {
        self.opened.disconnect()
    }

    /// The cluster the statements run on, if any.
    pub fn cluster(&self) -> Option<&str> {
        self.opened.cluster()
    }

    /// `memq export`: the selected analyses written into `dir`, a file each, with an index
    /// (see [`export::export`]).
    pub async fn export(
        &self,
        selection: &Selection,
        dir: &Path,
        format: Format,
        force: bool,
    ) -> Result<ExportIndex> {
        export::export(&self.opened.engine, selection, dir, format, force).await
    }

    /// `memq to-db`: the msMemScope events written as an msMemScope-style SQLite db that
    /// MindStudio Insight imports.
    pub async fn to_db(&self, output: &Path) -> Result<ToDbReport> {
        memq_memscope::to_db::to_db(&self.opened.engine.ctx, output).await
    }

    /// Every table the dataset's formats declare, with each column's type, unit and doc.
    pub fn tables(&self) -> Vec<TableDef> {
        self.opened.engine.catalog.tables()
    }

    /// The canned analyses (views and table functions) with their docs, parameters and
    /// column units.
    pub fn analyses(&self) -> &[Analysis] {
        self.opened.engine.analyses()
    }

    /// memq's SQL functions with their docs.
    pub fn functions(&self) -> Vec<Function> {
        crate::functions()
    }

    /// The diagnosis of `memq report`, laid out (render it with [`Dataset::write_report`]).
    pub async fn report(&self, opts: &ReportOptions) -> Result<Report> {
        report::report(&self.opened.engine, &self.input, opts).await
    }

    /// The report's findings alone: problem, evidence, advice and severity, most severe first
    /// as the report orders them.
    pub async fn findings(&self, opts: &ReportOptions) -> Result<Vec<Finding>> {
        Ok(self.report(opts).await?.findings)
    }

    /// Writes `report` to `path`, HTML, Markdown or JSON by its extension.
    pub fn write_report(report: &Report, path: &Path) -> Result<()> {
        report::write(report, path)
    }

    /// `memq check`: each limit against the measured value, and the verdict with its exit code
    /// (0 all hold, 1 one is exceeded, 2 one cannot be measured).
    pub async fn check(&self, limits: &Limits) -> Result<Outcome> {
        let r = self.report(&ReportOptions::default()).await?;
        Ok(check::evaluate(&r, limits))
    }
}

/// An owned handle on a dataset's session ([`Dataset::session`]).
#[derive(Clone)]
pub struct Session {
    ctx: datafusion::prelude::SessionContext,
}

impl Session {
    /// The statements of `sql`, as [`Dataset::statements`] gives them.
    pub fn statements<'a>(
        &'a self,
        sql: &'a str,
        params: &'a Params,
        origin: &'a str,
    ) -> Result<Statements<'a>> {
        exec::statements(&self.ctx, sql, params, origin)
    }
}

/// Ingests `inputs` into the dataset folder `opts.output` (`memq ingest`).
pub async fn ingest(inputs: &[PathBuf], opts: &IngestOptions) -> Result<IngestReport> {
    memq_ingest::ingest(inputs, opts, &crate::catalog()).await
}

/// The tables, the analyses (not the private helpers) and the functions, with their docs,
/// parameters, and each column's type and unit, as JSON (`memq.Dataset.views()` and
/// `.tables()` in Python; the server's completion).
pub fn catalog_json(ds: &Dataset) -> serde_json::Value {
    use serde_json::json;
    let unit = |u: Unit| match u {
        Unit::None => serde_json::Value::Null,
        u => json!(u.name()),
    };
    let tables: Vec<_> = ds
        .tables()
        .iter()
        .map(|t| {
            json!({
                "name": t.name,
                "doc": t.doc,
                "columns": t.columns.iter().map(|c| json!({
                    "name": c.name, "type": c.data_type.to_string(), "unit": unit(c.unit), "doc": c.doc,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let analyses: Vec<_> = ds
        .analyses()
        .iter()
        .filter(|a| !a.private)
        .map(|a| {
            json!({
                "name": a.name,
                "kind": if a.params.is_empty() { "view" } else { "function" },
                "call": a.call_form(),
                "summary": a.summary,
                "doc": a.doc,
                "path": a.path,
                "params": a.params.iter().map(|p| json!({
                    "name": p.name, "type": p.sql_type, "default": p.default, "doc": p.doc,
                })).collect::<Vec<_>>(),
                "columns": a.columns.iter().map(|c| json!({
                    "name": c.name, "type": c.sql_type, "unit": unit(c.unit), "doc": c.doc,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let functions: Vec<_> = ds
        .functions()
        .iter()
        .map(|f| json!({"name": f.name(), "usage": f.usage, "doc": f.doc}))
        .collect();
    json!({"tables": tables, "analyses": analyses, "functions": functions})
}

/// A report rendered as `html`, `md` or `json`.
pub fn render_report(report: &Report, kind: &str) -> Result<String> {
    match kind {
        "html" => Ok(report::html::render(report)),
        "md" | "markdown" => Ok(report::markdown::render(report)),
        "json" => Ok(report::json::render(report)),
        other => Err(MemqError::Usage(format!(
            "report as {other}: use html, md or json"
        ))),
    }
}

/// A result, streamed: its schema (fields carry their `memq.unit`) and its batches.
pub struct Rows {
    result: StatementResult,
    ctx: datafusion::prelude::SessionContext,
}

impl Rows {
    /// The columns, each field's metadata holding its unit (`memq.unit`: bytes, ns, pointer…).
    pub fn schema(&self) -> SchemaRef {
        self.result.schema.clone()
    }

    /// The next batch, `None` at the end.
    pub async fn next_batch(&mut self) -> Option<Result<RecordBatch>> {
        self.result.next_batch().await
    }

    /// Every batch; a result larger than the memory limit is an error, not an abort.
    pub async fn collect(self) -> Result<Collected> {
        let schema = self.schema();
        let (origin_ns, steps) = (self.result.origin_ns, self.result.steps.clone());
        let batches = self.result.collect(&self.ctx).await?;
        Ok(Collected {
            schema,
            batches,
            origin_ns,
            steps,
        })
    }

    /// The result as an Arrow C stream (the Arrow C data interface): its consumer pulls the
    /// batches one at a time on `runtime`, from a thread outside it, and they cross without a
    /// copy. Dropping the stream stops the query.
    pub fn into_c_stream(self, runtime: tokio::runtime::Handle) -> FFI_ArrowArrayStream {
        let schema = self.schema();
        FFI_ArrowArrayStream::new(Box::new(Blocking {
            rows: self,
            schema,
            runtime,
        }))
    }
}

/// A result read whole, with what its display needs (the run's start and steps).
#[derive(Clone)]
pub struct Collected {
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
    origin_ns: Option<i64>,
    steps: Option<Arc<Steps>>,
}

impl Collected {
    /// Its rows.
    pub fn num_rows(&self) -> usize {
        self.batches.iter().map(|b| b.num_rows()).sum()
    }

    /// The batches as an Arrow C stream; they are shared with it, not copied.
    pub fn c_stream(&self) -> FFI_ArrowArrayStream {
        FFI_ArrowArrayStream::new(Box::new(RecordBatchIterator::new(
            self.batches.clone().into_iter().map(Ok),
            self.schema.clone(),
        )))
    }

    fn table_options(&self, max_rows: usize, width: Option<usize>) -> TableOptions {
        TableOptions {
            max_rows,
            width,
            origin_ns: self.origin_ns,
            steps: self.steps.clone(),
            ..TableOptions::default()
        }
    }

    /// The shell's table view: values in their units, the first and last rows past
    /// `max_rows` (0 shows all), fitted to `width` columns when given.
    pub fn text(&self, max_rows: usize, width: Option<usize>) -> Result<String> {
        let opts = self.table_options(max_rows, width);
        let mut w = ResultWriter::new(Vec::new(), &self.schema, Format::Table, opts)?;
        for b in &self.batches {
            w.write(b)?;
        }
        let (_, bytes) = w.finish()?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The cells of the first and last rows (up to `max_rows`; 0 = all) as the table view
    /// shows them, in their units; a row of one empty cell marks where rows were left out.
    pub fn cell_texts(&self, max_rows: usize) -> Result<Vec<Vec<String>>> {
        let (rows, gap_at) = self.shown_rows(max_rows)?;
        Ok(rows
            .into_iter()
            .enumerate()
            .flat_map(|(i, r)| {
                let gap = (gap_at == Some(i)).then(|| vec!["…".to_string()]);
                gap.into_iter().chain(std::iter::once(r))
            })
            .collect())
    }

    /// The texts of the rows shown and the position of the gap (rows left out) among them.
    fn shown_rows(&self, max_rows: usize) -> Result<(Vec<Vec<String>>, Option<usize>)> {
        let style = self.table_options(max_rows, None).style();
        let total = self.num_rows();
        let keep = |i: usize| {
            max_rows == 0
                || total <= max_rows
                || i < max_rows / 2
                || i >= total - (max_rows - max_rows / 2)
        };
        let mut rows: Vec<Vec<String>> = Vec::new();
        let mut gap_at = None;
        let mut start = 0;
        for b in &self.batches {
            let texts = self
                .schema
                .fields()
                .iter()
                .zip(b.columns())
                .map(|(f, c)| cells::texts(f, c, &style))
                .collect::<Result<Vec<_>>>()?;
            for r in 0..b.num_rows() {
                let i = start + r;
                if keep(i) {
                    rows.push(texts.iter().map(|t| t[r].clone()).collect());
                } else if gap_at.is_none() {
                    gap_at = Some(rows.len());
                }
            }
            start += b.num_rows();
        }
        Ok((rows, gap_at))
    }

    /// An HTML table (a notebook's display): a header of names and units, values in their
    /// units, the first and last rows past `max_rows`, and the row count.
    pub fn html(&self, max_rows: usize) -> Result<String> {
        let total = self.num_rows();
        let (rows, gap_at) = self.shown_rows(max_rows)?;
        let esc = crate::report::html::esc;
        let mut out = String::from("<table class=\"memq\">\n<thead><tr>");
        for f in self.schema.fields() {
            let unit = Unit::of(f);
            let unit = match unit {
                Unit::None => String::new(),
                u => format!("<br><small>{}</small>", esc(u.name())),
            };
            out.push_str(&format!("<th>{}{unit}</th>", esc(f.name())));
        }
        out.push_str("</tr></thead>\n<tbody>\n");
        for (i, row) in rows.iter().enumerate() {
            if gap_at == Some(i) {
                out.push_str(&format!(
                    "<tr><td colspan=\"{}\" style=\"text-align:center\">…</td></tr>\n",
                    self.schema.fields().len().max(1)
                ));
            }
            out.push_str("<tr>");
            for cell in row {
                out.push_str(&format!("<td>{}</td>", esc(cell)));
            }
            out.push_str("</tr>\n");
        }
        let shown = rows.len();
        let count = match shown < total {
            true => format!("{total} rows, {shown} shown"),
            false if total == 1 => "1 row".to_string(),
            false => format!("{total} rows"),
        };
        out.push_str(&format!(
            "</tbody></table>\n<p><small>{count}</small></p>\n"
        ));
        Ok(out)
    }

    /// A line chart as SVG (the report's renderer): the first numeric column after the first
    /// over the first column (times as seconds since the first row), at most 1 000 buckets,
    /// each drawn as its last value with its min..max band.
    pub fn svg(&self) -> Result<String> {
        let fields = self.schema.fields();
        let y_col = (1..fields.len())
            .find(|&i| fields[i].data_type().is_numeric())
            .ok_or_else(|| {
                MemqError::Usage(
                    "a chart needs a numeric column after the first (the x axis)".into(),
                )
            })?;
        let x_unit = Unit::of(&fields[0]);
        let scale = match x_unit {
            Unit::TimeNs => 1e-9,
            Unit::TimeUs => 1e-6,
            _ => 1.0,
        };
        let mut points: Vec<(f64, f64)> = Vec::new();
        for b in &self.batches {
            let x = floats(b.column(0))?;
            let y = floats(b.column(y_col))?;
            for r in 0..b.num_rows() {
                if !x.is_null(r) && !y.is_null(r) {
                    points.push((x.value(r) * scale, y.value(r)));
                }
            }
        }
        if let (true, Some(first)) = (scale != 1.0, points.first().map(|p| p.0)) {
            points.iter_mut().for_each(|p| p.0 -= first);
        }
        let series = Series {
            name: fields[y_col].name().clone(),
            ..bucketed(&points, 1000)
        };
        let chart = LineChart {
            title: String::new(),
            x_label: fields[0].name().clone(),
            x_unit: if scale != 1.0 {
                "s".into()
            } else {
                "entry".into()
            },
            series: vec![series],
            markers: Vec::new(),
        };
        Ok(crate::report::html::line_chart(&chart))
    }
}

fn floats(
    a: &datafusion::arrow::array::ArrayRef,
) -> Result<datafusion::arrow::array::Float64Array> {
    use datafusion::arrow::array::AsArray;
    let c = datafusion::arrow::compute::cast(a, &datafusion::arrow::datatypes::DataType::Float64)
        .map_err(|e| MemqError::Query(format!("a chart needs numbers: {e}")))?;
    Ok(
        c.as_primitive::<datafusion::arrow::datatypes::Float64Type>()
            .clone(),
    )
}

/// `points` (in x order) cut into at most `n` buckets of equal x extent: each keeps its last
/// point and its min..max band, so that a spike between drawn points still shows.
fn bucketed(points: &[(f64, f64)], n: usize) -> Series {
    let mut series = Series {
        name: String::new(),
        points: Vec::new(),
        band: Vec::new(),
        area: false,
    };
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        return series;
    };
    if points.len() <= n {
        series.points = points.to_vec();
        return series;
    }
    let width = ((last.0 - first.0) / n as f64).max(f64::MIN_POSITIVE);
    let mut i = 0;
    while i < points.len() {
        let k = ((points[i].0 - first.0) / width).floor();
        let (x0, x1) = (first.0 + k * width, first.0 + (k + 1.0) * width);
        let (mut min, mut max) = (points[i].1, points[i].1);
        let mut j = i;
        while j < points.len() && (points[j].0 < x1 || k + 1.0 >= n as f64) {
            min = min.min(points[j].1);
            max = max.max(points[j].1);
            j += 1;
        }
        series.points.push(points[j - 1]);
        series.band.push(BandBucket { x0, x1, min, max });
        i = j;
    }
    series
}

/// A [`Rows`] read from synchronous code.
struct Blocking {
    rows: Rows,
    schema: SchemaRef,
    runtime: tokio::runtime::Handle,
}

impl Iterator for Blocking {
    type Item = std::result::Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        let next = self.runtime.block_on(self.rows.next_batch())?;
        Some(next.map_err(|e| ArrowError::ExternalError(Box::new(e))))
    }
}

impl RecordBatchReader for Blocking {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}
