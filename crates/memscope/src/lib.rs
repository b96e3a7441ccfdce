//! msMemScope dumps — CSV and SQLite dumps, whole output folders and their companion files —
//! as a memq [`Format`]. Format notes: docs/formats/memscope.md.
//!
//! The modules follow the stages of an ingest:
//!
//! - [`parse`]: text into rows — [`parse::records`] splits a CSV into records (quote-aware,
//!   multi-line stacks), [`parse::attr`] reads the Attr cell, [`parse::events`] builds rows;
//! - [`read`]: the readers — [`read::csv`] maps a dump's columns by header name and parses it
//!   on every core, [`read::db`] reads SQLite dumps, [`read::companions`] an output folder's
//!   other files;
//! - [`staging`]: where a source's rows go while it is read — per-worker sorted Arrow IPC runs
//!   for a CSV ([`staging::runs`]), a staging file for a db — merged into canonical order;
//! - [`derive`]: the one pass over each source's events in that order — blocks with their
//!   [`derive::fates`], [`derive::steps`], [`derive::curve`] and what is folded from it
//!   ([`derive::tiles`], [`derive::frag`]);
//!
//! [`ingest`] runs the stages for a format's sources; [`schema`] declares the tables,
//! [`functions`] the SQL functions, [`to_db`] writes an Insight db back.

pub mod derive;
pub mod functions;
pub mod ingest;
pub mod parse;
pub mod read;
pub mod schema;
pub mod staging;
pub mod to_db;

use memq_core::catalog::TableDef;
use memq_core::dataset::DatasetBuilder;
use memq_core::error::Result;
use memq_core::format::{
    Candidate, Fact, Format, Function, Progress, Source, SourceKind, SourceReport, SqlFile,
};

/// The analyses of `sql/`.
pub const SQL_FILES: &[SqlFile] = memq_core::sql_files!(
    "memscope",
    "breakdown_at",
    "breakdown_tree_at",
    "capabilities",
    "capability_findings",
    "curve_buckets",
    "curve_findings",
    "device_host_steps",
    "fragmentation",
    "hal_segment_summary",
    "hal_segments",
    "job_peak",
    "job_ranks",
    "leak_candidates",
    "leak_findings",
    "cached_findings",
    "leak_summary",
    "mem_state_at",
    "memscope_source_capabilities",
    "oom_events",
    "oom_findings",
    "oom_trigger_findings",
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

/// A `memscope_dump_*.csv` (or a CSV with its header).
pub const MEMSCOPE_CSV: SourceKind = SourceKind("memscope_csv");
/// An msMemScope SQLite dump (`memscope_dump_*.db`, msLeaks' `leaks_dump_*.db`).
pub const MEMSCOPE_DB: SourceKind = SourceKind("memscope_db");
/// A `python_trace_*.csv` of an output folder.
pub const PYTHON_TRACE: SourceKind = SourceKind("python_trace");
/// A `memory_compare_*.csv` of an output folder.
pub const MEMORY_COMPARE: SourceKind = SourceKind("memory_compare");
/// The `config.json` of an output folder.
pub const CONFIG: SourceKind = SourceKind("config");

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
                return Some(MEMSCOPE_CSV);
            }
            if file.has_ext(&["db"]) {
                return Some(MEMSCOPE_DB);
            }
        }
        if name.starts_with("python_trace") && file.has_ext(&["csv"]) {
            return Some(PYTHON_TRACE);
        }
        if name.starts_with("memory_compare") && file.has_ext(&["csv"]) {
            return Some(MEMORY_COMPARE);
        }
        if name == "config.json" {
            return Some(CONFIG);
        }
        let text = file.head_text();
        if file.in_folder {
            // Other CSV files count when their header is a dump's (renamed or copied dumps).
            return (file.has_ext(&["csv"]) && text.starts_with("ID,Event,"))
                .then_some(MEMSCOPE_CSV);
        }
        if file.has_ext(&["db", "sqlite", "sqlite3"]) || file.head.starts_with(b"SQLite format 3\0")
        {
            return Some(MEMSCOPE_DB);
        }
        if file.has_ext(&["json"]) {
            return Some(CONFIG);
        }
        if text.starts_with("FuncInfo") {
            return Some(PYTHON_TRACE);
        }
        if text.starts_with(",,,Base") {
            return Some(MEMORY_COMPARE);
        }
        // A file named directly is read as a dump; the reader says what is wrong with it.
        Some(MEMSCOPE_CSV)
    }

    fn is_primary(&self, kind: SourceKind) -> bool {
        matches!(kind, MEMSCOPE_CSV | MEMSCOPE_DB)
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

    fn facts(&self) -> Vec<Fact> {
        vec![
            // From `event_counts` (a row per source, process, device and event with its first
            // and last time), not a scan of `events`.
            Fact {
                name: "range",
                item: "msMemScope events",
                sql: "SELECT min(first_ts), max(last_ts) FROM event_counts",
            },
            Fact {
                name: "peak",
                item: "memory curve",
                sql: "SELECT ts FROM curve WHERE ($1 IS NULL OR pool = $1) \
                      ORDER BY live_bytes DESC NULLS LAST, ts LIMIT 1",
            },
            Fact {
                name: "steps",
                item: "step",
                sql: "SELECT start_ts, end_ts, step FROM steps ORDER BY 1, 2, 3",
            },
            // The pools of `curve` (a row per MALLOC/FREE row, its pool the row's Event Type).
            Fact {
                name: "pools",
                item: "pool",
                sql: "SELECT DISTINCT event_type AS pool FROM event_counts \
                      WHERE event IN ('MALLOC', 'FREE') ORDER BY pool",
            },
            // What a side of `run_diff` may name: a capture (memscope-format §5.9) or a file.
            Fact {
                name: "captures",
                item: "capture",
                sql: "SELECT name FROM (SELECT DISTINCT capture(source) AS name FROM blocks \
                      UNION SELECT DISTINCT source FROM blocks) AS n ORDER BY name",
            },
        ]
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
