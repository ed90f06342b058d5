//! The snapshot image of a `DataTree`: jute-encoded header (magic, version,
//! the zxid the image starts at), the sessions, then nodes depth-first
//! (parents before children), ended by an empty path.
//!
//! Images are *fuzzy*, as ZooKeeper's are: a [`SnapshotCursor`] serializes a
//! bounded number of nodes per step while txns keep being applied between
//! steps, so a large tree never stalls the server. The image is labelled with
//! the zxid at which it started; recovery replays every txn after that, and
//! because `apply` is idempotent (creates of existing nodes only raise parent
//! counters, deletes of missing nodes do nothing, setData/setACL carry absolute
//! versions) the result is exactly the tree the log describes.
//!
//! Images stream both ways in bounded memory: a cursor's output can be taken
//! in fixed-size chunks between steps ([`SnapshotCursor::take_chunk`]), and an
//! [`ImageDecoder`] rebuilds the tree from chunks of any size, holding only the
//! record it is in the middle of plus the latest chunk. Neither side ever needs
//! the whole image in memory.

use super::open_parents::{OpenParents, ParentAt};
use super::path_index::Unindexed;
use super::{DataNode, DataTree, NodeId};
use crate::path;
use bytes::{Buf, Bytes, BytesMut};
use std::sync::Arc;
use zkd_protocol::records::{Acl, StatPersisted};
use zkd_protocol::{DecodeError, Record, Zxid};

const MAGIC: i32 = 0x5a4b_4453; // "ZKDS"
const VERSION: i32 = 2;
/// Magic, version, zxid and session count: the decoder's first record.
pub(super) const HEADER_LEN: usize = 4 + 4 + 8 + 4;
/// One session: id and timeout.
const SESSION_LEN: usize = 8 + 4;

/// A snapshot being written a few nodes at a time.
///
/// The walk keeps one frame per level of the node it is in, never a list of
/// children: a parent with a million children costs one frame, and each
/// step resumes after the last child written, whatever was created or
/// deleted in between.
#[derive(Debug)]
pub struct SnapshotCursor {
    zxid: Zxid,
    /// Whether `/` is still to be written (the walk starts from it).
    root_pending: bool,
    /// The nodes being descended, outermost first, each with its last child written.
    stack: Vec<Frame>,
    /// Encoded bytes not yet taken. `BytesMut` so that taking a chunk is a
    /// split of the buffer, not a copy of what stays behind.
    out: BytesMut,
    encoder: NodeEncoder,
}

/// Encodes node records, keeping the last ACL's encoding: most nodes share
/// their parent's ACL allocation, so most are a copy of bytes, not a walk.
#[derive(Debug, Default)]
struct NodeEncoder {
    acl: Option<(Arc<Vec<Acl>>, Vec<u8>)>,
}

impl NodeEncoder {
    fn node(&mut self, out: &mut BytesMut, node: &DataNode) {
        put_buffer(out, Some(node.path_bytes()));
        put_buffer(out, node.data());
        match &self.acl {
            Some((acl, encoded)) if Arc::ptr_eq(acl, &node.acl) => out.extend_from_slice(encoded),
            _ => {
                let mut encoded = Vec::new();
                node.acl.as_ref().encode(&mut encoded);
                out.extend_from_slice(&encoded);
                self.acl = Some((node.acl.clone(), encoded));
            }
        }
        node.stat.encode(out);
    }
}

/// A node whose children the walk is writing.
#[derive(Debug)]
struct Frame {
    path: Box<str>,
    /// The last child written; the next is the first after it in the
    /// children's order, which a live node keeps.
    after: Option<NodeId>,
}

impl SnapshotCursor {
    /// The zxid the image starts at: recovery replays txns after it.
    pub fn zxid(&self) -> Zxid {
        self.zxid
    }

    /// Writes up to `budget` nodes of `tree` as it is now. True when done.
    pub fn step(&mut self, tree: &DataTree, budget: usize) -> bool {
        self.step_until(tree, budget, usize::MAX)
    }

    /// [`step`](Self::step), stopping early once `buffered` bytes wait to be
    /// taken: a caller sizing its slices in bytes walks many nodes per call
    /// (each call looks its place up again) and overshoots by one node.
    pub fn step_until(&mut self, tree: &DataTree, budget: usize, buffered: usize) -> bool {
        let mut written = 0;
        if self.root_pending {
            self.root_pending = false;
            if let Some(node) = tree.nodes.get("/") {
                self.encoder.node(&mut self.out, node);
                written += 1;
                self.descend(node);
            }
        }
        while written < budget && self.out.len() < buffered {
            let Some(frame) = self.stack.last_mut() else {
                return true;
            };
            // A parent deleted since it was written took its children with
            // it (their deletes are in the log), so its frame is done too.
            let Some(parent) = tree.nodes.get(&frame.path) else {
                self.stack.pop();
                continue;
            };
            // Siblings in a row from one range walk: one search per slice,
            // not one per child.
            let mut last = None;
            let mut deeper = None;
            for id in parent.children.after(frame.after) {
                let Some(node) = tree.nodes.node(id) else {
                    continue;
                };
                if written == budget || self.out.len() >= buffered {
                    break;
                }
                self.encoder.node(&mut self.out, node);
                written += 1;
                last = Some(id);
                if !node.children.is_empty() {
                    deeper = Some(node);
                    break;
                }
            }
            match last {
                Some(id) => frame.after = Some(id),
                None => {
                    self.stack.pop();
                    continue;
                }
            }
            if let Some(node) = deeper {
                self.descend(node);
            }
        }
        self.stack.is_empty() && !self.root_pending
    }

    /// Walks into a node just written, if it has children.
    fn descend(&mut self, node: &DataNode) {
        if !node.children.is_empty() {
            self.stack.push(Frame {
                path: node.path().into(),
                after: None,
            });
        }
    }

    /// Frames on the walk's stack (tests check it stays at the depth).
    #[cfg(test)]
    pub(crate) fn depth(&self) -> usize {
        self.stack.len()
    }

    /// The path written last (tests place txns between particular nodes).
    #[cfg(test)]
    pub(crate) fn last_written<'a>(&'a self, tree: &'a DataTree) -> Option<&'a str> {
        let frame = self.stack.last()?;
        match frame.after {
            Some(id) => tree.nodes.node(id).map(DataNode::path),
            None => Some(&frame.path),
        }
    }

    /// Takes the next `max` bytes of the image off the buffer, but only once
    /// that many are buffered: every chunk is exactly `max` bytes, so only the
    /// tail from [`finish`](Self::finish) is ever short. `None` when fewer than
    /// `max` bytes are buffered (step more first) or when `max` is 0, as an
    /// empty chunk would never make progress.
    pub fn take_chunk(&mut self, max: usize) -> Option<Bytes> {
        (max > 0 && self.out.len() >= max).then(|| self.out.split_to(max).freeze())
    }

    /// Bytes written but not yet taken by [`take_chunk`](Self::take_chunk),
    /// so a caller can step until a chunk is ready, or stop buffering.
    pub fn buffered(&self) -> usize {
        self.out.len()
    }

    /// The rest of the image: whatever [`take_chunk`](Self::take_chunk) left
    /// buffered, plus the terminator. The taken chunks in order followed by
    /// this are the image; for a cursor never chunked it is the whole image.
    /// Call it once `step` has returned true.
    pub fn finish(mut self) -> Bytes {
        String::new().encode(&mut self.out);
        self.out.freeze()
    }
}

/// The header that starts an image of a tree at `zxid` holding `sessions`
/// sessions, for images written elsewhere (transcoded from ZooKeeper's
/// snapshots): the sessions (id, timeout) and the node records (path, data,
/// ACL list, stat) follow in jute, then an empty path.
pub fn image_header(zxid: Zxid, sessions: i32) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN);
    MAGIC.encode(&mut out);
    VERSION.encode(&mut out);
    zxid.0.encode(&mut out);
    sessions.encode(&mut out);
    out
}

/// A jute string or buffer: its length (-1 for null), then its bytes.
pub fn put_buffer(out: &mut impl bytes::BufMut, bytes: Option<&[u8]>) {
    match bytes {
        None => (-1i32).encode(out),
        Some(b) => {
            (b.len() as i32).encode(out);
            out.put_slice(b);
        }
    }
}

/// Rebuilds a [`DataTree`] from an image fed in chunks of any size, with no
/// need for chunks to line up with records. Only a record that has not fully
/// arrived is kept between feeds, so beyond the tree itself memory stays
/// around one record plus one chunk. After an error every later `feed` and
/// `finish` returns that error.
#[derive(Debug)]
pub struct ImageDecoder {
    /// The start of a record whose end has not arrived yet; never consumed bytes.
    pending: BytesMut,
    build: Build,
}

/// The decoder's state apart from its buffer, so records can be read from the
/// buffer while the tree they go into is borrowed mutably.
#[derive(Debug)]
struct Build {
    stage: Stage,
    tree: DataTree,
    /// The last node's ACL, and its encoding: consecutive nodes usually
    /// share one allocation.
    last_acl: Arc<Vec<Acl>>,
    last_acl_bytes: Vec<u8>,
    /// Encoded size of a `StatPersisted`, whose fields are all fixed-width.
    stat_len: usize,
    /// The nodes whose children may still arrive.
    open: OpenParents,
    /// Nodes in the tree's slab not yet in its path index, while the load
    /// indexes in bulk: until a lookup by path is needed (an image out of
    /// preorder) or the image ends.
    unindexed: Option<Unindexed>,
}

/// Which record comes next.
#[derive(Debug)]
enum Stage {
    Header,
    /// Sessions still to read (at least one).
    Sessions(u32),
    Nodes,
    /// The terminator was read: any further byte is an error.
    Done,
    Failed(DecodeError),
}

impl Default for ImageDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl ImageDecoder {
    /// A decoder expecting the start of an image.
    pub fn new() -> ImageDecoder {
        let tree = DataTree {
            nodes: Default::default(),
            ephemerals: Default::default(),
            sessions: Default::default(),
            expirable: Default::default(),
            last_zxid: Zxid::ZERO,
            // Built from scratch as sessions and nodes go in.
            digest: 0,
            quotas: Default::default(),
        };
        ImageDecoder {
            pending: BytesMut::new(),
            build: Build {
                stage: Stage::Header,
                tree,
                last_acl: Arc::new(Vec::new()),
                last_acl_bytes: Vec::new(),
                stat_len: StatPersisted::default().to_bytes().len(),
                open: OpenParents::default(),
                unindexed: Some(Unindexed::with_capacity(0)),
            },
        }
    }

    /// A decoder for an image of `len` bytes, its tree's table sized for as
    /// many nodes as such an image likely holds: growing it as they arrive
    /// rehashed every node several times, a tenth of a large load. A record
    /// is at least about 100 bytes, most more, so the guess errs high by a
    /// small factor at worst, a few percent of the image's size in memory.
    pub fn for_image_of(len: u64) -> ImageDecoder {
        /// Bytes per node assumed: a node of 100 bytes of data takes about 210.
        const BYTES_PER_NODE: u64 = 160;
        let mut decoder = ImageDecoder::new();
        let nodes = usize::try_from(len / BYTES_PER_NODE).unwrap_or(0);
        decoder.build.tree.nodes.reserve(nodes);
        decoder.build.unindexed = Some(Unindexed::with_capacity(nodes));
        decoder
    }

    /// Decodes every record `chunk` completes and keeps the bytes of an
    /// incomplete one for the next feed. Errors on a malformed record, a bad
    /// magic or version, or any byte after the terminator.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<(), DecodeError> {
        let result = if self.pending.is_empty() {
            // Nothing carried over: read straight from the caller's chunk and
            // keep only its incomplete tail, rather than copying it all first.
            let read = self.build.decode(chunk);
            read.map(|used| self.pending.extend_from_slice(&chunk[used..]))
        } else {
            self.pending.extend_from_slice(chunk);
            let read = self.build.decode(&self.pending);
            read.map(|used| self.pending.advance(used))
        };
        if let Err(e) = &result {
            self.build.stage = Stage::Failed(e.clone());
            self.pending = BytesMut::new();
        }
        result
    }

    /// The decoded tree. Errors if the image ended before its terminator
    /// (`Incomplete`), if it has no root, or if a feed failed.
    pub fn finish(self) -> Result<DataTree, DecodeError> {
        match self.build.stage {
            Stage::Done if self.build.tree.nodes.contains("/") => {
                let mut tree = self.build.tree;
                tree.rebuild_quotas();
                Ok(tree)
            }
            Stage::Done => Err(DecodeError::Invalid("snapshot without a root")),
            Stage::Failed(e) => Err(e),
            Stage::Header | Stage::Sessions(_) | Stage::Nodes => Err(DecodeError::Incomplete),
        }
    }

    /// Bytes held for a record not yet complete (tests check the bound).
    #[cfg(test)]
    pub(crate) fn pending_len(&self) -> usize {
        self.pending.len()
    }
}

impl Build {
    /// Decodes the complete records at the front of `src`; returns how many
    /// bytes they took.
    fn decode(&mut self, src: &[u8]) -> Result<usize, DecodeError> {
        let mut used = 0;
        loop {
            let rest = &src[used..];
            let len = match self.stage {
                Stage::Failed(ref e) => return Err(e.clone()),
                _ if rest.is_empty() => return Ok(used),
                Stage::Done => {
                    return Err(DecodeError::Invalid("bytes after the snapshot terminator"))
                }
                Stage::Header => HEADER_LEN,
                Stage::Sessions(_) => SESSION_LEN,
                Stage::Nodes => match node_len(rest, self.stat_len) {
                    Err(DecodeError::Incomplete) => return Ok(used),
                    len => len?,
                },
            };
            if rest.len() < len {
                return Ok(used);
            }
            let record = &rest[..len];
            let read = match self.stage {
                // Nodes are read in place: the tree copies what it keeps.
                Stage::Nodes => self.node(record),
                _ => self.record(&mut Bytes::copy_from_slice(record)),
            };
            read.map_err(|e| match e {
                // `node_len` and the codec disagree; the input is not at fault
                // for being short, so do not let the caller wait for more.
                DecodeError::Incomplete => DecodeError::Invalid("snapshot record misframed"),
                e => e,
            })?;
            used += len;
        }
    }

    /// Applies one complete record of the current stage.
    fn record(&mut self, rec: &mut Bytes) -> Result<(), DecodeError> {
        match self.stage {
            Stage::Header => {
                if i32::decode(rec)? != MAGIC || i32::decode(rec)? != VERSION {
                    return Err(DecodeError::Invalid("snapshot magic or version"));
                }
                self.tree.last_zxid = Zxid(i64::decode(rec)?);
                let sessions = u32::try_from(i32::decode(rec)?)
                    .map_err(|_| DecodeError::Invalid("negative session count"))?;
                self.stage = match sessions {
                    0 => Stage::Nodes,
                    n => Stage::Sessions(n),
                };
            }
            Stage::Sessions(left) => {
                let id = i64::decode(rec)?;
                let timeout = i32::decode(rec)?;
                self.tree.insert_session(id, timeout);
                self.stage = match left - 1 {
                    0 => Stage::Nodes,
                    n => Stage::Sessions(n),
                };
            }
            Stage::Nodes | Stage::Done | Stage::Failed(_) => {
                unreachable!("nodes are read in place, and nothing after the end")
            }
        }
        Ok(())
    }

    /// One node record, or the terminator, read where it lies: the path
    /// and data as slices, the ACL decoded only when its bytes differ from
    /// the last node's (most nodes share one).
    fn node(&mut self, rec: &[u8]) -> Result<(), DecodeError> {
        let mut at = 0;
        let path_len = read_len(rec, &mut at)?;
        if path_len == 0 {
            self.index_unindexed();
            self.open.close_all(&mut self.tree);
            self.stage = Stage::Done;
            return Ok(());
        }
        let p = String::from_utf8_lossy(take(rec, &mut at, path_len)?);
        let data = read_buffer(rec, &mut at)?;
        let acl_start = at;
        for _ in 0..read_len(rec, &mut at)? {
            skip(rec, &mut at, 4)?;
            skip_var(rec, &mut at)?;
            skip_var(rec, &mut at)?;
        }
        let acl = &rec[acl_start..at];
        if rec.len() - at != self.stat_len {
            return Err(DecodeError::Invalid("snapshot record misframed"));
        }
        let stat = stat_at(&rec[at..]);
        if acl != self.last_acl_bytes.as_slice() {
            let decoded = Vec::<Acl>::decode(&mut Bytes::copy_from_slice(acl))?;
            self.last_acl = Arc::new(decoded);
            self.last_acl_bytes = acl.to_vec();
        }
        self.link(DataNode::new(&p, data, self.last_acl.clone(), stat));
        Ok(())
    }

    /// Puts `node` in the tree under its parent and opens it for children.
    fn link(&mut self, node: DataNode) {
        // A fuzzy image may hold a node whose parent was re-created after the
        // parent was visited; the log re-creates both, so skip the orphan.
        let parent = match node.path() {
            "/" => None,
            p => match self.parent_of(path::parent(p)) {
                Some(at) => Some(at),
                None => return,
            },
        };
        let id = match &mut self.unindexed {
            Some(unindexed) => self.tree.place_unindexed(node, unindexed),
            None => self.tree.index(node),
        };
        if let Some(parent) = parent {
            self.open.add_child(&mut self.tree, parent, id);
        }
        self.open.open(id);
    }

    /// Where the parent at `path` is: open, or elsewhere in the tree (then
    /// the index must answer, so what is unindexed is indexed first).
    fn parent_of(&mut self, path: &str) -> Option<ParentAt> {
        if self.open.locate_open(&mut self.tree, path) {
            return Some(ParentAt::Open);
        }
        self.index_unindexed();
        self.tree.nodes.id(path).map(ParentAt::Elsewhere)
    }

    /// Indexes the nodes placed in bulk; from here on each node is indexed
    /// as it arrives. If a path came twice (a fuzzy image can list a node
    /// deleted and re-created during its walk), every node so far is
    /// linked again one at a time, as a node arriving indexes: the later
    /// node replaces the earlier, which hands it its children.
    fn index_unindexed(&mut self) {
        let Some(unindexed) = self.unindexed.take() else {
            return;
        };
        if self.tree.nodes.index_placed(unindexed).is_ok() {
            return;
        }
        self.open = OpenParents::default();
        let nodes = self.tree.take_all_nodes();
        self.tree.nodes.reserve(nodes.len());
        for node in nodes {
            self.link(node);
        }
    }
}

/// Measures the node record (or terminator) at the front of `buf`, or
/// `Incomplete` if it has not all arrived. It only reads jute lengths, so an
/// untrusted length never causes an allocation: the bytes must be present
/// before anything is copied. [`Build::node`] then checks the codec read
/// exactly this much.
pub(super) fn node_len(buf: &[u8], stat_len: usize) -> Result<usize, DecodeError> {
    let mut at = 0;
    // The terminator is an empty (or null) path and nothing else.
    if skip_var(buf, &mut at)? == 0 {
        return Ok(at);
    }
    skip_var(buf, &mut at)?; // data
                             // Each entry is perms, scheme, id: at least 12 bytes, so a corrupt count
                             // runs out of input long before it could loop for long.
    for _ in 0..read_len(buf, &mut at)? {
        skip(buf, &mut at, 4)?;
        skip_var(buf, &mut at)?;
        skip_var(buf, &mut at)?;
    }
    skip(buf, &mut at, stat_len)?;
    Ok(at)
}

/// The stat at the end of a node record, whose length the caller checked:
/// read in place, as `StatPersisted::decode` would need a copy into `Bytes`.
fn stat_at(mut raw: &[u8]) -> StatPersisted {
    StatPersisted {
        czxid: raw.get_i64(),
        mzxid: raw.get_i64(),
        ctime: raw.get_i64(),
        mtime: raw.get_i64(),
        version: raw.get_i32(),
        cversion: raw.get_i32(),
        aversion: raw.get_i32(),
        ephemeral_owner: raw.get_i64(),
        pzxid: raw.get_i64(),
    }
}

/// The next `n` bytes, if they are present.
fn take<'a>(buf: &'a [u8], at: &mut usize, n: usize) -> Result<&'a [u8], DecodeError> {
    let start = *at;
    skip(buf, at, n)?;
    Ok(&buf[start..*at])
}

/// A jute buffer where null and empty stay apart: -1 is `None`.
fn read_buffer<'a>(buf: &'a [u8], at: &mut usize) -> Result<Option<&'a [u8]>, DecodeError> {
    let start = *at;
    skip(buf, at, 4)?;
    if buf[start..*at] == (-1i32).to_be_bytes() {
        return Ok(None);
    }
    *at = start;
    let len = read_len(buf, at)?;
    take(buf, at, len).map(Some)
}

/// Moves past `n` bytes if they are present.
fn skip(buf: &[u8], at: &mut usize, n: usize) -> Result<(), DecodeError> {
    if buf.len() - *at < n {
        return Err(DecodeError::Incomplete);
    }
    *at += n;
    Ok(())
}

/// Reads a jute length as the codec does: -1 (null) counts as 0 bytes or
/// elements, other negatives are invalid.
fn read_len(buf: &[u8], at: &mut usize) -> Result<usize, DecodeError> {
    let start = *at;
    skip(buf, at, 4)?;
    let raw = i32::from_be_bytes(buf[start..*at].try_into().expect("4 bytes"));
    match raw {
        -1 => Ok(0),
        n if n < 0 => Err(DecodeError::Invalid("negative length")),
        n => Ok(n as usize),
    }
}

/// Moves past a length-prefixed string or buffer; returns its length.
fn skip_var(buf: &[u8], at: &mut usize) -> Result<usize, DecodeError> {
    let len = read_len(buf, at)?;
    skip(buf, at, len)?;
    Ok(len)
}

impl DataTree {
    /// Starts a fuzzy snapshot of the tree as of its last applied zxid.
    pub fn start_snapshot(&self) -> SnapshotCursor {
        let mut out = BytesMut::with_capacity(1024);
        MAGIC.encode(&mut out);
        VERSION.encode(&mut out);
        self.last_zxid.0.encode(&mut out);
        (self.sessions.len() as i32).encode(&mut out);
        for (id, timeout) in &self.sessions {
            id.encode(&mut out);
            timeout.encode(&mut out);
        }
        SnapshotCursor {
            zxid: self.last_zxid,
            root_pending: true,
            stack: Vec::new(),
            out,
            encoder: NodeEncoder::default(),
        }
    }

    /// Serializes the whole tree at once (an exact image).
    pub fn to_image(&self) -> Bytes {
        let mut cursor = self.start_snapshot();
        while !cursor.step(self, usize::MAX) {}
        cursor.finish()
    }

    /// Rebuilds a tree from a whole image; the caller replays the log after
    /// its zxid. [`ImageDecoder`] does the same from chunks.
    pub fn from_image(buf: Bytes) -> Result<DataTree, DecodeError> {
        let mut decoder = ImageDecoder::new();
        decoder.feed(&buf)?;
        decoder.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_read_in_place_is_the_codecs() {
        let stat = StatPersisted {
            czxid: 1,
            mzxid: 2,
            ctime: 3,
            mtime: 4,
            version: 5,
            cversion: 6,
            aversion: 7,
            ephemeral_owner: 8,
            pzxid: 9,
        };
        assert_eq!(stat_at(&stat.to_bytes()), stat);
    }
}
