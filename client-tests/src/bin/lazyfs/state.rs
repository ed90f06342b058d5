//! The filesystem's state: an in-memory tree of files and directories (the
//! "page cache") and the rules by which fsync makes a file durable in the
//! backing directory. No FUSE here: `main.rs` adapts it to the kernel.

use fuser::{Errno, FileAttr, FileType, INodeNo, RenameFlags};
use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// How long the kernel may cache attributes and entries. Every change goes
/// through this process, so the kernel's caches stay coherent.
pub(crate) const TTL: Duration = Duration::from_secs(1);
/// Largest file.
pub(crate) const MAX_FILE_BYTES: u64 = 1 << 30;
/// Largest total of all cached file contents.
pub(crate) const MAX_TOTAL_BYTES: u64 = 2 << 30;
/// Most files and directories.
pub(crate) const MAX_NODES: usize = 1 << 20;
/// Deepest directory nesting, both when seeding and when resolving paths.
pub(crate) const MAX_DEPTH: usize = 64;
/// Longest file name.
pub(crate) const MAX_NAME: usize = 255;
/// Block size reported to `stat` and `statfs`.
pub(crate) const BLOCK: u32 = 4096;

/// What a node holds.
pub(crate) enum Body {
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
pub(crate) struct Node {
    /// Parent directory's inode; 0 once unlinked (kept while still open).
    pub(crate) parent: u64,
    pub(crate) body: Body,
    pub(crate) perm: u16,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) atime: SystemTime,
    pub(crate) mtime: SystemTime,
    pub(crate) ctime: SystemTime,
    /// Open file handles.
    pub(crate) open: u32,
}

impl Node {
    pub(crate) fn new(parent: u64, body: Body, perm: u16, uid: u32, gid: u32) -> Node {
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

    pub(crate) fn attr(&self, ino: u64) -> FileAttr {
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

pub(crate) const ROOT: u64 = 1;

/// The whole filesystem: the cache and where durable state goes.
pub(crate) struct State {
    pub(crate) backing: PathBuf,
    pub(crate) nodes: HashMap<u64, Node>,
    pub(crate) next_ino: u64,
    pub(crate) total_bytes: u64,
}

pub(crate) type Res<T> = Result<T, Errno>;

pub(crate) fn io_errno(e: std::io::Error) -> Errno {
    Errno::from(e)
}

/// Widens `range` to include `lo..hi`.
pub(crate) fn widen(range: &mut Option<(u64, u64)>, lo: u64, hi: u64) {
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
    pub(crate) fn seed(backing: PathBuf) -> std::io::Result<State> {
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

    pub(crate) fn seed_dir(&mut self, dir: &Path, ino: u64, depth: usize) -> std::io::Result<()> {
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

    pub(crate) fn node(&self, ino: u64) -> Res<&Node> {
        self.nodes.get(&ino).ok_or(Errno::ENOENT)
    }

    pub(crate) fn node_mut(&mut self, ino: u64) -> Res<&mut Node> {
        self.nodes.get_mut(&ino).ok_or(Errno::ENOENT)
    }

    pub(crate) fn children(&self, dir: u64) -> Res<&BTreeMap<OsString, u64>> {
        match &self.node(dir)?.body {
            Body::Dir { children } => Ok(children),
            Body::File { .. } => Err(Errno::ENOTDIR),
        }
    }

    pub(crate) fn children_mut(&mut self, dir: u64) -> Res<&mut BTreeMap<OsString, u64>> {
        match &mut self.node_mut(dir)?.body {
            Body::Dir { children } => Ok(children),
            Body::File { .. } => Err(Errno::ENOTDIR),
        }
    }

    pub(crate) fn child(&self, dir: u64, name: &OsStr) -> Res<u64> {
        self.children(dir)?.get(name).copied().ok_or(Errno::ENOENT)
    }

    /// The path of `ino` relative to the root; `None` once it is unlinked.
    pub(crate) fn rel_path(&self, ino: u64) -> Res<Option<PathBuf>> {
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

    pub(crate) fn backing_path(&self, ino: u64) -> Res<Option<PathBuf>> {
        Ok(self.rel_path(ino)?.map(|rel| self.backing.join(rel)))
    }

    pub(crate) fn depth(&self, ino: u64) -> usize {
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

    /// A new empty file under `parent`, in the cache only (not yet durable).
    pub(crate) fn create_file(
        &mut self,
        parent: u64,
        name: &OsStr,
        perm: u16,
        uid: u32,
        gid: u32,
    ) -> Res<u64> {
        let body = Body::File {
            data: Vec::new(),
            dirty: None,
            in_backing: false,
        };
        self.add_child(parent, name, body, perm, uid, gid)
    }

    pub(crate) fn add_child(
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
    pub(crate) fn drop_if_orphan(&mut self, ino: u64) {
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
    pub(crate) fn detach(&mut self, parent: u64, name: &OsStr) -> Res<u64> {
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

    pub(crate) fn resize(&mut self, ino: u64, size: u64) -> Res<()> {
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

    pub(crate) fn write(&mut self, ino: u64, offset: u64, bytes: &[u8]) -> Res<u32> {
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
    pub(crate) fn fsync(&mut self, ino: u64) -> Res<()> {
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

    /// A torn power cut: each file the backing directory holds gets the
    /// first `keep(n)` of the `n` bytes written there since its last fsync
    /// (a disk that wrote part of its queue). Files never fsynced stay out,
    /// and sizes in the backing directory only grow. Returns a summary.
    pub(crate) fn tear(&mut self, mut keep: impl FnMut(u64) -> u64) -> String {
        let inos: Vec<u64> = self.nodes.keys().copied().collect();
        let mut torn = Vec::new();
        for ino in inos {
            let Ok(Some(path)) = self.backing_path(ino) else {
                continue;
            };
            let Some(Node {
                body:
                    Body::File {
                        data,
                        dirty: Some((lo, hi)),
                        in_backing: true,
                    },
                ..
            }) = self.nodes.get(&ino)
            else {
                continue;
            };
            let hi = (*hi).min(data.len() as u64);
            if *lo >= hi {
                continue;
            }
            let kept = keep(hi - lo).min(hi - lo);
            let bytes = &data[*lo as usize..(*lo + kept) as usize];
            let written = OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|f| f.write_all_at(bytes, *lo).and_then(|()| f.sync_all()));
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            match written {
                Ok(()) => torn.push(format!("{name}: {kept} of {} B", hi - lo)),
                Err(e) => torn.push(format!("{name}: {e}")),
            }
        }
        if torn.is_empty() {
            "nothing unsynced".to_owned()
        } else {
            torn.join(", ")
        }
    }

    /// Removes whatever the backing directory holds at `path`.
    pub(crate) fn remove_backing(path: &Path) -> Res<()> {
        let result = match std::fs::symlink_metadata(path) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
            Ok(_) => std::fs::remove_file(path),
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(e) => Err(e),
        };
        result.map_err(io_errno)
    }

    pub(crate) fn unlink(&mut self, parent: u64, name: &OsStr, dir: bool) -> Res<()> {
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

    pub(crate) fn rename(
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
