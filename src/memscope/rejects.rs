//! Records that could not be parsed, kept verbatim for the `rejects` table.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BinaryBuilder, StringBuilder, UInt64Builder};
use datafusion::arrow::record_batch::RecordBatch;

use super::schema;

#[derive(Debug, Clone)]
pub struct Reject {
    pub line: u64,
    pub byte_offset: u64,
    pub reason: String,
    pub raw: Vec<u8>,
}

/// Builds `rejects` batches for one source.
pub struct RejectsBuilder {
    source: String,
    rows: Vec<Reject>,
}

impl RejectsBuilder {
    pub fn new(source: &str) -> Self {
        RejectsBuilder {
            source: source.to_string(),
            rows: Vec::new(),
        }
    }

    pub fn push(&mut self, r: Reject) {
        self.rows.push(r);
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn finish(&mut self) -> RecordBatch {
        let mut source = StringBuilder::new();
        let mut line = UInt64Builder::new();
        let mut offset = UInt64Builder::new();
        let mut reason = StringBuilder::new();
        let mut text = StringBuilder::new();
        let mut raw = BinaryBuilder::new();
        for r in self.rows.drain(..) {
            source.append_value(&self.source);
            line.append_value(r.line);
            offset.append_value(r.byte_offset);
            reason.append_value(&r.reason);
            text.append_value(String::from_utf8_lossy(&r.raw));
            raw.append_value(&r.raw);
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(source.finish()),
            Arc::new(line.finish()),
            Arc::new(offset.finish()),
            Arc::new(reason.finish()),
            Arc::new(text.finish()),
            Arc::new(raw.finish()),
        ];
        RecordBatch::try_new(schema::rejects().schema(), columns)
            .expect("rejects columns match the rejects schema")
    }
}
