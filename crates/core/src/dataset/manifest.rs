//! What a dataset holds: `manifest.json`, its sources, tables, facts and schema version.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Location, MemqError, Result};

pub const MANIFEST: &str = "manifest.json";
/// 2: table `steps` and `curve.step_k`/`curve.step` (found at ingest); 3: `steps.step_k`;
/// 4: files laid out by rank (`TABLE/rank=R/NNNN.parquet`), `sources.rank/node/device/pid`,
/// `oom.nth` (was `oom.rank`); 5: table `event_counts` (read by `stats` and `capabilities`);
/// 6: table `expansions` (read by `pool_expansions`); 7: the tables folded at ingest beside
/// `curve` (`curve_tiles`, `usage_tiles`, `curve_peaks`, `step_usage`, `pool_frag`,
/// `owner_live_peaks`) and `hal_mallocs`; 8: tables `owner_totals` (read by `owner_peaks`) and
/// `step_levels` (read by `step_peaks`); 9: the snapshot trace's levels computed at ingest
/// (`snap_traces.active_delta` … `segment_growth_bytes`, tables `snap_trace_levels`,
/// `snap_lifetimes`, `snap_oom_allocs`: crates/snapshot/src/derive.rs).
pub const SCHEMA_VERSION: u32 = 9;

/// The column every table but `sources` has: the rank of the job its source belongs to
/// (docs/scale-out.md). It is not stored in the files: each table's files are laid out by it,
/// hive-style, `TABLE/rank=R/NNNN.parquet`, so a query on one rank reads that rank's files only.
pub const RANK_COLUMN: &str = "rank";

/// Whether `table`'s files are laid out by rank (every table but `sources`, which carries the
/// rank of each source as a column of its own).
pub fn by_rank(table: &str) -> bool {
    table != "sources"
}

/// `manifest.json`: what the dataset holds and where it came from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    pub schema_version: u32,
    pub memq_version: String,
    pub created_unix: u64,
    pub sources: Vec<SourceEntry>,
    /// Rows per table (stored views included).
    pub tables: Vec<TableEntry>,
    pub options: IngestOptionsRecord,
    /// The library's views stored with the tables when the dataset was built (`-- @stored`,
    /// crates/engine/src/stored.rs), each a table of `tables`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stored: Vec<String>,
    /// The fingerprint of the library that computed them: a memq whose library differs plans
    /// the views instead of reading them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
    /// What the engine's fact queries answered over the dataset (its time range, pools,
    /// steps…, which the argument checks read; crates/engine/src/checks.rs): each query's text
    /// and its rows, computed with the stored views and read only by the same library.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub facts: BTreeMap<String, Vec<Vec<FactValue>>>,
}

/// A value of a fact query's row (`Manifest::facts`): what those queries answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum FactValue {
    Int(i64),
    Text(String),
    Null,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SourceEntry {
    /// Name used in the `source` column of every table.
    pub source: String,
    pub path: String,
    pub kind: String,
    pub size_bytes: u64,
    pub mtime_unix_ns: i128,
    pub rows: u64,
    pub rejects: u64,
    pub ts_unit: Option<String>,
    pub generation: Option<String>,
    /// The rank of the job the source belongs to (crates/ingest/src/ranks.rs).
    pub rank: i64,
    /// The machine of the job the source comes from.
    pub node: String,
    /// The NPU of its rank (`device_<N>`), when the path names one.
    pub device: Option<String>,
    /// The process id of its rank, from the project folder's name.
    pub pid: Option<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TableEntry {
    pub name: String,
    pub rows: u64,
    pub files: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct IngestOptionsRecord {
    pub strict: bool,
}

impl Manifest {
    pub fn read(dataset: &Path) -> Result<Manifest> {
        let path = dataset.join(MANIFEST);
        let text = fs::read_to_string(&path).map_err(|e| MemqError::io(&path, e))?;
        serde_json::from_str(&text).map_err(|e| {
            MemqError::input(
                &path,
                Location::Line(e.line() as u64),
                format!("invalid manifest: {e}"),
            )
        })
    }
}

/// True when `path` is a dataset folder (it holds a manifest).
pub fn is_dataset(path: &Path) -> bool {
    path.is_dir() && path.join(MANIFEST).is_file()
}
