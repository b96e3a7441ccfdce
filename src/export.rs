//! `memq export INPUT [--views all|a,b] -o DIR [--format parquet|csv|json]`: writes every canned
//! analysis that needs no parameter (or the named ones) to its own file in DIR, plus an
//! `index.json` listing file, view and row count.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::output;
use memq_core::error::{MemqError, Result};
use memq_engine::library::Analysis;
use memq_engine::Engine;

/// A file type for results written to a folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FileFormat {
    Parquet,
    Csv,
    Tsv,
    Json,
    Ndjson,
    Markdown,
}

impl FileFormat {
    /// The file extension, which picks the writer in [`output::write_file`].
    pub fn ext(self) -> &'static str {
        match self {
            FileFormat::Parquet => "parquet",
            FileFormat::Csv => "csv",
            FileFormat::Tsv => "tsv",
            FileFormat::Json => "json",
            FileFormat::Ndjson => "ndjson",
            FileFormat::Markdown => "md",
        }
    }

    pub fn parse(s: &str) -> Option<FileFormat> {
        <FileFormat as clap::ValueEnum>::from_str(s, true).ok()
    }
}

/// Which analyses to export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// Every analysis that needs no parameter.
    All,
    /// These, in this order.
    Named(Vec<String>),
}

impl Selection {
    /// `all` or a comma list.
    pub fn parse(s: &str) -> Selection {
        if s.trim().eq_ignore_ascii_case("all") {
            return Selection::All;
        }
        Selection::Named(
            s.split(',')
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .collect(),
        )
    }
}

/// One line of `index.json`.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct IndexEntry {
    pub view: String,
    /// File name relative to the export folder.
    pub file: String,
    pub rows: u64,
    pub summary: String,
}

/// `index.json`.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct Index {
    pub dataset: String,
    pub format: String,
    pub views: Vec<IndexEntry>,
}

pub const INDEX_FILE: &str = "index.json";

/// The analyses a selection names; unknown names and parameterised analyses are usage errors.
pub fn select(selection: &Selection, all: &[Analysis]) -> Result<Vec<Analysis>> {
    match selection {
        Selection::All => Ok(all
            .iter()
            .filter(|a| !a.is_table_function() && !a.private)
            .cloned()
            .collect()),
        Selection::Named(names) => {
            if names.is_empty() {
                return Err(MemqError::Usage("--views: no view named".into()));
            }
            let mut out = Vec::new();
            for n in names {
                let a = all.iter().find(|a| &a.name == n).ok_or_else(|| {
                    MemqError::Usage(format!(
                        "--views: no analysis named {n}; `memq views` lists them"
                    ))
                })?;
                if a.is_table_function() {
                    return Err(MemqError::Usage(format!(
                        "--views: {} needs parameters ({}); run it with `memq run` or `memq sql`",
                        a.name,
                        a.call_form()
                    )));
                }
                out.push(a.clone());
            }
            Ok(out)
        }
    }
}

/// Exports the selected analyses into `dir` (created if missing) and writes `index.json`.
pub async fn export(
    engine: &Engine,
    selection: &Selection,
    dir: &Path,
    format: FileFormat,
) -> Result<Index> {
    let analyses = select(selection, &engine.analyses())?;
    std::fs::create_dir_all(dir).map_err(|e| MemqError::io(dir, e))?;
    let mut views = Vec::new();
    for a in &analyses {
        let df = engine
            .dataframe(&format!("SELECT * FROM \"{}\"", a.name))
            .await
            .map_err(|e| MemqError::Query(format!("{}: {e}", a.name)))?;
        let schema = df.schema().inner().clone();
        let batches = df
            .collect()
            .await
            .map_err(|e| MemqError::Query(format!("{}: {e}", a.name)))?;
        let file = format!("{}.{}", a.name, format.ext());
        let path: PathBuf = dir.join(&file);
        let rows = output::write_file(&path, &schema, &batches)?;
        views.push(IndexEntry {
            view: a.name.clone(),
            file,
            rows,
            summary: a.summary.clone(),
        });
    }
    let index = Index {
        dataset: engine.dataset.display().to_string(),
        format: format.ext().to_string(),
        views,
    };
    let path = dir.join(INDEX_FILE);
    let text = serde_json::to_string_pretty(&index).map_err(|e| MemqError::Query(e.to_string()))?;
    std::fs::write(&path, text + "\n").map_err(|e| MemqError::io(&path, e))?;
    Ok(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_parses() {
        assert_eq!(Selection::parse("all"), Selection::All);
        assert_eq!(
            Selection::parse("a, b"),
            Selection::Named(vec!["a".into(), "b".into()])
        );
        assert!(select(
            &Selection::Named(vec!["no_such_view".into()]),
            &crate::analyses()
        )
        .is_err());
    }
}
