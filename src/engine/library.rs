//! The SQL library: every `sql/**/*.sql` file is one analysis, compiled into the binary.
//!
//! A file opens with a comment block, then the query:
//!
//! ```sql
//! -- peaks: the peak of each counter, per pool.
//! --
//! -- Any further description lines.
//! --
//! -- @param ts BIGINT              the moment to look at, ns
//! -- @param pool VARCHAR = 'HAL'   pool to decompose
//! -- @column peak_bytes            bytes: the highest value of the counter
//! SELECT ...
//! ```
//!
//! A file without `@param` lines becomes a view named after the file; one with parameters
//! becomes a table function whose arguments are bound, in order, to the `$name` placeholders of
//! the query as typed literal values (a value can never change the statement's structure).

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::catalog::view::ViewTable;
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{plan_err, DataFusionError, Result as DfResult, ScalarValue};
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::Expr;

include!(concat!(env!("OUT_DIR"), "/sql_library.rs"));

#[derive(Debug, Clone)]
pub struct Param {
    pub name: String,
    pub data_type: DataType,
    pub sql_type: String,
    pub default: Option<String>,
    pub doc: String,
}

#[derive(Debug, Clone)]
pub struct Analysis {
    pub name: String,
    /// Path below `sql/`, e.g. `memscope/peaks.sql`.
    pub path: String,
    /// The one-line summary.
    pub summary: String,
    /// The whole description (summary included).
    pub doc: String,
    pub params: Vec<Param>,
    /// (column, description) of every output column.
    pub columns: Vec<(String, String)>,
    pub body: String,
}

impl Analysis {
    pub fn is_table_function(&self) -> bool {
        !self.params.is_empty()
    }

    /// How to call it: `peaks` or `breakdown_at(ts [, pool])`.
    pub fn call_form(&self) -> String {
        if !self.is_table_function() {
            return self.name.clone();
        }
        let mut s = format!("{}(", self.name);
        let mut optional = 0;
        for (i, p) in self.params.iter().enumerate() {
            if p.default.is_some() {
                s.push_str(if i == 0 { "[" } else { " [, " });
                optional += 1;
            } else if i > 0 {
                s.push_str(", ");
            }
            s.push_str(&p.name);
        }
        s.push_str(&"]".repeat(optional));
        s.push(')');
        s
    }
}

fn sql_type(name: &str) -> Option<DataType> {
    Some(match name.to_ascii_uppercase().as_str() {
        "BIGINT" | "INT" | "INTEGER" => DataType::Int64,
        "DOUBLE" | "FLOAT" => DataType::Float64,
        "VARCHAR" | "TEXT" | "STRING" => DataType::Utf8,
        "BOOLEAN" => DataType::Boolean,
        _ => return None,
    })
}

/// Parses one library file. Errors name the file and the bad line.
pub fn parse(path: &str, text: &str) -> Result<Analysis, String> {
    let name = path
        .rsplit('/')
        .next()
        .and_then(|f| f.strip_suffix(".sql"))
        .ok_or_else(|| format!("sql/{path}: not a .sql file"))?
        .to_string();
    let mut doc_lines = Vec::new();
    let mut params = Vec::new();
    let mut columns = Vec::new();
    let mut body_start = text.len();
    let mut offset = 0;
    for (n, line) in text.split_inclusive('\n').enumerate() {
        let t = line.trim();
        let Some(comment) = t.strip_prefix("--") else {
            if !t.is_empty() {
                body_start = offset;
                break;
            }
            offset += line.len();
            continue;
        };
        offset += line.len();
        let comment = comment.strip_prefix(' ').unwrap_or(comment).trim_end();
        if let Some(p) = comment.strip_prefix("@param ") {
            let mut words = p.split_whitespace();
            let (Some(pname), Some(ptype)) = (words.next(), words.next()) else {
                return Err(format!(
                    "sql/{path}:{}: `@param NAME TYPE [= DEFAULT] description`",
                    n + 1
                ));
            };
            let data_type = sql_type(ptype)
                .ok_or_else(|| format!("sql/{path}:{}: unknown type {ptype}", n + 1))?;
            let rest: String = words.collect::<Vec<_>>().join(" ");
            let (default, doc) = match rest.strip_prefix("= ") {
                Some(r) => {
                    let (d, doc) = r.split_once(' ').unwrap_or((r, ""));
                    (Some(d.to_string()), doc.trim().to_string())
                }
                None => (None, rest),
            };
            params.push(Param {
                name: pname.to_string(),
                data_type,
                sql_type: ptype.to_uppercase(),
                default,
                doc,
            });
        } else if let Some(c) = comment.strip_prefix("@column ") {
            let (cname, doc) = c
                .trim()
                .split_once(char::is_whitespace)
                .unwrap_or((c.trim(), ""));
            columns.push((cname.to_string(), doc.trim().to_string()));
        } else {
            doc_lines.push(comment.to_string());
        }
    }
    let body = text[body_start..]
        .trim()
        .trim_end_matches(';')
        .trim()
        .to_string();
    if body.is_empty() {
        return Err(format!("sql/{path}: no query after the comment block"));
    }
    while doc_lines.last().is_some_and(|l| l.is_empty()) {
        doc_lines.pop();
    }
    let first = doc_lines.first().cloned().unwrap_or_default();
    let summary = first
        .strip_prefix(&format!("{name}:"))
        .map(str::trim)
        .unwrap_or(&first)
        .to_string();
    if summary.is_empty() {
        return Err(format!(
            "sql/{path}: the comment block must open with `-- {name}: what it answers`"
        ));
    }
    Ok(Analysis {
        name,
        path: path.to_string(),
        summary,
        doc: doc_lines.join("\n"),
        params,
        columns,
        body,
    })
}

/// Every analysis compiled into the binary.
pub fn analyses() -> Vec<Analysis> {
    SQL_FILES
        .iter()
        .map(|(path, text)| {
            parse(path, text).unwrap_or_else(|e| panic!("bad library file (a build-time bug): {e}"))
        })
        .collect()
}

/// A parameterised analysis as a DataFusion table function.
#[derive(Debug)]
pub struct SqlTableFunction {
    pub analysis: Analysis,
}

fn literal(e: &Expr) -> Option<ScalarValue> {
    match e {
        Expr::Literal(v, _) => Some(v.clone()),
        Expr::Negative(inner) => match literal(inner)? {
            ScalarValue::Int64(Some(v)) => Some(ScalarValue::Int64(Some(-v))),
            ScalarValue::Float64(Some(v)) => Some(ScalarValue::Float64(Some(-v))),
            _ => None,
        },
        Expr::Cast(c) => literal(&c.expr)?.cast_to(c.field.data_type()).ok(),
        _ => None,
    }
}

/// Binds arguments (and defaults) to the analysis's parameters as typed values.
pub fn bind(analysis: &Analysis, args: &[ScalarValue]) -> DfResult<HashMap<String, ScalarValue>> {
    if args.len() > analysis.params.len() {
        return plan_err!(
            "{} takes at most {} argument(s): {}",
            analysis.name,
            analysis.params.len(),
            analysis.call_form()
        );
    }
    let mut values = HashMap::new();
    for (i, p) in analysis.params.iter().enumerate() {
        let value = match args.get(i) {
            Some(v) => v.clone(),
            None => match &p.default {
                Some(d) => default_value(d, &p.data_type)?,
                None => {
                    return plan_err!(
                        "{} needs argument `{}`: {}",
                        analysis.name,
                        p.name,
                        analysis.call_form()
                    )
                }
            },
        };
        let value = if value.is_null() {
            ScalarValue::try_from(&p.data_type)?
        } else {
            value.cast_to(&p.data_type).map_err(|_| {
                DataFusionError::Plan(format!(
                    "{}: argument `{}` must be {}, got {value}",
                    analysis.name, p.name, p.sql_type
                ))
            })?
        };
        values.insert(p.name.clone(), value);
    }
    Ok(values)
}

fn default_value(text: &str, data_type: &DataType) -> DfResult<ScalarValue> {
    if text.eq_ignore_ascii_case("NULL") {
        return ScalarValue::try_from(data_type);
    }
    let unquoted = text.strip_prefix('\'').and_then(|t| t.strip_suffix('\''));
    match unquoted {
        Some(s) => Ok(ScalarValue::Utf8(Some(s.to_string()))),
        None => ScalarValue::try_from_string(text.to_string(), data_type),
    }
}

/// Plans an analysis with bound parameter values.
pub async fn plan(
    state: &SessionState,
    analysis: &Analysis,
    values: HashMap<String, ScalarValue>,
) -> DfResult<datafusion::logical_expr::LogicalPlan> {
    let plan = state.create_logical_plan(&analysis.body).await?;
    plan.with_param_values(values)
}

impl TableFunctionImpl for SqlTableFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        let mut values = Vec::new();
        for (i, e) in args.exprs().iter().enumerate() {
            match literal(e) {
                Some(v) => values.push(v),
                None => {
                    return plan_err!(
                        "{}: argument {} must be a constant (got {e})",
                        self.analysis.name,
                        i + 1
                    )
                }
            }
        }
        let bound = bind(&self.analysis, &values)?;
        let Some(state) = args.session().as_any().downcast_ref::<SessionState>() else {
            return plan_err!("{}: no session state", self.analysis.name);
        };
        // Planning only resolves tables registered in memory, so it completes without I/O.
        let plan = futures::executor::block_on(plan(state, &self.analysis, bound))?;
        Ok(Arc::new(ViewTable::new(plan, None)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doc_block_is_parsed() {
        let text = "-- breakdown_at: what was live at ts.\n--\n-- More text.\n--\n-- @param ts BIGINT the moment, ns\n-- @param pool VARCHAR = 'HAL' pool\n-- @column bytes live bytes\nSELECT $ts AS t, $pool AS p;\n";
        let a = parse("memscope/breakdown_at.sql", text).unwrap();
        assert_eq!(a.name, "breakdown_at");
        assert_eq!(a.summary, "what was live at ts.");
        assert_eq!(a.params.len(), 2);
        assert_eq!(a.params[1].default.as_deref(), Some("'HAL'"));
        assert_eq!(
            a.columns,
            vec![("bytes".to_string(), "live bytes".to_string())]
        );
        assert_eq!(a.body, "SELECT $ts AS t, $pool AS p");
        assert_eq!(a.call_form(), "breakdown_at(ts [, pool])");
        let bound = bind(&a, &[ScalarValue::Int64(Some(5))]).unwrap();
        assert_eq!(bound["pool"], ScalarValue::Utf8(Some("HAL".into())));
        assert!(bind(&a, &[]).is_err());
    }

    #[test]
    fn every_library_file_parses() {
        for (path, text) in SQL_FILES {
            parse(path, text).unwrap();
        }
    }
}
