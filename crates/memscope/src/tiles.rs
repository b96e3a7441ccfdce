//! Tables `curve_tiles`, `usage_tiles`, `step_usage` and `curve_peaks`: each series of `curve`
//! summarised as the rows go by, so that the analyses that fold a whole series
//! (`curve_buckets`, `trend`, `step_peaks`, `peaks`, the report's charts) read a few thousand
//! rows instead of every row (design.md §9).
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
//! (`curve.step_k`).
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

use crate::schema;
use crate::series::{opt, Series, SeriesMap, StagingCols};

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
            Arc::new(StringArray::from(vec![source; n])),
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
}

impl Tables {
    /// Closes the tiles `st` has open.
    fn close_open(&mut self, s: &Series, st: &mut State) {
        self.tiles.push(s, st.tile.take(), st.ranges.curve);
        self.usage.push(s, st.usage.take(), st.ranges.usage);
        self.steps.push(s, st.step.take(), None);
    }

    fn pending(&self) -> usize {
        self.tiles.rows.len() + self.usage.rows.len() + self.steps.rows.len()
    }

    fn write(&mut self, source: &str) -> Result<()> {
        self.tiles.write(&source, &schema::curve_tiles(), |folds| {
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
        self.usage.write(&source, &schema::usage_tiles(), |folds| {
            vec![
                column(folds, |f| Some(f.points)),
                column(folds, |f| f.used.get(|x| x.last)),
                column(folds, |f| f.used.get(|x| x.min)),
                column(folds, |f| f.used.get(|x| x.max)),
                column(folds, |f| f.total.get(|x| x.last)),
            ]
        })?;
        self.steps.write(&source, &schema::step_usage(), |folds| {
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
                self.tables.steps.push(series, closed, None);
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

    /// Writes the last tiles and the peaks (in series order, with `properties`); returns the
    /// rows of the four tables.
    pub fn close(mut self, properties: Properties) -> Result<[u64; 4]> {
        let mut states = self.states.into_sorted();
        for (s, st) in &mut states {
            self.tables.close_open(s, st);
        }
        self.tables.write(&self.source)?;
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
        Ok([tiles, usage, steps, sink.close()?])
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
    fn spans_beyond_64_bits_do_not_overflow() {
        assert_eq!(tile_of(i64::MIN, (i64::MIN, i64::MAX)), 0);
        assert_eq!(tile_of(i64::MAX, (i64::MIN, i64::MAX)), TILES - 1);
        assert_eq!(tile_of(0, (i64::MIN, i64::MAX)), TILES / 2);
    }
}
