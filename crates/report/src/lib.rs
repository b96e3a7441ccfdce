//! `memq report` and `memq check`: the diagnosis built from the canned analyses (docs/report.md).
//!
//! [`gather`] runs the SQL library through the engine and keeps the rows it needs in [`Data`];
//! [`findings`] places the rows of view `findings` (problem → evidence → advice, with a
//! severity, judged in SQL) in their sections; [`findings::build`] lays them out as a
//! [`Report`] (sections of text, tables, charts and findings) that
//! the writers render: [`html`] (one self-contained page with inline SVG), [`markdown`] (Unicode
//! sparklines and bars) and [`json`] (stable keys). [`check`] is the CI gate.
//!
//! Every figure and every judgement comes from the SQL library (`crates/*/sql`); this module
//! only selects and lays out. Nothing here panics on odd data: a failing analysis becomes a note.

pub mod check;
pub mod findings;
pub mod html;
pub mod json;
pub mod markdown;

use std::path::Path;

use datafusion::arrow::array::Array;
use datafusion::arrow::record_batch::RecordBatch;
use memq_core::error::{MemqError, Result};
use memq_engine::Engine;

pub use findings::{Finding, Severity};

/// What `memq report` / `memq check` look at.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Only this memscope pool (HAL, PTA, ...).
    pub pool: Option<String>,
    /// Only this device (memscope Device Id as written, or a snapshot device ordinal).
    pub device: Option<String>,
}

// ------------------------------------------------------------------------------------------
// Rows of a query, as plain values
// ------------------------------------------------------------------------------------------

/// One cell.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Null,
    Int(i64),
    Float(f64),
    Str(String),
    Bool(bool),
}

/// The result of one query: column names and rows of values.
#[derive(Debug, Clone, Default)]
pub struct Rows {
    pub cols: Vec<String>,
    pub rows: Vec<Vec<Val>>,
}

/// One row of a [`Rows`], read by column name.
#[derive(Clone, Copy)]
pub struct Row<'a> {
    cols: &'a [String],
    vals: &'a [Val],
}

static NULL: Val = Val::Null;

impl<'a> Row<'a> {
    pub fn get(&self, c: &str) -> &'a Val {
        self.cols
            .iter()
            .position(|n| n == c)
            .and_then(|i| self.vals.get(i))
            .unwrap_or(&NULL)
    }
    pub fn i64(&self, c: &str) -> Option<i64> {
        match self.get(c) {
            Val::Int(v) => Some(*v),
            Val::Float(f) if f.is_finite() => Some(*f as i64),
            Val::Str(s) => s.parse().ok(),
            _ => None,
        }
    }
    pub fn f64(&self, c: &str) -> Option<f64> {
        match self.get(c) {
            Val::Int(v) => Some(*v as f64),
            Val::Float(f) => Some(*f),
            Val::Str(s) => s.parse().ok(),
            _ => None,
        }
    }
    pub fn str(&self, c: &str) -> Option<&'a str> {
        match self.get(c) {
            Val::Str(s) => Some(s.as_str()),
            _ => None,
        }
    }
    /// The cell as display text ("" for NULL).
    pub fn s(&self, c: &str) -> String {
        match self.get(c) {
            Val::Null => String::new(),
            Val::Int(v) => v.to_string(),
            Val::Float(f) => format!("{f}"),
            Val::Str(s) => s.clone(),
            Val::Bool(b) => b.to_string(),
        }
    }
    pub fn b(&self, c: &str) -> bool {
        matches!(self.get(c), Val::Bool(true))
    }
}

impl Rows {
    pub fn iter(&self) -> impl Iterator<Item = Row<'_>> {
        self.rows.iter().map(move |v| Row {
            cols: &self.cols,
            vals: v,
        })
    }
    pub fn len(&self) -> usize {
        self.rows.len()
    }
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
    pub fn first(&self) -> Option<Row<'_>> {
        self.iter().next()
    }
    /// Keeps the rows for which `keep` holds.
    pub fn retain(&mut self, keep: impl Fn(Row<'_>) -> bool) {
        let cols = self.cols.clone();
        self.rows.retain(|v| {
            keep(Row {
                cols: &cols,
                vals: v,
            })
        });
    }
}

fn cell(a: &dyn Array, i: usize) -> Val {
    use serde_json::Value;
    match memq_engine::json::value(a, i) {
        Value::Null => Val::Null,
        Value::Bool(b) => Val::Bool(b),
        Value::Number(n) => n
            .as_i64()
            .map(Val::Int)
            .unwrap_or_else(|| Val::Float(n.as_f64().unwrap_or(f64::NAN))),
        Value::String(s) => Val::Str(s),
        // lists and structs as their JSON text
        other => Val::Str(other.to_string()),
    }
}

/// Batches as [`Rows`].
pub fn to_rows(batches: &[RecordBatch]) -> Rows {
    let mut out = Rows::default();
    if let Some(b) = batches.first() {
        out.cols = b
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
    }
    for b in batches {
        for i in 0..b.num_rows() {
            out.rows
                .push(b.columns().iter().map(|c| cell(c.as_ref(), i)).collect());
        }
    }
    out
}

/// A SQL text literal.
pub fn lit(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

// ------------------------------------------------------------------------------------------
// Formatting shared by the writers
// ------------------------------------------------------------------------------------------

/// Bytes in binary units, 2 decimals: the one formatter the shell, the exports and the
/// report share.
pub fn fmt_bytes(n: i64) -> String {
    memq_core::function::format_bytes(n)
}

/// A duration in ns, as the shell prints durations (`950 ns`, `1.234 ms`, `2 min 05 s`).
pub fn fmt_dur_ns(ns: i64) -> String {
    memq_engine::units::format_duration(ns as f64)
}

/// ns since the Unix epoch as `YYYY-MM-DD HH:MM:SS.mmm UTC` (the shell's ISO 8601 moment,
/// spaced for reading), as SQL's `fmt_time(ns)`.
pub fn fmt_epoch_ns(ns: i64) -> String {
    memq_engine::functions::format_moment(ns, None)
}

/// A memscope time: relative to the run start and absolute, as SQL's `fmt_time(ns, start)`.
pub fn fmt_ts(ts: i64, start: Option<i64>) -> String {
    memq_engine::functions::format_moment(ts, start)
}

/// Whether a pool of a device counts as one of the dataset's devices (the banner's and the
/// report's count): not the host's pinned memory, not a row without a device (`N/A`).
pub fn counts_as_device(pool: &str, device: &str) -> bool {
    pool != "HOST_PINNED" && device != "N/A"
}

pub fn fmt_pct(p: f64) -> String {
    memq_core::function::format_pct(p)
}

/// Parses a size: `123`, `4096B`, `1.5GiB`, `512MB` (MB and MiB are both binary, as in the
/// reference's `--min-size`), `80%` is not a size.
pub fn parse_size(s: &str) -> Option<i64> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().ok()?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tb" | "tib" => 1024.0f64.powi(4),
        _ => return None,
    };
    let r = v * mult;
    (r.is_finite() && (0.0..9.2e18).contains(&r)).then_some(r.round() as i64)
}

// ------------------------------------------------------------------------------------------
// The report model the writers render
// ------------------------------------------------------------------------------------------

/// A line chart: x in seconds since the run start (memscope) or trace entries (snapshot).
#[derive(Debug, Clone)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    /// "s" (seconds since start) or "entry" (trace entry index).
    pub x_unit: String,
    pub series: Vec<Series>,
    /// Marked moments, (x, y, label): the first is labelled on the chart (the highest peak),
    /// every one is drawn and named on hover and in the Markdown (each series' peak, an OOM).
    pub markers: Vec<(f64, f64, String)>,
}

#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    /// (x, y in bytes) points of the line.
    pub points: Vec<(f64, f64)>,
    /// min..max per bucket, in x order: drawn as a band behind the line.
    pub band: Vec<BandBucket>,
    /// Drawn as a filled area (first series of a stack) instead of a line.
    pub area: bool,
}

/// One bucket of a band: the x extent it covers and the smallest and largest value in it.
/// A bucket whose `x0` lies after the previous bucket's `x1` starts a new run (the buckets in
/// between had no event): the band is drawn per run, so a gap shows no band.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BandBucket {
    pub x0: f64,
    pub x1: f64,
    pub min: f64,
    pub max: f64,
}

/// Horizontal bars, optionally stacked in parts.
#[derive(Debug, Clone)]
pub struct BarChart {
    pub title: String,
    /// Unit of the values: "bytes" or "count".
    pub unit: String,
    /// Names of the parts of a bar (legend); one part = plain bars.
    pub parts: Vec<String>,
    /// label, values per part.
    pub bars: Vec<(String, Vec<f64>)>,
}

/// The segments of an allocator state drawn as a map: each segment a box whose width is its
/// size, split into allocated / pending-free / free.
#[derive(Debug, Clone)]
pub struct SegmentMap {
    pub title: String,
    /// (size, allocated, pending_free) bytes per segment, in address order.
    pub segments: Vec<(i64, i64, i64)>,
}

#[derive(Debug, Clone)]
pub enum Chart {
    Line(LineChart),
    Bars(BarChart),
    Segments(SegmentMap),
}

#[derive(Debug, Clone, Default)]
pub struct Table {
    pub caption: String,
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

#[derive(Debug, Clone)]
pub enum Block {
    Text(String),
    /// Index into [`Report::findings`].
    Finding(usize),
    Table(Table),
    Chart(Chart),
}

#[derive(Debug, Clone)]
pub struct Section {
    pub id: String,
    pub title: String,
    pub blocks: Vec<Block>,
}

/// Headline figures (the metric cards, and what `memq check` measures).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Metrics {
    /// Highest live/used bytes of any framework pool or HAL series (memscope) or true active
    /// peak (snapshot) — the largest over the devices.
    pub peak_bytes: Option<i64>,
    pub peak_where: Option<String>,
    /// Highest reservation: memscope pool `total` peak, or snapshot reserved peak.
    pub reserved_bytes: Option<i64>,
    pub reserved_where: Option<String>,
    /// Bytes of memory that grows without return (growing leak owners) on the device that
    /// holds most of it; `None` when the input cannot tell (no msMemScope events).
    pub leak_bytes: Option<i64>,
    pub leak_where: Option<String>,
    /// Largest fragmentation (free memory that cannot serve a request), percent.
    pub frag_pct: Option<f64>,
    pub frag_where: Option<String>,
    /// Cached free memory the allocator holds (returned by empty_cache()), on the device that
    /// holds most of it.
    pub cached_free_bytes: Option<i64>,
    pub cached_free_where: Option<String>,
    pub oom_events: i64,
    pub devices: i64,
    pub segments: Option<i64>,
}

/// The verdict paragraph at the top.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Verdict {
    pub severity: Severity,
    pub summary: String,
    pub actions: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Report {
    pub input: String,
    pub generated: String,
    pub metrics: Metrics,
    pub verdict: Verdict,
    pub findings: Vec<Finding>,
    pub sections: Vec<Section>,
    /// What each input can answer (view source_capabilities), shown in section 1.
    pub capabilities: Vec<Capability>,
    /// Analyses that failed (their error), so a reader knows what is missing.
    pub notes: Vec<String>,
}

/// One row of view source_capabilities.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Capability {
    pub source: String,
    pub kind: String,
    pub capability: String,
    pub present: bool,
    /// What cannot be concluded without it, and how to collect it; None when present.
    pub when_missing: Option<String>,
}

// ------------------------------------------------------------------------------------------
// Gathering
// ------------------------------------------------------------------------------------------

/// The rows of the canned analyses the report reads.
#[derive(Debug, Default)]
pub struct Data {
    pub opts: Options,
    pub notes: Vec<String>,
    // memscope
    pub capabilities: Rows,
    /// view source_capabilities: what each input of any format can answer
    pub source_caps: Rows,
    pub sources: Rows,
    pub span: Option<(i64, i64)>,
    pub rejects: i64,
    pub config: Rows,
    pub peaks: Rows,
    pub curve: Rows,
    pub breakdowns: Vec<PeakBreakdown>,
    pub owner_peaks: Rows,
    /// view findings: every rule's findings (problem → evidence → advice), judged in SQL
    pub findings: Rows,
    pub step_peaks: Rows,
    pub trend: Rows,
    pub oom_events: Rows,
    pub fragmentation: Rows,
    // snapshot
    pub snap_overview: Rows,
    pub snap_peak: Rows,
    pub snap_peak_blocks: Rows,
    pub snap_peak_split: Rows,
    pub snap_frag_top: Rows,
    pub snap_attr: Rows,
    pub snap_timeline: Rows,
    pub snap_segments_at_peak: Vec<(String, i64, Rows)>,
    /// The snapshots, in the order they were given; `snap_compare` compares the first two
    /// (b = the second).
    pub snapshots: Vec<String>,
    pub snap_compare: Rows,
    pub snap_expansions: Rows,
    pub snap_settings: Rows,
    pub snap_top_segments_growth: Rows,
    // torch.profiler traces
    pub trace_peaks: Rows,
    /// trace_memory_curve in [`CURVE_BUCKETS`] buckets per device: min/max/last allocated and
    /// the highest reserved of each.
    pub trace_curve: Rows,
    /// The ops that allocated most, by retained bytes (trace_memory_by_op).
    pub trace_ops: Rows,
}

/// The breakdown at one series' peak.
#[derive(Debug, Default)]
pub struct PeakBreakdown {
    pub source: String,
    pub pid: i64,
    pub device: String,
    pub pool: String,
    pub metric: String,
    pub peak_bytes: i64,
    pub peak_ts: i64,
    pub level1: Rows,
    pub tree: Rows,
    pub blocks: Rows,
}

/// Number of time buckets of the memory curves (min/max per bucket, in SQL).
pub const CURVE_BUCKETS: i64 = 240;
/// Number of buckets of the snapshot timeline.
pub const TIMELINE_BUCKETS: i64 = 300;

impl Data {
    /// Applies --device / --pool to rows that have those columns.
    fn filter(&self, mut r: Rows) -> Rows {
        let has_dev = r.cols.iter().any(|c| c == "device");
        let has_pool = r.cols.iter().any(|c| c == "pool");
        let dev = self.opts.device.clone();
        let pool = self.opts.pool.clone();
        r.retain(|row| {
            (!has_dev || dev.as_deref().is_none_or(|d| row.s("device") == d))
                && (!has_pool
                    || pool
                        .as_deref()
                        .is_none_or(|p| row.s("pool") == p || row.get("pool") == &Val::Null))
        });
        r
    }
    pub fn has_memscope(&self) -> bool {
        !self.capabilities.is_empty()
    }
    /// Growth per step can be judged: some dump has two complete steps (a dump whose only
    /// step is still open at its end has markers but no step-to-step evidence).
    pub fn step_evidence(&self) -> bool {
        self.capabilities
            .iter()
            .any(|r| r.i64("complete_steps").unwrap_or(0) >= 2)
    }
    pub fn has_snapshot(&self) -> bool {
        !self.snap_overview.is_empty()
    }
    pub fn has_trace(&self) -> bool {
        !self.trace_peaks.is_empty()
    }
    pub fn run_start(&self) -> Option<i64> {
        self.span.map(|s| s.0)
    }
}

/// With `MEMQ_REPORT_TIMES` set, each analysis the report runs prints its wall time to stderr.
fn timing() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("MEMQ_REPORT_TIMES").is_some())
}

/// How many analyses run at once: each is already parallel inside, but many have serial
/// stretches (planning, a final sort or window over one partition) that another can fill.
const CONCURRENT: usize = 4;

/// Independent analyses run together ([`CONCURRENT`] at a time); their rows come back in the
/// order they were added, a failing one as no rows and a note.
#[derive(Default)]
struct Batch {
    asks: Vec<(&'static str, String)>,
}

impl Batch {
    /// Adds a query; its index in the result of [`Batch::run`].
    fn add(&mut self, what: &'static str, sql: impl Into<String>) -> usize {
        self.asks.push((what, sql.into()));
        self.asks.len() - 1
    }

    async fn run(self, engine: &Engine, notes: &mut Vec<String>) -> Vec<Rows> {
        use futures::StreamExt as _;
        // the futures made before the stream holds them: a stream that maps with a closure
        // is not Send to the compiler (a higher-ranked lifetime), and a server's handlers
        // must be
        let asks: Vec<_> = self
            .asks
            .iter()
            .map(|(what, sql)| ask(engine, what, sql))
            .collect();
        let results: Vec<std::result::Result<Rows, String>> = futures::stream::iter(asks)
            .buffered(CONCURRENT)
            .collect()
            .await;
        results
            .into_iter()
            .map(|r| {
                r.unwrap_or_else(|e| {
                    notes.push(e);
                    Rows::default()
                })
            })
            .collect()
    }
}

/// One query of a [`Batch`]: its rows, or the error named by `what`.
async fn ask(engine: &Engine, what: &str, sql: &str) -> std::result::Result<Rows, String> {
    let t = std::time::Instant::now();
    let r = match engine.query(sql).await {
        Ok(b) => Ok(to_rows(&b)),
        Err(e) => Err(format!("{what}: {e}")),
    };
    if timing() {
        eprintln!(
            "memq report: {:>8.3} s {:>6} rows  {what}",
            t.elapsed().as_secs_f64(),
            r.as_ref().map(|r| r.len()).unwrap_or(0)
        );
    }
    r
}

/// Runs the canned analyses the report needs.
pub async fn gather(engine: &Engine, opts: &Options) -> Result<Data> {
    let mut d = Data {
        opts: opts.clone(),
        ..Default::default()
    };
    let mut n = Vec::new();
    let e = engine;

    // (1) sources and capabilities: what the input holds decides what else runs
    let mut b = Batch::default();
    // only the columns the report reads: the others (C stacks, shadow rows, never-freed
    // blocks, ...) cost a pass over the stack texts or the blocks (10 M events: 4.3 s → 2.5 s)
    let caps = b.add(
        "capabilities",
        "SELECT source, generation, rows, processes, devices, pools, has_owners, has_py_stacks, has_alloc_free, pairing, \
         has_pool_counters, has_snapshots, has_oom, has_steps, complete_steps FROM capabilities ORDER BY source",
    );
    let source_caps = b.add(
        "source_capabilities",
        "SELECT source, kind, capability, present, when_missing FROM source_capabilities ORDER BY source, capability",
    );
    let sources = b.add(
        "sources",
        "SELECT kind, generation, COUNT(*) AS files, SUM(rows) AS rows, SUM(rejects) AS rejects, SUM(size_bytes) AS size_bytes \
         FROM sources GROUP BY kind, generation ORDER BY kind, generation",
    );
    let overview = b.add(
        "snap_overview",
        "SELECT * FROM snap_overview ORDER BY snapshot, device",
    );
    let trace_peaks = b.add(
        "trace_memory_peaks",
        "SELECT source, device, metric, peak_bytes, peak_ts, op, rebuilt, events \
         FROM trace_memory_peaks ORDER BY source, device, metric",
    );
    let mut r = b.run(e, &mut n).await;
    d.trace_peaks = d.filter_dev(std::mem::take(&mut r[trace_peaks]));
    d.capabilities = std::mem::take(&mut r[caps]);
    d.source_caps = std::mem::take(&mut r[source_caps]);
    d.sources = std::mem::take(&mut r[sources]);
    d.rejects = d.sources.iter().filter_map(|r| r.i64("rejects")).sum();
    d.snap_overview = d.filter_dev(std::mem::take(&mut r[overview]));

    let mut b = Batch::default();
    let findings = b.add("findings", "SELECT * FROM findings ORDER BY section, ord");
    let ms = d.has_memscope().then(|| memscope_asks(&mut b, opts));
    let snap = d.has_snapshot().then(|| snapshot_asks(&mut b));
    let trace = d.has_trace().then(|| trace_asks(&mut b));
    let mut r = b.run(e, &mut n).await;
    let mut take = |i: usize| std::mem::take(&mut r[i]);
    d.findings = d.filter_findings(take(findings));
    if let Some(a) = ms {
        d.span = take(a.span)
            .first()
            .and_then(|r| Some((r.i64("t0")?, r.i64("t1")?)));
        d.config = take(a.config);
        d.peaks = d.filter(take(a.peaks));
        d.curve = d.filter(take(a.curve));
        d.owner_peaks = d.filter(take(a.owner_peaks));
        d.step_peaks = d.filter(take(a.step_peaks));
        d.trend = d.filter(take(a.trend));
        d.oom_events = d.filter_dev(take(a.oom_events));
        d.fragmentation = d.filter(take(a.fragmentation));
    }
    if let Some(a) = snap {
        d.snap_peak = d.filter_dev(take(a.peak));
        d.snap_peak_blocks = d.filter_dev(take(a.peak_blocks));
        d.snap_peak_split = d.filter_dev(take(a.peak_split));
        d.snap_frag_top = d.filter_dev(take(a.frag_top));
        d.snap_attr = d.filter_dev(take(a.attr));
        d.snap_timeline = d.filter_dev(take(a.timeline));
        d.snap_expansions = d.filter_dev(take(a.expansions));
        d.snap_settings = take(a.settings);
        // the snapshots in the order they were given (= ingested): the first two are compared
        d.snapshots = take(a.snapshots).iter().map(|r| r.s("source")).collect();
    }
    if let Some([curve, ops, span]) = trace {
        d.trace_curve = d.filter_dev(take(curve));
        d.trace_ops = d.filter_dev(take(ops));
        // a trace's moments are shown from its own start when no dump gives the run's
        if d.span.is_none() {
            d.span = take(span)
                .first()
                .and_then(|r| Some((r.i64("t0")?, r.i64("t1")?)));
        }
    }

    // what rests on those rows: the breakdown at each series' peak, the segments at each
    // snapshot's active peak, the comparison of two snapshots
    let mut b = Batch::default();
    let breakdowns = breakdown_asks(&mut b, &d);
    let mut segments = Vec::new();
    for r in d.snap_peak.iter() {
        let (snap, Some(dev)) = (r.s("snapshot"), r.i64("device")) else {
            continue;
        };
        let seq = r.i64("active_peak_seq").unwrap_or(i64::MAX / 4);
        let i = b.add(
            "state_at",
            format!(
                "SELECT address, size, allocated_bytes, pending_free_bytes, free_bytes FROM state_at({seq}, {}, {dev}) \
                 WHERE kind = 'segment' ORDER BY address",
                lit(&snap)
            ),
        );
        segments.push((snap, dev, i));
    }
    let compare = (d.snapshots.len() >= 2).then(|| {
        b.add(
            "snap_compare",
            format!(
                "SELECT kind, rank, key, a_count, b_count, diff_count, a_bytes, b_bytes, diff_bytes, trend FROM snap_compare({}, {}) \
                 WHERE kind = 'total' OR rank <= 5 ORDER BY kind, rank",
                lit(&d.snapshots[0]),
                lit(&d.snapshots[1])
            ),
        )
    });
    let mut r = b.run(e, &mut n).await;
    let mut take = |i: usize| std::mem::take(&mut r[i]);
    for (mut bd, [level1, tree, blocks]) in breakdowns {
        bd.level1 = take(level1);
        bd.tree = take(tree);
        bd.blocks = take(blocks);
        d.breakdowns.push(bd);
    }
    for (snap, dev, i) in segments {
        d.snap_segments_at_peak.push((snap, dev, take(i)));
    }
    if let Some(i) = compare {
        d.snap_compare = take(i);
    }
    d.notes = n;
    Ok(d)
}

/// The trace analyses: the curve in buckets, the ops by retained bytes, the time span.
fn trace_asks(b: &mut Batch) -> [usize; 3] {
    let curve = b.add(
        "trace_memory_curve",
        format!(
            "WITH c AS (SELECT source, device, ts, event, allocated, reserved FROM trace_memory_curve), \
             r AS (SELECT source, device, MIN(ts) AS t_min, GREATEST(MAX(ts) - MIN(ts), 1) AS span \
                   FROM c GROUP BY source, device) \
             SELECT c.source, c.device, \
                    LEAST(((c.ts - r.t_min) * {n}) / r.span, {n} - 1) AS bucket, \
                    MIN(c.ts) AS t0, MAX(c.ts) AS t1, \
                    MIN(c.allocated) AS min_bytes, MAX(c.allocated) AS max_bytes, \
                    LAST_VALUE(c.allocated ORDER BY c.ts, c.event) AS end_bytes, \
                    MAX(c.reserved) AS reserved_max \
             FROM c JOIN r ON c.source = r.source AND c.device = r.device \
             GROUP BY c.source, c.device, bucket ORDER BY c.source, c.device, bucket",
            n = CURVE_BUCKETS
        ),
    );
    let ops = b.add(
        "trace_memory_by_op",
        "SELECT source, device, op, runs, allocations, allocated_bytes, freed_bytes, retained_bytes \
         FROM trace_memory_by_op ORDER BY allocated_bytes DESC, source, device, op LIMIT 10",
    );
    let span = b.add(
        "trace_memory",
        "SELECT MIN(ts) AS t0, MAX(ts) AS t1 FROM trace_memory",
    );
    [curve, ops, span]
}

/// Indices of the memscope analyses in their [`Batch`].
struct MemscopeAsks {
    span: usize,
    config: usize,
    peaks: usize,
    curve: usize,
    owner_peaks: usize,
    step_peaks: usize,
    trend: usize,
    oom_events: usize,
    fragmentation: usize,
}

fn memscope_asks(b: &mut Batch, opts: &Options) -> MemscopeAsks {
    let pool_arg = match &opts.pool {
        Some(p) => lit(p),
        None => "NULL".into(),
    };
    MemscopeAsks {
        // the time span of the data: the earliest and latest timestamp
        span: b.add(
            "event_counts",
            // the start the findings' "+t" count from (their SQL reads the same), without a
            // pass over every event
            "SELECT MIN(first_ts) FILTER (WHERE first_ts > 0) AS t0, MAX(last_ts) FILTER (WHERE last_ts > 0) AS t1 FROM event_counts",
        ),
        config: b.add("config", "SELECT key, value FROM config ORDER BY key"),
        // (2) curves and peaks
        peaks: b.add(
            "peaks",
            // (10 M events: 4.2 s for every column, 2.8 s for these)
            // a live peak needs MALLOC and FREE rows: a dump of one kind only has none
            "SELECT source, pid, device, pool, metric, peak_bytes, peak_ts FROM peaks \
             WHERE can_pair OR metric <> 'live' ORDER BY device, pool, metric, pid, source",
        ),
        curve: b.add(
            "curve_buckets",
            format!(
                "SELECT source, pid, device, pool, metric, bucket, t0, t1, points, min_bytes, max_bytes, end_bytes \
                 FROM curve_buckets({CURVE_BUCKETS}, {pool_arg}) WHERE metric IN ('used', 'total', 'live') \
                 ORDER BY device, pool, pid, source, metric, bucket"
            ),
        ),
        // (3) the largest owners (the breakdowns at the peaks follow, on the peaks)
        owner_peaks: b.add(
            "owner_peaks",
            "SELECT * FROM (SELECT source, pid, device, pool, owner, owner_group, peak_bytes, peak_ts, total_bytes, blocks, end_bytes, \
             ROW_NUMBER() OVER (PARTITION BY source, pid, device, pool ORDER BY peak_bytes DESC, owner) AS rn FROM owner_peaks) \
             WHERE rn <= 8 ORDER BY device, pool, pid, rn",
        ),
        step_peaks: b.add(
            "step_peaks",
            "SELECT source, pid, device, pool, step, start_ts, end_ts, start_used, peak_used, end_used, growth, growth_vs_prev \
             FROM step_peaks ORDER BY device, pool, pid, source, start_ts",
        ),
        trend: b.add(
            "trend",
            format!(
                "SELECT DISTINCT source, pid, device, pool, growth_verdict, base_used, net_growth_bytes, net_growth_pct, \
                 compared_buckets, above_base, reservation_growth FROM trend(20, {pool_arg}) ORDER BY device, pool, pid, source"
            ),
        ),
        // (5) OOM
        oom_events: b.add(
            "oom_events",
            "SELECT source, pid, device, trigger_id, oom_ts, kind, nth, func, req_size, pool, size, alloc_ts, owner, owner_group, \
             stack_top, snapshot_ts, snapshot_name, free_mem, total_mem, reserved_bytes, allocated_bytes, req_pct_of_free \
             FROM oom_events ORDER BY oom_ts, kind DESC, nth",
        ),
        // (6) fragmentation and pool expansions
        fragmentation: b.add(
            "fragmentation",
            "SELECT source, pid, device, pool, samples, expansions, current_frag_pct, peak_frag_pct, peak_ts, mean_frag_pct, level, \
             peak_level, used_last, total_last, peak_total FROM fragmentation ORDER BY device, pool, pid",
        ),
    }
}

/// The breakdown at each series' peak (framework pools by `used`, HAL by `live`): the
/// breakdown with the indices of its level-1, tree and blocks queries.
fn breakdown_asks(b: &mut Batch, d: &Data) -> Vec<(PeakBreakdown, [usize; 3])> {
    let mut out = Vec::new();
    for r in d.peaks.iter() {
        let (pool, metric) = (r.s("pool"), r.s("metric"));
        let primary = (pool == "HAL" && metric == "live") || (pool != "HAL" && metric == "used");
        if pool == "HOST_PINNED" || !primary {
            continue;
        }
        let (Some(pid), Some(peak_bytes), Some(peak_ts)) =
            (r.i64("pid"), r.i64("peak_bytes"), r.i64("peak_ts"))
        else {
            continue;
        };
        let (source, device) = (r.s("source"), r.s("device"));
        let w = format!(
            "source = {} AND pid = {pid} AND device = {}",
            lit(&source),
            lit(&device)
        );
        let p = lit(&pool);
        let level1 = b.add(
            "breakdown_at",
            format!(
                "SELECT owner_group, SUM(bytes) AS bytes, SUM(blocks) AS blocks, SUM(share) AS share \
                 FROM breakdown_at({peak_ts}, {p}) WHERE {w} GROUP BY owner_group ORDER BY bytes DESC, owner_group"
            ),
        );
        let tree = b.add(
            "breakdown_tree_at",
            format!(
                "SELECT path, name, depth, bytes, blocks, share FROM breakdown_tree_at({peak_ts}, {p}) \
                 WHERE {w} AND depth <= 3 ORDER BY tree_order LIMIT 40"
            ),
        );
        let blocks = b.add(
            "blocks",
            format!(
                "SELECT size, owner, alloc_ts, user_frame(stack_py) AS user_frame, COALESCE(stack_py, '') <> '' AS has_stack, fate FROM blocks \
                 WHERE {w} AND pool = {p} AND alloc_ts <= {peak_ts} AND (end_ts IS NULL OR end_ts > {peak_ts}) \
                 ORDER BY size DESC, alloc_ts LIMIT 10"
            ),
        );
        out.push((
            PeakBreakdown {
                source,
                pid,
                device,
                pool,
                metric,
                peak_bytes,
                peak_ts,
                ..Default::default()
            },
            [level1, tree, blocks],
        ));
    }
    out
}

/// Indices of the snapshot analyses in their [`Batch`].
struct SnapshotAsks {
    peak: usize,
    peak_blocks: usize,
    peak_split: usize,
    frag_top: usize,
    attr: usize,
    timeline: usize,
    expansions: usize,
    settings: usize,
    snapshots: usize,
}

fn snapshot_asks(b: &mut Batch) -> SnapshotAsks {
    SnapshotAsks {
        peak: b.add("snap_peak", "SELECT * FROM snap_peak ORDER BY snapshot, device"),
        peak_blocks: b.add(
            "snap_peak_blocks",
            "SELECT snapshot, device, peak_bytes, rank, size, pct_of_peak, origin, end_kind, user_frame, user_path, call_path \
             FROM snap_peak_blocks WHERE rank <= 10 ORDER BY snapshot, device, rank",
        ),
        // the largest user frames and categories at the peak (user_frame rows first)
        peak_split: b.add(
            "snap_peak_split",
            "SELECT * FROM (SELECT snapshot, device, peak_bytes, dimension, key, bytes, blocks, pct_of_peak, \
             ROW_NUMBER() OVER (PARTITION BY snapshot, device, dimension ORDER BY bytes DESC, key) AS rn FROM snap_peak_split) \
             WHERE rn <= 8 ORDER BY snapshot, device, dimension DESC, rn",
        ),
        frag_top: b.add(
            "snap_fragmentation",
            "SELECT * FROM (SELECT snapshot, device, segment_id, segment_type, total_size, allocated_bytes, free_bytes, free_pieces, \
             largest_free_bytes, free_bytes - largest_free_bytes AS unusable, pending_free_bytes, user_frame, \
             ROW_NUMBER() OVER (PARTITION BY snapshot, device ORDER BY free_bytes - largest_free_bytes DESC, segment_id) AS rn \
             FROM snap_fragmentation WHERE free_bytes > largest_free_bytes) WHERE rn <= 5 ORDER BY snapshot, device, rn",
        ),
        attr: b.add(
            "snap_stack_attribution",
            "SELECT snapshot, device, rank, user_frame, blocks, bytes, pct_of_live FROM snap_stack_attribution \
             WHERE grouping = 'user_frame' AND rank <= 8 ORDER BY snapshot, device, rank",
        ),
        timeline: b.add(
            "snap_timeline",
            format!(
                "SELECT t.snapshot, t.device, (t.seq * {TIMELINE_BUCKETS}) / GREATEST(p.entries, 1) AS bucket, \
                 MIN(t.seq) AS seq0, MAX(t.seq) AS seq1, MIN(t.active_bytes) AS active_min, MAX(t.active_bytes) AS active_max, \
                 MIN(t.reserved_bytes) AS reserved_min, MAX(t.reserved_bytes) AS reserved_max \
                 FROM snap_timeline t JOIN snap_peak p ON t.snapshot = p.snapshot AND t.device = p.device \
                 GROUP BY t.snapshot, t.device, 3 ORDER BY t.snapshot, t.device, 3"
            ),
        ),
        expansions: b.add(
            "snap_expansions",
            "SELECT snapshot, device, seq, action, size, reserved_bytes, growth_rank, user_frame FROM snap_expansions \
             WHERE growth_rank <= 5 ORDER BY snapshot, device, growth_rank",
        ),
        settings: b.add(
            "snap_info",
            "SELECT snapshot, key, value FROM snap_info WHERE section = 'allocator_settings' ORDER BY snapshot, key",
        ),
        snapshots: b.add(
            "sources",
            "SELECT source FROM sources WHERE kind = 'snapshot'",
        ),
    }
}

impl Data {
    /// --device / --pool on findings: those about that device (pool), and those about none.
    fn filter_findings(&self, mut r: Rows) -> Rows {
        let (dev, pool) = (self.opts.device.clone(), self.opts.pool.clone());
        r.retain(|row| {
            let keep = |col: &str, want: &Option<String>| {
                want.as_deref()
                    .is_none_or(|w| row.str(col).is_none_or(|v| v == w))
            };
            keep("device", &dev) && keep("pool", &pool)
        });
        r
    }

    /// --device only (rows whose `pool` is a block's pool, not a series' filter).
    fn filter_dev(&self, mut r: Rows) -> Rows {
        if r.cols.iter().any(|c| c == "device") {
            if let Some(dv) = self.opts.device.clone() {
                r.retain(|row| row.s("device") == dv);
            }
        }
        r
    }
}

/// Opens nothing: gathers, judges and lays out the report of an opened engine.
pub async fn report(engine: &Engine, input: &str, opts: &Options) -> Result<Report> {
    let data = gather(engine, opts).await?;
    if !data.has_memscope() && !data.has_snapshot() && !data.has_trace() {
        return Err(MemqError::Usage(format!(
            "{input}: no msMemScope dump, snapshot or torch.profiler memory events in this input (nothing to report)"
        )));
    }
    Ok(findings::build(&data, input))
}

/// Writes the report to `path`, the writer chosen by extension (.html, .md, .json).
pub fn write(report: &Report, path: &Path) -> Result<()> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let text = match ext.as_str() {
        "html" | "htm" => html::render(report),
        "md" | "markdown" => markdown::render(report),
        "json" => json::render(report),
        _ => {
            return Err(MemqError::Usage(format!(
                "-o {}: the report is written as .html, .md or .json",
                path.display()
            )))
        }
    };
    std::fs::write(path, text).map_err(|e| MemqError::io(path, e))
}
