//! The watch registry: ZooKeeper's two tables (data and child), each mapping
//! (path, connection) to a set of modes. Watches belong to connections, are
//! never replicated, and vanish when the connection closes.
//!
//! Firing (`WatchManager.triggerWatch`): a watcher on the exact path fires
//! whatever its mode; one on an ancestor fires only if persistent-recursive;
//! standard watches are one-shot; each connection gets at most one frame per
//! trigger.

use crate::core::types::ConnId;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound::Included;
use std::sync::Arc;
use zkd_protocol::{EventType, WatcherType};

/// Which table a watch lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Table {
    /// exists, getData and persistent watches; fires created, deleted, data changed.
    Data,
    /// getChildren and persistent watches; fires children changed and deleted.
    Child,
}

/// A watch mode bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One-shot.
    Standard = 1,
    /// Stays after firing; this path only.
    Persistent = 2,
    /// Stays after firing; this path and every descendant (data table only).
    PersistentRecursive = 4,
}

mod watchers;

use watchers::Watchers;

/// Both watch tables plus a per-connection index for cleanup. A watched
/// path is stored once, shared by its table and the index (issue 52: a
/// watch cost 368 B, most of it copies of its path and B-tree nodes).
#[derive(Debug, Default)]
pub struct WatchRegistry {
    data: BTreeMap<Arc<str>, Watchers>,
    child: BTreeMap<Arc<str>, Watchers>,
    by_conn: BTreeMap<ConnId, BTreeSet<(Table, Arc<str>)>>,
    recursive: usize,
}

impl WatchRegistry {
    fn table(&mut self, t: Table) -> &mut BTreeMap<Arc<str>, Watchers> {
        match t {
            Table::Data => &mut self.data,
            Table::Child => &mut self.child,
        }
    }

    /// Registers a watch; registering the same one twice is one watch.
    pub fn add(&mut self, table: Table, path: &str, conn: ConnId, mode: Mode) {
        let tab = self.table(table);
        let key = match tab.get_key_value(path) {
            Some((key, _)) => key.clone(),
            None => {
                let key: Arc<str> = Arc::from(path);
                tab.insert(key.clone(), Watchers::default());
                key
            }
        };
        let Some(watchers) = tab.get_mut(path) else {
            return;
        };
        let modes = watchers.modes_mut(conn);
        let had_recursive = *modes & Mode::PersistentRecursive as u8 != 0;
        *modes |= mode as u8;
        if mode == Mode::PersistentRecursive && !had_recursive {
            self.recursive += 1;
        }
        self.by_conn.entry(conn).or_default().insert((table, key));
    }

    /// Clears `mask` bits of a watch; returns the bits that were set.
    fn clear(&mut self, table: Table, path: &str, conn: ConnId, mask: u8) -> u8 {
        let tab = self.table(table);
        let Some((key, watchers)) = tab
            .range_mut::<str, _>((Included(path), Included(path)))
            .next()
        else {
            return 0;
        };
        let key = key.clone();
        let Some(modes) = watchers.get_mut(conn) else {
            return 0;
        };
        let removed = *modes & mask;
        *modes &= !mask;
        let now_empty = *modes == 0;
        if now_empty {
            watchers.remove(conn);
            if watchers.is_empty() {
                tab.remove(path);
            }
        }
        if removed & Mode::PersistentRecursive as u8 != 0 {
            self.recursive -= 1;
        }
        if now_empty {
            if let Some(idx) = self.by_conn.get_mut(&conn) {
                idx.remove(&(table, key));
                if idx.is_empty() {
                    self.by_conn.remove(&conn);
                }
            }
        }
        removed
    }

    fn modes(&self, table: Table, path: &str, conn: ConnId) -> u8 {
        let tab = match table {
            Table::Data => &self.data,
            Table::Child => &self.child,
        };
        tab.get(path).and_then(|w| w.get(conn)).unwrap_or(0)
    }

    /// Drops every watch of a closed connection.
    pub fn remove_connection(&mut self, conn: ConnId) {
        for (table, path) in self.by_conn.remove(&conn).unwrap_or_default() {
            let tab = self.table(table);
            let mut removed = 0;
            if let Some(watchers) = tab.get_mut(&path) {
                removed = watchers.remove(conn).unwrap_or(0);
                if watchers.is_empty() {
                    tab.remove(&path);
                }
            }
            if removed & Mode::PersistentRecursive as u8 != 0 {
                self.recursive -= 1;
            }
        }
    }

    /// Fires one table for `(path, event)`; returns the connections to notify.
    fn fire(&mut self, table: Table, path: &str, skip: &BTreeSet<ConnId>) -> BTreeSet<ConnId> {
        let mut hit = BTreeSet::new();
        if let Some(watchers) = self.table(table).get(path) {
            hit.extend(watchers.iter().map(|(c, _)| c));
        }
        // Ancestors only matter for persistent-recursive watches; skip the walk if none exist.
        if self.recursive > 0 && table == Table::Data {
            let mut p = path;
            while p != "/" {
                p = zkd_storage::path::parent(p);
                if let Some(watchers) = self.data.get(p) {
                    hit.extend(
                        watchers
                            .iter()
                            .filter(|(_, m)| m & Mode::PersistentRecursive as u8 != 0)
                            .map(|(c, _)| c),
                    );
                }
            }
        }
        // One-shot watches on the path are consumed even for connections that
        // are skipped because the other table already notified them.
        let exact: Vec<ConnId> = hit
            .iter()
            .copied()
            .filter(|c| self.modes(table, path, *c) != 0)
            .collect();
        for conn in exact {
            self.clear(table, path, conn, Mode::Standard as u8);
        }
        hit.retain(|c| !skip.contains(c));
        hit
    }

    /// The connections a txn's `(path, event)` notifies, consuming one-shot watches.
    pub fn trigger(&mut self, path: &str, event: EventType) -> BTreeSet<ConnId> {
        let none = BTreeSet::new();
        match event {
            EventType::NodeCreated | EventType::NodeDataChanged => {
                self.fire(Table::Data, path, &none)
            }
            EventType::NodeChildrenChanged => self.fire(Table::Child, path, &none),
            EventType::NodeDeleted => {
                let mut hit = self.fire(Table::Data, path, &none);
                let child = self.fire(Table::Child, path, &hit);
                hit.extend(child);
                hit
            }
        }
    }

    /// checkWatches: whether the connection holds a watch of `kind` on `path`.
    pub fn has(&self, path: &str, conn: ConnId, kind: WatcherType) -> bool {
        let data = self.modes(Table::Data, path, conn);
        let child = self.modes(Table::Child, path, conn);
        match kind {
            WatcherType::Children => child & Mode::Standard as u8 != 0,
            WatcherType::Data => data & Mode::Standard as u8 != 0,
            WatcherType::Any => data | child != 0,
            WatcherType::Persistent => data & Mode::Persistent as u8 != 0,
            WatcherType::PersistentRecursive => data & Mode::PersistentRecursive as u8 != 0,
        }
    }

    /// removeWatches: removes watches of `kind`; true if any was removed.
    pub fn remove(&mut self, path: &str, conn: ConnId, kind: WatcherType) -> bool {
        let std = Mode::Standard as u8;
        let pers = Mode::Persistent as u8;
        let removed = match kind {
            WatcherType::Children => self.clear(Table::Child, path, conn, std),
            WatcherType::Data => self.clear(Table::Data, path, conn, std),
            WatcherType::Any => {
                self.clear(Table::Data, path, conn, 0xff)
                    | self.clear(Table::Child, path, conn, 0xff)
            }
            WatcherType::Persistent => {
                self.clear(Table::Data, path, conn, pers)
                    | self.clear(Table::Child, path, conn, pers)
            }
            WatcherType::PersistentRecursive => {
                self.clear(Table::Data, path, conn, Mode::PersistentRecursive as u8)
            }
        };
        removed != 0
    }

    /// (connections, paths, watches) of the data table, as `wchs` reports them.
    pub fn data_summary(&self) -> (usize, usize, usize) {
        let conns: BTreeSet<_> = self
            .data
            .values()
            .flat_map(|w| w.iter().map(|(c, _)| c))
            .collect();
        let watches = self.data.values().map(Watchers::len).sum();
        (conns.len(), self.data.len(), watches)
    }

    /// Total watch entries in both tables (`zk_watch_count`).
    pub fn count(&self) -> usize {
        self.data
            .values()
            .chain(self.child.values())
            .map(Watchers::len)
            .sum()
    }

    /// Data-table paths watched by each connection (`wchc`).
    pub fn data_paths_by_conn(&self) -> BTreeMap<ConnId, Vec<String>> {
        let mut out: BTreeMap<ConnId, Vec<String>> = BTreeMap::new();
        for (path, watchers) in &self.data {
            for (conn, _) in watchers.iter() {
                out.entry(conn).or_default().push(path.to_string());
            }
        }
        out
    }

    /// Connections watching each data-table path (`wchp`).
    pub fn data_conns_by_path(&self) -> BTreeMap<String, Vec<ConnId>> {
        self.data
            .iter()
            .map(|(p, w)| (p.to_string(), w.iter().map(|(c, _)| c).collect()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: ConnId = ConnId(1);
    const B: ConnId = ConnId(2);

    #[test]
    fn standard_watches_fire_once() {
        let mut r = WatchRegistry::default();
        r.add(Table::Data, "/a", A, Mode::Standard);
        assert_eq!(
            r.trigger("/a", EventType::NodeDataChanged),
            BTreeSet::from([A])
        );
        assert!(r.trigger("/a", EventType::NodeDataChanged).is_empty());
        assert_eq!(r.count(), 0);
    }

    #[test]
    fn recursive_watches_see_descendants_but_not_child_events() {
        let mut r = WatchRegistry::default();
        r.add(Table::Data, "/a", A, Mode::PersistentRecursive);
        r.add(Table::Data, "/a", B, Mode::Persistent);
        r.add(Table::Child, "/a", B, Mode::Persistent);
        assert_eq!(
            r.trigger("/a/b/c", EventType::NodeCreated),
            BTreeSet::from([A])
        );
        assert_eq!(
            r.trigger("/a", EventType::NodeChildrenChanged),
            BTreeSet::from([B])
        );
        assert_eq!(
            r.trigger("/a", EventType::NodeDataChanged),
            BTreeSet::from([A, B])
        );
        assert!(r.has("/a", A, WatcherType::PersistentRecursive));
    }

    #[test]
    fn delete_notifies_each_connection_once() {
        let mut r = WatchRegistry::default();
        r.add(Table::Data, "/a", A, Mode::Standard);
        r.add(Table::Child, "/a", A, Mode::Standard);
        r.add(Table::Child, "/a", B, Mode::Standard);
        assert_eq!(
            r.trigger("/a", EventType::NodeDeleted),
            BTreeSet::from([A, B])
        );
        assert_eq!(r.count(), 0);
    }

    #[test]
    fn removal_by_kind_and_connection_close() {
        let mut r = WatchRegistry::default();
        r.add(Table::Data, "/a", A, Mode::Standard);
        r.add(Table::Child, "/a", A, Mode::Standard);
        assert!(r.remove("/a", A, WatcherType::Children));
        assert!(!r.remove("/a", A, WatcherType::Children));
        assert!(r.has("/a", A, WatcherType::Data));
        r.add(Table::Data, "/b", A, Mode::PersistentRecursive);
        r.remove_connection(A);
        assert_eq!(r.count(), 0);
        assert!(r.trigger("/b/c", EventType::NodeCreated).is_empty());
    }
}
