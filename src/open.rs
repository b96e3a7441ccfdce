//! Opens whatever the user names as INPUT — a dataset folder, or raw dumps, folders and pickles
//! that are ingested first — as an [`Engine`].

use std::path::{Path, PathBuf};

use crate::dataset;
use crate::engine::Engine;
use crate::error::Result;
use crate::ingest::{ingest, IngestOptions};

/// An opened input; keeps a temporary dataset alive as long as it is in use.
pub struct Opened {
    pub engine: Engine,
    _temp: Option<tempfile::TempDir>,
}

/// Opens `inputs`: a single dataset folder directly, anything else through a temporary ingest.
pub async fn open_inputs(inputs: &[PathBuf], progress: bool) -> Result<Opened> {
    if let [single] = inputs {
        if dataset::is_dataset(single) {
            return Ok(Opened { engine: Engine::open(single).await?, _temp: None });
        }
    }
    let temp = tempfile::Builder::new()
        .prefix("memq-")
        .tempdir()
        .map_err(|e| crate::error::MemqError::io(Path::new("temporary folder"), e))?;
    let target = temp.path().join("input.memq");
    let opts = IngestOptions { output: target.clone(), force: false, strict: false, progress };
    let report = ingest(inputs, &opts).await?;
    if report.total_rejects() > 0 {
        eprintln!("memq: {} record(s) could not be parsed; see the `rejects` table", report.total_rejects());
    }
    Ok(Opened { engine: Engine::open(&target).await?, _temp: Some(temp) })
}
