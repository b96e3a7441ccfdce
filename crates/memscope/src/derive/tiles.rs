//! Tables `curve_tiles`, `usage_tiles`, `step_usage` and `curve_peaks`: each series of `curve`
//! summarised as the rows go by, so that the analyses that fold a whole series
//! (`curve_buckets`, `trend`, `step_peaks`, `peaks`, the report's charts) read a few thousand
//! rows instead of every row (docs/performance.md, "What is computed once, at ingest").
//!
//! A series (source, pid, device, pool) runs from its first to its last row with a time,
//! `t_min` to `t_max`; its span `max(t_max - t_min, 1)` is cut into [`TILES`] equal tiles, a
//! row with time `ts` falling in tile `min((ts - t_min) * TILES div span, TILES - 1)` (in
//! 128-bit arithmetic: exact for any span). For every `n` that divides [`TILES`], the
//! `curve_buckets(n)` bucket of a row is its tile `div (TILES / n)`:
//! `floor(floor(x * T / s) / (T / n)) = floor(x * n / s)` for positive integers. So the
//! buckets are folded from the tiles exactly; `curve_buckets` reads the rows for any other `n`.
//! `usage_tiles` does the same for the points of view `usage_series` over the span of their
//! `used >= 0` values (what `trend` buckets); points outside it fall in the first or last tile,
//! as `trend` clamps them. `step_usage` folds the same points per step interval
//! (`curve.step_k`), and `step_levels` is what view `step_peaks` makes of those intervals and
//! the steps of the series' process and device (its answer, found once at ingest).
//!
//! `curve_peaks` is the answer of view `peaks`: per series and metric, the highest valid value
//! (counters `>= 0`; `live` is `curve.live_bytes`) and the first row reaching it. The rows of a
//! series reach [`Summaries::scan`] in the curve's order (time, NULL times last, then
//! `row_idx`), so "first" is the first seen and "last" the last seen.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, Int64Array, Int64Builder, StringArray, StringBuilder, UInt32Array,
};
use datafusion::arrow::record_batch::RecordBatch;

use datafusion::parquet::file::properties::WriterProperties;
use memq_core::catalog::TableDef;
use memq_core::dataset::ParquetSink;
use memq_core::error::Result;

use crate::derive::series::{opt, series_order, Series, SeriesMap, StagingCols};
use crate::derive::steps::{Step, StepIndex};
use crate::schema;

/// Tiles per series: 20 160 = 2^6 · 3^2 · 5 · 7, divisible by every n up to 10 and by 12, 14,
/// 15, 16, 18, 20, 24, 28, 30, 32, 35, 36, 40, ..., 240, 280, 288, 315, 320, 336, 360, ...
pub const TILES: i64 = 20_160;

/// The metrics, in the order of the tile columns.
pub const METRICS: [&str; 5] = ["used", "total", "process_used", "device_used", "live"];

/// A series' time ranges: of its rows with a time (`curve_tiles`), and of its usage points
/// with a value >= 0 (`usage_tiles`, view usage_series: `used`, for HAL the live bytes of the
/// rows that change a block's bytes).
#[derive(Clone, Copy, Default, Debug)]
pub struct Ranges {
    pub curve: Option<(i64, i64)>,
    pub usage: Option<(i64, i64)>,
}

/// The tile of time `t` in `range`: `(t - lo) * TILES div span`, clamped to the tiles.
fn tile_of(t: i64, (lo, hi): (i64, i64)) -> i64 {
    let span = (hi as i128 - lo as i128).max(1);
    let tile = ((t as i128 - lo as i128) * TILES as i128).div_euclid(span);
    tile.clamp(0, TILES as i128 - 1) as i64
}

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

    fn get(&self, f: fn(&Fold) -> i64) -> Option<i64> {
        (self.points > 0).then(|| f(self))
    }
}

/// A usage tile: every usage point counts; `used` (>= 0) folded, `total`'s last (>= 0).
#[derive(Clone, Copy, Default)]
struct UsageFold {
    points: i64,
    used: Fold,
    total: Fold,
}

/// A step interval of a usage series (view step_peaks): from the start of step k (curve.step_k)
/// to the start of the next; the values of the rows inside the step (curve.step set) apart.
#[derive(Clone, Copy, Default)]
struct StepFold {
    points: i64,
    max_used: Option<i64>,
    max_ts: Option<i64>,
    last_inside: Option<i64>,
    last_value: i64,
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

/// The state of one series: the tiles being filled, the peaks so far.
struct State {
    ranges: Ranges,
    tile: Option<(i64, [Fold; 5])>,
    usage: Option<(i64, UsageFold)>,
    step: Option<(i64, StepFold)>,
    peaks: [Peak; 5],
}

/// Closed tiles (or steps) waiting to be written, with their series, key and (for the tile
/// tables) the series' range, written after the key.
struct Pending<F> {
    rows: Vec<(Series, i64, Option<(i64, i64)>, F)>,
    sink: ParquetSink,
}

impl<F> Pending<F> {
    fn create(def: &TableDef, out: &Path, properties: Properties) -> Result<Pending<F>> {
        Ok(Pending {
            rows: Vec::new(),
            sink: ParquetSink::create_with(out, def.schema(), properties(def))?,
        })
    }

    fn push(&mut self, series: &Series, tile: Option<(i64, F)>, range: Option<(i64, i64)>) {
        if let Some((k, f)) = tile {
            self.rows.push((series.clone(), k, range, f));
        }
    }

    /// Writes the rows: the key columns, then `values(fold)`.
    fn write(
        &mut self,
        source: &str,
        def: &TableDef,
        values: impl Fn(&[&F]) -> Vec<ArrayRef>,
    ) -> Result<()> {
        let rows = std::mem::take(&mut self.rows);
        if rows.is_empty() {
            return Ok(());
        }
        let n = rows.len();
        let mut pid = Int64Builder::with_capacity(n);
        let mut device = StringBuilder::with_capacity(n, 0);
        let mut pool = StringBuilder::with_capacity(n, 0);
        for ((p, d, pl), ..) in &rows {
            pid.append_option(*p);
            device.append_value(d);
            pool.append_value(pl);
        }
        let ints = |f: &dyn Fn(usize) -> Option<i64>| -> ArrayRef {
            Arc::new((0..n).map(f).collect::<Int64Array>())
        };
        let mut columns: Vec<ArrayRef> = vec![
            crate::schema::source_column(source, n),
            Arc::new(pid.finish()),
            Arc::new(device.finish()),
            Arc::new(pool.finish()),
            ints(&|i| Some(rows[i].1)),
        ];
        if rows[0].2.is_some() {
            columns.push(ints(&|i| rows[i].2.map(|r| r.0)));
            columns.push(ints(&|i| rows[i].2.map(|r| r.1)));
        }
        let folds: Vec<&F> = rows.iter().map(|r| &r.3).collect();
        columns.extend(values(&folds));
        self.sink
            .write(&RecordBatch::try_new(def.schema(), columns)?)
    }
}

/// A column of `f` over `folds`.
fn column<F>(folds: &[&F], f: impl Fn(&F) -> Option<i64>) -> ArrayRef {
    Arc::new(folds.iter().map(|x| f(x)).collect::<Int64Array>())
}

/// The tables filled tile by tile (or step by step).
struct Tables {
    tiles: Pending<[Fold; 5]>,
    usage: Pending<UsageFold>,
    steps: Pending<StepFold>,
    /// Every step interval of every series, kept for `step_levels` (as many as `step_usage`
    /// rows: a few per step and pool).
    levels: HashMap<Series, Vec<(i64, StepFold)>>,
}

impl Tables {
    /// Closes the tiles `st` has open.
    fn close_open(&mut self, s: &Series, st: &mut State) {
        self.tiles.push(s, st.tile.take(), st.ranges.curve);
        self.usage.push(s, st.usage.take(), st.ranges.usage);
        self.push_step(s, st.step.take());
    }

    /// A closed step interval of series `s`.
    fn push_step(&mut self, s: &Series, step: Option<(i64, StepFold)>) {
        if let Some(interval) = step {
            match self.levels.get_mut(s) {
                Some(list) => list.push(interval),
                None => {
                    self.levels.insert(s.clone(), vec![interval]);
                }
            }
        }
        self.steps.push(s, step, None);
    }

    fn pending(&self) -> usize {
        self.tiles.rows.len() + self.usage.rows.len() + self.steps.rows.len()
    }

    fn write(&mut self, source: &str) -> Result<()> {
        self.tiles.write(source, &schema::curve_tiles(), |folds| {
            let mut columns = Vec::new();
            for m in 0..METRICS.len() {
                columns.push(column(folds, |f| Some(f[m].points)));
                columns.push(column(folds, |f| f[m].get(|x| x.first)));
                columns.push(column(folds, |f| f[m].get(|x| x.last)));
                columns.push(column(folds, |f| f[m].get(|x| x.min)));
                columns.push(column(folds, |f| f[m].get(|x| x.max)));
            }
            columns
        })?;
        self.usage.write(source, &schema::usage_tiles(), |folds| {
            vec![
                column(folds, |f| Some(f.points)),
                column(folds, |f| f.used.get(|x| x.last)),
                column(folds, |f| f.used.get(|x| x.min)),
                column(folds, |f| f.used.get(|x| x.max)),
                column(folds, |f| f.total.get(|x| x.last)),
            ]
        })?;
        self.steps.write(source, &schema::step_usage(), |folds| {
            vec![
                column(folds, |f| Some(f.points)),
                column(folds, |f| f.max_used),
                column(folds, |f| f.max_ts),
                column(folds, |f| f.last_inside),
                column(folds, |f| Some(f.last_value)),
            ]
        })
    }
}

/// The tiles and peaks of one source's curve, written as the curve is.
pub struct Summaries {
    source: String,
    ranges: HashMap<Series, Ranges>,
    states: SeriesMap<State>,
    tables: Tables,
    peaks_out: std::path::PathBuf,
}

const TILE_BATCH: usize = 64 * 1024;

type Properties<'a> = &'a dyn Fn(&TableDef) -> WriterProperties;

impl Summaries {
    /// `outs`: the files of curve_tiles, usage_tiles, step_usage and curve_peaks; `ranges`:
    /// the series'.
    pub fn create(
        source: &str,
        ranges: HashMap<Series, Ranges>,
        outs: [&Path; 4],
        properties: Properties,
    ) -> Result<Summaries> {
        Ok(Summaries {
            source: source.to_string(),
            ranges,
            states: SeriesMap::default(),
            tables: Tables {
                tiles: Pending::create(&schema::curve_tiles(), outs[0], properties)?,
                usage: Pending::create(&schema::usage_tiles(), outs[1], properties)?,
                steps: Pending::create(&schema::step_usage(), outs[2], properties)?,
                levels: HashMap::new(),
            },
            peaks_out: outs[3].to_path_buf(),
        })
    }

    /// Folds a batch of staging rows (their curve columns) with each row's live bytes, owner
    /// and place among the steps (as `curve` stores them).
    pub fn scan(
        &mut self,
        c: &StagingCols,
        live: &[i64],
        owner: &StringArray,
        (step_k, step): (&UInt32Array, &Int64Array),
    ) -> Result<()> {
        let ranges = &self.ranges;
        for (i, &live) in live.iter().enumerate() {
            let raw = [
                opt(c.used, i),
                opt(c.total, i),
                opt(c.process_used, i),
                opt(c.device_used, i),
                Some(live),
            ];
            let values = raw.map(|v| v.filter(|&v| v >= 0));
            let t = opt(c.ts, i);
            let row_series = c.series(i);
            let hal = row_series.2 == "HAL";
            let (series, st) = self.states.get_or(row_series, |key| State {
                ranges: ranges.get(key).copied().unwrap_or_default(),
                tile: None,
                usage: None,
                step: None,
                peaks: Default::default(),
            });
            for (m, v) in values.iter().enumerate() {
                let Some(v) = *v else { continue };
                let p = &mut st.peaks[m];
                p.points += 1;
                if p.points == 1 || v > p.value {
                    p.value = v;
                    p.ts = t;
                    p.ts_raw = opt(c.ts_raw, i);
                    // a rising series makes a new peak on every row: the text's buffer is kept
                    p.event.clear();
                    p.event.push_str(c.event.value(i));
                    p.id = c.id.value(i);
                }
            }
            let Some(t) = t else { continue };
            // times never go back within a series: a new tile closes the one before
            if let Some(range) = st.ranges.curve {
                let k = tile_of(t, range);
                let closed = st.tile.take_if(|(j, _)| *j != k);
                self.tables.tiles.push(series, closed, Some(range));
                let (_, folds) = st.tile.get_or_insert((k, [Fold::default(); 5]));
                for (m, v) in values.iter().enumerate() {
                    if let Some(v) = *v {
                        folds[m].add(v);
                    }
                }
            }
            // a usage point (view usage_series): HAL rows that change a block's bytes, other
            // pools' rows with a counter
            let (used, total) = if hal {
                (owner.is_valid(i).then_some(live), None)
            } else {
                (raw[0], raw[1])
            };
            let point = used.is_some() || total.is_some();
            // step_peaks reads a usage point with a value (whatever its sign) that has a step_k
            if let (true, Some(u), true) = (point, used, step_k.is_valid(i)) {
                let k = step_k.value(i) as i64;
                let closed = st.step.take_if(|(j, _)| *j != k);
                self.tables.push_step(series, closed);
                let (_, fold) = st.step.get_or_insert((k, StepFold::default()));
                if step.is_valid(i) {
                    fold.points += 1;
                    if fold.max_used.is_none_or(|m| u > m) {
                        fold.max_used = Some(u);
                        fold.max_ts = Some(t);
                    }
                    fold.last_inside = Some(u);
                }
                fold.last_value = u;
            }
            if let (true, Some(range)) = (point, st.ranges.usage) {
                let k = tile_of(t, range);
                let closed = st.usage.take_if(|(j, _)| *j != k);
                self.tables.usage.push(series, closed, Some(range));
                let (_, fold) = st.usage.get_or_insert((k, UsageFold::default()));
                fold.points += 1;
                if let Some(u) = used.filter(|&u| u >= 0) {
                    fold.used.add(u);
                    if hal {
                        fold.total.add(u);
                    }
                }
                if let Some(x) = total.filter(|&x| x >= 0) {
                    fold.total.add(x);
                }
            }
        }
        if self.tables.pending() >= TILE_BATCH {
            self.tables.write(&self.source)?;
        }
        Ok(())
    }

    /// Closes the open tiles: every series of a staging file ends with it, so the tiles come
    /// out in series order when the curve does.
    pub fn file_done(&mut self) {
        for (s, st) in self.states.iter_mut() {
            self.tables.close_open(s, st);
        }
    }

    /// Writes the last tiles, the peaks and `step_levels` of the series (to `levels_out`, with
    /// the steps of `steps`; in series order, with `properties`); returns the rows of the five
    /// tables.
    pub fn close(
        mut self,
        properties: Properties,
        steps: &StepIndex,
        levels_out: &Path,
    ) -> Result<[u64; 5]> {
        let mut states = self.states.into_sorted();
        for (s, st) in &mut states {
            self.tables.close_open(s, st);
        }
        self.tables.write(&self.source)?;
        let levels = write_step_levels(
            &self.source,
            std::mem::take(&mut self.tables.levels),
            steps,
            levels_out,
            properties,
        )?;
        let tiles = self.tables.tiles.sink.close()?;
        let usage = self.tables.usage.sink.close()?;
        let steps = self.tables.steps.sink.close()?;
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
        Ok([tiles, usage, steps, sink.close()?, levels])
    }
}

/// One row of `step_levels` (view `step_peaks`): a step of a pool series.
struct Level<'a> {
    step: &'a Step,
    points: i64,
    start_used: Option<i64>,
    peak_used: i64,
    peak_ts: Option<i64>,
    end_used: Option<i64>,
    growth_vs_prev: Option<i64>,
}

/// The steps of a series with its step intervals (`intervals`, by `curve.step_k` in rising
/// order; 0 before the first step): for each step, the level when it starts (the last value of
/// the intervals before it), its peak (the highest value inside it, or the level at its start
/// when that is higher or there is none), the level at its end (the last value inside it, else
/// the start level; none for an open step) and the growth over the previous step that has an
/// end level. A step with no level at all (no value before or inside it) has no row. A series
/// with no interval has no rows.
fn levels<'a>(intervals: &[(i64, StepFold)], steps: &'a [Step]) -> Vec<Level<'a>> {
    let mut out = Vec::new();
    if intervals.is_empty() {
        return out;
    }
    let mut next = intervals.iter().peekable();
    // the last value of the intervals before the step
    let mut before = None;
    let mut prev_end = None;
    for step in steps {
        let k = i64::from(step.k);
        while let Some((_, f)) = next.next_if(|(j, _)| *j < k) {
            before = Some(f.last_value);
        }
        let inside = next.next_if(|(j, _)| *j == k).map(|(_, f)| *f);
        let start_used = before;
        if let Some(f) = inside {
            before = Some(f.last_value);
        }
        let max = inside.and_then(|f| f.max_used.map(|m| (m, f.max_ts)));
        let (peak_used, peak_ts) = match (max, start_used) {
            (Some((m, ts)), s) if s.is_none_or(|s| m >= s) => (m, ts),
            (_, Some(s)) => (s, Some(step.start_ts)),
            (_, None) => continue,
        };
        let end_used = step
            .end_ts
            .and_then(|_| inside.and_then(|f| f.last_inside).or(start_used));
        let growth_vs_prev = end_used.and_then(|e| prev_end.map(|p: i64| e.wrapping_sub(p)));
        if end_used.is_some() {
            prev_end = end_used;
        }
        out.push(Level {
            step,
            points: inside.map_or(0, |f| f.points),
            start_used,
            peak_used,
            peak_ts,
            end_used,
            growth_vs_prev,
        });
    }
    out
}

/// Writes table `step_levels` of `source` to `out` in series order; returns its rows.
fn write_step_levels(
    source: &str,
    levels_by_series: HashMap<Series, Vec<(i64, StepFold)>>,
    steps: &StepIndex,
    out: &Path,
    properties: Properties,
) -> Result<u64> {
    let def = schema::step_levels();
    let mut sink = ParquetSink::create_with(out, def.schema(), properties(&def))?;
    let mut series: Vec<_> = levels_by_series.into_iter().collect();
    series.sort_by(|a, b| series_order(&a.0, &b.0));
    let mut b = LevelsBuilder::default();
    for ((pid, device, pool), intervals) in &mut series {
        // closed in time order, so by k already; the walk needs it
        intervals.sort_by_key(|(k, _)| *k);
        for level in levels(intervals, steps.of(*pid, device)) {
            b.append(source, (*pid, device, pool), &level);
        }
        if b.len >= TILE_BATCH {
            sink.write(&b.finish(&def)?)?;
        }
    }
    if b.len > 0 {
        sink.write(&b.finish(&def)?)?;
    }
    sink.close()
}

#[derive(Default)]
struct LevelsBuilder {
    source: StringBuilder,
    pid: Int64Builder,
    device: StringBuilder,
    step: Int64Builder,
    origin: StringBuilder,
    start_ts: Int64Builder,
    end_ts: Int64Builder,
    pool: StringBuilder,
    points: Int64Builder,
    start_used: Int64Builder,
    peak_used: Int64Builder,
    peak_ts: Int64Builder,
    end_used: Int64Builder,
    growth: Int64Builder,
    growth_vs_prev: Int64Builder,
    len: usize,
}

impl LevelsBuilder {
    fn append(&mut self, source: &str, (pid, device, pool): (Option<i64>, &str, &str), l: &Level) {
        self.source.append_value(source);
        self.pid.append_option(pid);
        self.device.append_value(device);
        self.step.append_value(l.step.step);
        self.origin.append_value(l.step.origin);
        self.start_ts.append_value(l.step.start_ts);
        self.end_ts.append_option(l.step.end_ts);
        self.pool.append_value(pool);
        self.points.append_value(l.points);
        self.start_used.append_option(l.start_used);
        self.peak_used.append_value(l.peak_used);
        self.peak_ts.append_option(l.peak_ts);
        self.end_used.append_option(l.end_used);
        self.growth
            .append_option(l.end_used.zip(l.start_used).map(|(e, s)| e.wrapping_sub(s)));
        self.growth_vs_prev.append_option(l.growth_vs_prev);
        self.len += 1;
    }

    fn finish(&mut self, def: &TableDef) -> Result<RecordBatch> {
        self.len = 0;
        Ok(def.batch(vec![
            ("source", Arc::new(self.source.finish()) as ArrayRef),
            ("pid", Arc::new(self.pid.finish())),
            ("device", Arc::new(self.device.finish())),
            ("step", Arc::new(self.step.finish())),
            ("origin", Arc::new(self.origin.finish())),
            ("start_ts", Arc::new(self.start_ts.finish())),
            ("end_ts", Arc::new(self.end_ts.finish())),
            ("pool", Arc::new(self.pool.finish())),
            ("points", Arc::new(self.points.finish())),
            ("start_used", Arc::new(self.start_used.finish())),
            ("peak_used", Arc::new(self.peak_used.finish())),
            ("peak_ts", Arc::new(self.peak_ts.finish())),
            ("end_used", Arc::new(self.end_used.finish())),
            ("growth", Arc::new(self.growth.finish())),
            ("growth_vs_prev", Arc::new(self.growth_vs_prev.finish())),
        ])?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `trend`'s and `curve_buckets`' bucket of `t` in SQL terms (truncating division,
    /// clamped), for spans where `x * n` fits in 64 bits.
    fn bucket(t: i64, (lo, hi): (i64, i64), n: i64) -> i64 {
        let span = (hi - lo).max(1);
        ((t - lo) * n / span).clamp(0, n - 1)
    }

    #[test]
    fn a_tile_lies_in_one_bucket_for_every_divisor() {
        let divisors: Vec<i64> = (1..=TILES).filter(|n| TILES % n == 0).collect();
        assert_eq!(divisors.len(), 84);
        let ranges = [
            (0, 0),
            (5, 6),
            (1_000, 1_997),
            (-40, 1_000_003),
            (1 << 40, (1 << 40) + 123_456_789),
        ];
        let mut seed = 7u64;
        for range in ranges {
            for k in 0..2_000 {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                // times inside the range, its ends, and a few outside (clamped, as trend does)
                let width = (range.1 - range.0 + 21) as u64;
                let t = match k {
                    0 => range.0,
                    1 => range.1,
                    _ => range.0 - 10 + (seed >> 11) as i64 % width as i64,
                };
                let tile = tile_of(t, range);
                assert!((0..TILES).contains(&tile));
                for &n in &divisors {
                    assert_eq!(
                        tile / (TILES / n),
                        bucket(t, range, n),
                        "t {t} range {range:?} n {n}"
                    );
                }
            }
        }
    }

    #[test]
    fn step_levels_carry_the_level_between_steps() {
        let step = |k: u32, start_ts: i64, end_ts: Option<i64>| Step {
            step: i64::from(k) * 10,
            k,
            origin: "SYSTEM_STEP",
            name: String::new(),
            start_ts,
            end_ts,
            start_row: 0,
        };
        let fold = |points, max: Option<(i64, i64)>, last_inside, last_value| StepFold {
            points,
            max_used: max.map(|m| m.0),
            max_ts: max.map(|m| m.1),
            last_inside,
            last_value,
        };
        let steps = [
            step(1, 100, Some(199)),
            step(2, 200, Some(299)),
            step(3, 300, Some(399)),
            step(4, 400, None),
        ];
        // before step 1: 50; step 1: up to 80, ends at 70, then 40 until step 2 starts; step 2:
        // nothing inside; step 3: 30 inside (below the 40 it starts at), ends at 30; step 4 open
        let intervals = [
            (0, fold(0, None, None, 50)),
            (1, fold(2, Some((80, 150)), Some(70), 40)),
            (3, fold(1, Some((30, 350)), Some(30), 30)),
        ];
        let got: Vec<_> = levels(&intervals, &steps)
            .iter()
            .map(|l| {
                (
                    l.step.k,
                    l.points,
                    l.start_used,
                    l.peak_used,
                    l.peak_ts,
                    l.end_used,
                    l.growth_vs_prev,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (1, 2, Some(50), 80, Some(150), Some(70), None),
                (2, 0, Some(40), 40, Some(200), Some(40), Some(-30)),
                (3, 1, Some(40), 40, Some(300), Some(30), Some(-10)),
                (4, 0, Some(30), 30, Some(400), None, None),
            ]
        );
        // no value before or inside a step: no row; no interval at all: no rows
        let late = [(2, fold(1, Some((5, 250)), Some(5), 5))];
        let got: Vec<_> = levels(&late, &steps).iter().map(|l| l.step.k).collect();
        assert_eq!(got, vec![2, 3, 4]);
        assert!(levels(&[], &steps).is_empty());
    }

    #[test]
    fn spans_beyond_64_bits_do_not_overflow() {
        assert_eq!(tile_of(i64::MIN, (i64::MIN, i64::MAX)), 0);
        assert_eq!(tile_of(i64::MAX, (i64::MIN, i64::MAX)), TILES - 1);
        assert_eq!(tile_of(0, (i64::MIN, i64::MAX)), TILES / 2);
    }
}
