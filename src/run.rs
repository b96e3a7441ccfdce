//! `memq run INPUT FILE.sql... [--param name=value]... [-o DIR]`: runs query files in order,
//! in one session (a view one file creates is visible to the next). A file refers to a
//! parameter as `$name`; values are bound as typed literals ([`crate::params`]). Each file goes
//! through [`crate::exec::statements`]; results go to stdout in order, or with `-o DIR` each to its own
//! file in DIR.

use std::path::PathBuf;

use crate::api::Dataset;

use crate::exec::{self, PrintOptions, StatementResult};
use crate::output::Format;
use crate::params::Params;
use memq_core::error::{MemqError, Result};

/// Where `memq run` sends results.
pub enum RunOutput {
    /// Printed on stdout.
    Stdout(PrintOptions),
    /// Each result to its own file in this folder: `<file stem>.<ext>`, or `<file stem>_<n>.<ext>`
    /// when a file returns several results.
    Dir(PathBuf, Format),
}

/// One result file written by `memq run -o DIR`.
#[derive(Debug, Clone)]
pub struct WrittenResult {
    pub query_file: PathBuf,
    pub path: PathBuf,
    pub rows: u64,
}

/// Runs the query files in order. Returns the files written (empty on stdout). When `stop`
/// fires (Ctrl-C), the result being printed or written ends at once (a file being written is
/// removed, see [`exec::write`]) and no further statement runs.
pub async fn run_files(
    ds: &Dataset,
    files: &[PathBuf],
    params: &Params,
    out: &RunOutput,
    stop: &exec::Stop,
) -> Result<Vec<WrittenResult>> {
    if let RunOutput::Dir(dir, _) = out {
        std::fs::create_dir_all(dir).map_err(|e| MemqError::io(dir, e))?;
    }
    // Read every file first, so a missing file fails before anything runs.
    let mut texts = Vec::new();
    for f in files {
        texts.push(std::fs::read_to_string(f).map_err(|e| MemqError::io(f, e))?);
    }
    let mut written = Vec::new();
    let mut used_names = std::collections::HashSet::new();
    for (file, text) in files.iter().zip(&texts) {
        let origin = file.display().to_string();
        let mut statements = ds.statements(text, params, &origin)?;
        // `_1`, `_2` names when the file has several queries (counted from the parsed text:
        // planning every statement first would run its DDL early).
        let queries = statements.queries();
        let mut results_seen = 0usize;
        while let Some(r) = statements.next().await {
            let mut r: StatementResult = r?;
            if !r.has_columns() {
                continue;
            }
            results_seen += 1;
            match out {
                RunOutput::Stdout(print) => {
                    // A table says which file and statement it answers; machine formats
                    // (csv, json, …) stay bare.
                    if matches!(print.format, Format::Table) {
                        let which = if queries <= 1 {
                            String::new()
                        } else {
                            format!(", result {results_seen} of {queries}")
                        };
                        println!("-- {origin}{which}");
                    }
                    if print.print(&mut r, stop).await?.stopped() {
                        return Ok(written);
                    }
                }
                RunOutput::Dir(dir, format) => {
                    let stem = file
                        .file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_else(|| "result".into());
                    let single = queries <= 1;
                    let mut name = if single {
                        stem.clone()
                    } else {
                        format!("{stem}_{results_seen}")
                    };
                    // Two query files with the same stem in different folders: keep both.
                    let mut n = 2;
                    while !used_names.insert(name.clone()) {
                        name = format!("{stem}-{n}");
                        n += 1;
                    }
                    let path = dir.join(format!("{name}.{}", format.ext().unwrap_or("parquet")));
                    let rows = match exec::write(&mut r, &path, stop).await? {
                        exec::Shown::Done(n) => n,
                        exec::Shown::Stopped(_) => return Ok(written),
                    };
                    written.push(WrittenResult {
                        query_file: file.clone(),
                        path,
                        rows,
                    });
                }
            }
        }
    }
    Ok(written)
}

/// Checks the `--param` names against the placeholders of the files, so a misspelt parameter is
/// reported instead of being silently unused.
pub fn unused_params(files: &[PathBuf], params: &Params) -> Vec<String> {
    let texts: Vec<String> = files
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .collect();
    params
        .keys()
        .filter(|name| !texts.iter().any(|t| mentions(t, name)))
        .cloned()
        .collect()
}

fn mentions(text: &str, name: &str) -> bool {
    let needle = format!("${name}");
    text.match_indices(&needle).any(|(i, _)| {
        !text[i + needle.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_mentions_are_whole_names() {
        assert!(mentions("SELECT $ts, $pool", "ts"));
        assert!(!mentions("SELECT $tsx", "ts"));
        assert!(mentions("f($a)", "a"));
    }
}
