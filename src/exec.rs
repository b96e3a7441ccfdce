//! The one statement path. `memq sql -e`, `memq run FILE...`, the shell and its `\i FILE` all
//! hand SQL text to [`run`]: it is parsed into statements, each statement's `$name`
//! placeholders are bound ([`crate::params`]), it is planned and collected; an error names the
//! text's origin and the failing statement. A result is then shown with [`PrintOptions`] or
//! written to a file with [`write`], which prints the one "N rows written" message.

use std::path::Path;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::prelude::SessionContext;

use datafusion::dataframe::DataFrame;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use futures::StreamExt;
use memq_core::error::{MemqError, Result};

use crate::output::{self, BytesDisplay, Format};
use crate::params::{self, Params};

/// The result of one statement. DDL (`CREATE VIEW`, `SET`, ...) gives a result with no columns.
pub struct StatementResult {
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
    /// The result's bytes, accounted in the session's memory pool while it is held.
    _memory: Option<MemoryReservation>,
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
    check_expression_size(sql)
        .map_err(|e| MemqError::Query(format!("{}{e}", place(origin, 0, false))))?;
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
        let df = params::plan_statement(ctx, stmt, params)
            .await
            .map_err(at)?;
        let units = memq_engine::units::units(df.logical_plan());
        let mut schema = memq_engine::units::annotate(df.schema().inner(), &units);
        let (batches, memory) = collect_bounded(ctx, df).await.map_err(at)?;
        let batches = batches
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
        out.push(StatementResult {
            schema,
            batches,
            _memory: Some(memory),
        });
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

/// The memory limit in MiB the session runs with (`--memory-limit`, `MEMQ_MEMORY_LIMIT_MB`).
fn limit_mib() -> String {
    std::env::var("MEMQ_MEMORY_LIMIT_MB").unwrap_or_else(|_| "8192".into())
}

/// Runs a planned statement and collects its result, each batch accounted in the session's
/// memory pool: a result bigger than `--memory-limit` is an error, not an abort (issue 13,
/// finding 3); so is an operator that cannot spill below the limit.
async fn collect_bounded(
    ctx: &SessionContext,
    df: DataFrame,
) -> Result<(Vec<RecordBatch>, MemoryReservation)> {
    let exhausted = |e: datafusion::error::DataFusionError| -> MemqError {
        let text = e.to_string();
        if text.contains("Resources exhausted") {
            MemqError::Query(format!(
                "the query needs more than the memory limit of {} MiB (--memory-limit): {text}",
                limit_mib()
            ))
        } else {
            e.into()
        }
    };
    let memory = MemoryConsumer::new("memq query result").register(&ctx.runtime_env().memory_pool);
    let mut stream = df.execute_stream().await.map_err(exhausted)?;
    let mut batches = Vec::new();
    while let Some(batch) = stream.next().await {
        let batch = batch.map_err(exhausted)?;
        if memory.try_grow(batch.get_array_memory_size()).is_err() {
            return Err(MemqError::Query(format!(
                "the query result needs more than the memory limit of {} MiB (--memory-limit); \
                 add a LIMIT or aggregate, or raise --memory-limit",
                limit_mib()
            )));
        }
        batches.push(batch);
    }
    Ok((batches, memory))
}

/// Operators in one statement beyond which it is refused before planning: DataFusion plans
/// and evaluates expressions recursively, so a chain of 100 000 `OR`s would overflow any
/// stack (issue 13, finding 2). With the big stacks memq runs on, 20 000 plan fine in a
/// debug build.
pub const MAX_EXPRESSION_OPERATORS: usize = 10_000;
/// Deepest nesting of brackets in one statement.
pub const MAX_NESTING: usize = 500;

/// Refuses a statement with more binary operators than MAX_EXPRESSION_OPERATORS or brackets
/// nested deeper than MAX_NESTING, from its tokens (no recursion).
pub fn check_expression_size(sql: &str) -> std::result::Result<(), String> {
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::keywords::Keyword;
    use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
    let Ok(tokens) = Tokenizer::new(&GenericDialect {}, sql).tokenize() else {
        return Ok(()); // the parser reports it
    };
    let (mut ops, mut depth, mut deepest, mut statement) = (0usize, 0usize, 0usize, 1usize);
    for t in &tokens {
        match t {
            Token::SemiColon => {
                (ops, depth, deepest) = (0, 0, 0);
                statement += 1;
            }
            Token::LParen | Token::LBracket => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            Token::RParen | Token::RBracket => depth = depth.saturating_sub(1),
            Token::Word(w) if matches!(w.keyword, Keyword::AND | Keyword::OR) => ops += 1,
            Token::Plus
            | Token::Minus
            | Token::Mul
            | Token::Div
            | Token::Mod
            | Token::StringConcat
            | Token::Eq
            | Token::Neq
            | Token::Lt
            | Token::Gt
            | Token::LtEq
            | Token::GtEq => ops += 1,
            _ => {}
        }
        if ops > MAX_EXPRESSION_OPERATORS {
            return Err(format!(
                "statement {statement} has more than {MAX_EXPRESSION_OPERATORS} operators \
                 (AND, OR, comparisons, arithmetic); memq refuses it rather than risk a stack \
                 overflow: write long lists of alternatives as `x IN (a, b, ...)` or join a table"
            ));
        }
        if deepest > MAX_NESTING {
            return Err(format!(
                "statement {statement} nests brackets more than {MAX_NESTING} levels deep"
            ));
        }
    }
    Ok(())
}

/// `--memory-limit`: bytes (`1073741824`), or a number with K, M, G or T (binary; `KiB`, `MB`
/// and `GiB` spellings too).
pub fn parse_memory_limit(text: &str) -> Result<usize> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num.parse().map_err(|_| {
        MemqError::Usage(format!("--memory-limit {text}: not a size (e.g. 512M, 2G)"))
    })?;
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tb" | "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => {
            return Err(MemqError::Usage(format!(
                "--memory-limit {text}: unknown unit `{unit}` (use K, M, G or T)"
            )))
        }
    };
    let bytes = value * scale;
    if !(bytes >= (16 << 20) as f64) {
        return Err(MemqError::Usage(format!(
            "--memory-limit {text}: at least 16M is needed"
        )));
    }
    Ok(bytes.min(usize::MAX as f64) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_limits_parse() {
        assert_eq!(parse_memory_limit("512M").unwrap(), 512 << 20);
        assert_eq!(parse_memory_limit("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_memory_limit("1073741824").unwrap(), 1 << 30);
        assert!(parse_memory_limit("lots").is_err());
        assert!(parse_memory_limit("1k").is_err());
    }

    #[test]
    fn huge_expressions_are_refused_from_their_tokens() {
        let or = |n: usize| {
            let terms: Vec<String> = (0..n).map(|i| format!("id = {i}")).collect();
            format!("SELECT 1 FROM t WHERE {}", terms.join(" OR "))
        };
        assert!(check_expression_size(&or(1000)).is_ok());
        let e = check_expression_size(&or(6000)).unwrap_err();
        assert!(e.contains("more than 10000 operators"), "{e}");
        let deep = format!("SELECT {}1{}", "(".repeat(600), ")".repeat(600));
        assert!(check_expression_size(&deep)
            .unwrap_err()
            .contains("nests brackets"));
        // counted per statement
        assert!(check_expression_size(&format!("{};{}", or(4000), or(4000))).is_ok());
    }
}
