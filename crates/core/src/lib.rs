//! memq-core: what every other memq crate builds on.
//!
//! - [`error`]: the one error type; input errors name file, place and reason.
//! - [`catalog`]: table and column declarations (type, unit, doc, sort order).
//! - [`format`]: the `Format` trait an input family implements, and the `Catalog` of formats.
//! - [`dataset`]: the on-disk dataset — manifest, Parquet writers, atomic commit.
//! - [`rejects`]: the `rejects` and `sources` tables every format shares.
//! - [`function`]: a small frame for scalar SQL functions over whole arrays.
//! - [`fnv1a`]: the hash of the names memq derives from contents (cache folders, library
//!   fingerprints).
//! - [`memory_limit`]: the one memory limit of the process (`--memory-limit`).
//! - [`release_free_memory`]: freed memory handed back to the system between phases.

pub mod catalog;
pub mod dataset;
pub mod error;
pub mod format;
pub mod function;
pub mod rejects;

/// The memory limit queries and ingest sorts run under, in bytes: set once per process by
/// `--memory-limit` or the library's `memory_limit` option ([`set_memory_limit`]), else
/// `$MEMQ_MEMORY_LIMIT_MB`, else 8 GiB. Sessions read it when they are opened.
///
/// When the process's address space is capped (`ulimit -v`, `prlimit --as`), the limit is
/// never more than [`budget_under_cap`] of it: the cap counts every mapping (the binary, thread
/// stacks, allocator arenas), and an allocation past it aborts the process, so memq spills or
/// stops with the memory-limit message well before.
pub fn memory_limit() -> usize {
    let wanted = match MEMORY_LIMIT.load(std::sync::atomic::Ordering::Relaxed) {
        0 => std::env::var("MEMQ_MEMORY_LIMIT_MB")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|mb| *mb > 0)
            .map(|mb| mb << 20)
            .unwrap_or(8 << 30),
        set => set,
    };
    match address_space_cap() {
        Some(cap) => wanted.min(budget_under_cap(cap)),
        None => wanted,
    }
}

/// What memq's memory limit may be under an address-space cap of `cap` bytes: half of what
/// is left after 1 GiB for the mappings every run has (the 200 MB binary, a 512 MiB main
/// stack and 64 MiB worker stacks, reserved but mostly untouched), at least 64 MiB. 2 GiB
/// gives 512 MiB, 4 GiB gives 1.5 GiB.
pub fn budget_under_cap(cap: u64) -> usize {
    let left = cap.saturating_sub(1 << 30) / 2;
    usize::try_from(left).unwrap_or(usize::MAX).max(64 << 20)
}

/// Fits the allocator to an address-space cap, when there is one; call it before any thread
/// starts. glibc gives each thread that contends an arena of its own, each reserving 64 MiB of
/// address space: up to 16 on 2 cores, a GiB of a 2 GiB cap that a big ingest then lacks (a
/// 1.17 GB pickle under `prlimit --as 2G` aborted once in two runs). Two arenas are enough for
/// memq's few threads.
pub fn fit_to_address_space_cap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if address_space_cap().is_some() {
        // SAFETY: mallopt only sets an allocator parameter; no thread allocates concurrently yet.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
}

/// The soft limit of the process's address space (`RLIMIT_AS`), when there is one.
pub fn address_space_cap() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes the struct it is given and nothing else.
        let ok = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) } == 0;
        (ok && lim.rlim_cur != libc::RLIM_INFINITY).then_some(lim.rlim_cur)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Sets [`memory_limit`] for what is opened from now on (0 goes back to the default).
pub fn set_memory_limit(bytes: usize) {
    MEMORY_LIMIT.store(bytes, std::sync::atomic::Ordering::Relaxed);
}

static MEMORY_LIMIT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// FNV-1a, 64 bit: a hash that is stable across builds and platforms, for names and
/// fingerprints that must not change when memq is rebuilt (the cache folder of a set of inputs,
/// the fingerprint of the SQL library).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Hands the memory the allocator holds free back to the system (glibc's `malloc_trim`; nothing
/// elsewhere). Called between the phases of an ingest: the merge of a dump frees a few hundred
/// MiB spread over every thread's arena, which glibc keeps; the phase after it allocates in
/// other arenas, so without this its memory adds to the merge's on the peak RSS.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn malloc_trim(pad: usize) -> std::ffi::c_int;
        }
        // SAFETY: malloc_trim takes no pointer and only releases free pages of the arenas.
        unsafe {
            malloc_trim(0);
        }
    }
}
