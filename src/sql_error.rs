//! SQL errors as a person reads them: one line without Rust Debug text or DataFusion's
//! internal prefixes (`SQL error: ParserError("…")`, `memq.main.`), "did you mean" for an
//! unknown table, view or table function, and the statement's line with a caret under the
//! failing token:
//!
//! ```text
//! syntax error at line 1, column 10: expected end of statement, found FORM
//!   SELECT 1 FORM events
//!            ^^^^
//! ```

use datafusion::error::DataFusionError;
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::parser::ParserError;

/// Prefixes DataFusion puts before its messages.
const PREFIXES: &[&str] = &[
    "Error during planning: ",
    "Execution error: ",
    "SQL error: ",
    "Arrow error: ",
    "External error: ",
    "Schema error: ",
    "Parquet error: ",
    "IO error: ",
    "Internal error: ",
    "Invalid argument error: ",
    "Compute error: ",
    "Cast error: ",
    "Invalid or Unsupported Configuration: ",
];

/// Catalog prefixes that mean nothing to a user.
const INTERNAL_NAMES: &[&str] = &["memq.main.", "datafusion.public."];

/// `Expected: X, found: Y at Line: 1, Column: 10` → (`expected X, found Y`, line, column).
fn parser_message(text: &str) -> (String, Option<(u64, u64)>) {
    let mut msg = text.trim().to_string();
    let mut at = None;
    if let Some(i) = msg.rfind(" at Line: ") {
        let tail = &msg[i + " at Line: ".len()..];
        if let Some((l, c)) = tail.split_once(", Column: ") {
            if let (Ok(l), Ok(c)) = (l.trim().parse(), c.trim().parse()) {
                at = Some((l, c));
                msg.truncate(i);
            }
        }
    }
    if let Some(rest) = msg.strip_prefix("Expected: ") {
        msg = format!("expected {}", rest.replacen(", found: ", ", found ", 1));
    }
    (msg, at)
}

/// Removes DataFusion's prefixes and internal names from each line, drops the long "Valid
/// fields are …" lists and the bug-report boilerplate.
fn clean(text: &str) -> String {
    let text = text
        .split(DataFusionError::BACK_TRACE_SEP)
        .next()
        .unwrap_or_default();
    let mut lines = Vec::new();
    for line in text.lines() {
        let mut l = line.trim();
        if l.is_empty()
            || l == "caused by"
            || l.starts_with("Valid fields are ")
            || l.starts_with("This issue was likely caused by a bug in DataFusion")
        {
            continue;
        }
        loop {
            let before = l;
            for p in PREFIXES {
                if let Some(r) = l.strip_prefix(p) {
                    l = r;
                }
            }
            if l == before {
                break;
            }
        }
        let mut l = l.to_string();
        for n in INTERNAL_NAMES {
            l = l.replace(n, "");
        }
        if lines.last() != Some(&l) {
            lines.push(l);
        }
    }
    let mut out = lines.join("\n");
    // The bug-report note ends the first line with a lone period.
    if out.ends_with("..") {
        out.pop();
    }
    out
}

/// The error as readable text (no position, no suggestions).
pub fn plain(e: &DataFusionError) -> String {
    plain_at(e).0
}

fn plain_at(e: &DataFusionError) -> (String, Option<(u64, u64)>) {
    let root = e.find_root();
    if let DataFusionError::SQL(p, _) = root {
        return match p.as_ref() {
            ParserError::ParserError(m) | ParserError::TokenizerError(m) => {
                let (msg, at) = parser_message(m);
                let msg = match at {
                    Some((l, c)) => format!("syntax error at line {l}, column {c}: {msg}"),
                    None => format!("syntax error: {msg}"),
                };
                (msg, at)
            }
            ParserError::RecursionLimitExceeded => {
                ("the statement is nested too deeply".to_string(), None)
            }
        };
    }
    if let Some(d) = e.diagnostic() {
        let span = d
            .span
            .filter(|s| s.start.line > 0)
            .map(|s| (s.start.line, s.start.column));
        let (msg, at) = parser_message(&d.message);
        if let DataFusionError::Plan(_) | DataFusionError::SchemaError(..) = root {
            // The diagnostic's message is the short form of the planner's.
            let mut m = clean(&msg);
            // Keep the planner's hint lines (case sensitivity, did you mean).
            let full = clean(&root.to_string());
            for extra in full.lines().skip(1) {
                m.push('\n');
                m.push_str(extra);
            }
            if let Some(hint) = full.lines().next().and_then(|l| {
                l.find(". Did you mean ")
                    .map(|i| l[i + 2..].trim_end_matches('.').to_string())
            }) {
                if !m.contains("Did you mean") {
                    m = format!("{m}. {hint}");
                }
            }
            return (m, span.or(at));
        }
        return (clean(&e.to_string()), span.or(at));
    }
    (clean(&e.to_string()), None)
}

/// Levenshtein distance over lower-cased characters.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The candidate nearest to `name`, if near enough to be what was meant.
pub fn nearest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let lower = name.to_lowercase();
    let limit = 1 + name.chars().count() / 3;
    candidates
        .into_iter()
        .filter(|c| !c.eq_ignore_ascii_case(name))
        .map(|c| {
            let d = distance(name, c);
            // A prefix of a longer name counts as near (`pea` for `peaks`).
            let d = if c.to_lowercase().starts_with(&lower) && lower.len() >= 3 {
                d.min(1)
            } else {
                d
            };
            (d, c.len(), c)
        })
        .filter(|(d, _, _)| *d <= limit)
        .min()
        .map(|(_, _, c)| c.to_string())
}

/// The names a FROM may refer to: tables and views of every schema, the library's analyses and
/// the table functions.
fn relation_names(ctx: &SessionContext) -> Vec<String> {
    let mut names = Vec::new();
    for c in ctx.catalog_names() {
        if let Some(cat) = ctx.catalog(&c) {
            for s in cat.schema_names() {
                if s == "information_schema" {
                    continue;
                }
                if let Some(schema) = cat.schema(&s) {
                    names.extend(schema.table_names());
                }
            }
        }
    }
    names.extend(
        crate::analyses()
            .iter()
            .filter(|a| !a.private)
            .map(|a| a.name.clone()),
    );
    names.extend(ctx.state().table_functions().keys().cloned());
    names.sort();
    names.dedup();
    names
}

/// The unknown name in `table 'x' not found` / `table function 'x' not found`.
fn unknown_relation(msg: &str) -> Option<String> {
    for key in ["table function '", "table '"] {
        if let Some(i) = msg.find(key) {
            let rest = &msg[i + key.len()..];
            if let Some(j) = rest.find("' not found") {
                let name = &rest[..j];
                return Some(name.rsplit('.').next().unwrap_or(name).to_string());
            }
        }
    }
    None
}

/// The SQL line `line` (1-based) with a caret under `column` (1-based, characters), the caret as
/// wide as the token there.
pub fn caret(sql: &str, line: u64, column: u64) -> Option<String> {
    let text = sql.lines().nth(line.checked_sub(1)? as usize)?;
    let chars: Vec<char> = text
        .chars()
        .map(|c| if c == '\t' { ' ' } else { c })
        .collect();
    let col = (column.max(1) - 1) as usize;
    if col > chars.len() {
        return None;
    }
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let len = match chars.get(col) {
        Some(&c) if word(c) => chars[col..].iter().take_while(|&&c| word(c)).count(),
        Some(&'\'') => {
            1 + chars[col + 1..]
                .iter()
                .position(|&c| c == '\'')
                .map_or(chars.len() - col - 1, |p| p + 1)
        }
        _ => 1,
    };
    // A long line: a window around the column.
    const WINDOW: usize = 100;
    let (start, prefix) = if col > WINDOW - 20 {
        (col - (WINDOW - 40), "…")
    } else {
        (0, "")
    };
    let end = (start + WINDOW).min(chars.len());
    let shown: String = chars[start..end].iter().collect();
    let suffix = if end < chars.len() { "…" } else { "" };
    let pad = prefix.chars().count() + col - start;
    let len = len.min(end.saturating_sub(col)).max(1);
    Some(format!(
        "  {prefix}{shown}{suffix}\n  {}{}",
        " ".repeat(pad),
        "^".repeat(len)
    ))
}

/// The error as one readable line, a "did you mean" for an unknown relation, and the SQL line
/// with a caret under the failing token where the error carries its position.
pub fn describe(e: &DataFusionError, sql: &str, ctx: &SessionContext) -> String {
    let (mut msg, at) = plain_at(e);
    if let Some(name) = unknown_relation(&msg) {
        let names = relation_names(ctx);
        if let Some(best) = nearest(&name, names.iter().map(String::as_str)) {
            msg = format!("{msg}; did you mean `{best}`?");
        }
    }
    // "Did you mean" on the line it belongs to.
    msg = msg.replace("\nDid you mean", "; did you mean");
    let at = at.or_else(|| locate(&msg, sql));
    if let Some((line, column)) = at {
        if let Some(c) = caret(sql, line, column) {
            msg = format!("{msg}\n{c}");
        }
    }
    msg
}

/// Where an error without a position points: the end of the text for `found EOF`, else the
/// first whole-word occurrence of the name it quotes (`column 'nope' not found`).
fn locate(msg: &str, sql: &str) -> Option<(u64, u64)> {
    if msg.contains("found EOF") {
        let (i, line) = sql
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .last()?;
        return Some((i as u64 + 1, line.trim_end().chars().count() as u64 + 1));
    }
    let start = msg.find('\'')? + 1;
    let len = msg[start..].find('\'')?;
    let name = &msg[start..start + len];
    let name = name.rsplit('.').next().unwrap_or(name);
    if name.is_empty() {
        return None;
    }
    let word = |c: char| c.is_alphanumeric() || c == '_';
    for (li, line) in sql.lines().enumerate() {
        let lower = line.to_lowercase();
        let needle = name.to_lowercase();
        let mut from = 0;
        while let Some(p) = lower[from..].find(&needle) {
            let p = from + p;
            let before = lower[..p].chars().next_back();
            let after = lower[p + needle.len()..].chars().next();
            if !before.is_some_and(word) && !after.is_some_and(word) {
                return Some((li as u64 + 1, lower[..p].chars().count() as u64 + 1));
            }
            from = p + needle.len();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parser_errors_read_well() {
        let e = datafusion::sql::parser::DFParser::parse_sql("SELECT * FORM events").unwrap_err();
        let ctx = SessionContext::new();
        let text = describe(&e, "SELECT * FORM events", &ctx);
        assert_eq!(
            text,
            "syntax error at line 1, column 10: expected end of statement, found FORM\n  \
             SELECT * FORM events\n           ^^^^"
        );
    }

    #[test]
    fn near_names() {
        let c = ["peaks", "curve", "blocks", "events"];
        assert_eq!(nearest("peak", c).as_deref(), Some("peaks"));
        assert_eq!(nearest("pea", c).as_deref(), Some("peaks"));
        assert_eq!(nearest("evnts", c).as_deref(), Some("events"));
        assert_eq!(nearest("zzzzzz", c), None);
    }

    #[tokio::test]
    async fn unknown_tables_get_a_suggestion_without_internal_names() {
        let ctx = SessionContext::new();
        ctx.sql("CREATE VIEW peaks AS SELECT 1 AS x").await.unwrap();
        let sql = "SELECT *\nFROM peak";
        let e = ctx.sql(sql).await.unwrap_err();
        let text = describe(&e, sql, &ctx);
        assert!(
            text.starts_with("table 'peak' not found; did you mean `peaks`?"),
            "{text}"
        );
        assert!(text.ends_with("  FROM peak\n       ^^^^"), "{text}");
        assert!(!text.contains("datafusion.public"), "{text}");
    }
}
