//! Table `steps`, found at ingest from the step markers of each (pid, device)
//! (docs/formats/memscope.md §5.8): SYSTEM STEP rows, else MSTX ranges whose name is a step
//! marker, else MSTX marks whose whole name is a step marker.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BooleanBuilder, Int64Builder, StringBuilder, UInt32Builder, UInt64Builder,
};
use datafusion::arrow::record_batch::RecordBatch;

use crate::schema;

/// The kinds of marker rows a step can come from, in the order they are preferred.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Origin {
    SystemStep,
    MstxRange,
    MstxMark,
}

impl Origin {
    fn name(self) -> &'static str {
        match self {
            Origin::SystemStep => "SYSTEM_STEP",
            Origin::MstxRange => "MSTX_RANGE",
            Origin::MstxMark => "MSTX_MARK",
        }
    }
}

/// What a step marker name says: the step number it carries, and whether it starts or ends a step.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct StepName {
    pub number: Option<i64>,
    pub end: bool,
}

/// Reads a marker name as a step marker when the whole name is one (case-insensitive, after
/// trimming, and after G1's `[mstx]: mstxMarkA :` prefix): an optional `train`/`training`, the
/// word `step`, `iter` or `iteration`, an optional number, and an optional `start`/`begin` or
/// `end`/`stop`; words may be joined by spaces, `_`, `-`, `:`, `#`, `=` or `.`, or not at all
/// (`step12`). `step start`, `Step 3`, `step_3_end`, `iteration=7` are step markers;
/// `step 3 optimizer.step`, `training start`, `stepwise` are not.
pub fn step_name(name: &str) -> Option<StepName> {
    let mut s = name.trim();
    if let Some(rest) = s.strip_prefix("[mstx]:") {
        s = rest.split_once(':').map_or(rest, |(_, msg)| msg);
    }
    let s = s
        .trim_matches(|c: char| c.is_whitespace() || "-=*[]()<>".contains(c))
        .to_ascii_lowercase();
    // words: runs of letters or of digits
    let mut words: Vec<&str> = Vec::new();
    let mut start = None;
    for (i, c) in s.char_indices() {
        if !c.is_ascii_alphanumeric() {
            if !" _-:#=.".contains(c) {
                return None;
            }
            if let Some(st) = start.take() {
                words.push(&s[st..i]);
            }
            continue;
        }
        match start {
            Some(st) => {
                let prev = s[..i].chars().next_back().unwrap_or(' ');
                if prev.is_ascii_alphabetic() != c.is_ascii_alphabetic() {
                    words.push(&s[st..i]);
                    start = Some(i);
                }
            }
            None => start = Some(i),
        }
    }
    if let Some(st) = start {
        words.push(&s[st..]);
    }
    let mut w = words.as_slice();
    if let [first, rest @ ..] = w {
        if matches!(*first, "train" | "training") {
            w = rest;
        }
    }
    let [keyword, rest @ ..] = w else {
        return None;
    };
    if !matches!(*keyword, "step" | "iter" | "iteration") {
        return None;
    }
    let mut w = rest;
    let mut number = None;
    if let [n, rest @ ..] = w {
        if n.bytes().all(|b| b.is_ascii_digit()) {
            number = Some(n.parse::<i64>().ok()?);
            w = rest;
        }
    }
    let end = match w {
        [] => false,
        [edge] if matches!(*edge, "start" | "begin") => false,
        [edge] if matches!(*edge, "end" | "stop") => true,
        _ => return None,
    };
    Some(StepName { number, end })
}

/// A row that may delimit steps.
#[derive(Clone, Debug)]
enum Kind {
    /// SYSTEM STEP: the Name is the step number.
    SystemStep,
    RangeStart(StepName),
    RangeEnd,
    Mark(StepName),
}

#[derive(Clone, Debug)]
struct MarkerRow {
    ts: i64,
    row_idx: u64,
    kind: Kind,
    name: String,
}

/// One step as written to the table.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    pub step: i64,
    /// 1-based position among the steps of its process and device, in time order.
    pub k: u32,
    pub origin: &'static str,
    pub name: String,
    pub start_ts: i64,
    pub end_ts: Option<i64>,
    pub start_row: u64,
}

/// Collects the marker rows of one source during the derive pass.
#[derive(Default)]
pub struct StepMarkers {
    by_series: BTreeMap<(Option<i64>, String), Vec<MarkerRow>>,
}

impl StepMarkers {
    /// Offers one SYSTEM or MSTX row; rows that cannot delimit a step are ignored.
    pub fn push(
        &mut self,
        pid: Option<i64>,
        device: &str,
        event: &str,
        event_type: &str,
        name: Option<&str>,
        ts: i64,
        row_idx: u64,
    ) {
        let text = name.unwrap_or("");
        let kind = match (event, event_type) {
            ("SYSTEM", "STEP") => Kind::SystemStep,
            ("MSTX", "Range_end") => Kind::RangeEnd,
            ("MSTX", "Range_start") => match step_name(text) {
                Some(n) if !n.end => Kind::RangeStart(n),
                _ => return,
            },
            ("MSTX", "Mark") => match step_name(text) {
                Some(n) => Kind::Mark(n),
                None => return,
            },
            _ => return,
        };
        self.by_series
            .entry((pid, device.to_string()))
            .or_default()
            .push(MarkerRow {
                ts,
                row_idx,
                kind,
                name: text.to_string(),
            });
    }

    /// The steps of every (pid, device), in (pid, device, start) order.
    pub fn finish(self) -> Vec<((Option<i64>, String), Vec<Step>)> {
        self.by_series
            .into_iter()
            .map(|(key, mut rows)| {
                rows.sort_by_key(|r| (r.ts, r.row_idx));
                (key, steps_of(&rows))
            })
            .filter(|(_, steps)| !steps.is_empty())
            .collect()
    }
}

/// The steps of one (pid, device) from its marker rows in time order.
fn steps_of(rows: &[MarkerRow]) -> Vec<Step> {
    let origin_of = |r: &MarkerRow| match r.kind {
        Kind::SystemStep => Some(Origin::SystemStep),
        Kind::RangeStart(_) => Some(Origin::MstxRange),
        Kind::Mark(n) if !n.end => Some(Origin::MstxMark),
        _ => None,
    };
    let Some(origin) = rows.iter().filter_map(origin_of).min() else {
        return Vec::new();
    };
    let starts: Vec<usize> = (0..rows.len())
        .filter(|&i| origin_of(&rows[i]) == Some(origin))
        .collect();
    let mut steps = Vec::with_capacity(starts.len());
    for (n, &i) in starts.iter().enumerate() {
        let start = &rows[i];
        let next = starts.get(n + 1).copied().unwrap_or(rows.len());
        let between = &rows[i + 1..next];
        let number = match &start.kind {
            Kind::SystemStep => start.name.trim().parse::<i64>().ok(),
            Kind::RangeStart(s) | Kind::Mark(s) => s.number,
            Kind::RangeEnd => None,
        };
        let end = match origin {
            // the first Range_end of the step; for a named range, the Range_end of the same name
            Origin::SystemStep | Origin::MstxRange => {
                let ends = || between.iter().filter(|r| matches!(r.kind, Kind::RangeEnd));
                let same_name = ends().find(|r| {
                    origin == Origin::MstxRange && !r.name.trim().is_empty() && r.name == start.name
                });
                same_name.or_else(|| ends().next())
            }
            Origin::MstxMark => between
                .iter()
                .find(|r| matches!(r.kind, Kind::Mark(s) if s.end)),
        };
        steps.push(Step {
            step: number.unwrap_or(n as i64 + 1),
            k: n as u32 + 1,
            origin: origin.name(),
            name: start.name.clone(),
            start_ts: start.ts,
            end_ts: end.map(|r| r.ts).or_else(|| rows.get(next).map(|r| r.ts)),
            start_row: start.row_idx,
        });
    }
    steps
}

/// The steps of one source by (pid, device), to place rows in them ([`StepIndex::place`]).
#[derive(Default)]
pub struct StepIndex {
    by_pid: std::collections::HashMap<Option<i64>, Vec<(String, Vec<Step>)>>,
}

impl StepIndex {
    pub fn new(steps: &[((Option<i64>, String), Vec<Step>)]) -> StepIndex {
        let mut index = StepIndex::default();
        for ((pid, device), list) in steps {
            index
                .by_pid
                .entry(*pid)
                .or_default()
                .push((device.clone(), list.clone()));
        }
        index
    }

    /// The steps of (pid, device) in time order (`k` = 1, 2, ...); empty when it has none.
    pub fn of(&self, pid: Option<i64>, device: &str) -> &[Step] {
        self.find(pid, device).unwrap_or(&[])
    }

    fn find(&self, pid: Option<i64>, device: &str) -> Option<&[Step]> {
        let list = self.by_pid.get(&pid)?;
        Some(&list.iter().find(|(d, _)| d == device)?.1)
    }

    /// Where a row at `ts` of (pid, device) lies: `k`, the 1-based position of the latest step
    /// started at or before it (0 before the first), and the number of that step when the row is
    /// inside it (`ts <= end_ts`, or the step is open). `None` when the process and device have
    /// no steps or the row has no time.
    pub fn place(
        &self,
        pid: Option<i64>,
        device: &str,
        ts: Option<i64>,
    ) -> Option<(u32, Option<i64>)> {
        let ts = ts?;
        let list = self.find(pid, device)?;
        let k = list.partition_point(|s| s.start_ts <= ts);
        let inside = k
            .checked_sub(1)
            .map(|i| &list[i])
            .filter(|s| s.end_ts.is_none_or(|e| ts <= e))
            .map(|s| s.step);
        Some((k as u32, inside))
    }
}

/// The `steps` rows of one source.
pub fn steps_batch(source: &str, steps: &[((Option<i64>, String), Vec<Step>)]) -> RecordBatch {
    let mut b_source = StringBuilder::new();
    let mut pid = Int64Builder::new();
    let mut device = StringBuilder::new();
    let mut step = Int64Builder::new();
    let mut step_k = UInt32Builder::new();
    let mut origin = StringBuilder::new();
    let mut name = StringBuilder::new();
    let mut start_ts = Int64Builder::new();
    let mut end_ts = Int64Builder::new();
    let mut duration = Int64Builder::new();
    let mut complete = BooleanBuilder::new();
    let mut start_row = UInt64Builder::new();
    for ((p, d), list) in steps {
        for s in list {
            b_source.append_value(source);
            pid.append_option(*p);
            device.append_value(d);
            step.append_value(s.step);
            step_k.append_value(s.k);
            origin.append_value(s.origin);
            name.append_value(&s.name);
            start_ts.append_value(s.start_ts);
            end_ts.append_option(s.end_ts);
            duration.append_option(s.end_ts.map(|e| e - s.start_ts));
            complete.append_value(s.end_ts.is_some());
            start_row.append_value(s.start_row);
        }
    }
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("source", Arc::new(b_source.finish()) as ArrayRef),
        ("pid", Arc::new(pid.finish())),
        ("device", Arc::new(device.finish())),
        ("step", Arc::new(step.finish())),
        ("step_k", Arc::new(step_k.finish())),
        ("origin", Arc::new(origin.finish())),
        ("name", Arc::new(name.finish())),
        ("start_ts", Arc::new(start_ts.finish())),
        ("end_ts", Arc::new(end_ts.finish())),
        ("duration_ns", Arc::new(duration.finish())),
        ("complete", Arc::new(complete.finish())),
        ("start_row", Arc::new(start_row.finish())),
    ];
    schema::steps()
        .batch(columns)
        .expect("every steps column is given once")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(number: Option<i64>, end: bool) -> Option<StepName> {
        Some(StepName { number, end })
    }

    #[test]
    fn step_names_are_whole_names() {
        assert_eq!(step_name("step start"), n(None, false));
        assert_eq!(step_name("  Step 3 "), n(Some(3), false));
        assert_eq!(step_name("step_12_end"), n(Some(12), true));
        assert_eq!(step_name("step12"), n(Some(12), false));
        assert_eq!(step_name("iteration=7"), n(Some(7), false));
        assert_eq!(step_name("train step 4 begin"), n(Some(4), false));
        assert_eq!(step_name("----step 5----"), n(Some(5), false));
        assert_eq!(step_name("[mstx]: mstxMarkA :step 2 "), n(Some(2), false));
        assert_eq!(step_name("step 3 optimizer.step"), None);
        assert_eq!(step_name("optimizer.step"), None);
        assert_eq!(
            step_name("[mstx]: mstxMarkA :------training start----- "),
            None
        );
        assert_eq!(step_name("stepwise"), None);
        assert_eq!(step_name("step (3)"), None);
        assert_eq!(step_name("第3步"), None);
        assert_eq!(step_name("forward"), None);
        assert_eq!(step_name(""), None);
        assert_eq!(step_name("step 99999999999999999999999"), None);
    }

    struct Feed(StepMarkers, u64);

    impl Feed {
        fn row(&mut self, event: &str, ty: &str, name: &str, ts: i64) -> &mut Self {
            self.0.push(Some(7), "0", event, ty, Some(name), ts, self.1);
            self.1 += 1;
            self
        }
        fn steps(self) -> Vec<(i64, &'static str, i64, Option<i64>)> {
            let all = self.0.finish();
            assert!(all.len() <= 1);
            all.into_iter()
                .flat_map(|(_, s)| s)
                .map(|s| (s.step, s.origin, s.start_ts, s.end_ts))
                .collect()
        }
    }

    fn feed() -> Feed {
        Feed(StepMarkers::default(), 0)
    }

    #[test]
    fn named_ranges_take_their_number_and_marks_that_mention_step_do_not_count() {
        let mut f = feed();
        for k in 1..=3 {
            let t = k * 100;
            f.row("MSTX", "Range_start", &format!("step {k}"), t)
                .row("MSTX", "Mark", &format!("step {k} optimizer.step"), t + 10)
                .row("MSTX", "Range_start", "forward", t + 20)
                .row("MSTX", "Range_end", "forward", t + 30)
                .row("MSTX", "Range_end", &format!("step {k}"), t + 50);
        }
        let want: Vec<_> = (1..=3)
            .map(|k| (k, "MSTX_RANGE", k * 100, Some(k * 100 + 50)))
            .collect();
        assert_eq!(f.steps(), want);
    }

    #[test]
    fn system_steps_win_over_ranges_and_marks() {
        let mut f = feed();
        f.row("MSTX", "Mark", "step 1", 5)
            .row("SYSTEM", "STEP", "4", 10)
            .row("MSTX", "Range_start", "step start", 11)
            .row("MSTX", "Range_end", "Range end from id 1", 40)
            .row("SYSTEM", "STEP", "5", 50)
            .row("MSTX", "Range_start", "step start", 51);
        assert_eq!(
            f.steps(),
            vec![
                (4, "SYSTEM_STEP", 10, Some(40)),
                (5, "SYSTEM_STEP", 50, None)
            ]
        );
    }

    #[test]
    fn unnamed_step_ranges_are_numbered_in_order_and_end_at_the_first_range_end() {
        let mut f = feed();
        f.row("MSTX", "Range_start", "step start", 10)
            .row("MSTX", "Range_end", "Range end from id 1", 20)
            .row("MSTX", "Range_start", "step start", 30)
            .row("MSTX", "Range_start", "step start", 60);
        assert_eq!(
            f.steps(),
            vec![
                (1, "MSTX_RANGE", 10, Some(20)),
                (2, "MSTX_RANGE", 30, Some(60)),
                (3, "MSTX_RANGE", 60, None)
            ]
        );
    }

    #[test]
    fn marks_start_steps_and_end_marks_end_them() {
        let mut f = feed();
        f.row("MSTX", "Mark", "step 1 start", 10)
            .row("MSTX", "Mark", "step 1 end", 20)
            .row("MSTX", "Mark", "step 2 start", 30)
            .row("MSTX", "Mark", "step 3", 40)
            .row("MSTX", "Mark", "training start", 45);
        assert_eq!(
            f.steps(),
            vec![
                (1, "MSTX_MARK", 10, Some(20)),
                (2, "MSTX_MARK", 30, Some(40)),
                (3, "MSTX_MARK", 40, None)
            ]
        );
    }

    #[test]
    fn rows_are_placed_in_the_latest_step_started_until_it_ends() {
        let mut f = feed();
        f.row("SYSTEM", "STEP", "1", 10)
            .row("MSTX", "Range_end", "", 20)
            .row("SYSTEM", "STEP", "2", 30);
        let index = StepIndex::new(&f.0.finish());
        let at = |ts| index.place(Some(7), "0", Some(ts));
        assert_eq!(at(5), Some((0, None)));
        assert_eq!(at(10), Some((1, Some(1))));
        assert_eq!(at(20), Some((1, Some(1))));
        assert_eq!(at(25), Some((1, None)));
        assert_eq!(at(30), Some((2, Some(2))));
        assert_eq!(at(99), Some((2, Some(2))));
        assert_eq!(index.place(Some(7), "1", Some(10)), None);
        assert_eq!(index.place(Some(8), "0", Some(10)), None);
        assert_eq!(index.place(Some(7), "0", None), None);
    }

    #[test]
    fn positions_count_the_steps_whatever_their_numbers() {
        let mut f = feed();
        f.row("SYSTEM", "STEP", "4", 10)
            .row("SYSTEM", "STEP", "9", 20);
        let steps: Vec<(i64, u32)> = f.0.finish()[0].1.iter().map(|s| (s.step, s.k)).collect();
        assert_eq!(steps, vec![(4, 1), (9, 2)]);
    }

    #[test]
    fn no_step_markers_no_steps() {
        let mut f = feed();
        f.row("MSTX", "Mark", "training start", 1)
            .row("MSTX", "Range_end", "x", 2);
        assert_eq!(f.steps(), vec![]);
    }
}
