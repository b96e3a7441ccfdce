//! Statement parameters (`memq run --param`, the REPL's `\set`): a statement refers to a value
//! as `$name`; the value is bound as a typed literal.
//!
//! Binding happens on the parsed statement, never on its text: each `$name` placeholder node of
//! the syntax tree is replaced by one literal node. A value can therefore never change the
//! statement's structure — `1; DROP VIEW peaks` is one string literal, not a second statement.
//! Placeholders inside the arguments of the library's table functions
//! (`breakdown_at($ts, $pool)`) are bound too; the table function then casts each value to its
//! declared type (`library::bind`).

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use datafusion::common::ScalarValue;
use datafusion::error::DataFusionError;
use datafusion::prelude::{DataFrame, SessionContext};
use datafusion::sql::parser::{CopyToSource, DFParser, Statement as DfStatement};
use datafusion::sql::sqlparser::ast::{visit_expressions_mut, Expr, UnaryOperator, Value};
use datafusion::sql::sqlparser::dialect::dialect_from_str;

use memq_core::error::{MemqError, Result};

/// Named parameter values.
pub type Params = BTreeMap<String, ScalarValue>;

/// Types a value as written on the command line or after `\set`: `'text'` is a string (quotes
/// removed, `''` for a quote), `NULL` is null, `true`/`false` are booleans, an integer is a
/// BIGINT, a decimal number is a DOUBLE, anything else is a string.
pub fn parse_value(text: &str) -> ScalarValue {
    let t = text.trim();
    if t.len() >= 2 && t.starts_with('\'') && t.ends_with('\'') {
        return ScalarValue::Utf8(Some(t[1..t.len() - 1].replace("''", "'")));
    }
    if t.eq_ignore_ascii_case("null") {
        return ScalarValue::Null;
    }
    if t.eq_ignore_ascii_case("true") || t.eq_ignore_ascii_case("false") {
        return ScalarValue::Boolean(Some(t.eq_ignore_ascii_case("true")));
    }
    if let Ok(i) = t.parse::<i64>() {
        return ScalarValue::Int64(Some(i));
    }
    if let Some(p) = hex_pointer(t) {
        return ScalarValue::UInt64(Some(p));
    }
    if t.bytes().any(|b| b.is_ascii_digit())
        && t.bytes()
            .all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b))
    {
        if let Ok(f) = t.parse::<f64>() {
            if f.is_finite() {
                return ScalarValue::Float64(Some(f));
            }
        }
    }
    ScalarValue::Utf8(Some(text.to_string()))
}

/// Parses `name=value` (a `--param` argument).
pub fn parse_assignment(arg: &str) -> Result<(String, ScalarValue)> {
    let (name, value) = arg
        .split_once('=')
        .ok_or_else(|| MemqError::Usage(format!("--param {arg}: expected name=value")))?;
    let name = name.trim().trim_start_matches('$');
    check_name(name)?;
    Ok((name.to_string(), parse_value(value)))
}

/// A parameter name is an identifier.
pub fn check_name(name: &str) -> Result<()> {
    let ok = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(MemqError::Usage(format!(
            "`{name}` is not a parameter name (letters, digits and _)"
        )))
    }
}

/// The SQL type of a value, for listings.
pub fn type_name(v: &ScalarValue) -> &'static str {
    match v {
        ScalarValue::Int64(_) => "BIGINT",
        ScalarValue::UInt64(_) => "UBIGINT",
        ScalarValue::Float64(_) => "DOUBLE",
        ScalarValue::Boolean(_) => "BOOLEAN",
        ScalarValue::Null => "NULL",
        _ => "VARCHAR",
    }
}

/// One literal node for a value.
fn literal(v: &ScalarValue) -> Expr {
    let value = |v: Value| Expr::Value(v.with_empty_span());
    match v {
        ScalarValue::Int64(Some(i)) if *i < 0 => Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr: Box::new(value(Value::Number(i.unsigned_abs().to_string(), false))),
        },
        ScalarValue::Int64(Some(i)) => value(Value::Number(i.to_string(), false)),
        ScalarValue::Float64(Some(f)) if *f < 0.0 => Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr: Box::new(value(Value::Number(format!("{:?}", -f), false))),
        },
        ScalarValue::Float64(Some(f)) => value(Value::Number(format!("{f:?}"), false)),
        ScalarValue::Boolean(Some(b)) => value(Value::Boolean(*b)),
        ScalarValue::UInt64(Some(u)) => value(Value::Number(u.to_string(), false)),
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => value(Value::SingleQuotedString(s.clone())),
        _ if v.is_null() => value(Value::Null),
        other => value(Value::SingleQuotedString(other.to_string())),
    }
}

/// `0x…` (up to 16 hex digits) as a number: an address as dumps and stacks print it.
pub fn hex_pointer(text: &str) -> Option<u64> {
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))?;
    (!digits.is_empty() && digits.len() <= 16)
        .then(|| u64::from_str_radix(digits, 16).ok())
        .flatten()
}

/// A column that holds addresses (`ptr`, `addr`, `address`, `segment_address`, `*_ptr`, …).
fn is_pointer_column(e: &Expr) -> bool {
    let name = match e {
        Expr::Identifier(i) => &i.value,
        Expr::CompoundIdentifier(parts) => match parts.last() {
            Some(i) => &i.value,
            None => return false,
        },
        _ => return false,
    };
    let n = name.to_ascii_lowercase();
    matches!(n.as_str(), "ptr" | "addr" | "address")
        || n.ends_with("_ptr")
        || n.ends_with("_addr")
        || n.ends_with("_address")
}

/// Addresses written as dumps print them: a bare `0x0000fffdc0000000` is a number (SQL would
/// read it as bytes), and so is `'0x…'` compared with an address column.
fn pointer_literals(e: &mut Expr) {
    let as_number = |e: &mut Expr, quoted: bool| {
        if let Expr::Value(v) = e {
            let hex = match &v.value {
                Value::HexStringLiteral(h) => hex_pointer(&format!("0x{h}")),
                Value::Number(n, _) => hex_pointer(n),
                Value::SingleQuotedString(s) if quoted => hex_pointer(s.trim()),
                _ => None,
            };
            if let Some(p) = hex {
                *e = Expr::Value(Value::Number(p.to_string(), false).with_empty_span());
            }
        }
    };
    match e {
        Expr::BinaryOp { left, right, .. } => {
            if is_pointer_column(left) {
                as_number(right, true);
            } else if is_pointer_column(right) {
                as_number(left, true);
            }
        }
        Expr::InList { expr, list, .. } if is_pointer_column(expr) => {
            for item in list {
                as_number(item, true);
            }
        }
        Expr::Between {
            expr, low, high, ..
        } if is_pointer_column(expr) => {
            as_number(low, true);
            as_number(high, true);
        }
        Expr::Value(_) => as_number(e, false),
        _ => {}
    }
}

/// Replaces every `$name` placeholder of `statement` by its value. A placeholder without a value
/// is an error naming it; positional placeholders (`$1`) are left alone. Addresses written in hex
/// become numbers (`pointer_literals`).
pub fn bind_statement(statement: &mut DfStatement, params: &Params) -> Result<()> {
    let mut missing: Option<String> = None;
    let mut f = |e: &mut Expr| {
        pointer_literals(e);
        if let Expr::Value(v) = e {
            if let Value::Placeholder(p) = &v.value {
                let name = p.trim_start_matches('$');
                if name.is_empty() || name.chars().all(|c| c.is_ascii_digit()) {
                    return ControlFlow::Continue(());
                }
                match params.get(name) {
                    Some(value) => *e = literal(value),
                    None => {
                        missing = Some(name.to_string());
                        return ControlFlow::Break(());
                    }
                }
            }
        }
        ControlFlow::Continue(())
    };
    match statement {
        DfStatement::Statement(s) => {
            let _ = visit_expressions_mut(s.as_mut(), &mut f);
        }
        DfStatement::CopyTo(c) => {
            if let CopyToSource::Query(q) = &mut c.source {
                let _ = visit_expressions_mut(q.as_mut(), &mut f);
            }
        }
        DfStatement::Explain(e) => return bind_statement(e.statement.as_mut(), params),
        _ => {}
    }
    match missing {
        Some(name) => Err(MemqError::Query(format!(
            "parameter ${name} has no value (set it with `\\set {name} VALUE` in the REPL or `--param {name}=VALUE`)"
        ))),
        None => Ok(()),
    }
}

/// Parses SQL text into statements with the session's dialect; the parser's error as it is
/// (with its position, for [`crate::sql_error::describe`]).
pub fn parse_statements_df(
    ctx: &SessionContext,
    sql: &str,
) -> std::result::Result<Vec<DfStatement>, DataFusionError> {
    let dialect_name = ctx
        .state()
        .config()
        .options()
        .sql_parser
        .dialect
        .to_string();
    let dialect = dialect_from_str(&dialect_name).ok_or_else(|| {
        DataFusionError::Configuration(format!("unknown SQL dialect {dialect_name}"))
    })?;
    Ok(DFParser::parse_sql_with_dialect(sql, dialect.as_ref())?
        .into_iter()
        .collect())
}

/// Why a statement could not be planned.
pub enum PlanError {
    /// A parameter without a value.
    Bind(MemqError),
    /// The planner's error as it is.
    Df(DataFusionError),
}

/// Binds and plans one parsed statement (DDL such as `CREATE VIEW` takes effect here), keeping
/// the planner's error as it is.
pub async fn plan_statement_df(
    ctx: &SessionContext,
    mut statement: DfStatement,
    params: &Params,
) -> std::result::Result<DataFrame, PlanError> {
    bind_statement(&mut statement, params).map_err(PlanError::Bind)?;
    let state = ctx.state();
    let plan = state
        .statement_to_plan(statement)
        .await
        .map_err(PlanError::Df)?;
    ctx.execute_logical_plan(plan).await.map_err(PlanError::Df)
}

/// Parses SQL text into statements with the session's dialect.
pub fn parse_statements(ctx: &SessionContext, sql: &str) -> Result<Vec<DfStatement>> {
    let dialect_name = ctx
        .state()
        .config()
        .options()
        .sql_parser
        .dialect
        .to_string();
    let dialect = dialect_from_str(&dialect_name)
        .ok_or_else(|| MemqError::Query(format!("unknown SQL dialect {dialect_name}")))?;
    Ok(DFParser::parse_sql_with_dialect(sql, dialect.as_ref())?
        .into_iter()
        .collect())
}

/// Binds and plans one parsed statement (DDL such as `CREATE VIEW` takes effect here).
pub async fn plan_statement(
    ctx: &SessionContext,
    mut statement: DfStatement,
    params: &Params,
) -> Result<DataFrame> {
    bind_statement(&mut statement, params)?;
    let state = ctx.state();
    let plan = state.statement_to_plan(statement).await?;
    Ok(ctx.execute_logical_plan(plan).await?)
}

/// Parses, binds and plans SQL text that holds exactly one statement.
pub async fn plan_one(ctx: &SessionContext, sql: &str, params: &Params) -> Result<DataFrame> {
    let mut statements = parse_statements(ctx, sql)?;
    match statements.len() {
        1 => plan_statement(ctx, statements.remove(0), params).await,
        0 => Err(MemqError::Query("no statement".into())),
        n => Err(MemqError::Query(format!(
            "expected one statement, found {n}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_typed() {
        assert_eq!(parse_value("42"), ScalarValue::Int64(Some(42)));
        assert_eq!(parse_value("-7"), ScalarValue::Int64(Some(-7)));
        assert_eq!(parse_value("1.5"), ScalarValue::Float64(Some(1.5)));
        assert_eq!(parse_value("'42'"), ScalarValue::Utf8(Some("42".into())));
        assert_eq!(
            parse_value("'it''s'"),
            ScalarValue::Utf8(Some("it's".into()))
        );
        assert_eq!(parse_value("HAL"), ScalarValue::Utf8(Some("HAL".into())));
        assert_eq!(parse_value("true"), ScalarValue::Boolean(Some(true)));
        assert_eq!(parse_value("NULL"), ScalarValue::Null);
        assert_eq!(
            parse_value("1; DROP VIEW peaks"),
            ScalarValue::Utf8(Some("1; DROP VIEW peaks".into()))
        );
        assert_eq!(parse_value("inf"), ScalarValue::Utf8(Some("inf".into())));
        // An address as dumps print it.
        assert_eq!(
            parse_value("0x0000fffdc0000000"),
            ScalarValue::UInt64(Some(0xfffd_c000_0000))
        );
        assert_eq!(parse_value("0xZZ"), ScalarValue::Utf8(Some("0xZZ".into())));
        assert_eq!(
            parse_value("0x1ffffffffffffffff"),
            ScalarValue::Utf8(Some("0x1ffffffffffffffff".into()))
        );
        assert!(parse_assignment("x").is_err());
        assert!(parse_assignment("1x=2").is_err());
        assert_eq!(
            parse_assignment("$ts=5").unwrap(),
            ("ts".to_string(), ScalarValue::Int64(Some(5)))
        );
    }

    #[tokio::test]
    async fn placeholders_become_literals_and_cannot_inject() {
        let ctx = SessionContext::new();
        let mut params = Params::new();
        params.insert("a".into(), ScalarValue::Int64(Some(-3)));
        params.insert("s".into(), parse_value("x'); DROP TABLE t; --"));
        params.insert("f".into(), ScalarValue::Float64(Some(0.25)));
        let df = plan_one(&ctx, "SELECT $a + 1 AS a, $s AS s, $f * 2 AS f", &params)
            .await
            .unwrap();
        let batches = df.collect().await.unwrap();
        let text = datafusion::arrow::util::pretty::pretty_format_batches(&batches)
            .unwrap()
            .to_string();
        assert!(
            text.contains("| -2 | x'); DROP TABLE t; -- | 0.5 |"),
            "{text}"
        );
        let err = plan_one(&ctx, "SELECT $missing", &params)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("$missing"), "{err}");
    }
}
