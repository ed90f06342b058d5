//! `zkd-lazyfs`: a FUSE filesystem that loses everything not fsynced when it is
//! killed, to test durability against power loss rather than process death.
//!
//! Usage: `zkd-lazyfs <backing-dir> <mountpoint> [<fsync-latency-file>]`.
//!
//! Why: `kill -9` of a server leaves the kernel page cache intact, so a server
//! that never fsyncs passes every kill-9 test. Here (as in LazyFS) the
//! page cache is this process's memory: every file's contents live only in
//! memory, reads and writes see that cache, and nothing reaches
//! `<backing-dir>` except through `fsync`/`fdatasync`. Killing this process
//! (SIGKILL) and lazily unmounting is the power cut; what survives is exactly
//! `<backing-dir>`, which seeds the cache on the next start.
//!
//! Durability rules, kept simple but never more forgiving than a real disk
//! for file data:
//! - `fsync`/`fdatasync` of a file (FUSE `FSYNC`) writes its current contents
//!   to the same relative path in `<backing-dir>` (creating parent directories
//!   there as needed) and fsyncs it. It is the only operation that moves file
//!   data or a new file to the backing directory. `sync_file_range`, `msync`
//!   and closing a file do not reach the filesystem at all (writes are
//!   write-through to this process, so the kernel holds no dirty pages) and
//!   make nothing durable.
//! - A new file or directory exists in `<backing-dir>` only once a file in or
//!   under it has been fsynced; fsyncing a directory (`FSYNCDIR`) is accepted
//!   and does nothing.
//! - `unlink`, `rmdir` and `rename` are applied to `<backing-dir>` at once when
//!   the source exists there, in the order they happen (like a filesystem
//!   with ordered metadata journaling). This is more durable than POSIX
//!   requires for metadata, a choice made for simplicity; it never makes
//!   unsynced data durable. A file renamed before it was ever fsynced stays
//!   out of the backing directory until it is fsynced under its new name.
//! - Locks (`flock`, `fcntl`) are left to the kernel, which handles them
//!   locally because the filesystem does not claim lock support at init.
//!
//! Every request is bounded (file size, total cached bytes, node count,
//! directory depth); a bad request gets an errno, never a panic.
//!
//! SIGUSR1 is a power cut that tears: every file in the backing directory
//! gets a random prefix of its unsynced writes (as a disk that had written
//! part of its queue when the power went), then the process exits. SIGKILL
//! is the clean cut, where no unsynced byte survives.
//!
//! The optional `<fsync-latency-file>` holds how long each fsync takes, in
//! milliseconds (read at every fsync, so it can change while mounted; a
//! missing or unreadable file is 0). A slow fsync waits first and only then
//! makes the file durable and answers, in a thread of its own, so the rest of
//! the filesystem keeps serving: as on a real disk, the data an fsync covers
//! is at risk until the fsync returns. Without it, an fsync into a tmpfs or
//! page-cache backing takes microseconds, which no real disk does.

mod state;

use fuser::{
    Config, Errno, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    MountOption, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use state::*;
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};
/// The FUSE face of [`State`].
struct LazyFs {
    state: Arc<Mutex<State>>,
    /// The file holding each fsync's latency in milliseconds, if any.
    fsync_latency: Option<PathBuf>,
}

/// The longest fsync latency honoured: a typo must not hang the member.
const MAX_FSYNC_LATENCY: Duration = Duration::from_secs(10);

impl LazyFs {
    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// What the latency file says now (0 if there is none or it is unreadable).
    fn fsync_latency(&self) -> Duration {
        let ms = self
            .fsync_latency
            .as_ref()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .and_then(|text| text.trim().parse::<u64>().ok())
            .unwrap_or(0);
        Duration::from_millis(ms).min(MAX_FSYNC_LATENCY)
    }

    fn entry(&self, ino: Res<u64>, reply: ReplyEntry) {
        let state = self.lock();
        match ino.and_then(|ino| Ok(state.node(ino)?.attr(ino))) {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }
}

fn time(t: TimeOrNow) -> SystemTime {
    match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => SystemTime::now(),
    }
}

impl Filesystem for LazyFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let ino = self.lock().child(parent.0, name);
        self.entry(ino, reply);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let state = self.lock();
        match state.node(ino.0) {
            Ok(node) => reply.attr(&TTL, &node.attr(ino.0)),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut state = self.lock();
        let result = (|| {
            if let Some(size) = size {
                state.resize(ino.0, size)?;
            }
            let node = state.node_mut(ino.0)?;
            if let Some(mode) = mode {
                node.perm = (mode & 0o7777) as u16;
            }
            if let Some(uid) = uid {
                node.uid = uid;
            }
            if let Some(gid) = gid {
                node.gid = gid;
            }
            if let Some(t) = atime {
                node.atime = time(t);
            }
            if let Some(t) = mtime {
                node.mtime = time(t);
            }
            node.ctime = SystemTime::now();
            Ok(node.attr(ino.0))
        })();
        match result {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        // Regular files only (S_IFMT, S_IFREG).
        if mode & 0o170000 != 0o100000 {
            reply.error(Errno::EPERM);
            return;
        }
        let ino =
            self.lock()
                .create_file(parent.0, name, (mode & !umask) as u16, req.uid(), req.gid());
        self.entry(ino, reply);
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let ino = self.lock().add_child(
            parent.0,
            name,
            Body::Dir {
                children: BTreeMap::new(),
            },
            (mode & !umask) as u16,
            req.uid(),
            req.gid(),
        );
        self.entry(ino, reply);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.lock().unlink(parent.0, name, false) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.lock().unlink(parent.0, name, true) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        match self
            .lock()
            .rename(parent.0, name, newparent.0, newname, flags)
        {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let mut state = self.lock();
        match state.node_mut(ino.0) {
            Ok(node) if matches!(node.body, Body::File { .. }) => {
                node.open = node.open.saturating_add(1);
                reply.opened(FileHandle(0), FopenFlags::empty());
            }
            Ok(_) => reply.error(Errno::EISDIR),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let state = self.lock();
        match state.node(ino.0).map(|n| &n.body) {
            Ok(Body::File { data, .. }) => {
                let len = data.len() as u64;
                let start = offset.min(len) as usize;
                let end = offset.saturating_add(u64::from(size)).min(len) as usize;
                reply.data(&data[start..end]);
            }
            Ok(Body::Dir { .. }) => reply.error(Errno::EISDIR),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.lock().write(ino.0, offset, data) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // close() makes nothing durable.
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let mut state = self.lock();
        if let Ok(node) = state.node_mut(ino.0) {
            node.open = node.open.saturating_sub(1);
        }
        state.drop_if_orphan(ino.0);
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let latency = self.fsync_latency();
        if latency.is_zero() {
            return fsync(&self.state, ino.0, reply);
        }
        let state = Arc::clone(&self.state);
        std::thread::spawn(move || {
            std::thread::sleep(latency);
            fsync(&state, ino.0, reply);
        });
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.lock().children(ino.0) {
            Ok(_) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let state = self.lock();
        let (children, parent) = match state.children(ino.0) {
            Ok(c) => (c, state.node(ino.0).map_or(ROOT, |n| n.parent.max(ROOT))),
            Err(e) => {
                reply.error(e);
                return;
            }
        };
        let dots = [
            (ino.0, FileType::Directory, OsStr::new(".")),
            (parent, FileType::Directory, OsStr::new("..")),
        ];
        let entries = dots
            .into_iter()
            .chain(children.iter().map(|(name, &child)| {
                let kind = match state.nodes.get(&child).map(|n| &n.body) {
                    Some(Body::Dir { .. }) => FileType::Directory,
                    _ => FileType::RegularFile,
                };
                (child, kind, name.as_os_str())
            }));
        for (i, (child, kind, name)) in entries.enumerate().skip(offset as usize) {
            if reply.add(INodeNo(child), i as u64 + 1, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // New entries become durable with their first file fsync; removals
        // and renames already are (see the module doc).
        match self.lock().children(ino.0) {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let state = self.lock();
        let blocks = MAX_TOTAL_BYTES / u64::from(BLOCK);
        let free = (MAX_TOTAL_BYTES - state.total_bytes.min(MAX_TOTAL_BYTES)) / u64::from(BLOCK);
        let files = MAX_NODES as u64;
        let ffree = files.saturating_sub(state.nodes.len() as u64);
        reply.statfs(
            blocks,
            free,
            free,
            files,
            ffree,
            BLOCK,
            MAX_NAME as u32,
            BLOCK,
        );
    }

    fn access(&self, _req: &Request, ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        // Permissions are checked by the kernel (`default_permissions`).
        match self.lock().node(ino.0) {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let mut state = self.lock();
        let created =
            state.create_file(parent.0, name, (mode & !umask) as u16, req.uid(), req.gid());
        match created.and_then(|ino| Ok((ino, state.node_mut(ino)?))) {
            Ok((ino, node)) => {
                node.open = 1;
                let attr = node.attr(ino);
                reply.created(
                    &TTL,
                    &attr,
                    Generation(0),
                    FileHandle(0),
                    FopenFlags::empty(),
                );
            }
            Err(e) => reply.error(e),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        if mode != 0 {
            reply.error(Errno::EOPNOTSUPP);
            return;
        }
        let mut state = self.lock();
        let result = (|| {
            let end = offset.checked_add(length).ok_or(Errno::EFBIG)?;
            let len = match &state.node(ino.0)?.body {
                Body::File { data, .. } => data.len() as u64,
                Body::Dir { .. } => return Err(Errno::EISDIR),
            };
            if end > len {
                state.resize(ino.0, end)?;
            }
            Ok(())
        })();
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

/// Makes inode `ino` durable and answers the fsync.
fn fsync(state: &Mutex<State>, ino: u64, reply: ReplyEmpty) {
    match lock(state).fsync(ino) {
        Ok(()) => reply.ok(),
        Err(e) => {
            eprintln!("zkd-lazyfs: fsync of inode {ino} failed: {e:?}");
            reply.error(e)
        }
    }
}

fn main() {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let (backing, mountpoint, fsync_latency) = match args.as_slice() {
        [b, m] => (b, m, None),
        [b, m, latency] => (b, m, Some(PathBuf::from(latency))),
        _ => {
            eprintln!("usage: zkd-lazyfs <backing-dir> <mountpoint> [<fsync-latency-file>]");
            std::process::exit(2);
        }
    };
    let backing = match std::fs::canonicalize(backing) {
        Ok(p) if p.is_dir() => p,
        Ok(p) => {
            eprintln!("zkd-lazyfs: {} is not a directory", p.display());
            std::process::exit(2);
        }
        Err(e) => {
            eprintln!("zkd-lazyfs: backing dir {backing:?}: {e}");
            std::process::exit(2);
        }
    };
    let state = match State::seed(backing) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("zkd-lazyfs: loading the backing dir: {e}");
            std::process::exit(1);
        }
    };
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName("zkd-lazyfs".into()),
        MountOption::DefaultPermissions,
        MountOption::RW,
    ];
    let state = Arc::new(Mutex::new(state));
    tear_on_sigusr1(Arc::clone(&state));
    let fs = LazyFs {
        state,
        fsync_latency,
    };
    if let Err(e) = fuser::mount(fs, mountpoint, &config) {
        eprintln!("zkd-lazyfs: mounting on {mountpoint:?}: {e}");
        std::process::exit(1);
    }
}

/// Blocks SIGUSR1 (in this thread and every thread started after it) and
/// starts a thread that waits for it, then tears the unsynced writes and
/// exits while holding the state, so no later write or fsync gets through.
fn tear_on_sigusr1(state: Arc<Mutex<State>>) {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    set.add(Signal::SIGUSR1);
    if let Err(e) = set.thread_block() {
        eprintln!("zkd-lazyfs: blocking SIGUSR1: {e}");
        std::process::exit(1);
    }
    std::thread::spawn(move || {
        if set.wait().is_err() {
            return;
        }
        let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
        let torn = state.tear(|len| rand::random::<u64>() % (len + 1));
        eprintln!("zkd-lazyfs: torn power cut: {torn}");
        std::process::exit(0);
    });
}
