//! One CSV dump parsed on every core.
//!
//! The calling thread reads the file and cuts it into pieces of about [`CHUNK_BYTES`] at record
//! boundaries: a physical line that opens like a new row (`<digits>,<EVENT>,`) always starts a
//! record (records.rs: it even ends a record whose quote is still open), unless the record before
//! it is cut for exceeding `MAX_RECORD_BYTES`, which cannot happen inside a piece far smaller than
//! that limit. Each piece is parsed by a worker with the same [`RecordReader`] (lines and byte
//! offsets start at the piece's place in the file, so they are exact), its rows sorted into runs
//! and encoded; a collector takes the pieces in file order, numbers their rows (`row_idx`),
//! writes rejects and merges the unit/generation findings. When no boundary shows up within
//! [`FALLBACK_BYTES`], the rest of the file is read sequentially on the calling thread (the
//! rules for oversized records then apply unchanged).

use std::collections::BTreeMap;
use std::io::{BufRead, Read};
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex};

use super::{parse_record_ref, Columns};
use crate::parse::attr;
use crate::parse::events::{BatchSizes, EventsBuilder};
use crate::parse::records::{looks_like_row_start, RawRecord, RecordReader};
use crate::staging::runs::{EncodedRun, RunStore, RunWriter};
use crate::staging::{convert_ts, PieceStats, SourceOutput, TsUnit, BATCH_ROWS};
use memq_core::error::{MemqError, Result};
use memq_core::rejects::Reject;

/// Bytes of a piece.
pub const CHUNK_BYTES: usize = 16 << 20;
/// A piece with no record boundary after this many bytes ends the parallel read.
pub const FALLBACK_BYTES: usize = 64 << 20;
/// A boundary line must end within this many bytes (so it can never be cut).
const BOUNDARY_LINE: usize = 1 << 20;

pub struct Job<'a> {
    pub path: &'a Path,
    pub cols: &'a Columns,
    pub workers: usize,
    pub chunk_bytes: usize,
    /// [`FALLBACK_BYTES`] (smaller in tests).
    pub fallback_bytes: usize,
}

/// What a worker needs.
struct Ctx<'a> {
    cols: &'a Columns,
    declared: Option<TsUnit>,
    batch_bytes: usize,
    /// Where the threads write their runs ([`RunWriter`]).
    runs_path: &'a Path,
    /// The dump, for read errors.
    path: &'a Path,
}

/// One parsed piece: its sorted runs, rejects and findings.
struct Piece {
    runs: Vec<EncodedRun>,
    rejects: Vec<Reject>,
    /// Records (events and rejects): the `row_idx` the piece uses up.
    records: u64,
    stats: PieceStats,
}

struct Work {
    seq: u64,
    bytes: Vec<u8>,
    line: u64,
    offset: u64,
}

/// How many pieces are parsed but not yet collected (bounds memory), and whether the read has
/// stopped: after the first error no thread waits for room or starts another piece, so a failing
/// disk ends the ingest instead of leaving the reader waiting for a collector that is gone.
struct InFlight {
    state: Mutex<Flow>,
    cv: Condvar,
}

#[derive(Default)]
struct Flow {
    count: u64,
    stopped: bool,
}

impl InFlight {
    /// Waits until fewer than `limit` pieces are in flight and takes a place; false once stopped.
    fn enter(&self, limit: u64) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while s.count >= limit && !s.stopped {
            s = self.cv.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        s.count += 1;
        !s.stopped
    }

    fn leave(&self) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.count = s.count.saturating_sub(1);
        drop(s);
        self.cv.notify_all();
    }

    fn stop(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).stopped = true;
        self.cv.notify_all();
    }

    fn stopped(&self) -> bool {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).stopped
    }
}

/// The buffers of parsed pieces, for the next pieces to be read into: their pages stay
/// mapped, so a piece is neither a fresh allocation nor zeroed page by page by the kernel.
type Spare = Mutex<Vec<Vec<u8>>>;

/// Parses the dump into sorted runs and merges them into `events_path`, handing each merged
/// batch (with the dump's timestamp unit) to `each`.
#[allow(clippy::too_many_arguments)]
pub fn read<R: Read + Send>(
    job: &Job,
    mut input: R,
    start: Vec<u8>,
    (line, offset): (u64, u64),
    out: &mut SourceOutput,
    events_path: &Path,
    runs_path: &Path,
    each: &mut super::EachBatch<'_>,
) -> Result<()> {
    let schema = crate::schema::events().schema();
    let mut store = RunStore::new(runs_path, out.events_source());
    let ctx = Ctx {
        cols: job.cols,
        declared: out.declared(),
        batch_bytes: out.batch_bytes,
        runs_path,
        path: job.path,
    };
    let workers = job.workers.max(1);
    let (work_tx, work_rx) = sync_channel::<Work>(workers);
    let work_rx = Arc::new(Mutex::new(work_rx));
    let (done_tx, done_rx) = sync_channel::<(u64, Result<Piece>)>(workers * 2 + 2);
    let in_flight = InFlight {
        state: Mutex::new(Flow::default()),
        cv: Condvar::new(),
    };
    let limit = workers as u64 + 2;
    let spare = Spare::default();
    // The workers own the only handles on the work queue: when the last one stops, sending
    // more work fails instead of waiting for a reader that is gone.
    let mut receivers: Vec<_> = (0..workers).map(|_| work_rx.clone()).collect();
    drop(work_rx);
    let result: Result<()> = std::thread::scope(|scope| {
        for k in 0..workers {
            let rx = receivers.pop().expect("one per worker");
            let tx = done_tx.clone();
            let (ctx, spare, in_flight) = (&ctx, &spare, &in_flight);
            scope
                .spawn(move || worker(ctx, RunWriter::new(runs_path, k), spare, in_flight, rx, tx));
        }
        let collector = {
            let in_flight = &in_flight;
            let store = &mut store;
            let out = &mut *out;
            scope.spawn(move || {
                let collected = collect(done_rx, store, out, in_flight);
                // Whatever ended the collection ends the read.
                in_flight.stop();
                collected
            })
        };
        let dispatched = dispatch(
            job,
            &ctx,
            &mut input,
            start,
            (line, offset),
            &work_tx,
            &done_tx,
            &in_flight,
            &spare,
            limit,
        );
        if dispatched.is_err() {
            in_flight.stop();
        }
        drop(work_tx);
        drop(done_tx);
        let collected = collector
            .join()
            .unwrap_or_else(|_| Err(MemqError::Query("the collector panicked".into())));
        // The collector's error is the first one: a dispatcher that finds the read stopped
        // reports only that.
        collected.and(dispatched)
    });
    result?;
    // The piece buffers are not needed for the merge.
    drop(spare);
    let unit = out.ts_unit();
    store.merge_into(events_path, schema, workers.max(2), &mut |b| each(unit, b))?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn dispatch<R: Read>(
    job: &Job,
    ctx: &Ctx,
    input: &mut R,
    start: Vec<u8>,
    (mut line, mut offset): (u64, u64),
    work_tx: &SyncSender<Work>,
    done_tx: &SyncSender<(u64, Result<Piece>)>,
    in_flight: &InFlight,
    spare: &Spare,
    limit: u64,
) -> Result<()> {
    let path = job.path;
    let mut buf = start;
    let mut seq = 0u64;
    let mut eof = false;
    let stopped = || MemqError::Query("the read stopped".into());
    loop {
        let want = if buf.len() < job.chunk_bytes {
            job.chunk_bytes
        } else {
            buf.len() + job.chunk_bytes
        };
        while buf.len() < want && !eof {
            eof = fill(input, &mut buf, want).map_err(|e| MemqError::io(path, e))?;
        }
        if buf.is_empty() {
            return Ok(());
        }
        let split = if eof && buf.len() <= job.chunk_bytes {
            Some(buf.len())
        } else {
            find_split(&buf, job.chunk_bytes).or(eof.then_some(buf.len()))
        };
        match split {
            Some(p) => {
                let recycled = spare.lock().ok().and_then(|mut s| s.pop());
                let mut rest = recycled.unwrap_or_default();
                rest.extend_from_slice(&buf[p..]);
                buf.truncate(p);
                let piece = std::mem::replace(&mut buf, rest);
                let lines = count_lines(&piece);
                let len = piece.len() as u64;
                if !in_flight.enter(limit) {
                    return Err(stopped());
                }
                let w = Work {
                    seq,
                    bytes: piece,
                    line,
                    offset,
                };
                if work_tx.send(w).is_err() {
                    return Err(MemqError::Query("a parse worker stopped".into()));
                }
                seq += 1;
                line += lines;
                offset += len;
                if eof && buf.is_empty() {
                    return Ok(());
                }
            }
            None if buf.len() >= job.fallback_bytes => {
                // No boundary in sight: the rest is read in file order here.
                let chained = std::io::BufReader::with_capacity(
                    1 << 20,
                    std::io::Cursor::new(std::mem::take(&mut buf)).chain(input),
                );
                let mut reader = RecordReader::with_position(chained, line, offset);
                // The workers' staging files are numbered 0..workers: this thread's is next.
                let mut runs = RunWriter::new(ctx.runs_path, job.workers.max(1));
                let mut sizes = BatchSizes::default();
                loop {
                    if !in_flight.enter(limit) {
                        return Err(stopped());
                    }
                    let (piece, done) = parse_piece(ctx, &mut runs, &mut sizes, &mut reader, true)?;
                    if done_tx.send((seq, Ok(piece))).is_err() {
                        return Err(MemqError::Query("the collector stopped".into()));
                    }
                    seq += 1;
                    if done {
                        return Ok(());
                    }
                }
            }
            None => {} // read more
        }
    }
}

/// Reads until `buf` holds `want` bytes (at least 64 KiB more) or the input ends; returns
/// whether it ended. The bytes are read into `buf`'s spare room, not zeroed first.
fn fill<R: Read>(input: &mut R, buf: &mut Vec<u8>, want: usize) -> std::io::Result<bool> {
    let need = want.saturating_sub(buf.len()).max(64 << 10);
    buf.reserve(need);
    let got = input.by_ref().take(need as u64).read_to_end(buf)?;
    Ok(got < need)
}

fn count_lines(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|&&b| b == b'\n').count() as u64
}

/// The last record boundary in `buf` at or after `min` bytes, searched backwards from its end:
/// the start of a line that opens like a row and ends within [`BOUNDARY_LINE`] bytes.
fn find_split(buf: &[u8], min: usize) -> Option<usize> {
    let mut end = buf.len();
    let mut next_nl: Option<usize> = None;
    while let Some(q) = buf[..end].iter().rposition(|&b| b == b'\n') {
        if q + 1 < min {
            return None;
        }
        if let Some(n) = next_nl {
            if n - q <= BOUNDARY_LINE && looks_like_row_start(&buf[q + 1..]) {
                return Some(q + 1);
            }
        }
        next_nl = Some(q);
        end = q;
    }
    None
}

fn worker(
    ctx: &Ctx,
    mut runs: RunWriter,
    spare: &Spare,
    in_flight: &InFlight,
    rx: Arc<Mutex<Receiver<Work>>>,
    tx: SyncSender<(u64, Result<Piece>)>,
) {
    // The size of this worker's last batch, for the builder of the next piece.
    let mut sizes = BatchSizes::default();
    loop {
        let work = {
            let Ok(rx) = rx.lock() else { return };
            match rx.recv() {
                Ok(w) => w,
                Err(_) => return,
            }
        };
        if in_flight.stopped() {
            return;
        }
        let mut reader = RecordReader::with_position(&work.bytes[..], work.line, work.offset);
        let piece = parse_piece(ctx, &mut runs, &mut sizes, &mut reader, false).map(|(p, _)| p);
        let mut bytes = work.bytes;
        bytes.clear();
        if let Ok(mut spare) = spare.lock() {
            spare.push(bytes);
        }
        if tx.send((work.seq, piece)).is_err() {
            return;
        }
    }
}

/// Takes the pieces in file order.
fn collect(
    rx: Receiver<(u64, Result<Piece>)>,
    store: &mut RunStore,
    out: &mut SourceOutput,
    in_flight: &InFlight,
) -> Result<()> {
    let mut waiting: BTreeMap<u64, Piece> = BTreeMap::new();
    let mut next = 0u64;
    let mut base = 0u64;
    for (seq, piece) in rx {
        let piece = piece?;
        waiting.insert(seq, piece);
        while let Some(p) = waiting.remove(&next) {
            next += 1;
            for run in p.runs {
                store.append(run, base)?;
            }
            base += p.records;
            for r in p.rejects {
                out.push_reject(r)?;
            }
            out.merge_piece(&p.stats);
            in_flight.leave();
        }
    }
    Ok(())
}

/// Parses records from `reader` into sorted, encoded runs: all of them, or (`one_run`) until the
/// first run is complete; its builder is sized like the last batch (`sizes`, updated). Returns
/// the piece and whether the input ended.
fn parse_piece<R: BufRead>(
    ctx: &Ctx,
    runs: &mut RunWriter,
    sizes: &mut BatchSizes,
    reader: &mut RecordReader<R>,
    one_run: bool,
) -> Result<(Piece, bool)> {
    let mut piece = Piece {
        runs: Vec::new(),
        rejects: Vec::new(),
        records: 0,
        stats: PieceStats::default(),
    };
    // The runs leave `source` empty: the merge writes the source's name into every row
    // (RunStore), so the staged rows do not carry it (a dump's path is often 80–100 bytes).
    let mut builder = EventsBuilder::with_sizes("", 1, *sizes);
    let mut bytes = 0usize;
    let mut reject_bytes = 0usize;
    let mut full: Vec<datafusion::arrow::record_batch::RecordBatch> = Vec::new();
    let mut rec = RawRecord::default();
    let mut ended = true;
    while reader
        .next_record(&mut rec)
        .map_err(|e| MemqError::io(ctx.path, e))?
    {
        if rec.bytes.is_empty() && rec.terminated {
            continue; // blank line
        }
        let idx = piece.records;
        piece.records += 1;
        // A piece read whole is one run (its size is bounded by the piece); a streamed one is
        // cut into runs of BATCH_ROWS.
        let max_rows = if one_run { BATCH_ROWS } else { usize::MAX };
        match append(
            ctx,
            &rec,
            idx,
            max_rows,
            &mut builder,
            &mut bytes,
            &mut piece.stats,
            &mut full,
        ) {
            Ok(()) => {}
            Err(reason) => {
                reject_bytes += rec.bytes.len() + reason.len();
                piece.rejects.push(Reject {
                    line: rec.line,
                    byte_offset: rec.offset,
                    reason,
                    raw: std::mem::take(&mut rec.bytes),
                });
            }
        }
        for batch in full.drain(..) {
            piece.runs.push(runs.write(batch)?);
        }
        if one_run && (!piece.runs.is_empty() || reject_bytes >= ctx.batch_bytes) {
            ended = false;
            break;
        }
    }
    if !builder.is_empty() {
        *sizes = builder.sizes();
        piece.runs.push(runs.write(builder.finish())?);
    }
    piece.stats.counts = builder.take_counts();
    Ok((piece, ended))
}

/// One record into `builder` (the rules of `read_from` and `SourceOutput::push_event`); a full
/// batch is moved to `full`.
#[allow(clippy::too_many_arguments)]
fn append(
    ctx: &Ctx,
    rec: &RawRecord,
    idx: u64,
    max_rows: usize,
    builder: &mut EventsBuilder,
    bytes: &mut usize,
    stats: &mut PieceStats,
    full: &mut Vec<datafusion::arrow::record_batch::RecordBatch>,
) -> std::result::Result<(), String> {
    let mut fields = Vec::with_capacity(ctx.cols.count);
    let (mut row, decimal_ptr) = parse_record_ref(rec, ctx.cols, &mut fields)?;
    // Whether a timestamp converts does not depend on the rows before it (0 fits every unit).
    let unit = match row.ts_raw {
        Some(raw) => Some(convert_ts(raw, ctx.declared, None)?.0),
        None => None,
    };
    row.row_idx = idx;
    row.line = rec.line;
    stats.hints.decimal_ptr |= decimal_ptr;
    if let (Some(raw), Some(unit)) = (row.ts_raw, unit) {
        stats.observe_ts(raw, unit, rec.line);
        builder.set_ts_scale(unit.scale());
    }
    let row_bytes = row.text_bytes();
    if !builder.is_empty() && *bytes + row_bytes > ctx.batch_bytes {
        *bytes = 0;
        full.push(builder.finish());
    }
    let mut items = Vec::with_capacity(8);
    attr::parse_into(row.attr, &mut items);
    stats.hints.observe_ref(&row, &items);
    builder.append_ref(&row, &items);
    *bytes += row_bytes;
    stats.rows += 1;
    if builder.len() >= max_rows || *bytes >= ctx.batch_bytes {
        *bytes = 0;
        full.push(builder.finish());
    }
    Ok(())
}
