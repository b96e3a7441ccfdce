//! One dump row, and the builder that turns rows into `events` batches with typed Attr columns.

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BooleanBuilder, Int32Builder, Int64Builder, StringBuilder, UInt64Builder,
};
use datafusion::arrow::record_batch::RecordBatch;

use crate::parse::attr;
use crate::parse::counts::{EventCounts, Observed};

/// One row of a dump, as read from CSV or db, before typing the Attr.
#[derive(Debug, Default, Clone)]
pub struct EventRow {
    pub row_idx: u64,
    pub line: u64,
    pub id: i64,
    pub event: String,
    pub event_type: String,
    pub name: Option<String>,
    pub ts_raw: Option<i64>,
    pub pid: Option<i64>,
    pub tid: Option<i64>,
    pub device: String,
    pub ptr: Option<u64>,
    /// Attr in the dump's own `{k:v}` form; empty when the cell was empty.
    pub attr: String,
    pub stack_py: Option<String>,
    pub stack_c: Option<String>,
}

/// One row borrowed from the bytes it was read from (the CSV reader's form: no per-row
/// allocation).
#[derive(Debug, Default, Clone, Copy)]
pub struct EventRef<'a> {
    pub row_idx: u64,
    pub line: u64,
    pub id: i64,
    pub event: &'a str,
    pub event_type: &'a str,
    pub name: Option<&'a str>,
    pub ts_raw: Option<i64>,
    pub pid: Option<i64>,
    pub tid: Option<i64>,
    pub device: &'a str,
    pub ptr: Option<u64>,
    pub attr: &'a str,
    pub stack_py: Option<&'a str>,
    pub stack_c: Option<&'a str>,
}

impl EventRow {
    pub fn as_ref(&self) -> EventRef<'_> {
        EventRef {
            row_idx: self.row_idx,
            line: self.line,
            id: self.id,
            event: &self.event,
            event_type: &self.event_type,
            name: self.name.as_deref(),
            ts_raw: self.ts_raw,
            pid: self.pid,
            tid: self.tid,
            device: &self.device,
            ptr: self.ptr,
            attr: &self.attr,
            stack_py: self.stack_py.as_deref(),
            stack_c: self.stack_c.as_deref(),
        }
    }
}

impl EventRef<'_> {
    /// The text bytes the row adds to an events batch.
    pub fn text_bytes(&self) -> usize {
        self.event.len()
            + self.event_type.len()
            + self.name.map_or(0, str::len)
            + self.device.len()
            + self.attr.len()
            + self.stack_py.map_or(0, str::len)
            + self.stack_c.map_or(0, str::len)
    }
}

/// What the rows of one source revealed about its format generation (docs/formats/memscope.md §0).
#[derive(Debug, Default, Clone, Copy)]
pub struct GenerationHints {
    pub microseconds: bool,
    pub decimal_ptr: bool,
    pub g3_feature: bool,
}

impl GenerationHints {
    pub fn label(&self) -> &'static str {
        if self.microseconds || self.decimal_ptr {
            "G1"
        } else if self.g3_feature {
            "G3"
        } else {
            "G2"
        }
    }

    pub fn observe(&mut self, row: &EventRow, items: &[(&str, &str)]) {
        self.observe_ref(&row.as_ref(), items)
    }

    pub fn observe_ref(&mut self, row: &EventRef, items: &[(&str, &str)]) {
        if self.g3_feature {
            return;
        }
        if matches!(row.event, "SNAPSHOT" | "OOM_DETAIL" | "HOST_PINNED")
            || row.event_type == "HOST_PINNED"
            || row.event_type == "STEP"
            || items
                .iter()
                .any(|(k, _)| matches!(*k, "shadow" | "page_type" | "alloc_type"))
        {
            self.g3_feature = true;
        }
    }
}

/// Builds `events` record batches.
pub struct EventsBuilder {
    source: String,
    /// Multiplier from the source's timestamp unit to ns.
    ts_scale: i64,
    source_b: StringBuilder,
    row_idx: UInt64Builder,
    line: UInt64Builder,
    id: Int64Builder,
    event: StringBuilder,
    event_type: StringBuilder,
    name: StringBuilder,
    ts: Int64Builder,
    ts_raw: Int64Builder,
    pid: Int64Builder,
    tid: Int64Builder,
    device: StringBuilder,
    device_index: Int32Builder,
    ptr: UInt64Builder,
    attr: StringBuilder,
    size: Int64Builder,
    total: Int64Builder,
    used: Int64Builder,
    process_used: Int64Builder,
    device_used: Int64Builder,
    allocation_id: Int64Builder,
    owner: StringBuilder,
    shadow: BooleanBuilder,
    alloc_type: StringBuilder,
    page_type: StringBuilder,
    inefficient: StringBuilder,
    module_id: Int32Builder,
    stack_py: StringBuilder,
    stack_c: StringBuilder,
    len: usize,
    /// The rows appended so far, counted by group (table `event_counts`).
    counts: EventCounts,
}

/// The typed Attr keys of `events`.
#[derive(Default)]
struct TypedAttr<'a> {
    size: Option<i64>,
    total: Option<i64>,
    used: Option<i64>,
    process_used: Option<i64>,
    device_used: Option<i64>,
    allocation_id: Option<i64>,
    owner: Option<&'a str>,
    shadow: bool,
    alloc_type: Option<&'a str>,
    page_type: Option<&'a str>,
    inefficient: Option<&'a str>,
    module_id: Option<i32>,
}

impl<'a> TypedAttr<'a> {
    fn from_items(items: &[(&'a str, &'a str)]) -> Self {
        let mut t = TypedAttr::default();
        for &(k, v) in items {
            match k {
                "size" => t.size = attr::parse_int(v),
                "total" => t.total = attr::parse_int(v),
                "used" => t.used = attr::parse_int(v),
                "process_used" => t.process_used = attr::parse_int(v),
                "device_used" => t.device_used = attr::parse_int(v),
                "allocation_id" => t.allocation_id = attr::parse_int(v),
                "owner" if !v.is_empty() => t.owner = Some(v),
                "shadow" => t.shadow = v == "true",
                "alloc_type" => t.alloc_type = Some(v),
                "page_type" => t.page_type = Some(v),
                "inefficient_type" | "inefficient" | "inefficient type" => t.inefficient = Some(v),
                "MID" => t.module_id = attr::parse_int(v).and_then(|m| i32::try_from(m).ok()),
                _ => {}
            }
        }
        t
    }
}

/// Device Id as an integer, when it is one.
pub fn device_index(device: &str) -> Option<i32> {
    device.trim().parse::<i32>().ok()
}

/// The rows of a batch and the text bytes of each string column of `events` (in the order of
/// [`EventsBuilder::texts`]): the size a builder is given for the next batch, so its columns
/// are allocated once instead of doubled from empty, each doubling a copy into fresh pages
/// (about a third of the page faults of an ingest: docs/performance.md).
#[derive(Debug, Clone, Copy, Default)]
pub struct BatchSizes {
    rows: usize,
    text: [usize; 12],
}

impl EventsBuilder {
    pub fn new(source: &str, ts_scale: i64) -> Self {
        Self::with_sizes(source, ts_scale, BatchSizes::default())
    }

    /// A builder whose columns have room for a batch of `sizes`.
    pub fn with_sizes(source: &str, ts_scale: i64, sizes: BatchSizes) -> Self {
        let n = sizes.rows;
        let text = |i: usize| StringBuilder::with_capacity(n, sizes.text[i]);
        EventsBuilder {
            source: source.to_string(),
            ts_scale,
            source_b: text(0),
            row_idx: UInt64Builder::with_capacity(n),
            line: UInt64Builder::with_capacity(n),
            id: Int64Builder::with_capacity(n),
            event: text(1),
            event_type: text(2),
            name: text(3),
            ts: Int64Builder::with_capacity(n),
            ts_raw: Int64Builder::with_capacity(n),
            pid: Int64Builder::with_capacity(n),
            tid: Int64Builder::with_capacity(n),
            device: text(4),
            device_index: Int32Builder::with_capacity(n),
            ptr: UInt64Builder::with_capacity(n),
            attr: text(5),
            size: Int64Builder::with_capacity(n),
            total: Int64Builder::with_capacity(n),
            used: Int64Builder::with_capacity(n),
            process_used: Int64Builder::with_capacity(n),
            device_used: Int64Builder::with_capacity(n),
            allocation_id: Int64Builder::with_capacity(n),
            owner: text(6),
            shadow: BooleanBuilder::with_capacity(n),
            alloc_type: text(7),
            page_type: text(8),
            inefficient: text(9),
            module_id: Int32Builder::with_capacity(n),
            stack_py: text(10),
            stack_c: text(11),
            len: 0,
            counts: EventCounts::default(),
        }
    }

    /// The string columns, in the order of [`BatchSizes`].
    fn texts(&self) -> [&StringBuilder; 12] {
        [
            &self.source_b,
            &self.event,
            &self.event_type,
            &self.name,
            &self.device,
            &self.attr,
            &self.owner,
            &self.alloc_type,
            &self.page_type,
            &self.inefficient,
            &self.stack_py,
            &self.stack_c,
        ]
    }

    /// The size of the rows appended since the last batch.
    pub fn sizes(&self) -> BatchSizes {
        BatchSizes {
            rows: self.len,
            text: self.texts().map(|b| b.values_slice().len()),
        }
    }

    pub fn set_ts_scale(&mut self, scale: i64) {
        self.ts_scale = scale;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends a row whose Attr has already been split into `items`.
    pub fn append(&mut self, row: &EventRow, items: &[(&str, &str)]) {
        self.append_ref(&row.as_ref(), items)
    }

    /// Appends a borrowed row whose Attr has already been split into `items`.
    pub fn append_ref(&mut self, row: &EventRef, items: &[(&str, &str)]) {
        let t = TypedAttr::from_items(items);
        let ts = row.ts_raw.and_then(|t| t.checked_mul(self.ts_scale));
        self.counts.observe(&Observed {
            pid: row.pid,
            device: row.device,
            event: row.event,
            event_type: row.event_type,
            ts,
            ts_raw: row.ts_raw,
            has_owner: t.owner.is_some(),
            shadow: t.shadow,
            stack_py: row.stack_py,
            stack_c: row.stack_c,
            has_counter: t.used.is_some() || t.total.is_some(),
            device_used: t.device_used,
            size: t.size,
        });
        self.source_b.append_value(&self.source);
        self.row_idx.append_value(row.row_idx);
        self.line.append_value(row.line);
        self.id.append_value(row.id);
        self.event.append_value(row.event);
        self.event_type.append_value(row.event_type);
        self.name.append_option(row.name);
        // SourceOutput checks the conversion first (a row that overflows is a reject, never a
        // saturated value).
        self.ts.append_option(ts);
        self.ts_raw.append_option(row.ts_raw);
        self.pid.append_option(row.pid);
        self.tid.append_option(row.tid);
        self.device.append_value(row.device);
        self.device_index.append_option(device_index(row.device));
        self.ptr.append_option(row.ptr);
        self.attr
            .append_option((!row.attr.is_empty()).then_some(row.attr));
        self.size.append_option(t.size);
        self.total.append_option(t.total);
        self.used.append_option(t.used);
        self.process_used.append_option(t.process_used);
        self.device_used.append_option(t.device_used);
        self.allocation_id.append_option(t.allocation_id);
        self.owner.append_option(t.owner);
        self.shadow.append_value(t.shadow);
        self.alloc_type.append_option(t.alloc_type);
        self.page_type.append_option(t.page_type);
        self.inefficient.append_option(t.inefficient);
        self.module_id.append_option(t.module_id);
        self.stack_py.append_option(row.stack_py);
        self.stack_c.append_option(row.stack_c);
        self.len += 1;
    }

    /// The group counts of every row appended so far; the builder starts counting anew.
    pub fn take_counts(&mut self) -> EventCounts {
        std::mem::take(&mut self.counts)
    }

    /// The rows appended since the last call, as one batch. The builder is then sized for
    /// another batch like it.
    pub fn finish(&mut self) -> RecordBatch {
        let sizes = self.sizes();
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("source", Arc::new(self.source_b.finish()) as ArrayRef),
            ("row_idx", Arc::new(self.row_idx.finish())),
            ("line", Arc::new(self.line.finish())),
            ("id", Arc::new(self.id.finish())),
            ("event", Arc::new(self.event.finish())),
            ("event_type", Arc::new(self.event_type.finish())),
            ("name", Arc::new(self.name.finish())),
            ("ts", Arc::new(self.ts.finish())),
            ("ts_raw", Arc::new(self.ts_raw.finish())),
            ("pid", Arc::new(self.pid.finish())),
            ("tid", Arc::new(self.tid.finish())),
            ("device", Arc::new(self.device.finish())),
            ("device_index", Arc::new(self.device_index.finish())),
            ("ptr", Arc::new(self.ptr.finish())),
            ("attr", Arc::new(self.attr.finish())),
            ("size", Arc::new(self.size.finish())),
            ("total", Arc::new(self.total.finish())),
            ("used", Arc::new(self.used.finish())),
            ("process_used", Arc::new(self.process_used.finish())),
            ("device_used", Arc::new(self.device_used.finish())),
            ("allocation_id", Arc::new(self.allocation_id.finish())),
            ("owner", Arc::new(self.owner.finish())),
            ("shadow", Arc::new(self.shadow.finish())),
            ("alloc_type", Arc::new(self.alloc_type.finish())),
            ("page_type", Arc::new(self.page_type.finish())),
            ("inefficient", Arc::new(self.inefficient.finish())),
            ("module_id", Arc::new(self.module_id.finish())),
            ("stack_py", Arc::new(self.stack_py.finish())),
            ("stack_c", Arc::new(self.stack_c.finish())),
        ];
        let counts = std::mem::take(&mut self.counts);
        *self = EventsBuilder {
            counts,
            ..Self::with_sizes(&self.source, self.ts_scale, sizes)
        };
        crate::schema::events()
            .batch(columns)
            .expect("every events column is given once")
    }
}
