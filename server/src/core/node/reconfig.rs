//! The node's side of the ensemble's configuration: the one in effect and
//! `/zookeeper/config`, what a reconfig's prep needs to know, and a
//! committed reconfig taking effect.

use super::mode::ModeState;
use super::Node;
use crate::core::election::ServerId;
use crate::core::pipeline::reconfig::{reconfig_config, ReconfigContext, CONFIG_NODE};
use crate::core::types::{Command, Mode};
use crate::core::EnsembleConfig;
use crate::failpoints::{active, Failpoint};
use zkd_storage::{Txn, TxnBody};

impl Node {
    /// The ensemble configuration in effect.
    pub fn ensemble_config(&self) -> Option<&EnsembleConfig> {
        self.config.ensemble_config.as_ref()
    }

    /// `reconfigEnabled`: the member versions its configuration and hands
    /// it on.
    pub fn reconfig_enabled(&self) -> bool {
        self.config.reconfig_enabled
    }

    /// A later version of the ensemble configuration takes effect here:
    /// `/zookeeper/config` shows it from now on.
    pub fn activate_ensemble_config(&mut self, config: EnsembleConfig) {
        tracing::info!(version = %format!("{:x}", config.version), "ensemble configuration activated");
        self.config.ensemble_config = Some(config.clone());
        self.show_ensemble_config();
        self.commands
            .push_back(Command::RecordEnsembleConfig(config));
    }

    /// `/zookeeper/config` shows the configuration in effect, unless the
    /// tree holds a later one: a reconfig committed and not in effect here
    /// yet (replayed at boot, or in a SNAP's image), which a new leader's
    /// epoch or a follower's UPTODATE activates and must still find.
    pub(in crate::core) fn show_ensemble_config(&mut self) {
        let Some(config) = &self.config.ensemble_config else {
            return;
        };
        let shown = self.tree.node(CONFIG_NODE).map_or(0, |n| n.stat.mzxid);
        // Planted (config-node-overwritten): the later reconfig is lost.
        if shown <= config.version || active(Failpoint::ConfigNodeOverwritten) {
            self.tree
                .set_ensemble_config(config.text.clone(), config.version);
        }
    }

    /// The configuration the tree holds when a reconfig txn applied there
    /// is later than the one in effect (a leader's history applied before
    /// its epoch is established); None otherwise.
    pub fn logged_ensemble_config(&self) -> Option<EnsembleConfig> {
        let node = self.tree.node(CONFIG_NODE)?;
        let current = self.ensemble_config()?.version;
        let text = node.data().map(bytes::Bytes::copy_from_slice)?;
        (node.stat.mzxid > current).then(|| reconfig_config(&Some(text), node.stat.mzxid))
    }

    /// Leader: the followers synced with it (and itself) changed.
    pub fn set_synced(&mut self, synced: Vec<ServerId>) {
        if let ModeState::Leading(l) = &mut self.mode {
            l.synced = synced;
        }
    }

    /// What a reconfig's prep needs to know of the ensemble.
    pub(in crate::core) fn reconfig_context(&self) -> ReconfigContext {
        let synced = match &self.mode {
            ModeState::Leading(l) => l.synced.clone(),
            _ => Vec::new(),
        };
        ReconfigContext {
            enabled: self.config.reconfig_enabled,
            config: self.config.ensemble_config.clone(),
            synced,
            standalone_enabled: self.config.standalone_enabled,
        }
    }

    /// A committed reconfig takes effect on a member that serves, with
    /// reconfig (ZooKeeper's `processReconfig` ignores it without). One
    /// still syncing takes what its leader's NEWLEADER announced at
    /// UPTODATE instead, and a new leader what its epoch established.
    pub(in crate::core) fn activate_reconfig(&mut self, txn: &Txn) {
        let TxnBody::Reconfig(t) = &txn.body else {
            return;
        };
        let serving = matches!(
            self.mode(),
            Mode::Leading | Mode::Following | Mode::Observing
        );
        let current = self.ensemble_config().map_or(i64::MAX, |c| c.version);
        if serving && self.config.reconfig_enabled && txn.zxid().0 > current {
            self.activate_ensemble_config(reconfig_config(&t.data, txn.zxid().0));
        }
    }
}
