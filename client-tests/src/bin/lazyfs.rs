//! `zkd-lazyfs`: a FUSE filesystem that loses everything not fsynced when it is
//! killed, to test durability against power loss rather than process death.
//!
//! Usage: `zkd-lazyfs <backing-dir> <mountpoint>`.
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

use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    LockOwner, MountOption, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow,
    WriteFlags,
};
use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

/// How long the kernel may cache attributes and entries. Every change goes
/// through this process, so the kernel's caches stay coherent.
const TTL: Duration = Duration::from_secs(1);
/// Largest file.
const MAX_FILE_BYTES: u64 = 1 << 30;
/// Largest total of all cached file contents.
const MAX_TOTAL_BYTES: u64 = 2 << 30;
/// Most files and directories.
const MAX_NODES: usize = 1 << 20;
/// Deepest directory nesting, both when seeding and when resolving paths.
const MAX_DEPTH: usize = 64;
/// Longest file name.
const MAX_NAME: usize = 255;
/// Block size reported to `stat` and `statfs`.
const BLOCK: u32 = 4096;

/// What a node holds.
enum Body {
    File {
        data: Vec<u8>,
        /// Byte range written or truncated since the last fsync.
        dirty: Option<(u64, u64)>,
        /// Whether the backing directory holds this file at its current path.
        in_backing: bool,
    },
    Dir {
        children: BTreeMap<OsString, u64>,
    },
}

/// A file or directory in the cache.
struct Node {
    /// Parent directory's inode; 0 once unlinked (kept while still open).
    parent: u64,
    body: Body,
    perm: u16,
    uid: u32,
    gid: u32,
    atime: SystemTime,
    mtime: SystemTime,
    ctime: SystemTime,
    /// Open file handles.
    open: u32,
}

impl Node {
    fn new(parent: u64, body: Body, perm: u16, uid: u32, gid: u32) -> Node {
        let now = SystemTime::now();
        Node {
            parent,
            body,
            perm,
            uid,
            gid,
            atime: now,
            mtime: now,
            ctime: now,
            open: 0,
        }
    }

    fn attr(&self, ino: u64) -> FileAttr {
        let (kind, size, nlink) = match &self.body {
            Body::File { data, .. } => (FileType::RegularFile, data.len() as u64, 1),
            // 1: "unknown", so tools like find do not count subdirectories.
            Body::Dir { .. } => (FileType::Directory, 0, 1),
        };
        FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: self.atime,
            mtime: self.mtime,
            ctime: self.ctime,
            crtime: self.ctime,
            kind,
            perm: self.perm,
            nlink: if self.parent == 0 && ino != ROOT {
                0
            } else {
                nlink
            },
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: BLOCK,
            flags: 0,
        }
    }
}

const ROOT: u64 = 1;

/// The whole filesystem: the cache and where durable state goes.
struct State {
    backing: PathBuf,
    nodes: HashMap<u64, Node>,
    next_ino: u64,
    total_bytes: u64,
}

type Res<T> = Result<T, Errno>;

fn io_errno(e: std::io::Error) -> Errno {
    Errno::from(e)
}

/// Widens `range` to include `lo..hi`.
fn widen(range: &mut Option<(u64, u64)>, lo: u64, hi: u64) {
    if lo >= hi {
        return;
    }
    *range = Some(match *range {
        None => (lo, hi),
        Some((a, b)) => (a.min(lo), b.max(hi)),
    });
}

impl State {
    /// Loads `backing` into a fresh cache: after a crash, the cache starts as
    /// exactly what was made durable.
    fn seed(backing: PathBuf) -> std::io::Result<State> {
        let mut state = State {
            backing,
            nodes: HashMap::new(),
            next_ino: ROOT + 1,
            total_bytes: 0,
        };
        let root = Node::new(
            ROOT,
            Body::Dir {
                children: BTreeMap::new(),
            },
            0o755,
            0,
            0,
        );
        state.nodes.insert(ROOT, root);
        let dir = state.backing.clone();
        state.seed_dir(&dir, ROOT, 0)?;
        Ok(state)
    }

    fn seed_dir(&mut self, dir: &Path, ino: u64, depth: usize) -> std::io::Result<()> {
        if depth > MAX_DEPTH {
            return Err(std::io::Error::other("backing dir nested too deeply"));
        }
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let meta = entry.metadata()?;
            let name = entry.file_name();
            let body = if meta.is_dir() {
                Body::Dir {
                    children: BTreeMap::new(),
                }
            } else if meta.is_file() {
                let data = std::fs::read(entry.path())?;
                self.total_bytes += data.len() as u64;
                if data.len() as u64 > MAX_FILE_BYTES || self.total_bytes > MAX_TOTAL_BYTES {
                    return Err(std::io::Error::other("backing dir too large to cache"));
                }
                Body::File {
                    data,
                    dirty: None,
                    in_backing: true,
                }
            } else {
                eprintln!(
                    "zkd-lazyfs: ignoring {:?}: not a file or directory",
                    entry.path()
                );
                continue;
            };
            let is_dir = meta.is_dir();
            let child = self
                .add_child(
                    ino,
                    &name,
                    body,
                    0o644 | if is_dir { 0o111 } else { 0 },
                    0,
                    0,
                )
                .map_err(|e| std::io::Error::from_raw_os_error(e.code()))?;
            if is_dir {
                self.seed_dir(&entry.path(), child, depth + 1)?;
            }
        }
        Ok(())
    }

    fn node(&self, ino: u64) -> Res<&Node> {
        self.nodes.get(&ino).ok_or(Errno::ENOENT)
    }

    fn node_mut(&mut self, ino: u64) -> Res<&mut Node> {
        self.nodes.get_mut(&ino).ok_or(Errno::ENOENT)
    }

    fn children(&self, dir: u64) -> Res<&BTreeMap<OsString, u64>> {
        match &self.node(dir)?.body {
            Body::Dir { children } => Ok(children),
            Body::File { .. } => Err(Errno::ENOTDIR),
        }
    }

    fn children_mut(&mut self, dir: u64) -> Res<&mut BTreeMap<OsString, u64>> {
        match &mut self.node_mut(dir)?.body {
            Body::Dir { children } => Ok(children),
            Body::File { .. } => Err(Errno::ENOTDIR),
        }
    }

    fn child(&self, dir: u64, name: &OsStr) -> Res<u64> {
        self.children(dir)?.get(name).copied().ok_or(Errno::ENOENT)
    }

    /// The path of `ino` relative to the root; `None` once it is unlinked.
    fn rel_path(&self, ino: u64) -> Res<Option<PathBuf>> {
        let mut names = Vec::new();
        let mut cur = ino;
        while cur != ROOT {
            if names.len() > MAX_DEPTH {
                return Err(Errno::ELOOP);
            }
            let parent = self.node(cur)?.parent;
            if parent == 0 {
                return Ok(None);
            }
            let name = self
                .children(parent)?
                .iter()
                .find(|(_, &c)| c == cur)
                .map(|(n, _)| n.clone())
                .ok_or(Errno::EIO)?;
            names.push(name);
            cur = parent;
        }
        Ok(Some(names.iter().rev().collect()))
    }

    fn backing_path(&self, ino: u64) -> Res<Option<PathBuf>> {
        Ok(self.rel_path(ino)?.map(|rel| self.backing.join(rel)))
    }

    fn depth(&self, ino: u64) -> usize {
        let mut depth = 0;
        let mut cur = ino;
        while cur != ROOT && depth <= MAX_DEPTH + 1 {
            match self.nodes.get(&cur) {
                Some(n) if n.parent != 0 => cur = n.parent,
                _ => break,
            }
            depth += 1;
        }
        depth
    }

    fn add_child(
        &mut self,
        parent: u64,
        name: &OsStr,
        body: Body,
        perm: u16,
        uid: u32,
        gid: u32,
    ) -> Res<u64> {
        if name.len() > MAX_NAME {
            return Err(Errno::ENAMETOOLONG);
        }
        if name.is_empty() || name == "." || name == ".." || name.as_encoded_bytes().contains(&b'/')
        {
            return Err(Errno::EINVAL);
        }
        if self.nodes.len() >= MAX_NODES {
            return Err(Errno::ENOSPC);
        }
        if matches!(body, Body::Dir { .. }) && self.depth(parent) >= MAX_DEPTH {
            return Err(Errno::ENOSPC);
        }
        if self.children(parent)?.contains_key(name) {
            return Err(Errno::EEXIST);
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        self.nodes
            .insert(ino, Node::new(parent, body, perm & 0o7777, uid, gid));
        self.children_mut(parent)?.insert(name.to_owned(), ino);
        let dir = self.node_mut(parent)?;
        dir.mtime = SystemTime::now();
        dir.ctime = dir.mtime;
        Ok(ino)
    }

    /// Forgets a node that has no name and no open handle.
    fn drop_if_orphan(&mut self, ino: u64) {
        let orphan = self
            .nodes
            .get(&ino)
            .is_some_and(|n| n.parent == 0 && n.open == 0 && ino != ROOT);
        if orphan {
            if let Some(Node {
                body: Body::File { data, .. },
                ..
            }) = self.nodes.remove(&ino)
            {
                self.total_bytes = self.total_bytes.saturating_sub(data.len() as u64);
            }
        }
    }

    /// Detaches `name` from `parent` in the cache (the caller updates the
    /// backing directory).
    fn detach(&mut self, parent: u64, name: &OsStr) -> Res<u64> {
        let ino = self
            .children_mut(parent)?
            .remove(name)
            .ok_or(Errno::ENOENT)?;
        let now = SystemTime::now();
        if let Ok(dir) = self.node_mut(parent) {
            dir.mtime = now;
            dir.ctime = now;
        }
        if let Ok(node) = self.node_mut(ino) {
            node.parent = 0;
            node.ctime = now;
        }
        self.drop_if_orphan(ino);
        Ok(ino)
    }

    fn resize(&mut self, ino: u64, size: u64) -> Res<()> {
        if size > MAX_FILE_BYTES {
            return Err(Errno::EFBIG);
        }
        let total = self.total_bytes;
        let node = self.node_mut(ino)?;
        let Body::File { data, dirty, .. } = &mut node.body else {
            return Err(Errno::EISDIR);
        };
        let old = data.len() as u64;
        if size > old && total + (size - old) > MAX_TOTAL_BYTES {
            return Err(Errno::ENOSPC);
        }
        data.resize(size as usize, 0);
        widen(dirty, old.min(size), old.max(size));
        node.mtime = SystemTime::now();
        node.ctime = node.mtime;
        self.total_bytes = total + size - old;
        Ok(())
    }

    fn write(&mut self, ino: u64, offset: u64, bytes: &[u8]) -> Res<u32> {
        let end = offset
            .checked_add(bytes.len() as u64)
            .filter(|&e| e <= MAX_FILE_BYTES)
            .ok_or(Errno::EFBIG)?;
        let total = self.total_bytes;
        let node = self.node_mut(ino)?;
        let Body::File { data, dirty, .. } = &mut node.body else {
            return Err(Errno::EISDIR);
        };
        let old = data.len() as u64;
        if end > old {
            if total + (end - old) > MAX_TOTAL_BYTES {
                return Err(Errno::ENOSPC);
            }
            data.resize(end as usize, 0);
        }
        data[offset as usize..end as usize].copy_from_slice(bytes);
        widen(dirty, offset.min(old), end);
        node.mtime = SystemTime::now();
        node.ctime = node.mtime;
        self.total_bytes = total + (data.len() as u64 - old);
        Ok(bytes.len() as u32)
    }

    /// Makes `ino`'s current contents durable in the backing directory.
    fn fsync(&mut self, ino: u64) -> Res<()> {
        let Some(path) = self.backing_path(ino)? else {
            // Unlinked: nothing of it survives a crash anyway.
            return Ok(());
        };
        let node = self.node_mut(ino)?;
        let Body::File {
            data,
            dirty,
            in_backing,
        } = &mut node.body
        else {
            return Ok(());
        };
        let existing = if *in_backing {
            match OpenOptions::new().write(true).open(&path) {
                Ok(f) => Some(f),
                Err(e) if e.kind() == ErrorKind::NotFound => None,
                Err(e) => return Err(io_errno(e)),
            }
        } else {
            None
        };
        let len = data.len() as u64;
        let file = match existing {
            Some(f) => {
                if let Some((lo, hi)) = *dirty {
                    let hi = hi.min(len);
                    if lo < hi {
                        f.write_all_at(&data[lo as usize..hi as usize], lo)
                            .map_err(io_errno)?;
                    }
                }
                f
            }
            None => {
                let parent = path.parent().ok_or(Errno::EIO)?;
                std::fs::create_dir_all(parent).map_err(io_errno)?;
                let f = OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(&path)
                    .map_err(io_errno)?;
                f.write_all_at(data, 0).map_err(io_errno)?;
                f
            }
        };
        file.set_len(len).map_err(io_errno)?;
        file.sync_all().map_err(io_errno)?;
        if !*in_backing {
            if let Some(parent) = path.parent() {
                File::open(parent)
                    .and_then(|d| d.sync_all())
                    .map_err(io_errno)?;
            }
        }
        *dirty = None;
        *in_backing = true;
        Ok(())
    }

    /// Removes whatever the backing directory holds at `path`.
    fn remove_backing(path: &Path) -> Res<()> {
        let result = match std::fs::symlink_metadata(path) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
            Ok(_) => std::fs::remove_file(path),
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(e) => Err(e),
        };
        result.map_err(io_errno)
    }

    fn unlink(&mut self, parent: u64, name: &OsStr, dir: bool) -> Res<()> {
        let ino = self.child(parent, name)?;
        match (&self.node(ino)?.body, dir) {
            (Body::Dir { children }, true) if !children.is_empty() => return Err(Errno::ENOTEMPTY),
            (Body::Dir { .. }, false) => return Err(Errno::EISDIR),
            (Body::File { .. }, true) => return Err(Errno::ENOTDIR),
            _ => {}
        }
        if let Some(path) = self.backing_path(ino)? {
            State::remove_backing(&path)?;
        }
        self.detach(parent, name)?;
        Ok(())
    }

    fn rename(
        &mut self,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: RenameFlags,
    ) -> Res<()> {
        if !(flags - RenameFlags::RENAME_NOREPLACE).is_empty() {
            return Err(Errno::EINVAL);
        }
        if newname.len() > MAX_NAME {
            return Err(Errno::ENAMETOOLONG);
        }
        let src = self.child(parent, name)?;
        self.children(newparent)?;
        let src_is_dir = matches!(self.node(src)?.body, Body::Dir { .. });
        // A directory cannot move under itself.
        let mut cur = newparent;
        for _ in 0..=MAX_DEPTH + 1 {
            if cur == src {
                return Err(Errno::EINVAL);
            }
            if cur == ROOT || cur == 0 {
                break;
            }
            cur = self.node(cur)?.parent;
        }
        if src_is_dir && self.depth(newparent) >= MAX_DEPTH {
            return Err(Errno::ENOSPC);
        }
        let existing = self.children(newparent)?.get(newname).copied();
        if let Some(dst) = existing {
            if dst == src {
                return Ok(());
            }
            if flags.contains(RenameFlags::RENAME_NOREPLACE) {
                return Err(Errno::EEXIST);
            }
            match (&self.node(dst)?.body, src_is_dir) {
                (Body::Dir { children }, true) if !children.is_empty() => {
                    return Err(Errno::ENOTEMPTY)
                }
                (Body::Dir { .. }, false) => return Err(Errno::EISDIR),
                (Body::File { .. }, true) => return Err(Errno::ENOTDIR),
                _ => {}
            }
        }
        let from = self.backing_path(src)?;
        let to = self.backing_path(newparent)?.map(|dir| dir.join(newname));
        let moved_in_backing = match (from, to) {
            (Some(from), Some(to)) if std::fs::symlink_metadata(&from).is_ok() => {
                if let Some(dir) = to.parent() {
                    std::fs::create_dir_all(dir).map_err(io_errno)?;
                }
                if src_is_dir && std::fs::symlink_metadata(&to).is_ok_and(|m| m.is_dir()) {
                    // The cache's target is empty: anything the backing dir
                    // holds there is stale.
                    std::fs::remove_dir_all(&to).map_err(io_errno)?;
                }
                std::fs::rename(&from, &to).map_err(io_errno)?;
                true
            }
            (Some(from), None) => {
                // Moving into an unlinked directory: the name is gone for good.
                State::remove_backing(&from)?;
                false
            }
            _ => false,
        };
        if existing.is_some() {
            self.detach(newparent, newname)?;
        }
        self.children_mut(parent)?.remove(name);
        self.children_mut(newparent)?
            .insert(newname.to_owned(), src);
        let now = SystemTime::now();
        for dir in [parent, newparent] {
            let dir = self.node_mut(dir)?;
            dir.mtime = now;
            dir.ctime = now;
        }
        let node = self.node_mut(src)?;
        node.parent = newparent;
        node.ctime = now;
        if let Body::File { in_backing, .. } = &mut node.body {
            *in_backing = moved_in_backing;
        }
        Ok(())
    }
}

/// The FUSE face of [`State`].
struct LazyFs {
    state: Mutex<State>,
}

impl LazyFs {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
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
        let ino = self.lock().add_child(
            parent.0,
            name,
            Body::File {
                data: Vec::new(),
                dirty: None,
                in_backing: false,
            },
            (mode & !umask) as u16,
            req.uid(),
            req.gid(),
        );
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
        match self.lock().fsync(ino.0) {
            Ok(()) => reply.ok(),
            Err(e) => {
                eprintln!("zkd-lazyfs: fsync of inode {} failed: {e:?}", ino.0);
                reply.error(e)
            }
        }
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
        let created = state.add_child(
            parent.0,
            name,
            Body::File {
                data: Vec::new(),
                dirty: None,
                in_backing: false,
            },
            (mode & !umask) as u16,
            req.uid(),
            req.gid(),
        );
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

fn main() {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let [backing, mountpoint] = args.as_slice() else {
        eprintln!("usage: zkd-lazyfs <backing-dir> <mountpoint>");
        std::process::exit(2);
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
    let fs = LazyFs {
        state: Mutex::new(state),
    };
    if let Err(e) = fuser::mount(fs, mountpoint, &config) {
        eprintln!("zkd-lazyfs: mounting on {mountpoint:?}: {e}");
        std::process::exit(1);
    }
}
