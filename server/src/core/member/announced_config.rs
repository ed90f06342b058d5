//! The ensemble configuration a NEWLEADER carries (ZooKeeper's
//! lastSeenQuorumVerifier). With `reconfigEnabled`, a leader whose
//! configuration has no version yet gives it its epoch's zxid
//! (ZOOKEEPER-1783: an established configuration outranks the partial one a
//! joining member starts with). The leader activates it once its epoch is
//! established; a follower keeps what NEWLEADER brought and activates it at
//! UPTODATE, as ZooKeeper's `processReconfig` does (or a reconfig committed
//! during its sync, if later).

use super::{Ctx, Member, Role};
use crate::core::election::ServerId;
use crate::core::zab::Epoch;
use crate::core::{EnsembleConfig, Node};
use crate::failpoints::{active, Failpoint};
use bytes::Bytes;
use zkd_protocol::Zxid;

impl Member {
    /// What the leader's NEWLEADER for `epoch` carries: its configuration,
    /// an unversioned one under the epoch's zxid; nothing without reconfig.
    pub(super) fn announced_config(node: &Node, epoch: Epoch) -> Bytes {
        Self::established(node, epoch).map_or_else(Bytes::new, |c| c.text)
    }

    /// The configuration the leader of `epoch` establishes, with reconfig.
    /// A reconfig its history applied to its tree outranks the one in effect.
    fn established(node: &Node, epoch: Epoch) -> Option<EnsembleConfig> {
        let config = node
            .ensemble_config()
            .filter(|_| Self::hands_on_config(node))?;
        Some(match (node.logged_ensemble_config(), config.version) {
            (Some(logged), _) => logged,
            (None, 0) => config.with_version(Zxid::new(epoch, 0).0),
            (None, _) => config.clone(),
        })
    }

    /// Whether an epoch hands its leader's configuration on: only with
    /// reconfig. Without, each member keeps its zoo.cfg's, as ZooKeeper's
    /// do since ZOOKEEPER-3829 (a rolling restart changes the membership).
    fn hands_on_config(node: &Node) -> bool {
        // Planted (config-handed-on-without-reconfig): ZOOKEEPER-3814 back.
        node.reconfig_enabled() || active(Failpoint::ConfigHandedOnWithoutReconfig)
    }

    /// Follower: the configuration in `from`'s NEWLEADER, kept until UPTODATE.
    pub(super) fn note_announced(&mut self, from: ServerId, config: &Bytes) {
        if let Role::Following(f) = &self.role {
            if f.leader() == from && !config.is_empty() {
                self.announced = EnsembleConfig::parse(config.clone());
            }
        }
    }

    /// The role serves: the configuration its epoch established takes
    /// effect, if later than the one in effect.
    pub(super) fn activate_announced(&mut self, ctx: &mut Ctx<'_>) {
        let announced = match &self.role {
            Role::Leading(l) => Self::established(ctx.node, l.epoch()),
            // Without reconfig a follower keeps its own, as ZooKeeper's does.
            // A reconfig committed while it synced (after NEWLEADER) is in its
            // tree and outranks what NEWLEADER announced, as ZooKeeper's
            // learner activates a COMMITANDACTIVATE during its sync.
            _ => {
                let announced = self.announced.take();
                let committed = ctx.node.logged_ensemble_config();
                // Planted (uptodate-announced-only): ZOOKEEPER-2172 back.
                let committed = committed.filter(|_| !active(Failpoint::UptodateAnnouncedOnly));
                [announced, committed]
                    .into_iter()
                    .flatten()
                    .max_by_key(|c| c.version)
                    .filter(|_| Self::hands_on_config(ctx.node))
            }
        };
        let current = ctx.node.ensemble_config().map(|c| c.version);
        if let (Some(config), Some(current)) = (announced, current) {
            if config.version > current {
                ctx.node.activate_ensemble_config(config);
            }
        }
    }
}
