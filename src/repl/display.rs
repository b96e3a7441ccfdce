//! The shell's display commands: `\x` (records instead of a table), `\chart`
//! (the last result as a terminal chart), `\set raw on|off` and `\set format F`.

use memq_core::error::{MemqError, Result};

use super::Session;
use crate::output::{BytesDisplay, Format};

impl Session {
    /// `\x [on|off]`: each row as `column | value` lines (format `line`), or back to the table.
    pub(super) fn toggle_vertical(&mut self, arg: &str) -> Result<()> {
        let on = match arg {
            "" => self.settings.format != Format::Line,
            "on" => true,
            "off" => false,
            _ => return Err(MemqError::Usage("\\x [on|off]".into())),
        };
        self.settings.format = if on { Format::Line } else { Format::Table };
        println!("Expanded display is {}.", if on { "on" } else { "off" });
        Ok(())
    }

    /// `\chart`: runs the last statement again and draws its result as a chart.
    pub(super) async fn chart_last(&mut self) -> Result<()> {
        let Some(sql) = self.last_sql.clone() else {
            return Err(MemqError::Usage(
                "\\chart draws the last result: run a query first".into(),
            ));
        };
        let saved = self.settings.format;
        self.settings.format = Format::Chart;
        self.execute(&sql).await;
        self.settings.format = saved;
        Ok(())
    }

    /// `\set raw on|off` and `\set format F`; false when `name` is neither.
    pub(super) fn set_display(&mut self, name: &str, value: &str) -> Result<bool> {
        match name {
            "raw" => {
                self.settings.bytes = match value {
                    "on" | "true" => BytesDisplay::Raw,
                    "off" | "false" => BytesDisplay::Human,
                    _ => return Err(MemqError::Usage("\\set raw on|off".into())),
                };
                println!(
                    "Values are shown {}.",
                    if self.settings.bytes == BytesDisplay::Raw {
                        "raw (as stored)"
                    } else {
                        "by their unit (bytes, times, durations, percentages)"
                    }
                );
            }
            "format" => {
                self.settings.format = Format::parse(value).ok_or_else(|| {
                    MemqError::Usage(
                        "\\set format table|line|chart|csv|tsv|json|ndjson|markdown".into(),
                    )
                })?;
                println!("Output format is {value}.");
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}
