//! Large files (old snapshots, purged log segments) removed a slice at a
//! time, off the thread that drops them.
//!
//! Why: on a file system mounted with `discard` (this project's machine is),
//! unlinking a 50 MB snapshot discards all its blocks at once, and a log
//! fdatasync queued behind that waited 9-13 ms instead of 0.2 ms. Cut by
//! 1 MiB with a 2 ms pause between, no sync waited more than 0.6 ms.
//!
//! [`remove`] renames the file out of its store's names at once (the caller
//! syncs the directory, as after an unlink, so it is as gone on return as
//! if unlinked); one background thread then shrinks and unlinks it.
//! [`sweep`] hands over what a crash left behind when a store opens.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What a file waiting for removal is renamed to, plus a unique suffix; it
/// contains no store's own file prefix, so no listing mistakes it for one.
const PREFIX: &str = "zkd-removing.";
/// Bytes cut off per step: the discard a concurrent sync may wait behind.
const SLICE: u64 = 1 << 20;
/// Between two steps, so that queued syncs go first.
const PAUSE: Duration = Duration::from_millis(2);

/// Removes `path`: at once if it is small, otherwise renamed now and cut
/// down and unlinked in the background. The caller syncs the directory.
pub(super) fn remove(path: &Path) -> std::io::Result<()> {
    if std::fs::metadata(path)?.len() <= SLICE {
        return std::fs::remove_file(path);
    }
    let aside = path.with_file_name(unique_name());
    std::fs::rename(path, &aside)?;
    hand_over(aside);
    Ok(())
}

/// Hands over the files in `dir` a crash left waiting for removal.
pub(super) fn sweep(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().as_bytes().starts_with(PREFIX.as_bytes()) {
            hand_over(entry.path());
        }
    }
}

fn unique_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    // The clock keeps names unique across restarts, the counter within one.
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{PREFIX}{nanos:x}-{n}")
}

fn hand_over(path: PathBuf) {
    static REMOVER: OnceLock<Mutex<Sender<PathBuf>>> = OnceLock::new();
    let remover = REMOVER.get_or_init(|| {
        let (tx, rx) = channel::<PathBuf>();
        let spawned = std::thread::Builder::new()
            .name("zkd-remover".into())
            .spawn(move || rx.into_iter().for_each(|p| cut_and_unlink(&p)));
        if let Err(e) = spawned {
            tracing::warn!("no thread for gradual removals, files are left: {e}");
        }
        Mutex::new(tx)
    });
    if let Ok(tx) = remover.lock() {
        // A send fails only without the thread; the file is swept at the next open.
        let _ = tx.send(path);
    }
}

fn cut_and_unlink(path: &Path) {
    let cut = || -> std::io::Result<()> {
        let file = std::fs::OpenOptions::new().write(true).open(path)?;
        let mut len = file.metadata()?.len();
        while len > SLICE {
            len -= SLICE;
            file.set_len(len)?;
            std::thread::sleep(PAUSE);
        }
        drop(file);
        std::fs::remove_file(path)
    };
    if let Err(e) = cut() {
        tracing::warn!(file = %path.display(), "removing a discarded file: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    fn wait_until_empty(dir: &Path) {
        for _ in 0..500 {
            if names(dir).is_empty() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("left in {}: {:?}", dir.display(), names(dir));
    }

    #[test]
    fn a_large_file_is_gone_from_its_name_at_once_and_from_the_disk_soon() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("snapshot.1");
        std::fs::write(&big, vec![1u8; (5 * SLICE + 7) as usize]).unwrap();
        let small = dir.path().join("snapshot.2");
        std::fs::write(&small, b"small").unwrap();
        remove(&big).unwrap();
        remove(&small).unwrap();
        let left = names(dir.path());
        assert!(
            left.iter().all(|n| n.starts_with(PREFIX)),
            "only files waiting for removal are left: {left:?}"
        );
        wait_until_empty(dir.path());
    }

    #[test]
    fn files_a_crash_left_waiting_are_swept() {
        let dir = tempfile::tempdir().unwrap();
        let left = dir.path().join(unique_name());
        std::fs::write(&left, vec![1u8; (2 * SLICE) as usize]).unwrap();
        let other = dir.path().join("zkd-log.0000000000000001");
        std::fs::write(&other, b"kept").unwrap();
        sweep(dir.path());
        for _ in 0..500 {
            if !left.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!left.exists(), "a leftover is removed");
        assert!(other.exists(), "nothing else is touched");
    }
}
