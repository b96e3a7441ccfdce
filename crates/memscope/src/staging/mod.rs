//! Where the rows of one memscope source go while it is read: `events` and `rejects` batches
//! flushed to Parquet files every [`BATCH_ROWS`] rows, so memory stays bounded.

use std::path::{Path, PathBuf};

pub mod runs;

use crate::parse::attr;
use crate::parse::counts::EventCounts;
use crate::parse::events::{EventRow, EventsBuilder, GenerationHints};
use crate::schema;
use memq_core::dataset::{BackgroundSink, ParquetSink};
use memq_core::error::Result;
use memq_core::rejects::{Reject, RejectsBuilder};

pub const BATCH_ROWS: usize = 64 * 1024;

/// Summary of one dump file.
pub struct DumpSummary {
    /// The events counted by group (table `event_counts`).
    pub counts: EventCounts,
    pub rows: u64,
    pub rejects: u64,
    pub ts_unit: TsUnit,
    pub generation: &'static str,
}

/// Text bytes a batch may hold before it is flushed whatever its row count: Arrow's `Utf8`
/// columns have 32-bit offsets, so one column of a batch must stay under 2 GiB. With records
/// capped at [`crate::parse::records::MAX_RECORD_BYTES`], no column of a batch exceeds this plus one
/// record.
pub const BATCH_BYTES: usize = 256 << 20;

/// The text bytes of a batch: [`BATCH_BYTES`], less under a small memory limit (an eighth of
/// it: a batch is held in rows, in Arrow arrays and in the Parquet writer's buffers at once).
pub fn batch_bytes() -> usize {
    BATCH_BYTES.min(memq_core::memory_limit() / 8).max(1 << 20)
}

/// Timestamp unit of a source as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TsUnit {
    Ns,
    Us,
}

impl TsUnit {
    pub fn label(self) -> &'static str {
        match self {
            TsUnit::Ns => "ns",
            TsUnit::Us => "us",
        }
    }
    pub fn scale(self) -> i64 {
        match self {
            TsUnit::Ns => 1,
            TsUnit::Us => 1000,
        }
    }
    /// docs/formats/memscope.md §2.6: values below 1e17 are microseconds.
    pub fn guess(value: i64) -> TsUnit {
        if value.unsigned_abs() < 100_000_000_000_000_000 {
            TsUnit::Us
        } else {
            TsUnit::Ns
        }
    }
}

pub struct SourceOutput {
    pub events: EventsBuilder,
    events_sink: Option<BackgroundSink>,
    rejects: RejectsBuilder,
    rejects_path: PathBuf,
    rejects_sink: Option<ParquetSink>,
    pub hints: GenerationHints,
    /// Declared by the header, or guessed from the first timestamp.
    ts_unit: Option<TsUnit>,
    /// The header named the unit: every row has it.
    declared: bool,
    /// The unit of the previous row with a (non-zero) timestamp.
    last_unit: Option<TsUnit>,
    /// Rows whose unit differs from the previous row's (§2.6 rule applied per row).
    pub unit_switches: u64,
    /// Text bytes in the events / rejects batches being built.
    events_bytes: usize,
    rejects_bytes: usize,
    /// Flush threshold in text bytes ([`BATCH_BYTES`]; smaller in tests).
    pub batch_bytes: usize,
    source: String,
    pub rows: u64,
    pub rejected: u64,
    /// Group counts of the pieces merged so far ([`Self::merge_piece`]).
    counts: EventCounts,
}

/// The unit a timestamp is read in and its value in ns, or why the row is rejected.
pub fn convert_ts(
    raw: i64,
    declared: Option<TsUnit>,
    previous: Option<TsUnit>,
) -> std::result::Result<(TsUnit, i64), String> {
    if raw < 0 {
        return Err(format!("timestamp `{raw}` is negative"));
    }
    let unit = match declared {
        Some(u) => u,
        // 0 fits every unit: it keeps the unit of the rows before it.
        None if raw == 0 => previous.unwrap_or(TsUnit::Ns),
        None => TsUnit::guess(raw),
    };
    match raw.checked_mul(unit.scale()) {
        Some(ns) => Ok((unit, ns)),
        None => Err(format!(
            "timestamp `{raw}` {} overflows a 64-bit ns timestamp when converted to ns{}",
            unit.label(),
            if declared.is_some() {
                " (the header says Timestamp(us); is this value already in ns?)"
            } else {
                ""
            }
        )),
    }
}

/// What the rows of one piece of a dump revealed about units and generation, to be merged in
/// file order by [`SourceOutput::merge_piece`] (the rules of [`SourceOutput::push_event`]).
#[derive(Debug, Default, Clone)]
pub struct PieceStats {
    /// Events (not rejects) of the piece.
    pub rows: u64,
    pub hints: GenerationHints,
    /// Unit of the piece's first row with a timestamp, as if no row came before it.
    pub first_ts_unit: Option<TsUnit>,
    /// Unit, line and value of the first non-zero timestamp.
    pub first_nonzero: Option<(TsUnit, u64, i64)>,
    pub last_nonzero: Option<TsUnit>,
    /// Unit switches inside the piece, and the first one (line, from, to, value).
    pub switches: u64,
    pub first_switch: Option<(u64, TsUnit, TsUnit, i64)>,
    /// The piece's rows counted by group (table `event_counts`).
    pub counts: EventCounts,
}

impl PieceStats {
    /// Counts a row's timestamp `raw`, read in `unit`.
    pub fn observe_ts(&mut self, raw: i64, unit: TsUnit, line: u64) {
        if self.first_ts_unit.is_none() {
            self.first_ts_unit = Some(if raw == 0 { TsUnit::Ns } else { unit });
        }
        if raw != 0 {
            match self.last_nonzero {
                None => self.first_nonzero = Some((unit, line, raw)),
                Some(last) if last != unit => {
                    self.switches += 1;
                    if self.first_switch.is_none() {
                        self.first_switch = Some((line, last, unit, raw));
                    }
                }
                Some(_) => {}
            }
            self.last_nonzero = Some(unit);
        }
    }
}

impl SourceOutput {
    /// A source whose events are written elsewhere (sorted runs, see [`runs`]): only rejects
    /// and the summary are kept here.
    pub fn create_for_runs(source: &str, rejects_path: &Path) -> SourceOutput {
        SourceOutput {
            events: EventsBuilder::new(source, 1),
            events_sink: None,
            rejects: RejectsBuilder::new(source),
            rejects_path: rejects_path.to_path_buf(),
            rejects_sink: None,
            hints: GenerationHints::default(),
            ts_unit: None,
            declared: false,
            last_unit: None,
            unit_switches: 0,
            events_bytes: 0,
            rejects_bytes: 0,
            batch_bytes: batch_bytes(),
            source: source.to_string(),
            rows: 0,
            rejected: 0,
            counts: EventCounts::default(),
        }
    }

    /// The source name the events carry.
    pub fn events_source(&self) -> &str {
        &self.source
    }

    /// The unit of the timestamps read so far (as the summary gives it).
    pub fn ts_unit(&self) -> TsUnit {
        self.ts_unit.unwrap_or(TsUnit::Ns)
    }

    /// The unit the header declared, if any.
    pub fn declared(&self) -> Option<TsUnit> {
        self.declared_unit()
    }

    /// Merges the stats of the next piece of the source (pieces in file order).
    pub fn merge_piece(&mut self, s: &PieceStats) {
        self.rows += s.rows;
        self.counts.merge(&s.counts);
        self.hints.decimal_ptr |= s.hints.decimal_ptr;
        self.hints.g3_feature |= s.hints.g3_feature;
        if self.ts_unit.is_none() {
            if let Some(u) = s.first_ts_unit {
                self.ts_unit = Some(u);
                self.hints.microseconds = u == TsUnit::Us;
            }
        }
        if let Some((u, line, raw)) = s.first_nonzero {
            if let Some(last) = self.last_unit.filter(|l| *l != u) {
                self.unit_switch(line, last, u, raw);
            }
        }
        if let Some((line, from, to, raw)) = s.first_switch {
            self.unit_switch(line, from, to, raw);
            self.unit_switches += s.switches.saturating_sub(1);
        }
        if let Some(l) = s.last_nonzero {
            self.last_unit = Some(l);
        }
    }

    fn unit_switch(&mut self, line: u64, last: TsUnit, unit: TsUnit, raw: i64) {
        self.unit_switches += 1;
        if self.unit_switches == 1 {
            eprintln!(
                "memq: warning: {}:{}: the timestamp unit changes from {} to {} \
                 (value {raw}); each row's unit is taken from its magnitude \
                 (values below 1e17 are µs), so `ts` is in ns throughout",
                self.source,
                line,
                last.label(),
                unit.label()
            );
        }
    }

    /// `events_path` receives the (unsorted) events; `rejects_path` is created only if needed.
    pub fn create(source: &str, events_path: &Path, rejects_path: &Path) -> Result<SourceOutput> {
        Ok(SourceOutput {
            events_sink: Some(BackgroundSink::spawn(ParquetSink::create_with(
                events_path,
                schema::events().schema(),
                memq_core::dataset::staging_properties(),
            )?)),
            ..Self::create_for_runs(source, rejects_path)
        })
    }

    /// The unit named by the source itself (a `Timestamp(us)` column).
    pub fn declare_unit(&mut self, unit: TsUnit) {
        self.ts_unit = Some(unit);
        self.declared = true;
        self.events.set_ts_scale(unit.scale());
        self.hints.microseconds = unit == TsUnit::Us;
    }

    /// Why `row` would be rejected for its timestamp (negative, or beyond i64 in ns), if it
    /// would: readers call it to reject the row with its exact bytes before [`Self::push_event`].
    pub fn check_ts(&self, row: &EventRow) -> std::result::Result<(), String> {
        match row.ts_raw {
            None => Ok(()),
            Some(raw) => convert_ts(raw, self.declared_unit(), self.last_unit).map(|_| ()),
        }
    }

    fn declared_unit(&self) -> Option<TsUnit> {
        if self.declared {
            self.ts_unit
        } else {
            None
        }
    }

    /// Appends a row. Its timestamp's unit is the header's, or else decided for this row by
    /// the §2.6 rule (< 1e17 is µs); a switch of unit inside a source is warned about once,
    /// naming the line. A row whose timestamp cannot be converted is
    /// rejected here (with the row's text) if the reader did not [`Self::check_ts`] it.
    pub fn push_event(&mut self, row: &EventRow) -> Result<()> {
        if let Some(raw) = row.ts_raw {
            match convert_ts(raw, self.declared_unit(), self.last_unit) {
                Err(reason) => {
                    return self.push_reject(Reject {
                        line: row.line,
                        byte_offset: 0,
                        reason,
                        raw: format!("{row:?}").into_bytes(),
                    })
                }
                Ok((unit, _)) => {
                    if self.ts_unit.is_none() {
                        self.ts_unit = Some(unit);
                        self.hints.microseconds = unit == TsUnit::Us;
                    }
                    if raw != 0 {
                        if let Some(last) = self.last_unit.filter(|l| *l != unit) {
                            self.unit_switch(row.line, last, unit, raw);
                        }
                        self.last_unit = Some(unit);
                    }
                    self.events.set_ts_scale(unit.scale());
                }
            }
        }
        let row_bytes = row.as_ref().text_bytes();
        if !self.events.is_empty() && self.events_bytes + row_bytes > self.batch_bytes {
            self.flush_events()?;
        }
        let mut items = Vec::new();
        attr::parse_into(&row.attr, &mut items);
        self.hints.observe(row, &items);
        self.events.append(row, &items);
        self.events_bytes += row_bytes;
        self.rows += 1;
        if self.events.len() >= BATCH_ROWS || self.events_bytes >= self.batch_bytes {
            self.flush_events()?;
        }
        Ok(())
    }

    fn flush_events(&mut self) -> Result<()> {
        self.events_bytes = 0;
        let batch = self.events.finish();
        match self.events_sink.as_mut() {
            Some(sink) => sink.write(batch),
            None => Ok(()),
        }
    }

    pub fn push_reject(&mut self, reject: Reject) -> Result<()> {
        // `text` and `raw` each hold the bytes once.
        let bytes = reject.raw.len() + reject.reason.len();
        if !self.rejects.is_empty() && self.rejects_bytes + bytes > self.batch_bytes {
            self.flush_rejects()?;
        }
        self.rejects_bytes += bytes;
        self.rejects.push(reject);
        self.rejected += 1;
        if self.rejects.len() >= BATCH_ROWS || self.rejects_bytes >= self.batch_bytes {
            self.flush_rejects()?;
        }
        Ok(())
    }

    fn flush_rejects(&mut self) -> Result<()> {
        self.rejects_bytes = 0;
        if self.rejects.is_empty() {
            return Ok(());
        }
        if self.rejects_sink.is_none() {
            self.rejects_sink = Some(ParquetSink::create(
                &self.rejects_path,
                memq_core::rejects::rejects().schema(),
            )?);
        }
        let batch = self.rejects.finish();
        self.rejects_sink
            .as_mut()
            .map_or(Ok(()), |s| s.write(&batch))
    }

    /// Flushes and closes both files.
    pub fn close(mut self) -> Result<DumpSummary> {
        self.flush_events()?;
        if let Some(sink) = self.events_sink.take() {
            sink.close()?;
        }
        self.flush_rejects()?;
        if let Some(s) = self.rejects_sink.take() {
            s.close()?;
        }
        if self.unit_switches > 1 {
            eprintln!(
                "memq: warning: {}: the timestamp unit changes {} times in all",
                self.source, self.unit_switches
            );
        }
        let mut counts = std::mem::take(&mut self.counts);
        counts.merge(&self.events.take_counts());
        Ok(DumpSummary {
            counts,
            rows: self.rows,
            rejects: self.rejected,
            ts_unit: self.ts_unit(),
            generation: self.hints.label(),
        })
    }
}

/// The text bytes a row adds to an events batch (the source name is repeated in every row).
#[cfg(test)]
fn row_text_bytes(row: &EventRow) -> usize {
    row.as_ref().text_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_get_their_unit_per_row_and_never_saturate() {
        assert_eq!(
            convert_ts(1_764_900_000_002_294, None, None),
            Ok((TsUnit::Us, 1_764_900_000_002_294_000))
        );
        assert_eq!(
            convert_ts(1_764_900_000_002_294_420, None, Some(TsUnit::Us)),
            Ok((TsUnit::Ns, 1_764_900_000_002_294_420))
        );
        assert_eq!(convert_ts(0, None, Some(TsUnit::Us)), Ok((TsUnit::Us, 0)));
        assert_eq!(convert_ts(i64::MAX, None, None), Ok((TsUnit::Ns, i64::MAX)));
        let e = convert_ts(1_764_900_000_002_294_420, Some(TsUnit::Us), None).unwrap_err();
        assert!(e.contains("overflows"), "{e}");
        assert!(convert_ts(-5, None, None).unwrap_err().contains("negative"));
        // µs values from 2262 on overflow ns
        assert!(convert_ts(9_300_000_000_000_000, None, None).is_err());
    }

    fn row(i: u64, stack: usize) -> EventRow {
        EventRow {
            row_idx: i,
            line: i + 2,
            id: i as i64,
            event: "MALLOC".into(),
            event_type: "PTA".into(),
            ts_raw: Some(1_764_900_000_000_000_000 + i as i64),
            device: "0".into(),
            stack_py: Some("x".repeat(stack)),
            ..Default::default()
        }
    }

    /// Batches are cut by text bytes, not only by rows, so no `Utf8` column of a
    /// batch nears 2 GiB. (The threshold is lowered here: 2 GiB of text is too much for a test;
    /// the real one is BATCH_BYTES = 256 MiB and records are capped at 256 MiB.)
    #[test]
    fn batches_are_cut_by_bytes() {
        let dir = tempfile_dir();
        let events = dir.join("e.parquet");
        let mut out = SourceOutput::create("s.csv", &events, &dir.join("r.parquet")).unwrap();
        out.batch_bytes = 1 << 20;
        for i in 0..10 {
            out.push_event(&row(i, 300 << 10)).unwrap(); // 300 KiB stacks
        }
        // 3 rows of ~300 KiB fit under 1 MiB: the 4th starts a new batch
        assert_eq!(out.events.len(), 1);
        let summary = out.close().unwrap();
        assert_eq!(summary.rows, 10);
        let file = std::fs::File::open(&events).unwrap();
        let reader =
            datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
                file,
            )
            .unwrap()
            .build()
            .unwrap();
        let rows: usize = reader.map(|b| b.unwrap().num_rows()).sum();
        assert_eq!(rows, 10);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_text_of_a_row_is_counted() {
        let r = row(0, 1000);
        assert_eq!(row_text_bytes(&r), "MALLOC".len() + "PTA".len() + 1 + 1000);
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!(
            "memq-output-test-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
