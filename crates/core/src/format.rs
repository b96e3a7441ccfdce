//! The [`Format`] trait: what an input family (msMemScope dumps, PyTorch snapshots, ...) gives
//! memq — how to recognise its files, the tables it fills, how to ingest its sources, its SQL
//! functions and its SQL library — and the [`Catalog`] of every format memq knows.
//!
//! The engine and the ingest pipeline work from a catalog only; neither knows any format by
//! name. The `memq` binary builds the catalog (`memq::catalog()`).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::logical_expr::ScalarUDF;
use futures::future::BoxFuture;

use crate::catalog::TableDef;
use crate::dataset::DatasetBuilder;
use crate::error::Result;
use crate::rejects;

/// What kind of input file a source is, named by the format that reads it (each format
/// declares its kinds: `memq_memscope::MEMSCOPE_CSV`, `memq_snapshot::SNAPSHOT`); the name is
/// written to `sources.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SourceKind(pub &'static str);

impl SourceKind {
    pub fn label(self) -> &'static str {
        self.0
    }
}

/// One input file, the name its rows carry in the `source` column, and its position among
/// the ingest's sources (which names its Parquet files, `NNNN.parquet`).
#[derive(Debug, Clone)]
pub struct Source {
    pub index: usize,
    pub path: PathBuf,
    pub name: String,
    pub kind: SourceKind,
}

/// A file a format is asked to recognise.
pub struct Candidate<'a> {
    pub path: &'a Path,
    /// Its first bytes (up to 64).
    pub head: &'a [u8],
    /// Met while walking a folder (recognise by name only; unknown files are skipped), or
    /// named by the user (recognise by content too).
    pub in_folder: bool,
}

impl Candidate<'_> {
    /// The file name, lossy.
    pub fn file_name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// Whether the extension is one of `exts` (case-insensitive).
    pub fn has_ext(&self, exts: &[&str]) -> bool {
        self.path
            .extension()
            .is_some_and(|e| exts.iter().any(|x| e.eq_ignore_ascii_case(x)))
    }

    /// The head as text with a UTF-8 BOM removed.
    pub fn head_text(&self) -> String {
        let text = String::from_utf8_lossy(self.head);
        text.trim_start_matches('\u{feff}').to_string()
    }
}

/// The first `n` bytes of a file (fewer when it is shorter).
pub fn read_head(path: &Path, n: usize) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(n);
    std::fs::File::open(path)?
        .take(n as u64)
        .read_to_end(&mut head)?;
    Ok(head)
}

/// What ingest learnt about one source.
#[derive(Debug, Clone, Default)]
pub struct SourceReport {
    pub rows: u64,
    pub rejects: u64,
    /// Timestamp unit as written (`ns`, `us`), for dumps.
    pub ts_unit: Option<String>,
    /// Format generation (`G1`, `G2`, `G3`), for dumps.
    pub generation: Option<String>,
}

/// A source read whole into memory: its table batches, the records it rejected, and its
/// timestamp unit as written (when it has one).
pub struct WholeFile {
    pub tables: Vec<(TableDef, RecordBatch)>,
    pub rejects: rejects::RejectsBuilder,
    pub ts_unit: Option<String>,
}

impl WholeFile {
    /// Writes the batches (in parallel) and the rejects as the files of source `index`.
    pub fn write(mut self, out: &DatasetBuilder, index: usize) -> Result<SourceReport> {
        let tables: Vec<_> = self.tables.iter().map(|(d, b)| (d, b)).collect();
        out.write_tables(index, &tables)?;
        let report = SourceReport {
            rows: self.tables.iter().map(|(_, b)| b.num_rows() as u64).sum(),
            rejects: self.rejects.len() as u64,
            ts_unit: self.ts_unit.take(),
            generation: None,
        };
        if report.rejects > 0 {
            out.write_table(&rejects::rejects(), index, &self.rejects.finish())?;
        }
        Ok(report)
    }
}

/// Ingests sources that are read whole, one after the other: `read` gives each one's batches,
/// which are written as its files; its bytes count for the progress display.
pub fn ingest_whole_files(
    sources: &[Source],
    out: &DatasetBuilder,
    progress: &Progress,
    read: impl Fn(&Source) -> Result<WholeFile>,
) -> Result<Vec<SourceReport>> {
    sources
        .iter()
        .map(|source| {
            let report = read(source)?.write(out, source.index)?;
            progress(
                std::fs::metadata(&source.path)
                    .map(|m| m.len())
                    .unwrap_or(0),
            );
            Ok(report)
        })
        .collect()
}

/// Counts input bytes as they are read, for the progress display.
pub type Progress = Arc<dyn Fn(u64) + Send + Sync>;

/// A reader that reports the bytes it reads to a [`Progress`].
pub struct ProgressRead<R> {
    inner: R,
    progress: Progress,
}

impl<R> ProgressRead<R> {
    pub fn new(inner: R, progress: Progress) -> Self {
        ProgressRead { inner, progress }
    }
}

impl<R: Read> Read for ProgressRead<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        (self.progress)(n as u64);
        Ok(n)
    }
}

/// A scalar SQL function with its documentation.
pub struct Function {
    pub udf: ScalarUDF,
    pub usage: &'static str,
    pub doc: &'static str,
}

impl Function {
    pub fn name(&self) -> &str {
        self.udf.name()
    }
}

/// One file of a format's SQL library: its path (`memscope/peaks.sql`) and text.
#[derive(Debug, Clone, Copy)]
pub struct SqlFile {
    pub path: &'static str,
    pub text: &'static str,
}

/// The SQL library of the calling crate: `sql_files!("memscope", "peaks", "curve", ...)` is a
/// `&'static [SqlFile]` with each `sql/NAME.sql` of the crate compiled in, at path
/// `memscope/NAME.sql`. [`check_sql_dir`] tests that the list names every file.
#[macro_export]
macro_rules! sql_files {
    ($family:literal, $($name:literal),+ $(,)?) => {
        &[$($crate::format::SqlFile {
            path: concat!($family, "/", $name, ".sql"),
            text: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/sql/", $name, ".sql")),
        }),+]
    };
}

/// Checks that `files` lists exactly the `.sql` files of `dir` (for a format's unit test).
pub fn check_sql_dir(dir: &Path, files: &[SqlFile]) -> std::result::Result<(), String> {
    let mut on_disk: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".sql"))
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = files
        .iter()
        .map(|f| f.path.rsplit('/').next().unwrap_or(f.path).to_string())
        .collect();
    listed.sort();
    if on_disk == listed {
        Ok(())
    } else {
        Err(format!(
            "sql_files! lists {listed:?} but {} holds {on_disk:?}",
            dir.display()
        ))
    }
}

/// A fact of a format's dataset that the argument checks of its analyses read: the run's time
/// range, the names a parameter may take. A `@param` line names the fact it is checked against
/// (`[one of pools]`, `[moment]`: the `range` fact); the engine runs the query once per session,
/// or once per dataset (`memq ingest` keeps the rows in the manifest), and never names a table.
#[derive(Debug, Clone, Copy)]
pub struct Fact {
    /// The name a check gives: `range` (one row, first and last moment, ns since the Unix
    /// epoch), `peak` (the moment of the highest memory; `$1` is the argument a `per PARAM`
    /// check names, NULL for all), `steps` (rows of start ns, end ns or NULL when open, step
    /// number), or a list of names (`pools`: the names in the first column; a second column is
    /// the key a `per PARAM` check narrows the list by).
    pub name: &'static str,
    /// What one row is, for messages: `pool`, `snapshot`; for `range` and `peak` what the
    /// query reads (`msMemScope events`, `memory curve`).
    pub item: &'static str,
    /// The query over the format's tables.
    pub sql: &'static str,
}

/// An input family.
pub trait Format: Send + Sync {
    /// Short name: `memscope`, `snapshot`.
    fn name(&self) -> &'static str;

    /// The tables this format fills (declared once, in its crate).
    fn tables(&self) -> Vec<TableDef>;

    /// The kind of `file` when it belongs to this format.
    fn detect(&self, file: &Candidate) -> Option<SourceKind>;

    /// Whether a folder's sources of these kinds are enough to call it an input of this format
    /// (companion files alone are not).
    fn is_primary(&self, kind: SourceKind) -> bool;

    /// Whether `detect` takes any file named directly, recognised or not (msMemScope's reader,
    /// which then explains a bad header). Such a claim is checked for inputs memq does not read
    /// (a gzip, a JSON that is no config) before it is accepted.
    fn takes_any_file(&self) -> bool {
        false
    }

    /// Ingests this format's sources into `out`; one report per source, in order.
    fn ingest<'a>(
        &'a self,
        sources: &'a [Source],
        out: &'a DatasetBuilder,
        progress: Progress,
    ) -> BoxFuture<'a, Result<Vec<SourceReport>>>;

    /// Its SQL functions.
    fn functions(&self) -> Vec<Function> {
        Vec::new()
    }

    /// Its SQL library.
    fn sql_files(&self) -> &'static [SqlFile] {
        &[]
    }

    /// The facts its analyses' argument checks read.
    fn facts(&self) -> Vec<Fact> {
        Vec::new()
    }
}

/// Every format memq knows, in detection order (the first that recognises a file takes it).
#[derive(Clone)]
pub struct Catalog {
    formats: Vec<Arc<dyn Format>>,
}

impl Catalog {
    pub fn new(formats: Vec<Arc<dyn Format>>) -> Catalog {
        Catalog { formats }
    }

    pub fn formats(&self) -> &[Arc<dyn Format>] {
        &self.formats
    }

    /// Every table a dataset can hold: each format's, then `rejects` and `sources`.
    pub fn tables(&self) -> Vec<TableDef> {
        let mut tables: Vec<TableDef> = self.formats.iter().flat_map(|f| f.tables()).collect();
        tables.push(rejects::rejects());
        tables.push(rejects::sources());
        tables
    }

    /// The format that recognises `file`, with the kind.
    pub fn detect(&self, file: &Candidate) -> Option<(usize, SourceKind)> {
        self.formats
            .iter()
            .enumerate()
            .find_map(|(i, f)| f.detect(file).map(|k| (i, k)))
    }

    /// Every SQL function of every format.
    pub fn functions(&self) -> Vec<Function> {
        self.formats.iter().flat_map(|f| f.functions()).collect()
    }

    /// Every fact of every format, with the format's name.
    pub fn facts(&self) -> Vec<(&'static str, Fact)> {
        self.formats
            .iter()
            .flat_map(|f| f.facts().into_iter().map(|fact| (f.name(), fact)))
            .collect()
    }

    /// Every SQL library file of every format.
    pub fn sql_files(&self) -> Vec<SqlFile> {
        self.formats
            .iter()
            .flat_map(|f| f.sql_files().iter().copied())
            .collect()
    }
}
