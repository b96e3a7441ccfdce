//! How each block ended, decided in the streaming pass that pairs blocks (docs/formats/memscope.md
//! §5.5, "How to tell them apart"). A block ended by a real FREE, by a MALLOC that reused its
//! address, or never ended, has its fate at once; a block ended by a *shadow* FREE waits here
//! until the rows that decide it have gone by:
//!
//! - `stop_period_free`: the first START_TRACE/STOP_TRACE group of its process at or after the
//!   FREE's time holds a START_TRACE (a genuine free during the stop period, flushed at start);
//! - `residual_fill_in`: otherwise, the next block on the same (pid, device, pool, ptr) is a
//!   MALLOC (the tool closed the block when its address was allocated again);
//! - `exit_while_stopped`: otherwise, the last marker strictly before the FREE is a STOP_TRACE
//!   and no marker follows (the process exited while stopped: held, to be confirmed);
//! - `exit_fill_in`: anything else (the fill-in at exit of a block never freed: held).
//!
//! Markers at the FREE's own time count as following it; in a group of markers at one time, a
//! START_TRACE wins as the following marker and a STOP_TRACE as the preceding one. Memory held
//! here: the shadow-ended blocks whose fate is still open (normally the blocks the tool filled
//! in at exit, fewer than the live set at the end) and the pids' marker state.

use std::collections::HashMap;

/// A fate, as written in `blocks.fate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    Released,
    Replaced,
    NeverFreed,
    StopPeriodFree,
    ResidualFillIn,
    ExitWhileStopped,
    ExitFillIn,
}

impl Fate {
    pub fn label(self) -> &'static str {
        match self {
            Fate::Released => "released",
            Fate::Replaced => "replaced",
            Fate::NeverFreed => "never_freed",
            Fate::StopPeriodFree => "stop_period_free",
            Fate::ResidualFillIn => "residual_fill_in",
            Fate::ExitWhileStopped => "exit_while_stopped",
            Fate::ExitFillIn => "exit_fill_in",
        }
    }

    /// The memory still counts as live at the end of the data.
    pub fn held_at_end(self) -> bool {
        matches!(
            self,
            Fate::NeverFreed | Fate::ExitWhileStopped | Fate::ExitFillIn
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    Start,
    Stop,
}

/// The markers (START_TRACE / STOP_TRACE rows with a time) seen so far of one process.
#[derive(Default)]
struct MarkerLine {
    /// Time of the latest group of markers at one instant, and whether it holds a START / STOP.
    last: Option<(i64, bool, bool)>,
    /// The preceding-marker kind for a time equal to `last`'s: that of the group before it.
    before_last: Option<Marker>,
}

impl MarkerLine {
    /// The kind of the last marker strictly before `ts` (None = +infinity, a row without time).
    fn before(&self, ts: Option<i64>) -> Option<Marker> {
        match (self.last, ts) {
            (None, _) => None,
            (Some((t, _, _)), Some(at)) if t >= at => self.before_last,
            (Some((_, _, stop)), _) => Some(if stop { Marker::Stop } else { Marker::Start }),
        }
    }

    fn push(&mut self, ts: i64, marker: Marker) {
        let (start, stop) = (marker == Marker::Start, marker == Marker::Stop);
        match &mut self.last {
            Some((t, s, p)) if *t == ts => {
                *s |= start;
                *p |= stop;
            }
            last => {
                self.before_last =
                    last.map(|(_, _, p)| if p { Marker::Stop } else { Marker::Start });
                *last = Some((ts, start, stop));
            }
        }
    }
}

/// A shadow-ended block whose fate is still open, with the caller's payload `T`.
struct Open<T> {
    item: T,
    pid: Option<i64>,
    before: Option<Marker>,
    /// The first marker group at or after the FREE: its time and whether it holds a START.
    after: Option<(i64, bool)>,
    /// A later marker group exists: `after` can no longer change.
    after_settled: bool,
    /// The next block on the same key: Some(true) when it starts with a MALLOC.
    next_alloc: Option<bool>,
}

impl<T> Open<T> {
    /// The fate, once the rows seen so far decide it (`at_end`: no rows follow).
    fn decide(&self, at_end: bool) -> Option<Fate> {
        if let Some((_, true)) = self.after {
            return Some(Fate::StopPeriodFree);
        }
        let after_known = at_end || self.after_settled;
        let next_known = at_end || self.next_alloc.is_some();
        if !(after_known && next_known) {
            return None;
        }
        Some(if self.next_alloc == Some(true) {
            Fate::ResidualFillIn
        } else if self.before == Some(Marker::Stop) && self.after.is_none() {
            Fate::ExitWhileStopped
        } else {
            Fate::ExitFillIn
        })
    }
}

/// Decides the fates of shadow-ended blocks of one source as its rows stream by, in canonical
/// order. `K` identifies a block's key (pid, device, pool, ptr); `T` is what the caller gets
/// back with each decided fate.
pub struct Fates<K, T> {
    markers: HashMap<Option<i64>, MarkerLine>,
    open: Vec<Option<Open<T>>>,
    free_slots: Vec<usize>,
    /// Open blocks waiting for their following marker group to settle, by pid.
    awaiting_marker: HashMap<Option<i64>, Vec<usize>>,
    /// Open blocks waiting for the next block on their key.
    awaiting_next: HashMap<K, usize>,
    decided: Vec<(T, Fate)>,
}

impl<K: std::hash::Hash + Eq, T> Default for Fates<K, T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: std::hash::Hash + Eq, T> Fates<K, T> {
    pub fn new() -> Self {
        Fates {
            markers: HashMap::new(),
            open: Vec::new(),
            free_slots: Vec::new(),
            awaiting_marker: HashMap::new(),
            awaiting_next: HashMap::new(),
            decided: Vec::new(),
        }
    }

    /// A START_TRACE or STOP_TRACE row with a time.
    pub fn marker(&mut self, pid: Option<i64>, ts: i64, marker: Marker) {
        self.markers.entry(pid).or_default().push(ts, marker);
        let Some(waiting) = self.awaiting_marker.get_mut(&pid) else {
            return;
        };
        let mut check = Vec::new();
        waiting.retain(|&slot| {
            let Some(o) = self.open[slot].as_mut() else {
                return false;
            };
            match o.after {
                None => o.after = Some((ts, marker == Marker::Start)),
                Some((t, start)) if t == ts => {
                    o.after = Some((t, start || marker == Marker::Start))
                }
                Some(_) => o.after_settled = true,
            }
            check.push(slot);
            !o.after_settled && o.after != Some((ts, true))
        });
        for slot in check {
            self.try_close(slot, false);
        }
    }

    /// A block of key `key` ended by a shadow FREE at `free_ts`: its fate is decided later.
    pub fn shadow_end(&mut self, key: K, pid: Option<i64>, free_ts: Option<i64>, item: T) {
        let line = self.markers.get(&pid);
        let before = line.and_then(|l| l.before(free_ts));
        // Markers already seen at the FREE's own time follow it.
        let after = match (line.and_then(|l| l.last), free_ts) {
            (Some((t, start, _)), Some(at)) if t == at => Some((t, start)),
            _ => None,
        };
        let open = Open {
            item,
            pid,
            before,
            after,
            after_settled: false,
            next_alloc: None,
        };
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.open[s] = Some(open);
                s
            }
            None => {
                self.open.push(Some(open));
                self.open.len() - 1
            }
        };
        if free_ts.is_some() {
            self.awaiting_marker.entry(pid).or_default().push(slot);
        }
        self.awaiting_next.insert(key, slot);
        self.try_close(slot, false);
    }

    /// The next block on `key` begins: with a MALLOC (`malloc`) or with a FREE that had none.
    pub fn next_block(&mut self, key: &K, malloc: bool) {
        if let Some(slot) = self.awaiting_next.remove(key) {
            if let Some(o) = self.open[slot].as_mut() {
                o.next_alloc = Some(malloc);
            }
            self.try_close(slot, false);
        }
    }

    fn try_close(&mut self, slot: usize, at_end: bool) {
        let Some(fate) = self.open[slot].as_ref().and_then(|o| o.decide(at_end)) else {
            return;
        };
        if let Some(o) = self.open[slot].take() {
            self.free_slots.push(slot);
            if let Some(list) = self.awaiting_marker.get_mut(&o.pid) {
                list.retain(|&s| s != slot);
            }
            self.decided.push((o.item, fate));
        }
    }

    /// Fates decided since the last call.
    pub fn take_decided(&mut self) -> Vec<(T, Fate)> {
        std::mem::take(&mut self.decided)
    }

    /// No rows follow: every open fate is decided.
    pub fn finish(mut self) -> Vec<(T, Fate)> {
        self.awaiting_next.clear();
        for slot in 0..self.open.len() {
            self.try_close(slot, true);
        }
        self.decided
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fates after `steps` for the block under test (key 1); ("free", t) ends it by a
    /// shadow FREE at t.
    fn feed(steps: &[(&str, i64)]) -> Fates<u8, ()> {
        let mut f: Fates<u8, ()> = Fates::new();
        for &(what, t) in steps {
            match what {
                "start" => f.marker(Some(1), t, Marker::Start),
                "stop" => f.marker(Some(1), t, Marker::Stop),
                "free" => f.shadow_end(1, Some(1), Some(t), ()),
                "malloc" => f.next_block(&1, true),
                "lone" => f.next_block(&1, false),
                _ => unreachable!(),
            }
        }
        f
    }

    /// The fate decided while the rows stream (before the end).
    fn run(steps: &[(&str, i64)]) -> Fate {
        let mut decided = feed(steps).take_decided();
        assert_eq!(decided.len(), 1, "decided before the end: {steps:?}");
        decided.pop().map(|(_, fate)| fate).unwrap()
    }

    /// The fate once no rows follow.
    fn run_to_end(steps: &[(&str, i64)]) -> Fate {
        let mut d = feed(steps).finish();
        assert_eq!(d.len(), 1, "{steps:?}");
        d.pop().map(|(_, fate)| fate).unwrap()
    }

    #[test]
    fn the_rules_in_order() {
        use Fate::*;
        // Flushed at the next start: a free during the stop period.
        assert_eq!(
            run_to_end(&[("start", 1), ("stop", 5), ("free", 9), ("start", 9)]),
            StopPeriodFree
        );
        assert_eq!(
            run_to_end(&[("stop", 5), ("free", 8), ("start", 9), ("malloc", 0)]),
            StopPeriodFree
        );
        // A marker at the FREE's own time follows it, even when seen first.
        assert_eq!(
            run_to_end(&[("stop", 5), ("start", 8), ("free", 8)]),
            StopPeriodFree
        );
        // START wins a tie as the following group.
        assert_eq!(
            run_to_end(&[("free", 8), ("stop", 9), ("start", 9)]),
            StopPeriodFree
        );
        // Re-allocated address: residual fill-in (a STOP follows, not a START).
        assert_eq!(
            run_to_end(&[("free", 8), ("malloc", 0), ("stop", 9)]),
            ResidualFillIn
        );
        assert_eq!(run_to_end(&[("free", 8), ("malloc", 0)]), ResidualFillIn);
        // A FREE without MALLOC comes next: not a residual.
        assert_eq!(
            run_to_end(&[("free", 8), ("lone", 0), ("malloc", 0)]),
            ExitFillIn
        );
        // Exit while stopped: last marker before is a STOP, none after.
        assert_eq!(
            run_to_end(&[("start", 1), ("stop", 5), ("free", 6)]),
            ExitWhileStopped
        );
        // STOP wins a tie as the preceding group.
        assert_eq!(
            run_to_end(&[("start", 5), ("stop", 5), ("free", 6)]),
            ExitWhileStopped
        );
        // Markers at the FREE's time are not before it.
        assert_eq!(
            run_to_end(&[("start", 1), ("stop", 6), ("free", 6)]),
            ExitFillIn
        );
        assert_eq!(run_to_end(&[("start", 1), ("free", 6)]), ExitFillIn);
        assert_eq!(run_to_end(&[("free", 6)]), ExitFillIn);
        // A STOP after the FREE: not exit_while_stopped (a marker follows).
        assert_eq!(
            run_to_end(&[("stop", 1), ("free", 6), ("stop", 7)]),
            ExitFillIn
        );
    }

    #[test]
    fn decided_early_when_the_rows_allow() {
        // A following START decides at once; the last step is what closes it.
        assert_eq!(run(&[("free", 8), ("start", 9)]), Fate::StopPeriodFree);
        // Residual after a settled STOP group.
        assert_eq!(
            run(&[("free", 8), ("stop", 9), ("malloc", 0), ("start", 10)]),
            Fate::ResidualFillIn
        );
    }
}
