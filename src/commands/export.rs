//! `memq export`: the selected analyses written into a folder through the library API, with
//! a line per analysis and what was left out.

use std::path::Path;

use crate::api::{Dataset, OpenOptions};
use crate::commands::sql::interruptible;
use crate::error::Result;
use crate::exec;
use crate::export::{self, Selection};
use crate::output::Format;

/// Exports `views` (`all` or a comma list) of `input` into `output` as `format` files.
pub(crate) async fn run_export(
    input: &Path,
    views: &str,
    output: &Path,
    format: Format,
    force: bool,
) -> Result<()> {
    let selection = Selection::parse(views);
    export::select(&selection, crate::analyses())?;
    let ds = Dataset::open(&[input.to_path_buf()], &OpenOptions::with_progress()).await?;
    let stop = exec::Stop::new();
    let mut index = None;
    // Ctrl-C drops the export: its staging folder goes with it, DIR is left as it was.
    interruptible(
        async {
            index = Some(ds.export(&selection, output, format, force).await?);
            Ok(false)
        },
        &stop,
    )
    .await?;
    let Some(index) = index else { return Ok(()) };
    for v in &index.views {
        eprintln!(
            "{:<32} {:>15}  {}",
            v.view,
            count(v.rows, "row", "rows"),
            v.file
        );
    }
    eprintln!(
        "{} written to {} (index in {})",
        count(index.views.len() as u64, "analysis", "analyses"),
        output.display(),
        export::INDEX_FILE
    );
    if !index.skipped.is_empty() {
        eprintln!(
                    "skipped {} with no data in this dataset (name them with --views to export them anyway): {}",
                    count(index.skipped.len() as u64, "analysis", "analyses"),
                    index.skipped.join(", ")
                );
    }
    Ok(())
}

/// `1 row`, `5 rows`.
pub(crate) fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
