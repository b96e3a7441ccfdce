//! Table `event_counts`: what `stats` and `capabilities` count, counted once while the rows
//! are parsed (one row per source, pid, device, event and event type), so that those analyses
//! read a few rows instead of decoding every call stack of `events` (docs/performance.md).
//!
//! Each parse worker counts its own rows ([`EventCounts::observe`]); the pieces of a source are
//! merged ([`EventCounts::merge`]) and written by the ingest with the source's other tables.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Int64Array, StringArray};
use datafusion::arrow::record_batch::RecordBatch;

/// (pid, device, event, event_type) of a group.
type GroupKey = (Option<i64>, String, String, String);

/// The counts of one group. Every field is what `stats.sql` used to compute over `events`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct GroupCounts {
    pub rows: u64,
    pub first_ts: Option<i64>,
    pub last_ts: Option<i64>,
    pub first_ts_raw: Option<i64>,
    pub last_ts_raw: Option<i64>,
    /// Rows with a non-empty owner.
    pub owner_rows: u64,
    pub shadow_rows: u64,
    /// Rows whose Python stack is not empty after trimming spaces (SQL `trim`).
    pub py_stack_rows: u64,
    pub c_stack_rows: u64,
    /// Rows with a `used` or `total` counter.
    pub counter_rows: u64,
    /// Rows with `device_used >= 0`.
    pub device_used_rows: u64,
    /// Sum of the Attr size (wrapping, as SQL SUM on BIGINT); NULL when no row has one.
    pub size_bytes: Option<i64>,
}

fn min_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) | (None, x) => x,
    }
}

fn max_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) | (None, x) => x,
    }
}

fn add_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.wrapping_add(y)),
        (x, None) | (None, x) => x,
    }
}

impl GroupCounts {
    fn add(&mut self, o: &GroupCounts) {
        self.rows += o.rows;
        self.first_ts = min_opt(self.first_ts, o.first_ts);
        self.last_ts = max_opt(self.last_ts, o.last_ts);
        self.first_ts_raw = min_opt(self.first_ts_raw, o.first_ts_raw);
        self.last_ts_raw = max_opt(self.last_ts_raw, o.last_ts_raw);
        self.owner_rows += o.owner_rows;
        self.shadow_rows += o.shadow_rows;
        self.py_stack_rows += o.py_stack_rows;
        self.c_stack_rows += o.c_stack_rows;
        self.counter_rows += o.counter_rows;
        self.device_used_rows += o.device_used_rows;
        self.size_bytes = add_opt(self.size_bytes, o.size_bytes);
    }
}

/// The values of one row that the counts read.
pub struct Observed<'a> {
    pub pid: Option<i64>,
    pub device: &'a str,
    pub event: &'a str,
    pub event_type: &'a str,
    pub ts: Option<i64>,
    pub ts_raw: Option<i64>,
    pub has_owner: bool,
    pub shadow: bool,
    pub stack_py: Option<&'a str>,
    pub stack_c: Option<&'a str>,
    pub has_counter: bool,
    pub device_used: Option<i64>,
    pub size: Option<i64>,
}

/// The groups of one source (or of one piece of it), in first-seen order.
#[derive(Debug, Default, Clone)]
pub struct EventCounts {
    groups: Vec<(GroupKey, GroupCounts)>,
    /// Hash of the borrowed key → indices into `groups` (no allocation per row).
    index: HashMap<u64, Vec<usize>>,
    hasher: foldhash::fast::FixedState,
}

fn non_blank(s: Option<&str>) -> bool {
    s.is_some_and(|s| !s.trim_matches(' ').is_empty())
}

impl EventCounts {
    fn hash(&self, pid: Option<i64>, device: &str, event: &str, event_type: &str) -> u64 {
        self.hasher.hash_one((pid, device, event, event_type))
    }

    fn group(&mut self, pid: Option<i64>, device: &str, event: &str, event_type: &str) -> usize {
        let h = self.hash(pid, device, event, event_type);
        let slot = self.index.entry(h).or_default();
        for &i in slot.iter() {
            let k = &self.groups[i].0;
            if k.0 == pid && k.1 == device && k.2 == event && k.3 == event_type {
                return i;
            }
        }
        let i = self.groups.len();
        slot.push(i);
        self.groups.push((
            (pid, device.into(), event.into(), event_type.into()),
            GroupCounts::default(),
        ));
        i
    }

    /// Counts one row.
    pub fn observe(&mut self, r: &Observed) {
        let i = self.group(r.pid, r.device, r.event, r.event_type);
        let g = &mut self.groups[i].1;
        g.rows += 1;
        g.first_ts = min_opt(g.first_ts, r.ts);
        g.last_ts = max_opt(g.last_ts, r.ts);
        g.first_ts_raw = min_opt(g.first_ts_raw, r.ts_raw);
        g.last_ts_raw = max_opt(g.last_ts_raw, r.ts_raw);
        g.owner_rows += r.has_owner as u64;
        g.shadow_rows += r.shadow as u64;
        g.py_stack_rows += non_blank(r.stack_py) as u64;
        g.c_stack_rows += non_blank(r.stack_c) as u64;
        g.counter_rows += r.has_counter as u64;
        g.device_used_rows += r.device_used.is_some_and(|v| v >= 0) as u64;
        g.size_bytes = add_opt(g.size_bytes, r.size);
    }

    /// Adds the counts of another piece of the same source.
    pub fn merge(&mut self, other: &EventCounts) {
        for ((pid, device, event, event_type), c) in &other.groups {
            let i = self.group(*pid, device, event, event_type);
            self.groups[i].1.add(c);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The groups as an `event_counts` batch for `source`, ordered by pid, device, event and
    /// event type.
    pub fn batch(&self, source: &str) -> RecordBatch {
        let mut order: Vec<&(GroupKey, GroupCounts)> = self.groups.iter().collect();
        order.sort_by(|a, b| a.0.cmp(&b.0));
        let text = |f: fn(&GroupKey) -> &str| -> ArrayRef {
            Arc::new(StringArray::from_iter_values(
                order.iter().map(|(k, _)| f(k)),
            ))
        };
        let int = |f: fn(&GroupCounts) -> Option<i64>| -> ArrayRef {
            Arc::new(Int64Array::from_iter(order.iter().map(|(_, c)| f(c))))
        };
        let count = |f: fn(&GroupCounts) -> u64| -> ArrayRef {
            Arc::new(Int64Array::from_iter_values(
                order.iter().map(|(_, c)| f(c) as i64),
            ))
        };
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("source", crate::schema::source_column(source, order.len())),
            (
                "pid",
                Arc::new(Int64Array::from_iter(order.iter().map(|(k, _)| k.0))),
            ),
            ("device", text(|k| &k.1)),
            ("event", text(|k| &k.2)),
            ("event_type", text(|k| &k.3)),
            ("first_ts", int(|c| c.first_ts)),
            ("last_ts", int(|c| c.last_ts)),
            ("first_ts_raw", int(|c| c.first_ts_raw)),
            ("last_ts_raw", int(|c| c.last_ts_raw)),
            ("size_bytes", int(|c| c.size_bytes)),
            ("rows", count(|c| c.rows)),
            ("owner_rows", count(|c| c.owner_rows)),
            ("shadow_rows", count(|c| c.shadow_rows)),
            ("py_stack_rows", count(|c| c.py_stack_rows)),
            ("c_stack_rows", count(|c| c.c_stack_rows)),
            ("counter_rows", count(|c| c.counter_rows)),
            ("device_used_rows", count(|c| c.device_used_rows)),
        ];
        crate::schema::event_counts()
            .batch(columns)
            .expect("every event_counts column is given once")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row<'a>(event: &'a str, ts: i64, stack: Option<&'a str>, size: Option<i64>) -> Observed<'a> {
        Observed {
            pid: Some(7),
            device: "0",
            event,
            event_type: "PTA",
            ts: Some(ts * 1000),
            ts_raw: Some(ts),
            has_owner: event == "MALLOC",
            shadow: false,
            stack_py: stack,
            stack_c: None,
            has_counter: true,
            device_used: Some(-1),
            size,
        }
    }

    #[test]
    fn pieces_merge_to_the_counts_of_the_whole() {
        let rows = [
            row("MALLOC", 5, Some("a.py(1)"), Some(512)),
            row("FREE", 3, Some("  "), Some(-512)),
            row("MALLOC", 9, None, None),
            row("MALLOC", 1, Some(""), Some(1024)),
        ];
        let mut whole = EventCounts::default();
        rows.iter().for_each(|r| whole.observe(r));
        let (mut a, mut b) = (EventCounts::default(), EventCounts::default());
        rows[..2].iter().for_each(|r| a.observe(r));
        rows[2..].iter().for_each(|r| b.observe(r));
        a.merge(&b);
        let m = |c: &EventCounts| {
            let mut g = c.groups.clone();
            g.sort_by(|x, y| x.0.cmp(&y.0));
            g
        };
        assert_eq!(m(&a), m(&whole));
        let malloc = &whole.groups[0].1;
        assert_eq!(whole.groups[0].0 .2, "MALLOC");
        assert_eq!(
            (
                malloc.rows,
                malloc.first_ts_raw,
                malloc.last_ts,
                malloc.py_stack_rows
            ),
            (3, Some(1), Some(9000), 1)
        );
        assert_eq!(
            (
                malloc.size_bytes,
                malloc.owner_rows,
                malloc.device_used_rows
            ),
            (Some(1536), 3, 0)
        );
        let free = &whole.groups[1].1;
        assert_eq!(
            (free.rows, free.py_stack_rows, free.size_bytes),
            (1, 0, Some(-512))
        );
        let batch = whole.batch("d.csv");
        assert_eq!(batch.num_rows(), 2);
    }
}
