//! `memq export INPUT [--views all|a,b] -o DIR [--format parquet|csv|json] [--force]`: writes
//! every canned analysis that needs no parameter and has data in the dataset (or the named ones)
//! to its own file in DIR, plus an `index.json` listing file, view and row count.
//!
//! The export is built in a staging folder beside DIR and then put in DIR's place, so DIR holds
//! exactly what its `index.json` lists: a non-empty DIR is refused unless `--force`, and then
//! only a previous export (every file listed in its `index.json`) is replaced.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::output::{self, Format};
use memq_core::error::{MemqError, Result};
use memq_engine::library::Analysis;
use memq_engine::Engine;

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
    /// Analyses left out because they have no data in this dataset (see [`crate::guide`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
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
                let a = crate::guide::analysis_named(all, n).map_err(|e| {
                    MemqError::Usage(format!("--views: {e} (`memq views` lists them)"))
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

/// Checks that `dir` may receive an export: missing, empty, or (with `force`) a previous export
/// holding only the files its `index.json` lists.
fn check_target(dir: &Path, force: bool) -> Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    if !dir.is_dir() {
        return Err(MemqError::Usage(format!(
            "-o {}: not a folder",
            dir.display()
        )));
    }
    let entries: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| MemqError::io(dir, e))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    if entries.is_empty() {
        return Ok(());
    }
    if !force {
        return Err(MemqError::Usage(format!(
            "-o {}: the folder is not empty; --force replaces a previous export there",
            dir.display()
        )));
    }
    let index_path = dir.join(INDEX_FILE);
    let index: Index = std::fs::read_to_string(&index_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .ok_or_else(|| {
            MemqError::Usage(format!(
                "-o {}: not a memq export (no readable {INDEX_FILE}); --force replaces only a previous export",
                dir.display()
            ))
        })?;
    let mut foreign: Vec<&String> = entries
        .iter()
        .filter(|e| *e != INDEX_FILE && !index.views.iter().any(|v| &v.file == *e))
        .collect();
    foreign.sort();
    if !foreign.is_empty() {
        let names: Vec<&str> = foreign.iter().take(5).map(|s| s.as_str()).collect();
        return Err(MemqError::Usage(format!(
            "-o {}: the folder holds {} file(s) that are not memq's export ({}{}); move them away or choose another folder",
            dir.display(),
            foreign.len(),
            names.join(", "),
            if foreign.len() > 5 { ", …" } else { "" }
        )));
    }
    Ok(())
}

/// `<parent>/.<name>.<what>-<pid>`: a folder beside `dir` (same file system, so a rename moves it).
fn beside(dir: &Path, what: &str) -> PathBuf {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "export".into());
    parent_of(dir).join(format!(".{name}.{what}-{}", std::process::id()))
}

fn parent_of(dir: &Path) -> &Path {
    dir.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Writes the analyses and `index.json` into `staging`.
async fn write_all(
    engine: &Engine,
    analyses: &[Analysis],
    staging: &Path,
    ext: &str,
) -> Result<Vec<IndexEntry>> {
    let mut views = Vec::new();
    for a in analyses {
        let df = engine
            .dataframe(&format!("SELECT * FROM \"{}\"", a.name))
            .await
            .map_err(|e| MemqError::Query(format!("{}: {e}", a.name)))?;
        let schema = df.schema().inner().clone();
        let batches = df
            .collect()
            .await
            .map_err(|e| MemqError::Query(format!("{}: {e}", a.name)))?;
        let file = format!("{}.{ext}", a.name);
        let rows = output::write_file(&staging.join(&file), &schema, &batches)?;
        views.push(IndexEntry {
            view: a.name.clone(),
            file,
            rows,
            summary: a.summary.clone(),
        });
    }
    Ok(views)
}

/// Puts the finished `staging` folder in the place of `dir` (a previous export or an empty
/// folder when it exists).
fn replace_dir(staging: &Path, dir: &Path) -> Result<()> {
    if dir.exists() {
        let old = beside(dir, "export-old");
        let _ = std::fs::remove_dir_all(&old);
        std::fs::rename(dir, &old).map_err(|e| MemqError::io(dir, e))?;
        if let Err(e) = std::fs::rename(staging, dir) {
            // Put the previous export back.
            let _ = std::fs::rename(&old, dir);
            return Err(MemqError::io(dir, e));
        }
        let _ = std::fs::remove_dir_all(&old);
        Ok(())
    } else {
        std::fs::rename(staging, dir).map_err(|e| MemqError::io(dir, e))
    }
}

/// Exports the selected analyses into `dir` with its `index.json`. With [`Selection::All`] the
/// analyses without data in this dataset are left out (listed in [`Index::skipped`]); named ones
/// are always written. `dir` must be missing or empty, or with `force` a previous export, which
/// is replaced whole once the new one is complete.
pub async fn export(
    engine: &Engine,
    selection: &Selection,
    dir: &Path,
    format: Format,
    force: bool,
) -> Result<Index> {
    let Some(ext) = format.ext() else {
        return Err(MemqError::Usage(format!(
            "--format {}: export writes files: parquet, csv, tsv, json, ndjson or markdown",
            format.name()
        )));
    };
    let mut analyses = select(selection, engine.analyses())?;
    let mut skipped = Vec::new();
    if *selection == Selection::All {
        let empty = crate::guide::without_data(&engine.manifest, engine.analyses());
        analyses.retain(|a| {
            let keep = !empty.contains(&a.name);
            if !keep {
                skipped.push(a.name.clone());
            }
            keep
        });
    }
    check_target(dir, force)?;
    let parent = parent_of(dir);
    std::fs::create_dir_all(parent).map_err(|e| MemqError::io(parent, e))?;
    let staging = Staging(beside(dir, "export-tmp"));
    let _ = std::fs::remove_dir_all(&staging.0);
    std::fs::create_dir(&staging.0).map_err(|e| MemqError::io(&staging.0, e))?;
    let views = write_all(engine, &analyses, &staging.0, ext).await?;
    let index = Index {
        dataset: engine.dataset.display().to_string(),
        format: ext.to_string(),
        views,
        skipped,
    };
    let path = staging.0.join(INDEX_FILE);
    let text = serde_json::to_string_pretty(&index).map_err(|e| MemqError::Query(e.to_string()))?;
    std::fs::write(&path, text + "\n").map_err(|e| MemqError::io(&path, e))?;
    replace_dir(&staging.0, dir)?;
    Ok(index)
}

/// The staging folder of an export, removed when the export fails or is dropped (Ctrl-C);
/// once moved into place there is nothing left to remove.
struct Staging(PathBuf);

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
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
            crate::analyses()
        )
        .is_err());
    }
}
