//! Tab completion by position in the statement: after FROM / JOIN the tables, views and table
//! functions; in the SELECT list, WHERE, GROUP BY, ORDER BY, ON the columns of the statement's
//! tables, then functions and keywords; after a table in FROM the keywords that may follow it;
//! `alias.` the columns of that table. Meta commands after `\`; file paths after `\i` / `\o`;
//! table and view names after `\d`; the choices of `\format`, `\timing` and `\bytes`.

use std::collections::{BTreeMap, BTreeSet};
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

/// Keywords that begin a statement (offered on an empty statement).
const STATEMENT_START: &[&str] = &[
    "COPY", "CREATE", "DESCRIBE", "DROP", "EXPLAIN", "INSERT", "SELECT", "SET", "SHOW", "VALUES",
    "WITH",
];

/// Keywords that may follow a table name in FROM / JOIN (or its alias).
const AFTER_RELATION: &[&str] = &[
    "AS",
    "CROSS",
    "EXCEPT",
    "FULL",
    "GROUP",
    "HAVING",
    "INNER",
    "INTERSECT",
    "JOIN",
    "LEFT",
    "LIMIT",
    "NATURAL",
    "ON",
    "ORDER",
    "OUTER",
    "QUALIFY",
    "RIGHT",
    "UNION",
    "USING",
    "WHERE",
    "WINDOW",
];

/// Keywords that start a clause: the completion context is the last of them before the cursor.
const CLAUSES: &[&str] = &[
    "BY", "DESCRIBE", "FROM", "HAVING", "INTO", "JOIN", "LIMIT", "OFFSET", "ON", "QUALIFY",
    "SELECT", "TABLE", "USING", "VIEW", "WHERE", "WINDOW",
];

/// The names completion offers, refreshed from the session after each statement.
#[derive(Debug, Default, Clone)]
pub struct Vocabulary {
    pub tables: Vec<String>,
    pub views: Vec<String>,
    pub table_functions: Vec<String>,
    pub functions: Vec<String>,
    /// Every column of every table and view.
    pub columns: Vec<String>,
    /// The columns of each table, view and table function of the library.
    pub columns_of: BTreeMap<String, Vec<String>>,
}

impl Vocabulary {
    /// Reads every table, view (with their columns) and function of the session. The library's
    /// views are taken from their `@column` lines, which are checked against the plan when a
    /// view is planned: asking the schema for them would plan all of them at the shell's start
    /// (0.2 s of the 0.3 s it took to show the prompt on a 1 M-event dataset).
    pub async fn load(ctx: &SessionContext) -> Vocabulary {
        let mut v = Vocabulary::default();
        let mut columns = BTreeSet::new();
        let analyses = crate::analyses();
        let library_views: BTreeMap<&str, &memq_engine::library::Analysis> = analyses
            .iter()
            .filter(|a| !a.is_table_function())
            .map(|a| (a.name.as_str(), a))
            .collect();
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
                let (own, view): (Vec<String>, bool) =
                    if let Some(a) = library_views.get(name.as_str()) {
                        (column_names(a), true)
                    } else if let Ok(Some(t)) = schema.table(&name).await {
                        let own = t
                            .schema()
                            .fields()
                            .iter()
                            .map(|f| f.name().clone())
                            .collect();
                        (own, t.table_type() == TableType::View)
                    } else {
                        continue;
                    };
                columns.extend(own.iter().cloned());
                v.columns_of.insert(name.clone(), own);
                if view {
                    v.views.push(name);
                } else {
                    v.tables.push(name);
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
        for a in analyses.iter().filter(|a| a.is_table_function()) {
            v.columns_of.insert(a.name.clone(), column_names(a));
        }
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

    fn is_relation(&self, name: &str) -> bool {
        self.relations().any(|r| r.eq_ignore_ascii_case(name))
    }

    fn columns_of(&self, relation: &str) -> Option<&Vec<String>> {
        self.columns_of
            .iter()
            .find(|(r, _)| r.eq_ignore_ascii_case(relation))
            .map(|(_, c)| c)
    }
}

/// The columns an analysis declares (its `@column` lines).
fn column_names(a: &memq_engine::library::Analysis) -> Vec<String> {
    a.columns.iter().map(|c| c.name.clone()).collect()
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

/// One token of a statement: a word (identifier, keyword or number; a `"quoted"` identifier
/// without its quotes) or a punctuation character. String literals and comments are skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Punct(char),
}

impl Token {
    fn is_keyword(&self, keyword: &str) -> bool {
        matches!(self, Token::Word(w) if w.eq_ignore_ascii_case(keyword))
    }

    fn clause(&self) -> Option<&'static str> {
        match self {
            Token::Word(w) => CLAUSES.iter().copied().find(|k| w.eq_ignore_ascii_case(k)),
            Token::Punct(_) => None,
        }
    }
}

/// The tokens of `sql`, each with its byte offset.
fn tokens(sql: &str) -> Vec<(usize, Token)> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = sql[i..].chars().next().unwrap_or(' ');
        let len = c.len_utf8();
        if c.is_whitespace() {
            i += len;
        } else if sql[i..].starts_with("--") {
            i = sql[i..].find('\n').map_or(b.len(), |n| i + n);
        } else if sql[i..].starts_with("/*") {
            i = sql[i + 2..].find("*/").map_or(b.len(), |n| i + n + 4);
        } else if c == '\'' || c == '"' {
            let end = sql[i + 1..].find(c).map_or(b.len(), |n| i + 1 + n);
            if c == '"' {
                out.push((i, Token::Word(sql[i + 1..end].to_string())));
            }
            i = (end + 1).min(b.len());
        } else if is_word(c) {
            let end = sql[i..]
                .char_indices()
                .find(|(_, ch)| !is_word(*ch))
                .map_or(b.len(), |(n, _)| i + n);
            out.push((i, Token::Word(sql[i..end].to_string())));
            i = end;
        } else {
            out.push((i, Token::Punct(c)));
            i += len;
        }
    }
    out
}

/// The relations a statement names after FROM and JOIN (and after commas in a FROM list), each
/// with its alias when it has one.
fn relations_in(tokens: &[Token], vocab: &Vocabulary) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        let after_clause = t.is_keyword("FROM") || t.is_keyword("JOIN");
        let in_from_list = *t == Token::Punct(',')
            && tokens[..i]
                .iter()
                .rev()
                .find_map(Token::clause)
                .is_some_and(|c| c == "FROM");
        if !(after_clause || in_from_list) {
            continue;
        }
        let Some(Token::Word(name)) = tokens.get(i + 1) else {
            continue;
        };
        if !vocab.is_relation(name) {
            continue;
        }
        // `name(args)` of a table function: the alias follows the closing parenthesis.
        let mut j = i + 2;
        if tokens.get(j) == Some(&Token::Punct('(')) {
            let mut depth = 0;
            while let Some(t) = tokens.get(j) {
                match t {
                    Token::Punct('(') => depth += 1,
                    Token::Punct(')') => depth -= 1,
                    _ => {}
                }
                j += 1;
                if depth == 0 {
                    break;
                }
            }
        }
        if tokens.get(j).is_some_and(|t| t.is_keyword("AS")) {
            j += 1;
        }
        let alias = match tokens.get(j) {
            Some(Token::Word(a)) if !KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(a)) => {
                Some(a.clone())
            }
            _ => None,
        };
        out.push((name.clone(), alias));
    }
    out
}

/// What the word under the cursor can be, from the tokens before it.
#[derive(Debug, PartialEq, Eq)]
enum Position {
    /// Nothing typed yet in this statement: a statement keyword.
    Start,
    /// After FROM, JOIN, `\d`, or a comma in a FROM list: a table, view or table function.
    Relation,
    /// After a relation (or its alias) in FROM: a keyword that may follow it.
    AfterRelation,
    /// `name.` : a column of that relation (or alias).
    Qualified(String),
    /// In an expression (SELECT list, WHERE, GROUP BY, ORDER BY, ON, function arguments, ...):
    /// a column of the statement's relations, a function, a keyword.
    Expression,
}

fn position(before: &[Token]) -> Position {
    let Some(prev) = before.last() else {
        return Position::Start;
    };
    if *prev == Token::Punct('.') {
        if let Some(Token::Word(q)) = before.get(before.len().wrapping_sub(2)) {
            return Position::Qualified(q.clone());
        }
    }
    // The clause at the cursor's parenthesis depth.
    let mut stack: Vec<Option<&'static str>> = vec![None];
    for t in before {
        match t {
            Token::Punct('(') => stack.push(None),
            Token::Punct(')') if stack.len() > 1 => {
                stack.pop();
            }
            _ => {
                if let Some(c) = t.clause() {
                    if let Some(top) = stack.last_mut() {
                        *top = Some(c);
                    }
                }
            }
        }
    }
    match stack.last().copied().flatten() {
        Some("FROM") | Some("JOIN") | Some("TABLE") | Some("INTO") | Some("DESCRIBE") => {
            if prev.clause().is_some() || *prev == Token::Punct(',') {
                Position::Relation
            } else if prev.is_keyword("AS") {
                Position::Expression
            } else {
                Position::AfterRelation
            }
        }
        _ => Position::Expression,
    }
}

/// Completion candidates for SQL text: what fits at the cursor's place in its statement.
fn complete_sql(vocab: &Vocabulary, line: &str, start: usize, prefix: &str) -> Vec<Pair> {
    let all = tokens(line);
    // The statement holding the cursor: between the `;` before it and the one after it.
    let first = all
        .iter()
        .rposition(|(at, t)| *at < start && *t == Token::Punct(';'))
        .map_or(0, |i| i + 1);
    let last = all[first..]
        .iter()
        .position(|(at, t)| *at >= start && *t == Token::Punct(';'))
        .map_or(all.len(), |i| first + i);
    let statement: Vec<Token> = all[first..last].iter().map(|(_, t)| t.clone()).collect();
    let before: Vec<Token> = all[first..last]
        .iter()
        .filter(|(at, _)| *at < start)
        .map(|(_, t)| t.clone())
        .collect();
    let keywords = |list: &[&str]| -> Vec<Pair> {
        list.iter()
            .filter(|k| starts_with_ci(k, prefix))
            .map(|k| {
                let k = keyword_case(k, prefix);
                Pair {
                    display: k.clone(),
                    replacement: k,
                }
            })
            .collect()
    };
    let mut out = match position(&before) {
        Position::Start => return keywords(STATEMENT_START),
        Position::AfterRelation => return keywords(AFTER_RELATION),
        Position::Relation => return pairs(vocab.relations().map(String::as_str), prefix),
        Position::Qualified(q) => {
            let relations = relations_in(&statement, vocab);
            let table = relations
                .iter()
                .find(|(_, a)| a.as_deref().is_some_and(|a| a.eq_ignore_ascii_case(&q)))
                .map(|(r, _)| r.as_str())
                .unwrap_or(&q);
            return match vocab.columns_of(table) {
                Some(cols) => pairs(cols.iter().map(String::as_str), prefix),
                None => pairs(vocab.columns.iter().map(String::as_str), prefix),
            };
        }
        Position::Expression => {
            if prefix.is_empty() {
                return Vec::new();
            }
            let relations = relations_in(&statement, vocab);
            let mut cols: Vec<&str> = relations
                .iter()
                .filter_map(|(r, _)| vocab.columns_of(r))
                .flatten()
                .map(String::as_str)
                .collect();
            if cols.is_empty() {
                cols = vocab.columns.iter().map(String::as_str).collect();
            }
            let mut out = pairs(cols.into_iter(), prefix);
            for f in pairs(vocab.functions.iter().map(String::as_str), prefix) {
                if !out.iter().any(|p| p.replacement == f.replacement) {
                    out.push(f);
                }
            }
            out
        }
    };
    for k in keywords(KEYWORDS) {
        if !out
            .iter()
            .any(|p| p.replacement.eq_ignore_ascii_case(&k.replacement))
        {
            out.push(k);
        }
    }
    out
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
    (start, complete_sql(vocab, line, start, prefix))
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
            columns: vec![
                "device_used".into(),
                "event_type".into(),
                "peak_bytes".into(),
                "pool".into(),
                "size".into(),
            ],
            columns_of: [
                ("events", &["device_used", "event_type", "size"][..]),
                ("blocks", &["size"][..]),
                ("peaks", &["peak_bytes", "pool"][..]),
                ("breakdown_at", &["owner", "size"][..]),
            ]
            .into_iter()
            .map(|(r, c)| (r.to_string(), c.iter().map(|c| c.to_string()).collect()))
            .collect(),
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
    }

    #[test]
    fn completion_follows_the_position_in_the_statement() {
        // After FROM / JOIN: relations only, not the column `peak_bytes` nor keywords.
        assert_eq!(names("SELECT * FROM pea").1, vec!["peaks".to_string()]);
        assert_eq!(
            names("SELECT * FROM events e JOIN pea").1,
            vec!["peaks".to_string()]
        );
        assert_eq!(
            names("SELECT * FROM events, b").1,
            vec!["blocks".to_string(), "breakdown_at".to_string()]
        );
        // After SELECT: no relation names; columns, then functions, then keywords.
        assert_eq!(
            names("SELECT event").1,
            vec!["event_type".to_string()],
            "not the table `events`"
        );
        assert_eq!(
            names("SELECT s").1,
            ["size", "sum", "select", "semi", "set", "show", "similar"].map(String::from)
        );
        // The columns of the statement's tables only, wherever the cursor is.
        let line = "SELECT pe FROM peaks";
        let (s, c) = complete(&vocab(), &FilenameCompleter::new(), line, 9);
        assert_eq!((s, c[0].replacement.as_str()), (7, "peak_bytes"));
        assert!(!c.iter().any(|p| p.replacement == "device_used"));
        assert_eq!(
            names("SELECT * FROM events WHERE dev").1,
            vec!["device_used".to_string()]
        );
        assert!(names("SELECT * FROM peaks WHERE dev").1.is_empty());
        // `alias.`: that table's columns.
        let line = "SELECT p. FROM peaks p";
        let (s, c) = complete(&vocab(), &FilenameCompleter::new(), line, 9);
        assert_eq!(s, 9);
        assert_eq!(
            c.into_iter().map(|p| p.replacement).collect::<Vec<_>>(),
            vec!["peak_bytes".to_string(), "pool".to_string()]
        );
        // Keywords by position: a statement's first word, what may follow a table.
        assert_eq!(names("").1.len(), STATEMENT_START.len());
        assert_eq!(
            names("SELECT * FROM events wh").1,
            vec!["where".to_string()]
        );
        assert_eq!(
            names("SELECT * FROM events GROUP BY ev").1,
            vec!["event_type".to_string()]
        );
        // A `;` in a string does not end the statement; one that ends it starts a new one.
        assert_eq!(names("SELECT ';' FROM pea").1, vec!["peaks".to_string()]);
        assert_eq!(names("SELECT 1; sel").1, vec!["select".to_string()]);
        // Inside a table function's arguments: an expression.
        assert_eq!(
            names("SELECT * FROM breakdown_at(fmt_").1,
            vec!["fmt_bytes".to_string()]
        );
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
