//! The one statement path. `memq sql -e`, `memq run FILE...`, the shell and its `\i FILE`, and
//! the library's `Dataset::sql` all hand SQL text to [`statements`]: it is parsed into
//! statements, each statement's `$name` placeholders are bound ([`crate::params`]), it is
//! planned and started as a stream; an error names the text's origin and the failing statement. A result is then shown with [`PrintOptions`] or
//! written to a file with [`write()`], which prints the one "N rows written" message.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::error::DataFusionError;
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::prelude::SessionContext;
use datafusion::sql::parser::Statement as DfStatement;
use futures::StreamExt;
use memq_core::catalog::Unit;
use memq_core::error::{MemqError, Result};

use crate::output::{self, BytesDisplay, FileSink, Format, ResultWriter, TableOptions};
use crate::params::{self, Params};
use crate::sql_error;

/// The result of one statement, streamed: batches are read one at a time with
/// [`StatementResult::next_batch`]. DDL (`CREATE VIEW`, `SET`, ...) gives a result with no
/// columns.
pub struct StatementResult {
    /// The result's schema, its fields carrying their units (`memq.unit`).
    pub schema: SchemaRef,
    units: Vec<Unit>,
    stream: Option<SendableRecordBatchStream>,
    /// `q.sql: statement 2: ` for errors met while streaming.
    place: String,
    /// The run's start (ns since the Unix epoch) when the result has a time column: the table
    /// view shows moments relative to it.
    pub origin_ns: Option<i64>,
    /// The run's steps when the result has a ns time column: a moment names its step.
    pub steps: Option<Arc<memq_engine::facts::Steps>>,
}

impl StatementResult {
    /// True for a statement that returns rows (a query), false for DDL.
    pub fn has_columns(&self) -> bool {
        !self.schema.fields().is_empty()
    }

    /// The next batch (its fields annotated with their units), `None` at the end.
    pub async fn next_batch(&mut self) -> Option<Result<RecordBatch>> {
        let stream = self.stream.as_mut()?;
        let next = stream.next().await;
        match next {
            None => {
                self.stream = None;
                None
            }
            Some(Ok(b)) => {
                let own = memq_engine::units::annotate(&b.schema(), &self.units);
                let annotated = b
                    .clone()
                    .with_schema(self.schema.clone())
                    .or_else(|_| b.with_schema(own))
                    .map_err(|e| MemqError::Query(format!("{}{e}", self.place)));
                Some(annotated)
            }
            Some(Err(e)) => {
                self.stream = None;
                Some(Err(MemqError::Query(format!(
                    "{}{}",
                    self.place,
                    exhausted(e)
                ))))
            }
        }
    }

    /// Every batch, accounted in the session's memory pool while collected: a result bigger than
    /// `--memory-limit` is an error, not an abort (a failed allocation outside the memory pool
    /// aborts the process).
    pub async fn collect(mut self, ctx: &SessionContext) -> Result<Vec<RecordBatch>> {
        let memory =
            MemoryConsumer::new("memq query result").register(&ctx.runtime_env().memory_pool);
        let mut batches = Vec::new();
        while let Some(b) = self.next_batch().await {
            let b = b?;
            if memory.try_grow(b.get_array_memory_size()).is_err() {
                return Err(MemqError::Query(format!(
                    "{}the query result needs more than the memory limit of {} MiB \
                     (--memory-limit); add a LIMIT or aggregate, or raise --memory-limit",
                    self.place,
                    limit_mib()
                )));
            }
            batches.push(b);
        }
        Ok(batches)
    }
}

/// Asks a running print or write to stop (Ctrl-C): the consumer stops at once, ends the table
/// with how many rows had come, and reports [`Shown::Stopped`].
#[derive(Default)]
pub struct Stop {
    flag: AtomicBool,
    notify: tokio::sync::Notify,
}

impl Stop {
    pub fn new() -> Arc<Stop> {
        Arc::new(Stop::default())
    }

    pub fn stop(&self) {
        self.flag.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    pub fn is_stopped(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// Resolves once [`Stop::stop`] was called.
    pub async fn stopped(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_stopped() {
                return;
            }
            notified.await;
        }
    }
}

/// How a result's rows were consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    /// Every row, this many.
    Done(u64),
    /// Stopped by Ctrl-C after this many rows.
    Stopped(u64),
}

impl Shown {
    pub fn stopped(&self) -> bool {
        matches!(self, Shown::Stopped(_))
    }
}

/// The next batch, or `None` when the result ends or `stop` fires.
pub(crate) async fn next_or_stop(
    result: &mut StatementResult,
    stop: &Stop,
) -> Option<Option<Result<RecordBatch>>> {
    // Let the task's other branches run (Ctrl-C): when the rows come faster than they are
    // printed, the stream is always ready and tokio's budget (128 batches) may never run out.
    tokio::task::yield_now().await;
    if stop.is_stopped() {
        return None;
    }
    tokio::select! {
        biased;
        _ = stop.stopped() => None,
        b = result.next_batch() => Some(b),
    }
}

/// How results are shown on a terminal or a pipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrintOptions {
    pub format: Format,
    /// Byte columns (by their unit) humanized or raw; humanized only in table format.
    pub bytes: BytesDisplay,
    /// Rows the table view shows at most (head and tail); 0 shows all.
    pub max_rows: usize,
    /// The width the table view is fitted to; `None` does not fit it.
    pub width: Option<usize>,
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
            max_rows: output::DEFAULT_MAX_ROWS,
            width: None,
        }
    }

    fn table(&self, result: &StatementResult) -> TableOptions {
        TableOptions {
            origin_ns: result.origin_ns,
            steps: result.steps.clone(),
            vertical: false,
            max_rows: self.max_rows,
            width: self.width,
            bytes: if self.format.is_for_reading() {
                self.bytes
            } else {
                BytesDisplay::Raw
            },
        }
    }

    /// Prints the result on `out` batch by batch until it ends or `stop` fires.
    pub async fn print_to<W: Write>(
        &self,
        result: &mut StatementResult,
        out: W,
        stop: &Stop,
    ) -> Result<Shown> {
        // Agent mode (crate::agent): Markdown with `name:TYPE` headers instead of the table.
        if self.format == Format::Table && crate::agent::active() {
            return print_agent(result, out, stop, self.max_rows).await;
        }
        let mut w = ResultWriter::new(out, &result.schema, self.format, self.table(result))?;
        loop {
            match next_or_stop(result, stop).await {
                None => {
                    let rows = w.rows();
                    w.interrupted()?;
                    return Ok(Shown::Stopped(rows));
                }
                Some(None) => return Ok(Shown::Done(w.finish()?.0)),
                Some(Some(b)) => w.write(&b?)?,
            }
        }
    }

    /// Prints the result on stdout.
    pub async fn print(&self, result: &mut StatementResult, stop: &Stop) -> Result<Shown> {
        let out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout());
        self.print_to(result, out, stop).await
    }
}

/// Agent mode (crate::agent): prints a result as a Markdown table with `name:TYPE` headers: the first `max_rows` rows (0:
/// all), then, when some were left out, `N rows, M shown`; `0 rows` for an empty result.
async fn print_agent<W: Write>(
    result: &mut StatementResult,
    out: W,
    stop: &Stop,
    max_rows: usize,
) -> Result<Shown> {
    let schema = Arc::new(Schema::new(
        result
            .schema
            .fields()
            .iter()
            .map(|f| Field::new(crate::agent::header(f), f.data_type().clone(), true))
            .collect::<Vec<_>>(),
    ));
    let io = |e: std::io::Error| MemqError::Query(format!("cannot write the result: {e}"));
    // The table is ended once `max_rows` rows are out; the other rows are only counted.
    let mut writer = Some(ResultWriter::new(
        out,
        &schema,
        Format::Markdown,
        TableOptions::default(),
    )?);
    let mut ended: Option<W> = None;
    let end = |writer: &mut Option<ResultWriter<W>>, ended: &mut Option<W>| -> Result<()> {
        if let Some(w) = writer.take() {
            *ended = Some(w.finish()?.1);
        }
        Ok(())
    };
    let (mut rows, mut shown) = (0u64, 0u64);
    let stopped = loop {
        match next_or_stop(result, stop).await {
            None => break true,
            Some(None) => break false,
            Some(Some(b)) => {
                let b = b?;
                rows += b.num_rows() as u64;
                let room = if max_rows == 0 {
                    b.num_rows()
                } else {
                    (max_rows as u64).saturating_sub(shown) as usize
                };
                if let Some(w) = writer.as_mut().filter(|_| room > 0) {
                    let take = room.min(b.num_rows());
                    w.write(&b.slice(0, take))?;
                    shown += take as u64;
                }
                if max_rows > 0 && shown >= max_rows as u64 {
                    end(&mut writer, &mut ended)?;
                }
            }
        }
    };
    end(&mut writer, &mut ended)?;
    let Some(mut out) = ended else {
        return Err(MemqError::Query("the result was not ended".into()));
    };
    if stopped {
        writeln!(out, "stopped after {rows} rows, {shown} shown (Ctrl-C)").map_err(io)?;
    } else if rows == 0 {
        writeln!(out, "0 rows").map_err(io)?;
    } else if rows > shown {
        writeln!(
            out,
            "{rows} rows, {shown} shown (LIMIT/OFFSET or --maxrows 0 for the others)"
        )
        .map_err(io)?;
    }
    out.flush().map_err(io)?;
    Ok(if stopped {
        Shown::Stopped(rows)
    } else {
        Shown::Done(rows)
    })
}

/// The width of the terminal on stdout: `$COLUMNS` when set, else the tty's size; `None` when
/// stdout is not a terminal (a pipe gets the whole table).
pub fn terminal_width() -> Option<usize> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return None;
    }
    if let Some(n) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
    {
        return Some(n);
    }
    #[cfg(unix)]
    {
        // SAFETY: TIOCGWINSZ fills a winsize struct; a failure leaves it zeroed.
        let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
        let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) } == 0;
        if ok && ws.ws_col > 0 {
            return Some(ws.ws_col as usize);
        }
    }
    None
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

/// The statements of one SQL text, planned and started one at a time: a result must be consumed
/// before the next statement is planned (`SELECT * FROM v; DROP VIEW v`).
pub struct Statements<'a> {
    ctx: &'a SessionContext,
    /// The text, with `SUMMARIZE x` written as `SELECT * FROM summarize('x')`.
    sql: std::borrow::Cow<'a, str>,
    params: &'a Params,
    origin: &'a str,
    items: std::vec::IntoIter<DfStatement>,
    index: usize,
    many: bool,
    queries: usize,
}

/// True for a statement that returns rows (a query, EXPLAIN, SHOW, DESCRIBE).
fn returns_rows(s: &DfStatement) -> bool {
    use datafusion::sql::sqlparser::ast::Statement as S;
    match s {
        DfStatement::Statement(s) => matches!(
            s.as_ref(),
            S::Query(_)
                | S::ShowTables { .. }
                | S::ShowColumns { .. }
                | S::ShowVariable { .. }
                | S::ExplainTable { .. }
                | S::Explain { .. }
        ),
        DfStatement::Explain(_) => true,
        _ => false,
    }
}

/// Parses `sql` into statements, binding `params` as each is planned. `origin` names the text
/// in errors (a file name; empty for text typed or given with `-e`).
pub fn statements<'a>(
    ctx: &'a SessionContext,
    sql: &'a str,
    params: &'a Params,
    origin: &'a str,
) -> Result<Statements<'a>> {
    let sql = match memq_engine::summarize::rewrite(sql) {
        Some(s) => std::borrow::Cow::Owned(s),
        None => std::borrow::Cow::Borrowed(sql),
    };
    check_expression_size(&sql)
        .map_err(|e| MemqError::Query(format!("{}{e}", place(origin, 0, false))))?;
    let parsed = params::parse_statements_df(ctx, &sql).map_err(|e| {
        MemqError::Query(format!(
            "{}{}",
            place(origin, 0, false),
            sql_error::describe(&e, &sql, ctx)
        ))
    })?;
    if parsed.is_empty() {
        return Err(MemqError::Query(format!(
            "{}no statement",
            place(origin, 0, false)
        )));
    }
    let many = parsed.len() > 1;
    let queries = parsed.iter().filter(|s| returns_rows(s)).count();
    Ok(Statements {
        queries,
        ctx,
        sql,
        params,
        origin,
        items: parsed.into_iter(),
        index: 0,
        many,
    })
}

impl Statements<'_> {
    /// Statements not yet started.
    pub fn remaining(&self) -> usize {
        self.items.len()
    }

    /// How many of the statements return rows (queries, EXPLAIN, SHOW).
    pub fn queries(&self) -> usize {
        self.queries
    }

    /// Plans and starts the next statement (DDL takes effect here).
    pub async fn next(&mut self) -> Option<Result<StatementResult>> {
        let stmt = self.items.next()?;
        let i = self.index;
        self.index += 1;
        let at = place(self.origin, i, self.many);
        Some(self.start(stmt, at).await)
    }

    async fn start(&self, stmt: DfStatement, at: String) -> Result<StatementResult> {
        let fail = |e: DataFusionError| {
            MemqError::Query(format!(
                "{at}{}",
                sql_error::describe(&e, &self.sql, self.ctx)
            ))
        };
        let df = params::plan_statement_df(self.ctx, stmt, self.params)
            .await
            .map_err(|e| match e {
                params::PlanError::Bind(e) => MemqError::Query(format!("{at}{e}")),
                params::PlanError::Df(e) => fail(e),
            })?;
        let units = memq_engine::units::units(df.logical_plan());
        let plan = df
            .create_physical_plan()
            .await
            .map_err(|e| MemqError::Query(format!("{at}{}", exhausted(e))))?;
        let schema = memq_engine::units::annotate(&plan.schema(), &units);
        let origin_ns = if units
            .iter()
            .any(|u| matches!(u, Unit::TimeNs | Unit::TimeUs))
        {
            memq_engine::facts::run_start(self.ctx).await
        } else {
            None
        };
        let steps = if units.contains(&Unit::TimeNs) {
            memq_engine::facts::steps(self.ctx).await
        } else {
            None
        };
        let stream = datafusion::physical_plan::execute_stream(plan, self.ctx.task_ctx())
            .map_err(|e| MemqError::Query(format!("{at}{}", exhausted(e))))?;
        Ok(StatementResult {
            schema,
            units,
            stream: Some(stream),
            place: at,
            origin_ns,
            steps,
        })
    }
}

/// Writes a result to `path` (the writer chosen by its extension), batch by batch, and says so
/// on stderr. Stopped (Ctrl-C), the file is not written.
pub async fn write(result: &mut StatementResult, path: &Path, stop: &Stop) -> Result<Shown> {
    let mut sink = FileSink::create(path, &result.schema)?;
    let mut rows = 0u64;
    loop {
        match next_or_stop(result, stop).await {
            None => {
                drop(sink);
                eprintln!(
                    "stopped after {rows} rows (Ctrl-C); {} not written",
                    path.display()
                );
                return Ok(Shown::Stopped(rows));
            }
            Some(None) => break,
            Some(Some(b)) => {
                let b = b?;
                rows += b.num_rows() as u64;
                sink.write(&b)?;
            }
        }
    }
    let rows = sink.finish()?;
    eprintln!("{}", written_message(rows, path));
    Ok(Shown::Done(rows))
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
    (memq_core::memory_limit() >> 20).to_string()
}

/// An execution error as text: an operator that cannot spill below the memory limit is named
/// as such, with the limit it ran into (`--memory-limit`).
fn exhausted(e: DataFusionError) -> String {
    let text = sql_error::plain(&e);
    if text.contains("Resources exhausted")
        || matches!(e.find_root(), DataFusionError::ResourcesExhausted(_))
    {
        format!(
            "the query needs more than the memory limit of {} MiB (--memory-limit): {text}",
            limit_mib()
        )
    } else {
        text
    }
}

/// Operators in one statement beyond which it is refused before planning: DataFusion plans
/// and evaluates expressions recursively, so a chain of 100 000 `OR`s would overflow any
/// stack. With the big stacks memq runs on, 20 000 plan fine in a
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
    // NaN compares as nothing: it is refused too
    if !matches!(
        bytes.partial_cmp(&((16 << 20) as f64)),
        Some(std::cmp::Ordering::Greater | std::cmp::Ordering::Equal)
    ) {
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
