//! A member's disk and what the disk and clock nemeses do to it.
//!
//! What a cell needs is decided before its ensemble starts ([`DiskPlan`]):
//! - power loss: the dataDir is a `zkd-lazyfs` mount, so cutting the power
//!   (killing the filesystem) leaves only what was fsynced in the backing
//!   directory (see `zkd_client_tests::lazyfs`). Its fsyncs take
//!   [`FSYNC_MS`], as on a real disk, or longer on a slow one;
//! - a full disk: the backing directory is a tmpfs mount of its own, shrunk
//!   to what is in use to fill it;
//! - I/O errors: the member runs with libfiu's preload libraries, and
//!   `fiu-ctrl` makes its fsyncs or writes fail with EIO;
//! - clock jumps: the member runs with libfaketime, whose offset is read from
//!   a file the nemesis rewrites. Only the wall clock jumps (as when NTP steps
//!   it); the monotonic clock never does, on any real machine.

use rand::rngs::StdRng;
use rand::Rng;
use std::path::{Path, PathBuf};
use std::process::Command;
use zkd_client_tests::lazyfs::LazyFsMount;

/// libfiu's preload libraries, as `fiu-run -x` loads them.
const FIU_PRELOAD: &str = "/usr/lib/fiu/fiu_run_preload.so /usr/lib/fiu/fiu_posix_preload.so";
/// The FIFO prefix `fiu-ctrl` looks for by default.
const FIU_FIFO: &str = "/tmp/fiu-ctrl";
const FIU_CTRL: &str = "/usr/bin/fiu-ctrl";
/// libfaketime (Debian's `libfaketime`).
const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
/// The size of a member's tmpfs: far more than a cell writes.
const TMPFS_SIZE: &str = "512m";
/// How long an fsync takes on a member's `zkd-lazyfs` disk, in ms: an SSD
/// without a power-safe cache. Its backing directory syncs in microseconds,
/// which left a power cut almost no unsynced window to land in: a member
/// that acknowledged before its fsync was caught only now and then.
pub const FSYNC_MS: u64 = 5;

/// What the members' disks must support in a cell.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskPlan {
    /// The dataDir on `zkd-lazyfs` (power loss).
    pub lazyfs: bool,
    /// The backing directory on a tmpfs of its own (a full disk).
    pub tmpfs: bool,
    /// libfiu preloaded (EIO on fsync or write).
    pub fiu: bool,
    /// libfaketime preloaded (wall-clock jumps).
    pub faketime: bool,
}

impl DiskPlan {
    /// Every capability at once (for the mix).
    pub const ALL: DiskPlan = DiskPlan {
        lazyfs: true,
        tmpfs: true,
        fiu: true,
        faketime: true,
    };

    /// Checks that the tools the plan needs are installed.
    pub fn check_tools(&self) -> Result<(), String> {
        let mut needed = Vec::new();
        if self.lazyfs {
            zkd_client_tests::lazyfs::check_fuse_available()?;
        }
        if self.fiu {
            needed.extend(FIU_PRELOAD.split(' '));
            needed.push(FIU_CTRL);
        }
        if self.faketime {
            needed.push(FAKETIME);
        }
        match needed.iter().find(|p| !Path::new(p).exists()) {
            Some(missing) => Err(format!(
                "{missing} is missing: install fiu-utils and faketime (client-tests/run-all.sh does)"
            )),
            None => Ok(()),
        }
    }
}

/// One member's disk.
pub struct MemberDisk {
    /// The mount over `backing`, when the plan has one.
    lazyfs: Option<LazyFsMount>,
    /// What survives a power cut (a tmpfs of its own when the plan says).
    backing: PathBuf,
    /// The member's dataDir: the mount, or `backing` itself.
    data: PathBuf,
    /// libfaketime's offset file.
    clock: PathBuf,
    /// The file `zkd-lazyfs` reads its fsync latency from.
    fsync_latency: PathBuf,
    plan: DiskPlan,
    /// Holds everything above; dropped last (fields drop in declaration
    /// order), after `Drop` took the mounts in it away.
    root: tempfile::TempDir,
}

impl MemberDisk {
    /// Prepares member `myid`'s disk as `plan` asks, with the `zkd-lazyfs`
    /// binary at `lazyfs`. The myid file is written durably, as an operator
    /// provisions it once.
    pub fn new(plan: DiskPlan, myid: usize, lazyfs: &Path) -> MemberDisk {
        let root = tempfile::tempdir().expect("tempdir");
        let backing = root.path().join("backing");
        let mnt = root.path().join("mnt");
        std::fs::create_dir_all(&backing).expect("backing dir");
        if plan.tmpfs {
            run(
                "mount",
                &["-t", "tmpfs", "-o", &format!("size={TMPFS_SIZE}"), "tmpfs"],
                &backing,
            );
        }
        std::fs::write(backing.join("myid"), format!("{myid}\n")).expect("myid");
        let clock = root.path().join("clock");
        std::fs::write(&clock, "+0\n").expect("clock file");
        let fsync_latency = root.path().join("fsync-ms");
        std::fs::write(&fsync_latency, format!("{FSYNC_MS}\n")).expect("fsync latency file");
        let (data, mount) = if plan.lazyfs {
            std::fs::create_dir_all(&mnt).expect("mountpoint");
            let log = root.path().join("lazyfs.log");
            let fs = LazyFsMount::mount_with_fsync_latency(
                lazyfs,
                &backing,
                &mnt,
                &log,
                Some(&fsync_latency),
            );
            (mnt.clone(), Some(fs))
        } else {
            (backing.clone(), None)
        };
        MemberDisk {
            lazyfs: mount,
            backing,
            data,
            clock,
            fsync_latency,
            plan,
            root,
        }
    }

    /// The member's dataDir.
    pub fn data_dir(&self) -> &Path {
        &self.data
    }

    /// The command prefix that preloads what the plan needs (`env ...`), or
    /// nothing. `ip netns exec` and `env` both exec, so the member's pid is
    /// the server's own.
    pub fn wrapper(&self) -> Vec<String> {
        let mut preload = Vec::new();
        let mut env = Vec::new();
        if self.plan.fiu {
            preload.push(FIU_PRELOAD.to_owned());
            env.push(format!("FIU_CTRL_FIFO={FIU_FIFO}"));
            env.push("FIU_ENABLE=".to_owned());
        }
        if self.plan.faketime {
            preload.push(FAKETIME.to_owned());
            env.push(format!("FAKETIME_TIMESTAMP_FILE={}", self.clock.display()));
            env.push("FAKETIME_CACHE_DURATION=1".to_owned());
            env.push("FAKETIME_DONT_FAKE_MONOTONIC=1".to_owned());
        }
        if preload.is_empty() {
            return Vec::new();
        }
        let mut wrapper = vec![
            "env".to_owned(),
            format!("LD_PRELOAD={}", preload.join(" ")),
        ];
        wrapper.extend(env);
        wrapper
    }

    /// Cuts the power: everything not fsynced is gone, and the member's
    /// file operations fail from then on.
    pub fn power_cut(&mut self) {
        if let Some(fs) = &mut self.lazyfs {
            fs.power_loss();
        }
    }

    /// Cuts the power so that it tears: each file keeps a random prefix of
    /// its unsynced writes. Returns what the filesystem says it kept.
    pub fn torn_power_cut(&mut self) -> String {
        let Some(fs) = &mut self.lazyfs else {
            return "no lazyfs".to_owned();
        };
        let before = fs.log().len();
        fs.torn_power_loss();
        let log = fs.log();
        log.get(before..)
            .and_then(|l| {
                l.lines()
                    .find_map(|l| l.strip_prefix("zkd-lazyfs: torn power cut: "))
            })
            .unwrap_or("no report")
            .to_owned()
    }

    /// The filesystem process, for cutting several disks at one instant.
    pub fn lazyfs_pid(&self) -> Option<u32> {
        self.lazyfs.as_ref().and_then(LazyFsMount::pid)
    }

    /// Powers the disk on again with what survived.
    pub fn power_on(&mut self) {
        if let Some(fs) = &mut self.lazyfs {
            fs.remount();
        }
    }

    /// A new, empty disk (the member must be stopped; its myid stays).
    pub fn replace(&mut self) {
        self.power_cut();
        // zkd's files, or ZooKeeper's.
        for stored in [self.backing.join("zkd"), self.backing.join("version-2")] {
            if stored.exists() {
                std::fs::remove_dir_all(&stored).expect("wipe the backing dir");
            }
        }
        self.power_on();
    }

    /// Fills the disk: the tmpfs shrinks to what is in use, plus a little
    /// the member fills at once. Returns what it did, for the fault's note.
    pub fn fill(&self) -> String {
        if !self.plan.tmpfs {
            return "no tmpfs".to_owned();
        }
        // The member writes meanwhile, and a size below what is in use is
        // refused: measure again and retry.
        let mut last_error = String::new();
        for _ in 0..10 {
            let size_kib = used_kib(&self.backing) + 16;
            let size = format!("remount,size={size_kib}k");
            match try_run("mount", &["-o", &size], &self.backing) {
                Ok(()) => return format!("{size_kib} KiB"),
                Err(e) => last_error = e,
            }
        }
        format!("not filled: {last_error}")
    }

    /// Gives the disk its space back.
    pub fn free(&self) {
        if self.plan.tmpfs {
            let size = format!("remount,size={TMPFS_SIZE}");
            run("mount", &["-o", &size], &self.backing);
        }
    }

    /// Sets how long each fsync takes from now on, in ms (a `zkd-lazyfs`
    /// disk only).
    pub fn set_fsync_latency(&self, ms: u64) {
        std::fs::write(&self.fsync_latency, format!("{ms}\n")).expect("fsync latency file");
    }

    /// Sets the wall clock's offset from the real time (libfaketime).
    pub fn set_clock_offset(&self, seconds: i64) {
        std::fs::write(&self.clock, format!("{seconds:+}\n")).expect("clock file");
    }

    /// The file the member's newest log data is in, for the log nemeses:
    /// zkd's newest `txnlog/zkd-log.*` segment, or ZooKeeper's newest `log.*`
    /// file.
    fn newest_log(&self) -> Option<PathBuf> {
        let (zkd, v2) = (self.backing.join("zkd"), self.backing.join("version-2"));
        let newest = |dir: PathBuf, prefix: &str| {
            std::fs::read_dir(dir)
                .ok()?
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
                .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
                .map(|e| e.path())
        };
        newest(zkd.join("txnlog"), "zkd-log.").or_else(|| newest(v2, "log."))
    }

    /// Cuts 1 B to 4 KiB off the end of the newest log (bytes that were
    /// synced, if the member was killed after a sync); what it did.
    pub fn truncate_log(&self, rng: &mut StdRng) -> String {
        let Some(file) = self.newest_log() else {
            return "no log to truncate".to_owned();
        };
        let len = std::fs::read(&file).map_or(0, |b| data_end(&b) as u64);
        let cut = rng.gen_range(1..=4096).min(len);
        let done = std::fs::OpenOptions::new()
            .write(true)
            .open(&file)
            .and_then(|f| f.set_len(len - cut));
        match done {
            Ok(()) => format!("truncated log: {cut} B cut off {}", name(&file)),
            Err(e) => format!("truncated log: {} not cut: {e}", name(&file)),
        }
    }

    /// Flips one byte of the newest log within its last 64 KiB; what it did.
    pub fn corrupt_log(&self, rng: &mut StdRng) -> String {
        let Some(file) = self.newest_log() else {
            return "no log to corrupt".to_owned();
        };
        let Ok(mut bytes) = std::fs::read(&file) else {
            return format!("corrupt log: {} unreadable", name(&file));
        };
        let end = data_end(&bytes);
        if end == 0 {
            return format!("corrupt log: {} empty", name(&file));
        }
        let at = rng.gen_range(end.saturating_sub(64 * 1024)..end);
        bytes[at] ^= 0xff;
        match std::fs::write(&file, &bytes) {
            Ok(()) => format!("corrupt log: byte {at} of {} flipped", name(&file)),
            Err(e) => format!("corrupt log: {} not written: {e}", name(&file)),
        }
    }

    /// The root folder of this disk's files (lazyfs log, clock file).
    pub fn root(&self) -> &Path {
        self.root.path()
    }
}

/// Where a log file's data ends: both servers pad their logs ahead with
/// zeros (ZooKeeper to 64 MB, zkd 64 KiB past its records), and a nemesis
/// that cut or flipped those zeros would change nothing.
fn data_end(bytes: &[u8]) -> usize {
    bytes.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1)
}

/// Makes member `pid`'s fsyncs (`sync`) or writes fail with EIO.
pub fn fail_io(pid: u32, what: IoFault) {
    let names: &[&str] = match what {
        IoFault::Sync => &["posix/io/sync/fsync", "posix/io/sync/fdatasync"],
        // Positioned writes only: plain write() also carries the log and
        // the sockets, and failing those tests the logger, not the disk.
        IoFault::Write => &["posix/io/rw/pwrite", "posix/io/rw/pwritev"],
    };
    // One call for all of them (the member may die of the first), bounded:
    // fiu-ctrl blocks on the FIFO of a process that died meanwhile.
    let mut command = Command::new("timeout");
    command.args(["5", FIU_CTRL]);
    for name in names {
        command.args(["-c", &format!("enable name={name},failinfo=5")]);
    }
    let _ = command.arg(pid.to_string()).output();
}

/// Which calls an I/O fault fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoFault {
    /// fsync and fdatasync.
    Sync,
    /// pwrite and pwritev (how zkd's log and ZooKeeper's positioned
    /// writes reach a file).
    Write,
}

impl Drop for MemberDisk {
    fn drop(&mut self) {
        if let Some(fs) = &mut self.lazyfs {
            fs.power_loss();
        }
        if self.plan.tmpfs {
            let _ = nix::mount::umount2(&self.backing, nix::mount::MntFlags::MNT_DETACH);
        }
    }
}

/// `file`'s name, for a fault's description.
fn name(file: &Path) -> String {
    file.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// KiB in use on the filesystem at `dir`.
fn used_kib(dir: &Path) -> u64 {
    let out = Command::new("df")
        .args(["-k", "--output=used"])
        .arg(dir)
        .output()
        .expect("run df");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(0)
}

/// Runs `program args... path`, failing loudly.
fn run(program: &str, args: &[&str], path: &Path) {
    try_run(program, args, path).unwrap_or_else(|e| panic!("{e}"));
}

/// Runs `program args... path`; the error names the command and its stderr.
fn try_run(program: &str, args: &[&str], path: &Path) -> Result<(), String> {
    let out = Command::new(program)
        .args(args)
        .arg(path)
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{program} {args:?} {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}
