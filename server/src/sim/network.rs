//! The simulated network between members: FIFO links with random delays;
//! partitions that break connections (what was in flight is lost and both
//! ends learn it); one-way partitions, where TCP keeps retransmitting what
//! one direction carries, so it arrives late and in order when the path
//! heals, unless an end closed the connection meanwhile; and election links
//! that carry their last notification again when they reconnect, now and
//! then followed by an older one (read late from the connection the new one
//! replaced: the runtime keeps one election connection per pair, but a
//! reader of the old one can still hand over what it read).

use super::{Packet, Sim, Wire};
use crate::core::election::ServerId;

impl Sim {
    /// Puts `packet` on the link from `from` to `to`.
    pub(super) fn send(&mut self, from: ServerId, to: ServerId, packet: Packet) {
        if let Packet::Wire(Wire::Election(n)) = &packet {
            if let Some(older) = self.last_notification.insert((from, to), *n) {
                self.older_notification.insert((from, to), older);
            }
        }
        if self.is_cut(from, to) || !matches!(self.members.get(&to), Some(Some(_))) {
            return;
        }
        if self.one_way.contains(&(from, to)) {
            self.held.entry((from, to)).or_default().push_back(packet);
            return;
        }
        let link = self.link_clock.entry((from, to)).or_insert(0);
        let at = (self.now + 1 + self.rng.below(10)).max(*link);
        *link = at;
        self.seq += 1;
        self.in_flight.insert((at, self.seq), (from, to, packet));
    }

    pub(super) fn is_cut(&self, a: ServerId, b: ServerId) -> bool {
        self.cut.contains(&(a.min(b), a.max(b)))
    }

    /// `closer` closed its quorum link to `peer`: what `peer` sent on it and
    /// a one-way partition still holds will never be read. Election
    /// notifications travel on a connection of their own and stay.
    pub(super) fn quorum_link_closed(&mut self, closer: ServerId, peer: ServerId) {
        if let Some(held) = self.held.get_mut(&(peer, closer)) {
            held.retain(|p| matches!(p, Packet::Wire(Wire::Election(_))));
        }
        self.send(closer, peer, Packet::Closed);
    }

    /// A partition breaks the connection, as TCP would: what it carried is
    /// lost and both ends learn that it closed.
    pub(super) fn cut_link(&mut self, a: ServerId, b: ServerId) {
        if self.trace {
            eprintln!("{:>6} ms  cut {a}-{b}", self.now);
        }
        self.cut.insert((a.min(b), a.max(b)));
        self.in_flight
            .retain(|_, (from, to, _)| !((*from == a && *to == b) || (*from == b && *to == a)));
        self.held.remove(&(a, b));
        self.held.remove(&(b, a));
        for (end, other) in [(a, b), (b, a)] {
            if let Some(&until) = self.paused.get(&end) {
                // A stopped process learns of the close when it runs again.
                self.seq += 1;
                let closed = (other, end, Packet::Closed);
                self.in_flight.insert((until, self.seq), closed);
                continue;
            }
            let now = self.local(end);
            if let Some(Some(m)) = self.members.get_mut(&end) {
                m.disconnected(now, other);
                self.collect(end);
            }
        }
    }

    /// What `from` sends `to` stops arriving, silently: no end learns of
    /// it, and TCP holds the packets until the path heals.
    pub(super) fn cut_one_way(&mut self, from: ServerId, to: ServerId) {
        if self.trace {
            eprintln!("{:>6} ms  cut {from}->{to} one way", self.now);
        }
        self.one_way.insert((from, to));
    }

    /// Every cut link works again. Each end of a broken election link
    /// reconnects and carries the last notification it sent again
    /// (ZooKeeper's and the runtime's peer layer do), so one sent into the
    /// partition is not lost; now and then an older one is read after it.
    /// What one-way partitions held arrives, in order.
    pub(super) fn heal_links(&mut self) {
        let healed = std::mem::take(&mut self.cut);
        for (a, b) in healed {
            for (from, to) in [(a, b), (b, a)] {
                if !matches!(self.members.get(&from), Some(Some(_))) {
                    continue;
                }
                let Some(last) = self.last_notification.get(&(from, to)).copied() else {
                    continue;
                };
                let older = self.older_notification.get(&(from, to)).copied();
                self.send(from, to, Packet::Wire(Wire::Election(last)));
                if let Some(older) = older.filter(|_| self.rng.below(2) == 0) {
                    self.counts.stale_notifications += 1;
                    self.send(from, to, Packet::Wire(Wire::Election(older)));
                    // Still the newest this end sent, for its next reconnect.
                    self.last_notification.insert((from, to), last);
                }
            }
        }
        self.one_way.clear();
        let held = std::mem::take(&mut self.held);
        for ((from, to), packets) in held {
            for packet in packets {
                if matches!(packet, Packet::Wire(_)) {
                    self.counts.late_packets += 1;
                }
                self.send(from, to, packet);
            }
        }
    }

    /// A crashed member's links are gone with it, and a new process
    /// remembers no notification it sent.
    pub(super) fn forget_links(&mut self, id: ServerId) {
        self.in_flight
            .retain(|_, (from, to, _)| *from != id && *to != id);
        self.link_clock
            .retain(|(from, to), _| *from != id && *to != id);
        self.held.retain(|(from, to), _| *from != id && *to != id);
        self.last_notification.retain(|(from, _), _| *from != id);
        self.older_notification.retain(|(from, _), _| *from != id);
    }
}
