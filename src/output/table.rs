//! The table view, streamed: rows arrive batch by batch and at most `max_rows` are kept (the
//! head and the tail); the rest are only counted. Columns are fitted to the terminal width:
//! long cells are cut with `…` (paths from the left, so the file name stays), and the columns
//! that do not fit are left out and named in the footer.
//!
//! ```text
//! +------+-----+
//! | pool | n   |
//! +------+-----+
//! | HAL  | 3   |
//! | …    | …   |
//! | PTA  | 9   |
//! +------+-----+
//! 990059 rows, 40 shown
//! ```

use std::collections::VecDeque;

use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;

use memq_core::error::Result;

use super::cells::{self, CellStyle};
use super::BytesDisplay;
use memq_core::catalog::Unit;

/// The default of `maxrows`.
pub const DEFAULT_MAX_ROWS: usize = 40;

/// Rows sampled to size the columns when every row is shown (`maxrows 0`).
const SAMPLE_ALL: usize = 1000;

/// Longest cell text kept (the table cuts it to the column width anyway).
const MAX_CELL_CHARS: usize = 2000;

/// Narrowest a text column is made before columns are left out.
const MIN_WIDTH: usize = 8;

/// Narrowest a path column is made (room for a file name).
const MIN_PATH_WIDTH: usize = 24;

/// Widest a path column's file name keeps it when the table is narrowed.
const MAX_PATH_WIDTH: usize = 40;

/// Numbers up to this wide are never cut.
const MAX_NUMBER_WIDTH: usize = 24;

/// Text up to this wide (names, enumerations such as `active_pending_free`) is never cut.
const MAX_NAME_WIDTH: usize = 20;

/// How a table is laid out.
#[derive(Debug, Clone)]
pub struct TableOptions {
    /// Rows shown at most (head and tail); 0 shows every row.
    pub max_rows: usize,
    /// The terminal width; `None` does not fit the table to a width.
    pub width: Option<usize>,
    /// Values by their unit (`Human`) or as stored (`Raw`).
    pub bytes: BytesDisplay,
    /// The run's start (ns since the Unix epoch): moments show their offset from it.
    pub origin_ns: Option<i64>,
    /// The run's steps: a moment in a step names it.
    pub steps: Option<std::sync::Arc<memq_engine::facts::Steps>>,
    /// One `column | value` line per column for each row (`\x`, format `line`); a table of one
    /// row too wide for `width` is shown so too.
    pub vertical: bool,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            max_rows: DEFAULT_MAX_ROWS,
            width: None,
            bytes: BytesDisplay::Human,
            origin_ns: None,
            steps: None,
            vertical: false,
        }
    }
}

impl TableOptions {
    pub fn style(&self) -> CellStyle {
        CellStyle {
            values: self.bytes,
            origin_ns: self.origin_ns,
            steps: self.steps.clone(),
        }
    }
}

/// The columns shown and their widths, fixed once the first rows are seen.
struct Layout {
    /// Columns with one value on every row of a whole result that did not fit the width: said
    /// once above the table instead of repeated on every line.
    folded: Vec<usize>,
    shown: Vec<usize>,
    widths: Vec<usize>,
    /// Cut from the left (paths).
    left: Vec<bool>,
    /// Moments (ISO time and offset): when narrowed, the offset from the run's start alone.
    time: Vec<bool>,
}

/// The offset part of a moment's text (`+12.345678 s` of `2025-…Z +12.345678 s`).
fn offset_part(cell: &str) -> &str {
    cell.split_once(' ').map_or(cell, |(_, rest)| rest)
}

/// A table being printed while its rows stream in.
pub struct TableView {
    opts: TableOptions,
    schema: SchemaRef,
    names: Vec<String>,
    rows: u64,
    /// The first rows, until the layout is fixed.
    sample: Vec<Vec<String>>,
    /// The last rows (after the head), when not every row is shown.
    tail: VecDeque<Vec<String>>,
    layout: Option<Layout>,
    /// Rows printed in the head.
    head_printed: usize,
    /// Rows shown as records (`column | value` lines).
    vertical: bool,
}

/// The display width of a character (CJK and emoji take two cells, combining marks none).
fn char_width(c: char) -> usize {
    let u = c as u32;
    if (0x300..0x370).contains(&u) || (0x200b..0x2010).contains(&u) {
        return 0;
    }
    let wide = (0x1100..=0x115f).contains(&u)
        || (0x2e80..=0xa4cf).contains(&u)
        || (0xac00..=0xd7a3).contains(&u)
        || (0xf900..=0xfaff).contains(&u)
        || (0xfe30..=0xfe4f).contains(&u)
        || (0xff00..=0xff60).contains(&u)
        || (0xffe0..=0xffe6).contains(&u)
        || (0x1f300..=0x1faff).contains(&u)
        || (0x20000..=0x3fffd).contains(&u);
    if wide {
        2
    } else {
        1
    }
}

/// The display width of a text.
pub fn text_width(s: &str) -> usize {
    s.chars().map(char_width).sum()
}

/// `s` cut to `width` cells with a trailing `…`.
pub fn cut_right(s: &str, width: usize) -> String {
    if text_width(s) <= width {
        return s.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut out = String::new();
    let mut w = 0;
    for c in s.chars() {
        let cw = char_width(c);
        if w + cw > width - 1 {
            break;
        }
        out.push(c);
        w += cw;
    }
    out.push('…');
    out
}

/// `s` cut to `width` cells from the left, with a leading `…`; a path keeps whole trailing
/// components where it can (`…/device_0/dump.csv`).
pub fn cut_left(s: &str, width: usize) -> String {
    if text_width(s) <= width {
        return s.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let chars: Vec<char> = s.chars().collect();
    let mut start = chars.len();
    let mut w = 0;
    while start > 0 {
        let cw = char_width(chars[start - 1]);
        if w + cw > width - 1 {
            break;
        }
        w += cw;
        start -= 1;
    }
    let kept: String = chars[start..].iter().collect();
    // Start at a path separator when one is in the kept part (and not its last character).
    let kept = match kept.find('/') {
        Some(i) if i > 0 && i + 1 < kept.len() => kept[i..].to_string(),
        _ => kept,
    };
    format!("…{kept}")
}

/// `s` in lines of at most `width` cells, broken after a space, `/`, `,` or `;` in the last
/// third of a line when there is one, else at the width.
fn wrap(s: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut lines = Vec::new();
    let mut line = String::new();
    let mut w = 0;
    for c in s.chars() {
        let cw = char_width(c);
        if w + cw > width && !line.is_empty() {
            let cut = line
                .char_indices()
                .filter(|&(_, c)| matches!(c, ' ' | '/' | ',' | ';'))
                .map(|(i, c)| i + c.len_utf8())
                .rfind(|&i| text_width(&line[..i]) * 3 >= width * 2 && i < line.len());
            match cut {
                Some(i) => {
                    let rest = line.split_off(i);
                    lines.push(std::mem::take(&mut line));
                    line = rest;
                }
                None => lines.push(std::mem::take(&mut line)),
            }
            w = text_width(&line);
        }
        line.push(c);
        w += cw;
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// One line of a cell: newlines shown as `↵`, tabs as spaces, other control characters dropped.
fn one_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(MAX_CELL_CHARS));
    for (i, c) in s.chars().enumerate() {
        if i >= MAX_CELL_CHARS {
            out.push('…');
            break;
        }
        match c {
            '\n' => out.push('↵'),
            '\t' => out.push(' '),
            '\r' => {}
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// A column shown cut from the left: file paths.
fn is_path_column(name: &str) -> bool {
    matches!(name, "source" | "path" | "file" | "source_path")
        || name.ends_with("_path")
        || name.ends_with("_file")
}

/// Text read from its end: a path (`/home/…/train.py`) or a frame (`train.py(96): step`), whose
/// file name or function is at the end. Judged on the column's name and on the sampled cells.
fn reads_from_the_end(name: &str, cells: &[&str]) -> bool {
    if is_path_column(name) {
        return true;
    }
    let filled: Vec<&&str> = cells
        .iter()
        .filter(|c| !c.is_empty() && **c != "NULL")
        .collect();
    let like = filled.iter().filter(|c| ends_with_its_name(c)).count();
    !filled.is_empty() && like * 2 >= filled.len()
}

/// A path (`/a/b/c.py`, no spaces) or a frame (`c.py(96): step`): its end names it.
fn ends_with_its_name(cell: &str) -> bool {
    (cell.contains('/') && !cell.contains(' '))
        || cell
            .split_once("): ")
            .is_some_and(|(file, _)| file.contains('('))
}

/// Columns that identify a row rather than answer the question (left out first when the
/// table does not fit): sources, process and thread ids, raw timestamps, row and event ids.
fn is_identifier(name: &str) -> bool {
    matches!(
        name,
        "source" | "pid" | "tid" | "rank" | "id" | "row_idx" | "seq" | "path"
    ) || name.ends_with("_id")
        || name.ends_with("_raw")
        || name.ends_with("_idx")
        || is_path_column(name)
}

/// The cells of rows `from..to` of `batch` as text.
fn cells(
    batch: &RecordBatch,
    from: usize,
    to: usize,
    style: CellStyle,
) -> Result<Vec<Vec<String>>> {
    let schema = batch.schema();
    let mut columns: Vec<Vec<String>> = Vec::with_capacity(batch.num_columns());
    let row_units = cells::row_units(batch, from, to);
    for (field, col) in schema.fields().iter().zip(batch.columns()) {
        let slice = col.slice(from, to - from);
        let texts = match &row_units {
            Some(units) => cells::texts_by_row(field, &slice, units, &style)?,
            None => cells::texts(field, &slice, &style)?,
        };
        columns.push(texts.iter().map(|t| one_line(t)).collect());
    }
    Ok((0..to - from)
        .map(|r| columns.iter().map(|c| c[r].clone()).collect())
        .collect())
}

impl TableView {
    pub fn new(schema: SchemaRef, opts: TableOptions) -> TableView {
        let names = schema.fields().iter().map(|f| one_line(f.name())).collect();
        TableView {
            vertical: opts.vertical,
            opts,
            schema,
            names,
            rows: 0,
            sample: Vec::new(),
            tail: VecDeque::new(),
            layout: None,
            head_printed: 0,
        }
    }

    /// Rows seen so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    fn head_rows(&self) -> usize {
        self.opts.max_rows.div_ceil(2)
    }

    fn tail_rows(&self) -> usize {
        self.opts.max_rows / 2
    }

    /// Rows sampled before the layout is fixed.
    fn sample_rows(&self) -> usize {
        if self.opts.max_rows == 0 {
            SAMPLE_ALL
        } else {
            self.opts.max_rows + 1
        }
    }

    /// Feeds one batch; returns the text to print now (the head, once the layout is fixed; with
    /// `maxrows 0`, the rows), if any.
    pub fn push(&mut self, batch: &RecordBatch) -> Result<Option<String>> {
        let n = batch.num_rows();
        if n == 0 {
            return Ok(None);
        }
        let mut out = None;
        let mut at = 0;
        if self.layout.is_none() {
            let want = self.sample_rows() - self.sample.len();
            let take = want.min(n);
            self.sample
                .extend(cells(batch, 0, take, self.opts.style())?);
            self.rows += take as u64;
            at = take;
            if self.sample.len() >= self.sample_rows() {
                out = Some(self.start());
            }
        }
        if at < n {
            if self.opts.max_rows == 0 {
                // Every row: printed as it comes.
                let layout = self.layout.as_ref().expect("layout fixed");
                let mut text = String::new();
                for (k, row) in cells(batch, at, n, self.opts.style())?.iter().enumerate() {
                    text.push_str(&self.line(layout, self.rows + k as u64 + 1, row));
                }
                out.get_or_insert_with(String::new).push_str(&text);
            } else {
                let keep = self.tail_rows();
                let from = n.saturating_sub(keep).max(at);
                for row in cells(batch, from, n, self.opts.style())? {
                    self.tail.push_back(row);
                    while self.tail.len() > keep {
                        self.tail.pop_front();
                    }
                }
            }
            self.rows += (n - at) as u64;
        }
        Ok(out)
    }

    /// Fixes the layout from the sample and renders the top of the table with the head rows.
    fn start(&mut self) -> String {
        let layout = self.layout_for(&self.sample, false);
        let mut text = self.top(&layout);
        let head = if self.opts.max_rows == 0 {
            self.sample.len()
        } else {
            self.head_rows().min(self.sample.len())
        };
        for (i, row) in self.sample[..head].iter().enumerate() {
            text.push_str(&self.line(&layout, i as u64 + 1, row));
        }
        self.head_printed = head;
        let rest: Vec<Vec<String>> = self.sample.drain(..).skip(head).collect();
        let keep = self.tail_rows();
        for row in rest {
            self.tail.push_back(row);
            while self.tail.len() > keep {
                self.tail.pop_front();
            }
        }
        self.layout = Some(layout);
        text
    }

    /// The rest of the table and the footer, once every row is in.
    pub fn finish(mut self) -> String {
        if self.rows == 0 {
            return format!("(0 rows: {})\n", self.names.join(", "));
        }
        let mut text = String::new();
        if self.layout.is_none() {
            // Fewer rows than the sample: all of them, sized exactly.
            let layout = self.layout_for(&self.sample, true);
            // One row of several columns that does not fit the width: a record reads better
            // than a cut table.
            let cut = layout.shown.len() < self.names.len()
                || layout
                    .shown
                    .iter()
                    .zip(&layout.widths)
                    .any(|(&i, &w)| text_width(&self.sample[0][i]) > w);
            if self.rows == 1 && self.names.len() > 1 && self.opts.width.is_some() && cut {
                self.vertical = true;
            }
            text.push_str(&self.top(&layout));
            for (i, row) in self.sample.iter().enumerate() {
                text.push_str(&self.line(&layout, i as u64 + 1, row));
            }
            self.head_printed = self.sample.len();
            self.layout = Some(layout);
        } else {
            let layout = self.layout.as_ref().expect("layout fixed");
            let shown = self.head_printed as u64 + self.tail.len() as u64;
            if shown < self.rows && self.vertical {
                text.push_str("…\n");
            } else if shown < self.rows {
                let dots: Vec<String> = layout.shown.iter().map(|_| "…".to_string()).collect();
                let mut line = String::from("|");
                for (i, d) in dots.iter().enumerate() {
                    line.push_str(&format!(" {d:<w$} |", w = layout.widths[i]));
                }
                text.push_str(&line);
                text.push('\n');
            }
            // Numbers in the tail may be wider than in the head (the sizes were measured on the
            // first rows): the tail gets its own widths rather than cut numbers.
            let tail_layout = self.tail_layout(layout);
            if tail_layout.widths != layout.widths && !self.vertical {
                text.push_str(&self.border(&tail_layout));
            }
            let first = self.rows - self.tail.len() as u64 + 1;
            for (k, row) in self.tail.iter().enumerate() {
                text.push_str(&self.line(&tail_layout, first + k as u64, row));
            }
            self.layout = Some(tail_layout);
        }
        let layout = self.layout.as_ref().expect("layout fixed");
        if !self.vertical {
            text.push_str(&self.border(layout));
        }
        text.push_str(&self.footer(false));
        text
    }

    /// The top of the table (border, header, border); nothing for records.
    fn top(&self, layout: &Layout) -> String {
        if self.vertical {
            return String::new();
        }
        let mut text = self.fold_line(layout);
        text.push_str(&self.border(layout));
        text.push_str(&self.row_line(layout, &self.names));
        text.push_str(&self.border(layout));
        text
    }

    /// The folded columns, `name value` once for every row (`every row: pid 2579302 · …`); the
    /// columns empty in every row by name alone (`NULL: a, b`).
    fn fold_line(&self, layout: &Layout) -> String {
        let Some(row) = self.sample.first().filter(|_| !layout.folded.is_empty()) else {
            return String::new();
        };
        let width = self.opts.width.unwrap_or(usize::MAX);
        let (empty, valued): (Vec<usize>, Vec<usize>) = layout
            .folded
            .iter()
            .partition(|&&i| row[i].is_empty() || row[i] == "NULL");
        // Each value whole if the line has room, else the longest cut first (paths and frames
        // from the left).
        let mut values: Vec<String> = valued.iter().map(|&i| row[i].clone()).collect();
        let nulls: Vec<&str> = empty.iter().map(|&i| self.names[i].as_str()).collect();
        let parts_n = valued.len() + usize::from(!empty.is_empty());
        let fixed = text_width("every row: ")
            + valued
                .iter()
                .map(|&i| text_width(&self.names[i]) + 1)
                .sum::<usize>()
            + 3 * parts_n.saturating_sub(1)
            + if empty.is_empty() {
                0
            } else {
                6 + text_width(&nulls.join(", "))
            };
        loop {
            let used = fixed + values.iter().map(|v| text_width(v)).sum::<usize>();
            let Some(k) = (0..values.len()).max_by_key(|&k| text_width(&values[k])) else {
                break;
            };
            let long = text_width(&values[k]);
            if used <= width || long <= 12 {
                break;
            }
            let keep = long.saturating_sub(used - width).max(12);
            let column: [&str; 1] = [row[valued[k]].as_str()];
            values[k] = if reads_from_the_end(self.schema.field(valued[k]).name(), &column) {
                cut_left(&row[valued[k]], keep)
            } else {
                cut_right(&row[valued[k]], keep)
            };
        }
        let mut parts: Vec<String> = valued
            .iter()
            .zip(&values)
            .map(|(&i, v)| format!("{} {v}", self.names[i]))
            .collect();
        if !empty.is_empty() {
            parts.push(format!("NULL: {}", nulls.join(", ")));
        }
        let line = format!("every row: {}", parts.join(" · "));
        format!("{}\n", cut_right(&line, width))
    }

    /// Row number `number` (1-based): a table line, or a record.
    fn line(&self, layout: &Layout, number: u64, row: &[String]) -> String {
        if self.vertical {
            self.record(number, row)
        } else {
            self.row_line(layout, row)
        }
    }

    /// A row as a record: a `-[ row N ]---` line, then `column | value` per column, the
    /// values cut to the width (paths from the left).
    fn record(&self, number: u64, row: &[String]) -> String {
        let name_w = self
            .names
            .iter()
            .map(|n| text_width(n))
            .max()
            .unwrap_or(0)
            .min(40);
        let value_w = self
            .opts
            .width
            .map(|w| w.saturating_sub(name_w + 3).max(MIN_WIDTH));
        let title = format!("-[ row {number} ]");
        let rule = self
            .opts
            .width
            .unwrap_or(name_w + 3 + 40)
            .min(name_w + 3 + 60);
        let mut s = format!(
            "{title}{}\n",
            "-".repeat(rule.saturating_sub(text_width(&title)))
        );
        // A value wider than the room wraps onto lines of its own under it: a record is where
        // a long value (evidence, a stack) is read whole.
        for (i, name) in self.names.iter().enumerate() {
            let cell = row.get(i).map(String::as_str).unwrap_or("");
            let lines = match value_w {
                Some(w) => wrap(cell, w),
                None => vec![cell.to_string()],
            };
            let name = cut_right(name, name_w);
            let pad = name_w.saturating_sub(text_width(&name));
            for (k, line) in lines.iter().enumerate() {
                if k == 0 {
                    s.push_str(&format!("{name}{} | {line}\n", " ".repeat(pad)));
                } else {
                    s.push_str(&format!("{} | {line}\n", " ".repeat(name_w)));
                }
            }
        }
        s
    }

    /// What ends the table when the rows stop coming (Ctrl-C): the bottom border (when the top
    /// was printed) and how many rows had arrived.
    pub fn interrupted(&self) -> String {
        let mut text = String::new();
        if let Some(layout) = self.layout.as_ref().filter(|_| !self.vertical) {
            text.push_str(&self.border(layout));
        }
        text.push_str(&self.footer(true));
        text
    }

    fn footer(&self, stopped: bool) -> String {
        let shown = if self.layout.is_some() {
            if self.opts.max_rows == 0 {
                self.rows
            } else {
                self.head_printed as u64 + if stopped { 0 } else { self.tail.len() as u64 }
            }
        } else {
            0
        };
        let plural = if self.rows == 1 { "" } else { "s" };
        let mut line = if stopped {
            format!(
                "stopped after {} row{plural}, {shown} shown (Ctrl-C)",
                self.rows
            )
        } else if shown < self.rows {
            format!("{} row{plural}, {shown} shown", self.rows)
        } else {
            format!("{} row{plural}", self.rows)
        };
        if let Some(layout) = self.layout.as_ref().filter(|_| !self.vertical) {
            let hidden: Vec<&str> = (0..self.names.len())
                .filter(|i| !layout.shown.contains(i) && !layout.folded.contains(i))
                .map(|i| self.names[i].as_str())
                .collect();
            if !hidden.is_empty() {
                let k = hidden.len();
                let what = format!(
                    "{k} column{} not shown: {}",
                    if k == 1 { "" } else { "s" },
                    hidden.join(", ")
                );
                match self.opts.width {
                    // What does not fit after the count gets a line of its own.
                    Some(w) if text_width(&line) + 2 + text_width(&what) > w => {
                        line.push('\n');
                        line.push_str(&cut_right(&what, w));
                    }
                    _ => {
                        line.push_str("; ");
                        line.push_str(&what);
                    }
                }
            }
        }
        line.push('\n');
        line
    }

    fn border(&self, layout: &Layout) -> String {
        let mut s = String::from("+");
        for w in &layout.widths {
            s.push_str(&"-".repeat(w + 2));
            s.push('+');
        }
        s.push('\n');
        s
    }

    fn row_line(&self, layout: &Layout, row: &[String]) -> String {
        let mut s = String::from("|");
        for (k, &i) in layout.shown.iter().enumerate() {
            let w = layout.widths[k];
            let cell = row.get(i).map(String::as_str).unwrap_or("");
            let cut = if layout.left[k] || ends_with_its_name(cell) {
                cut_left(cell, w)
            } else if layout.time[k] && text_width(cell) > w {
                cut_right(offset_part(cell), w)
            } else {
                cut_right(cell, w)
            };
            let pad = w.saturating_sub(text_width(&cut));
            s.push(' ');
            s.push_str(&cut);
            s.push_str(&" ".repeat(pad));
            s.push_str(" |");
        }
        s.push('\n');
        s
    }

    /// The head's layout widened for the tail's numbers and times, narrowing its text columns to
    /// stay within the width.
    fn tail_layout(&self, head: &Layout) -> Layout {
        let mut widths = head.widths.clone();
        for (k, &i) in head.shown.iter().enumerate() {
            if self.is_exact(i) && !head.time[k] {
                let need = self
                    .tail
                    .iter()
                    .map(|r| text_width(&r[i]))
                    .max()
                    .unwrap_or(0);
                widths[k] = widths[k].max(need.min(MAX_NUMBER_WIDTH));
            }
        }
        if let Some(total) = self.opts.width {
            let mut excess =
                (1 + widths.iter().map(|w| w + 3).sum::<usize>()).saturating_sub(total);
            for (k, &i) in head.shown.iter().enumerate().rev() {
                if excess == 0 {
                    break;
                }
                if !self.is_exact(i) && !head.time[k] {
                    let cut = widths[k].saturating_sub(MIN_WIDTH).min(excess);
                    widths[k] -= cut;
                    excess -= cut;
                }
            }
        }
        Layout {
            folded: head.folded.clone(),
            shown: head.shown.clone(),
            widths,
            left: head.left.clone(),
            time: head.time.clone(),
        }
    }

    /// Numbers, times and booleans: never cut.
    fn is_exact(&self, i: usize) -> bool {
        let t = self.schema.field(i).data_type();
        t.is_numeric() || t.is_temporal() || *t == DataType::Boolean
    }

    /// A moment shown by its unit (ISO time and offset).
    fn is_moment(&self, i: usize) -> bool {
        let f = self.schema.field(i);
        self.opts.bytes == BytesDisplay::Human
            && f.data_type().is_integer()
            && matches!(Unit::of(f), Unit::TimeNs | Unit::TimeUs)
    }

    /// Widths from the header and `rows`, fitted to the width. When the table is too wide: the
    /// columns with one value on every row of a `whole` result are folded into a line above it;
    /// columns empty in every sampled row, then identifiers (source, pid, raw times, ids), are
    /// left out until the rest fits whole or none is left; the rest are narrowed evenly (the
    /// widest first) down to their least width (numbers, times and short names whole, paths and
    /// frames to their end), and those that still do not fit are left out from the right (the
    /// same order: empty, identifiers, then the rightmost), so that the answer stays.
    fn layout_for(&self, rows: &[Vec<String>], whole: bool) -> Layout {
        let n = self.names.len();
        let natural: Vec<usize> = (0..n)
            .map(|i| {
                rows.iter()
                    .map(|r| text_width(&r[i]))
                    .chain(std::iter::once(text_width(&self.names[i])))
                    .max()
                    .unwrap_or(0)
                    .max(1)
            })
            .collect();
        let left: Vec<bool> = (0..n)
            .map(|i| {
                let column: Vec<&str> = rows.iter().map(|r| r[i].as_str()).collect();
                reads_from_the_end(self.schema.field(i).name(), &column)
            })
            .collect();
        let time: Vec<bool> = (0..n).map(|i| self.is_moment(i)).collect();
        let Some(total) = self.opts.width else {
            return Layout {
                folded: Vec::new(),
                shown: (0..n).collect(),
                widths: natural,
                left,
                time,
            };
        };
        let fits = natural.iter().map(|w| w + 3).sum::<usize>() < total;
        let constant = |i: usize| rows.iter().all(|r| r[i] == rows[0][i]);
        let mut folded: Vec<usize> = Vec::new();
        if whole && !fits && rows.len() > 1 {
            folded = (0..n).filter(|&i| constant(i)).collect();
            if folded.len() == n {
                folded.clear(); // the same row repeated: shown as it is
            }
        }
        let empty = |i: usize| rows.iter().all(|r| r[i].is_empty() || r[i] == "NULL");
        // A moment narrows to its offset from the run's start, never further; a path to `…/` and
        // its file name.
        let short: Vec<usize> = (0..n)
            .map(|i| {
                if left[i] {
                    let name = rows
                        .iter()
                        .map(|r| {
                            let tail = r[i].rsplit(['/', ' ']).next().unwrap_or_default();
                            text_width(tail) + 2
                        })
                        .max()
                        .unwrap_or(0);
                    return name.clamp(MIN_PATH_WIDTH, MAX_PATH_WIDTH).min(natural[i]);
                }
                if !time[i] {
                    return natural[i];
                }
                rows.iter()
                    .map(|r| text_width(offset_part(&r[i])))
                    .chain(std::iter::once(text_width(&self.names[i])))
                    .max()
                    .unwrap_or(1)
            })
            .collect();
        // Numbers and times are never cut (a cut number misleads), nor short names (an
        // enumeration cut to `active_…` reads as another value); paths keep room for the file
        // name; other text may narrow to MIN_WIDTH.
        let exact: Vec<bool> = (0..n)
            .map(|i| {
                (self.is_exact(i) && natural[i] <= MAX_NUMBER_WIDTH)
                    || (!left[i] && natural[i] <= MAX_NAME_WIDTH)
            })
            .collect();
        let least = |i: usize| {
            if time[i] {
                short[i]
            } else if exact[i] {
                natural[i]
            } else if left[i] {
                short[i]
            } else {
                natural[i].min(MIN_WIDTH)
            }
        };
        // Columns kept: all but the folded, then left out one by one until the least widths
        // fit (one column at least).
        let mut shown: Vec<usize> = (0..n).filter(|i| !folded.contains(i)).collect();
        let rank = |i: usize| -> u8 {
            if empty(i) && rows.len() > 1 {
                2
            } else if is_identifier(self.schema.field(i).name()) {
                1
            } else {
                0
            }
        };
        // Empty columns and identifiers go before any other column is cut...
        while shown.len() > 1 && 1 + shown.iter().map(|&i| natural[i] + 3).sum::<usize>() > total {
            let Some(k) = (0..shown.len())
                .filter(|&k| rank(shown[k]) > 0)
                .max_by_key(|&k| (rank(shown[k]), k))
            else {
                break;
            };
            shown.remove(k);
        }
        // ...then columns narrow, and those that still do not fit are left out.
        while shown.len() > 1 && 1 + shown.iter().map(|&i| least(i) + 3).sum::<usize>() > total {
            let k = (0..shown.len())
                .max_by_key(|&k| (rank(shown[k]), k))
                .expect("two columns at least");
            shown.remove(k);
        }
        // The widest cap C with sum(min(natural, max(C, least))) fitting.
        let room = total.saturating_sub(1 + 3 * shown.len());
        // A moment is whole or its offset alone.
        let at_cap = |i: usize, cap: usize| {
            if time[i] && cap < natural[i] {
                short[i]
            } else {
                natural[i].min(cap.max(least(i)))
            }
        };
        let width_at = |cap: usize| -> usize { shown.iter().map(|&i| at_cap(i, cap)).sum() };
        let widest = shown.iter().map(|&i| natural[i]).max().unwrap_or(1);
        let (mut lo, mut hi) = (0usize, widest);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if width_at(mid) <= room {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        let mut widths: Vec<usize> = shown.iter().map(|&i| at_cap(i, lo)).collect();
        // Hand the cells left over to the columns that were cut, left to right.
        let mut spare = room.saturating_sub(widths.iter().sum());
        for (k, &i) in shown.iter().enumerate() {
            if spare == 0 {
                break;
            }
            let more = natural[i].saturating_sub(widths[k]);
            let more = if time[i] && more > spare {
                0
            } else {
                more.min(spare)
            };
            widths[k] += more;
            spare -= more;
        }
        if shown.len() == 1 && widths[0] + 4 > total {
            widths[0] = total.saturating_sub(4).max(1);
        }
        let left = shown.iter().map(|&i| left[i]).collect();
        let time = shown.iter().map(|&i| time[i]).collect();
        Layout {
            folded,
            shown,
            widths,
            left,
            time,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Array, Int64Array, StringArray};
    use datafusion::arrow::datatypes::Int64Type;
    use datafusion::arrow::datatypes::{Field, Schema};
    use std::sync::Arc;

    fn batch(from: i64, to: i64) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, false),
            Field::new("source", DataType::Utf8, false),
            Field::new("text", DataType::Utf8, false),
        ]));
        let n: Int64Array = (from..to).collect();
        let s: StringArray = (from..to)
            .map(|i| {
                Some(format!(
                    "/very/long/folder/name/run_{i}/memscope_dump_{i}.csv"
                ))
            })
            .collect();
        let t: StringArray = (from..to)
            .map(|i| Some("x".repeat(i as usize % 90)))
            .collect();
        RecordBatch::try_new(schema, vec![Arc::new(n), Arc::new(s), Arc::new(t)]).unwrap()
    }

    #[test]
    fn head_and_tail_of_a_long_stream() {
        let b = batch(0, 10);
        let mut t = TableView::new(
            b.schema(),
            TableOptions {
                max_rows: 6,
                width: None,
                bytes: BytesDisplay::Raw,
                origin_ns: None,
                steps: None,
                vertical: false,
            },
        );
        let mut out = String::new();
        for i in 0..100 {
            if let Some(s) = t.push(&batch(i * 10, i * 10 + 10)).unwrap() {
                out.push_str(&s);
            }
        }
        out.push_str(&t.finish());
        assert!(out.contains("| 0 "), "{out}");
        assert!(out.contains("| 2 "), "{out}");
        assert!(!out.contains("| 3 "), "{out}");
        assert!(out.contains("| 997 ") && out.contains("| 999 "), "{out}");
        assert!(out.contains("| …"), "{out}");
        assert!(out.ends_with("1000 rows, 6 shown\n"), "{out}");
    }

    #[test]
    fn short_results_are_whole() {
        let b = batch(0, 3);
        let mut t = TableView::new(b.schema(), TableOptions::default());
        assert!(t.push(&b).unwrap().is_none());
        let out = t.finish();
        assert!(out.ends_with("\n3 rows\n"), "{out}");
        assert_eq!(out.lines().count(), 8, "{out}");
    }

    fn view(schema: SchemaRef, width: usize, vertical: bool) -> TableView {
        TableView::new(
            schema,
            TableOptions {
                max_rows: 40,
                width: Some(width),
                bytes: BytesDisplay::Human,
                origin_ns: None,
                steps: None,
                vertical,
            },
        )
    }

    /// A result too wide for the terminal keeps its answer: a column with one value on every
    /// row is said once above the table, empty columns and identifiers are left out before the
    /// figures, short names are never cut, frames are cut from the left.
    #[test]
    fn the_answer_stays_when_the_table_is_narrowed() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("source", DataType::Utf8, false),
            Field::new("pid", DataType::Int64, false),
            Field::new("state", DataType::Utf8, false),
            Field::new("user_frame", DataType::Utf8, false),
            Field::new("note", DataType::Utf8, true),
            Field::new("peak_id", DataType::Int64, false),
            Unit::Bytes.annotate(Field::new("bytes", DataType::Int64, false)),
        ]));
        let src = "/home/user/runs/job-20251205/msmemscope_2579302_ascend/device_0/dump/memscope_dump_20251205020000.csv";
        let b = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(vec![src, src, src])),
                Arc::new(Int64Array::from(vec![2579302, 2579302, 2579302])),
                Arc::new(StringArray::from(vec![
                    "active_allocated",
                    "active_pending_free",
                    "inactive",
                ])),
                Arc::new(StringArray::from(vec![
                    "/home/user/llm/train.py(96): build_model",
                    "/home/user/llm/model/attention.py(211): forward",
                    "/home/user/llm/train.py(140): step",
                ])),
                Arc::new(StringArray::from(vec![None::<&str>, None, None])),
                Arc::new(Int64Array::from(vec![7471, 5778, 110484])),
                Arc::new(Int64Array::from(vec![1 << 30, 12 << 20, 3 << 20])),
            ],
        )
        .unwrap();
        let mut t = view(schema.clone(), 72, false);
        assert!(t.push(&b).unwrap().is_none());
        let out = t.finish();
        for line in out.lines() {
            assert!(text_width(line) <= 72, "{line}\n{out}");
        }
        let first = out.lines().next().unwrap();
        assert!(first.starts_with("every row: source …"), "{out}");
        assert!(first.contains("_dump_20251205020000.csv"), "{out}");
        assert!(
            first.contains("pid 2579302") && first.contains("NULL: note"),
            "{out}"
        );
        for whole in [
            "active_allocated",
            "active_pending_free",
            "1.00 GiB",
            "12.00 MiB",
        ] {
            assert!(out.contains(&format!("| {whole} ")), "{whole}:\n{out}");
        }
        assert!(
            out.contains("build_model") && out.contains("): forward"),
            "{out}"
        );
        assert!(
            !out.contains("…  |") && !out.contains("… |"),
            "frames cut from the left:\n{out}"
        );
        // The identifier goes before the frames and the figures.
        assert!(out.contains("1 column not shown: peak_id"), "{out}");
        // A streamed result (more rows than the sample) folds nothing: later rows may differ.
        let mut t = TableView::new(
            schema,
            TableOptions {
                max_rows: 2,
                width: Some(72),
                ..TableOptions::default()
            },
        );
        let mut out = t.push(&b).unwrap().unwrap_or_default();
        out.push_str(&t.finish());
        assert!(!out.contains("every row:"), "{out}");
        assert!(out.contains("| 1.00 GiB"), "{out}");
    }

    /// `\x`: a value longer than the room wraps onto the lines below, whole.
    #[test]
    fn records_wrap_long_values() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("kind", DataType::Utf8, false),
            Field::new("evidence", DataType::Utf8, false),
        ]));
        let evidence = "device 0 PTA: 1.18 GiB reserved at the OOM, 602.75 MiB of it cached free in 14 segments; the request of 200.00 MiB found no free block of that size (largest 64.00 MiB)";
        let b = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(vec!["oom"])),
                Arc::new(StringArray::from(vec![evidence])),
            ],
        )
        .unwrap();
        let mut t = view(schema, 60, true);
        t.push(&b).unwrap();
        let out = t.finish();
        assert!(out.lines().all(|l| text_width(l) <= 60), "{out}");
        let joined: String = out
            .lines()
            .filter_map(|l| l.split_once(" | ").map(|(_, v)| v))
            .skip(1)
            .collect();
        assert_eq!(joined, evidence, "{out}");
        assert!(!out.contains('…'), "{out}");
    }

    #[test]
    fn fitted_to_the_width() {
        let b = batch(0, 50);
        for width in [40, 80, 120, 180] {
            let mut t = TableView::new(
                b.schema(),
                TableOptions {
                    max_rows: 40,
                    width: Some(width),
                    bytes: BytesDisplay::Raw,
                    origin_ns: None,
                    steps: None,
                    vertical: false,
                },
            );
            let mut out = t.push(&b).unwrap().unwrap_or_default();
            out.push_str(&t.finish());
            for line in out.lines() {
                assert!(text_width(line) <= width, "{width}: {line}");
            }
            // An identifier (the source) is left out before the other columns are cut further.
            if width <= 80 {
                assert!(out.contains("not shown: source"), "{out}");
            } else {
                assert!(out.contains("memscope_dump_"), "{out}");
            }
        }
        // Too narrow for every column: the rest are named.
        let mut t = TableView::new(
            b.schema(),
            TableOptions {
                max_rows: 40,
                width: Some(24),
                bytes: BytesDisplay::Raw,
                origin_ns: None,
                steps: None,
                vertical: false,
            },
        );
        t.push(&b).unwrap();
        let out = t.finish();
        assert!(out.contains("\n1 column not shown: sou"), "{out}");
    }

    #[test]
    fn list_cells_are_cut_to_the_width() {
        use datafusion::arrow::array::ListArray;
        let list = ListArray::from_iter_primitive::<Int64Type, _, _>(vec![Some(
            (0..300).map(Some).collect::<Vec<_>>(),
        )]);
        let schema = Arc::new(Schema::new(vec![Field::new(
            "l",
            list.data_type().clone(),
            true,
        )]));
        let b = RecordBatch::try_new(schema, vec![Arc::new(list)]).unwrap();
        let mut t = TableView::new(
            b.schema(),
            TableOptions {
                max_rows: 40,
                width: Some(80),
                bytes: BytesDisplay::Raw,
                origin_ns: None,
                steps: None,
                vertical: false,
            },
        );
        t.push(&b).unwrap();
        let out = t.finish();
        assert!(out.contains("| [0, 1, 2, "), "{out}");
        assert!(out.contains("… |"), "{out}");
        for line in out.lines() {
            assert!(text_width(line) <= 80, "{line}");
        }
    }

    #[test]
    fn records_for_line_format_and_for_one_wide_row() {
        let vertical = TableOptions {
            max_rows: 4,
            width: Some(40),
            bytes: BytesDisplay::Raw,
            origin_ns: None,
            steps: None,
            vertical: true,
        };
        let mut t = TableView::new(batch(0, 1).schema(), vertical.clone());
        let mut out = String::new();
        for i in 0..5 {
            out.push_str(
                &t.push(&batch(i * 2, i * 2 + 2))
                    .unwrap()
                    .unwrap_or_default(),
            );
        }
        out.push_str(&t.finish());
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("-[ row 1 ]---"), "{out}");
        assert_eq!(lines[1], "n      | 0", "{out}");
        // A long value wraps under itself, whole.
        assert_eq!(lines[2], "source | /very/long/folder/name/run_0/", "{out}");
        assert_eq!(lines[3], "       | memscope_dump_0.csv", "{out}");
        assert!(
            out.contains("\n…\n-[ row 9 ]") && out.contains("n      | 9\n"),
            "{out}"
        );
        assert!(out.ends_with("10 rows, 4 shown\n"), "{out}");
        // One row too wide for 40 columns: a record; with room, a table.
        for (width, record) in [(40, true), (200, false)] {
            let opts = TableOptions {
                width: Some(width),
                vertical: false,
                ..vertical.clone()
            };
            let mut t = TableView::new(batch(0, 1).schema(), opts);
            t.push(&batch(70, 71)).unwrap();
            let out = t.finish();
            assert_eq!(out.starts_with("-[ row 1 ]"), record, "{out}");
            assert!(out.ends_with("\n1 row\n"), "{out}");
        }
    }

    #[test]
    fn a_narrowed_moment_keeps_its_offset() {
        let schema = Arc::new(Schema::new(vec![
            Unit::TimeNs.annotate(Field::new("ts", DataType::Int64, false)),
            Field::new("text", DataType::Utf8, false),
        ]));
        let ts: Int64Array = (0..3)
            .map(|i| 1_764_900_000_000_000_000 + i * 1_500_000)
            .collect();
        let text: StringArray = (0..3)
            .map(|i| Some(format!("{i}{}", "y".repeat(60))))
            .collect();
        let b = RecordBatch::try_new(schema.clone(), vec![Arc::new(ts), Arc::new(text)]).unwrap();
        for (width, whole) in [(60, false), (120, true)] {
            let opts = TableOptions {
                width: Some(width),
                origin_ns: Some(1_764_900_000_000_000_000),
                steps: None,
                ..TableOptions::default()
            };
            let mut t = TableView::new(schema.clone(), opts);
            t.push(&b).unwrap();
            let out = t.finish();
            assert_eq!(
                out.contains("| 2025-12-05T02:00:00.003000000Z +0.003000 s |"),
                whole,
                "{out}"
            );
            assert!(out.contains(" +0.003000 s "), "{out}");
            assert!(out.lines().all(|l| text_width(l) <= width), "{out}");
        }
    }

    #[test]
    fn cutting() {
        assert_eq!(cut_right("abcdef", 4), "abc…");
        assert_eq!(cut_right("abc", 4), "abc");
        assert_eq!(cut_left("/a/bb/ccc/file.csv", 12), "…/file.csv");
        assert_eq!(one_line("a\nb\tc"), "a↵b c");
    }
}
