//! The REPL's meta commands (`\?`, `\d`, `\timing`, ...).

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::exec::terminal_width;
use crate::output::{aligned_columns, BytesDisplay, Format};
use crate::params;
use memq_core::error::{MemqError, Result};

use super::Session;

/// One meta command: name (with its backslash), arguments and what it does.
pub struct MetaCommand {
    pub name: &'static str,
    pub args: &'static str,
    pub help: &'static str,
}

pub const COMMANDS: &[MetaCommand] = &[
    MetaCommand { name: "\\?", args: "", help: "this help" },
    MetaCommand { name: "\\q", args: "", help: "quit (Ctrl-D also quits)" },
    MetaCommand { name: "\\d", args: "[NAME]", help: "list tables, views and table functions; with NAME its columns with types and docs" },
    MetaCommand { name: "\\dt", args: "", help: "tables with row counts and docs" },
    MetaCommand { name: "\\dv", args: "", help: "canned analyses (views and table functions) by source, with one-line docs; `no data` marks those with nothing to read here" },
    MetaCommand { name: "\\df", args: "", help: "memq's functions with their docs" },
    MetaCommand { name: "\\timing", args: "[on|off]", help: "show how long each statement took" },
    MetaCommand { name: "\\format", args: "[table|line|chart|csv|tsv|json|ndjson|markdown]", help: "how results are printed; alone, the current one" },
    MetaCommand { name: "\\bytes", args: "human|raw", help: "values with a unit (bytes, times, durations, percentages) readable or as stored (table format; csv/json are always raw)" },
    MetaCommand { name: "\\o", args: "[FILE]", help: "send the next result to FILE (.parquet .csv .tsv .json .ndjson .md); without FILE, cancel" },
    MetaCommand { name: "\\i", args: "FILE", help: "run the statements and meta commands of FILE" },
    MetaCommand { name: "\\set", args: "[NAME VALUE]", help: "set parameter $NAME (42 → BIGINT, 1.5 → DOUBLE, 'x' or text → VARCHAR); alone, list them" },
    MetaCommand { name: "\\set maxrows", args: "N", help: "rows a table shows at most, head and tail (default 40; 0 = all)" },
    MetaCommand { name: "\\unset", args: "NAME", help: "remove parameter $NAME" },
    MetaCommand { name: "\\x", args: "[on|off]", help: "expanded display: each row as `column | value` lines (format line)" },
    MetaCommand { name: "\\chart", args: "", help: "run the last statement again and chart its first numeric column over its first column" },
    MetaCommand { name: "\\set raw", args: "on|off", help: "values as stored (ns, bytes, full floats) or by their unit (default)" },
    MetaCommand { name: "\\set format", args: "table|line|chart|csv|...", help: "the same as \\format" },
    MetaCommand { name: "\\connect", args: "[df://HOST:PORT|local]", help: "run the statements on the memq cluster at df://HOST:PORT (docs/scale-out.md); `local` back in this process; alone, say where they run" },
    MetaCommand { name: "\\disconnect", args: "", help: "the same as \\connect local" },
];

/// What the loop does after a meta command.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    Continue,
    Quit,
}

fn help() -> String {
    let mut s = String::from(
        "Statements end with `;` and may span lines. Tab completes; Ctrl-C cancels the running query; Ctrl-D quits.\n\
         Parameters: a statement refers to `$name`; values are bound as typed literals (see \\set).\n\n",
    );
    for c in COMMANDS {
        let head = if c.args.is_empty() {
            c.name.to_string()
        } else {
            format!("{} {}", c.name, c.args)
        };
        let _ = writeln!(s, "  {head:<44} {}", c.help);
    }
    s
}

/// `text` fitted to `width` (the terminal's; unchanged without one): a longer line is broken
/// between words, its continuation indented under the start of its description (the text after
/// the first run of two spaces), so that no word is cut by the terminal's own wrapping.
pub fn fit_text(text: &str, width: Option<usize>) -> String {
    let Some(width) = width.filter(|&w| w >= 20) else {
        return text.to_string();
    };
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        if body.chars().count() <= width {
            out.push_str(line);
            continue;
        }
        let lead = body.len() - body.trim_start().len();
        let hang = body[lead..]
            .find("  ")
            .map(|gap| {
                let from = lead + gap;
                from + body[from..].len() - body[from..].trim_start().len()
            })
            .filter(|&h| h <= width / 2)
            .unwrap_or(lead + 2);
        let mut current = " ".repeat(lead);
        let mut fresh = true;
        for word in body[lead..].split(' ') {
            let candidate = if fresh {
                format!("{current}{word}")
            } else {
                format!("{current} {word}")
            };
            if candidate.chars().count() > width && !fresh && !word.is_empty() {
                out.push_str(current.trim_end());
                out.push('\n');
                current = format!("{}{word}", " ".repeat(hang));
            } else {
                current = candidate;
            }
            fresh = false;
        }
        out.push_str(current.trim_end());
        out.push_str(nl);
    }
    out
}

impl Session {
    /// Runs one meta command line (starting with `\`).
    pub(super) async fn meta(&mut self, line: &str, depth: usize) -> Result<Next> {
        let line = line.trim();
        let (cmd, arg) = match line.split_once(char::is_whitespace) {
            Some((c, a)) => (c, a.trim()),
            None => (line, ""),
        };
        match cmd {
            "\\q" | "\\quit" => return Ok(Next::Quit),
            "\\?" | "\\h" | "\\help" => print!("{}", fit_text(&help(), terminal_width())),
            "\\d" if arg.is_empty() => {
                print!("{}", fit_text(&self.list_relations(), terminal_width()))
            }
            "\\d" => print!("{}", fit_text(&self.describe(arg).await?, terminal_width())),
            "\\dt" => print!("{}", fit_text(&self.list_tables(), terminal_width())),
            "\\dv" => print!("{}", fit_text(&self.list_views(), terminal_width())),
            "\\df" => print!("{}", fit_text(&list_functions(), terminal_width())),
            "\\timing" => {
                self.settings.timing = match arg {
                    "" => !self.settings.timing,
                    "on" => true,
                    "off" => false,
                    _ => return Err(MemqError::Usage("\\timing [on|off]".into())),
                };
                println!(
                    "Timing is {}.",
                    if self.settings.timing { "on" } else { "off" }
                );
            }
            "\\format" if arg.is_empty() => {
                println!("Output format is {}.", self.settings.format.name());
            }
            "\\format" => {
                let f = Format::parse(arg).ok_or_else(|| {
                    MemqError::Usage(
                        "\\format table|line|chart|csv|tsv|json|ndjson|markdown".into(),
                    )
                })?;
                self.settings.format = f;
                println!("Output format is {arg}.");
            }
            "\\bytes" => {
                self.settings.bytes = match arg {
                    "human" => BytesDisplay::Human,
                    "raw" => BytesDisplay::Raw,
                    _ => return Err(MemqError::Usage("\\bytes human|raw".into())),
                };
                println!("Byte columns are shown {arg}.");
            }
            "\\o" => {
                if arg.is_empty() {
                    self.redirect = None;
                    println!("Results go to the terminal.");
                } else {
                    let path = PathBuf::from(arg);
                    let ext = path
                        .extension()
                        .map(|e| e.to_string_lossy().to_ascii_lowercase())
                        .unwrap_or_default();
                    if !matches!(
                        ext.as_str(),
                        "parquet" | "csv" | "tsv" | "json" | "ndjson" | "jsonl" | "md"
                    ) {
                        return Err(MemqError::Usage(
                            "\\o FILE: use .parquet, .csv, .tsv, .json, .ndjson or .md".into(),
                        ));
                    }
                    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                        if !dir.is_dir() {
                            return Err(MemqError::Usage(format!(
                                "\\o {}: the folder {} does not exist",
                                path.display(),
                                dir.display()
                            )));
                        }
                    }
                    println!("The next result goes to {}.", path.display());
                    self.redirect = Some(path);
                }
            }
            "\\i" => {
                if arg.is_empty() {
                    return Err(MemqError::Usage("\\i FILE".into()));
                }
                if depth >= 16 {
                    return Err(MemqError::Usage("\\i: nested too deeply".into()));
                }
                let path = PathBuf::from(arg);
                let text = std::fs::read_to_string(&path).map_err(|e| MemqError::io(&path, e))?;
                return Box::pin(self.run_script(&text, depth + 1)).await;
            }
            "\\set" => {
                if arg.is_empty() {
                    if self.params.is_empty() {
                        println!("No parameters set.");
                    }
                    for (k, v) in &self.params {
                        println!("{k} = {v} ({})", params::type_name(v));
                    }
                } else {
                    let (name, value) = arg
                        .split_once(char::is_whitespace)
                        .ok_or_else(|| MemqError::Usage("\\set NAME VALUE".into()))?;
                    let name = name.trim_start_matches('$');
                    if self.set_display(name, value.trim())? {
                        return Ok(Next::Continue);
                    }
                    if name == "maxrows" {
                        let n: usize = value.trim().parse().map_err(|_| {
                            MemqError::Usage(
                                "\\set maxrows N: a number of rows (0 shows all)".into(),
                            )
                        })?;
                        self.settings.max_rows = n;
                        if n == 0 {
                            println!("maxrows = 0: tables show every row.");
                        } else {
                            println!(
                                "maxrows = {n}: tables show at most {n} rows (head and tail)."
                            );
                        }
                        return Ok(Next::Continue);
                    }
                    params::check_name(name)?;
                    let v = params::parse_value(value.trim());
                    println!("${name} = {v} ({})", params::type_name(&v));
                    self.params.insert(name.to_string(), v);
                }
            }
            "\\connect" if arg.is_empty() => match self.dataset.cluster() {
                Some(url) => println!("statements run on the cluster {url}"),
                None => println!("statements run locally, in this process"),
            },
            "\\connect" if arg.eq_ignore_ascii_case("local") => {
                self.dataset.disconnect();
                println!("local: statements run in this process");
            }
            "\\disconnect" => {
                self.dataset.disconnect();
                println!("local: statements run in this process");
            }
            "\\connect" => {
                self.dataset.connect(arg).await?;
                println!("connected to {arg}: statements run on the cluster");
            }
            "\\x" => self.toggle_vertical(arg)?,
            "\\chart" => self.chart_last().await?,
            "\\unset" => {
                if self.params.remove(arg.trim_start_matches('$')).is_none() {
                    return Err(MemqError::Usage(format!("no parameter named {arg}")));
                }
            }
            _ => {
                return Err(MemqError::Usage(format!(
                    "unknown command {cmd}; \\? lists them"
                )))
            }
        }
        Ok(Next::Continue)
    }

    fn row_count(&self, table: &str) -> u64 {
        self.engine()
            .manifest
            .tables
            .iter()
            .find(|t| t.name == table)
            .map(|t| t.rows)
            .unwrap_or(0)
    }

    fn list_relations(&self) -> String {
        let vocab = self.vocab.read().map(|v| v.clone()).unwrap_or_default();
        let mut rows = vec![vec!["name".to_string(), "kind".to_string()]];
        for t in &vocab.tables {
            rows.push(vec![t.clone(), "table".into()]);
        }
        for v in &vocab.views {
            rows.push(vec![v.clone(), "view".into()]);
        }
        let library: Vec<&str> = crate::analyses()
            .iter()
            .filter(|a| a.is_table_function())
            .map(|a| a.name.as_str())
            .collect();
        for f in &vocab.table_functions {
            if library.contains(&f.as_str()) {
                rows.push(vec![f.clone(), "table function".into()]);
            }
        }
        aligned_columns(&rows)
    }

    fn list_tables(&self) -> String {
        let mut rows = vec![vec![
            "table".to_string(),
            "rows".to_string(),
            "doc".to_string(),
        ]];
        for t in crate::catalog().tables() {
            rows.push(vec![
                t.name.to_string(),
                self.row_count(t.name).to_string(),
                t.doc.to_string(),
            ]);
        }
        aligned_columns(&rows)
    }

    /// `\dv`: the analyses grouped by the source they read, those without data in this dataset
    /// marked, then the views created in the session.
    fn list_views(&self) -> String {
        let analyses = crate::analyses();
        let manifest = &self.engine().manifest;
        let empty = crate::guide::without_data(manifest, analyses);
        let mut out = String::new();
        let mut formats: Vec<&str> = Vec::new();
        for a in analyses.iter().filter(|a| !a.private) {
            let f = crate::guide::format_of(a);
            if !formats.contains(&f) {
                formats.push(f);
            }
        }
        // The sources this dataset holds first.
        formats.sort_by_key(|f| !crate::guide::has_format_data(manifest, f));
        for f in formats {
            let here = if crate::guide::has_format_data(manifest, f) {
                ""
            } else {
                "; none in this dataset"
            };
            let _ = writeln!(out, "{f} ({}{here}):", crate::guide::format_title(f));
            let mut rows = Vec::new();
            for a in analyses
                .iter()
                .filter(|a| !a.private && crate::guide::format_of(a) == f)
            {
                let mark = if empty.contains(&a.name) {
                    "no data"
                } else {
                    ""
                };
                rows.push(vec![
                    format!("  {}", a.call_form()),
                    mark.to_string(),
                    a.summary.clone(),
                ]);
            }
            out.push_str(&aligned_columns(&rows));
        }
        let vocab = self.vocab.read().map(|v| v.clone()).unwrap_or_default();
        let own: Vec<Vec<String>> = vocab
            .views
            .iter()
            .filter(|v| !analyses.iter().any(|a| &a.name == *v))
            .map(|v| vec![format!("  {v}")])
            .collect();
        if !own.is_empty() {
            out.push_str("created in this session:\n");
            out.push_str(&aligned_columns(&own));
        }
        if out.is_empty() {
            return "No canned analyses.\n".into();
        }
        let marked = analyses
            .iter()
            .filter(|a| !a.private && empty.contains(&a.name))
            .count();
        if marked > 0 {
            let _ = writeln!(
                out,
                "\n{marked} analyses marked `no data` read only tables that are empty in this dataset."
            );
        }
        out
    }

    /// `\d NAME`: the columns of a table or view with types and docs, or a table function's
    /// parameters and columns.
    async fn describe(&self, name: &str) -> Result<String> {
        let ctx = &self.engine().ctx;
        let mut out = String::new();
        if let Some(def) = crate::catalog()
            .tables()
            .into_iter()
            .find(|t| t.name == name)
        {
            let _ = writeln!(
                out,
                "Table {name} ({} rows): {}\n",
                self.row_count(name),
                def.doc
            );
            let mut rows = vec![vec![
                "column".to_string(),
                "type".into(),
                "null".into(),
                "doc".into(),
            ]];
            for c in &def.columns {
                rows.push(vec![
                    c.name.to_string(),
                    c.data_type.to_string(),
                    if c.nullable { "yes" } else { "no" }.to_string(),
                    c.doc.to_string(),
                ]);
            }
            if memq_core::dataset::by_rank(name) {
                rows.push(vec![
                    memq_core::dataset::RANK_COLUMN.to_string(),
                    "Int64".into(),
                    "no".into(),
                    "rank of the job the row's source belongs to (sources.rank); the files are laid out by it (TABLE/rank=R/), so a filter on it reads that rank's files only".into(),
                ]);
            }
            out.push_str(&aligned_columns(&rows));
            return Ok(out);
        }
        let analysis = crate::analyses().iter().find(|a| a.name == name);
        if let Some(a) = analysis.as_ref().filter(|a| a.is_table_function()) {
            let _ = writeln!(out, "Table function {}\n\n{}\n", a.call_form(), a.doc);
            let mut rows = vec![vec![
                "parameter".to_string(),
                "type".into(),
                "default".into(),
                "doc".into(),
            ]];
            for p in &a.params {
                rows.push(vec![
                    p.name.clone(),
                    p.sql_type.clone(),
                    p.default.clone().unwrap_or_default(),
                    p.doc.clone(),
                ]);
            }
            out.push_str(&aligned_columns(&rows));
            out.push('\n');
            let mut rows = vec![vec!["column".to_string(), "doc".into()]];
            for c in &a.columns {
                rows.push(vec![c.name.clone(), c.described()]);
            }
            out.push_str(&aligned_columns(&rows));
            return Ok(out);
        }
        let df = ctx.table(name).await.map_err(|_| {
            MemqError::Usage(format!(
                "no table, view or table function named {name}; \\d lists them"
            ))
        })?;
        match &analysis {
            Some(a) => {
                let _ = writeln!(out, "View {name}\n\n{}\n", a.doc);
            }
            None => {
                let _ = writeln!(out, "View {name}\n");
            }
        }
        let mut rows = vec![vec!["column".to_string(), "type".into(), "doc".into()]];
        for f in df.schema().fields() {
            let doc = analysis
                .as_ref()
                .and_then(|a| a.columns.iter().find(|c| &c.name == f.name()))
                .map(|c| c.described())
                .unwrap_or_default();
            rows.push(vec![f.name().clone(), f.data_type().to_string(), doc]);
        }
        out.push_str(&aligned_columns(&rows));
        Ok(out)
    }
}

fn list_functions() -> String {
    let mut out = String::from("Scalar functions:\n");
    for f in crate::functions() {
        let _ = writeln!(out, "  {}\n      {}", f.usage, f.doc);
    }
    let tfs: Vec<_> = crate::analyses()
        .iter()
        .filter(|a| a.is_table_function())
        .collect();
    if !tfs.is_empty() {
        out.push_str("\nTable functions (canned analyses with parameters):\n");
        for a in tfs {
            let _ = writeln!(out, "  {}\n      {}", a.call_form(), a.summary);
        }
    }
    out.push_str(
        "\nDataFusion's built-in functions are available too (SHOW FUNCTIONS lists them).\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::fit_text;

    /// Long lines break between words, under their description; short ones stay.
    #[test]
    fn text_fits_the_terminal() {
        let text = "  \\dv         canned analyses (views and table functions) by source, with one-line docs\nshort\n";
        let out = fit_text(text, Some(40));
        assert_eq!(
            out,
            "  \\dv         canned analyses (views and\n              table functions) by\n              source, with one-line docs\nshort\n"
        );
        assert!(out.lines().all(|l| l.chars().count() <= 40), "{out}");
        assert_eq!(fit_text(text, None), text);
    }
}
