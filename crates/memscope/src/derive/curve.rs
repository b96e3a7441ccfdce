//! Table `curve`: memory over time, one row per MALLOC/FREE row with the counters the tool
//! wrote and memq's live bytes of the row's series, computed at ingest (docs/formats/memscope.md
//! §5.4; docs/performance.md, "What is computed once, at ingest") so that no query re-pairs blocks.
//!
//! Two steps. During the pairing pass ([`crate::derive`]) each MALLOC/FREE row is appended to
//! the staging file (Arrow IPC) of its series with the change of live bytes it causes; a row
//! that ends a block by a shadow FREE is marked, because whether that memory was released is
//! only known once the whole source has been read ([`crate::derive::fates`]). [`finish`] then streams
//! the staging files once, in series order, drops the change of every shadow FREE whose block
//! is held at the end, and writes the running sum per series. The table comes out in its
//! declared order (series, then time) without a sort, so that the analyses' windows and
//! aggregates per series need none either; a source with more than 64 series (only hostile
//! inputs have that many) goes through one shared file and a sort.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, BooleanBuilder, Int64Array, Int64Builder, StringArray, StringBuilder,
    UInt32Array, UInt32Builder, UInt64Array, UInt64Builder,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::ipc::reader::FileReader;
use datafusion::arrow::ipc::writer::FileWriter;
use datafusion::arrow::record_batch::RecordBatch;

use memq_core::dataset::{table_properties, ParquetSink};
use memq_core::error::{MemqError, Result};

use crate::derive::series::{
    named_columns, opt, order_key, series_order, ByName, Series, SeriesMap, StagingCols,
};
use crate::derive::steps::StepIndex;
use crate::derive::tiles::Ranges;
use crate::schema;

/// The staging columns: the curve's own columns but `source` and `live_bytes`, plus the change
/// of live bytes and whether it waits on a shadow block's fate.
fn staging_schema() -> SchemaRef {
    let f = |n: &str, t: DataType, null: bool| Field::new(n, t, null);
    Arc::new(Schema::new(vec![
        f("pid", DataType::Int64, true),
        f("device", DataType::Utf8, false),
        f("pool", DataType::Utf8, false),
        f("ts", DataType::Int64, true),
        f("ts_raw", DataType::Int64, true),
        f("row_idx", DataType::UInt64, false),
        f("id", DataType::Int64, false),
        f("event", DataType::Utf8, false),
        f("size", DataType::Int64, true),
        f("used", DataType::Int64, true),
        f("total", DataType::Int64, true),
        f("process_used", DataType::Int64, true),
        f("device_used", DataType::Int64, true),
        f("delta", DataType::Int64, false),
        f("shadow_end", DataType::Boolean, false),
        f("owner", DataType::Utf8, true),
        f("owner_delta", DataType::Int64, false),
        f("old_owner", DataType::Utf8, true),
        f("old_delta", DataType::Int64, false),
    ]))
}

/// One curve row as the pairing pass sees it.
pub struct CurveRow<'a> {
    pub pid: Option<i64>,
    pub device: &'a str,
    pub pool: &'a str,
    pub ts: Option<i64>,
    pub ts_raw: Option<i64>,
    pub row_idx: u64,
    pub id: i64,
    pub event: &'a str,
    pub size: Option<i64>,
    pub used: Option<i64>,
    pub total: Option<i64>,
    pub process_used: Option<i64>,
    pub device_used: Option<i64>,
    /// Change of the series' live bytes at this row.
    pub delta: i64,
    /// The row ends a block by a shadow FREE: `delta` applies only if the block is released.
    pub shadow_end: bool,
    /// The owner (as owner_peaks names it) of the block the row allocates or ends, and the
    /// change of that owner's live bytes; for a MALLOC that reuses a live block's address,
    /// also the owner of the block it ends and that change.
    pub owner: Option<&'a str>,
    pub owner_delta: i64,
    pub old_owner: Option<&'a str>,
    pub old_delta: i64,
}

/// Series kept in files of their own; rows of any further series share one overflow file.
const MAX_SERIES_FILES: usize = 64;

/// Rows buffered per series before they go to its staging file.
const SERIES_BATCH_ROWS: usize = 8 * 1024;

/// A failed write of a staging file (a full disk), naming the file.
fn at(path: &Path, e: datafusion::arrow::error::ArrowError) -> MemqError {
    MemqError::input(path, memq_core::error::Location::None, e.to_string())
}

/// The staging rows of one file: builders and the IPC writer.
struct StagingFile {
    writer: FileWriter<File>,
    path: std::path::PathBuf,
    pid: Int64Builder,
    device: StringBuilder,
    pool: StringBuilder,
    ts: Int64Builder,
    ts_raw: Int64Builder,
    row_idx: UInt64Builder,
    id: Int64Builder,
    event: StringBuilder,
    size: Int64Builder,
    used: Int64Builder,
    total: Int64Builder,
    process_used: Int64Builder,
    device_used: Int64Builder,
    delta: Int64Builder,
    shadow_end: BooleanBuilder,
    owner: StringBuilder,
    owner_delta: Int64Builder,
    old_owner: StringBuilder,
    old_delta: Int64Builder,
    len: usize,
}

impl StagingFile {
    fn create(path: std::path::PathBuf) -> Result<StagingFile> {
        let file = memq_core::dataset::create_file(&path)?;
        Ok(StagingFile {
            writer: FileWriter::try_new(file, &staging_schema()).map_err(|e| at(&path, e))?,
            path,
            pid: Int64Builder::new(),
            device: StringBuilder::new(),
            pool: StringBuilder::new(),
            ts: Int64Builder::new(),
            ts_raw: Int64Builder::new(),
            row_idx: UInt64Builder::new(),
            id: Int64Builder::new(),
            event: StringBuilder::new(),
            size: Int64Builder::new(),
            used: Int64Builder::new(),
            total: Int64Builder::new(),
            process_used: Int64Builder::new(),
            device_used: Int64Builder::new(),
            delta: Int64Builder::new(),
            shadow_end: BooleanBuilder::new(),
            owner: StringBuilder::new(),
            owner_delta: Int64Builder::new(),
            old_owner: StringBuilder::new(),
            old_delta: Int64Builder::new(),
            len: 0,
        })
    }

    fn push(&mut self, r: &CurveRow) -> Result<()> {
        self.pid.append_option(r.pid);
        self.device.append_value(r.device);
        self.pool.append_value(r.pool);
        self.ts.append_option(r.ts);
        self.ts_raw.append_option(r.ts_raw);
        self.row_idx.append_value(r.row_idx);
        self.id.append_value(r.id);
        self.event.append_value(r.event);
        self.size.append_option(r.size);
        self.used.append_option(r.used);
        self.total.append_option(r.total);
        self.process_used.append_option(r.process_used);
        self.device_used.append_option(r.device_used);
        self.delta.append_value(r.delta);
        self.shadow_end.append_value(r.shadow_end);
        self.owner.append_option(r.owner);
        self.owner_delta.append_value(r.owner_delta);
        self.old_owner.append_option(r.old_owner);
        self.old_delta.append_value(r.old_delta);
        self.len += 1;
        if self.len >= SERIES_BATCH_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.len == 0 {
            return Ok(());
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.pid.finish()),
            Arc::new(self.device.finish()),
            Arc::new(self.pool.finish()),
            Arc::new(self.ts.finish()),
            Arc::new(self.ts_raw.finish()),
            Arc::new(self.row_idx.finish()),
            Arc::new(self.id.finish()),
            Arc::new(self.event.finish()),
            Arc::new(self.size.finish()),
            Arc::new(self.used.finish()),
            Arc::new(self.total.finish()),
            Arc::new(self.process_used.finish()),
            Arc::new(self.device_used.finish()),
            Arc::new(self.delta.finish()),
            Arc::new(self.shadow_end.finish()),
            Arc::new(self.owner.finish()),
            Arc::new(self.owner_delta.finish()),
            Arc::new(self.old_owner.finish()),
            Arc::new(self.old_delta.finish()),
        ];
        self.len = 0;
        let batch = RecordBatch::try_new(staging_schema(), columns)?;
        self.writer.write(&batch).map_err(|e| at(&self.path, e))?;
        Ok(())
    }

    fn close(mut self) -> Result<std::path::PathBuf> {
        self.flush()?;
        self.writer.finish().map_err(|e| at(&self.path, e))?;
        Ok(self.path)
    }
}

/// The staging rows of `curve`, one file per series (rows in time order within each), so that
/// the table comes out ordered by series then time without a sort.
pub struct CurveStaging {
    dir: std::path::PathBuf,
    stem: String,
    /// Index into `files` of each series seen, and into `ranges`.
    series: HashMap<Series, (usize, usize)>,
    files: Vec<StagingFile>,
    /// The file shared by series beyond MAX_SERIES_FILES.
    overflow: Option<usize>,
    /// Each series' time ranges, for the tiles of [`crate::derive::tiles`].
    ranges: Vec<Ranges>,
    /// The series of the previous row, its file and range (rows of one series come in runs).
    last: Option<(Series, usize, usize)>,
}

impl CurveStaging {
    /// Staging files go to `dir`, named after `stem`.
    pub fn create(dir: &Path, stem: &str) -> Result<CurveStaging> {
        Ok(CurveStaging {
            dir: dir.to_path_buf(),
            stem: stem.to_string(),
            series: HashMap::new(),
            files: Vec::new(),
            overflow: None,
            ranges: Vec::new(),
            last: None,
        })
    }

    /// The file and range slot of the row's series.
    fn file_of(&mut self, r: &CurveRow) -> Result<(usize, usize)> {
        if let Some((s, f, k)) = &self.last {
            if s.0 == r.pid && s.1 == r.device && s.2 == r.pool {
                return Ok((*f, *k));
            }
        }
        let key: Series = (r.pid, r.device.to_string(), r.pool.to_string());
        let at = match self.series.get(&key) {
            Some(&at) => at,
            None => {
                let f = if self.files.len() < MAX_SERIES_FILES {
                    self.new_file()?
                } else {
                    match self.overflow {
                        Some(f) => f,
                        None => {
                            let f = self.new_file()?;
                            self.overflow = Some(f);
                            f
                        }
                    }
                };
                self.ranges.push(Ranges::default());
                let at = (f, self.ranges.len() - 1);
                self.series.insert(key.clone(), at);
                at
            }
        };
        self.last = Some((key, at.0, at.1));
        Ok(at)
    }

    fn new_file(&mut self) -> Result<usize> {
        let path = self
            .dir
            .join(format!("{}-{}.arrow", self.stem, self.files.len()));
        self.files.push(StagingFile::create(path)?);
        Ok(self.files.len() - 1)
    }

    pub fn push(&mut self, r: CurveRow) -> Result<()> {
        let (f, k) = self.file_of(&r)?;
        if let Some(ts) = r.ts {
            let range = &mut self.ranges[k];
            widen(&mut range.curve, ts);
            // a HAL row's usage value is its live bytes, known in the second step
            if r.pool != "HAL" && r.used.is_some_and(|u| u >= 0) {
                widen(&mut range.usage, ts);
            }
        }
        self.files[f].push(&r)
    }

    /// Closes the staging files, listed in the table's series order.
    pub fn close(self) -> Result<CurveFiles> {
        let mut order: Vec<(&Series, usize)> =
            self.series.iter().map(|(s, &(f, _))| (s, f)).collect();
        // The table's order: pid (NULLs last), device, pool.
        order.sort_by(|a, b| series_order(a.0, b.0));
        let mut ranks: Vec<usize> = order.iter().map(|&(_, f)| f).collect();
        ranks.dedup();
        let sorted = self.overflow.is_none();
        let mut paths: Vec<Option<std::path::PathBuf>> = Vec::new();
        for file in self.files {
            paths.push(Some(file.close()?));
        }
        let files = ranks
            .into_iter()
            .filter_map(|f| {
                let hal = order.iter().any(|(s, g)| *g == f && s.2 == "HAL");
                paths.get_mut(f).and_then(Option::take).map(|p| (p, hal))
            })
            .collect();
        let ranges = self
            .series
            .iter()
            .map(|(s, &(_, k))| (s.clone(), self.ranges[k]))
            .collect();
        Ok(CurveFiles {
            files,
            sorted,
            ranges,
        })
    }
}

/// The closed staging files of one source's curve.
pub struct CurveFiles {
    /// Each file, and whether it holds a HAL series.
    files: Vec<(std::path::PathBuf, bool)>,
    /// The files, read in turn, give the table's order (no overflow file).
    sorted: bool,
    /// Each series' time ranges (the usage range of HAL series is found by [`finish`]).
    ranges: HashMap<Series, Ranges>,
}

/// Widens `range` to hold `ts`.
fn widen(range: &mut Option<(i64, i64)>, ts: i64) {
    *range = Some(match *range {
        Some((lo, hi)) => (lo.min(ts), hi.max(ts)),
        None => (ts, ts),
    });
}

/// The usage range of each HAL series in `file`: the times of its rows that change a block's
/// bytes (usage_series' points) with live bytes >= 0, by the running sum [`finish`] computes.
fn hal_usage_ranges(
    file: &Path,
    held: &HashSet<u64>,
    ranges: &mut HashMap<Series, Ranges>,
) -> Result<()> {
    let reader = FileReader::try_new(File::open(file).map_err(|e| MemqError::io(file, e))?, None)?;
    let mut live: SeriesMap<i64> = SeriesMap::default();
    for batch in reader {
        let batch = batch?;
        let c = StagingCols::new(&batch);
        for i in 0..batch.num_rows() {
            let row_series = c.series(i);
            if row_series.2 != "HAL" {
                continue;
            }
            let void = c.void(i, held);
            let (series, sum) = live.get_or(row_series, |_| 0);
            if void {
                continue;
            }
            *sum += c.delta.value(i);
            if c.owner.is_valid(i) && *sum >= 0 && c.ts.is_valid(i) {
                // every staged series has its entry (CurveStaging::close)
                if let Some(r) = ranges.get_mut(series) {
                    widen(&mut r.usage, c.ts.value(i));
                }
            }
        }
    }
    Ok(())
}

impl CurveFiles {
    /// The staging file the rows go through when the series files are not in table order.
    pub fn needs_sort(&self) -> bool {
        !self.sorted
    }
}

/// Where [`finish`] writes each table, and the rows it wrote.
#[derive(Clone)]
pub struct Outputs<P> {
    pub curve: P,
    pub expansions: P,
    pub tiles: P,
    pub usage_tiles: P,
    pub step_usage: P,
    pub step_levels: P,
    pub peaks: P,
    pub frag: P,
    pub owner_peaks: P,
}

/// Writes the rows of table `curve` of `source` to `out.curve` from the staging files: `held`
/// holds the row_idx of every shadow FREE whose block still counts as held at the end (its
/// change is dropped). The rows of tables `expansions`, `curve_tiles`, `usage_tiles`,
/// `step_usage`, `step_levels`, `curve_peaks` ([`crate::derive::tiles`]) and `pool_frag`
/// ([`crate::derive::frag`]) found on the way go to the other outputs. When `staged.needs_sort()`, each
/// output but `peaks`, `step_levels` and `frag` (written in series order at the end) is a
/// staging file the caller sorts into place. Returns the rows of each.
pub fn finish(
    staged: CurveFiles,
    source: &str,
    held: &HashSet<u64>,
    steps: &StepIndex,
    out: &Outputs<PathBuf>,
) -> Result<Outputs<u64>> {
    let def = schema::curve();
    let properties = |def: &memq_core::catalog::TableDef| {
        if staged.sorted {
            table_properties(def)
        } else {
            memq_core::dataset::staging_properties()
        }
    };
    let mut sink = ParquetSink::create_with(&out.curve, def.schema(), properties(&def))?;
    // Live bytes per series (pid, device, pool), and per owner of each series.
    let mut live = Sums::default();
    let mut owners = Sums::default();
    let growth_def = schema::expansions();
    let mut growth = Growth {
        sink: ParquetSink::create_with(
            &out.expansions,
            growth_def.schema(),
            properties(&growth_def),
        )?,
        states: SeriesMap::default(),
    };
    let mut ranges = staged.ranges;
    for (file, _) in staged.files.iter().filter(|(_, hal)| *hal) {
        hal_usage_ranges(file, held, &mut ranges)?;
    }
    let mut summaries = crate::derive::tiles::Summaries::create(
        source,
        ranges,
        [&out.tiles, &out.usage_tiles, &out.step_usage, &out.peaks].map(PathBuf::as_path),
        &properties,
    )?;
    let mut frag = crate::derive::frag::Fragmentation::default();
    for (staging, _) in &staged.files {
        let file = File::open(staging).map_err(|e| MemqError::io(staging, e))?;
        let reader = FileReader::try_new(file, None)?;
        for batch in reader {
            let batch = batch?;
            let c = StagingCols::new(&batch);
            let (live_bytes, owner, owner_live) = running_sums(&c, held, &mut live, &mut owners);
            let n = batch.num_rows();
            let mut columns: Vec<ArrayRef> = vec![schema::source_column(source, n)];
            columns.extend((0..DELTA).map(|c| batch.column(c).clone()));
            let (step_k, step) = place_in_steps(&c, steps);
            summaries.scan(&c, &live_bytes, &owner, (&step_k, &step))?;
            columns.push(Arc::new(Int64Array::from(live_bytes)));
            columns.push(Arc::new(owner));
            columns.push(Arc::new(owner_live));
            columns.push(Arc::new(step_k));
            columns.push(Arc::new(step));
            sink.write(&RecordBatch::try_new(def.schema(), columns)?)?;
            growth.scan(&c, source)?;
            frag.scan(&c);
        }
        summaries.file_done();
        std::fs::remove_file(staging).map_err(|e| MemqError::io(staging, e))?;
    }
    let [tiles, usage_tiles, step_usage, peaks, step_levels] =
        summaries.close(&table_properties, steps, &out.step_levels)?;
    Ok(Outputs {
        curve: sink.close()?,
        expansions: growth.sink.close()?,
        tiles,
        usage_tiles,
        step_usage,
        step_levels,
        peaks,
        frag: frag.close(source, &out.frag, table_properties(&schema::pool_frag()))?,
        owner_peaks: owner_peaks(&owners, source, &out.owner_peaks)?,
    })
}

/// The row of a series that last carried a reservation (`total`).
struct Prev {
    total: i64,
    used: Option<i64>,
    ts: Option<i64>,
    row_idx: u64,
}

/// Table `expansions`: the rows of framework pools (not HAL) whose `total` is larger than on
/// the previous row of their series that carries one. Rows of one series come in time order
/// (interleaved with other series in the overflow file), so one state per series suffices.
struct Growth {
    sink: ParquetSink,
    /// The previous row of each series that carried a `total`; None before the first.
    states: SeriesMap<Option<Prev>>,
}

impl Growth {
    fn scan(&mut self, c: &StagingCols, source: &str) -> Result<()> {
        let mut rows: Vec<(usize, Prev)> = Vec::new();
        for i in 0..c.total.len() {
            let series = c.series(i);
            if c.total.is_null(i) || series.2 == "HAL" {
                continue;
            }
            let now = Prev {
                total: c.total.value(i),
                used: opt(c.used, i),
                ts: opt(c.ts, i),
                row_idx: c.row_idx.value(i),
            };
            let (_, state) = self.states.get_or(series, |_| None);
            if let Some(prev) = state.replace(now) {
                if c.total.value(i) > prev.total {
                    rows.push((i, prev));
                }
            }
        }
        if rows.is_empty() {
            return Ok(());
        }
        let take = |c: &Int64Array| -> ArrayRef {
            Arc::new(rows.iter().map(|(i, _)| opt(c, *i)).collect::<Int64Array>())
        };
        let strings = |c: &StringArray| -> ArrayRef {
            Arc::new(
                rows.iter()
                    .map(|(i, _)| Some(c.value(*i)))
                    .collect::<StringArray>(),
            )
        };
        let columns: Vec<ArrayRef> = vec![
            schema::source_column(source, rows.len()),
            take(c.pid),
            strings(c.device),
            strings(c.pool),
            take(c.ts),
            take(c.ts_raw),
            Arc::new(
                rows.iter()
                    .map(|(i, _)| c.row_idx.value(*i))
                    .collect::<UInt64Array>(),
            ),
            strings(c.event),
            Arc::new(rows.iter().map(|(_, p)| p.total).collect::<Int64Array>()),
            Arc::new(
                rows.iter()
                    .map(|(i, _)| c.total.value(*i))
                    .collect::<Int64Array>(),
            ),
            Arc::new(rows.iter().map(|(_, p)| p.used).collect::<Int64Array>()),
            take(c.used),
            Arc::new(rows.iter().map(|(_, p)| p.ts).collect::<Int64Array>()),
            Arc::new(rows.iter().map(|(_, p)| p.row_idx).collect::<UInt64Array>()),
        ];
        self.sink.write(&RecordBatch::try_new(
            schema::expansions().schema(),
            columns,
        )?)
    }
}

/// Each row's place among the steps of its process and device (columns `step_k`, `step`).
fn place_in_steps(c: &StagingCols, steps: &StepIndex) -> (UInt32Array, Int64Array) {
    let n = c.ts.len();
    let mut step_k = UInt32Builder::with_capacity(n);
    let mut step = Int64Builder::with_capacity(n);
    for i in 0..n {
        let place = steps.place(opt(c.pid, i), c.device.value(i), opt(c.ts, i));
        step_k.append_option(place.map(|p| p.0));
        step.append_option(place.and_then(|p| p.1));
    }
    (step_k.finish(), step.finish())
}

/// Table `owner_live_peaks` of `source` from the owners' running sums, in series then owner
/// order; returns its rows.
fn owner_peaks(owners: &Sums, source: &str, out: &Path) -> Result<u64> {
    let mut rows: Vec<_> = owners
        .iter()
        .filter(|(_, e)| e.value.peak.is_some())
        .collect();
    rows.sort_by(|a, b| {
        (order_key(a.1.pid, &a.1.device, &a.1.pool), a.0)
            .cmp(&(order_key(b.1.pid, &b.1.device, &b.1.pool), b.0))
    });
    let def = schema::owner_live_peaks();
    let mut sink = ParquetSink::create_with(out, def.schema(), table_properties(&def))?;
    let peak = |f: fn((i64, Option<i64>)) -> Option<i64>| -> ArrayRef {
        Arc::new(
            rows.iter()
                .map(|r| r.1.value.peak.and_then(f))
                .collect::<Int64Array>(),
        )
    };
    let mut columns = named_columns(source, &rows);
    columns.extend([peak(|p| Some(p.0)), peak(|p| p.1)]);
    sink.write(&RecordBatch::try_new(def.schema(), columns)?)?;
    sink.close()
}

/// A running sum of (name, pid, device, pool), with its peak so far.
#[derive(Default)]
struct Sum {
    sum: i64,
    /// The highest sum a curve row showed, and the time of the first row showing it.
    peak: Option<(i64, Option<i64>)>,
}

/// Running sums by (name, pid, device, pool).
type Sums = ByName<Sum>;

impl Sums {
    fn add(&mut self, name: &str, pid: Option<i64>, device: &str, pool: &str, d: i64) -> i64 {
        self.with(name, (pid, device, pool), |e| {
            e.sum += d;
            e.sum
        })
    }

    /// [`Sums::add`] for a curve row at `ts` showing the new sum: keeps the peak (rows come in
    /// time order, NULL times last, so the first row reaching it is the first seen).
    fn add_shown(
        &mut self,
        name: &str,
        (pid, device, pool): (Option<i64>, &str, &str),
        d: i64,
        ts: Option<i64>,
    ) -> i64 {
        self.with(name, (pid, device, pool), |e| {
            e.sum += d;
            if e.peak.is_none_or(|(p, _)| e.sum > p) {
                e.peak = Some((e.sum, ts));
            }
            e.sum
        })
    }
}

/// The staging columns before this one are the curve's own (after `source`); then delta,
/// shadow_end and the four owner columns ([`StagingCols`]).
const DELTA: usize = 13;

/// The live bytes of each row's series after the row, and of the row's owner in that series
/// (NULL for a row that changes no owner's bytes), with the row's owner (NULL likewise). A shadow
/// FREE whose block is held at the end changes nothing.
fn running_sums(
    c: &StagingCols,
    held: &HashSet<u64>,
    live: &mut Sums,
    owners: &mut Sums,
) -> (Vec<i64>, StringArray, Int64Array) {
    let n = c.ts.len();
    let mut series_live = Vec::with_capacity(n);
    let mut owner_live = Int64Builder::with_capacity(n);
    let mut owner_out = StringBuilder::with_capacity(n, 0);
    for i in 0..n {
        let (p, dv, pl) = c.series(i);
        let void = c.void(i, held);
        let (d, od) = if void {
            (0, 0)
        } else {
            (c.delta.value(i), c.owner_delta.value(i))
        };
        series_live.push(live.add(pl, p, dv, pl, d));
        if c.old_owner.is_valid(i) {
            owners.add(c.old_owner.value(i), p, dv, pl, c.old_delta.value(i));
        }
        if c.owner.is_null(i) || void {
            owner_live.append_null();
            owner_out.append_null();
        } else {
            let t = opt(c.ts, i);
            owner_live.append_value(owners.add_shown(c.owner.value(i), (p, dv, pl), od, t));
            owner_out.append_value(c.owner.value(i));
        }
    }
    (series_live, owner_out.finish(), owner_live.finish())
}
