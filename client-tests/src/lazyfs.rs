//! The harness side of `zkd-lazyfs` (src/bin/lazyfs.rs): mount it over a
//! backing directory, cut the power, mount it again.
//!
//! `kill -9` of a server keeps the kernel page cache, so it cannot tell a
//! server that fsyncs from one that does not. Under `zkd-lazyfs` everything
//! not fsynced lives only in the filesystem process; [`LazyFsMount::power_loss`]
//! kills that process and detaches the mount, leaving exactly what was made
//! durable in the backing directory.
//!
//! Mounting needs `/dev/fuse` and root (the mount is made directly, without
//! the `fusermount3` helper). Every wait is bounded, and the mount is killed
//! and detached when its handle drops, so a failing test leaves nothing
//! mounted.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the filesystem may take to appear after it is started.
const MOUNT_TIMEOUT: Duration = Duration::from_secs(10);

/// The name `zkd-lazyfs` mounts under (the "source" column of mountinfo).
const FS_NAME: &str = "zkd-lazyfs";

/// Checks that this machine can mount FUSE filesystems as the tests need.
pub fn check_fuse_available() -> Result<(), String> {
    let hint = "power-loss tests need FUSE: run them as root on a machine with /dev/fuse, \
                as client-tests/run-all.sh does";
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .map(drop)
        .map_err(|e| format!("cannot open /dev/fuse ({e}); {hint}"))
}

/// A running `zkd-lazyfs` mounted at a directory.
pub struct LazyFsMount {
    binary: PathBuf,
    backing: PathBuf,
    mountpoint: PathBuf,
    log: PathBuf,
    /// The file `zkd-lazyfs` reads each fsync's latency from, if any.
    fsync_latency: Option<PathBuf>,
    child: Option<Child>,
}

impl LazyFsMount {
    /// Mounts the `zkd-lazyfs` at `binary` over `backing` at `mountpoint`
    /// (both existing directories), logging its stderr to `log`, and waits
    /// until the mount is in place.
    pub fn mount(binary: &Path, backing: &Path, mountpoint: &Path, log: &Path) -> LazyFsMount {
        Self::mount_with_fsync_latency(binary, backing, mountpoint, log, None)
    }

    /// As [`mount`](Self::mount), with every fsync taking as many
    /// milliseconds as the file `fsync_latency` says when it is called (the
    /// file may change while mounted).
    pub fn mount_with_fsync_latency(
        binary: &Path,
        backing: &Path,
        mountpoint: &Path,
        log: &Path,
        fsync_latency: Option<&Path>,
    ) -> LazyFsMount {
        let mountpoint = mountpoint
            .canonicalize()
            .unwrap_or_else(|e| panic!("mountpoint {}: {e}", mountpoint.display()));
        let mut fs = LazyFsMount {
            binary: binary.to_owned(),
            backing: backing.to_owned(),
            mountpoint,
            log: log.to_owned(),
            fsync_latency: fsync_latency.map(Path::to_owned),
            child: None,
        };
        fs.spawn();
        fs
    }

    fn spawn(&mut self) {
        assert!(
            !self.is_mounted(),
            "{} is already mounted",
            self.mountpoint.display()
        );
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("lazyfs log file");
        let child = Command::new(&self.binary)
            .arg(&self.backing)
            .arg(&self.mountpoint)
            .args(&self.fsync_latency)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", self.binary.display()));
        self.child = Some(child);
        let deadline = Instant::now() + MOUNT_TIMEOUT;
        while !self.is_mounted() {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                panic!(
                    "zkd-lazyfs exited with {status} before mounting (mounting FUSE needs root \
                     and /dev/fuse, as in client-tests/run-all.sh); log:\n{}",
                    self.log()
                );
            }
            if Instant::now() > deadline {
                self.power_loss();
                panic!(
                    "zkd-lazyfs did not mount within {MOUNT_TIMEOUT:?}; log:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The filesystem process's id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The directory the filesystem is mounted at.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// The filesystem's stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Cuts the power: SIGKILL to the filesystem process, which drops
    /// everything not fsynced, then a lazy unmount. Processes still using
    /// the mount get errors from then on.
    pub fn power_loss(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if self.is_mounted() {
            // Fails only without the rights that mounted it; the mount is
            // dead either way, and mounting again reports it.
            let _ = nix::mount::umount2(&self.mountpoint, nix::mount::MntFlags::MNT_DETACH);
        }
    }

    /// A power cut that tears (SIGUSR1): every file keeps a random prefix of
    /// its unsynced writes, as a disk that wrote part of its queue; then the
    /// mount is detached. Falls back to [`LazyFsMount::power_loss`] if the
    /// filesystem does not exit in time.
    pub fn torn_power_loss(&mut self) {
        if let Some(child) = &mut self.child {
            let pid = nix::unistd::Pid::from_raw(child.id() as i32);
            if nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGUSR1).is_ok() {
                let deadline = Instant::now() + MOUNT_TIMEOUT;
                while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
        self.power_loss();
    }

    /// Mounts the filesystem again over the same backing directory, which
    /// seeds it: what was durable before the power loss.
    pub fn remount(&mut self) {
        self.power_loss();
        self.spawn();
    }

    /// Whether a `zkd-lazyfs` is mounted at the mountpoint.
    fn is_mounted(&self) -> bool {
        let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
            return false;
        };
        let target = self.mountpoint.to_string_lossy();
        info.lines().any(|line| {
            // "id parent dev root mountpoint options... - fstype source superoptions"
            let mut halves = line.splitn(2, " - ");
            let (Some(left), Some(right)) = (halves.next(), halves.next()) else {
                return false;
            };
            let mountpoint = left.split(' ').nth(4).map(unescape_mountinfo);
            let mut right = right.split(' ');
            let fstype = right.next().unwrap_or("");
            let source = right.next().unwrap_or("");
            mountpoint.as_deref() == Some(&*target)
                && fstype.starts_with("fuse")
                && source == FS_NAME
        })
    }
}

/// Undoes mountinfo's octal escapes (`\040` for a space, and so on).
fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| {
            std::str::from_utf8(d)
                .ok()
                .and_then(|d| u8::from_str_radix(d, 8).ok())
        });
        match (bytes[i], octal) {
            (b'\\', Some(b)) => {
                out.push(b);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Drop for LazyFsMount {
    fn drop(&mut self) {
        self.power_loss();
    }
}
