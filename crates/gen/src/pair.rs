//! A two-run fixture with a known difference (`memq-gen --compare-run`): run A is the base
//! configuration, run B the same with an extra owner ([`GenConfig::extra_owner`],
//! `PTA@eval_cache`) that allocates a known number of bytes per step on every NPU, inside an op
//! of its own (`aten.empty.memory_format`), and holds part of them to the end. The extra owner's rows take fixed time steps, draw nothing from
//! the PRNG and live in PTA segments of their own, so everything else in B happens as in A,
//! only later; what B's extra blocks change elsewhere — the HAL segments the caching pool
//! reserves for them (`CANN@APP`), and with a stop period the held blocks the tool promotes
//! (`(stock)`) — is in the truth as computed, not assumed.
//!
//! Layout:
//! ```text
//! <out>/runA/truth.json, <out>/runA/msmemscope_<PID>_<ts>_ascend/...   (a capture)
//! <out>/runB/truth.json, <out>/runB/msmemscope_<PID>_<ts>_ascend/...   (a capture)
//! <out>/pair_truth.json                                                 ([`PairTruth`])
//! ```

use std::path::Path;

use serde::{Deserialize, Serialize};

use memq_core::error::Result;

use crate::truth::{OwnerTotals, StepAlloc, Truth};
use crate::{generate, text, write_json, ExtraOwner, GenConfig};

/// Folder names of the two runs under the output folder.
pub const RUN_A: &str = "runA";
pub const RUN_B: &str = "runB";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairTruth {
    pub generator: String,
    /// Run A's folder and its project (capture) folder, relative to the output folder.
    pub a_dir: String,
    pub a_captures: Vec<String>,
    pub b_dir: String,
    pub b_captures: Vec<String>,
    /// The owner only run B has.
    pub extra_owner: String,
    /// The op only run B has: the extra owner allocates inside it, once per collected step
    /// on every NPU (one ATEN_START / ATEN_END pair each).
    pub extra_op: String,
    pub extra: ExtraOwner,
    /// Every owner of either run (whole runs, all devices): its totals on each side (`None`:
    /// absent there) and `status` `only_a`, `only_b`, `changed` or `same` (same = equal bytes
    /// allocated, blocks, peak and held at the end).
    pub owners: Vec<OwnerDiff>,
    /// Run B's extra owner per collected step (all devices).
    pub extra_steps: Vec<StepAlloc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OwnerDiff {
    pub owner: String,
    pub a: Option<OwnerTotals>,
    pub b: Option<OwnerTotals>,
    pub status: String,
}

/// Writes runs A (`base`) and B (`base` + `extra`) under `out` with their truths and
/// `out/pair_truth.json`.
pub fn generate_pair(base: &GenConfig, extra: ExtraOwner, out: &Path) -> Result<PairTruth> {
    let a_cfg = GenConfig {
        extra_owner: None,
        ..base.clone()
    };
    let b_cfg = GenConfig {
        extra_owner: Some(extra),
        ..base.clone()
    };
    b_cfg.validate()?;
    let a = generate(&a_cfg, &out.join(RUN_A))?;
    let b = generate(&b_cfg, &out.join(RUN_B))?;
    let t = pair_truth(&a, &b, extra);
    write_json(&out.join("pair_truth.json"), &t)?;
    Ok(t)
}

fn pair_truth(a: &Truth, b: &Truth, extra: ExtraOwner) -> PairTruth {
    let mut names: Vec<&str> = a
        .owners
        .iter()
        .chain(&b.owners)
        .map(|o| o.owner.as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    let find = |t: &Truth, n: &str| t.owners.iter().find(|o| o.owner == n).cloned();
    let owners = names
        .into_iter()
        .map(|n| {
            let (x, y) = (find(a, n), find(b, n));
            let status = match (&x, &y) {
                (Some(_), None) => "only_a",
                (None, Some(_)) => "only_b",
                (Some(p), Some(q)) if p == q => "same",
                _ => "changed",
            };
            OwnerDiff {
                owner: n.to_string(),
                a: x,
                b: y,
                status: status.to_string(),
            }
        })
        .collect();
    let captures = |run: &str, t: &Truth| {
        t.processes
            .iter()
            .map(|p| format!("{run}/{}", p.dir))
            .collect()
    };
    PairTruth {
        generator: a.generator.clone(),
        a_dir: RUN_A.to_string(),
        a_captures: captures(RUN_A, a),
        b_dir: RUN_B.to_string(),
        b_captures: captures(RUN_B, b),
        extra_owner: text::OWN_EXTRA.to_string(),
        extra_op: text::OP_EXTRA.to_string(),
        extra,
        owners,
        extra_steps: b.extra_owner_steps.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_extra_owner_is_new_and_its_bytes_are_known() {
        let dir = tempfile::tempdir().unwrap();
        let base = GenConfig {
            devices: 2,
            steps: 4,
            layers: 2,
            stop_period: None,
            ..GenConfig::default()
        };
        let x = ExtraOwner::default();
        let t = generate_pair(&base, x, dir.path()).unwrap();
        let (held, transient) = x.split();
        let e = t
            .owners
            .iter()
            .find(|o| o.owner == text::OWN_EXTRA)
            .unwrap();
        assert_eq!(e.status, "only_b");
        let b = e.b.as_ref().unwrap();
        assert_eq!(b.alloc_bytes, 2 * 4 * (held + transient));
        assert_eq!(b.blocks, 2 * 4 * 2);
        assert_eq!(b.held_end, 2 * 4 * held);
        // a device's own series: 4 held blocks and one transient at the highest
        assert_eq!(b.peak_bytes, 4 * held + transient);
        assert_eq!(t.extra_steps.len(), 4);
        assert!(t
            .extra_steps
            .iter()
            .all(|s| s.bytes == 2 * (held + transient) && s.blocks == 4));
        // everything else is run A's but the HAL segments the extra blocks live in
        let differ: Vec<(&str, &str)> = t
            .owners
            .iter()
            .filter(|o| o.status != "same")
            .map(|o| (o.owner.as_str(), o.status.as_str()))
            .collect();
        assert_eq!(
            differ,
            vec![(text::OWN_APP, "changed"), (text::OWN_EXTRA, "only_b")]
        );
        let app = t.owners.iter().find(|o| o.owner == text::OWN_APP).unwrap();
        let (a, b) = (app.a.as_ref().unwrap(), app.b.as_ref().unwrap());
        assert!(b.alloc_bytes > a.alloc_bytes && b.held_end > a.held_end);
        assert!(dir.path().join("runA/truth.json").exists());
        assert!(dir.path().join("pair_truth.json").exists());
    }
}
