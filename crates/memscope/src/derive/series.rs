//! A series of `curve`: one pool of one process on one device, (pid, device, pool). The
//! passes that fold the curve ([`crate::derive::curve`], [`crate::derive::tiles`], [`crate::derive::frag`]) keep a state
//! per series and read the staging rows of [`crate::derive::curve`] through [`StagingCols`].

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Int64Array, PrimitiveArray, StringArray,
};
use datafusion::arrow::datatypes::{Int64Type, UInt64Type};
use datafusion::arrow::record_batch::RecordBatch;

/// A series: (pid, device, pool).
pub type Series = (Option<i64>, String, String);

/// Values by (name, pid, device, pool) — a name being an owner, or the pool itself — looked up
/// without allocating: by name first, then among the few series that name appears in.
pub struct ByName<T> {
    by_name: HashMap<String, Vec<Named<T>>>,
}

/// The value of one (name, pid, device, pool) of a [`ByName`].
pub struct Named<T> {
    pub pid: Option<i64>,
    pub device: String,
    pub pool: String,
    pub value: T,
}

impl<T> Default for ByName<T> {
    fn default() -> Self {
        ByName {
            by_name: HashMap::new(),
        }
    }
}

impl<T: Default> ByName<T> {
    /// Applies `f` to the value of (name, pid, device, pool), a new default one if need be.
    pub fn with<R>(
        &mut self,
        name: &str,
        (pid, device, pool): (Option<i64>, &str, &str),
        f: impl FnOnce(&mut T) -> R,
    ) -> R {
        let list = match self.by_name.get_mut(name) {
            Some(l) => l,
            None => self.by_name.entry(name.to_string()).or_default(),
        };
        match list
            .iter_mut()
            .find(|e| e.pid == pid && e.device == device && e.pool == pool)
        {
            Some(e) => f(&mut e.value),
            None => {
                let mut e = Named {
                    pid,
                    device: device.to_string(),
                    pool: pool.to_string(),
                    value: T::default(),
                };
                let r = f(&mut e.value);
                list.push(e);
                r
            }
        }
    }
}

impl<T> ByName<T> {
    /// Every (name, entry), in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Named<T>)> {
        self.by_name
            .iter()
            .flat_map(|(name, list)| list.iter().map(move |e| (name.as_str(), e)))
    }
}

/// The key columns of a table of values by series and name (`owner_live_peaks`,
/// `owner_totals`): source, pid, device, pool and the name of each of `rows`.
pub fn named_columns<T>(source: &str, rows: &[(&str, &Named<T>)]) -> Vec<ArrayRef> {
    let device = rows.iter().map(|r| Some(r.1.device.as_str()));
    let pool = rows.iter().map(|r| Some(r.1.pool.as_str()));
    vec![
        crate::schema::source_column(source, rows.len()),
        Arc::new(rows.iter().map(|r| r.1.pid).collect::<Int64Array>()),
        Arc::new(device.collect::<StringArray>()),
        Arc::new(pool.collect::<StringArray>()),
        Arc::new(rows.iter().map(|r| Some(r.0)).collect::<StringArray>()),
    ]
}

/// The tables' order of series: pid (NULLs last), device, pool.
pub fn order_key<'a>(
    pid: Option<i64>,
    device: &'a str,
    pool: &'a str,
) -> (bool, Option<i64>, &'a str, &'a str) {
    (pid.is_none(), pid, device, pool)
}

/// [`order_key`] as a comparison of two series.
pub fn series_order(a: &Series, b: &Series) -> Ordering {
    order_key(a.0, &a.1, &a.2).cmp(&order_key(b.0, &b.1, &b.2))
}

/// A state per series. Rows of one series come in runs, so the series of the previous row is
/// kept apart and found without hashing or allocating.
pub struct SeriesMap<T> {
    current: Option<(Series, T)>,
    others: HashMap<Series, T>,
}

impl<T> Default for SeriesMap<T> {
    fn default() -> Self {
        SeriesMap {
            current: None,
            others: HashMap::new(),
        }
    }
}

impl<T> SeriesMap<T> {
    /// The state of series (pid, device, pool), made with `init` the first time.
    pub fn get_or(
        &mut self,
        (pid, device, pool): (Option<i64>, &str, &str),
        init: impl FnOnce(&Series) -> T,
    ) -> (&Series, &mut T) {
        let same =
            matches!(&self.current, Some((s, _)) if s.0 == pid && s.1 == device && s.2 == pool);
        if !same {
            if let Some((s, st)) = self.current.take() {
                self.others.insert(s, st);
            }
            let key: Series = (pid, device.to_string(), pool.to_string());
            let st = match self.others.remove(&key) {
                Some(st) => st,
                None => init(&key),
            };
            self.current = Some((key, st));
        }
        match &mut self.current {
            Some((s, st)) => (&*s, st),
            None => unreachable!("made current above"),
        }
    }

    /// Every series with its state.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&Series, &mut T)> {
        let current = self.current.iter_mut().map(|(s, st)| (&*s, st));
        current.chain(self.others.iter_mut())
    }

    /// Every series with its state, in the tables' order.
    pub fn into_sorted(mut self) -> Vec<(Series, T)> {
        let mut all: Vec<(Series, T)> = self.others.drain().collect();
        all.extend(self.current.take());
        all.sort_by(|a, b| series_order(&a.0, &b.0));
        all
    }
}

/// The columns of a batch of curve staging rows ([`crate::derive::curve`]), typed.
pub struct StagingCols<'a> {
    pub pid: &'a Int64Array,
    pub device: &'a StringArray,
    pub pool: &'a StringArray,
    pub ts: &'a Int64Array,
    pub ts_raw: &'a Int64Array,
    pub row_idx: &'a PrimitiveArray<UInt64Type>,
    pub id: &'a Int64Array,
    pub event: &'a StringArray,
    pub used: &'a Int64Array,
    pub total: &'a Int64Array,
    pub process_used: &'a Int64Array,
    pub device_used: &'a Int64Array,
    pub delta: &'a Int64Array,
    pub shadow_end: &'a BooleanArray,
    pub owner: &'a StringArray,
    pub owner_delta: &'a Int64Array,
    pub old_owner: &'a StringArray,
    pub old_delta: &'a Int64Array,
}

impl<'a> StagingCols<'a> {
    /// The columns of `b`, in the staging schema's order.
    pub fn new(b: &'a RecordBatch) -> Self {
        let int = |c: usize| b.column(c).as_primitive::<Int64Type>();
        let text = |c: usize| b.column(c).as_string::<i32>();
        StagingCols {
            pid: int(0),
            device: text(1),
            pool: text(2),
            ts: int(3),
            ts_raw: int(4),
            row_idx: b.column(5).as_primitive::<UInt64Type>(),
            id: int(6),
            event: text(7),
            used: int(9),
            total: int(10),
            process_used: int(11),
            device_used: int(12),
            delta: int(13),
            shadow_end: b.column(14).as_boolean(),
            owner: text(15),
            owner_delta: int(16),
            old_owner: text(17),
            old_delta: int(18),
        }
    }

    /// Row `i`'s series, borrowed.
    pub fn series(&self, i: usize) -> (Option<i64>, &'a str, &'a str) {
        (opt(self.pid, i), self.device.value(i), self.pool.value(i))
    }

    /// Row `i` ends a block by a shadow FREE whose block is held at the end (`held`): it
    /// changes no bytes.
    pub fn void(&self, i: usize, held: &HashSet<u64>) -> bool {
        self.shadow_end.value(i) && held.contains(&self.row_idx.value(i))
    }
}

/// Value `i` of `a`, NULL as None.
pub fn opt(a: &Int64Array, i: usize) -> Option<i64> {
    a.is_valid(i).then(|| a.value(i))
}
