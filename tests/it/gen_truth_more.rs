//! The attribution analyses (docs/attribution.md) against memq-gen's truth: categories at the peak
//! (`peak_split`), the live set at every step end (`mem_state_at`), injected wasted memory
//! (`wasted_memory`) and a two-run fixture with a known difference (`run_diff`). Each dump is
//! generated here through the library, in a temporary folder, and its truth is what the
//! simulation knew while it ran (crates/gen/src/truth.rs).

use std::collections::BTreeMap;
use std::path::PathBuf;

use memq_gen::{generate, generate_pair, ExtraOwner, GenConfig, PairTruth, StopPeriod, Truth};
use serde_json::Value;
use tokio::sync::OnceCell;

use crate::common::{self, query_json as query, Row};

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

/// A folder for this test process's generated dumps; those of processes that have ended are
/// removed.
fn root(name: &str) -> PathBuf {
    static CLEANED: std::sync::Once = std::sync::Once::new();
    let parent = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("gen-truth-more");
    CLEANED.call_once(|| {
        for entry in std::fs::read_dir(&parent).into_iter().flatten().flatten() {
            let pid = entry.file_name().to_string_lossy().into_owned();
            if !std::path::Path::new("/proc").join(&pid).exists() {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    });
    let root = parent.join(std::process::id().to_string()).join(name);
    let _ = std::fs::remove_dir_all(&root);
    root
}

/// The committed fixture's settings (two NPUs, a stop period, a leak, an OOM in the last step).
async fn small() -> &'static (Truth, PathBuf) {
    static RUN: OnceCell<(Truth, PathBuf)> = OnceCell::const_new();
    RUN.get_or_init(|| async {
        let dir = root("small");
        let t = generate(&GenConfig::small(), &dir).expect("generated");
        let ds = common::shared_dataset(std::slice::from_ref(&dir)).await;
        (t, ds)
    })
    .await
}

/// Injected wasted memory in a run with a stop period, a leak (held to the end) and ACCESS
/// rows on the model's own blocks.
fn wasted_config() -> GenConfig {
    GenConfig {
        devices: 2,
        steps: 5,
        layers: 3,
        leak_bytes: 3 * 1024 * 1024,
        stop_period: Some(StopPeriod {
            stop_before_step: 3,
            start_before_step: 4,
        }),
        wasted: true,
        seed: 7,
        ..GenConfig::default()
    }
}

async fn wasted() -> &'static (Truth, PathBuf) {
    static RUN: OnceCell<(Truth, PathBuf)> = OnceCell::const_new();
    RUN.get_or_init(|| async {
        let dir = root("wasted");
        let t = generate(&wasted_config(), &dir).expect("generated");
        let ds = common::shared_dataset(std::slice::from_ref(&dir)).await;
        (t, ds)
    })
    .await
}

async fn engine(ds: &std::path::Path) -> memq_engine::Engine {
    memq_engine::Engine::open(ds, &memq::catalog())
        .await
        .unwrap()
}

/// (bytes, blocks) per key.
type Split = BTreeMap<String, (i64, i64)>;

/// Generated blocks whose owner memq's default category rules map to another category than
/// what the block is by construction: (owner, the generator's category, the rules' category).
/// Listed so that the test names them instead of hiding them; every other block must agree.
const KNOWN_DISAGREEMENTS: &[(&str, &str, &str)] = &[
    // the unsharded weight gradient of the backward pass (the `mm` output reduce-scattered
    // into the kept gradient shard): `ops` makes it an activation
    ("PTA@backward@ops", "gradients", "activations"),
    // the ATB op's workspace (ATB_START's workspace_ptr names it), labelled like any op
    ("PTA@ops", "workspace", "activations"),
];

/// The category the default rules give a generated block of `owner` that truly is `category`.
fn rules_category<'a>(owner: &str, category: &'a str) -> &'a str {
    KNOWN_DISAGREEMENTS
        .iter()
        .find(|(o, c, _)| *o == owner && *c == category)
        .map_or(category, |(_, _, r)| r)
}

#[tokio::test]
async fn peak_split_categories_are_what_the_generated_blocks_are() {
    let mut disagreements = Vec::new();
    for (t, ds) in [small().await, wasted().await] {
        let engine = engine(ds).await;
        assert!(!t.peak_categories.is_empty());
        for pc in &t.peak_categories {
            let ctx = format!("seed {} pid {} device {}", t.config.seed, pc.pid, pc.device);
            let series = format!(
                "pool = 'PTA' AND pid = {} AND device = '{}'",
                pc.pid, pc.device
            );
            let rows = query(
                &engine,
                &format!(
                    "SELECT key, bytes, blocks, peak_ts, peak_bytes FROM peak_split \
                     WHERE dimension = 'category' AND {series}"
                ),
            )
            .await;
            assert!(!rows.is_empty(), "{ctx}: no PTA series");
            for r in &rows {
                assert_eq!(int(&r["peak_ts"]), pc.at_ts as i64, "{ctx}: peak time");
                assert_eq!(
                    int(&r["peak_bytes"]),
                    pc.total_bytes as i64,
                    "{ctx}: peak bytes"
                );
            }
            let got: Split = rows
                .iter()
                .map(|r| {
                    (
                        text(&r["key"]).to_string(),
                        (int(&r["bytes"]), int(&r["blocks"])),
                    )
                })
                .collect();
            // what the generator says, with the named disagreements in the rules' category
            let mut want = Split::new();
            for o in &pc.owners {
                let c = rules_category(&o.owner, &o.category);
                if c != o.category {
                    disagreements.push(format!(
                        "{ctx}: {} B in {} block(s) of {} are {}, the rules say {c}",
                        o.bytes, o.blocks, o.owner, o.category
                    ));
                }
                let e = want.entry(c.to_string()).or_default();
                e.0 += o.bytes as i64;
                e.1 += o.blocks as i64;
            }
            assert_eq!(
                got, want,
                "{ctx}: live bytes and blocks by category at the peak"
            );
            // the truth's own split by category is its split by owner and category, summed
            let mut by_cat = Split::new();
            for o in &pc.owners {
                let e = by_cat.entry(o.category.clone()).or_default();
                e.0 += o.bytes as i64;
                e.1 += o.blocks as i64;
            }
            let truth_cats: Split = pc
                .categories
                .iter()
                .map(|g| (g.group.clone(), (g.bytes as i64, g.blocks as i64)))
                .collect();
            assert_eq!(by_cat, truth_cats, "{ctx}");
            // per owner and category, block by block (peak_blocks)
            let blocks = query(
                &engine,
                &format!(
                    "SELECT COALESCE(NULLIF(owner, ''), CASE WHEN stock THEN '(stock)' ELSE pool END) AS owner, \
                            category, SUM(size) AS bytes, COUNT(*) AS blocks \
                     FROM peak_blocks WHERE {series} GROUP BY 1, 2"
                ),
            )
            .await;
            let got: BTreeMap<(String, String), (i64, i64)> = blocks
                .iter()
                .map(|r| {
                    (
                        (
                            text(&r["owner"]).to_string(),
                            text(&r["category"]).to_string(),
                        ),
                        (int(&r["bytes"]), int(&r["blocks"])),
                    )
                })
                .collect();
            let mut want: BTreeMap<(String, String), (i64, i64)> = BTreeMap::new();
            for o in &pc.owners {
                let e = want
                    .entry((
                        o.owner.clone(),
                        rules_category(&o.owner, &o.category).to_string(),
                    ))
                    .or_default();
                e.0 += o.bytes as i64;
                e.1 += o.blocks as i64;
            }
            assert_eq!(got, want, "{ctx}: by owner and category at the peak");
        }
        // the categories sum to the PTA `used` peak the tool wrote
        for pc in &t.peak_categories {
            let pool = t
                .pools
                .iter()
                .find(|p| p.pid == pc.pid && p.device == pc.device && p.pool == "PTA")
                .unwrap();
            assert_eq!(pc.total_bytes, pool.peak_used);
            assert_eq!(pc.at_ts, pool.peak_used_ts);
        }
    }
    // the runs hold the unsharded gradient at the peak: the disagreement is real, not latent
    eprintln!(
        "category disagreements at the peak:\n{}",
        disagreements.join("\n")
    );
    assert!(
        disagreements.iter().any(|d| d.contains("PTA@backward@ops")),
        "{disagreements:?}"
    );
}

/// The generator's level-1 group of a mem_state_at owner row: blocks without an owner (stock
/// memory the tool promoted, named `(stock)` by memq) are `(未标注)` in truth (§5.3).
fn truth_group(owner: &str, group: &str) -> String {
    if owner == "(stock)" || group == "(unlabelled)" {
        "(未标注)".to_string()
    } else {
        group.to_string()
    }
}

#[tokio::test]
async fn the_live_set_at_every_step_end_is_the_generators() {
    for (t, ds) in [small().await, wasted().await] {
        let engine = engine(ds).await;
        let mut steps: Vec<u32> = t.step_live.iter().map(|s| s.step).collect();
        steps.sort_unstable();
        steps.dedup();
        assert!(steps.len() >= 2, "{steps:?}");
        for step in steps {
            let rows = query(
                &engine,
                &format!(
                    "SELECT pid, device, pool, kind, owner, owner_group, at_ts, bytes, blocks \
                     FROM mem_state_at('step {step} end') WHERE pool IN ('PTA', 'HAL') AND kind IN ('pool', 'owner')"
                ),
            )
            .await;
            for sl in t.step_live.iter().filter(|s| s.step == step) {
                let ctx = format!(
                    "seed {} pid {} device {} {} step {step}",
                    t.config.seed, sl.pid, sl.device, sl.pool
                );
                let mine: Vec<&Row> = rows
                    .iter()
                    .filter(|r| {
                        int(&r["pid"]) == sl.pid as i64
                            && r["device"] == sl.device.as_str()
                            && r["pool"] == sl.pool.as_str()
                    })
                    .collect();
                let pool: Vec<&&Row> = mine.iter().filter(|r| r["kind"] == "pool").collect();
                assert_eq!(pool.len(), 1, "{ctx}: {mine:?}");
                assert_eq!(int(&pool[0]["at_ts"]), sl.at_ts as i64, "{ctx}: step end");
                assert_eq!(
                    int(&pool[0]["bytes"]),
                    sl.total_bytes as i64,
                    "{ctx}: live bytes"
                );
                assert_eq!(
                    int(&pool[0]["blocks"]),
                    sl.total_blocks as i64,
                    "{ctx}: live blocks"
                );
                let mut got = Split::new();
                for r in mine.iter().filter(|r| r["kind"] == "owner") {
                    let g = truth_group(text(&r["owner"]), text(&r["owner_group"]));
                    let e = got.entry(g).or_default();
                    e.0 += int(&r["bytes"]);
                    e.1 += int(&r["blocks"]);
                }
                let want: Split = sl
                    .groups
                    .iter()
                    .map(|g| (g.group.clone(), (g.bytes as i64, g.blocks as i64)))
                    .collect();
                assert_eq!(got, want, "{ctx}: live bytes and blocks by owner group");
            }
        }
        // and the PTA pool's end of step (`used` on the step's last row) is step_peaks' end_used
        let ends = query(
            &engine,
            "SELECT pid, device, step, end_used FROM step_peaks WHERE pool = 'PTA' AND end_used IS NOT NULL",
        )
        .await;
        let mut n = 0;
        for sl in t.step_live.iter().filter(|s| s.pool == "PTA") {
            let r = ends
                .iter()
                .find(|r| {
                    int(&r["pid"]) == sl.pid as i64
                        && r["device"] == sl.device.as_str()
                        && int(&r["step"]) == sl.step as i64
                })
                .unwrap_or_else(|| panic!("step_peaks has step {} of {}", sl.step, sl.device));
            assert_eq!(int(&r["end_used"]), sl.total_bytes as i64, "{sl:?}");
            n += 1;
        }
        assert!(n >= 4);
    }
}

#[tokio::test]
async fn wasted_memory_lists_the_injected_blocks_and_every_other_wasted_interval() {
    let (t, ds) = wasted().await;
    let engine = engine(ds).await;
    let w = t.wasted.as_ref().expect("wasted truth");
    // the injected blocks: three kinds on each NPU, each wasting its interval across the peak
    assert_eq!(w.injected.len(), 3 * t.config.devices as usize);
    for iv in &w.injected {
        assert!(iv.covers_peak, "{iv:?}");
        assert!(
            w.listed.contains(iv),
            "an injected interval is listed: {iv:?}"
        );
    }
    let key = |device: &str, ptr: i64, alloc: i64, kind: &str| {
        (device.to_string(), ptr, alloc, kind.to_string())
    };
    let rows = query(
        &engine,
        "SELECT device, pool, ptr, size, kind, alloc_ts, first_use_ts, last_use_ts, end_ts, \
                wasted_from, wasted_to, peak_ts, peak_saving \
         FROM wasted_memory WHERE origin = 'access'",
    )
    .await;
    let got: BTreeMap<_, _> = rows
        .iter()
        .map(|r| {
            (
                key(
                    text(&r["device"]),
                    int(&r["ptr"]),
                    int(&r["alloc_ts"]),
                    text(&r["kind"]),
                ),
                (
                    text(&r["pool"]).to_string(),
                    int(&r["size"]),
                    int(&r["first_use_ts"]),
                    int(&r["last_use_ts"]),
                    r["end_ts"].as_i64(),
                    int(&r["wasted_from"]),
                    int(&r["wasted_to"]),
                    int(&r["peak_ts"]),
                    int(&r["peak_saving"]),
                ),
            )
        })
        .collect();
    assert_eq!(got.len(), rows.len(), "one row per block and kind");
    let want: BTreeMap<_, _> = w
        .listed
        .iter()
        .map(|iv| {
            (
                key(&iv.device, iv.ptr as i64, iv.alloc_ts as i64, &iv.kind),
                (
                    iv.pool.clone(),
                    iv.size as i64,
                    iv.first_use_ts as i64,
                    iv.last_use_ts as i64,
                    iv.end_ts.map(|v| v as i64),
                    iv.wasted_from as i64,
                    iv.wasted_to as i64,
                    iv.peak_ts as i64,
                    iv.peak_saving as i64,
                ),
            )
        })
        .collect();
    for (k, v) in &want {
        assert_eq!(got.get(k), Some(v), "truth interval {k:?}");
    }
    for (k, v) in &got {
        assert_eq!(want.get(k), Some(v), "listed by wasted_memory {k:?}");
    }
    // the ranking: what the injected blocks save at the peak comes first on each device
    for dev in 0..t.config.devices {
        let top = query(
            &engine,
            &format!(
                "SELECT ptr, kind, peak_saving FROM wasted_memory WHERE origin = 'access' AND device = '{dev}' \
                 ORDER BY peak_saving DESC, wasted_ns DESC LIMIT 1"
            ),
        )
        .await;
        let biggest = w
            .injected
            .iter()
            .filter(|iv| iv.device == dev.to_string())
            .max_by_key(|iv| iv.peak_saving)
            .unwrap();
        assert_eq!(int(&top[0]["ptr"]), biggest.ptr as i64);
        assert_eq!(top[0]["kind"], biggest.kind.as_str());
    }
}

async fn pair() -> &'static (PairTruth, PathBuf) {
    static RUN: OnceCell<(PairTruth, PathBuf)> = OnceCell::const_new();
    RUN.get_or_init(|| async {
        let dir = root("pair");
        let base = GenConfig {
            devices: 2,
            steps: 5,
            layers: 2,
            leak_bytes: 2 * 1024 * 1024,
            stop_period: Some(StopPeriod {
                stop_before_step: 3,
                start_before_step: 4,
            }),
            seed: 11,
            ..GenConfig::default()
        };
        let t = generate_pair(&base, ExtraOwner::default(), &dir).expect("generated");
        let ds = common::shared_dataset(std::slice::from_ref(&dir)).await;
        (t, ds)
    })
    .await
}

/// The captures of runs A and B of the two-run fixture, as `capture()` names them.
async fn pair_sides(t: &PairTruth, engine: &memq_engine::Engine) -> (String, String) {
    let captures: Vec<String> = query(
        engine,
        "SELECT DISTINCT capture(source) AS c FROM blocks ORDER BY c",
    )
    .await
    .iter()
    .map(|r| text(&r["c"]).to_string())
    .collect();
    assert_eq!(captures.len(), 2, "{captures:?}");
    let side = |dir: &str| {
        captures
            .iter()
            .find(|c| c.contains(&format!("{dir}/")))
            .unwrap_or_else(|| panic!("{dir} in {captures:?}"))
            .clone()
    };
    let (a, b) = (side(&t.a_dir), side(&t.b_dir));
    for (c, want) in [(&a, &t.a_captures), (&b, &t.b_captures)] {
        assert!(want.iter().any(|w| c.ends_with(w.as_str())), "{c} {want:?}");
    }
    (a, b)
}

/// The two-run fixture's truth, an engine on it and the captures of runs A and B.
async fn pair_engine() -> (&'static PairTruth, memq_engine::Engine, String, String) {
    let (t, ds) = pair().await;
    let engine = engine(ds).await;
    let (a, b) = pair_sides(t, &engine).await;
    (t, engine, a, b)
}

#[tokio::test]
async fn run_diff_finds_run_bs_extra_owner_and_every_other_difference() {
    let (t, engine, a, b) = pair_engine().await;
    let diff = query(
        &engine,
        &format!(
            "SELECT key, step, a_alloc, b_alloc, a_peak, b_peak, a_held_end, b_held_end, a_blocks, b_blocks, status \
             FROM run_diff('{a}', '{b}') WHERE dimension = 'owner'"
        ),
    )
    .await;
    // whole runs: every owner, on both sides
    let whole: BTreeMap<String, &Row> = diff
        .iter()
        .filter(|r| r["step"].is_null())
        .map(|r| (text(&r["key"]).to_string(), r))
        .collect();
    assert_eq!(
        whole.keys().collect::<Vec<_>>(),
        t.owners.iter().map(|o| &o.owner).collect::<Vec<_>>(),
        "the owners of the two runs"
    );
    for o in &t.owners {
        let r = whole[&o.owner];
        let side = |s: &Option<memq_gen::truth::OwnerTotals>| {
            (
                s.as_ref().map_or(0, |x| x.alloc_bytes as i64),
                s.as_ref().map(|x| x.peak_bytes as i64),
                s.as_ref().map(|x| x.held_end as i64),
                s.as_ref().map_or(0, |x| x.blocks as i64),
            )
        };
        let got = |p: &str| {
            (
                int(&r[&format!("{p}_alloc")]),
                r[&format!("{p}_peak")].as_i64(),
                r[&format!("{p}_held_end")].as_i64(),
                int(&r[&format!("{p}_blocks")]),
            )
        };
        assert_eq!(got("a"), side(&o.a), "{}: side A", o.owner);
        assert_eq!(got("b"), side(&o.b), "{}: side B", o.owner);
        assert_eq!(r["status"], o.status.as_str(), "{}: status", o.owner);
    }
    let extra = t.owners.iter().find(|o| o.owner == t.extra_owner).unwrap();
    assert_eq!(extra.status, "only_b");
    let b_extra = extra.b.as_ref().unwrap();
    assert!(b_extra.held_end > 0 && b_extra.held_end < b_extra.alloc_bytes);
    // per step: the extra owner's known bytes in every collected step
    let per_step: BTreeMap<i64, &Row> = diff
        .iter()
        .filter(|r| r["key"] == t.extra_owner.as_str() && !r["step"].is_null())
        .map(|r| (int(&r["step"]), r))
        .collect();
    assert_eq!(
        per_step.keys().copied().collect::<Vec<_>>(),
        t.extra_steps
            .iter()
            .map(|s| s.step as i64)
            .collect::<Vec<_>>()
    );
    for s in &t.extra_steps {
        let r = per_step[&(s.step as i64)];
        assert_eq!(int(&r["b_alloc"]), s.bytes as i64, "step {}", s.step);
        assert_eq!(int(&r["b_blocks"]), s.blocks as i64, "step {}", s.step);
        assert_eq!(int(&r["a_alloc"]), 0);
        assert_eq!(r["status"], "only_b");
    }
}

#[tokio::test]
async fn run_diff_aligned_on_ops_puts_bs_extra_op_alone_and_pairs_every_other_op() {
    let (t, engine, a, b) = pair_engine().await;
    let rows = query(
        &engine,
        &format!(
            "SELECT dimension, key, device, point, point_name, a_pos, b_pos, a_alloc, b_alloc, \
             a_blocks, b_blocks, a_peak, b_peak, status FROM run_diff('{a}', '{b}', 'op')"
        ),
    )
    .await;
    let points: Vec<&Row> = rows.iter().filter(|r| !r["point"].is_null()).collect();
    // every op of A has its partner in B: B only adds
    assert!(
        points.iter().all(|r| !r["b_pos"].is_null()),
        "an op of B is missing"
    );
    // the ops only B has are its extra op, once per collected step on each device, and at
    // each the extra owner allocates its two blocks
    let (held, transient) = t.extra.split();
    let mut alone: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for r in points.iter().filter(|r| r["a_pos"].is_null()) {
        assert_eq!(r["point_name"], t.extra_op.as_str(), "{r:?}");
        assert_eq!(r["status"], "only_b", "{r:?}");
        if r["dimension"] == "owner" && r["key"] == t.extra_owner.as_str() {
            assert_eq!(int(&r["b_alloc"]), (held + transient) as i64, "{r:?}");
            assert_eq!(int(&r["b_blocks"]), 2, "{r:?}");
            alone
                .entry(text(&r["device"]).to_string())
                .or_default()
                .push(int(&r["point"]));
        }
    }
    let devices = t.owners.iter().find(|o| o.owner == t.extra_owner).unwrap();
    let per_device = t.extra_steps.len();
    assert_eq!(
        alone.values().map(Vec::len).collect::<Vec<_>>(),
        vec![per_device; alone.len()]
    );
    assert_eq!(
        (alone.len() * per_device * 2) as u64,
        devices.b.as_ref().unwrap().blocks
    );
    // the extra owner allocates nowhere else; at the ops both runs have, every owner that the
    // truth says is unchanged allocates and peaks the same
    let unchanged: Vec<&str> = t
        .owners
        .iter()
        .filter(|o| o.status == "same")
        .map(|o| o.owner.as_str())
        .collect();
    assert!(unchanged.len() >= 3, "{unchanged:?}");
    for r in points.iter().filter(|r| !r["a_pos"].is_null()) {
        assert_ne!(r["key"], t.extra_owner.as_str(), "{r:?}");
        if r["dimension"] == "owner" && unchanged.contains(&text(&r["key"])) {
            assert_eq!(r["status"], "same", "{r:?}");
        }
    }
    // the paired ops carry the same names on both sides, and a point is one op of each
    let names = query(
        &engine,
        &format!(
            "SELECT DISTINCT device, point, a_pos, b_pos FROM run_diff('{a}', '{b}', 'op') \
             WHERE point > 0 ORDER BY device, point"
        ),
    )
    .await;
    let mut last: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for r in &names {
        let (pa, pb) = last.entry(text(&r["device"]).to_string()).or_default();
        if !r["a_pos"].is_null() {
            assert!(int(&r["a_pos"]) > *pa, "positions rise: {r:?}");
            *pa = int(&r["a_pos"]);
        }
        assert!(int(&r["b_pos"]) > *pb, "positions rise: {r:?}");
        *pb = int(&r["b_pos"]);
    }
    // per kernel (the op or kernel in effect at each MALLOC), over the whole runs: the extra
    // op is B's only, with the extra owner's bytes among what it allocates
    let op = rows
        .iter()
        .find(|r| {
            r["point"].is_null() && r["dimension"] == "kernel" && r["key"] == t.extra_op.as_str()
        })
        .expect("the extra op as a kernel key");
    assert_eq!(op["status"], "only_b");
    let extra_total = devices.b.as_ref().unwrap().alloc_bytes as i64;
    assert!(int(&op["b_alloc"]) >= extra_total, "{op:?}");
    let at_points: i64 = points
        .iter()
        .filter(|r| r["dimension"] == "kernel" && r["key"] == t.extra_op.as_str())
        .map(|r| int(&r["b_alloc"]))
        .sum();
    assert_eq!(at_points, int(&op["b_alloc"]));
}

#[tokio::test]
async fn run_diff_aligned_on_marks_or_kernels_pairs_them_all_and_places_the_extra_bytes() {
    let (t, engine, a, b) = pair_engine().await;
    // both runs mark the same moments and launch the same kernels (the extra op launches
    // none): every mark and every kernel pairs with its twin
    for align in ["mark", "kernel"] {
        let rows = query(
            &engine,
            &format!(
                "SELECT dimension, key, device, point, point_name, a_pos, b_pos, a_alloc, b_alloc, status \
                 FROM run_diff('{a}', '{b}', '{align}') WHERE point IS NOT NULL"
            ),
        )
        .await;
        assert!(rows.iter().any(|r| int(&r["point"]) > 0), "{align}");
        for r in &rows {
            assert!(
                int(&r["point"]) == 0 || (!r["a_pos"].is_null() && !r["b_pos"].is_null()),
                "{align}: {r:?}"
            );
        }
        // the extra owner's bytes, wherever the points put them, add up to its whole run, all
        // in B
        let extra: Vec<&Row> = rows
            .iter()
            .filter(|r| r["dimension"] == "owner" && r["key"] == t.extra_owner.as_str())
            .collect();
        assert!(extra
            .iter()
            .all(|r| r["status"] == "only_b" && int(&r["a_alloc"]) == 0));
        let total: i64 = extra.iter().map(|r| int(&r["b_alloc"])).sum();
        let o = t.owners.iter().find(|o| o.owner == t.extra_owner).unwrap();
        assert_eq!(total, o.b.as_ref().unwrap().alloc_bytes as i64, "{align}");
    }
    // a bad alignment name is refused, naming the ones there are
    let err = crate::common::query_error(
        &engine,
        &format!("SELECT * FROM run_diff('{a}', '{b}', 'steps')"),
    )
    .await;
    assert!(
        err.contains("align `steps` is not one of step, mark, op, kernel"),
        "{err}"
    );
}
