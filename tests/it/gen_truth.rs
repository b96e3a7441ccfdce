//! memq-gen: determinism, the committed fixture, and self-consistency of the written rows with
//! the ground truth (recomputed here from the files with an independent little parser).

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use memq_gen::{generate, Format, GenConfig, StopPeriod, Truth};

// ---- a lenient reader for the tool's CSV (quoted fields may span lines, no escapes) ---------

#[derive(Debug, Clone)]
struct Row {
    id: u64,
    event: String,
    etype: String,
    name: String,
    ts: u64,
    device: String,
    ptr: String,
    attr: String,
    py: String,
    c: String,
    pos: usize,
}

fn split_records(text: &str) -> Vec<Vec<(String, bool)>> {
    let mut out = Vec::new();
    let mut rec = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut in_q = false;
    for ch in text.chars() {
        if in_q {
            if ch == '"' {
                in_q = false;
            } else {
                field.push(ch);
            }
            continue;
        }
        match ch {
            '"' => {
                in_q = true;
                quoted = true;
            }
            ',' => {
                rec.push((std::mem::take(&mut field), quoted));
                quoted = false;
            }
            '\n' => {
                rec.push((std::mem::take(&mut field), quoted));
                quoted = false;
                out.push(std::mem::take(&mut rec));
            }
            _ => field.push(ch),
        }
    }
    assert!(
        field.is_empty() && rec.is_empty() && !in_q,
        "file must end with a newline"
    );
    out
}

const HEADER: &str =
    "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)";

fn read_dump(path: &Path) -> Vec<Row> {
    let text = fs::read_to_string(path).unwrap();
    assert!(text.starts_with(HEADER), "{}: header", path.display());
    let recs = split_records(&text);
    recs[1..]
        .iter()
        .enumerate()
        .map(|(i, r)| {
            assert_eq!(
                r.len(),
                12,
                "{}: record {} has {} fields: {:?}",
                path.display(),
                i + 1,
                r.len(),
                r
            );
            if r[1].0 == "MSTX" {
                assert!(r[3].1, "MSTX names are quoted");
            }
            if !r[9].0.is_empty() {
                assert!(
                    r[9].1 && r[9].0.starts_with('{') && r[9].0.ends_with('}'),
                    "attr quoted with braces"
                );
            }
            for k in [10, 11] {
                if !r[k].0.is_empty() {
                    assert!(r[k].1, "stacks are quoted");
                    assert!(
                        r[k].0 == "NA" || r[k].0.ends_with('\n'),
                        "stack frames end with a newline"
                    );
                }
            }
            Row {
                id: r[0].0.parse().unwrap(),
                event: r[1].0.clone(),
                etype: r[2].0.clone(),
                name: r[3].0.clone(),
                ts: r[4].0.parse().unwrap(),
                device: r[7].0.clone(),
                ptr: r[8].0.clone(),
                attr: r[9].0.clone(),
                py: r[10].0.clone(),
                c: r[11].0.clone(),
                pos: i,
            }
        })
        .collect()
}

/// The §3.2 colon rule.
fn attrs(attr: &str) -> HashMap<String, String> {
    let s = attr
        .strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .unwrap_or(attr);
    let mut out = HashMap::new();
    let colons: Vec<usize> = s.match_indices(':').map(|(i, _)| i).collect();
    let mut keys: Vec<(usize, usize)> = Vec::new(); // (key start, colon)
    let mut prev = 0usize;
    for &c in &colons {
        let start = match s[prev..c].rfind(',') {
            Some(i) => prev + i + 1,
            None => prev,
        };
        keys.push((start, c));
        prev = c + 1;
    }
    for (i, &(ks, c)) in keys.iter().enumerate() {
        let vend = if i + 1 < keys.len() {
            keys[i + 1].0 - 1
        } else {
            s.len()
        };
        out.insert(s[ks..c].to_string(), s[c + 1..vend].to_string());
    }
    out
}

fn int(a: &HashMap<String, String>, k: &str) -> Option<u64> {
    a.get(k).and_then(|v| v.parse().ok())
}

fn group(owner: Option<&String>) -> String {
    let Some(o) = owner else {
        return "(未标注)".into();
    };
    let parts: Vec<&str> = o.split('@').collect();
    let fw = [
        "PTA",
        "PTA_WORKSPACE",
        "ATB",
        "MINDSPORE",
        "HAL",
        "HOST",
        "HOST_PINNED",
        "CANN",
    ];
    let rest: &[&str] = if fw.contains(&parts[0]) {
        &parts[1..]
    } else {
        &parts[..]
    };
    rest.first().map_or("(未标注)".into(), |s| s.to_string())
}

fn files_under(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                out.insert(rel, fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn sorted(rows: &[Row]) -> Vec<Row> {
    let mut v = rows.to_vec();
    v.sort_by_key(|r| (r.ts, r.pos));
    v
}

// ---- the checks -------------------------------------------------------------------------------

fn check(cfg: &GenConfig, dir: &Path, t: &Truth) {
    // truth.json on disk equals the returned value
    let on_disk: Truth =
        serde_json::from_slice(&fs::read(dir.join("truth.json")).unwrap()).unwrap();
    assert_eq!(&on_disk, t);
    assert_eq!(&t.config, cfg);

    let mut total_rows = 0u64;
    let mut all: HashMap<String, Vec<Row>> = HashMap::new();
    for f in &t.files {
        let path = dir.join(&f.path);
        assert!(path.is_file(), "{} listed but missing", f.path);
        match f.kind.as_str() {
            "dump" => {
                let rows = read_dump(&path);
                assert_eq!(rows.len() as u64, f.rows, "{}: row count", f.path);
                let mut counts: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
                for r in &rows {
                    *counts
                        .entry(r.event.clone())
                        .or_default()
                        .entry(r.etype.clone())
                        .or_default() += 1;
                }
                assert_eq!(counts, f.counts, "{}: counts per event", f.path);
                total_rows += f.rows;
                all.insert(f.device.clone() + "|" + &f.pid.to_string(), rows);
            }
            "python_trace" => {
                let text = fs::read_to_string(&path).unwrap();
                let mut lines = text.lines();
                assert_eq!(
                    lines.next(),
                    Some("FuncInfo,StartTime(ns),EndTime(ns),Thread Id,Process Id")
                );
                assert_eq!(lines.count() as u64, f.rows);
            }
            "compare" => {
                let text = fs::read_to_string(&path).unwrap();
                let lines: Vec<&str> = text.lines().collect();
                assert_eq!(lines[0], ",,,Base,Compare");
                assert_eq!(lines.len() as u64 - 2, f.rows);
                for l in &lines[2..] {
                    assert_eq!(l.split(',').count(), 6);
                }
            }
            _ => {}
        }
    }
    assert_eq!(total_rows, t.rows_written);
    assert!(t.files.iter().any(|f| f.device == "cpu") == cfg.host_pinned);

    let mut promoted = 0u64;
    let mut shadow_frees = 0u64;
    for (key, rows) in &all {
        let device = key.split('|').next().unwrap();
        let pid: u32 = key.split('|').nth(1).unwrap().parse().unwrap();
        let proc_t = t.processes.iter().find(|p| p.pid == pid).unwrap();

        // Device-less rows form the tail of every file of the process, identical in each.
        let tail: Vec<&Row> = rows
            .iter()
            .rev()
            .take_while(|r| r.device == "N/A")
            .collect();
        assert!(
            rows.iter().filter(|r| r.device == "N/A").count() == tail.len(),
            "{key}: N/A rows only at the end"
        );
        let n_start = tail.iter().filter(|r| r.etype == "START_TRACE").count();
        assert_eq!(n_start, proc_t.start_trace_ts.len());
        for r in rows.iter().filter(|r| r.device != "N/A") {
            assert_eq!(r.device, device, "{key}: rows of one device per file");
        }

        // Every MALLOC has exactly one FREE (same allocation_id), FREEs never come alone.
        let mut by_alloc: HashMap<u64, (u32, u32)> = HashMap::new();
        for r in rows
            .iter()
            .filter(|r| r.event == "MALLOC" || r.event == "FREE")
        {
            let a = attrs(&r.attr);
            let id = int(&a, "allocation_id").unwrap();
            assert_eq!(a["addr"], r.ptr);
            let e = by_alloc.entry(id).or_default();
            if r.event == "MALLOC" {
                e.0 += 1;
            } else {
                e.1 += 1;
            }
            let shadow = a.get("shadow").map(|s| s.as_str()) == Some("true");
            if shadow {
                assert!(
                    !a.contains_key("total") && !a.contains_key("used") && !a.contains_key("owner")
                );
                if r.event == "MALLOC" {
                    promoted += 1;
                } else {
                    shadow_frees += 1;
                }
            } else if r.etype == "PTA" {
                assert!(a.contains_key("total") && a.contains_key("used"));
            }
            if r.etype == "HOST_PINNED" {
                assert_eq!(r.device, "cpu");
                if !shadow {
                    assert_eq!(a["pinned"], "true");
                }
            }
            if r.etype == "HAL" && r.event == "MALLOC" {
                assert!(a.contains_key("page_type") && a.contains_key("alloc_type"));
            }
        }
        for (id, (m, f)) in &by_alloc {
            assert_eq!((*m, *f), (1, 1), "{key}: allocation {id} MALLOC/FREE count");
        }

        // Writer order: a block's MALLOC is immediately followed by its ACCESS rows and FREE.
        for (i, r) in rows.iter().enumerate() {
            if r.event == "MALLOC" {
                let mut j = i + 1;
                while rows[j].event == "ACCESS" {
                    assert_eq!(rows[j].ptr, r.ptr);
                    j += 1;
                }
                assert_eq!(rows[j].event, "FREE");
                assert_eq!(rows[j].ptr, r.ptr);
            }
        }

        let srt = sorted(rows);
        // PTA: recompute used from the rows (sorted, paired) → equals every row's `used`.
        if device != "cpu" {
            let mut live: HashMap<String, u64> = HashMap::new();
            let (mut sum, mut peak, mut peak_ts, mut peak_total) = (0u64, 0u64, 0u64, 0u64);
            let mut last_total: Option<u64> = None;
            let mut exps = Vec::new();
            let mut first = true;
            for r in srt
                .iter()
                .filter(|r| r.etype == "PTA" && (r.event == "MALLOC" || r.event == "FREE"))
            {
                let a = attrs(&r.attr);
                let size = int(&a, "size").unwrap();
                if r.event == "MALLOC" {
                    assert!(
                        live.insert(r.ptr.clone(), size).is_none(),
                        "address reuse in PTA"
                    );
                    sum += size;
                } else {
                    sum -= live.remove(&r.ptr).expect("FREE of a live block");
                }
                if let Some(used) = int(&a, "used") {
                    assert_eq!(used, sum, "{key}: used at id {} ts {}", r.id, r.ts);
                    let total = int(&a, "total").unwrap();
                    assert!(total >= used);
                    if first || used > peak {
                        peak = used;
                        peak_ts = r.ts;
                    }
                    first = false;
                    peak_total = peak_total.max(total);
                    if let Some(p) = last_total {
                        if total > p {
                            exps.push((r.ts, p, total));
                        }
                    }
                    last_total = Some(total);
                }
            }
            let pt = t
                .pools
                .iter()
                .find(|p| p.pid == pid && p.device == device && p.pool == "PTA")
                .unwrap();
            assert_eq!(
                (pt.peak_used, pt.peak_used_ts),
                (peak, peak_ts),
                "{key}: PTA peak"
            );
            assert_eq!(pt.peak_total, Some(peak_total));
            let texps: Vec<(u64, u64, u64)> = pt
                .expansions
                .iter()
                .map(|e| (e.ts, e.total_before, e.total_after))
                .collect();
            assert_eq!(texps, exps, "{key}: expansions");

            // HAL: pairing peak, and the HAL segment list.
            let mut live: HashMap<String, u64> = HashMap::new();
            let (mut sum, mut peak, mut peak_ts) = (0i64, 0i64, 0u64);
            let mut segs = Vec::new();
            let mut hal_sorted: Vec<&Row> = srt.iter().filter(|r| r.etype == "HAL").collect();
            hal_sorted.sort_by_key(|r| (r.ts, r.event == "MALLOC", r.pos));
            for r in hal_sorted {
                let a = attrs(&r.attr);
                let size = int(&a, "size").unwrap() as i64;
                if r.event == "MALLOC" {
                    assert!(
                        live.insert(r.ptr.clone(), size as u64).is_none(),
                        "HAL reuse without fill-in"
                    );
                    sum += size;
                    segs.push((
                        r.ts,
                        u64::from_str_radix(&r.ptr[2..], 16).unwrap(),
                        size as u64,
                        a.get("owner").cloned().unwrap_or_default(),
                        a["alloc_type"].clone(),
                        a["page_type"].clone(),
                    ));
                } else {
                    live.remove(&r.ptr).expect("HAL FREE of live block");
                    sum -= size;
                }
                if sum > peak {
                    peak = sum;
                    peak_ts = r.ts;
                }
            }
            let ht = t
                .pools
                .iter()
                .find(|p| p.pid == pid && p.device == device && p.pool == "HAL")
                .unwrap();
            assert_eq!(
                (ht.peak_used as i64, ht.peak_used_ts),
                (peak, peak_ts),
                "{key}: HAL peak"
            );
            let mut tsegs: Vec<_> = t
                .hal_segments
                .iter()
                .filter(|s| s.pid == pid && s.device == device)
                .map(|s| {
                    (
                        s.ts,
                        s.ptr,
                        s.size,
                        s.owner.clone(),
                        s.alloc_type.clone(),
                        s.page_type.clone(),
                    )
                })
                .collect();
            segs.sort();
            tsegs.sort();
            assert_eq!(segs, tsegs, "{key}: HAL segments");

            // Per-step values: PTA from the `used` attr inside each step window, HAL by pairing.
            let pta_rows: Vec<(u64, u64)> = srt
                .iter()
                .filter(|r| r.etype == "PTA")
                .filter_map(|r| int(&attrs(&r.attr), "used").map(|u| (r.ts, u)))
                .collect();
            let mut hal_deltas: Vec<(u64, bool, usize, i64)> = srt
                .iter()
                .filter(|r| r.etype == "HAL")
                .map(|r| {
                    let size = int(&attrs(&r.attr), "size").unwrap() as i64;
                    let m = r.event == "MALLOC";
                    (r.ts, m, r.pos, if m { size } else { -size })
                })
                .collect();
            hal_deltas.sort();
            for w in proc_t.steps.iter().filter(|w| w.device == device) {
                let ps = pt.steps.iter().find(|s| s.step == w.step).unwrap();
                let hs = ht.steps.iter().find(|s| s.step == w.step).unwrap();
                if !w.collected {
                    assert_eq!(
                        (ps.peak_used, ps.end_used, hs.peak_used, hs.end_used),
                        (None, None, None, None)
                    );
                    continue;
                }
                let end = w.end_ts.unwrap_or(u64::MAX);
                let inside: Vec<u64> = pta_rows
                    .iter()
                    .filter(|(ts, _)| *ts >= w.start_ts && *ts <= end)
                    .map(|x| x.1)
                    .collect();
                assert_eq!(
                    ps.peak_used,
                    inside.iter().max().copied(),
                    "{key}: PTA step {} peak",
                    w.step
                );
                let last = pta_rows
                    .iter()
                    .rev()
                    .find(|(ts, _)| *ts <= end)
                    .map(|x| x.1);
                assert_eq!(
                    ps.end_used,
                    w.end_ts.and(last),
                    "{key}: PTA step {} end",
                    w.step
                );
                let mut cur = 0i64;
                let mut pk = None;
                for &(ts, _, _, dl) in &hal_deltas {
                    if ts > end {
                        break;
                    }
                    if ts >= w.start_ts && pk.is_none() {
                        pk = Some(cur);
                    }
                    cur += dl;
                    if ts >= w.start_ts {
                        pk = pk.max(Some(cur));
                    }
                }
                assert_eq!(
                    hs.peak_used,
                    Some(pk.unwrap_or(cur) as u64),
                    "{key}: HAL step {} peak",
                    w.step
                );
                if w.end_ts.is_some() {
                    assert_eq!(
                        hs.end_used,
                        Some(cur as u64),
                        "{key}: HAL step {} end",
                        w.step
                    );
                }
            }
            if !proc_t.exit_stopped {
                // HAL still held at exit = blocks whose FREE is the exit fill-in.
                let held: u64 = srt
                    .iter()
                    .filter(|r| r.etype == "HAL" && r.event == "FREE" && r.ts == proc_t.exit_ts)
                    .map(|r| int(&attrs(&r.attr), "size").unwrap())
                    .sum();
                assert_eq!(ht.final_used, held, "{key}: HAL final");
            }

            // Breakdown at the PTA peak: live blocks by level-1 group, PTA and HAL.
            for bd in t
                .breakdowns
                .iter()
                .filter(|b| b.pid == pid && b.device == device)
            {
                let mut live: HashMap<String, (u64, Option<String>)> = HashMap::new();
                for r in srt
                    .iter()
                    .filter(|r| r.etype == bd.pool && (r.event == "MALLOC" || r.event == "FREE"))
                {
                    if r.ts > bd.at_ts {
                        break;
                    }
                    let a = attrs(&r.attr);
                    if r.event == "MALLOC" {
                        live.insert(
                            r.ptr.clone(),
                            (int(&a, "size").unwrap(), a.get("owner").cloned()),
                        );
                    } else {
                        live.remove(&r.ptr);
                    }
                }
                let mut g: BTreeMap<String, (u64, u64)> = BTreeMap::new();
                for (size, owner) in live.values() {
                    let e = g.entry(group(owner.as_ref())).or_default();
                    e.0 += size;
                    e.1 += 1;
                }
                let tg: BTreeMap<String, (u64, u64)> = bd
                    .groups
                    .iter()
                    .map(|x| (x.group.clone(), (x.bytes, x.blocks)))
                    .collect();
                assert_eq!(g, tg, "{key}: breakdown {} at {}", bd.pool, bd.at_ts);
                assert_eq!(pt.peak_used_ts, bd.at_ts);
            }
            if bd_required(cfg) {
                let pta_bd = t
                    .breakdowns
                    .iter()
                    .find(|b| b.pid == pid && b.device == device && b.pool == "PTA")
                    .unwrap();
                assert_eq!(
                    pta_bd.total_bytes, pt.peak_used,
                    "PTA breakdown sums to the PTA peak"
                );
            }
        }

        // Leak blocks: MALLOC with the leak owner and a shadow FREE at the fill-in time.
        for lb in t
            .leak
            .blocks
            .iter()
            .filter(|b| b.pid == pid && b.device == device)
        {
            let m = rows
                .iter()
                .find(|r| {
                    r.event == "MALLOC"
                        && attrs(&r.attr)
                            .get("allocation_id")
                            .map(|s| s.parse::<u64>().unwrap())
                            == Some(lb.allocation_id)
                })
                .unwrap();
            let a = attrs(&m.attr);
            assert_eq!(a["owner"], lb.owner);
            assert_eq!(int(&a, "size"), Some(lb.size));
            assert_eq!(m.ts, lb.alloc_ts);
            assert!(
                !m.py.is_empty() && !m.c.is_empty(),
                "leak MALLOCs carry stacks"
            );
            let f = rows
                .iter()
                .find(|r| {
                    r.event == "FREE"
                        && int(&attrs(&r.attr), "allocation_id") == Some(lb.allocation_id)
                })
                .unwrap();
            assert_eq!(attrs(&f.attr)["shadow"], "true");
            assert_eq!(f.ts, lb.free_ts);
        }

        // OOM: trigger, automatic snapshot, device-less RECENT/TOP at the end.
        for o in t.oom.iter().filter(|o| o.pid == pid) {
            let recent: Vec<&&Row> = tail
                .iter()
                .filter(|r| r.etype == "OOM_RECENT_ALLOC")
                .collect();
            let top: Vec<&&Row> = tail.iter().filter(|r| r.etype == "OOM_TOP_ALLOC").collect();
            assert_eq!(recent.len(), o.recent.len());
            assert_eq!(top.len(), o.top.len());
            // tail is reversed
            for (r, rec) in recent.iter().rev().zip(&o.recent) {
                let a = attrs(&r.attr);
                assert_eq!(int(&a, "size"), Some(rec.size));
                assert_eq!(int(&a, "timestamp"), Some(rec.timestamp));
                assert_eq!(a["ptr"], format!("0x{:016x}", rec.ptr));
            }
            if o.device == device {
                let trig = rows.iter().find(|r| r.etype == "OOM_TRIGGER").unwrap();
                let a = attrs(&trig.attr);
                assert_eq!(int(&a, "req_size"), Some(o.req_size));
                assert_eq!(trig.ts, o.ts);
                assert!(!trig.py.is_empty() && !trig.c.is_empty());
                let snap = rows.iter().find(|r| r.name == "OOM_Snapshot").unwrap();
                assert_eq!(snap.ts, o.snapshot_ts);
                assert_eq!(int(&attrs(&snap.attr), "free"), Some(o.free));
                assert!(
                    o.req_size >= o.free,
                    "the failed request exceeds free memory"
                );
            }
        }

        // Steps: written STEP rows are the collected steps.
        let steps: Vec<u32> = rows
            .iter()
            .filter(|r| r.etype == "STEP")
            .map(|r| r.name.parse().unwrap())
            .collect();
        let want: Vec<u32> = proc_t
            .steps
            .iter()
            .filter(|s| s.device == device && s.collected)
            .map(|s| s.step)
            .collect();
        if device != "cpu" {
            assert_eq!(steps, want, "{key}: STEP rows");
        }
    }
    assert_eq!(promoted, t.shadow.promoted_mallocs);
    assert_eq!(
        shadow_frees,
        t.shadow.stop_period_frees + t.shadow.exit_fill_ins + t.shadow.residual_fill_ins
    );
    let leak_total: u64 = t.leak.blocks.iter().map(|b| b.size).sum();
    assert_eq!(leak_total, t.leak.bytes);
    assert_eq!(
        t.leak.bytes,
        cfg.leak_bytes.div_ceil(512) * 512 * cfg.devices as u64
    );
}

fn bd_required(cfg: &GenConfig) -> bool {
    cfg.layers > 0
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn same_seed_same_bytes() {
    let cfg = GenConfig::small();
    let (a, b) = (tmp(), tmp());
    generate(&cfg, a.path()).unwrap();
    generate(&cfg, b.path()).unwrap();
    let (fa, fb) = (files_under(a.path()), files_under(b.path()));
    assert_eq!(fa.keys().collect::<Vec<_>>(), fb.keys().collect::<Vec<_>>());
    for (k, v) in &fa {
        assert!(v == &fb[k], "{k} differs between runs");
    }
    let mut other = cfg.clone();
    other.seed += 1;
    let c = tmp();
    generate(&other, c.path()).unwrap();
    assert_ne!(files_under(c.path()), fa, "another seed gives another run");
}

#[test]
fn committed_fixture_is_small_output() {
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/memscope/g3_run");
    let d = tmp();
    generate(&GenConfig::small(), d.path()).unwrap();
    let (want, got) = (files_under(&fixture), files_under(d.path()));
    assert_eq!(
        want.keys().collect::<Vec<_>>(),
        got.keys().collect::<Vec<_>>(),
        "file set"
    );
    for (k, v) in &got {
        assert!(
            v == &want[k],
            "{k} differs from the committed fixture (regenerate with memq-gen --small)"
        );
    }
    let size: usize = want.values().map(|v| v.len()).sum();
    assert!(size < 300 * 1024, "fixture is {size} bytes");
}

#[test]
fn small_run_is_self_consistent() {
    let cfg = GenConfig::small();
    let d = tmp();
    let t = generate(&cfg, d.path()).unwrap();
    check(&cfg, d.path(), &t);
    // What the small run must contain.
    assert_eq!(t.files.iter().filter(|f| f.kind == "dump").count(), 3);
    assert_eq!(t.oom.len(), 1);
    assert!(t.shadow.promoted_mallocs > 0);
    assert!(t.shadow.stop_period_frees > 0);
    assert!(t.shadow.exit_fill_ins > 0);
    assert!(t.shadow.residual_fill_ins > 0);
    assert_eq!(t.processes[0].stop_trace_ts.len(), 1);
    assert_eq!(t.processes[0].start_trace_ts.len(), 2);
    assert!(t
        .pools
        .iter()
        .any(|p| p.pool == "PTA" && !p.expansions.is_empty()));
    assert!(t
        .hal_segments
        .iter()
        .any(|s| s.owner == "CANN@HCCL" && s.size == 401 * 1024 * 1024));
    for f in t
        .files
        .iter()
        .filter(|f| f.kind == "dump" && f.device != "cpu")
    {
        assert!((200..=900).contains(&f.rows), "{}: {} rows", f.path, f.rows);
        for (e, t) in [
            ("MALLOC", "HAL"),
            ("ACCESS", "READ"),
            ("SNAPSHOT", "SNAPSHOT"),
            ("MSTX", "Range_end"),
            ("SYSTEM", "STEP"),
        ] {
            assert!(
                f.counts.get(e).and_then(|m| m.get(t)).is_some(),
                "{}: no {e}/{t}",
                f.path
            );
        }
    }
    let dev0 = fs::read_to_string(
        d.path().join(
            &t.files
                .iter()
                .find(|f| f.device == "0" && f.kind == "dump")
                .unwrap()
                .path,
        ),
    )
    .unwrap();
    for needle in [
        "shape:[",
        "shape:torch.Size([",
        "inefficient_type:early_allocation,late_deallocation",
        "total_mem:",
        "reserved_rate:",
        "OOM_Snapshot",
        "PTA@fsdp2@all_gather_output@ops",
        "KERNEL_EXECUTE_START",
        "ATB_START",
        "\"NA\"",
    ] {
        assert!(dev0.contains(needle), "device 0 dump lacks {needle}");
    }
}

#[test]
fn variants_are_self_consistent() {
    // Ends stopped (fill-ins at stop + 1), two processes, no OOM, longer stop period.
    let cfg = GenConfig {
        devices: 3,
        processes: 2,
        steps: 7,
        layers: 5,
        leak_bytes: 3 * 1024 * 1024 + 100,
        end_stopped: true,
        stop_period: Some(StopPeriod {
            stop_before_step: 2,
            start_before_step: 4,
        }),
        seed: 99,
        ..GenConfig::default()
    };
    let d = tmp();
    let t = generate(&cfg, d.path()).unwrap();
    check(&cfg, d.path(), &t);
    assert_eq!(t.processes.len(), 2);
    assert!(t.processes.iter().all(|p| p.exit_stopped));
    for lb in &t.leak.blocks {
        let p = t.processes.iter().find(|p| p.pid == lb.pid).unwrap();
        assert_eq!(lb.free_ts, p.stop_trace_ts.last().unwrap() + 1);
    }
}

#[test]
fn event_target_is_approximate() {
    let mut cfg = GenConfig::default();
    cfg.scale_to_events(60_000, false);
    let d = tmp();
    let t = generate(&cfg, d.path()).unwrap();
    let r = t.rows_written as f64;
    assert!(
        (45_000.0..=75_000.0).contains(&r),
        "{r} rows for a 60000 target"
    );
    check(&cfg, d.path(), &t);
}

#[test]
fn db_format_follows_the_tool() {
    let cfg = GenConfig {
        format: Format::Db,
        ..GenConfig::small()
    };
    let d = tmp();
    let t = generate(&cfg, d.path()).unwrap();
    let mut n = 0u64;
    for f in t.files.iter().filter(|f| f.kind == "dump") {
        assert!(f.path.ends_with(".db"));
        let conn = rusqlite::Connection::open(d.path().join(&f.path)).unwrap();
        let rows: i64 = conn
            .query_row("SELECT count(*) FROM memscope_dump", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows as u64, f.rows);
        n += f.rows;
        let mut st = conn
            .prepare("SELECT \"Event\", \"Name\", \"Attr\", \"Call Stack(Python)\", \"Process Id\" FROM memscope_dump")
            .unwrap();
        let mut it = st.query([]).unwrap();
        while let Some(r) = it.next().unwrap() {
            let (ev, name, attr, py): (String, String, String, String) = (
                r.get(0).unwrap(),
                r.get(1).unwrap(),
                r.get(2).unwrap(),
                r.get(3).unwrap(),
            );
            let v: serde_json::Value = serde_json::from_str(&attr).unwrap();
            assert!(
                v.as_object().unwrap().values().all(|x| x.is_string()),
                "{attr}"
            );
            if ev == "MSTX" {
                assert!(name.starts_with('"') && name.ends_with('"'));
            }
            if !py.is_empty() {
                assert!(py.starts_with('"') && py.ends_with('"'));
            }
            let _pid: i64 = r.get(4).unwrap();
        }
        if f.device != "cpu" {
            let tables: i64 = conn
                .query_row(
                    "SELECT count(*) FROM sqlite_master WHERE name LIKE 'python_trace_%'",
                    [],
                    |r| r.get(0),
                )
                .unwrap();
            assert_eq!(tables, 1);
        }
    }
    assert_eq!(n, t.rows_written);
    assert!(!t.files.iter().any(|f| f.kind == "python_trace"));
}
