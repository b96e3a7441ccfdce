//! `memq-fuzz TARGET|all [--seconds N] [--corpus DIR] [--crashes DIR]`: a coverage-free
//! mutation fuzzer on the stable toolchain (fuzz/README.md). It loads the seeds of
//! `fuzz/corpus/TARGET/`, mutates them (bit flips, interesting bytes, the target's tokens,
//! inserts, deletes, duplicates, splices, truncations) and runs the target on each input for
//! the time given (`--seconds`, default `$MEMQ_FUZZ_SECONDS` or 30). A panic or broken
//! invariant is saved to the crashes folder and makes the exit code 1. It prints the
//! executions per target.

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

fn tokens(target: &str) -> &'static [&'static [u8]] {
    match target {
        "attr" => &[
            b"{",
            b"}",
            b":",
            b",",
            b"size:",
            b"owner:",
            b"{\"size\":\"1\"}",
            b"0x",
            b"-",
            b"99999999999999999999",
            b"[",
            b"]",
            b"\\",
            b"\"",
        ],
        "records" => &[
            b"\n",
            b"\r\n",
            b"\r",
            b"\"",
            b"\"\"",
            b",",
            b"1,MALLOC,",
            b"2,FREE,",
            b"\"{size:1}\"",
            b"\0",
            b"\xff",
            b"N/A",
        ],
        "pickle" => &[
            b"\x80\x04",
            b"\x95",
            b"}",
            b"]",
            b"(",
            b"t",
            b"s",
            b"a",
            b"e",
            b"u",
            b".",
            b"J",
            b"K",
            b"M",
            b"X",
            b"\x8c",
            b"h",
            b"q",
            b"r",
            b"\x94",
            b"0",
            b"2",
            b"c",
            b"\x93",
            b"R",
        ],
        _ => &[
            b"SQLite format 3\0",
            b"\0\0",
            b"\xff\xff",
            b"memscope_dump",
            b"CREATE TABLE",
        ],
    }
}

const INTERESTING: &[u8] = &[
    0, 1, 0x7f, 0x80, 0xff, b'\n', b'\r', b'"', b',', b':', b'{', b'}',
];

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>], input: &[u8], target: &str, max_len: usize) -> Vec<u8> {
    let mut data = input.to_vec();
    let rounds = 1 + rng.below(4);
    for _ in 0..rounds {
        let len = data.len();
        match rng.below(9) {
            0 if len > 0 => {
                let i = rng.below(len);
                data[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                data[i] = INTERESTING[rng.below(INTERESTING.len())];
            }
            2 => {
                let t = tokens(target);
                let tok = t[rng.below(t.len())];
                let i = rng.below(len + 1);
                data.splice(i..i, tok.iter().copied());
            }
            3 => {
                let i = rng.below(len + 1);
                let n = 1 + rng.below(8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                data.splice(i..i, bytes);
            }
            4 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(64));
                data.drain(i..i + n);
            }
            5 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(256));
                let chunk = data[i..i + n].to_vec();
                let at = rng.below(len + 1);
                data.splice(at..at, chunk);
            }
            6 if !seeds.is_empty() => {
                let other = &seeds[rng.below(seeds.len())];
                if !other.is_empty() {
                    let i = rng.below(other.len());
                    let n = 1 + rng.below((other.len() - i).min(512));
                    let at = rng.below(len + 1);
                    data.splice(at..at, other[i..i + n].iter().copied());
                }
            }
            7 if len > 0 => data.truncate(rng.below(len)),
            _ if len > 0 => {
                // a run of one byte (long lines, deep nesting)
                let i = rng.below(len + 1);
                let b = data[rng.below(len)];
                let n = 1 + rng.below(2048);
                data.splice(i..i, std::iter::repeat_n(b, n));
            }
            _ => data.push(rng.next() as u8),
        }
    }
    data.truncate(max_len);
    data
}

fn load_seeds(dir: &Path) -> Vec<Vec<u8>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files.iter().filter_map(|p| std::fs::read(p).ok()).collect()
}

struct Stats {
    execs: u64,
    failures: u64,
    slowest: Duration,
}

fn fuzz(target: &str, seconds: u64, corpus: &Path, crashes: &Path, seed: u64) -> Stats {
    let seeds = load_seeds(&corpus.join(target));
    let scratch = tempfile::TempDir::new().expect("scratch dir");
    let max_len = match target {
        "db" | "pickle" => 512 << 10,
        _ => 64 << 10,
    };
    let mut rng = Rng(seed | 1);
    let mut stats = Stats {
        execs: 0,
        failures: 0,
        slowest: Duration::ZERO,
    };
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut pool: Vec<Vec<u8>> = seeds.clone();
    if pool.is_empty() {
        pool.push(Vec::new());
    }
    // Seeds first, unmutated.
    let mut queue: Vec<Vec<u8>> = seeds.clone();
    while Instant::now() < deadline {
        let input = match queue.pop() {
            Some(s) => s,
            None => {
                let base = &pool[rng.below(pool.len())];
                mutate(&mut rng, &seeds, base, target, max_len)
            }
        };
        let started = Instant::now();
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
            memq_fuzz::run(target, &input, scratch.path())
        }));
        let took = started.elapsed();
        stats.slowest = stats.slowest.max(took);
        stats.execs += 1;
        let failure = match result {
            Ok(Ok(())) => None,
            Ok(Err(why)) => Some(why),
            Err(p) => Some(format!(
                "panic: {}",
                p.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default()
            )),
        };
        let failure =
            failure.or_else(|| (took > Duration::from_secs(5)).then(|| format!("slow: {took:?}")));
        if let Some(why) = failure {
            stats.failures += 1;
            let _ = std::fs::create_dir_all(crashes);
            let name = format!("{target}-{:016x}.bin", fnv(&input));
            let path = crashes.join(&name);
            let _ = std::fs::write(&path, &input);
            eprintln!(
                "memq-fuzz: {target}: {why} (input saved to {})",
                path.display()
            );
            if stats.failures >= 20 {
                break;
            }
        }
        // Keep some mutants as bases, so mutations stack up.
        if pool.len() < 4096 && rng.below(16) == 0 {
            pool.push(input);
        }
    }
    stats
}

fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ x as u64).wrapping_mul(0x100_0000_01b3)
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut target = None;
    let mut seconds: u64 = std::env::var("MEMQ_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let mut corpus = root.join("corpus");
    let mut crashes = root.join("crashes");
    let mut seed: u64 = std::env::var("MEMQ_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x6d65_6d71);
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--seconds" => seconds = it.next().and_then(|s| s.parse().ok()).expect("--seconds N"),
            "--corpus" => corpus = PathBuf::from(it.next().expect("--corpus DIR")),
            "--crashes" => crashes = PathBuf::from(it.next().expect("--crashes DIR")),
            "--seed" => seed = it.next().and_then(|s| s.parse().ok()).expect("--seed N"),
            t if !t.starts_with('-') => target = Some(t.to_string()),
            other => {
                eprintln!("memq-fuzz: unknown option {other}");
                std::process::exit(2);
            }
        }
    }
    let target = target.unwrap_or_else(|| "all".into());
    let targets: Vec<&str> = if target == "all" {
        memq_fuzz::TARGETS.to_vec()
    } else if memq_fuzz::TARGETS.contains(&target.as_str()) {
        vec![memq_fuzz::TARGETS
            .iter()
            .find(|t| **t == target)
            .copied()
            .unwrap_or("attr")]
    } else {
        eprintln!(
            "memq-fuzz: targets: {} or all",
            memq_fuzz::TARGETS.join(", ")
        );
        std::process::exit(2);
    };
    // Panics are reported by the driver, once per input.
    std::panic::set_hook(Box::new(|_| {}));
    let mut failed = false;
    for t in targets {
        let s = fuzz(t, seconds, &corpus, &crashes, seed);
        println!(
            "memq-fuzz: {t:<8} {:>9} execs in {seconds} s ({:.0}/s), {} failures, slowest {:?}",
            s.execs,
            s.execs as f64 / seconds.max(1) as f64,
            s.failures,
            s.slowest
        );
        failed |= s.failures > 0;
    }
    std::process::exit(if failed { 1 } else { 0 });
}
