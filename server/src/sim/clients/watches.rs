//! Data watches as a client relies on them: a watch set by a read that
//! was answered at zxid R fires for the first change of its node after R,
//! and its notification comes before any answer (at zxid Z) that shows
//! that change, on this connection or, after a reattach with SetWatches, on
//! the next. So an answer at Z while the session still holds a watch set
//! at R, with an acknowledged setData of that node in (R, Z], is a missed
//! (or late) watch.

use super::Session;
use crate::sim::Violation;
use std::collections::{BTreeMap, BTreeSet};
use zkd_storage::DataTree;

/// How many acknowledged persistent nodes clients set data on and watch:
/// few, so that watches and changes meet.
const HOT: usize = 8;

/// Acknowledged setData: each node's mzxids.
#[derive(Default)]
pub(super) struct Changes {
    by_path: BTreeMap<String, BTreeSet<i64>>,
}

impl Changes {
    /// A setData of `path` was acknowledged with mzxid `zxid`.
    pub fn record(&mut self, path: String, zxid: i64) {
        self.by_path.entry(path).or_default().insert(zxid);
    }

    /// The nodes clients change and watch, among the acknowledged creates.
    pub fn hot(acked: &BTreeMap<String, i64>) -> impl Iterator<Item = &String> {
        acked.keys().take(HOT)
    }

    /// A watch `session` holds whose node changed at or before `answered`,
    /// after the watch was set: it should have fired before this answer.
    pub fn missed(&self, name: usize, session: &Session, answered: i64) -> Result<(), Violation> {
        for (path, set_at) in &session.watches {
            let Some(changes) = self.by_path.get(path).filter(|_| answered > *set_at) else {
                continue;
            };
            if let Some(change) = changes.range(set_at + 1..=answered).next() {
                return Err(Violation(format!(
                    "watches: client {name}'s watch on {path}, set at {set_at:#x}, did not fire for its change at {change:#x} before an answer at {answered:#x}"
                )));
            }
        }
        Ok(())
    }

    /// Every acknowledged setData is in the converged tree: its node's
    /// mzxid is at least the last one acknowledged.
    pub fn check_final(&self, tree: &DataTree) -> Result<(), Violation> {
        for (path, changes) in &self.by_path {
            let last = changes.last().copied().unwrap_or(0);
            let found = tree.node(path).map(|n| n.stat.mzxid);
            if found.is_none_or(|m| m < last) {
                return Err(Violation(format!(
                    "durability: setData of {path} was acknowledged at {last:#x}; the final tree has mzxid {found:?}"
                )));
            }
        }
        Ok(())
    }
}
