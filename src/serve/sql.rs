//! The SQL console: read-only statements over the dataset's own tables and analyses, results
//! bounded in rows (and by the memory limit), shown with their units or downloaded as CSV or
//! Parquet.

use std::collections::HashSet;

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::logical_expr::LogicalPlan;
use datafusion::sql::parser::{DFParser, Statement as DfStatement};
use datafusion::sql::sqlparser::ast::Statement;
use memq_core::error::{MemqError, Result};
use serde_json::{json, Value};

use super::{fail, Shared};
use crate::api::{Collected, Dataset, Params};

/// Rows the console shows at most; the count says how many there were.
const SHOWN_ROWS: usize = 10_000;

/// Refuses anything but queries (and EXPLAIN of one) over the dataset's tables, views and
/// table functions: no COPY, CREATE, INSERT, DROP, SET, and no file named as a table.
pub async fn check_read_only(ds: &Dataset, sql: &str) -> Result<()> {
    let refuse = |what: String| MemqError::Usage(format!("read-only: {what}"));
    let statements = DFParser::parse_sql(sql).map_err(|e| MemqError::Query(e.to_string()))?;
    if statements.is_empty() {
        return Err(refuse("no statement".into()));
    }
    for s in &statements {
        let ok = match s {
            DfStatement::Statement(s) => {
                matches!(s.as_ref(), Statement::Query(_) | Statement::Explain { .. })
            }
            DfStatement::Explain(_) => true,
            _ => false,
        };
        if !ok {
            let text = s.to_string();
            let word = text.split_whitespace().next().unwrap_or("").to_uppercase();
            return Err(refuse(format!(
                "{word} is not allowed here; only SELECT (and EXPLAIN) read the dataset"
            )));
        }
    }
    let ctx = &ds.engine().ctx;
    let mut known: HashSet<String> = match ctx.catalog("memq").and_then(|c| c.schema("main")) {
        Some(schema) => schema.table_names().into_iter().collect(),
        None => HashSet::new(),
    };
    known.extend(ctx.state().table_functions().keys().cloned());
    // before planning: a file named as a table is refused, not looked for
    for s in &statements {
        let (tables, _) = datafusion::sql::resolve::resolve_table_references(s, true)
            .map_err(|e| MemqError::Query(crate::sql_error::plain(&e)))?;
        for t in tables {
            let ok = match t.schema() {
                Some("information_schema") => true,
                Some("main") | None => known.contains(base_name(t.table())),
                _ => false,
            };
            if !ok {
                return Err(refuse(format!(
                    "{t} is not a table of this dataset (files cannot be read from the console)"
                )));
            }
        }
    }
    for s in statements {
        let plan = ctx
            .state()
            .statement_to_plan(s)
            .await
            .map_err(|e| MemqError::Query(crate::sql_error::plain(&e)))?;
        check_plan(&plan, &known)?;
    }
    Ok(())
}

/// A table function's scan is named with its parentheses (`breakdown_at()`).
fn base_name(table: &str) -> &str {
    table.split('(').next().unwrap_or(table)
}

/// Every table a plan scans must be one of the dataset's (or the information schema).
fn check_plan(plan: &LogicalPlan, known: &HashSet<String>) -> Result<()> {
    let mut bad = None;
    let _ = plan.apply_with_subqueries(|p| {
        match p {
            LogicalPlan::TableScan(scan) => {
                let r = &scan.table_name;
                let ok = match r.schema() {
                    Some("information_schema") => true,
                    Some("main") | None => known.contains(base_name(r.table())),
                    _ => false,
                };
                if !ok {
                    bad = Some(r.to_string());
                    return Ok(TreeNodeRecursion::Stop);
                }
            }
            LogicalPlan::Ddl(_)
            | LogicalPlan::Dml(_)
            | LogicalPlan::Copy(_)
            | LogicalPlan::Statement(_) => {
                bad = Some(p.display().to_string());
                return Ok(TreeNodeRecursion::Stop);
            }
            _ => {}
        }
        Ok(TreeNodeRecursion::Continue)
    });
    match bad {
        Some(t) => Err(MemqError::Usage(format!(
            "read-only: {t} is not a table of this dataset (files cannot be read from the console)"
        ))),
        None => Ok(()),
    }
}

async fn collect(ds: &Dataset, sql: &str) -> Result<Collected> {
    check_read_only(ds, sql).await?;
    ds.sql(sql, &Params::new()).await?.collect().await
}

#[derive(serde::Deserialize)]
pub struct Ask {
    sql: String,
    max_rows: Option<usize>,
}

/// POST /api/sql: the columns with units, the rows as text in their units and as values.
pub async fn run(State(s): State<Shared>, Json(ask): Json<Ask>) -> Response {
    let started = std::time::Instant::now();
    let c = match collect(&s.ds, &ask.sql).await {
        Ok(c) => c,
        Err(e) => return fail(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let shown = ask.max_rows.unwrap_or(1000).clamp(1, SHOWN_ROWS);
    let total = c.num_rows();
    let texts = match c.cell_texts(shown) {
        Ok(t) => t,
        Err(e) => return fail(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let values = match values(&c, shown) {
        Ok(v) => v,
        Err(e) => return fail(StatusCode::BAD_REQUEST, e.to_string()),
    };
    Json(json!({
        "columns": c.schema.fields().iter().map(|f| json!({
            "name": f.name(),
            "type": f.data_type().to_string(),
            "unit": f.metadata().get("memq.unit").cloned().unwrap_or_default(),
        })).collect::<Vec<_>>(),
        "rows": texts,
        "values": values,
        "total_rows": total,
        "truncated": total > shown,
        "elapsed_ms": started.elapsed().as_secs_f64() * 1000.0,
    }))
    .into_response()
}

/// The first `n` rows as JSON values, in column order.
fn values(c: &Collected, n: usize) -> Result<Vec<Vec<Value>>> {
    let mut out = Vec::new();
    for b in &c.batches {
        if out.len() >= n {
            break;
        }
        let take = (n - out.len()).min(b.num_rows());
        let mut w = datafusion::arrow::json::ArrayWriter::new(Vec::new());
        w.write(&b.slice(0, take))
            .map_err(|e| MemqError::Query(e.to_string()))?;
        w.finish().map_err(|e| MemqError::Query(e.to_string()))?;
        let rows: Vec<serde_json::Map<String, Value>> =
            serde_json::from_slice(&w.into_inner()).unwrap_or_default();
        for r in rows {
            out.push(
                c.schema
                    .fields()
                    .iter()
                    .map(|f| r.get(f.name()).cloned().unwrap_or(Value::Null))
                    .collect(),
            );
        }
    }
    Ok(out)
}

#[derive(serde::Deserialize)]
pub struct Download {
    sql: String,
}

fn attachment(bytes: Vec<u8>, kind: &'static str, name: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CONTENT_DISPOSITION, name),
        ],
        bytes,
    )
        .into_response()
}

/// GET /api/sql.csv?sql=…
pub async fn download_csv(State(s): State<Shared>, Query(q): Query<Download>) -> Response {
    let c = match collect(&s.ds, &q.sql).await {
        Ok(c) => c,
        Err(e) => return fail(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let mut w = datafusion::arrow::csv::WriterBuilder::new()
        .with_header(true)
        .build(Vec::new());
    for b in &c.batches {
        if let Err(e) = w.write(b) {
            return fail(StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
        }
    }
    attachment(
        w.into_inner(),
        "text/csv; charset=utf-8",
        "attachment; filename=\"result.csv\"",
    )
}

/// GET /api/sql.parquet?sql=…
pub async fn download_parquet(State(s): State<Shared>, Query(q): Query<Download>) -> Response {
    let c = match collect(&s.ds, &q.sql).await {
        Ok(c) => c,
        Err(e) => return fail(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let write = || -> std::result::Result<Vec<u8>, datafusion::parquet::errors::ParquetError> {
        let mut w =
            datafusion::parquet::arrow::ArrowWriter::try_new(Vec::new(), c.schema.clone(), None)?;
        for b in &c.batches {
            w.write(b)?;
        }
        w.into_inner()
    };
    match write() {
        Ok(bytes) => attachment(
            bytes,
            "application/vnd.apache.parquet",
            "attachment; filename=\"result.parquet\"",
        ),
        Err(e) => fail(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}
