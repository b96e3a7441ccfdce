//! Tables `curve_tiles` and `curve_peaks`: each series of `curve` summarised as the rows go
//! by, so that the analyses that fold a whole series (`curve_buckets`, `peaks`, the report's
//! charts) read a few thousand rows instead of every row (design.md §9).
//!
//! A series (source, pid, device, pool) runs from its first to its last row with a time,
//! `t_min` to `t_max`; its span `max(t_max - t_min, 1)` is cut into [`TILES`] equal tiles, a
//! row with time `ts` falling in tile `min((ts - t_min) * TILES div span, TILES - 1)` (in
//! 128-bit arithmetic: exact for any span). For every `n` that divides [`TILES`], the
//! `curve_buckets(n)` bucket of a row is its tile `div (TILES / n)`:
//! `floor(floor(x * T / s) / (T / n)) = floor(x * n / s)` for positive integers. So the
//! buckets are folded from the tiles exactly; `curve_buckets` reads the rows for any other `n`.
//!
//! `curve_peaks` is the answer of view `peaks`: per series and metric, the highest valid value
//! (counters `>= 0`; `live` is `curve.live_bytes`) and the first row reaching it. The rows of a
//! series reach [`Summaries::scan`] in the curve's order (time, NULL times last, then
//! `row_idx`), so "first" is the first seen.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Int64Array, Int64Builder, StringArray, StringBuilder,
};
use datafusion::arrow::datatypes::Int64Type;
use datafusion::arrow::record_batch::RecordBatch;

use memq_core::catalog::TableDef;
use memq_core::dataset::ParquetSink;
use memq_core::error::Result;

use crate::schema;

/// Tiles per series: 20 160 = 2^6 · 3^2 · 5 · 7, divisible by every n up to 10 and by 12, 14,
/// 15, 16, 18, 20, 24, 28, 30, 32, 35, 36, 40, ..., 240, 280, 288, 315, 320, 336, 360, ...
pub const TILES: i64 = 20_160;

/// The metrics, in the order of the tile columns.
pub const METRICS: [&str; 5] = ["used", "total", "process_used", "device_used", "live"];

type Series = (Option<i64>, String, String);

/// One metric's values in a tile.
#[derive(Clone, Copy, Default)]
struct Fold {
    points: i64,
    first: i64,
    last: i64,
    min: i64,
    max: i64,
}

impl Fold {
    fn add(&mut self, v: i64) {
        if self.points == 0 {
            *self = Fold {
                points: 1,
                first: v,
                last: v,
                min: v,
                max: v,
            };
        } else {
            self.points += 1;
            self.last = v;
            self.min = self.min.min(v);
            self.max = self.max.max(v);
        }
    }
}

/// A metric's peak so far: the value and the first row holding it.
#[derive(Clone, Default)]
struct Peak {
    points: i64,
    value: i64,
    ts: Option<i64>,
    ts_raw: Option<i64>,
    event: String,
    id: i64,
}

/// The state of one series.
struct State {
    range: Option<(i64, i64)>,
    /// The tile being filled and its folds.
    tile: Option<(i64, [Fold; 5])>,
    peaks: [Peak; 5],
}

/// The tiles and peaks of one source's curve, written as the curve is.
pub struct Summaries {
    source: String,
    ranges: HashMap<Series, (i64, i64)>,
    current: Option<(Series, State)>,
    others: HashMap<Series, State>,
    tiles: ParquetSink,
    rows: TileRows,
    peaks_out: std::path::PathBuf,
}

/// Tile rows waiting to be written.
#[derive(Default)]
struct TileRows {
    keys: Vec<(Series, i64, (i64, i64))>,
    folds: Vec<[Fold; 5]>,
}

const TILE_BATCH: usize = 64 * 1024;

impl Summaries {
    /// Tiles go to `tiles_out`, peaks to `peaks_out`; `ranges` are the series' time ranges.
    pub fn create(
        source: &str,
        ranges: HashMap<Series, (i64, i64)>,
        tiles_out: &Path,
        peaks_out: &Path,
        properties: impl Fn(&TableDef) -> datafusion::parquet::file::properties::WriterProperties,
    ) -> Result<Summaries> {
        let def = schema::curve_tiles();
        Ok(Summaries {
            source: source.to_string(),
            ranges,
            current: None,
            others: HashMap::new(),
            tiles: ParquetSink::create_with(tiles_out, def.schema(), properties(&def))?,
            rows: TileRows::default(),
            peaks_out: peaks_out.to_path_buf(),
        })
    }

    /// The state of series (pid, device, pool), made current.
    fn state(&mut self, pid: Option<i64>, device: &str, pool: &str) -> (&Series, &mut State) {
        let same =
            matches!(&self.current, Some((s, _)) if s.0 == pid && s.1 == device && s.2 == pool);
        if !same {
            if let Some((s, st)) = self.current.take() {
                self.others.insert(s, st);
            }
            let key: Series = (pid, device.to_string(), pool.to_string());
            let st = self.others.remove(&key).unwrap_or_else(|| State {
                range: self.ranges.get(&key).copied(),
                tile: None,
                peaks: Default::default(),
            });
            self.current = Some((key, st));
        }
        match &mut self.current {
            Some((s, st)) => (&*s, st),
            None => unreachable!("made current above"),
        }
    }

    /// Folds a batch of staging rows (their curve columns) with each row's live bytes.
    pub fn scan(&mut self, batch: &RecordBatch, live: &[i64]) -> Result<()> {
        let pid = batch.column(0).as_primitive::<Int64Type>();
        let device = batch.column(1).as_string::<i32>();
        let pool = batch.column(2).as_string::<i32>();
        let ts = batch.column(3).as_primitive::<Int64Type>();
        let ts_raw = batch.column(4).as_primitive::<Int64Type>();
        let id = batch.column(6).as_primitive::<Int64Type>();
        let event = batch.column(7).as_string::<i32>();
        let counters = [9, 10, 11, 12].map(|c| batch.column(c).as_primitive::<Int64Type>());
        let opt = |a: &Int64Array, i: usize| a.is_valid(i).then(|| a.value(i));
        let mut closed: Vec<(Series, i64, (i64, i64), [Fold; 5])> = Vec::new();
        for i in 0..batch.num_rows() {
            let values: [Option<i64>; 5] = [
                opt(counters[0], i),
                opt(counters[1], i),
                opt(counters[2], i),
                opt(counters[3], i),
                Some(live[i]),
            ]
            .map(|v| v.filter(|&v| v >= 0));
            let t = opt(ts, i);
            let (series, st) = self.state(opt(pid, i), device.value(i), pool.value(i));
            for (m, v) in values.iter().enumerate() {
                let Some(v) = *v else { continue };
                let p = &mut st.peaks[m];
                p.points += 1;
                if p.points == 1 || v > p.value {
                    *p = Peak {
                        points: p.points,
                        value: v,
                        ts: t,
                        ts_raw: opt(ts_raw, i),
                        event: event.value(i).to_string(),
                        id: id.value(i),
                    };
                }
            }
            let (Some(t), Some((lo, hi))) = (t, st.range) else {
                continue;
            };
            let span = (hi - lo).max(1) as i128;
            let tile = (((t - lo) as i128 * TILES as i128) / span).min(TILES as i128 - 1) as i64;
            // times never go back within a series: a new tile closes the one before
            if let Some((k, folds)) = st.tile.take_if(|(k, _)| *k != tile) {
                closed.push((series.clone(), k, (lo, hi), folds));
            }
            let entry = st.tile.get_or_insert((tile, [Fold::default(); 5]));
            for (m, v) in values.iter().enumerate() {
                if let Some(v) = *v {
                    entry.1[m].add(v);
                }
            }
        }
        for (s, k, r, f) in closed {
            self.rows.keys.push((s, k, r));
            self.rows.folds.push(f);
        }
        if self.rows.keys.len() >= TILE_BATCH {
            self.write_tiles()?;
        }
        Ok(())
    }

    fn write_tiles(&mut self) -> Result<()> {
        let rows = std::mem::take(&mut self.rows);
        if rows.keys.is_empty() {
            return Ok(());
        }
        let n = rows.keys.len();
        let mut pid = Int64Builder::with_capacity(n);
        let mut device = StringBuilder::with_capacity(n, 0);
        let mut pool = StringBuilder::with_capacity(n, 0);
        for ((p, d, pl), _, _) in &rows.keys {
            pid.append_option(*p);
            device.append_value(d);
            pool.append_value(pl);
        }
        let ints = |f: &dyn Fn(usize) -> i64| -> ArrayRef {
            Arc::new((0..n).map(f).collect::<Int64Array>())
        };
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec![self.source.as_str(); n])),
            Arc::new(pid.finish()),
            Arc::new(device.finish()),
            Arc::new(pool.finish()),
            ints(&|i| rows.keys[i].1),
            ints(&|i| rows.keys[i].2 .0),
            ints(&|i| rows.keys[i].2 .1),
        ];
        for m in 0..METRICS.len() {
            let folds = &rows.folds;
            let valued = |f: &dyn Fn(&Fold) -> i64| -> ArrayRef {
                Arc::new(
                    (0..n)
                        .map(|i| (folds[i][m].points > 0).then(|| f(&folds[i][m])))
                        .collect::<Int64Array>(),
                )
            };
            columns.push(ints(&|i| folds[i][m].points));
            columns.push(valued(&|f| f.first));
            columns.push(valued(&|f| f.last));
            columns.push(valued(&|f| f.min));
            columns.push(valued(&|f| f.max));
        }
        self.tiles.write(&RecordBatch::try_new(
            schema::curve_tiles().schema(),
            columns,
        )?)
    }

    /// Writes the last tiles and the peaks; returns the rows of both tables.
    pub fn close(
        mut self,
        properties: impl Fn(&TableDef) -> datafusion::parquet::file::properties::WriterProperties,
    ) -> Result<(u64, u64)> {
        let mut states: Vec<(Series, State)> = self.others.drain().collect();
        states.extend(self.current.take());
        // the table's order: pid (NULLs last), device, pool
        states.sort_by(|a, b| {
            let k = |s: &Series| (s.0.is_none(), s.0, s.1.clone(), s.2.clone());
            k(&a.0).cmp(&k(&b.0))
        });
        for (s, st) in &mut states {
            if let (Some((k, folds)), Some(range)) = (st.tile.take(), st.range) {
                self.rows.keys.push((s.clone(), k, range));
                self.rows.folds.push(folds);
            }
        }
        self.write_tiles()?;
        let tiles = self.tiles.close()?;
        let def = schema::curve_peaks();
        let mut sink = ParquetSink::create_with(&self.peaks_out, def.schema(), properties(&def))?;
        let mut source = StringBuilder::new();
        let mut pid = Int64Builder::new();
        let mut device = StringBuilder::new();
        let mut pool = StringBuilder::new();
        let mut metric = StringBuilder::new();
        let mut peak_bytes = Int64Builder::new();
        let mut peak_ts = Int64Builder::new();
        let mut peak_ts_raw = Int64Builder::new();
        let mut peak_event = StringBuilder::new();
        let mut peak_id = Int64Builder::new();
        let mut points = Int64Builder::new();
        for ((p, d, pl), st) in &states {
            for (m, peak) in st.peaks.iter().enumerate() {
                if peak.points == 0 {
                    continue;
                }
                source.append_value(&self.source);
                pid.append_option(*p);
                device.append_value(d);
                pool.append_value(pl);
                metric.append_value(METRICS[m]);
                peak_bytes.append_value(peak.value);
                peak_ts.append_option(peak.ts);
                peak_ts_raw.append_option(peak.ts_raw);
                peak_event.append_value(&peak.event);
                peak_id.append_value(peak.id);
                points.append_value(peak.points);
            }
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(source.finish()),
            Arc::new(pid.finish()),
            Arc::new(device.finish()),
            Arc::new(pool.finish()),
            Arc::new(metric.finish()),
            Arc::new(peak_bytes.finish()),
            Arc::new(peak_ts.finish()),
            Arc::new(peak_ts_raw.finish()),
            Arc::new(peak_event.finish()),
            Arc::new(peak_id.finish()),
            Arc::new(points.finish()),
        ];
        sink.write(&RecordBatch::try_new(def.schema(), columns)?)?;
        Ok((tiles, sink.close()?))
    }
}
