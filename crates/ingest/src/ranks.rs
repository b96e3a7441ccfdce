//! Which rank of a job each source belongs to (docs/scale-out.md §"Ranks").
//!
//! A training job runs one process per NPU ("rank"); msMemScope writes one project folder per
//! process (`msmemscope_<PID>_<time>_ascend/`, docs/formats/memscope.md §1), on every node.
//! memq places each source by its path only, so that every table can be laid out by rank:
//!
//! * **node**: the nearest folder named like a machine (`node3`, `node_3`, `host-12`, `worker07`,
//!   `server…`, `machine…` + a number); without one, the name of the input folder the source
//!   was found in (for the tool's default `memscopeDumpResults`, the folder above it).
//! * **process** (the rank's key): the rank number written in the path (below); else the
//!   project folder that holds the source; else its capture (`capture(source)`,
//!   docs/formats/memscope.md §5.9: the folder above `device_*/`, or the file itself). Files of
//!   one project folder (every `device_<N>` dump, `device_cpu`, config.json, traces) share
//!   one rank.
//! * **pid** from the project folder's name, **device** = the lowest NPU number among the
//!   process's `device_<N>` folders.
//! * **rank**: a number written in the path (`rank3`, `rank_3`, `rank-3`, `rank0_ascend_pt`,
//!   `snapshot_rank3.pickle`; the deepest one wins) when every process has one and no two
//!   processes share one; otherwise the processes are numbered 0, 1, … in the order (node,
//!   device, pid, path), nodes in natural order (`node2` before `node10`). That is the usual
//!   global rank of a job with one process per NPU and the same NPU count per node.
//!
//! Pids are not unique across nodes (nor across runs), so they never identify a rank alone.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::path::{Component, Path};

/// Where one source sits in the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub rank: i64,
    pub node: String,
    /// The NPU of the rank (`device_<N>`), when the path names one.
    pub device: Option<String>,
    /// The process id from the project folder's name.
    pub pid: Option<i64>,
}

/// What a source's path says about its place, before ranks are numbered.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PathFacts {
    node: String,
    /// The rank's key: the project folder (or the file's folder) as a path.
    process: String,
    pid: Option<i64>,
    device: Option<String>,
    rank: Option<i64>,
}

/// A source already placed (in an existing dataset being appended to).
#[derive(Debug, Clone)]
pub struct Known {
    pub path: String,
    pub name: String,
    pub rank: i64,
}

/// Places `sources` (each: absolute path, name as `ROOT/relative`), numbering new processes
/// after the ranks of `known` (sources of the dataset an append adds to); a process that is
/// already known keeps its rank.
pub fn place(sources: &[(&Path, &str)], known: &[Known]) -> Vec<Placement> {
    let facts: Vec<PathFacts> = sources.iter().map(|(p, n)| path_facts(p, n)).collect();
    // Per process: its facts merged over its files (lowest NPU, a pid, an explicit rank).
    let mut procs: BTreeMap<(String, String), PathFacts> = BTreeMap::new();
    for f in &facts {
        let e = procs
            .entry((f.node.clone(), f.process.clone()))
            .or_insert_with(|| f.clone());
        e.pid = e.pid.or(f.pid);
        e.rank = e.rank.or(f.rank);
        e.device = lowest_device(e.device.take(), f.device.clone());
    }
    let known_procs: BTreeMap<(String, String), i64> = known
        .iter()
        .map(|k| {
            let f = path_facts(Path::new(&k.path), &k.name);
            ((f.node, f.process), k.rank)
        })
        .collect();
    let taken: std::collections::BTreeSet<i64> = known_procs.values().copied().collect();
    let new: Vec<&(String, String)> = procs
        .keys()
        .filter(|k| !known_procs.contains_key(*k))
        .collect();
    // Explicit ranks only when every new process has one, none repeats, none is taken.
    let explicit: Vec<i64> = new.iter().filter_map(|k| procs[*k].rank).collect();
    let mut unique = explicit.clone();
    unique.sort_unstable();
    unique.dedup();
    let use_explicit = !new.is_empty()
        && explicit.len() == new.len()
        && unique.len() == explicit.len()
        && unique.iter().all(|r| !taken.contains(r));
    let mut ranks: BTreeMap<(String, String), i64> = known_procs.clone();
    if use_explicit {
        for k in &new {
            ranks.insert((*k).clone(), procs[*k].rank.unwrap_or(0));
        }
    } else {
        let mut order = new.clone();
        order.sort_by(|a, b| order_key(&procs[*a], &procs[*b]));
        let first = taken.iter().next_back().map(|r| r + 1).unwrap_or(0);
        for (next, k) in (first..).zip(order) {
            ranks.insert(k.clone(), next);
        }
    }
    facts
        .iter()
        .map(|f| {
            let key = (f.node.clone(), f.process.clone());
            let p = &procs[&key];
            Placement {
                rank: ranks[&key],
                node: f.node.clone(),
                device: p.device.clone(),
                pid: p.pid,
            }
        })
        .collect()
}

/// The order new processes are numbered in: node (natural), NPU, pid, path.
fn order_key(a: &PathFacts, b: &PathFacts) -> Ordering {
    natural(&a.node, &b.node)
        .then_with(|| device_order(a.device.as_deref()).cmp(&device_order(b.device.as_deref())))
        .then_with(|| a.pid.unwrap_or(i64::MAX).cmp(&b.pid.unwrap_or(i64::MAX)))
        .then_with(|| natural(&a.process, &b.process))
}

/// NPU numbers in numeric order, `cpu` and unnamed devices last.
fn device_order(d: Option<&str>) -> i64 {
    d.and_then(|d| d.parse::<i64>().ok()).unwrap_or(i64::MAX)
}

/// The lower NPU of two (the first on a tie).
fn lowest_device(a: Option<String>, b: Option<String>) -> Option<String> {
    [a, b]
        .into_iter()
        .flatten()
        .min_by_key(|d| device_order(Some(d)))
}

/// `node2` before `node10`: digit runs compare as numbers.
pub fn natural(a: &str, b: &str) -> Ordering {
    let (mut x, mut y) = (a.as_bytes(), b.as_bytes());
    loop {
        match (x.first(), y.first()) {
            (None, None) => return Ordering::Equal,
            (None, _) => return Ordering::Less,
            (_, None) => return Ordering::Greater,
            (Some(c), Some(d)) if c.is_ascii_digit() && d.is_ascii_digit() => {
                let n = x.iter().take_while(|c| c.is_ascii_digit()).count();
                let m = y.iter().take_while(|c| c.is_ascii_digit()).count();
                let (p, q) = (&x[..n], &y[..m]);
                let strip = |s: &[u8]| -> Vec<u8> {
                    let z = s.iter().take_while(|c| **c == b'0').count();
                    s[z..].to_vec()
                };
                let (sp, sq) = (strip(p), strip(q));
                let o = sp.len().cmp(&sq.len()).then_with(|| sp.cmp(&sq));
                if o != Ordering::Equal {
                    return o;
                }
                x = &x[n..];
                y = &y[m..];
            }
            (Some(c), Some(d)) => {
                if c != d {
                    return c.cmp(d);
                }
                x = &x[1..];
                y = &y[1..];
            }
        }
    }
}

fn path_facts(path: &Path, name: &str) -> PathFacts {
    let parts: Vec<String> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    let dirs = &parts[..parts.len().saturating_sub(1)];
    let project = dirs.iter().rposition(|d| project_pid(d).is_some());
    let pid = project.and_then(|i| project_pid(&dirs[i]));
    let device = dirs.iter().rev().find_map(|d| {
        d.strip_prefix("device_")
            .filter(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()))
            .map(str::to_string)
    });
    // Ranks and nodes are read from the part of the path the user gave (the input folder and
    // below; for a file given alone, its folder too): folders above it (a home folder called
    // node1, a scratch folder cross-rank-7) say nothing about the job.
    let named: Vec<&str> = name.split('/').collect();
    let mut scope: Vec<String> = named.iter().map(|s| s.to_string()).collect();
    if named.len() == 1 {
        if let Some(parent) = dirs.last() {
            scope.insert(0, parent.clone());
        }
    }
    let scope_dirs = &scope[..scope.len().saturating_sub(1)];
    let rank = scope.iter().rev().find_map(|p| rank_in(p));
    let process = match (rank, project) {
        (Some(r), _) => format!("rank {r}"),
        (None, Some(i)) => dirs[..=i].join("/"),
        (None, None) => {
            // capture(source) (docs/formats/memscope.md §5.9): the folder above `device_*/`
            // (and `dump/`), or the file itself.
            let mut end = dirs.len();
            if end > 0 && dirs[end - 1] == "dump" {
                end -= 1;
            }
            if end > 0 && dirs[end - 1].starts_with("device_") {
                dirs[..end - 1].join("/")
            } else {
                parts.join("/")
            }
        }
    };
    let root = name.split('/').next().unwrap_or(name);
    let node = scope_dirs
        .iter()
        .rev()
        .find(|d| is_node_name(d))
        .cloned()
        .unwrap_or_else(|| {
            // The input folder; for the tool's default root name, the folder above it.
            match dirs.iter().rposition(|d| d == root) {
                Some(i) if root == "memscopeDumpResults" && i > 0 => dirs[i - 1].clone(),
                _ => root.to_string(),
            }
        });
    PathFacts {
        node,
        process,
        pid,
        device,
        rank,
    }
}

/// The pid of a project folder `msmemscope_<PID>_…`.
fn project_pid(dir: &str) -> Option<i64> {
    let rest = dir.strip_prefix("msmemscope_")?;
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    if digits.is_empty() || !rest[digits.len()..].starts_with('_') {
        return None;
    }
    digits.parse().ok()
}

/// A rank number written in a path component: `rank3`, `rank_3`, `rank-3`, `RANK3`, at the
/// start of the name or after `_`, `-` or `.`, and followed by the end or a non-digit.
fn rank_in(part: &str) -> Option<i64> {
    let lower = part.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    let mut from = 0;
    while let Some(off) = lower[from..].find("rank") {
        let at = from + off;
        from = at + 4;
        if at > 0 && !matches!(bytes[at - 1], b'_' | b'-' | b'.') {
            continue;
        }
        let mut i = at + 4;
        if i < bytes.len() && matches!(bytes[i], b'_' | b'-') {
            i += 1;
        }
        let n = bytes[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 || n > 9 {
            continue;
        }
        return lower[i..i + n].parse().ok();
    }
    None
}

/// A folder named like a machine of the job: `node3`, `node_3`, `host-12`, `worker07`, …
fn is_node_name(dir: &str) -> bool {
    let lower = dir.to_ascii_lowercase();
    ["node", "host", "worker", "server", "machine"]
        .iter()
        .any(|p| match lower.strip_prefix(p) {
            Some(rest) => {
                let rest = rest.strip_prefix(['_', '-']).unwrap_or(rest);
                !rest.is_empty() && rest.bytes().all(|c| c.is_ascii_digit())
            }
            None => false,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placed(paths: &[&str], known: &[Known]) -> Vec<(i64, String, Option<String>, Option<i64>)> {
        let v: Vec<(&Path, &str)> = paths
            .iter()
            .map(|p| {
                let name = p.trim_start_matches("/data/");
                (Path::new(*p), name)
            })
            .collect();
        place(&v, known)
            .into_iter()
            .map(|p| (p.rank, p.node, p.device, p.pid))
            .collect()
    }

    #[test]
    fn a_job_is_numbered_by_node_then_npu_and_pids_repeat_across_nodes() {
        let d = "memscopeDumpResults";
        let paths = [
            format!("/data/job/node10/{d}/msmemscope_500_20251205100000_ascend/device_0/dump/memscope_dump_1.csv"),
            format!("/data/job/node2/{d}/msmemscope_501_20251205100000_ascend/device_1/dump/memscope_dump_1.csv"),
            format!("/data/job/node2/{d}/msmemscope_500_20251205100000_ascend/device_0/dump/memscope_dump_1.csv"),
            format!("/data/job/node2/{d}/msmemscope_500_20251205100000_ascend/device_cpu/dump/memscope_dump_1.csv"),
            format!("/data/job/node2/{d}/msmemscope_500_20251205100000_ascend/config.json"),
            format!("/data/job/node10/{d}/msmemscope_501_20251205100000_ascend/device_1/dump/memscope_dump_1.csv"),
        ];
        let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
        let got = placed(&refs, &[]);
        let dev = |s: &str| Some(s.to_string());
        assert_eq!(
            got,
            vec![
                (2, "node10".into(), dev("0"), Some(500)),
                (1, "node2".into(), dev("1"), Some(501)),
                (0, "node2".into(), dev("0"), Some(500)),
                (0, "node2".into(), dev("0"), Some(500)),
                (0, "node2".into(), dev("0"), Some(500)),
                (3, "node10".into(), dev("1"), Some(501)),
            ]
        );
    }

    #[test]
    fn ranks_written_in_paths_win_when_they_are_complete_and_unique() {
        let got = placed(
            &[
                "/data/run/rank_3/memscope_dump_1.csv",
                "/data/run/rank_1/memscope_dump_1.csv",
                "/data/run/snap/snapshot_rank7.pickle",
                "/data/prof/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/memory_record.csv",
            ],
            &[],
        );
        let ranks: Vec<i64> = got.iter().map(|g| g.0).collect();
        assert_eq!(ranks, vec![3, 1, 7, 0]);
        // Two processes claiming rank 1: numbered instead (by path).
        let got = placed(
            &[
                "/data/a/rank1/x/memscope_dump_1.csv",
                "/data/b/rank1/y/memscope_dump_1.csv",
            ],
            &[],
        );
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), vec![0, 1]);
        // Folders above the input say nothing: a scratch folder named cross-rank-7, a home
        // folder named node9.
        let p = place(
            &[(
                Path::new("/home/node9/cross-rank-7/job/msmemscope_1_20251205100000_ascend/device_3/dump/a.csv"),
                "job/msmemscope_1_20251205100000_ascend/device_3/dump/a.csv",
            )],
            &[],
        );
        assert_eq!((p[0].rank, p[0].node.as_str()), (0, "job"));
        assert_eq!(rank_in("prank3"), None, "not a word of its own");
        assert_eq!(rank_in("ranking"), None);
        assert_eq!(rank_in("RANK-12.pickle"), Some(12));
    }

    #[test]
    fn an_append_keeps_known_ranks_and_numbers_new_processes_after_them() {
        let p0 =
            "/data/job/node0/msmemscope_9_20251205100000_ascend/device_0/dump/memscope_dump_1.csv";
        let known = [Known {
            path: p0.into(),
            name: "job/node0/msmemscope_9_20251205100000_ascend/device_0/dump/memscope_dump_1.csv"
                .into(),
            rank: 4,
        }];
        let got = placed(
            &[
                "/data/job/node1/msmemscope_9_20251205100000_ascend/device_0/dump/memscope_dump_1.csv",
                "/data/job/node0/msmemscope_9_20251205100000_ascend/device_cpu/dump/memscope_dump_1.csv",
            ],
            &known,
        );
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), vec![5, 4]);
        assert_eq!(natural("node2", "node10"), Ordering::Less);
        assert_eq!(natural("a01", "a1"), Ordering::Equal);
    }
}
