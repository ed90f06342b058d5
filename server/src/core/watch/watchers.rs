//! The connections watching one path, and the mode bits of each.

use crate::core::types::ConnId;
use std::collections::BTreeMap;

/// Who watches one path. Most paths have one watcher, kept inline: a
/// B-tree of one entry is a node of eleven, and a boxed tree keeps each
/// table entry at 16 bytes (issue 52).
#[derive(Debug, Default)]
pub(super) enum Watchers {
    #[default]
    Nobody,
    One(ConnId, u8),
    // Boxed on purpose: the tree's 24 bytes inline would make every entry
    // of the table, most of which hold one watcher, 32 bytes.
    #[allow(clippy::box_collection)]
    Many(Box<BTreeMap<ConnId, u8>>),
}

impl Watchers {
    /// The modes `conn` holds here, added (as none) if it holds none.
    pub(super) fn modes_mut(&mut self, conn: ConnId) -> &mut u8 {
        match self {
            Watchers::Nobody => *self = Watchers::One(conn, 0),
            Watchers::One(c, m) if *c != conn => {
                *self = Watchers::Many(Box::new(BTreeMap::from([(*c, *m)])));
            }
            _ => {}
        }
        match self {
            Watchers::Nobody => unreachable!("a watcher was just added"),
            Watchers::One(_, m) => m,
            Watchers::Many(map) => map.entry(conn).or_insert(0),
        }
    }

    /// The modes `conn` holds here, if any.
    pub(super) fn get(&self, conn: ConnId) -> Option<u8> {
        match self {
            Watchers::Nobody => None,
            Watchers::One(c, m) => (*c == conn).then_some(*m),
            Watchers::Many(map) => map.get(&conn).copied(),
        }
    }

    /// The modes `conn` holds here, to change.
    pub(super) fn get_mut(&mut self, conn: ConnId) -> Option<&mut u8> {
        match self {
            Watchers::Nobody => None,
            Watchers::One(c, m) => (*c == conn).then_some(m),
            Watchers::Many(map) => map.get_mut(&conn),
        }
    }

    /// Removes `conn`'s watches here, returning its modes.
    pub(super) fn remove(&mut self, conn: ConnId) -> Option<u8> {
        match self {
            Watchers::One(c, m) if *c == conn => {
                let modes = *m;
                *self = Watchers::Nobody;
                Some(modes)
            }
            Watchers::Nobody | Watchers::One(..) => None,
            Watchers::Many(map) => map.remove(&conn),
        }
    }

    /// Whether nobody watches here.
    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many connections watch here.
    pub(super) fn len(&self) -> usize {
        match self {
            Watchers::Nobody => 0,
            Watchers::One(..) => 1,
            Watchers::Many(map) => map.len(),
        }
    }

    /// Each watching connection and its modes, in connection order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (ConnId, u8)> + '_ {
        let (one, many) = match self {
            Watchers::Nobody => (None, None),
            Watchers::One(c, m) => (Some((*c, *m)), None),
            Watchers::Many(map) => (None, Some(map.iter().map(|(c, m)| (*c, *m)))),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_watcher_then_many_then_none() {
        let mut w = Watchers::default();
        assert!(w.is_empty());
        *w.modes_mut(ConnId(2)) |= 1;
        *w.modes_mut(ConnId(2)) |= 2;
        assert!(matches!(w, Watchers::One(ConnId(2), 3)));
        *w.modes_mut(ConnId(1)) |= 4;
        let all: Vec<_> = w.iter().collect();
        assert_eq!(all, [(ConnId(1), 4), (ConnId(2), 3)]);
        assert_eq!(w.remove(ConnId(2)), Some(3));
        assert_eq!((w.get(ConnId(1)), w.get(ConnId(2))), (Some(4), None));
        assert_eq!(w.remove(ConnId(1)), Some(4));
        assert!(w.is_empty());
        assert_eq!(w.remove(ConnId(1)), None);
    }
}
