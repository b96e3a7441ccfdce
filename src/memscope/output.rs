//! Where the rows of one memscope source go while it is read: `events` and `rejects` batches
//! flushed to Parquet files every [`BATCH_ROWS`] rows, so memory stays bounded.

use std::path::{Path, PathBuf};

use super::events::{EventRow, EventsBuilder, GenerationHints};
use super::rejects::{Reject, RejectsBuilder};
use super::schema;
use crate::attr;
use crate::dataset::{BackgroundSink, ParquetSink};
use crate::error::Result;

pub const BATCH_ROWS: usize = 64 * 1024;

pub struct SourceOutput {
    pub events: EventsBuilder,
    events_sink: Option<BackgroundSink>,
    rejects: RejectsBuilder,
    rejects_path: PathBuf,
    rejects_sink: Option<ParquetSink>,
    pub hints: GenerationHints,
    pub rows: u64,
    pub rejected: u64,
}

impl SourceOutput {
    /// `events_path` receives the (unsorted) events; `rejects_path` is created only if needed.
    pub fn create(source: &str, events_path: &Path, rejects_path: &Path) -> Result<SourceOutput> {
        let events_schema = schema::events().schema();
        Ok(SourceOutput {
            events: EventsBuilder::new(events_schema.clone(), source, 1),
            events_sink: Some(BackgroundSink::spawn(ParquetSink::create(events_path, events_schema)?)),
            rejects: RejectsBuilder::new(source),
            rejects_path: rejects_path.to_path_buf(),
            rejects_sink: None,
            hints: GenerationHints::default(),
            rows: 0,
            rejected: 0,
        })
    }

    pub fn push_event(&mut self, row: &EventRow) -> Result<()> {
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
                schema::rejects().schema(),
            )?);
        }
        let batch = self.rejects.finish();
        self.rejects_sink.as_mut().map_or(Ok(()), |s| s.write(&batch))
    }

    /// Flushes and closes both files.
    pub fn close(mut self) -> Result<(u64, u64, GenerationHints)> {
        self.flush_events()?;
        if let Some(sink) = self.events_sink.take() {
            sink.close()?;
        }
        self.flush_rejects()?;
        if let Some(s) = self.rejects_sink.take() {
            s.close()?;
        }
        Ok((self.rows, self.rejected, self.hints))
    }
}
