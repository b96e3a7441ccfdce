//! Records that could not be parsed, kept verbatim for the `rejects` table, and the `sources`
//! table: the two tables every format shares.

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BinaryBuilder, Int64Builder, StringBuilder, UInt64Builder,
};
use datafusion::arrow::datatypes::DataType::{Binary, Int64, UInt64, Utf8};
use datafusion::arrow::record_batch::RecordBatch;

use crate::catalog::{col, req, TableDef, Unit};
use crate::dataset::SourceEntry;

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
        rejects()
            .batch(vec![
                ("source", Arc::new(source.finish()) as ArrayRef),
                ("line", Arc::new(line.finish())),
                ("byte_offset", Arc::new(offset.finish())),
                ("reason", Arc::new(reason.finish())),
                ("text", Arc::new(text.finish())),
                ("raw", Arc::new(raw.finish())),
            ])
            .expect("every rejects column is given once")
    }
}

/// The `sources` batch: one row per input file.
pub fn sources_batch(entries: &[SourceEntry]) -> RecordBatch {
    let mut source = StringBuilder::new();
    let mut kind = StringBuilder::new();
    let mut path = StringBuilder::new();
    let mut size = Int64Builder::new();
    let mut unit = StringBuilder::new();
    let mut generation = StringBuilder::new();
    let mut rows = Int64Builder::new();
    let mut rejects = Int64Builder::new();
    let mut rank = Int64Builder::new();
    let mut node = StringBuilder::new();
    let mut device = StringBuilder::new();
    let mut pid = Int64Builder::new();
    for e in entries {
        rank.append_value(e.rank);
        node.append_value(&e.node);
        device.append_option(e.device.as_deref());
        pid.append_option(e.pid);
        source.append_value(&e.source);
        kind.append_value(&e.kind);
        path.append_value(&e.path);
        size.append_value(e.size_bytes as i64);
        unit.append_option(e.ts_unit.as_deref());
        generation.append_option(e.generation.as_deref());
        rows.append_value(e.rows as i64);
        rejects.append_value(e.rejects as i64);
    }
    sources()
        .batch(vec![
            ("source", Arc::new(source.finish()) as ArrayRef),
            ("kind", Arc::new(kind.finish())),
            ("path", Arc::new(path.finish())),
            ("size_bytes", Arc::new(size.finish())),
            ("ts_unit", Arc::new(unit.finish())),
            ("generation", Arc::new(generation.finish())),
            ("rows", Arc::new(rows.finish())),
            ("rejects", Arc::new(rejects.finish())),
            ("rank", Arc::new(rank.finish())),
            ("node", Arc::new(node.finish())),
            ("device", Arc::new(device.finish())),
            ("pid", Arc::new(pid.finish())),
        ])
        .expect("every sources column is given once")
}

pub fn rejects() -> TableDef {
    TableDef {
        name: "rejects",
        doc: "Every input record that could not be parsed, kept verbatim.",
        sort_order: &[],
        columns: vec![
            req("source", Utf8, "input file"),
            req(
                "line",
                UInt64,
                "1-based line where the record starts (db: rowid)",
            ),
            req(
                "byte_offset",
                UInt64,
                "byte offset of the record in the file",
            ),
            req("reason", Utf8, "why the record was rejected"),
            req(
                "text",
                Utf8,
                "the record's text (invalid UTF-8 replaced by U+FFFD)",
            ),
            req("raw", Binary, "the record's exact bytes"),
        ],
    }
}

pub fn sources() -> TableDef {
    TableDef {
        name: "sources",
        doc: "Every input file of the dataset, with what ingest found in it and where in the job it comes from (rank, node, device, pid: docs/scale-out.md). Every other table has a column `rank` (BIGINT, the source's rank) and its files are laid out by it.",
        sort_order: &[],
        columns: vec![
            req("source", Utf8, "source name used in the other tables"),
            req(
                "kind",
                Utf8,
                "memscope_csv, memscope_db, python_trace (msMemScope's), memory_compare, config, \
                 snapshot, profiler_memory_record, profiler_operator_memory, kineto_trace",
            ),
            req("path", Utf8, "absolute path at ingest time"),
            req("size_bytes", Int64, "file size").bytes(),
            col(
                "ts_unit",
                Utf8,
                "timestamp unit of the source as written: ns or us",
            ),
            col(
                "generation",
                Utf8,
                "format generation guessed for memscope dumps: G1, G2, G3",
            ),
            req("rows", Int64, "rows ingested").unit(Unit::Count),
            req("rejects", Int64, "records rejected").unit(Unit::Count),
            req(
                "rank",
                Int64,
                "rank of the job the source belongs to: written in its path (rank3, rank_3), else processes numbered by node, NPU, pid",
            ),
            req(
                "node",
                Utf8,
                "machine of the job: the nearest folder named node<N>/host<N>/worker<N>/…, else the input folder's name",
            ),
            col(
                "device",
                Utf8,
                "NPU of the rank (lowest device_<N> folder of its process); NULL when the path names none",
            ),
            col(
                "pid",
                Int64,
                "process id of the rank, from its project folder msmemscope_<PID>_…; NULL when none",
            ),
        ],
    }
}
