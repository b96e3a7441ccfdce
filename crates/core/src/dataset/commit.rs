//! A dataset's build folder from creation to rename: who owns it, what a stale build left,
//! older copies, and the lock that keeps two builds off one target.

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use crate::error::{MemqError, Result};

/// The lock file inside a dataset under construction.
pub(super) const OWNER_FILE: &str = ".owner";

/// The folder a dataset `target` lives in and its file name.
pub(super) fn parent_and_name(target: &Path) -> (PathBuf, String) {
    let parent = target
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "dataset".into());
    (parent, name)
}

/// `PID-NANOS-COUNT`: unique among the processes of a machine.
pub(super) fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    format!(
        "{}-{:x}-{}",
        std::process::id(),
        nanos,
        COUNT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Whether process `pid` is alive (Linux: `/proc/PID`; elsewhere assumed alive).
pub(super) fn pid_alive(pid: u32) -> bool {
    if cfg!(target_os = "linux") {
        pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists()
    } else {
        true
    }
}

/// Whether the temporary build folder `dir` belongs to a process that is gone: its owner file
/// can be locked (the kernel released the lock of a killed process), or, with no owner file (a
/// folder of an older memq, or one killed before the file existed), the pid in its name is dead.
pub(super) fn is_stale_build(dir: &Path, suffix: &str) -> bool {
    let owner = dir.join(OWNER_FILE);
    if let Ok(f) = File::options().read(true).write(true).open(&owner) {
        return f.try_lock().is_ok();
    }
    let pid = suffix.split('-').next().and_then(|p| p.parse::<u32>().ok());
    match pid {
        Some(pid) => !pid_alive(pid),
        None => false,
    }
}

/// Removes the temporary folders `.NAME.tmp-…` beside a dataset `NAME` that killed processes
/// left; returns them with their sizes. Folders of live processes are
/// kept.
pub fn remove_stale_builds(parent: &Path, name: &str) -> Vec<(PathBuf, u64)> {
    let prefix = format!(".{name}.tmp-");
    let mut removed = Vec::new();
    let Ok(entries) = fs::read_dir(parent) else {
        return removed;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let Some(suffix) = file_name.strip_prefix(&prefix) else {
            continue;
        };
        let path = entry.path();
        if !entry.file_type().is_ok_and(|t| t.is_dir()) || !is_stale_build(&path, suffix) {
            continue;
        }
        let size = dir_size(&path);
        if fs::remove_dir_all(&path).is_ok() {
            removed.push((path, size));
        }
    }
    removed
}

/// Removes every `.NAME.old` / `.NAME.old-…` beside a dataset `NAME`. Called only under the
/// commit lock, where no such folder is in use.
pub(super) fn remove_old_copies(parent: &Path, name: &str) -> Vec<(PathBuf, u64)> {
    let exact = format!(".{name}.old");
    let prefix = format!(".{name}.old-");
    // Names older memq versions used: `.NAME.tmp-PID.old` (with_extension on the tmp folder).
    let legacy = format!(".{name}.tmp-");
    let mut removed = Vec::new();
    let Ok(entries) = fs::read_dir(parent) else {
        return removed;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let ours = file_name == exact
            || file_name.starts_with(&prefix)
            || (file_name.starts_with(&legacy) && file_name.ends_with(".old"));
        if !ours || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let path = entry.path();
        let size = dir_size(&path);
        if fs::remove_dir_all(&path).is_ok() {
            removed.push((path, size));
        }
    }
    removed
}

pub(super) fn dir_size(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if let Ok(entries) = fs::read_dir(&d) {
            for e in entries.flatten() {
                match e.file_type() {
                    Ok(t) if t.is_dir() => stack.push(e.path()),
                    Ok(_) => total += e.metadata().map(|m| m.len()).unwrap_or(0),
                    Err(_) => {}
                }
            }
        }
    }
    total
}

pub(super) fn report_cleaned(removed: &[(PathBuf, u64)]) {
    for (path, size) in removed {
        eprintln!(
            "memq: removed {} ({:.1} MiB) left by a killed or failed run",
            path.display(),
            *size as f64 / (1024.0 * 1024.0)
        );
    }
}

/// An exclusive lock on `.NAME.KIND` beside a dataset `NAME` (an flock, released when dropped or
/// when the process dies). `lock` guards the commit swap; the ingest cache holds `ingest` while
/// it checks and (re)builds a cached dataset, so concurrent shells ingest once.
///
/// The lock file is removed when the lock is released, so nothing stays beside the dataset. A
/// process that was waiting on the removed file finds, once it holds the lock, that the path no
/// longer names its file, and takes the lock again on a new one.
pub struct TargetLock {
    file: File,
    path: PathBuf,
}

impl TargetLock {
    /// Blocks until the lock is had; says so on stderr when another process holds it.
    pub fn acquire(target: &Path, kind: &str) -> Result<TargetLock> {
        use std::os::unix::fs::MetadataExt;
        let (parent, name) = parent_and_name(target);
        fs::create_dir_all(&parent).map_err(|e| MemqError::io(&parent, e))?;
        let path = parent.join(format!(".{name}.{kind}"));
        let mut said = false;
        loop {
            let file = File::options()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(|e| MemqError::io(&path, e))?;
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => {
                    if kind != "lock" && !said {
                        said = true;
                        eprintln!(
                            "memq: waiting for another memq process that is writing {}",
                            target.display()
                        );
                    }
                    file.lock().map_err(|e| MemqError::io(&path, e))?;
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(MemqError::io(&path, e)),
            }
            let held = file.metadata().map_err(|e| MemqError::io(&path, e))?;
            match fs::metadata(&path) {
                Ok(now) if now.dev() == held.dev() && now.ino() == held.ino() => {
                    return Ok(TargetLock { file, path });
                }
                // Released and removed by its holder while this process waited: again.
                _ => continue,
            }
        }
    }
}

impl Drop for TargetLock {
    fn drop(&mut self) {
        // Removed while still held, so no process can lock this file and keep it.
        let _ = fs::remove_file(&self.path);
        let _ = self.file.unlock();
    }
}
