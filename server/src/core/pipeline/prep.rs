//! Prep: validates a write against the committed tree plus outstanding
//! changes and turns it into a txn (ZooKeeper's `PrepRequestProcessor`).
//! Checks run in ZooKeeper's order, so the first failing check decides the code.

use super::pending::{NodeMeta, PendingChanges};
use super::txn_changes::TxnChanges;
use crate::core::acl::AuthIds;
use bytes::Bytes;
use std::sync::Arc;
use zkd_protocol::records::*;
use zkd_protocol::{CreateMode, ErrorCode, OpCode, Perms};
use zkd_storage::data_tree::{ttl_owner, QuotaUsage, CONTAINER_OWNER, MAX_TTL_MS};
use zkd_storage::{path, DataTree, TxnBody};

/// The system nodes no client may delete.
const UNDELETABLE: [&str; 4] = ["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"];

/// One write being prepared: lookups see the tree, then outstanding changes,
/// then this txn's own earlier sub-ops (a multi sees itself).
pub struct Prep<'a> {
    pub tree: &'a DataTree,
    pub pending: &'a PendingChanges,
    pub auth: &'a AuthIds,
    pub session: i64,
    pub zxid: i64,
    pub time: i64,
    pub extended_types: bool,
    /// Whether hard quotas refuse writes (`enforceQuota`).
    pub enforce_quota: bool,
    /// Changes made by this txn so far.
    pub scratch: TxnChanges,
}

type Outcome = Result<TxnBody, ErrorCode>;

/// What a create records of the node it makes.
struct NewNode {
    cversion: i32,
    owner: i64,
    acl: SharedAcl,
    data_len: i64,
}

impl<'a> Prep<'a> {
    fn view(&self, p: &str) -> Option<NodeMeta> {
        match self.scratch.get(p) {
            Some(meta) => meta.clone(),
            None => self.pending.lookup(self.tree, p),
        }
    }

    pub(super) fn require(&self, p: &str) -> Result<NodeMeta, ErrorCode> {
        self.view(p).ok_or(ErrorCode::NoNode)
    }

    pub(super) fn check_perm(&self, meta: &NodeMeta, perm: i32) -> Result<(), ErrorCode> {
        if self.auth.allows(&meta.acl, perm) {
            Ok(())
        } else {
            Err(ErrorCode::NoAuth)
        }
    }

    fn check_version(expected: i32, actual: i32) -> Result<(), ErrorCode> {
        if expected == -1 || expected == actual {
            Ok(())
        } else {
            Err(ErrorCode::BadVersion)
        }
    }

    /// create, create2, createContainer and createTTL (`ttl` is -1 for the plain ops).
    pub fn create(&mut self, op: OpCode, req: &CreateRequest, ttl: i64) -> Outcome {
        let mode = self.create_mode(req.flags, ttl)?;
        let base = req.path.as_str();
        if !base.contains('/') || base.contains('\0') {
            return Err(ErrorCode::BadArguments);
        }
        let parent_path = path::parent(base);
        let parent = self.view(parent_path);
        // Before the parent's own checks: an invalid ACL is the error ZooKeeper gives first.
        let like = parent.as_ref().map(|p| &p.acl);
        let acl = self.auth.fix_up_like(&req.acl, like)?;
        let parent = parent.ok_or(ErrorCode::NoNode)?;
        self.check_perm(&parent, Perms::CREATE)?;
        let full = if mode.is_sequential() {
            format!("{base}{:010}", parent.stat.cversion)
        } else {
            base.to_owned()
        };
        path::validate(&full).map_err(|_| ErrorCode::BadArguments)?;
        if self.view(&full).is_some() {
            return Err(ErrorCode::NodeExists);
        }
        if parent.ephemeral_session().is_some() {
            return Err(ErrorCode::NoChildrenForEphemerals);
        }
        let parent_cversion = parent.stat.cversion.wrapping_add(1);
        let data_len = req.data.as_ref().map_or(0, Bytes::len) as i64;
        self.charge_quota(&full, 1, data_len, true)?;
        // The opcode, not the flags, makes a container: create and create2 with
        // flags 4 build an ordinary persistent node, as in ZooKeeper.
        let container = op == OpCode::CreateContainer;
        let owner = match mode {
            _ if container => CONTAINER_OWNER,
            _ if mode.is_ephemeral() => self.session,
            _ if mode.is_ttl() => ttl_owner(ttl),
            _ => 0,
        };
        let new = NewNode {
            cversion: parent_cversion,
            owner,
            acl,
            data_len,
        };
        let acl = self.record_create(&full, parent_path, parent, new);
        let data = req.data.clone();
        Ok(match mode {
            _ if container => TxnBody::CreateContainer(CreateContainerTxn {
                path: full,
                data,
                acl,
                parent_c_version: parent_cversion,
            }),
            _ if mode.is_ttl() => TxnBody::CreateTtl(CreateTtlTxn {
                path: full,
                data,
                acl,
                parent_c_version: parent_cversion,
                ttl,
            }),
            _ => TxnBody::Create(
                if op == OpCode::Create {
                    OpCode::Create
                } else {
                    OpCode::Create2
                },
                CreateTxn {
                    path: full,
                    data,
                    acl,
                    ephemeral: mode.is_ephemeral(),
                    parent_c_version: parent_cversion,
                },
            ),
        })
    }

    /// The mode `flags` name, if valid with `ttl` (-1 for none) here.
    fn create_mode(&self, flags: i32, ttl: i64) -> Result<CreateMode, ErrorCode> {
        let mode = CreateMode::from_flags(flags).ok_or(ErrorCode::BadArguments)?;
        if mode.is_ttl() && !self.extended_types {
            return Err(ErrorCode::Unimplemented);
        }
        let ttl_ok = if mode.is_ttl() {
            ttl > 0 && ttl <= MAX_TTL_MS
        } else {
            ttl < 0
        };
        if !ttl_ok {
            return Err(ErrorCode::BadArguments);
        }
        Ok(mode)
    }

    fn record_create(
        &mut self,
        full: &str,
        parent_path: &str,
        mut parent: NodeMeta,
        new: NewNode,
    ) -> SharedAcl {
        let NewNode {
            cversion,
            owner,
            acl,
            data_len,
        } = new;
        parent.stat.cversion = cversion;
        parent.stat.pzxid = self.zxid;
        parent.num_children += 1;
        self.scratch.insert(parent_path.into(), Some(parent));
        let stat = StatPersisted {
            czxid: self.zxid,
            mzxid: self.zxid,
            ctime: self.time,
            mtime: self.time,
            ephemeral_owner: owner,
            pzxid: self.zxid,
            ..StatPersisted::default()
        };
        let meta = NodeMeta {
            stat,
            num_children: 0,
            acl: acl.clone(),
            data_len,
        };
        self.scratch.insert(full.into(), Some(meta));
        acl
    }

    /// delete (`container` false) and deleteContainer (`container` true).
    pub fn delete(&mut self, p: &str, version: i32, container: bool) -> Outcome {
        if !p.contains('/') || p.contains('\0') || UNDELETABLE.contains(&p) {
            return Err(ErrorCode::BadArguments);
        }
        let parent_path = path::parent(p);
        let mut parent = self.require(parent_path)?;
        if !container {
            self.check_perm(&parent, Perms::DELETE)?;
        }
        let node = self.require(p)?;
        if container {
            if node.num_children > 0 {
                return Err(ErrorCode::NotEmpty);
            }
            // ZooKeeper answers BADVERSION for an ordinary ephemeral here.
            if node.ephemeral_session().is_some() {
                return Err(ErrorCode::BadVersion);
            }
        } else {
            Self::check_version(version, node.stat.version)?;
            if node.num_children > 0 {
                return Err(ErrorCode::NotEmpty);
            }
        }
        self.charge_quota(p, -1, -node.data_len, false)?;
        parent.num_children -= 1;
        parent.stat.pzxid = self.zxid;
        self.scratch.insert(parent_path.into(), Some(parent));
        self.scratch.insert(p.into(), None);
        let op = if container {
            OpCode::DeleteContainer
        } else {
            OpCode::Delete
        };
        Ok(TxnBody::Delete(op, DeleteTxn { path: p.to_owned() }))
    }

    /// setData.
    pub fn set_data(&mut self, p: &str, data: &Option<Bytes>, version: i32) -> Outcome {
        path::validate(p).map_err(|_| ErrorCode::BadArguments)?;
        let mut node = self.require(p)?;
        self.check_perm(&node, Perms::WRITE)?;
        let data_len = data.as_ref().map_or(0, Bytes::len) as i64;
        self.charge_quota(p, 0, data_len - node.data_len, true)?;
        Self::check_version(version, node.stat.version)?;
        let new_version = node.stat.version.wrapping_add(1);
        node.stat.version = new_version;
        node.stat.mzxid = self.zxid;
        node.stat.mtime = self.time;
        node.data_len = data_len;
        self.scratch.insert(p.into(), Some(node));
        Ok(TxnBody::SetData(SetDataTxn {
            path: p.to_owned(),
            data: data.clone(),
            version: new_version,
        }))
    }

    /// setACL; the version is compared with the aversion.
    pub fn set_acl(&mut self, p: &str, acl: &[Acl], version: i32) -> Outcome {
        path::validate(p).map_err(|_| ErrorCode::BadArguments)?;
        let acl = self.auth.fix_up(acl)?;
        let mut node = self.require(p)?;
        self.check_perm(&node, Perms::ADMIN)?;
        Self::check_version(version, node.stat.aversion)?;
        let new_version = node.stat.aversion.wrapping_add(1);
        node.stat.aversion = new_version;
        node.acl = Arc::new(acl.clone());
        self.scratch.insert(p.into(), Some(node));
        Ok(TxnBody::SetAcl(SetAclTxn {
            path: p.to_owned(),
            acl,
            version: new_version,
        }))
    }

    /// Adds `count` nodes and `bytes` bytes to the usage of the quota over
    /// `p`, as prepared txns leave it, when quotas are enforced. With
    /// `check`, a write that would pass a hard limit is refused
    /// (ZooKeeper's `checkQuota`); passing a soft limit is logged. Unlike
    /// ZooKeeper, which checks the committed usage only, writes still in
    /// flight are counted, so pipelined creates cannot overshoot.
    fn charge_quota(
        &mut self,
        p: &str,
        count: i64,
        bytes: i64,
        check: bool,
    ) -> Result<(), ErrorCode> {
        if !self.enforce_quota {
            return Ok(());
        }
        let Some(quota) = self.tree.quota_of(p) else {
            return Ok(());
        };
        let usage = (self.scratch.quota_usage(quota.path))
            .or_else(|| self.pending.quota_usage(quota.path))
            .unwrap_or(quota.usage);
        if let Some(excess) = check
            .then(|| quota.limits.excess(usage, count, bytes))
            .flatten()
        {
            let (what, current) = match excess.of_count {
                true => ("count", usage.count),
                false => ("bytes", usage.bytes),
            };
            if excess.hard {
                tracing::debug!(
                    quota = quota.path,
                    what,
                    excess.would_be,
                    excess.limit,
                    "refused: over a hard quota"
                );
                return Err(ErrorCode::QuotaExceeded);
            }
            if current <= excess.limit {
                tracing::warn!(
                    quota = quota.path,
                    what,
                    excess.would_be,
                    excess.limit,
                    "over a soft quota"
                );
            }
        }
        let after = QuotaUsage {
            count: usage.count + count,
            bytes: usage.bytes + bytes,
        };
        self.scratch.set_quota_usage(quota.path, after);
        Ok(())
    }

    /// check (inside a multi).
    pub fn check(&mut self, p: &str, version: i32) -> Outcome {
        path::validate(p).map_err(|_| ErrorCode::BadArguments)?;
        let node = self.require(p)?;
        self.check_perm(&node, Perms::READ)?;
        Self::check_version(version, node.stat.version)?;
        Ok(TxnBody::Check(CheckVersionTxn {
            path: p.to_owned(),
            version,
        }))
    }

    /// closeSession (from the client or from expiry): deletes the session's
    /// ephemerals as the pipeline will see them, including ones created by
    /// prepared txns, so later pipelined writes validate against their absence.
    pub fn close_session(&mut self) -> TxnBody {
        let mut paths: std::collections::BTreeSet<String> =
            self.tree.ephemerals_of(self.session).into_iter().collect();
        paths.extend(self.pending.ephemerals_of(self.session));
        let mut doomed = Vec::new();
        for p in paths {
            let Some(node) = self.view(&p) else {
                continue;
            };
            if node.ephemeral_session() != Some(self.session) {
                continue;
            }
            // Never refused: a delete is not checked against a quota.
            let _ = self.charge_quota(&p, -1, -node.data_len, false);
            let parent_path = path::parent(&p);
            if let Some(mut parent) = self.view(parent_path) {
                parent.num_children -= 1;
                parent.stat.pzxid = self.zxid;
                self.scratch.insert(parent_path.into(), Some(parent));
            }
            self.scratch.insert(p.as_str().into(), None);
            doomed.push((node.stat.czxid, p));
        }
        TxnBody::CloseSession(CloseSessionTxn {
            paths2_delete: in_zookeeper_order(doomed),
        })
    }

    fn multi_op(&mut self, op: &MultiOp) -> Outcome {
        match op {
            MultiOp::Create(code, r) => self.create(*code, r, -1),
            MultiOp::CreateTtl(r) => {
                let req = CreateRequest {
                    path: r.path.clone(),
                    data: r.data.clone(),
                    acl: r.acl.clone(),
                    flags: r.flags,
                };
                self.create(OpCode::CreateTtl, &req, r.ttl)
            }
            MultiOp::Delete(r) => self.delete(&r.path, r.version, false),
            MultiOp::SetData(r) => self.set_data(&r.path, &r.data, r.version),
            MultiOp::Check(r) => self.check(&r.path, r.version),
            MultiOp::GetData(_) | MultiOp::GetChildren(_) => Err(ErrorCode::MarshallingError),
        }
    }

    /// multi: all sub-ops or none. On failure every sub-txn is an ErrorTxn
    /// (0 before the failing op, its code, then -2) and nothing is recorded.
    pub fn multi(&mut self, ops: &[MultiOp]) -> TxnBody {
        let mut subs = Vec::with_capacity(ops.len());
        for (i, op) in ops.iter().enumerate() {
            match self.multi_op(op) {
                Ok(body) => subs.push(body),
                Err(code) => {
                    self.scratch.clear();
                    let errors = (0..ops.len()).map(|j| {
                        let err = match j.cmp(&i) {
                            std::cmp::Ordering::Less => 0,
                            std::cmp::Ordering::Equal => code.code(),
                            std::cmp::Ordering::Greater => ErrorCode::RuntimeInconsistency.code(),
                        };
                        TxnBody::Error(ErrorTxn { err })
                    });
                    return TxnBody::Multi(errors.collect());
                }
            }
        }
        TxnBody::Multi(subs)
    }
}

/// A closing session's ephemerals in the order ZooKeeper's leader lists them
/// in its closeSession txn, which is the order they are deleted (and their
/// watchers told) on every member: a clone of the session's hash set, which
/// was filled in creation (czxid) order.
fn in_zookeeper_order(mut doomed: Vec<(i64, String)>) -> Vec<String> {
    doomed.sort_by_key(|(czxid, _)| *czxid);
    let names: Vec<&str> = doomed.iter().map(|(_, p)| p.as_str()).collect();
    let order = crate::core::java_order::hash_set_clone_order(&names);
    order.into_iter().map(|i| doomed[i].1.clone()).collect()
}
