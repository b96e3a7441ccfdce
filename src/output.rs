//! Result printers (table, csv, tsv, json, ndjson, markdown) and file writers chosen by
//! extension (.parquet, .csv, .tsv, .json, .ndjson, .md).

use std::fs::File;
use std::io::Write;
use std::path::Path;

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::datatypes::{DataType, Field, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::arrow::util::pretty::pretty_format_batches_with_options;

use memq_core::catalog::Unit;
use memq_core::dataset::ParquetSink;
use memq_core::error::{Location, MemqError, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Csv,
    Tsv,
    Json,
    Ndjson,
    Markdown,
}

impl Format {
    pub fn parse(s: &str) -> Option<Format> {
        <Format as clap::ValueEnum>::from_str(s, true).ok()
    }
}

/// How byte columns are shown in table format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BytesDisplay {
    Raw,
    Human,
}

fn options() -> FormatOptions<'static> {
    FormatOptions::default().with_null("NULL")
}

/// True for integer columns whose unit (Arrow field metadata, from the catalog or the SQL
/// library's `@column` lines) is bytes.
pub fn is_byte_column(field: &Field) -> bool {
    matches!(
        field.data_type(),
        DataType::Int64 | DataType::UInt64 | DataType::Int32
    ) && Unit::of(field) == Unit::Bytes
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

/// Rewrites byte columns as human-readable text (for table display only).
fn humanize(batches: &[RecordBatch]) -> Result<Vec<RecordBatch>> {
    use datafusion::arrow::compute::cast;
    use datafusion::arrow::datatypes::Int64Type;
    batches
        .iter()
        .map(|b| {
            columns_as_text(
                b,
                |f| is_byte_column(f),
                |c| {
                    let ints = cast(c, &DataType::Int64)?;
                    Ok(ints
                        .as_primitive::<Int64Type>()
                        .iter()
                        .map(|v| v.map(memq_core::function::format_bytes))
                        .collect())
                },
            )
        })
        .collect()
}

/// Renders batches in `format`.
pub fn render(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    format: Format,
    bytes: BytesDisplay,
) -> Result<String> {
    let mut buf = Vec::new();
    match format {
        Format::Table => {
            if batches.iter().all(|b| b.num_rows() == 0) {
                let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
                return Ok(format!("(0 rows: {})\n", names.join(", ")));
            }
            let shown = if bytes == BytesDisplay::Human {
                humanize(batches)?
            } else {
                batches.to_vec()
            };
            let table = pretty_format_batches_with_options(&shown, &options())?;
            let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
            return Ok(format!(
                "{table}\n{rows} row{}\n",
                if rows == 1 { "" } else { "s" }
            ));
        }
        Format::Csv | Format::Tsv => {
            let delim = if format == Format::Csv { b',' } else { b'\t' };
            let mut w = datafusion::arrow::csv::WriterBuilder::new()
                .with_delimiter(delim)
                .with_header(true)
                .build(&mut buf);
            if batches.is_empty() {
                w.write(&flatten_nested(&RecordBatch::new_empty(schema.clone()))?)?;
            }
            for b in batches {
                w.write(&flatten_nested(b)?)?;
            }
        }
        Format::Json => {
            let mut w = datafusion::arrow::json::ArrayWriter::new(&mut buf);
            let refs: Vec<&RecordBatch> = batches.iter().collect();
            w.write_batches(&refs)?;
            w.finish()?;
            if refs.is_empty() || refs.iter().all(|b| b.num_rows() == 0) {
                buf = b"[]".to_vec();
            }
            buf.push(b'\n');
        }
        Format::Ndjson => {
            let mut w = datafusion::arrow::json::LineDelimitedWriter::new(&mut buf);
            let refs: Vec<&RecordBatch> = batches.iter().collect();
            w.write_batches(&refs)?;
            w.finish()?;
        }
        Format::Markdown => return markdown(schema, batches),
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
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

fn markdown(schema: &SchemaRef, batches: &[RecordBatch]) -> Result<String> {
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    let mut out = format!(
        "| {} |\n|{}|\n",
        names.join(" | "),
        names.iter().map(|_| "---").collect::<Vec<_>>().join("|")
    );
    let opts = options();
    for b in batches {
        let fmts = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &opts))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        for row in 0..b.num_rows() {
            let cells: Vec<String> = fmts
                .iter()
                .map(|f| {
                    f.value(row)
                        .to_string()
                        .replace('|', "\\|")
                        .replace('\n', "<br>")
                })
                .collect();
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
    }
    Ok(out)
}

/// Writes batches to `path`, the writer chosen by extension. Written to a temporary name first
/// and renamed, so a failed write never leaves a partial file under the final name.
pub fn write_file(path: &Path, schema: &SchemaRef, batches: &[RecordBatch]) -> Result<u64> {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(
        ".{}.tmp-{}",
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        std::process::id()
    ));
    let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
    let result = (|| -> Result<()> {
        match ext.as_str() {
            "parquet" => {
                let mut sink = ParquetSink::create(&tmp, schema.clone())?;
                for b in batches {
                    sink.write(b)?;
                }
                sink.close()?;
            }
            "csv" | "tsv" | "json" | "ndjson" | "jsonl" | "md" => {
                let format = match ext.as_str() {
                    "csv" => Format::Csv,
                    "tsv" => Format::Tsv,
                    "json" => Format::Json,
                    "md" => Format::Markdown,
                    _ => Format::Ndjson,
                };
                let text = render(schema, batches, format, BytesDisplay::Raw)?;
                let mut f = File::create(&tmp).map_err(|e| MemqError::io(&tmp, e))?;
                f.write_all(text.as_bytes())
                    .map_err(|e| MemqError::io(&tmp, e))?;
            }
            _ => {
                return Err(MemqError::input(
                    path,
                    Location::None,
                    "unknown output extension: use .parquet, .csv, .tsv, .json, .ndjson or .md",
                ))
            }
        }
        std::fs::rename(&tmp, path).map_err(|e| MemqError::io(path, e))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map(|_| rows)
}
