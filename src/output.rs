//! Result printers (table, csv, tsv, json, ndjson, markdown) and file writers chosen by
//! extension (.parquet, .csv, .tsv, .json, .ndjson, .md).

use std::fs::File;
use std::io::Write;
use std::path::Path;

use datafusion::arrow::array::{Array, ArrayRef};
use datafusion::arrow::datatypes::{DataType, Field, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};

use memq_core::dataset::ParquetSink;
use memq_core::error::{Location, MemqError, Result};

pub mod cells;
mod chart;
mod table;
pub use cells::{format_float, CellStyle};
use chart::ChartView;
pub use table::{cut_left, cut_right, text_width, TableOptions, TableView, DEFAULT_MAX_ROWS};

/// Every way memq writes a result: to the terminal (table, line, chart: for a person), to
/// stdout or a file as text (csv, tsv, json, ndjson, markdown), or to a file only (parquet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Table,
    Csv,
    Tsv,
    Json,
    Ndjson,
    Markdown,
    /// The table view as one `column | value` record per row (`\x`).
    Line,
    /// A terminal chart of the result's first numeric column over its first column.
    Chart,
    /// Apache Parquet: a file only (`-o x.parquet`, `memq export`, `memq run -o DIR`).
    Parquet,
}

impl Format {
    pub fn parse(s: &str) -> Option<Format> {
        <Format as clap::ValueEnum>::from_str(s, true).ok()
    }

    /// The name `parse` reads (`table`, `csv`, …).
    pub fn name(self) -> String {
        clap::ValueEnum::to_possible_value(&self)
            .map(|v| v.get_name().to_string())
            .unwrap_or_default()
    }

    /// Formats for a person at a terminal: units applied, rows bounded (table, line, chart).
    pub fn is_for_reading(self) -> bool {
        matches!(self, Format::Table | Format::Line | Format::Chart)
    }

    /// The extension of a file in this format; `None` for the terminal's formats.
    pub fn ext(self) -> Option<&'static str> {
        match self {
            Format::Parquet => Some("parquet"),
            Format::Csv => Some("csv"),
            Format::Tsv => Some("tsv"),
            Format::Json => Some("json"),
            Format::Ndjson => Some("ndjson"),
            Format::Markdown => Some("md"),
            Format::Table | Format::Line | Format::Chart => None,
        }
    }
}

/// How values with a unit (bytes, times, durations, percentages) and floats are shown in table
/// format: readably (`Human`) or as stored (`Raw`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BytesDisplay {
    Raw,
    Human,
}

fn options() -> FormatOptions<'static> {
    FormatOptions::default().with_null("NULL")
}

/// Replaces the columns `pick` selects with text columns made by `to_text`.
fn columns_as_text(
    batch: &RecordBatch,
    pick: impl Fn(&Field) -> bool,
    to_text: impl Fn(&ArrayRef) -> Result<datafusion::arrow::array::StringArray>,
) -> Result<RecordBatch> {
    use datafusion::arrow::datatypes::Schema;
    use std::sync::Arc;
    let schema = batch.schema();
    if !schema.fields().iter().any(|f| pick(f)) {
        return Ok(batch.clone());
    }
    let mut fields = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    for (f, c) in schema.fields().iter().zip(batch.columns()) {
        if pick(f) {
            fields.push(Field::new(f.name(), DataType::Utf8, true));
            columns.push(Arc::new(to_text(c)?));
        } else {
            fields.push(f.as_ref().clone());
            columns.push(c.clone());
        }
    }
    Ok(RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns,
    )?)
}

/// Renders batches in `format` (the table view with every row and no width limit).
pub fn render(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    format: Format,
    bytes: BytesDisplay,
) -> Result<String> {
    let table = TableOptions {
        max_rows: 0,
        width: None,
        bytes,
        origin_ns: None,
        steps: None,
        vertical: false,
    };
    let mut w = ResultWriter::new(Vec::new(), schema, format, table)?;
    for b in batches {
        w.write(b)?;
    }
    let (_, buf) = w.finish()?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

// One writer per result, never held in a collection: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Inner<W: Write> {
    Table(TableView, W),
    Chart(ChartView, W),
    Csv(datafusion::arrow::csv::Writer<W>, bool),
    Json(datafusion::arrow::json::ArrayWriter<W>),
    Ndjson(datafusion::arrow::json::LineDelimitedWriter<W>),
    Markdown(W),
}

/// Writes a result batch by batch in one of the text formats: memory stays bounded by one
/// batch (the table view keeps its head and tail only). Each batch is flushed, so a reader
/// sees rows as they come.
pub struct ResultWriter<W: Write> {
    inner: Inner<W>,
    schema: SchemaRef,
    rows: u64,
}

fn io_err(e: std::io::Error) -> MemqError {
    MemqError::Query(format!("cannot write the result: {e}"))
}

impl<W: Write> ResultWriter<W> {
    pub fn new(
        mut out: W,
        schema: &SchemaRef,
        format: Format,
        table: TableOptions,
    ) -> Result<ResultWriter<W>> {
        let inner = match format {
            Format::Table => Inner::Table(TableView::new(schema.clone(), table), out),
            Format::Line => Inner::Table(
                TableView::new(
                    schema.clone(),
                    TableOptions {
                        vertical: true,
                        ..table
                    },
                ),
                out,
            ),
            Format::Chart => Inner::Chart(ChartView::new(schema.clone(), table), out),
            Format::Csv | Format::Tsv => {
                let delim = if format == Format::Csv { b',' } else { b'\t' };
                let w = datafusion::arrow::csv::WriterBuilder::new()
                    .with_delimiter(delim)
                    .with_header(true)
                    .build(out);
                Inner::Csv(w, false)
            }
            Format::Json => Inner::Json(datafusion::arrow::json::ArrayWriter::new(out)),
            Format::Ndjson => Inner::Ndjson(datafusion::arrow::json::LineDelimitedWriter::new(out)),
            Format::Parquet => {
                return Err(MemqError::Usage(
                    "parquet is written to a file: give -o FILE.parquet (or memq export -o DIR)"
                        .into(),
                ))
            }
            Format::Markdown => {
                let names: Vec<String> = schema
                    .fields()
                    .iter()
                    .map(|f| markdown_cell(f.name()))
                    .collect();
                write!(
                    out,
                    "| {} |\n|{}|\n",
                    names.join(" | "),
                    names.iter().map(|_| "---").collect::<Vec<_>>().join("|")
                )
                .map_err(io_err)?;
                Inner::Markdown(out)
            }
        };
        Ok(ResultWriter {
            inner,
            schema: schema.clone(),
            rows: 0,
        })
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Writes one batch.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.rows += batch.num_rows() as u64;
        match &mut self.inner {
            Inner::Table(t, out) => {
                if let Some(text) = t.push(batch)? {
                    out.write_all(text.as_bytes()).map_err(io_err)?;
                    out.flush().map_err(io_err)?;
                }
            }
            Inner::Chart(c, _) => c.push(batch)?,
            Inner::Csv(w, started) => {
                if batch.num_rows() > 0 || !*started {
                    w.write(&flatten_nested(batch)?)?;
                    *started = true;
                }
            }
            Inner::Json(w) => w.write(batch)?,
            Inner::Ndjson(w) => w.write(batch)?,
            Inner::Markdown(out) => {
                out.write_all(markdown_rows(batch)?.as_bytes())
                    .map_err(io_err)?;
            }
        }
        Ok(())
    }

    /// Ends the result (the table's tail and footer, the JSON array's `]`); returns the rows
    /// written and the writer.
    pub fn finish(self) -> Result<(u64, W)> {
        let rows = self.rows;
        let out = match self.inner {
            Inner::Table(t, mut out) => {
                out.write_all(t.finish().as_bytes()).map_err(io_err)?;
                out
            }
            Inner::Chart(c, mut out) => {
                out.write_all(c.finish().as_bytes()).map_err(io_err)?;
                out
            }
            Inner::Csv(mut w, started) => {
                if !started {
                    w.write(&flatten_nested(&RecordBatch::new_empty(
                        self.schema.clone(),
                    ))?)?;
                }
                w.into_inner()
            }
            Inner::Json(mut w) => {
                w.finish()?;
                let mut out = w.into_inner();
                out.write_all(b"\n").map_err(io_err)?;
                out
            }
            Inner::Ndjson(mut w) => {
                w.finish()?;
                w.into_inner()
            }
            Inner::Markdown(out) => out,
        };
        let mut out = out;
        out.flush().map_err(io_err)?;
        Ok((rows, out))
    }

    /// Ends a result whose rows stopped coming (Ctrl-C): the table's bottom border and a note.
    pub fn interrupted(self) -> Result<()> {
        if let Inner::Table(t, mut out) = self.inner {
            out.write_all(t.interrupted().as_bytes()).map_err(io_err)?;
            out.flush().map_err(io_err)?;
        }
        Ok(())
    }
}

/// CSV cannot hold lists or structs: such columns are written as their display text
/// (`[a, b]`, `{k: v}`).
fn flatten_nested(batch: &RecordBatch) -> Result<RecordBatch> {
    let opts = options();
    columns_as_text(
        batch,
        |f| f.data_type().is_nested(),
        |c| {
            let fmt = ArrayFormatter::try_new(c.as_ref(), &opts)?;
            Ok((0..c.len())
                .map(|i| (!c.is_null(i)).then(|| fmt.value(i).to_string()))
                .collect())
        },
    )
}

/// A Markdown table cell: `|` escaped, newlines as `<br>`, `<`, `>` and `&` as entities (a
/// `<module>` frame would otherwise be read as an HTML tag).
fn markdown_cell(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('|', "\\|")
        .replace('\n', "<br>")
}

fn markdown_rows(b: &RecordBatch) -> Result<String> {
    let opts = options();
    let fmts = b
        .columns()
        .iter()
        .map(|c| ArrayFormatter::try_new(c.as_ref(), &opts))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let mut out = String::new();
    for row in 0..b.num_rows() {
        let cells: Vec<String> = fmts
            .iter()
            .map(|f| markdown_cell(&f.value(row).to_string()))
            .collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    Ok(out)
}

/// The format a file extension stands for (`None` for Parquet), or an error for an unknown one.
pub fn file_format(path: &Path) -> Result<Format> {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    Ok(match ext.as_str() {
        "parquet" => Format::Parquet,
        "csv" => Format::Csv,
        "tsv" => Format::Tsv,
        "json" => Format::Json,
        "md" => Format::Markdown,
        "ndjson" | "jsonl" => Format::Ndjson,
        _ => {
            return Err(MemqError::input(
                path,
                Location::None,
                "unknown output extension: use .parquet, .csv, .tsv, .json, .ndjson or .md",
            ))
        }
    })
}

/// Arrow bytes per row group of a result file (`-o x.parquet`): the query's own buffers run
/// beside the writer's open row group, so it is kept smaller than a dataset table's.
const RESULT_GROUP_BYTES: usize = 32 << 20;

enum FileInner {
    Parquet(ParquetSink),
    Text(ResultWriter<std::io::BufWriter<File>>),
}

/// A result file being written batch by batch, the writer chosen by the extension. It is
/// written under a temporary name beside it and renamed by [`FileSink::finish`]; dropped
/// unfinished (an error, Ctrl-C), the temporary file is removed and `path` is left as it was.
pub struct FileSink {
    path: std::path::PathBuf,
    tmp: std::path::PathBuf,
    inner: Option<FileInner>,
}

impl FileSink {
    pub fn create(path: &Path, schema: &SchemaRef) -> Result<FileSink> {
        let format = file_format(path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.is_dir() {
                return Err(MemqError::input(
                    path,
                    Location::None,
                    format!("cannot write: the folder {} does not exist", dir.display()),
                ));
            }
        }
        let tmp = path.with_file_name(format!(
            ".{}.tmp-{}",
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            std::process::id()
        ));
        // Errors name the file asked for, not the temporary one.
        let named = |e: MemqError| match e {
            MemqError::Input {
                location, reason, ..
            } => MemqError::Input {
                path: path.to_path_buf(),
                location,
                reason,
            },
            other => other,
        };
        let inner = match format {
            Format::Parquet => FileInner::Parquet(
                ParquetSink::create(&tmp, schema.clone())
                    .map_err(named)?
                    .with_group_bytes(RESULT_GROUP_BYTES),
            ),
            f => {
                let file = File::create(&tmp).map_err(|e| MemqError::io(path, e))?;
                FileInner::Text(ResultWriter::new(
                    std::io::BufWriter::new(file),
                    schema,
                    f,
                    TableOptions::default(),
                )?)
            }
        };
        Ok(FileSink {
            path: path.to_path_buf(),
            tmp,
            inner: Some(inner),
        })
    }

    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        match self.inner.as_mut() {
            Some(FileInner::Parquet(s)) => s.write(batch),
            Some(FileInner::Text(w)) => w.write(batch),
            None => Ok(()),
        }
    }

    /// Completes the file under its name; returns the rows written.
    pub fn finish(mut self) -> Result<u64> {
        let rows = match self.inner.take() {
            Some(FileInner::Parquet(s)) => {
                let rows = s.rows();
                s.close()?;
                rows
            }
            Some(FileInner::Text(w)) => w.finish()?.0,
            None => 0,
        };
        std::fs::rename(&self.tmp, &self.path).map_err(|e| MemqError::io(&self.path, e))?;
        Ok(rows)
    }
}

impl Drop for FileSink {
    fn drop(&mut self) {
        if self.inner.is_some() || self.tmp.exists() {
            self.inner = None;
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Writes batches to `path`, the writer chosen by extension. Written to a temporary name first
/// and renamed, so a failed write never leaves a partial file under the final name.
pub fn write_file(path: &Path, schema: &SchemaRef, batches: &[RecordBatch]) -> Result<u64> {
    let mut sink = FileSink::create(path, schema)?;
    for b in batches {
        sink.write(b)?;
    }
    sink.finish()
}

/// Aligned columns, two spaces apart; the last column is not padded.
pub fn aligned_columns(rows: &[Vec<String>]) -> String {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..n)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            if i + 1 == r.len() {
                line.push_str(c);
            } else {
                line.push_str(&format!("{c:<w$}  ", w = widths[i]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
