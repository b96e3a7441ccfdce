//! msMemScope dumps — CSV and SQLite dumps, whole output folders and their companion files —
//! as a memq [`Format`]. Format notes: docs/formats/memscope.md.
//!
//! The route of one CSV dump, module by module: [`records`] splits the file into records
//! (quote-aware, multi-line stacks) → [`csv_dump`] maps columns by header name into
//! [`events`] rows, parsing the Attr cell with [`attr`] → [`output`] streams events and
//! rejects to staging files (per-worker Arrow IPC runs for a CSV, a staging Parquet file for a
//! db) → [`ingest`] sorts them into canonical order and runs
//! [`derive`] (blocks with their [`fates`], [`curve`], oom, mem_snapshots) → the dataset writer of memq-core.

pub mod attr;
pub mod companions;
pub mod counts;
pub mod csv_dump;
pub mod curve;
pub mod db_dump;
pub mod derive;
pub mod events;
pub mod fates;
pub mod frag;
pub mod functions;
pub mod ingest;
pub mod output;
pub mod owner;
pub mod records;
pub mod schema;
pub mod series;
pub mod steps;
pub mod tiles;
pub mod to_db;

use memq_core::catalog::TableDef;
use memq_core::dataset::DatasetBuilder;
use memq_core::error::Result;
use memq_core::format::{
    Candidate, Format, Function, Progress, Source, SourceKind, SourceReport, SqlFile,
};

/// The analyses of `sql/`.
pub const SQL_FILES: &[SqlFile] = memq_core::sql_files!(
    "memscope",
    "breakdown_at",
    "breakdown_tree_at",
    "capabilities",
    "curve_buckets",
    "device_host_steps",
    "fragmentation",
    "hal_segment_summary",
    "hal_segments",
    "job_peak",
    "job_ranks",
    "leak_candidates",
    "leak_summary",
    "mem_state_at",
    "memscope_source_capabilities",
    "oom_events",
    "oom_findings",
    "owner_peaks",
    "pairing",
    "peak_blocks",
    "peak_split",
    "peaks",
    "pool_expansions",
    "rank_leaks",
    "rank_peaks",
    "rank_step_heat",
    "run_diff",
    "stage_memory",
    "stats",
    "step_leaks",
    "step_peaks",
    "step_skew",
    "trend",
    "usage_series",
    "wasted_memory",
    "window_summary",
);

/// msMemScope dumps and output folders.
pub struct Memscope;

impl Format for Memscope {
    fn name(&self) -> &'static str {
        "memscope"
    }

    fn tables(&self) -> Vec<TableDef> {
        schema::tables()
    }

    fn detect(&self, file: &Candidate) -> Option<SourceKind> {
        let name = file.file_name();
        if name.starts_with("memscope_dump") || name.starts_with("leaks_dump") {
            if file.has_ext(&["csv"]) {
                return Some(SourceKind::MemscopeCsv);
            }
            if file.has_ext(&["db"]) {
                return Some(SourceKind::MemscopeDb);
            }
        }
        if name.starts_with("python_trace") && file.has_ext(&["csv"]) {
            return Some(SourceKind::PythonTrace);
        }
        if name.starts_with("memory_compare") && file.has_ext(&["csv"]) {
            return Some(SourceKind::MemoryCompare);
        }
        if name == "config.json" {
            return Some(SourceKind::Config);
        }
        let text = file.head_text();
        if file.in_folder {
            // Other CSV files count when their header is a dump's (renamed or copied dumps).
            return (file.has_ext(&["csv"]) && text.starts_with("ID,Event,"))
                .then_some(SourceKind::MemscopeCsv);
        }
        if file.has_ext(&["db", "sqlite", "sqlite3"]) || file.head.starts_with(b"SQLite format 3\0")
        {
            return Some(SourceKind::MemscopeDb);
        }
        if file.has_ext(&["json"]) {
            return Some(SourceKind::Config);
        }
        if text.starts_with("FuncInfo") {
            return Some(SourceKind::PythonTrace);
        }
        if text.starts_with(",,,Base") {
            return Some(SourceKind::MemoryCompare);
        }
        // A file named directly is read as a dump; the reader says what is wrong with it.
        Some(SourceKind::MemscopeCsv)
    }

    fn is_primary(&self, kind: SourceKind) -> bool {
        matches!(kind, SourceKind::MemscopeCsv | SourceKind::MemscopeDb)
    }

    fn takes_any_file(&self) -> bool {
        true
    }

    fn ingest<'a>(
        &'a self,
        sources: &'a [Source],
        out: &'a DatasetBuilder,
        progress: Progress,
    ) -> futures::future::BoxFuture<'a, Result<Vec<SourceReport>>> {
        Box::pin(ingest::ingest(sources, out, progress))
    }

    fn functions(&self) -> Vec<Function> {
        functions::functions()
    }

    fn sql_files(&self) -> &'static [SqlFile] {
        SQL_FILES
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sql_files_lists_every_file() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sql");
        memq_core::format::check_sql_dir(&dir, super::SQL_FILES).unwrap();
    }
}
