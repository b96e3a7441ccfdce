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

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int64Type, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::util::display::ArrayFormatter;

use memq_core::error::Result;

use super::{is_byte_column, options, BytesDisplay};

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

/// Numbers up to this wide are never cut.
const MAX_NUMBER_WIDTH: usize = 24;

/// How a table is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableOptions {
    /// Rows shown at most (head and tail); 0 shows every row.
    pub max_rows: usize,
    /// The terminal width; `None` does not fit the table to a width.
    pub width: Option<usize>,
    pub bytes: BytesDisplay,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            max_rows: DEFAULT_MAX_ROWS,
            width: None,
            bytes: BytesDisplay::Human,
        }
    }
}

/// The columns shown and their widths, fixed once the first rows are seen.
struct Layout {
    shown: Vec<usize>,
    widths: Vec<usize>,
    /// Cut from the left (paths).
    left: Vec<bool>,
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

/// The cells of rows `from..to` of `batch` as text.
fn cells(
    batch: &RecordBatch,
    from: usize,
    to: usize,
    bytes: BytesDisplay,
) -> Result<Vec<Vec<String>>> {
    let opts = options();
    let schema = batch.schema();
    let mut columns: Vec<Vec<String>> = Vec::with_capacity(batch.num_columns());
    for (field, col) in schema.fields().iter().zip(batch.columns()) {
        let slice = col.slice(from, to - from);
        let mut texts = Vec::with_capacity(to - from);
        if bytes == BytesDisplay::Human && is_byte_column(field) {
            let ints = cast(&slice, &DataType::Int64)?;
            for v in ints.as_primitive::<Int64Type>().iter() {
                texts.push(match v {
                    Some(v) => memq_core::function::format_bytes(v),
                    None => "NULL".to_string(),
                });
            }
        } else {
            let fmt = ArrayFormatter::try_new(slice.as_ref(), &opts)?;
            for i in 0..slice.len() {
                texts.push(one_line(&fmt.value(i).to_string()));
            }
        }
        columns.push(texts);
    }
    Ok((0..to - from)
        .map(|r| columns.iter().map(|c| c[r].clone()).collect())
        .collect())
}

impl TableView {
    pub fn new(schema: SchemaRef, opts: TableOptions) -> TableView {
        let names = schema.fields().iter().map(|f| one_line(f.name())).collect();
        TableView {
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
            self.sample.extend(cells(batch, 0, take, self.opts.bytes)?);
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
                for row in cells(batch, at, n, self.opts.bytes)? {
                    text.push_str(&self.row_line(layout, &row));
                }
                out.get_or_insert_with(String::new).push_str(&text);
            } else {
                let keep = self.tail_rows();
                let from = n.saturating_sub(keep).max(at);
                for row in cells(batch, from, n, self.opts.bytes)? {
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
        let layout = self.layout_for(&self.sample);
        let mut text = self.border(&layout);
        text.push_str(&self.row_line(&layout, &self.names));
        text.push_str(&self.border(&layout));
        let head = if self.opts.max_rows == 0 {
            self.sample.len()
        } else {
            self.head_rows().min(self.sample.len())
        };
        for row in &self.sample[..head] {
            text.push_str(&self.row_line(&layout, row));
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
            let layout = self.layout_for(&self.sample);
            text.push_str(&self.border(&layout));
            text.push_str(&self.row_line(&layout, &self.names));
            text.push_str(&self.border(&layout));
            for row in &self.sample {
                text.push_str(&self.row_line(&layout, row));
            }
            self.head_printed = self.sample.len();
            self.layout = Some(layout);
        } else {
            let layout = self.layout.as_ref().expect("layout fixed");
            let shown = self.head_printed as u64 + self.tail.len() as u64;
            if shown < self.rows {
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
            if tail_layout.widths != layout.widths {
                text.push_str(&self.border(&tail_layout));
            }
            for row in &self.tail {
                text.push_str(&self.row_line(&tail_layout, row));
            }
            self.layout = Some(tail_layout);
        }
        let layout = self.layout.as_ref().expect("layout fixed");
        text.push_str(&self.border(layout));
        text.push_str(&self.footer(false));
        text
    }

    /// What ends the table when the rows stop coming (Ctrl-C): the bottom border (when the top
    /// was printed) and how many rows had arrived.
    pub fn interrupted(&self) -> String {
        let mut text = String::new();
        if let Some(layout) = &self.layout {
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
        if let Some(layout) = &self.layout {
            let hidden: Vec<&str> = (0..self.names.len())
                .filter(|i| !layout.shown.contains(i))
                .map(|i| self.names[i].as_str())
                .collect();
            if !hidden.is_empty() {
                let k = hidden.len();
                line.push_str(&format!(
                    "; {k} column{} not shown",
                    if k == 1 { "" } else { "s" }
                ));
                let mut names = format!(": {}", hidden.join(", "));
                if let Some(w) = self.opts.width {
                    let room = w.saturating_sub(text_width(&line));
                    names = if room >= 8 {
                        cut_right(&names, room)
                    } else {
                        String::new()
                    };
                }
                line.push_str(&names);
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
            let cut = if layout.left[k] {
                cut_left(cell, w)
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
            if self.is_exact(i) {
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
                if !self.is_exact(i) {
                    let cut = widths[k].saturating_sub(MIN_WIDTH).min(excess);
                    widths[k] -= cut;
                    excess -= cut;
                }
            }
        }
        Layout {
            shown: head.shown.clone(),
            widths,
            left: head.left.clone(),
        }
    }

    /// Numbers, times and booleans: never cut.
    fn is_exact(&self, i: usize) -> bool {
        let t = self.schema.field(i).data_type();
        t.is_numeric() || t.is_temporal() || *t == DataType::Boolean
    }

    /// Widths from the header and `rows`, fitted to the width: columns narrowed evenly (the widest
    /// first) down to MIN_WIDTH, then those that still do not fit left out from the right.
    fn layout_for(&self, rows: &[Vec<String>]) -> Layout {
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
            .map(|i| is_path_column(self.schema.field(i).name()))
            .collect();
        let Some(total) = self.opts.width else {
            return Layout {
                shown: (0..n).collect(),
                widths: natural,
                left,
            };
        };
        // Numbers and times are never cut (a cut number misleads); paths keep room for the
        // file name; other text may narrow to MIN_WIDTH.
        let exact: Vec<bool> = (0..n)
            .map(|i| self.is_exact(i) && natural[i] <= MAX_NUMBER_WIDTH)
            .collect();
        let least = |i: usize| {
            if exact[i] {
                natural[i]
            } else if left[i] {
                natural[i].min(MIN_PATH_WIDTH)
            } else {
                natural[i].min(MIN_WIDTH)
            }
        };
        // Columns kept: from the left while their narrowest widths fit.
        let mut shown = Vec::new();
        let mut used = 1;
        for i in 0..n {
            let need = least(i) + 3;
            if used + need > total && !shown.is_empty() {
                break;
            }
            used += need;
            shown.push(i);
        }
        // The widest cap C with sum(min(natural, max(C, least))) fitting.
        let room = total.saturating_sub(1 + 3 * shown.len());
        let width_at = |cap: usize| -> usize {
            shown
                .iter()
                .map(|&i| natural[i].min(cap.max(least(i))))
                .sum()
        };
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
        let mut widths: Vec<usize> = shown
            .iter()
            .map(|&i| natural[i].min(lo.max(least(i))))
            .collect();
        // Hand the cells left over to the columns that were cut, left to right.
        let mut spare = room.saturating_sub(widths.iter().sum());
        for (k, &i) in shown.iter().enumerate() {
            if spare == 0 {
                break;
            }
            let more = natural[i].saturating_sub(widths[k]).min(spare);
            widths[k] += more;
            spare -= more;
        }
        if shown.len() == 1 && widths[0] + 4 > total {
            widths[0] = total.saturating_sub(4).max(1);
        }
        let left = shown.iter().map(|&i| left[i]).collect();
        Layout {
            shown,
            widths,
            left,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, StringArray};
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
                },
            );
            let mut out = t.push(&b).unwrap().unwrap_or_default();
            out.push_str(&t.finish());
            for line in out.lines() {
                assert!(text_width(line) <= width, "{width}: {line}");
            }
            if width <= 80 {
                assert!(
                    out.contains("| …/") && out.contains("memscope_dump_"),
                    "{out}"
                );
            }
        }
        // Too narrow for every column: the rest are named.
        let mut t = TableView::new(
            b.schema(),
            TableOptions {
                max_rows: 40,
                width: Some(24),
                bytes: BytesDisplay::Raw,
            },
        );
        t.push(&b).unwrap();
        let out = t.finish();
        assert!(
            out.contains("column not shown: text") || out.contains("columns not shown"),
            "{out}"
        );
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
    fn cutting() {
        assert_eq!(cut_right("abcdef", 4), "abc…");
        assert_eq!(cut_right("abc", 4), "abc");
        assert_eq!(cut_left("/a/bb/ccc/file.csv", 12), "…/file.csv");
        assert_eq!(one_line("a\nb\tc"), "a↵b c");
    }
}
