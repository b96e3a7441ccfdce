//! Where the rows of one memscope source go while it is read: `events` and `rejects` batches
//! flushed to Parquet files every [`BATCH_ROWS`] rows, so memory stays bounded.

use std::path::{Path, PathBuf};

use crate::csv_dump::DumpSummary;
use crate::events::{EventRow, EventsBuilder, GenerationHints};
use memq_core::rejects::{Reject, RejectsBuilder};
use crate::schema;
use crate::attr;
use memq_core::dataset::{BackgroundSink, ParquetSink};
use memq_core::error::Result;

pub const BATCH_ROWS: usize = 64 * 1024;

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
    pub rows: u64,
    pub rejected: u64,
}

impl SourceOutput {
    /// `events_path` receives the (unsorted) events; `rejects_path` is created only if needed.
    pub fn create(source: &str, events_path: &Path, rejects_path: &Path) -> Result<SourceOutput> {
        let events_schema = schema::events().schema();
        Ok(SourceOutput {
            events: EventsBuilder::new(source, 1),
            events_sink: Some(BackgroundSink::spawn(ParquetSink::create_with(
                events_path,
                events_schema,
                memq_core::dataset::staging_properties(),
            )?)),
            rejects: RejectsBuilder::new(source),
            rejects_path: rejects_path.to_path_buf(),
            rejects_sink: None,
            hints: GenerationHints::default(),
            ts_unit: None,
            rows: 0,
            rejected: 0,
        })
    }

    /// The unit named by the source itself (a `Timestamp(us)` column).
    pub fn declare_unit(&mut self, unit: TsUnit) {
        self.ts_unit = Some(unit);
        self.events.set_ts_scale(unit.scale());
        self.hints.microseconds = unit == TsUnit::Us;
    }

    pub fn push_event(&mut self, row: &EventRow) -> Result<()> {
        if let (None, Some(ts)) = (self.ts_unit, row.ts_raw) {
            self.declare_unit(TsUnit::guess(ts));
        }
        let mut items = Vec::new();
        attr::parse_into(&row.attr, &mut items);
        self.hints.observe(row, &items);
        self.events.append(row, &items);
        self.rows += 1;
        if self.events.len() >= BATCH_ROWS {
            self.flush_events()?;
        }
        Ok(())
    }

    fn flush_events(&mut self) -> Result<()> {
        let batch = self.events.finish();
        match self.events_sink.as_mut() {
            Some(sink) => sink.write(batch),
            None => Ok(()),
        }
    }

    pub fn push_reject(&mut self, reject: Reject) -> Result<()> {
        self.rejects.push(reject);
        self.rejected += 1;
        if self.rejects.len() >= BATCH_ROWS {
            self.flush_rejects()?;
        }
        Ok(())
    }

    fn flush_rejects(&mut self) -> Result<()> {
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
        Ok(DumpSummary {
            rows: self.rows,
            rejects: self.rejected,
            ts_unit: self.ts_unit.unwrap_or(TsUnit::Ns),
            generation: self.hints.label(),
        })
    }
}
