//! `SUMMARIZE table` (or `SUMMARIZE SELECT ...`), like DuckDB's: one row per column of the
//! table, view or query, with its type, min, max, approx_unique, avg, std, q25, q50, q75, count
//! and null_percentage, from one pass over it. The statement is rewritten into the table
//! function `summarize('...')` ([`rewrite`]), which may also be called directly.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{plan_err, Result as DfResult, ScalarValue};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::{Expr, TableType};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::tokenizer::{Location, Token, Tokenizer};

use memq_core::catalog::Unit;

use crate::library::sql_type_name;

/// `sql` with each `SUMMARIZE target` statement written as `SELECT * FROM summarize('target')`;
/// `None` when it has none.
pub fn rewrite(sql: &str) -> Option<String> {
    let tokens = Tokenizer::new(&GenericDialect {}, sql)
        .tokenize_with_location()
        .ok()?;
    // Byte offset of each line's start (locations are 1-based lines and characters).
    let mut lines = vec![0];
    lines.extend(sql.match_indices('\n').map(|(i, _)| i + 1));
    let offset = |l: Location| -> usize {
        let start = lines
            .get(l.line.saturating_sub(1) as usize)
            .copied()
            .unwrap_or(sql.len());
        sql[start..]
            .char_indices()
            .nth(l.column.saturating_sub(1) as usize)
            .map_or(sql.len(), |(i, _)| start + i)
    };
    let (mut out, mut last, mut i) = (String::new(), 0, 0);
    while i < tokens.len() {
        let first = (i..tokens.len()).find(|&j| !matches!(tokens[j].token, Token::Whitespace(_)));
        let end = (i..tokens.len())
            .find(|&j| tokens[j].token == Token::SemiColon)
            .unwrap_or(tokens.len());
        if let Some(j) = first.filter(|&j| j < end) {
            if matches!(&tokens[j].token, Token::Word(w) if w.value.eq_ignore_ascii_case("summarize"))
            {
                let (a, b) = (offset(tokens[j].span.start), offset(tokens[j].span.end));
                let stop = tokens.get(end).map_or(sql.len(), |t| offset(t.span.start));
                let target = sql[b..stop].trim();
                out.push_str(&sql[last..a]);
                out.push_str(&format!(
                    "SELECT * FROM summarize('{}')",
                    target.replace('\'', "''")
                ));
                last = stop;
            }
        }
        i = end + 1;
    }
    (last > 0).then(|| {
        out.push_str(&sql[last..]);
        out
    })
}

/// The columns of a summary.
/// Metadata of a summary column whose values are in the unit of the row's column (its name in
/// the `unit` column): `value` for a value of the column (min, max, mean, quartiles), `spread`
/// for a difference of two (the standard deviation: a moment's spread is a duration).
pub const UNIT_FROM_KEY: &str = "memq.unit_from_row";

fn summary_schema() -> SchemaRef {
    let by_row = |f: Field, how: &str| {
        f.with_metadata(std::collections::HashMap::from([(
            UNIT_FROM_KEY.to_string(),
            how.to_string(),
        )]))
    };
    let text = |n: &str| by_row(Field::new(n, DataType::Utf8, true), "value");
    let float = |n: &str| by_row(Field::new(n, DataType::Float64, true), "value");
    Arc::new(Schema::new(vec![
        Field::new("column_name", DataType::Utf8, false),
        Field::new("column_type", DataType::Utf8, false),
        text("min"),
        text("max"),
        Unit::Count.annotate(Field::new("approx_unique", DataType::Int64, true)),
        float("avg"),
        by_row(Field::new("std", DataType::Float64, true), "spread"),
        float("q25"),
        float("q50"),
        float("q75"),
        Unit::Count.annotate(Field::new("count", DataType::Int64, false)),
        Unit::Percent.annotate(Field::new("null_percentage", DataType::Float64, true)),
        Field::new("unit", DataType::Utf8, true),
    ]))
}

/// The table function `summarize('table, view or query')`.
#[derive(Debug)]
pub struct Summarize;

impl TableFunctionImpl for Summarize {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        match args.exprs() {
            [Expr::Literal(ScalarValue::Utf8(Some(t)), _)] if !t.trim().is_empty() => {
                Ok(Arc::new(Summary {
                    target: t.trim().to_string(),
                }))
            }
            _ => plan_err!("SUMMARIZE needs a table, a view or a query: SUMMARIZE events"),
        }
    }
}

#[derive(Debug)]
struct Summary {
    target: String,
}

fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl Summary {
    async fn batch(&self, ctx: &SessionContext) -> DfResult<RecordBatch> {
        let first = self.target.split_whitespace().next().unwrap_or_default();
        let is_query = ["select", "with", "values", "("]
            .iter()
            .any(|k| first.to_ascii_lowercase().starts_with(k));
        let df = if is_query {
            ctx.sql(&self.target).await?
        } else {
            match ctx.table(self.target.as_str()).await {
                Ok(df) => df,
                Err(_) => {
                    return plan_err!(
                        "SUMMARIZE: no table or view named {}; give a table, a view or a query",
                        self.target
                    )
                }
            }
        };
        let fields: Vec<Field> = df
            .schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        let mut aggs = vec!["count(*)".to_string()];
        for f in &fields {
            let c = format!("t.{}", quoted(f.name()));
            let t = f.data_type();
            let plain = !t.is_nested();
            let numeric = t.is_numeric();
            let null = "NULL".to_string();
            let num = |e: String| {
                if numeric {
                    e
                } else {
                    "CAST(NULL AS DOUBLE)".to_string()
                }
            };
            aggs.extend([
                if plain {
                    format!("CAST(min({c}) AS VARCHAR)")
                } else {
                    null.clone()
                },
                if plain {
                    format!("CAST(max({c}) AS VARCHAR)")
                } else {
                    null.clone()
                },
                match () {
                    _ if !plain => "CAST(NULL AS BIGINT)".to_string(),
                    _ if numeric
                        || matches!(
                            t,
                            DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8
                        ) =>
                    {
                        format!("CAST(approx_distinct({c}) AS BIGINT)")
                    }
                    _ => format!("CAST(approx_distinct(CAST({c} AS VARCHAR)) AS BIGINT)"),
                },
                num(format!("avg(CAST({c} AS DOUBLE))")),
                num(format!("stddev(CAST({c} AS DOUBLE))")),
                num(format!(
                    "approx_percentile_cont(0.25) WITHIN GROUP (ORDER BY CAST({c} AS DOUBLE))"
                )),
                num(format!(
                    "approx_percentile_cont(0.5) WITHIN GROUP (ORDER BY CAST({c} AS DOUBLE))"
                )),
                num(format!(
                    "approx_percentile_cont(0.75) WITHIN GROUP (ORDER BY CAST({c} AS DOUBLE))"
                )),
                format!("count({c})"),
            ]);
        }
        let from = if is_query {
            format!("({})", self.target)
        } else {
            self.target.clone()
        };
        let sql = format!(
            "SELECT {} FROM {from} AS t",
            aggs.iter()
                .enumerate()
                .map(|(k, a)| format!("{a} AS a{k}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let batches = ctx.sql(&sql).await?.collect().await?;
        let Some(row) = batches.iter().find(|b| b.num_rows() > 0) else {
            return plan_err!("SUMMARIZE: the summary query gave no row");
        };
        let value = |k: usize| ScalarValue::try_from_array(row.column(k), 0);
        let int = |v: ScalarValue| match v.cast_to(&DataType::Int64) {
            Ok(ScalarValue::Int64(v)) => v,
            _ => None,
        };
        let float = |v: ScalarValue| match v.cast_to(&DataType::Float64) {
            Ok(ScalarValue::Float64(v)) => v,
            _ => None,
        };
        let text = |v: ScalarValue| match v {
            ScalarValue::Utf8(s) | ScalarValue::Utf8View(s) | ScalarValue::LargeUtf8(s) => s,
            _ => None,
        };
        let total = int(value(0)?).unwrap_or(0);
        let (mut names, mut types, mut mins, mut maxs, mut uniq) =
            (vec![], vec![], vec![], vec![], vec![]);
        let (mut avg, mut std, mut q25, mut q50, mut q75, mut count, mut nulls) =
            (vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
        let mut units: Vec<Option<&str>> = vec![];
        for (i, f) in fields.iter().enumerate() {
            let k = 1 + i * 9;
            names.push(f.name().clone());
            types.push(sql_type_name(f.data_type()));
            mins.push(text(value(k)?));
            maxs.push(text(value(k + 1)?));
            uniq.push(int(value(k + 2)?));
            avg.push(float(value(k + 3)?));
            std.push(float(value(k + 4)?));
            q25.push(float(value(k + 5)?));
            q50.push(float(value(k + 6)?));
            q75.push(float(value(k + 7)?));
            let n = int(value(k + 8)?).unwrap_or(0);
            count.push(n);
            nulls.push((total > 0).then(|| 100.0 * (total - n) as f64 / total as f64));
            let unit = Unit::of(f);
            units.push((unit != Unit::None && f.data_type().is_numeric()).then(|| unit.name()));
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(names)),
            Arc::new(StringArray::from(types)),
            Arc::new(StringArray::from(mins)),
            Arc::new(StringArray::from(maxs)),
            Arc::new(Int64Array::from(uniq)),
            Arc::new(Float64Array::from(avg)),
            Arc::new(Float64Array::from(std)),
            Arc::new(Float64Array::from(q25)),
            Arc::new(Float64Array::from(q50)),
            Arc::new(Float64Array::from(q75)),
            Arc::new(Int64Array::from(count)),
            Arc::new(Float64Array::from(nulls)),
            Arc::new(StringArray::from(units)),
        ];
        Ok(RecordBatch::try_new(summary_schema(), columns)?)
    }
}

#[async_trait]
impl TableProvider for Summary {
    fn schema(&self) -> SchemaRef {
        summary_schema()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let Some(state) = state.as_any().downcast_ref::<SessionState>() else {
            return plan_err!("SUMMARIZE: no session state");
        };
        let ctx = SessionContext::new_with_state(state.clone());
        let batch = self.batch(&ctx).await?;
        Ok(MemorySourceConfig::try_new_exec(
            &[vec![batch]],
            summary_schema(),
            projection.cloned(),
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summarize_statements_are_rewritten() {
        assert_eq!(
            rewrite("SUMMARIZE events").as_deref(),
            Some("SELECT * FROM summarize('events')")
        );
        assert_eq!(
            rewrite("SELECT 1;\n  summarize SELECT 'a' AS x ; SELECT 2").as_deref(),
            Some("SELECT 1;\n  SELECT * FROM summarize('SELECT ''a'' AS x'); SELECT 2")
        );
        assert_eq!(rewrite("SELECT summarize FROM t"), None);
        assert_eq!(rewrite("SELECT 'SUMMARIZE x'"), None);
    }

    #[tokio::test]
    async fn a_summary_has_a_row_per_column() {
        let ctx = SessionContext::new();
        ctx.register_udtf("summarize", Arc::new(Summarize));
        ctx.sql("CREATE VIEW v AS SELECT * FROM (VALUES (1, 'a'), (3, NULL), (5, 'b'), (7, 'b')) AS t(n, s)")
            .await
            .unwrap();
        let b = ctx
            .sql("SELECT * FROM summarize('v')")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let s = datafusion::arrow::util::pretty::pretty_format_batches(&b)
            .unwrap()
            .to_string();
        let lines: Vec<&str> = s.lines().collect();
        assert!(
            lines[1].contains("column_name | column_type | min | max | approx_unique | avg | std "),
            "{s}"
        );
        // n: 1, 3, 5, 7: mean 4, sample std sqrt(20/3), no nulls
        assert!(lines[3].starts_with("| n           | BIGINT      | 1   | 7   | 4             | 4.0 | 2.581988897471611 "), "{s}");
        // (no unit: a plain column)
        assert!(
            lines[3].ends_with("| 4     | 0.0             |      |"),
            "{s}"
        );
        // s: 3 of 4 values, 2 distinct, 25 % null, no numeric figures
        assert!(
            lines[4]
                .starts_with("| s           | VARCHAR     | a   | b   | 2             |     |  "),
            "{s}"
        );
        assert!(
            lines[4].ends_with("| 3     | 25.0            |      |"),
            "{s}"
        );
    }
}
