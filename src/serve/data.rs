//! What the explorer's pages ask, answered from the canned analyses: the series a timeline can
//! show, their curves bucketed to the page's pixels, the state at a moment, a block, and the
//! findings with the moment each points at.
//!
//! Positions on a timeline are relative to the series' start (`x_rel`: ns for time series,
//! trace entries for snapshots): ns since the epoch do not fit a JavaScript number exactly.
//! Curves come from the stored tables: an msMemScope series from its `curve_tiles` (20 160 tiles
//! per series, each with its min, max and last; read once, when the series is first drawn, and
//! kept) when the window holds many rows, else from the `curve` rows of the window; a snapshot
//! from the stored views `snap_timeline_tiles` (tiles of 8 to 262 144 entries) and
//! `snap_timeline_points` (one row per entry), the range of the window only, so no window of any
//! trace reads more than 8 rows per pixel; a trace from its curve, read once at start.

use std::sync::Arc;

use datafusion::scalar::ScalarValue;
use memq_core::error::{MemqError, Result};
use serde_json::{json, Map, Value};

use crate::api::{Dataset, Params};
use crate::report::{fmt_bytes, fmt_dur_ns, to_rows, Rows};

use super::Served;

/// What a series is drawn from.
#[derive(Debug, Clone)]
pub enum Source {
    Memscope {
        source: String,
        pid: Option<i64>,
        device: String,
        pool: String,
        /// Rows of the series in `curve` (the window decides tiles or rows by it).
        rows: i64,
        /// The series' tiles, read from `curve_tiles` the first time a window needs them.
        tiles: Arc<tokio::sync::OnceCell<Tiles>>,
    },
    Snapshot {
        snapshot: String,
        device: i64,
        /// Trace entries of the device (seq 0 .. entries - 1).
        entries: i64,
    },
    Trace {
        source: String,
        device: String,
        points: Arc<Points>,
    },
}

/// One curve the timeline can show.
#[derive(Debug, Clone)]
pub struct Series {
    pub id: String,
    pub label: String,
    pub source: Source,
    /// x of `x_rel` 0: ns since the epoch, or trace entry 0.
    pub start: i64,
    pub x_min_rel: f64,
    pub x_max_rel: f64,
    pub metrics: Vec<String>,
    /// (metric, bytes, x_rel) of the series' peak.
    pub peak: Option<(String, i64, f64)>,
}

impl Series {
    fn kind(&self) -> &'static str {
        match self.source {
            Source::Memscope { .. } => "memscope",
            Source::Snapshot { .. } => "snapshot",
            Source::Trace { .. } => "trace",
        }
    }

    fn by_entry(&self) -> bool {
        matches!(self.source, Source::Snapshot { .. })
    }

    /// As /api/info lists it.
    pub fn info(&self) -> Value {
        json!({
            "id": self.id,
            "kind": self.kind(),
            "label": self.label,
            "x": if self.by_entry() { "entry" } else { "time" },
            "start": self.start,
            "x_min_rel": self.x_min_rel,
            "x_max_rel": self.x_max_rel,
            "metrics": self.metrics,
            "points": match &self.source {
                Source::Memscope { rows, .. } => *rows as usize,
                Source::Snapshot { entries, .. } => *entries as usize,
                Source::Trace { points, .. } => points.xs.len(),
            },
            "peak": self.peak.as_ref().map(|(m, b, x)| json!({"metric": m, "bytes": b, "x_rel": x})),
        })
    }

    /// A relative position as the page shows it.
    fn x_label(&self, x_rel: f64) -> String {
        if self.by_entry() {
            format!("entry {}", x_rel.round() as i64)
        } else {
            format!("+{}", fmt_dur_ns(x_rel.round() as i64))
        }
    }
}

/// A curve held in memory: x in order and each metric's value at it (`None`: not written).
#[derive(Debug, Default)]
pub struct Points {
    pub xs: Vec<i64>,
    pub values: Vec<Vec<Option<i64>>>,
}

/// The tiles of an msMemScope series in tile order: each tile's first and last possible time
/// (absolute ns) and, per metric of the series, its (min, max, last).
#[derive(Debug, Default)]
pub struct Tiles {
    starts: Vec<i64>,
    ends: Vec<i64>,
    values: Vec<Vec<Fold>>,
}

/// A metric's (min, max, last) over a tile or a point.
type Fold = (Option<i64>, Option<i64>, Option<i64>);

async fn rows(ds: &Dataset, sql: &str, params: &[(&str, ScalarValue)]) -> Result<Rows> {
    let bound: Params = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let collected = ds.sql(sql, &bound).await?.collect().await?;
    Ok(to_rows(&collected.batches))
}

/// The columns of a query of integer columns, each as 64-bit integers: many rows are read
/// straight from the Arrow arrays (not through [`Rows`], which names every cell).
async fn int_columns(
    ds: &Dataset,
    sql: &str,
    params: &[(&str, ScalarValue)],
) -> Result<Vec<Vec<Option<i64>>>> {
    use datafusion::arrow::array::{Array, Int64Array};
    use datafusion::arrow::compute::cast;
    use datafusion::arrow::datatypes::DataType;
    let bound: Params = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let collected = ds.sql(sql, &bound).await?.collect().await?;
    let width = collected.batches.first().map_or(0, |b| b.num_columns());
    let mut out = vec![Vec::new(); width];
    for batch in &collected.batches {
        for (c, col) in batch.columns().iter().enumerate() {
            let col = cast(col, &DataType::Int64)?;
            let ints = col
                .as_any()
                .downcast_ref::<Int64Array>()
                .expect("cast to Int64");
            out[c].extend(ints.iter());
        }
    }
    Ok(out)
}

fn text(s: &str) -> ScalarValue {
    ScalarValue::Utf8(Some(s.to_string()))
}

fn int(v: i64) -> ScalarValue {
    ScalarValue::Int64(Some(v))
}

/// The series of every input, and the marks (steps, OOMs) on their axes.
pub async fn discover(ds: &Dataset) -> Result<(Vec<Series>, Vec<Value>)> {
    let mut series = Vec::new();
    let peaks = rows(
        ds,
        "SELECT source, pid, device, pool, metric, peak_bytes, peak_ts FROM peaks",
        &[],
    )
    .await
    .unwrap_or_default();
    let tiles = rows(
        ds,
        "SELECT source, pid, device, pool, MIN(t_min) AS t0, MAX(t_max) AS t1, \
         SUM(live_points) AS n FROM curve_tiles GROUP BY source, pid, device, pool \
         ORDER BY device, pool, source, pid",
        &[],
    )
    .await
    .unwrap_or_default();
    let sources: std::collections::BTreeSet<String> = tiles.iter().map(|r| r.s("source")).collect();
    for r in tiles.iter() {
        let (source, pid, device, pool) = (r.s("source"), r.i64("pid"), r.s("device"), r.s("pool"));
        let (Some(t0), Some(t1)) = (r.i64("t0"), r.i64("t1")) else {
            continue;
        };
        let mine: Vec<_> = peaks
            .iter()
            .filter(|p| {
                p.s("source") == source
                    && p.i64("pid") == pid
                    && p.s("device") == device
                    && p.s("pool") == pool
            })
            .collect();
        let mut metrics: Vec<String> = ["live", "used", "total"]
            .iter()
            .filter(|m| **m == "live" || mine.iter().any(|p| p.s("metric") == **m))
            .map(|m| m.to_string())
            .collect();
        metrics.dedup();
        let peak = mine
            .iter()
            .filter(|p| p.s("metric") == "live")
            .find_map(|p| {
                Some((
                    "live".to_string(),
                    p.i64("peak_bytes")?,
                    (p.i64("peak_ts")? - t0) as f64,
                ))
            });
        let mut label = format!("device {device} {pool}");
        if let Some(pid) = pid {
            label.push_str(&format!(" (pid {pid})"));
        }
        if sources.len() > 1
            && sources
                .iter()
                .filter(|s| s.ends_with(&format!("device_{device}/dump/{}", short(&source))))
                .count()
                != 1
        {
            label.push_str(&format!(" — {}", short(&source)));
        }
        series.push(Series {
            id: format!("m{}", series.len()),
            label,
            source: Source::Memscope {
                source,
                pid,
                device,
                pool,
                rows: r.i64("n").unwrap_or(0),
                tiles: Default::default(),
            },
            start: t0,
            x_min_rel: 0.0,
            x_max_rel: (t1 - t0) as f64,
            metrics,
            peak,
        });
    }
    // a snapshot's curve from its coarsest tiles: a few rows per device whatever its length
    let snaps = rows(
        ds,
        "SELECT snapshot, device, MIN(seq_min) AS s0, MAX(seq_max) AS s1, SUM(entries) AS n, \
         MAX(active_max) AS peak, COUNT(active_max) AS actives, COUNT(reserved_max) AS reserves \
         FROM snap_timeline_tiles WHERE width = $width GROUP BY snapshot, device \
         ORDER BY snapshot, device",
        &[("width", int(SNAP_TILE_WIDTHS[SNAP_TILE_WIDTHS.len() - 1]))],
    )
    .await
    .unwrap_or_default();
    for r in snaps.iter() {
        let (snapshot, Some(device), Some(s0), Some(s1)) =
            (r.s("snapshot"), r.i64("device"), r.i64("s0"), r.i64("s1"))
        else {
            continue;
        };
        // the first entry reaching the peak: the row groups whose statistics cannot hold the
        // peak are skipped
        let peak = match r.i64("peak") {
            Some(bytes) => rows(
                ds,
                "SELECT MIN(seq) AS seq FROM snap_timeline_points \
                 WHERE snapshot = $snapshot AND device = $device AND active_bytes = $peak",
                &[
                    ("snapshot", text(&snapshot)),
                    ("device", int(device)),
                    ("peak", int(bytes)),
                ],
            )
            .await
            .unwrap_or_default()
            .first()
            .and_then(|p| p.i64("seq"))
            .map(|seq| ("active".to_string(), bytes, (seq - s0) as f64)),
            None => None,
        };
        let metrics = [("active", "actives"), ("reserved", "reserves")]
            .iter()
            .filter(|(_, n)| r.i64(n).unwrap_or(0) > 0)
            .map(|(m, _)| m.to_string())
            .collect();
        series.push(Series {
            id: format!("s{}", series.len()),
            label: format!("{} device {device}", short(&snapshot)),
            source: Source::Snapshot {
                snapshot,
                device,
                entries: r.i64("n").unwrap_or(0),
            },
            start: s0,
            x_min_rel: 0.0,
            x_max_rel: (s1 - s0) as f64,
            metrics,
            peak,
        });
    }
    let traces = rows(
        ds,
        "SELECT source, device, ts, allocated, reserved FROM trace_memory_curve",
        &[],
    )
    .await
    .unwrap_or_default();
    for ((source, device), points) in
        split_curves(&traces, "source", "ts", ["allocated", "reserved"])
    {
        series.push(in_memory(
            format!("t{}", series.len()),
            format!("{} {device}", short(&source)),
            points,
            ["allocated", "reserved"],
            |points| Source::Trace {
                source: source.clone(),
                device: device.clone(),
                points,
            },
        ));
    }
    let marks = marks(ds, &series).await;
    Ok((series, marks))
}

/// The rows of a curve query split by (`name`, device): x and two metrics each, in row order.
fn split_curves(
    rows: &Rows,
    name: &str,
    x: &str,
    metrics: [&str; 2],
) -> std::collections::BTreeMap<(String, String), Points> {
    let mut by: std::collections::BTreeMap<(String, String), Points> = Default::default();
    for r in rows.iter() {
        let Some(at) = r.i64(x) else { continue };
        let p = by
            .entry((r.s(name), r.s("device")))
            .or_insert_with(|| Points {
                xs: Vec::new(),
                values: vec![Vec::new(), Vec::new()],
            });
        p.xs.push(at);
        for (v, m) in p.values.iter_mut().zip(metrics) {
            v.push(r.i64(m));
        }
    }
    by
}

/// A series of a curve held in memory; its peak is the first metric's highest value.
fn in_memory(
    id: String,
    label: String,
    points: Points,
    names: [&str; 2],
    source: impl FnOnce(Arc<Points>) -> Source,
) -> Series {
    let start = points.xs.first().copied().unwrap_or(0);
    let end = points.xs.last().copied().unwrap_or(0);
    let peak = points.values[0]
        .iter()
        .enumerate()
        .filter_map(|(i, v)| Some((i, (*v)?)))
        .max_by_key(|(i, v)| (*v, std::cmp::Reverse(*i)))
        .map(|(i, v)| (names[0].to_string(), v, (points.xs[i] - start) as f64));
    let metrics = names
        .iter()
        .zip(&points.values)
        .filter(|(_, v)| v.iter().any(Option::is_some))
        .map(|(n, _)| n.to_string())
        .collect();
    Series {
        id,
        label,
        start,
        x_min_rel: 0.0,
        x_max_rel: (end - start) as f64,
        metrics,
        peak,
        source: source(Arc::new(points)),
    }
}

/// The series' process: `pid = $pid`, or `pid IS NULL` for rows without one. (`IS NOT DISTINCT
/// FROM $pid` beside another comparison fails to plan in DataFusion 55: "incompatible types".)
fn pid_is(pid: Option<i64>, table: &str) -> String {
    match pid {
        Some(_) => format!("{table}pid = $pid"),
        None => format!("{table}pid IS NULL"),
    }
}

fn short(path: &str) -> String {
    path.rsplit('/').next().unwrap_or(path).to_string()
}

/// Steps and OOMs on the axes of the msMemScope series of their process and device, and
/// snapshot OOMs on their device's series.
async fn marks(ds: &Dataset, series: &[Series]) -> Vec<Value> {
    let mut out = Vec::new();
    let steps = rows(
        ds,
        "SELECT source, pid, device, step, start_ts FROM steps WHERE start_ts IS NOT NULL",
        &[],
    )
    .await
    .unwrap_or_default();
    let ooms = rows(
        ds,
        "SELECT DISTINCT pid, device, oom_ts FROM oom_events WHERE oom_ts IS NOT NULL",
        &[],
    )
    .await
    .unwrap_or_default();
    // the OOM entries of the trace (what snap_oom lists, without judging each)
    let snap_ooms = rows(
        ds,
        "SELECT snapshot, device, seq FROM snap_traces WHERE action = 'oom'",
        &[],
    )
    .await
    .unwrap_or_default();
    for s in series {
        match &s.source {
            Source::Memscope {
                source,
                pid,
                device,
                ..
            } => {
                for r in steps.iter().filter(|r| {
                    &r.s("source") == source && r.i64("pid") == *pid && &r.s("device") == device
                }) {
                    if let Some(t) = r.i64("start_ts") {
                        out.push(json!({"series": s.id, "x_rel": (t - s.start) as f64, "kind": "step", "label": format!("step {}", r.s("step"))}));
                    }
                }
                for r in ooms
                    .iter()
                    .filter(|r| r.i64("pid") == *pid && &r.s("device") == device)
                {
                    if let Some(t) = r.i64("oom_ts") {
                        out.push(json!({"series": s.id, "x_rel": (t - s.start) as f64, "kind": "oom", "label": "OOM"}));
                    }
                }
            }
            Source::Snapshot {
                snapshot, device, ..
            } => {
                for r in snap_ooms
                    .iter()
                    .filter(|r| &r.s("snapshot") == snapshot && r.i64("device") == Some(*device))
                {
                    if let Some(seq) = r.i64("seq") {
                        out.push(json!({"series": s.id, "x_rel": (seq - s.start) as f64, "kind": "oom", "label": "OOM"}));
                    }
                }
            }
            Source::Trace { .. } => {}
        }
    }
    out
}

/// One bucket's min, max and last of each metric.
#[derive(Clone, Default)]
struct Bucket {
    x0: i64,
    x1: i64,
    min: Vec<Option<i64>>,
    max: Vec<Option<i64>>,
    last: Vec<Option<i64>>,
}

/// Folds values at x (absolute, in order) into `px` buckets over [x0, x1).
struct Folder {
    x0: i64,
    width: f64,
    px: usize,
    metrics: usize,
    buckets: Vec<Bucket>,
    /// The value in force at x0 per metric (the last before it).
    before: Vec<Option<i64>>,
}

impl Folder {
    fn new(x0: i64, x1: i64, px: usize, metrics: usize) -> Folder {
        Folder {
            x0,
            width: (x1 - x0).max(1) as f64 / px as f64,
            px,
            metrics,
            buckets: Vec::new(),
            before: vec![None; metrics],
        }
    }

    /// A point (or a tile) from x to x_end with each metric's (min, max, last).
    fn add(&mut self, x: i64, x_end: i64, vals: &[(Option<i64>, Option<i64>, Option<i64>)]) {
        if x < self.x0 {
            for (m, v) in vals.iter().enumerate() {
                if v.2.is_some() {
                    self.before[m] = v.2;
                }
            }
            return;
        }
        let b = (((x - self.x0) as f64) / self.width).floor() as usize;
        if b >= self.px {
            return;
        }
        let x0 = self.x0 + (b as f64 * self.width) as i64;
        if self.buckets.last().is_none_or(|l| l.x0 != x0) {
            self.buckets.push(Bucket {
                x0,
                x1: x0,
                min: vec![None; self.metrics],
                max: vec![None; self.metrics],
                last: vec![None; self.metrics],
            });
        }
        let cur = self.buckets.last_mut().expect("pushed");
        cur.x1 = cur.x1.max(x_end);
        for (m, (lo, hi, last)) in vals.iter().enumerate() {
            if let Some(lo) = lo {
                cur.min[m] = Some(cur.min[m].map_or(*lo, |c| c.min(*lo)));
            }
            if let Some(hi) = hi {
                cur.max[m] = Some(cur.max[m].map_or(*hi, |c| c.max(*hi)));
            }
            if last.is_some() {
                cur.last[m] = *last;
            }
        }
    }

    fn json(self, series: &Series, names: &[String], x0_rel: f64, x1_rel: f64) -> Value {
        let rel = |x: i64| (x - series.start) as f64;
        let mut metrics = Map::new();
        for (m, name) in names.iter().enumerate() {
            metrics.insert(
                name.clone(),
                json!({
                    "min": self.buckets.iter().map(|b| b.min[m]).collect::<Vec<_>>(),
                    "max": self.buckets.iter().map(|b| b.max[m]).collect::<Vec<_>>(),
                    "last": self.buckets.iter().map(|b| b.last[m]).collect::<Vec<_>>(),
                }),
            );
        }
        let before: Map<String, Value> = names
            .iter()
            .zip(&self.before)
            .map(|(n, v)| (n.clone(), json!(v)))
            .collect();
        json!({
            "series": series.id,
            "x0": x0_rel,
            "x1": x1_rel,
            "buckets": {
                "x0": self.buckets.iter().map(|b| rel(b.x0)).collect::<Vec<_>>(),
                "x1": self.buckets.iter().map(|b| rel(b.x1.max(b.x0))).collect::<Vec<_>>(),
                "metrics": metrics,
            },
            "before": before,
        })
    }
}

/// Windows holding more rows than this are drawn from `curve_tiles` (200 000;
/// `$MEMQ_SERVE_WINDOW_ROWS` sets another, as the tests do to reach the tiles on small inputs).
fn max_window_rows() -> f64 {
    static ROWS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *ROWS.get_or_init(|| {
        std::env::var("MEMQ_SERVE_WINDOW_ROWS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(200_000.0)
    })
}

/// Tile widths of `snap_timeline_tiles`, in trace entries (finest first), 8 apart: a window is
/// drawn from the widest tiles that still give one per pixel, or from its entries when even
/// the finest would not, so it reads at most 8 rows per pixel.
const SNAP_TILE_WIDTHS: [i64; 6] = [8, 64, 512, 4096, 32_768, 262_144];

/// The series' metrics over [x0, x1) (relative) in at most `px` buckets.
pub async fn timeline(ds: &Dataset, s: &Series, x0: f64, x1: f64, px: usize) -> Result<Value> {
    let (a0, a1) = (s.start + x0.floor() as i64, s.start + x1.ceil() as i64);
    let mut f = Folder::new(a0, a1, px, s.metrics.len());
    match &s.source {
        Source::Trace { points, .. } => {
            let metric_index: Vec<usize> = s
                .metrics
                .iter()
                .map(|m| match m.as_str() {
                    "reserved" => 1,
                    _ => 0,
                })
                .collect();
            let lo = points.xs.partition_point(|x| *x < a0);
            let hi = points.xs.partition_point(|x| *x < a1);
            if lo > 0 {
                let vals: Vec<_> = metric_index
                    .iter()
                    .map(|&m| (None, None, points.values[m][lo - 1]))
                    .collect();
                f.add(points.xs[lo - 1], points.xs[lo - 1], &vals);
            }
            for i in lo..hi {
                let vals: Vec<_> = metric_index
                    .iter()
                    .map(|&m| {
                        let v = points.values[m][i];
                        (v, v, v)
                    })
                    .collect();
                f.add(points.xs[i], points.xs[i], &vals);
            }
        }
        Source::Snapshot {
            snapshot, device, ..
        } => snap_window(ds, s, snapshot, *device, (a0, a1), px, &mut f).await?,
        Source::Memscope {
            source,
            pid,
            device,
            pool,
            rows: n,
            tiles,
        } => {
            let span = (s.x_max_rel - s.x_min_rel).max(1.0);
            let estimate = *n as f64 * (x1 - x0) / span;
            let key = format!(
                "source = $source AND {} AND device = $device AND pool = $pool",
                pid_is(*pid, "")
            );
            let params = [
                ("source", text(source)),
                ("pid", pid.map(int).unwrap_or(ScalarValue::Int64(None))),
                ("device", text(device)),
                ("pool", text(pool)),
                ("t0", int(a0)),
                ("t1", int(a1)),
            ];
            let tiles = tiles
                .get_or_try_init(|| load_tiles(ds, &s.metrics, &key, &params))
                .await?;
            // the first tile that reaches x0
            let first = tiles.ends.partition_point(|te| *te < a0);
            if estimate > max_window_rows() {
                tiles.before(first, &mut f);
                for i in first..tiles.starts.len() {
                    let (t, te) = (tiles.starts[i], tiles.ends[i]);
                    if t >= a1 {
                        break;
                    }
                    let vals: Vec<Fold> = tiles.values.iter().map(|v| v[i]).collect();
                    f.add(t.max(a0), te, &vals);
                }
            } else {
                // the rows from the start of the tile that holds x0 (the value in force at x0
                // is the last of them before it), the tiles before it for the value before
                let from = tiles.starts.get(first).map_or(a0, |t| (*t).min(a0));
                tiles.before(first, &mut f);
                let exprs: Vec<String> = s
                    .metrics
                    .iter()
                    .map(|m| match m.as_str() {
                        "live" => "live_bytes AS live".to_string(),
                        // the tool's counters: negative values are not written values
                        m => format!("CASE WHEN {m} >= 0 THEN {m} END AS {m}"),
                    })
                    .collect();
                let mut p = params.to_vec();
                p.push(("from", int(from)));
                let cols = int_columns(
                    ds,
                    &format!(
                        "SELECT ts, {} FROM curve WHERE {key} AND ts >= $from AND ts < $t1 ORDER BY ts, row_idx",
                        exprs.join(", ")
                    ),
                    &p,
                )
                .await?;
                add_points(&mut f, &cols);
            }
        }
    }
    Ok(f.json(s, &s.metrics, x0, x1))
}

/// Points as [`int_columns`] gives them (x, then one column per metric) into `f`.
fn add_points(f: &mut Folder, cols: &[Vec<Option<i64>>]) {
    let Some(xs) = cols.first() else { return };
    let mut vals: Vec<Fold> = vec![(None, None, None); cols.len() - 1];
    for (i, x) in xs.iter().enumerate() {
        let Some(x) = *x else { continue };
        for (v, c) in vals.iter_mut().zip(&cols[1..]) {
            *v = (c[i], c[i], c[i]);
        }
        f.add(x, x, &vals);
    }
}

impl Tiles {
    /// The value in force before tile `first`: each metric's last value in the tiles before it.
    fn before(&self, first: usize, f: &mut Folder) {
        for (m, v) in self.values.iter().enumerate() {
            if let Some(last) = v[..first].iter().rev().find_map(|x| x.2) {
                f.before[m] = Some(last);
            }
        }
    }
}

/// The folded columns of tiles for `metrics`: `M_min, M_max, M_last` for each.
fn fold_columns(metrics: &[String]) -> String {
    let cols: Vec<String> = metrics
        .iter()
        .map(|m| format!("{m}_min, {m}_max, {m}_last"))
        .collect();
    cols.join(", ")
}

/// Metric `m`'s (min, max, last) in row `i` of columns read as [`fold_columns`] after `first`
/// other columns.
fn fold_at(c: &[Vec<Option<i64>>], first: usize, m: usize, i: usize) -> Fold {
    let at = first + 3 * m;
    (c[at][i], c[at + 1][i], c[at + 2][i])
}

/// The tiles of an msMemScope series (`key` and `params` name it), with the series' metrics.
async fn load_tiles(
    ds: &Dataset,
    metrics: &[String],
    key: &str,
    params: &[(&str, ScalarValue)],
) -> Result<Tiles> {
    let c = int_columns(
        ds,
        &format!(
            "SELECT tile, t_min, t_max, {} FROM curve_tiles WHERE {key} ORDER BY tile",
            fold_columns(metrics)
        ),
        params,
    )
    .await?;
    let mut tiles = Tiles {
        values: vec![Vec::new(); metrics.len()],
        ..Default::default()
    };
    let Some(ks) = c.first() else {
        return Ok(tiles);
    };
    for (i, k) in ks.iter().enumerate() {
        // t_min and t_max of curve_tiles are the series' span, which memscope's tiling cuts
        // into TILES equal tiles; each tile's own bounds follow
        let (Some(k), Some(lo), Some(hi)) = (*k, c[1][i], c[2][i]) else {
            continue;
        };
        let (k, lo, hi) = (k as i128, lo as i128, hi as i128);
        let span = (hi - lo).max(1);
        let n = memq_memscope::derive::tiles::TILES as i128;
        // the times t with (t - lo) * TILES div span == k
        let start = lo + (k * span + n - 1) / n;
        // the last tile also holds t = hi (the tiling clamps it there)
        let end = match k + 1 == n {
            true => hi,
            false => lo + ((k + 1) * span + n - 1) / n - 1,
        };
        tiles.starts.push(start as i64);
        tiles.ends.push(end as i64);
        for (m, v) in tiles.values.iter_mut().enumerate() {
            v.push(fold_at(&c, 3, m, i));
        }
    }
    Ok(tiles)
}

/// A snapshot device's curve over entries [a0, a1) into `f`: from the tiles of the widest width
/// giving one per pixel, else from the entries themselves.
async fn snap_window(
    ds: &Dataset,
    s: &Series,
    snapshot: &str,
    device: i64,
    (a0, a1): (i64, i64),
    px: usize,
    f: &mut Folder,
) -> Result<()> {
    let entries = (a1 - a0).max(1);
    let width = SNAP_TILE_WIDTHS
        .iter()
        .rev()
        .find(|w| entries / **w >= px.max(1) as i64)
        .copied();
    let mut params = vec![("snapshot", text(snapshot)), ("device", int(device))];
    match width {
        Some(w) => {
            // the tile before the window gives the value in force at a0
            params.push(("k0", int(a0.div_euclid(w) - 1)));
            params.push(("k1", int((a1 - 1).div_euclid(w))));
            params.push(("width", int(w)));
            let c = int_columns(
                ds,
                &format!(
                    "SELECT seq_min, seq_max, {} FROM snap_timeline_tiles \
                     WHERE snapshot = $snapshot AND device = $device AND width = $width \
                       AND tile BETWEEN $k0 AND $k1 ORDER BY tile",
                    fold_columns(&s.metrics)
                ),
                &params,
            )
            .await?;
            let Some(starts) = c.first() else {
                return Ok(());
            };
            let mut vals: Vec<Fold> = vec![(None, None, None); s.metrics.len()];
            for (i, t) in starts.iter().enumerate() {
                let (Some(t), Some(te)) = (*t, c[1][i]) else {
                    continue;
                };
                for (m, v) in vals.iter_mut().enumerate() {
                    *v = fold_at(&c, 2, m, i);
                }
                if te < a0 {
                    f.add(a0 - 1, te, &vals);
                } else {
                    f.add(t.max(a0), te, &vals);
                }
            }
        }
        None => {
            // from the entry before the window: the value in force at a0
            params.push(("from", int(a0 - 1)));
            params.push(("t1", int(a1)));
            let names: Vec<String> = s.metrics.iter().map(|m| format!("{m}_bytes")).collect();
            let c = int_columns(
                ds,
                &format!(
                    "SELECT seq, {} FROM snap_timeline_points \
                     WHERE snapshot = $snapshot AND device = $device AND seq >= $from AND seq < $t1 \
                     ORDER BY seq",
                    names.join(", ")
                ),
                &params,
            )
            .await?;
            add_points(f, &c);
        }
    }
    Ok(())
}

fn grouped(rows: impl Iterator<Item = (String, i64)>, top: usize) -> Value {
    let mut by: std::collections::HashMap<String, (i64, i64)> = Default::default();
    for (k, b) in rows {
        let e = by.entry(k).or_default();
        e.0 += b;
        e.1 += 1;
    }
    let mut v: Vec<_> = by.into_iter().collect();
    v.sort_by(|a, z| z.1 .0.cmp(&a.1 .0).then(a.0.cmp(&z.0)));
    json!(v
        .into_iter()
        .take(top)
        .map(|(name, (bytes, blocks))| json!({"name": name, "bytes": bytes, "blocks": blocks}))
        .collect::<Vec<_>>())
}

fn hex(v: Option<i64>) -> String {
    v.map(|p| format!("0x{:016x}", p as u64))
        .unwrap_or_default()
}

/// The state at x (relative): bytes by owner, frame and category, the largest live blocks,
/// and for a snapshot its segments.
pub async fn moment(ds: &Dataset, s: &Series, x: f64, marks: &[Value]) -> Result<Value> {
    let at = s.start + x.round() as i64;
    let rel = |v: Option<i64>| v.map(|t| (t - s.start) as f64);
    // the step the moment falls in: the last step mark of the series at or before it
    let step = marks
        .iter()
        .filter(|m| m["series"] == s.id.as_str() && m["kind"] == "step")
        .filter(|m| m["x_rel"].as_f64().is_some_and(|mx| mx <= x))
        .max_by(|a, z| {
            a["x_rel"]
                .as_f64()
                .partial_cmp(&z["x_rel"].as_f64())
                .unwrap_or(std::cmp::Ordering::Equal)
        })
        .and_then(|m| m["label"].as_str());
    let label = match step {
        Some(step) => format!("{}, {step}", s.x_label(x)),
        None => s.x_label(x),
    };
    let mut out = json!({"series": s.id, "x_rel": x, "label": label});
    match &s.source {
        Source::Memscope {
            source,
            pid,
            device,
            pool,
            ..
        } => {
            let r = rows(
                ds,
                &format!(
                    "SELECT kind, owner, bytes, blocks, ptr, alloc_ts, category, user_frame \
                     FROM mem_state_at($at, $pool) \
                     WHERE source = $source AND {} AND device = $device",
                    pid_is(*pid, "")
                ),
                &[
                    ("at", text(&at.to_string())),
                    ("pool", text(pool)),
                    ("source", text(source)),
                    ("pid", pid.map(int).unwrap_or(ScalarValue::Int64(None))),
                    ("device", text(device)),
                ],
            )
            .await?;
            let blocks: Vec<_> = r.iter().filter(|r| r.s("kind") == "block").collect();
            let mut top = blocks.clone();
            top.sort_by_key(|r| std::cmp::Reverse(r.i64("bytes").unwrap_or(0)));
            out["total_bytes"] = json!(r
                .iter()
                .find(|r| r.s("kind") == "pool")
                .and_then(|r| r.i64("bytes")));
            out["by_owner"] = grouped(
                r.iter()
                    .filter(|r| r.s("kind") == "owner")
                    .map(|r| (r.s("owner"), r.i64("bytes").unwrap_or(0))),
                50,
            );
            out["by_frame"] = grouped(
                blocks.iter().map(|r| {
                    (
                        r.str("user_frame")
                            .unwrap_or("(no Python frame)")
                            .to_string(),
                        r.i64("bytes").unwrap_or(0),
                    )
                }),
                50,
            );
            out["by_category"] = grouped(
                blocks.iter().map(|r| {
                    (
                        r.str("category").unwrap_or("(none)").to_string(),
                        r.i64("bytes").unwrap_or(0),
                    )
                }),
                50,
            );
            out["blocks"] = json!(top
                .iter()
                .take(50)
                .map(|r| live_block(
                    format!(
                        "{}@{}",
                        r.i64("ptr").unwrap_or(0),
                        r.i64("alloc_ts").unwrap_or(0)
                    ),
                    hex(r.i64("ptr")),
                    r.i64("bytes"),
                    r.str("owner"),
                    r.str("user_frame"),
                    rel(r.i64("alloc_ts")),
                    None
                ))
                .collect::<Vec<_>>());
            out["segments"] = json!([]);
        }
        Source::Snapshot {
            snapshot, device, ..
        } => {
            let r = rows(
                ds,
                "SELECT kind, address, size, requested_size, state, user_frame, stack_id, allocated_bytes, free_bytes \
                 FROM state_at($seq, $snapshot, $device) ORDER BY address",
                &[("seq", int(at)), ("snapshot", text(snapshot)), ("device", int(*device))],
            )
            .await?;
            let blocks: Vec<_> = r.iter().filter(|r| r.s("kind") == "block").collect();
            let mut top = blocks.clone();
            top.sort_by_key(|r| std::cmp::Reverse(r.i64("size").unwrap_or(0)));
            // requested bytes, as the active curve counts them (a block's size is rounded up)
            let requested =
                |r: &crate::report::Row| r.i64("requested_size").or(r.i64("size")).unwrap_or(0);
            out["total_bytes"] = json!(blocks.iter().map(&requested).sum::<i64>());
            out["by_owner"] = json!([]);
            let frame = |r: &crate::report::Row| {
                r.str("user_frame").unwrap_or("(no user frame)").to_string()
            };
            out["by_frame"] = grouped(blocks.iter().map(|r| (frame(r), requested(r))), 50);
            out["by_category"] = grouped(blocks.iter().map(|r| (r.s("state"), requested(r))), 10);
            out["blocks"] = json!(top
                .iter()
                .take(50)
                .map(|r| live_block(
                    format!(
                        "{}@{}@{at}",
                        r.i64("address").unwrap_or(0),
                        r.i64("stack_id").unwrap_or(-1)
                    ),
                    hex(r.i64("address")),
                    r.i64("size"),
                    None,
                    r.str("user_frame"),
                    None,
                    None
                ))
                .collect::<Vec<_>>());
            out["segments"] = json!(r
                .iter()
                .filter(|r| r.s("kind") == "segment")
                .map(|r| json!({
                    "address": hex(r.i64("address")),
                    "size": r.i64("size"),
                    "allocated": r.i64("allocated_bytes"),
                    "free": r.i64("free_bytes"),
                }))
                .collect::<Vec<_>>());
        }
        Source::Trace { source, device, .. } => {
            // live allocations at the moment: each alloc whose next event at its address is
            // not a free at or before it
            let r = rows(
                ds,
                "WITH e AS (SELECT addr, ts, event, bytes, op, \
                   LEAD(ts) OVER (PARTITION BY addr ORDER BY ts, event) AS next_ts, \
                   LEAD(bytes) OVER (PARTITION BY addr ORDER BY ts, event) AS next_bytes \
                   FROM trace_memory WHERE source = $source AND device = $device) \
                 SELECT addr, bytes, op, ts, CASE WHEN next_bytes < 0 THEN next_ts END AS free_ts FROM e \
                 WHERE bytes > 0 AND ts <= $at AND (next_ts IS NULL OR next_ts > $at OR next_bytes > 0)",
                &[("source", text(source)), ("device", text(device)), ("at", int(at))],
            )
            .await?;
            let mut top: Vec<_> = r.iter().collect();
            top.sort_by_key(|r| std::cmp::Reverse(r.i64("bytes").unwrap_or(0)));
            out["total_bytes"] = json!(r.iter().filter_map(|r| r.i64("bytes")).sum::<i64>());
            out["by_owner"] = grouped(
                r.iter().map(|r| {
                    (
                        r.str("op").unwrap_or("(no op)").to_string(),
                        r.i64("bytes").unwrap_or(0),
                    )
                }),
                50,
            );
            out["by_frame"] = json!([]);
            out["by_category"] = json!([]);
            out["blocks"] = json!(top
                .iter()
                .take(50)
                .map(|r| live_block(
                    format!(
                        "{}@{}",
                        r.i64("addr").unwrap_or(0),
                        r.i64("ts").unwrap_or(0)
                    ),
                    hex(r.i64("addr")),
                    r.i64("bytes"),
                    r.str("op"),
                    None,
                    rel(r.i64("ts")),
                    rel(r.i64("free_ts"))
                ))
                .collect::<Vec<_>>());
            out["segments"] = json!([]);
        }
    }
    Ok(out)
}

/// A live block as the moment lists it.
fn live_block(
    id: String,
    ptr: String,
    size: Option<i64>,
    owner: Option<&str>,
    frame: Option<&str>,
    alloc_x_rel: Option<f64>,
    free_x_rel: Option<f64>,
) -> Value {
    json!({
        "id": id, "ptr": ptr, "size": size, "owner": owner, "frame": frame,
        "alloc_x_rel": alloc_x_rel, "free_x_rel": free_x_rel,
    })
}

fn lines(stack: Option<&str>) -> Vec<String> {
    stack
        .filter(|s| !s.is_empty() && *s != "NA")
        .map(|s| {
            s.lines()
                .map(|l| l.trim().to_string())
                .filter(|l| !l.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// A block by the id a moment gave it: lifetime, size, owner and stacks.
pub async fn block(ds: &Dataset, s: &Series, id: &str) -> Result<Option<Value>> {
    let bad = || MemqError::Usage(format!("block id {id:?}: not one this server gave"));
    let mut parts = id.split('@').map(|p| p.parse::<i64>().map_err(|_| bad()));
    let a = parts.next().ok_or_else(bad)??;
    let b = parts.next().ok_or_else(bad)??;
    // a snapshot block's id also names the entry of the moment it was seen at
    let seq = parts.next().transpose()?;
    let rel = |v: Option<i64>| v.map(|t| (t - s.start) as f64);
    match &s.source {
        Source::Memscope {
            source,
            pid,
            device,
            ..
        } => {
            let params = [
                ("source", text(source)),
                ("pid", pid.map(int).unwrap_or(ScalarValue::Int64(None))),
                ("device", text(device)),
                ("ptr", ScalarValue::UInt64(Some(a as u64))),
                ("t", int(b)),
            ];
            let r = rows(
                ds,
                &format!(
                    "SELECT b.ptr, b.size, b.owner, b.alloc_ts, b.free_ts, b.end_ts, b.stack_py, b.fate, e.stack_py AS free_stack \
                     FROM blocks b LEFT JOIN events e ON e.source = b.source AND e.row_idx = b.free_row \
                     WHERE b.source = $source AND {} AND b.device = $device \
                       AND b.ptr = $ptr AND b.alloc_ts = $t LIMIT 1",
                    pid_is(*pid, "b.")
                ),
                &params,
            )
            .await?;
            Ok(r.first().map(|r| {
                let (t0, t1) = (r.i64("alloc_ts"), r.i64("free_ts"));
                json!({
                    "id": id,
                    "ptr": hex(r.i64("ptr")),
                    "size": r.i64("size"),
                    "owner": r.str("owner"),
                    "alloc_x_rel": rel(t0),
                    "free_x_rel": rel(t1),
                    "lifetime": match (t0, t1) {
                        (Some(a), Some(z)) => Some(fmt_dur_ns(z - a)),
                        _ => Some(format!("not freed in the dump ({})", r.s("fate"))),
                    },
                    "alloc_stack": lines(r.str("stack_py")),
                    "free_stack": lines(r.str("free_stack")),
                })
            }))
        }
        Source::Snapshot {
            snapshot, device, ..
        } => {
            let seen =
                match seq {
                    Some(seq) => rows(
                        ds,
                        "SELECT size, state, user_frame FROM state_at($seq, $snapshot, $device) \
                     WHERE kind = 'block' AND address = $address LIMIT 1",
                        &[
                            ("seq", int(seq)),
                            ("snapshot", text(snapshot)),
                            ("device", int(*device)),
                            ("address", ScalarValue::UInt64(Some(a as u64))),
                        ],
                    )
                    .await?,
                    None => Rows::default(),
                };
            let seen = seen.first();
            let frames = rows(
                ds,
                "SELECT name, filename, line FROM snap_frames WHERE snapshot = $snapshot AND stack_id = $id ORDER BY depth",
                &[("snapshot", text(snapshot)), ("id", int(b))],
            )
            .await?;
            Ok(Some(json!({
                "id": id,
                "ptr": hex(Some(a)),
                "size": seen.and_then(|r| r.i64("size")),
                "owner": seen.and_then(|r| r.str("user_frame")),
                "state": seen.map(|r| r.s("state")),
                "alloc_x_rel": null,
                "free_x_rel": null,
                "lifetime": null,
                "alloc_stack": frames.iter().map(|f| format!("{}:{} {}", f.s("filename"), f.s("line"), f.s("name"))).collect::<Vec<_>>(),
                "free_stack": Vec::<String>::new(),
            })))
        }
        Source::Trace { source, device, .. } => {
            let r = rows(
                ds,
                "SELECT addr, bytes, op, ts FROM trace_memory WHERE source = $source AND device = $device AND addr = $addr AND ts = $ts LIMIT 1",
                &[("source", text(source)), ("device", text(device)), ("addr", int(a)), ("ts", int(b))],
            )
            .await?;
            Ok(r.first().map(|r| {
                json!({
                    "id": id,
                    "ptr": hex(r.i64("addr")),
                    "size": r.i64("bytes"),
                    "owner": r.str("op"),
                    "alloc_x_rel": rel(r.i64("ts")),
                    "free_x_rel": null,
                    "lifetime": null,
                    "alloc_stack": r.str("op").map(|o| vec![o.to_string()]).unwrap_or_default(),
                    "free_stack": Vec::<String>::new(),
                })
            }))
        }
    }
}

/// The report's verdict and findings, each with the moment its evidence names.
pub async fn findings(s: &Served) -> Result<Value> {
    let report = s.ds.report(&Default::default()).await?;
    let moment = |e: &Map<String, Value>| -> Option<Value> {
        let dev = e.get("device").map(|d| match d {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })?;
        for x in &s.series {
            let hit = match &x.source {
                Source::Memscope { device, pool, .. } => {
                    &dev == device
                        && e.get("pool")
                            .and_then(Value::as_str)
                            .is_none_or(|p| p == pool)
                }
                Source::Snapshot {
                    snapshot, device, ..
                } => {
                    dev == device.to_string()
                        && e.get("snapshot")
                            .and_then(Value::as_str)
                            .is_some_and(|n| n == snapshot)
                }
                Source::Trace { device, .. } => &dev == device,
            };
            if !hit {
                continue;
            }
            let at = ["peak_ts", "oom_ts", "active_peak_seq", "seq"]
                .iter()
                .find_map(|k| e.get(*k).and_then(Value::as_i64))?;
            return Some(json!({"series": x.id, "x_rel": (at - x.start) as f64}));
        }
        None
    };
    Ok(json!({
        "verdict": {
            "severity": report.verdict.severity.as_str(),
            "summary": report.verdict.summary,
            "actions": report.verdict.actions,
        },
        "findings": report.findings.iter().map(|f| json!({
            "kind": f.kind,
            "severity": f.severity.as_str(),
            "title": f.title,
            "problem": f.problem,
            "evidence": f.evidence_text,
            "advice": f.advice,
            "moment": moment(&f.evidence),
        })).collect::<Vec<_>>(),
        "peak": fmt_bytes(report.metrics.peak_bytes.unwrap_or(0)),
    }))
}
