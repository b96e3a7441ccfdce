//! Tab completion: SQL keywords, tables, views, columns and functions of the session; meta
//! commands after `\`; file paths after `\i` / `\o`; table and view names after `\d`; the
//! choices of `\format`, `\timing` and `\bytes`.

use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};

use datafusion::datasource::TableType;
use datafusion::prelude::SessionContext;
use rustyline::completion::{Completer, FilenameCompleter, Pair};
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::Validator;
use rustyline::{Context, Helper};

use super::meta;

/// Common SQL keywords (DataFusion's dialect).
pub const KEYWORDS: &[&str] = &[
    "ALL",
    "ALTER",
    "AND",
    "ANTI",
    "ARRAY",
    "AS",
    "ASC",
    "BETWEEN",
    "BIGINT",
    "BOOLEAN",
    "BY",
    "CASE",
    "CAST",
    "COPY",
    "CREATE",
    "CROSS",
    "CURRENT",
    "DESC",
    "DESCRIBE",
    "DISTINCT",
    "DOUBLE",
    "DROP",
    "ELSE",
    "END",
    "EXCEPT",
    "EXISTS",
    "EXPLAIN",
    "EXTERNAL",
    "FALSE",
    "FILTER",
    "FIRST",
    "FOLLOWING",
    "FROM",
    "FULL",
    "GROUP",
    "HAVING",
    "IF",
    "ILIKE",
    "IN",
    "INNER",
    "INSERT",
    "INT",
    "INTERSECT",
    "INTERVAL",
    "INTO",
    "IS",
    "JOIN",
    "LAST",
    "LATERAL",
    "LEFT",
    "LIKE",
    "LIMIT",
    "NATURAL",
    "NOT",
    "NULL",
    "NULLS",
    "OFFSET",
    "ON",
    "OR",
    "ORDER",
    "OUTER",
    "OVER",
    "PARTITION",
    "PRECEDING",
    "QUALIFY",
    "RANGE",
    "RECURSIVE",
    "REPLACE",
    "RIGHT",
    "ROW",
    "ROWS",
    "SELECT",
    "SEMI",
    "SET",
    "SHOW",
    "SIMILAR",
    "TABLE",
    "TABLES",
    "THEN",
    "TRUE",
    "TRY_CAST",
    "UNBOUNDED",
    "UNION",
    "UNNEST",
    "USING",
    "VALUES",
    "VARCHAR",
    "VIEW",
    "WHEN",
    "WHERE",
    "WINDOW",
    "WITH",
];

/// The names completion offers, refreshed from the session after each statement.
#[derive(Debug, Default, Clone)]
pub struct Vocabulary {
    pub tables: Vec<String>,
    pub views: Vec<String>,
    pub table_functions: Vec<String>,
    pub functions: Vec<String>,
    pub columns: Vec<String>,
}

impl Vocabulary {
    /// Reads every table, view (with their columns) and function of the session.
    pub async fn load(ctx: &SessionContext) -> Vocabulary {
        let mut v = Vocabulary::default();
        let mut columns = BTreeSet::new();
        let state = ctx.state();
        let catalog_name = state.config().options().catalog.default_catalog.clone();
        let schema_name = state.config().options().catalog.default_schema.clone();
        if let Some(schema) = ctx
            .catalog(&catalog_name)
            .and_then(|c| c.schema(&schema_name))
        {
            let mut names = schema.table_names();
            names.sort();
            for name in names {
                if let Ok(Some(t)) = schema.table(&name).await {
                    for f in t.schema().fields() {
                        columns.insert(f.name().clone());
                    }
                    match t.table_type() {
                        TableType::View => v.views.push(name),
                        _ => v.tables.push(name),
                    }
                }
            }
        }
        let mut functions: BTreeSet<String> = state.scalar_functions().keys().cloned().collect();
        functions.extend(state.aggregate_functions().keys().cloned());
        functions.extend(state.window_functions().keys().cloned());
        v.functions = functions.into_iter().collect();
        let mut tf: Vec<String> = state.table_functions().keys().cloned().collect();
        tf.sort();
        v.table_functions = tf;
        v.columns = columns.into_iter().collect();
        v
    }

    /// Table, view and table function names (what can follow FROM or `\d`).
    pub fn relations(&self) -> impl Iterator<Item = &String> {
        self.tables
            .iter()
            .chain(&self.views)
            .chain(&self.table_functions)
    }
}

/// The rustyline helper of the REPL.
pub struct MemqHelper {
    pub vocab: Arc<RwLock<Vocabulary>>,
    files: FilenameCompleter,
}

impl MemqHelper {
    pub fn new(vocab: Arc<RwLock<Vocabulary>>) -> MemqHelper {
        MemqHelper {
            vocab,
            files: FilenameCompleter::new(),
        }
    }
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Keywords follow the case of what was typed: `sel` → `select`, `SEL` → `SELECT`.
fn keyword_case(keyword: &str, typed: &str) -> String {
    if typed.chars().any(|c| c.is_ascii_uppercase()) {
        keyword.to_string()
    } else {
        keyword.to_ascii_lowercase()
    }
}

fn starts_with_ci(candidate: &str, prefix: &str) -> bool {
    candidate.len() >= prefix.len()
        && candidate.is_char_boundary(prefix.len())
        && candidate[..prefix.len()].eq_ignore_ascii_case(prefix)
}

fn pairs<'a>(words: impl Iterator<Item = &'a str>, prefix: &str) -> Vec<Pair> {
    let set: BTreeSet<&str> = words.filter(|w| starts_with_ci(w, prefix)).collect();
    set.into_iter()
        .map(|w| Pair {
            display: w.to_string(),
            replacement: w.to_string(),
        })
        .collect()
}

/// Completion candidates for `line` with the cursor at `pos`: (start of the replaced text, candidates).
pub fn complete(
    vocab: &Vocabulary,
    files: &FilenameCompleter,
    line: &str,
    pos: usize,
) -> (usize, Vec<Pair>) {
    let before = &line[..pos];
    let start = before
        .char_indices()
        .rev()
        .find(|(_, c)| !is_word(*c))
        .map(|(i, c)| i + c.len_utf8())
        .unwrap_or(0);
    let prefix = &before[start..];
    let trimmed = before.trim_start();
    if let Some(meta_line) = trimmed.strip_prefix('\\') {
        let lead = before.len() - trimmed.len();
        let Some((cmd, _args)) = meta_line.split_once(char::is_whitespace) else {
            // Still typing the command itself.
            let typed = &before[lead..];
            let c = pairs(meta::COMMANDS.iter().map(|c| c.name), typed);
            return (lead, c);
        };
        let choices: &[&str] = match cmd {
            "i" | "o" => {
                return files.complete_path(line, pos).unwrap_or((pos, Vec::new()));
            }
            "d" => {
                let names: Vec<&str> = vocab.relations().map(String::as_str).collect();
                return (start, pairs(names.into_iter(), prefix));
            }
            "format" => &["table", "csv", "tsv", "json", "ndjson", "markdown"],
            "timing" => &["on", "off"],
            "bytes" => &["human", "raw"],
            _ => &[],
        };
        return (start, pairs(choices.iter().copied(), prefix));
    }
    if prefix.is_empty() {
        return (pos, Vec::new());
    }
    let mut out: Vec<Pair> = Vec::new();
    let names = vocab
        .relations()
        .chain(&vocab.columns)
        .chain(&vocab.functions)
        .map(String::as_str);
    out.extend(pairs(names, prefix));
    let keywords: Vec<String> = KEYWORDS
        .iter()
        .filter(|k| starts_with_ci(k, prefix))
        .map(|k| keyword_case(k, prefix))
        .collect();
    for k in keywords {
        if !out.iter().any(|p| p.replacement.eq_ignore_ascii_case(&k)) {
            out.push(Pair {
                display: k.clone(),
                replacement: k,
            });
        }
    }
    (start, out)
}

impl Completer for MemqHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let vocab = self.vocab.read().map(|v| v.clone()).unwrap_or_default();
        Ok(complete(&vocab, &self.files, line, pos))
    }
}

impl Hinter for MemqHelper {
    type Hint = String;
}
impl Highlighter for MemqHelper {}
impl Validator for MemqHelper {}
impl Helper for MemqHelper {}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab() -> Vocabulary {
        Vocabulary {
            tables: vec!["events".into(), "blocks".into()],
            views: vec!["peaks".into()],
            table_functions: vec!["breakdown_at".into()],
            functions: vec!["fmt_bytes".into(), "sum".into()],
            columns: vec!["device_used".into(), "event_type".into()],
        }
    }

    fn names(line: &str) -> (usize, Vec<String>) {
        let (s, c) = complete(&vocab(), &FilenameCompleter::new(), line, line.len());
        (s, c.into_iter().map(|p| p.replacement).collect())
    }

    #[test]
    fn completes_names_keywords_and_meta_commands() {
        assert_eq!(names("SELECT * FROM pea"), (14, vec!["peaks".to_string()]));
        assert_eq!(
            names("select device_u"),
            (7, vec!["device_used".to_string()])
        );
        assert_eq!(names("sel"), (0, vec!["select".to_string()]));
        assert_eq!(names("SEL"), (0, vec!["SELECT".to_string()]));
        assert_eq!(names("SELECT fmt_b"), (7, vec!["fmt_bytes".to_string()]));
        assert_eq!(names("\\ti"), (0, vec!["\\timing".to_string()]));
        assert_eq!(names("\\d ev"), (3, vec!["events".to_string()]));
        assert_eq!(names("\\format js"), (8, vec!["json".to_string()]));
        assert!(names("SELECT ").1.is_empty());
        let (_, event) = names("SELECT event");
        assert!(event.contains(&"events".to_string()) && event.contains(&"event_type".to_string()));
    }

    #[test]
    fn completes_file_paths_after_i_and_o() {
        let dir = tempfile::TempDir::new().unwrap();
        std::fs::write(dir.path().join("queries_one.sql"), "").unwrap();
        for cmd in ["\\i", "\\o"] {
            let line = format!("{cmd} {}/queries_o", dir.path().display());
            let (_, c) = names(&line);
            assert_eq!(c.len(), 1, "{line}");
            assert!(c[0].ends_with("queries_one.sql"), "{:?}", c[0]);
        }
    }
}
