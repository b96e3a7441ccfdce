//! Where the rows of snap_traces go as they are read ([`TraceSink`]): each row is checked for
//! what the trace tells about blocks ([`Facts`]), handed to the derivation (crate::derive) and
//! kept in [`TraceColumns`], which leave as Arrow batches of at most `rows_limit` rows and
//! `text_limit` text bytes, so what is held stays bounded whatever the size of the trace.

use std::borrow::Cow;

use foldhash::{HashMap, HashSet};

use datafusion::arrow::record_batch::RecordBatch;
use memq_core::catalog::TableDef;
use memq_core::error::{MemqError, Result};

use crate::batches;
use crate::columns::chunks;
use crate::rows::{BlockRow, InfoRow, TraceRow};
use crate::trace_columns::TraceColumns;

/// What the trace tells beyond its rows (docs/formats/snapshot.md §6.2), gathered as the rows
/// go by: each live block gets the alloc entry that made it (seq, `user_metadata` set with
/// `_set_memory_metadata`), and each device's trace is checked for signs that its ring buffer
/// wrapped (frees of addresses the trace never allocated, a single-entry trace).
#[derive(Default)]
pub struct Facts {
    /// (device, address) of each live block → the latest alloc entry still holding it.
    live: HashMap<(i64, u64), Option<Holder>>,
    /// By device: its entries, the addresses it allocated so far, and those it freed without
    /// an earlier alloc.
    devices: Vec<Device>,
    /// The snap_info section of the wrap signs ("trace" when empty).
    pub section: &'static str,
    /// Every block and row counts as this device (the host's flat trace: its rows are read as
    /// device 0, whatever device key its blocks have).
    pub only_device: Option<i64>,
}

/// An alloc entry: its seq and user metadata.
type Holder = (u32, Option<Box<str>>);

#[derive(Default)]
struct Device {
    entries: i64,
    allocated: HashSet<u64>,
    orphans: HashSet<u64>,
}

impl Facts {
    /// The blocks whose alloc entries are looked for (before any row is seen).
    pub fn watch(&mut self, blocks: &[BlockRow]) {
        for block in blocks {
            let live = matches!(
                block.state.as_deref(),
                Some("active_allocated" | "active_pending_free")
            );
            let device = self.only_device.or(block.device);
            if let (true, Some(key)) = (live, device.zip(block.address)) {
                self.live.insert(key, None);
            }
        }
    }

    fn see(&mut self, row: &TraceRow) {
        let index = row.device as usize;
        if self.devices.len() <= index {
            self.devices.resize_with(index + 1, Device::default);
        }
        let entry = &mut self.devices[index];
        entry.entries += 1;
        let Some(addr) = row.addr else {
            return;
        };
        let key = (i64::from(row.device), addr);
        match row.action.as_deref() {
            Some("alloc") => {
                entry.allocated.insert(addr);
                if let Some(holder) = self.live.get_mut(&key) {
                    *holder = Some((row.seq, row.user_metadata.as_deref().map(Box::from)));
                }
            }
            Some(action @ ("free_requested" | "free_completed" | "free")) => {
                if !entry.allocated.contains(&addr) {
                    entry.orphans.insert(addr);
                }
                if action != "free_requested" && !self.live.is_empty() {
                    if let Some(holder) = self.live.get_mut(&key) {
                        *holder = None;
                    }
                }
            }
            _ => {}
        }
    }

    /// Gives the live blocks their alloc entry, and adds the rows of section `trace` for each
    /// device whose trace shows signs of wrapping (a device whose trace shows none gets none).
    pub fn finish(self, blocks: &mut [BlockRow], info: &mut Vec<InfoRow>) {
        for block in blocks {
            let live = matches!(
                block.state.as_deref(),
                Some("active_allocated" | "active_pending_free")
            );
            let made_by = self
                .only_device
                .or(block.device)
                .zip(block.address)
                .filter(|_| live)
                .and_then(|key| self.live.get(&key))
                .and_then(Option::as_ref);
            if let Some((seq, metadata)) = made_by {
                block.alloc_seq = Some(i64::from(*seq));
                block.user_metadata = metadata.as_deref().map(str::to_string);
            }
        }
        let section = if self.section.is_empty() {
            "trace"
        } else {
            self.section
        };
        for (device, d) in self.devices.into_iter().enumerate() {
            let (device, entries, orphans) = (device as i64, d.entries, d.orphans);
            if orphans.is_empty() && entries != 1 {
                continue; // a complete trace, as far as it tells
            }
            let mut fact = |key: &str, value: String, value_type| {
                info.push(InfoRow {
                    section,
                    item: Some(device),
                    key: key.to_string(),
                    value: Some(value),
                    value_type,
                })
            };
            fact("entries", entries.to_string(), "int");
            fact(
                "frees_of_unallocated_addresses",
                orphans.len().to_string(),
                "int",
            );
            fact("wrapped", "true".to_string(), "bool");
        }
    }
}

/// Where the rows of snap_traces go: batches of bounded rows and text handed to `emit` as they
/// fill, or every row held until [`TraceSink::finish`] (the plain decoder's walk, which numbers
/// forward stacks after the whole trace).
pub struct TraceSink<'e> {
    pub columns: TraceColumns,
    hold: bool,
    rows_limit: usize,
    text_limit: usize,
    /// Text bytes of the rows in `columns` (while not holding).
    text: usize,
    snapshot: String,
    table: TableDef,
    emit: Box<dyn FnMut(RecordBatch) -> Result<()> + 'e>,
    /// The error `emit` returned: the rows cannot be written, reading stops.
    pub failed: Option<MemqError>,
    pub facts: Facts,
    /// What the analyses need from the trace, derived as the rows go by.
    pub derive: crate::derive::Derive<'e>,
    /// Rows seen, and most rows held at once.
    pub rows: u64,
    pub peak_rows: usize,
}

impl<'e> TraceSink<'e> {
    pub fn new(
        snapshot: &str,
        hold: bool,
        (rows_limit, text_limit): (usize, usize),
        emit: Box<dyn FnMut(RecordBatch) -> Result<()> + 'e>,
    ) -> Self {
        TraceSink {
            columns: TraceColumns::new(),
            hold,
            rows_limit: rows_limit.max(1),
            text_limit,
            text: 0,
            snapshot: snapshot.to_string(),
            table: crate::schema::traces(),
            emit,
            failed: None,
            facts: Facts::default(),
            derive: crate::derive::Derive::new(snapshot),
            rows: 0,
            peak_rows: 0,
        }
    }

    /// The first error of the sink or its derivation (rows that could not be written): reading
    /// stops with it, before the walk's own result.
    pub fn take_failure(&mut self) -> Result<()> {
        match self.failed.take().or_else(|| self.derive.failed.take()) {
            Some(failed) => Err(failed),
            None => Ok(()),
        }
    }

    /// A sink for another trace of the same snapshot (the host's), into `table`, holding its
    /// rows, with the same batch limits.
    pub fn sibling(
        &self,
        table: TableDef,
        emit: Box<dyn FnMut(RecordBatch) -> Result<()> + 'e>,
    ) -> TraceSink<'e> {
        let mut sink = TraceSink::new(
            &self.snapshot,
            true,
            (self.rows_limit, self.text_limit),
            emit,
        );
        sink.table = table;
        sink
    }

    /// Whether rows are held until the end (else they leave as batches fill).
    pub fn holds(&self) -> bool {
        self.hold
    }

    /// Appends a row (after handing out the batch it would overfill); returns its index in
    /// `columns`.
    pub fn push(&mut self, row: TraceRow) -> Result<usize> {
        self.facts.see(&row);
        let levels = self.derive.see(&row)?;
        if !self.hold {
            let len = |t: &Option<Cow<str>>| t.as_deref().map_or(0, str::len);
            let bytes = self.snapshot.len()
                + len(&row.action)
                + len(&row.compile_context)
                + len(&row.user_metadata)
                + row.extra_json.as_ref().map_or(0, String::len);
            let rows = self.columns.len();
            if rows > 0
                && (rows >= self.rows_limit || self.text.saturating_add(bytes) > self.text_limit)
            {
                self.flush()?;
            }
            self.text = self.text.saturating_add(bytes);
        }
        let index = self.columns.push(row);
        self.columns.levels.rows.push(levels);
        self.rows += 1;
        self.peak_rows = self.peak_rows.max(self.columns.len());
        Ok(index)
    }

    /// Hands out the rows held as one batch.
    fn flush(&mut self) -> Result<()> {
        if self.columns.len() == 0 {
            return Ok(());
        }
        let range = 0..self.columns.len();
        let batch = batches::traces(&self.table, &self.snapshot, &self.columns, range)?;
        self.columns.clear();
        self.text = 0;
        self.send(batch)
    }

    fn send(&mut self, batch: RecordBatch) -> Result<()> {
        if let Err(e) = (self.emit)(batch) {
            let message = e.to_string();
            self.failed = Some(e);
            return Err(MemqError::Query(message));
        }
        Ok(())
    }

    /// Hands out every row still held, cut into batches as they would have been cut while
    /// streaming.
    pub fn finish(&mut self) -> Result<()> {
        if !self.hold {
            return self.flush();
        }
        let name = self.snapshot.len();
        let columns = &self.columns;
        let ranges = chunks(columns.len(), self.rows_limit, self.text_limit, |i| {
            columns.text_bytes(i, name)
        });
        for range in ranges {
            let batch = batches::traces(&self.table, &self.snapshot, &self.columns, range)?;
            self.send(batch)?;
        }
        self.columns.clear();
        Ok(())
    }
}
