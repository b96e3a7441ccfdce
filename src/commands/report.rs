//! `memq report` and `memq check` as commands: open the inputs through the library API, let
//! the report crate judge, write or print the outcome.

use std::path::Path;

use memq_core::error::{MemqError, Result};

use crate::api::{Dataset, OpenOptions};
use crate::report::{check, markdown, parse_size, write, Options};

/// `memq report`: opens the inputs, builds the report, writes it to `output` (by extension)
/// or prints the Markdown.
pub async fn run_report(
    inputs: &[std::path::PathBuf],
    output: Option<&Path>,
    pool: Option<String>,
    device: Option<String>,
) -> Result<()> {
    if let Some(p) = output {
        // refuse a bad extension before the work
        let ext = p
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("")
            .to_ascii_lowercase();
        if !matches!(ext.as_str(), "html" | "htm" | "md" | "markdown" | "json") {
            return Err(MemqError::Usage(format!(
                "-o {}: the report is written as .html, .md or .json",
                p.display()
            )));
        }
    }
    let ds = Dataset::open(inputs, &OpenOptions::with_progress()).await?;
    let r = ds.report(&Options { pool, device }).await?;
    match output {
        Some(p) => {
            write(&r, p)?;
            eprintln!(
                "memq: report written to {} ({} findings)",
                p.display(),
                r.findings.len()
            );
        }
        None => {
            use std::io::Write as _;
            let mut out = std::io::stdout().lock();
            out.write_all(markdown::render(&r).as_bytes())
                .map_err(|e| MemqError::io(Path::new("stdout"), e))?;
        }
    }
    Ok(())
}

/// `memq check`: the exit code (0 all limits hold, 1 a limit is exceeded, 2 bad input).
/// Prints the measured values beside their limits on stdout; errors go to stderr as exit 2.
pub async fn run_check(
    inputs: &[std::path::PathBuf],
    sizes: [Option<String>; 3],
    max_frag: Option<f64>,
    no_oom: bool,
    format: &str,
) -> Result<i32> {
    if format != "text" && format != "json" {
        return Err(MemqError::Usage(format!(
            "--format {format}: use text or json"
        )));
    }
    let [max_peak, max_reserved, max_leak] = sizes;
    let parse = |flag: &str, v: Option<String>| -> Result<Option<i64>> {
        match v {
            None => Ok(None),
            Some(s) => parse_size(&s).map(Some).ok_or_else(|| {
                MemqError::Usage(format!(
                    "--{flag} {s}: not a size (e.g. 16GiB, 512MB, 1073741824)"
                ))
            }),
        }
    };
    let limits = check::Limits {
        max_peak: parse("max-peak", max_peak)?,
        max_reserved: parse("max-reserved", max_reserved)?,
        max_leak: parse("max-leak", max_leak)?,
        max_frag: match max_frag {
            Some(p) if !(p.is_finite() && p >= 0.0) => {
                return Err(MemqError::Usage(format!(
                    "--max-frag {p}: a percentage >= 0"
                )))
            }
            other => other,
        },
        no_oom,
    };
    // Every failure before the verdict is bad input for the gate: exit 2.
    let usage = |e: MemqError| MemqError::Usage(e.to_string());
    let ds = Dataset::open(inputs, &OpenOptions::default())
        .await
        .map_err(usage)?;
    let outcome = ds.check(&limits).await.map_err(usage)?;
    let text = if format == "json" {
        check::render_json(&outcome)
    } else {
        check::render_text(&outcome)
    };
    print!("{text}");
    for c in outcome.checks.iter().filter(|c| c.status == "unmeasurable") {
        eprintln!(
            "memq: check {}: this input cannot measure it{}",
            c.name,
            if c.name == "frag" {
                " (fragmentation needs a snapshot's segment layout)"
            } else {
                ""
            }
        );
    }
    Ok(outcome.exit_code)
}
