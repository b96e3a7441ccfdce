//! The one statement path. `memq sql -e`, `memq run FILE...`, the shell and its `\i FILE` all
//! hand SQL text to [`run`]: it is parsed into statements, each statement's `$name`
//! placeholders are bound ([`crate::params`]), it is planned and collected; an error names the
//! text's origin and the failing statement. A result is then shown with [`PrintOptions`] or
//! written to a file with [`write`], which prints the one "N rows written" message.

use std::path::Path;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::prelude::SessionContext;

use memq_core::error::{MemqError, Result};

use crate::output::{self, BytesDisplay, Format};
use crate::params::{self, Params};

/// The result of one statement. DDL (`CREATE VIEW`, `SET`, ...) gives a result with no columns.
pub struct StatementResult {
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
}

impl StatementResult {
    /// True for a statement that returns rows (a query), false for DDL.
    pub fn has_columns(&self) -> bool {
        !self.schema.fields().is_empty()
    }
}

/// How results are shown on a terminal or a pipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrintOptions {
    pub format: Format,
    /// Byte columns (by their unit) humanized or raw; humanized only in table format.
    pub bytes: BytesDisplay,
}

impl PrintOptions {
    pub fn new(format: Format, raw_bytes: bool) -> PrintOptions {
        PrintOptions {
            format,
            bytes: if raw_bytes {
                BytesDisplay::Raw
            } else {
                BytesDisplay::Human
            },
        }
    }

    /// The result as text.
    pub fn render(&self, result: &StatementResult) -> Result<String> {
        let bytes = if self.format == Format::Table {
            self.bytes
        } else {
            BytesDisplay::Raw
        };
        output::render(&result.schema, &result.batches, self.format, bytes)
    }

    /// Prints the result on stdout.
    pub fn print(&self, result: &StatementResult) -> Result<()> {
        print!("{}", self.render(result)?);
        Ok(())
    }
}

/// Where a text of statements comes from, for error messages: `q.sql: statement 2: ...`.
fn place(origin: &str, index: usize, many: bool) -> String {
    match (origin.is_empty(), many) {
        (true, false) => String::new(),
        (true, true) => format!("statement {}: ", index + 1),
        (false, false) => format!("{origin}: "),
        (false, true) => format!("{origin}: statement {}: ", index + 1),
    }
}

/// Runs every statement of `sql` in order, binding `params`. `origin` names the text in errors
/// (a file name; empty for text typed or given with `-e`).
pub async fn run(
    ctx: &SessionContext,
    sql: &str,
    params: &Params,
    origin: &str,
) -> Result<Vec<StatementResult>> {
    let statements = params::parse_statements(ctx, sql)
        .map_err(|e| MemqError::Query(format!("{}{e}", place(origin, 0, false))))?;
    if statements.is_empty() {
        return Err(MemqError::Query(format!(
            "{}no statement",
            place(origin, 0, false)
        )));
    }
    let many = statements.len() > 1;
    let mut out = Vec::new();
    for (i, stmt) in statements.into_iter().enumerate() {
        let at = |e: MemqError| MemqError::Query(format!("{}{e}", place(origin, i, many)));
        let df = params::plan_statement(ctx, stmt, params).await.map_err(at)?;
        let units = memq_engine::units::units(df.logical_plan());
        let mut schema = memq_engine::units::annotate(df.schema().inner(), &units);
        let batches = df
            .collect()
            .await
            .map_err(|e| at(e.into()))?
            .into_iter()
            .map(|b| {
                let annotated = memq_engine::units::annotate(&b.schema(), &units);
                b.with_schema(annotated)
            })
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| at(e.into()))?;
        if let Some(b) = batches.first() {
            schema = b.schema();
        }
        out.push(StatementResult { schema, batches });
    }
    Ok(out)
}

/// Writes a result to `path` (the writer chosen by its extension) and says so on stderr.
pub fn write(result: &StatementResult, path: &Path) -> Result<u64> {
    let rows = output::write_file(path, &result.schema, &result.batches)?;
    eprintln!("{}", written_message(rows, path));
    Ok(rows)
}

/// `1 row written to x.parquet`, `5 rows written to ...`.
pub fn written_message(rows: u64, path: &Path) -> String {
    format!(
        "{rows} row{} written to {}",
        if rows == 1 { "" } else { "s" },
        path.display()
    )
}
