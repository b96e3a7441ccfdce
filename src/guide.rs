//! Guidance on a dataset (docs/repl.md, "Where to start"): what it holds, which canned analyses
//! have data in it, and the analyses to start with. Used by the shell's banner and `\dv`, and by
//! `memq export` (which skips the analyses without data unless they are named).

use std::collections::BTreeSet;

use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::{DataType, Int64Type};
use memq_core::dataset::Manifest;
use memq_engine::library::Analysis;
use memq_engine::Engine;

/// The analyses to start with, per format, best first.
const STARTERS: &[(&str, &[&str])] = &[
    ("memscope", &["peaks", "owner_peaks", "leak_summary"]),
    (
        "snapshot",
        &["snap_overview", "snap_peak", "snap_top_blocks"],
    ),
    (
        "profiler",
        &[
            "prof_component_peaks",
            "prof_largest_allocations",
            "prof_live_at_peak",
        ],
    ),
    (
        "trace",
        &[
            "trace_memory_peaks",
            "trace_memory_by_op",
            "trace_memory_curve",
        ],
    ),
];

/// What each format's data is called in the listings.
pub fn format_title(format: &str) -> &'static str {
    match format {
        "memscope" => "msMemScope dumps",
        "snapshot" => "PyTorch memory snapshots",
        "profiler" => "Ascend profiler memory CSVs",
        "trace" => "torch.profiler traces",
        "common" => "every format",
        _ => "other",
    }
}

/// The format an analysis belongs to: the first part of its path (`memscope/peaks.sql`).
pub fn format_of(a: &Analysis) -> &str {
    a.path.split('/').next().unwrap_or("")
}

fn rows(manifest: &Manifest, table: &str) -> u64 {
    manifest
        .tables
        .iter()
        .find(|t| t.name == table)
        .map_or(0, |t| t.rows)
}

/// The tables of `format` in memq's catalog.
fn tables_of(format: &str) -> Vec<String> {
    crate::catalog()
        .formats()
        .iter()
        .filter(|f| f.name() == format)
        .flat_map(|f| f.tables())
        .map(|t| t.name.to_string())
        .collect()
}

/// True when some table of `format` has rows.
pub fn has_format_data(manifest: &Manifest, format: &str) -> bool {
    tables_of(format).iter().any(|t| rows(manifest, t) > 0)
}

fn words(sql: &str) -> BTreeSet<String> {
    sql.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect()
}

/// The names of the analyses that can have no rows on this dataset: every table of their
/// format they read (directly or through the analyses they build on) is empty. An analysis
/// whose tables have rows may still return none (no OOM in the run): that is an answer, and it
/// is not counted here.
pub fn without_data(manifest: &Manifest, analyses: &[Analysis]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    // A view every format answers (`@union`) has data when one of its parts has.
    for a in analyses.iter().filter(|a| !a.union) {
        let own = tables_of(format_of(a));
        let mut read = BTreeSet::new();
        let mut seen = BTreeSet::new();
        let mut todo = vec![a];
        while let Some(next) = todo.pop() {
            if !seen.insert(next.name.clone()) {
                continue;
            }
            let w = words(&next.body);
            read.extend(
                own.iter()
                    .filter(|t| w.contains(&t.to_ascii_lowercase()))
                    .cloned(),
            );
            todo.extend(
                analyses
                    .iter()
                    .filter(|b| b.name != next.name && w.contains(&b.name)),
            );
        }
        // No table of its own format named: judge by the format's data as a whole.
        let has_data = if read.is_empty() {
            own.iter().any(|t| rows(manifest, t) > 0)
        } else {
            read.iter().any(|t| rows(manifest, t) > 0)
        };
        if !has_data {
            out.insert(a.name.clone());
        }
    }
    for u in analyses.iter().filter(|a| a.union) {
        let mut parts = analyses
            .iter()
            .filter(|p| p.part_of.as_deref() == Some(u.name.as_str()));
        if parts.all(|p| out.contains(&p.name)) {
            out.insert(u.name.clone());
        }
    }
    out
}

/// Up to three analyses to start with: the best of each format with data, in turn.
pub fn starters(manifest: &Manifest, analyses: &[Analysis]) -> Vec<String> {
    let empty = without_data(manifest, analyses);
    let lists: Vec<Vec<&str>> = STARTERS
        .iter()
        .filter(|(f, _)| has_format_data(manifest, f))
        .map(|(_, names)| {
            names
                .iter()
                .copied()
                .filter(|n| analyses.iter().any(|a| &a.name == n) && !empty.contains(*n))
                .collect()
        })
        .collect();
    let mut out = Vec::new();
    for i in 0..3 {
        for l in &lists {
            if let Some(n) = l.get(i) {
                out.push(n.to_string());
            }
        }
    }
    out.truncate(3);
    out
}

/// The integers of the first row of `sql` (0 where a value is missing or the query fails).
async fn counts(engine: &Engine, sql: &str) -> Vec<i64> {
    let Ok(batches) = engine.query(sql).await else {
        return Vec::new();
    };
    let Some(b) = batches.iter().find(|b| b.num_rows() > 0) else {
        return Vec::new();
    };
    b.columns()
        .iter()
        .map(|c| {
            datafusion::arrow::compute::cast(c, &DataType::Int64)
                .ok()
                .map_or(0, |c| c.as_primitive::<Int64Type>().value(0))
        })
        .collect()
}

fn plural(n: i64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The analysis called `name`, or why there is none: "no analysis named peak; did you mean
/// `peaks`?".
pub fn analysis_named<'a>(analyses: &'a [Analysis], name: &str) -> Result<&'a Analysis, String> {
    if let Some(a) = analyses.iter().find(|a| a.name == name) {
        return Ok(a);
    }
    let hint = crate::sql_error::nearest(name, analyses.iter().map(|a| a.name.as_str()))
        .map(|best| format!("; did you mean `{best}`?"))
        .unwrap_or_default();
    Err(format!("no analysis named {name}{hint}"))
}

/// The analyses by source format, as the shell's `\dv` lists them (`all`: the private ones too).
pub fn listing(analyses: &[Analysis], all: bool) -> String {
    let shown: Vec<&Analysis> = analyses.iter().filter(|a| all || !a.private).collect();
    let mut formats: Vec<&str> = Vec::new();
    for a in &shown {
        let f = format_of(a);
        if !formats.contains(&f) {
            formats.push(f);
        }
    }
    formats.sort_unstable();
    let mut out = String::new();
    for f in formats {
        out.push_str(&format!("{f} ({}):\n", format_title(f)));
        let rows: Vec<Vec<String>> = shown
            .iter()
            .filter(|a| format_of(a) == f)
            .map(|a| vec![format!("  {}", a.call_form()), a.summary.clone()])
            .collect();
        out.push_str(&crate::output::aligned_columns(&rows));
    }
    out
}

/// One line per format with data: what the dataset holds (devices, processes, snapshots).
pub async fn holdings(engine: &Engine) -> Vec<String> {
    let m = &engine.manifest;
    let mut out = Vec::new();
    if has_format_data(m, "memscope") {
        let c = counts(
            engine,
            // event_counts has a row per (source, pid, device, event, event_type) of `events`:
            // the same counts without a scan of every event at each opening.
            // Devices as the report counts them (`counts_as_device`).
            "SELECT COALESCE(SUM(\"rows\"), 0), \
             (SELECT count(DISTINCT device) FROM peaks WHERE pool <> 'HOST_PINNED' AND device <> 'N/A'), \
             count(DISTINCT pid) FROM event_counts",
        )
        .await;
        if let [events, devices, processes] = c[..] {
            out.push(format!(
                "msMemScope: {} of {} and {}",
                plural(events, "event", "events"),
                plural(devices, "device", "devices"),
                plural(processes, "process", "processes")
            ));
        }
    }
    if has_format_data(m, "snapshot") {
        let c = counts(
            engine,
            "SELECT (SELECT count(DISTINCT snapshot) FROM snap_info), \
             (SELECT count(DISTINCT snapshot || ':' || CAST(device AS VARCHAR)) FROM snap_segments)",
        )
        .await;
        if let [snapshots, devices] = c[..] {
            out.push(format!(
                "PyTorch snapshots: {} of {}",
                plural(snapshots, "snapshot", "snapshots"),
                plural(devices, "device", "devices")
            ));
        }
    }
    if has_format_data(m, "profiler") {
        let n: u64 = tables_of("profiler").iter().map(|t| rows(m, t)).sum();
        out.push(format!("Ascend profiler: {n} memory rows"));
    }
    if has_format_data(m, "trace") {
        let n: u64 = tables_of("trace").iter().map(|t| rows(m, t)).sum();
        out.push(format!("torch.profiler traces: {n} memory events"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(tables: &[(&str, u64)]) -> Manifest {
        let text = serde_json::json!({
            "schema_version": 1, "memq_version": "x", "created_unix": 0, "sources": [],
            "tables": tables.iter().map(|(n, r)| serde_json::json!({"name": n, "rows": r, "files": []})).collect::<Vec<_>>(),
            "options": {"strict": false}
        });
        serde_json::from_value(text).unwrap()
    }

    #[test]
    fn analyses_of_an_empty_format_have_no_data() {
        let all = crate::analyses();
        let snapshot_only = manifest(&[("snap_segments", 3), ("snap_blocks", 9), ("snap_info", 4)]);
        let empty = without_data(&snapshot_only, all);
        assert!(
            empty.contains("peaks") && empty.contains("leak_summary"),
            "{empty:?}"
        );
        assert!(!empty.contains("snap_overview"), "{empty:?}");
        assert_eq!(
            starters(&snapshot_only, all),
            ["snap_overview", "snap_peak", "snap_top_blocks"]
        );
        // a memscope dump's tables, as ingest writes them (the derived ones beside `curve`)
        let memscope_tables = [
            ("events", 10),
            ("blocks", 5),
            ("curve", 7),
            ("curve_peaks", 4),
            ("owner_live_peaks", 2),
        ];
        let memscope_only = manifest(&memscope_tables);
        let empty = without_data(&memscope_only, all);
        assert!(
            empty.contains("snap_overview") && !empty.contains("peaks"),
            "{empty:?}"
        );
        let both = manifest(&[memscope_tables.as_slice(), &[("snap_segments", 3)]].concat());
        assert_eq!(
            starters(&both, all),
            ["peaks", "snap_overview", "owner_peaks"]
        );
    }
}
