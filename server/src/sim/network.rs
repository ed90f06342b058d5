//! The whole-member simulation's network and faults: FIFO links with
//! random delays; partitions (connections across them break, both ends
//! learn), one-way ones (one direction's packets held, as TCP retransmits
//! them, delivered late and in order when the path heals, unless an end
//! closed the connection meanwhile) and bridges (two sides that cannot
//! reach each other, one member reaching both); pauses; and the random
//! schedule that picks among them and the disk faults (`disk`).

use super::links::weight;
use super::reader::wire_conn;
use super::trap::Moment;
use super::{Held, SyncKind, Violation, WholeSim, Wire};
use crate::core::election::ServerId;
use crate::core::peer_event::{LearnerIntake, PeerEvent};
use crate::core::zab::ZabMessage;
use crate::core::ReadPermit;

/// How long after its connection closed a message may still reach its member.
const LATE_READ_MS: u64 = 200;

/// How often a learner's first message held by a looking member is read again.
const HELD_LEARNER_RETRY_MS: u64 = 10;

/// Which packets (from, to, what) a script sets aside as they are sent.
pub(super) type Aside = Box<dyn FnMut(ServerId, ServerId, &Wire) -> bool>;

impl WholeSim {
    /// Puts what `from` sent on the link to `to`. A quorum message that
    /// cannot get there breaks its connection, and the sender learns.
    pub(super) fn send(&mut self, from: ServerId, to: ServerId, wire: Wire) {
        if self.hostile_reads(from, &wire) {
            return;
        }
        match &wire {
            Wire::Notification(n) => {
                self.last_notification.insert((from, to), n.clone());
                self.announced.insert(n.clone());
            }
            Wire::Closed { conn } => {
                self.kill_conn(*conn);
            }
            Wire::Zab { .. } | Wire::Snap { .. } | Wire::Refused => {}
        }
        if self.one_way.contains(&(from, to)) && matches!(self.procs.get(&to), Some(Some(_))) {
            self.held.entry((from, to)).or_default().push_back(wire);
            return;
        }
        let reachable = !self.is_cut(from, to) && matches!(self.procs.get(&to), Some(Some(_)));
        if !reachable {
            if matches!(wire, Wire::Notification(_)) && matches!(self.procs.get(&to), Some(None)) {
                // Nothing listens at a crashed member's port: the dial is refused.
                self.counts.refusals += 1;
                let delay = 1 + self.rng.below(5);
                self.queue(to, from, Wire::Refused, delay);
            }
            if let Wire::Zab { conn, .. } | Wire::Snap { conn, .. } = wire {
                if self.kill_conn(conn) {
                    let delay = 1 + self.rng.below(50);
                    self.queue(to, from, Wire::Closed { conn }, delay);
                }
            }
            return;
        }
        let delay = 1 + self.rng.below(10);
        self.queue(from, to, wire, delay);
    }

    /// Whether `wire` may reach `to`: a quorum message on a connection `to`
    /// does not know yet is a learner's first, taken only as the runtime's
    /// peer layer takes it ([`LearnerIntake`]): while `to` looks it waits,
    /// read again a little later; while `to` follows it closes.
    fn learner_taken(&mut self, from: ServerId, to: ServerId, wire: &Wire) -> bool {
        let (Wire::Zab { conn, .. }, Some(Some(p))) = (wire, self.procs.get(&to)) else {
            return true;
        };
        let conn = *conn;
        if p.links.quorum.get(&from) == Some(&conn) {
            return true;
        }
        match p.links.intake {
            LearnerIntake::Taken => true,
            LearnerIntake::Held => {
                let Wire::Zab { message, .. } = wire else {
                    return true;
                };
                let message = message.clone();
                self.queue(from, to, Wire::Zab { conn, message }, HELD_LEARNER_RETRY_MS);
                false
            }
            LearnerIntake::Refused => {
                if self.kill_conn(conn) {
                    self.queue(to, from, Wire::Closed { conn }, 1);
                }
                false
            }
        }
    }

    /// Connection `conn` closed or broke. Returns whether it was open.
    /// Half the time, what is still on its way was read just before (as
    /// the runtime's link reader may hold it, waiting for its read budget)
    /// and reaches the member up to [`LATE_READ_MS`] later, in order and
    /// before the close, but maybe after what a newer connection brought:
    /// the member must see that it is stale. Otherwise it is lost.
    pub(super) fn kill_conn(&mut self, conn: u64) -> bool {
        if !self.dead.insert(conn) {
            return false;
        }
        if self.rng.below(2) == 0 {
            let lag = self.now + 1 + self.rng.below(LATE_READ_MS);
            let on_conn: Vec<(u64, u64)> = self
                .in_flight
                .iter()
                .filter(|(_, (_, _, w))| wire_conn(w) == Some(conn))
                .map(|(key, _)| *key)
                .collect();
            let mut last = lag;
            for key in on_conn {
                let Some(entry) = self.in_flight.remove(&key) else {
                    continue;
                };
                // Past the link's FIFO clock: a newer connection's packets
                // on the same path may come first.
                self.seq += 1;
                let at = key.0.max(lag);
                last = last.max(at);
                self.in_flight.insert((at, self.seq), entry);
                self.late_reads.insert((at, self.seq));
            }
            self.late_until.insert(conn, last);
        }
        true
    }

    /// Puts `wire` on the link from `from` to `to`, `delay` ms from now and
    /// never before what the link already carries (FIFO).
    /// A close comes after what its connection still delivers late.
    /// A packet a script asked for is set aside instead.
    pub(super) fn queue(&mut self, from: ServerId, to: ServerId, wire: Wire, delay: u64) {
        if let Some(aside) = &mut self.aside_when {
            if aside(from, to, &wire) {
                self.trace_line(format_args!("{from} -> {to}: set aside {wire:?}"));
                return self.aside.push((from, to, wire));
            }
        }
        let late = match &wire {
            Wire::Closed { conn } => self.late_until.get(conn).copied(),
            _ => None,
        };
        let link = self.link_clock.entry((from, to)).or_insert(0);
        let mut at = (self.now + delay).max(*link);
        *link = at;
        at = at.max(late.unwrap_or(0));
        self.seq += 1;
        self.in_flight.insert((at, self.seq), (from, to, wire));
    }

    fn is_cut(&self, a: ServerId, b: ServerId) -> bool {
        self.cut.contains(&(a.min(b), a.max(b)))
    }

    /// Delivers everything due by now, in order.
    pub(super) fn deliver_due(&mut self) -> Result<(), Violation> {
        while let Some(entry) = self.in_flight.first_entry() {
            if entry.key().0 > self.now {
                break;
            }
            let key = *entry.key();
            let (from, to, wire) = entry.remove();
            // A dead connection's packets are lost, unless read before it died.
            let late = wire_conn(&wire).is_some_and(|c| self.dead.contains(&c));
            if late && !self.late_reads.remove(&key) {
                continue;
            }
            self.read(from, to, wire, late)?;
        }
        Ok(())
    }

    /// Hands what member `to`'s reader read to the member. `late`: read
    /// from a connection closed since; `permit`: a Zab message's or SNAP
    /// piece's share of the read budget.
    pub(super) fn deliver(
        &mut self,
        from: ServerId,
        to: ServerId,
        wire: Wire,
        late: bool,
        mut permit: Option<ReadPermit>,
    ) -> Result<(), Violation> {
        if let Some(Some(sender)) = self.procs.get_mut(&from) {
            match &wire {
                Wire::Snap { conn, piece } => sender.links.read(*conn, piece.data.len()),
                Wire::Zab { conn, message } => sender.links.read(*conn, weight(message)),
                _ => {}
            }
        }
        let mut permit = || {
            permit
                .take()
                .expect("a Zab message or SNAP piece is read with a permit")
        };
        if !late && !self.learner_taken(from, to, &wire) {
            return Ok(());
        }
        let Some(Some(p)) = self.procs.get_mut(&to) else {
            return Ok(());
        };
        // What a trap sees once the member handled it.
        let moment_message = match &wire {
            Wire::Zab { message, .. } if !late && !self.traps.is_empty() => Some(message.clone()),
            _ => None,
        };
        let snap_done =
            matches!(&wire, Wire::Snap { piece, .. } if !late && piece.fuzzy_through.is_some());
        if let Wire::Snap { piece, .. } = &wire {
            let fuzzy = piece.fuzzy_through.is_some_and(|end| end > piece.zxid);
            self.counts.fuzzy_snaps += u64::from(fuzzy && !late);
        }
        let event = match wire {
            Wire::Notification(n) => PeerEvent::Notification(n),
            Wire::Zab { conn, message } => {
                let sync = match &message {
                    ZabMessage::Diff { zxid } => Some((SyncKind::Diff, *zxid)),
                    ZabMessage::Trunc { zxid } => Some((SyncKind::Trunc, *zxid)),
                    ZabMessage::Snap { zxid, .. } => Some((SyncKind::Snap, *zxid)),
                    _ => None,
                };
                self.syncs.extend(
                    sync.filter(|_| !late)
                        .map(|(kind, z)| (self.now, to, kind, z)),
                );
                // A follower's new connection is accepted with its first message.
                if !late {
                    if let Some(old) = p.links.quorum.insert(from, conn).filter(|c| *c != conn) {
                        self.kill_conn(old);
                    }
                }
                PeerEvent::Zab {
                    from,
                    message,
                    permit: permit(),
                    link: conn,
                }
            }
            Wire::Snap { conn, piece } if piece.offset == 0 => {
                if !late {
                    self.syncs.push((self.now, to, SyncKind::Snap, piece.zxid));
                }
                PeerEvent::SnapChunk {
                    from,
                    piece,
                    permit: permit(),
                    link: conn,
                }
            }
            Wire::Snap { conn, piece } => PeerEvent::SnapChunk {
                from,
                piece,
                permit: permit(),
                link: conn,
            },
            Wire::Refused => PeerEvent::Unreachable(from),
            Wire::Closed { conn } => {
                if p.links.quorum.get(&from) == Some(&conn) {
                    p.links.quorum.remove(&from);
                }
                PeerEvent::ZabClosed {
                    peer: from,
                    link: conn,
                }
            }
        };
        self.counts.late_reads += u64::from(late);
        self.peer_event(to, event)?;
        if let Some(message) = &moment_message {
            self.spring(&Moment::Received { from, to, message });
        }
        if snap_done {
            self.spring(&Moment::SnapReceived { from, to });
        }
        Ok(())
    }

    /// Restarts crashed members whose time has come, and heals a partition.
    pub(super) fn restarts_due(&mut self) -> Result<(), Violation> {
        let due: Vec<ServerId> = self
            .restarts
            .iter()
            .filter(|(_, t)| **t <= self.now)
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            self.restarts.remove(&id);
            self.boot(id)?;
        }
        if self.heals_at.is_some_and(|t| t <= self.now) {
            self.heal();
        }
        Ok(())
    }

    /// Resumes paused members whose time has come: what reached them
    /// meanwhile is handled first, in order.
    pub(super) fn resume_due(&mut self) -> Result<(), Violation> {
        let due: Vec<ServerId> = self
            .paused
            .iter()
            .filter(|(id, (until, _))| *until <= self.now && !self.busy.contains(id))
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            let Some((_, held)) = self.paused.remove(&id) else {
                continue;
            };
            self.trace_line(format_args!("member {id}: resumes"));
            for item in held {
                match item {
                    // In its socket while it was stopped: read, stale or not.
                    Held::Packet(from, wire, late) => self.read(from, id, wire, late)?,
                    Held::Client(event) => self.feed_nodes(vec![(id, event)])?,
                }
            }
        }
        Ok(())
    }

    /// The next random fault, while faults last; then everything heals.
    pub(super) fn faults(&mut self) -> Result<(), Violation> {
        if self.now == self.schedule.faults_until_ms {
            self.heal();
            for (until, _) in self.paused.values_mut() {
                *until = self.now;
            }
            let down: Vec<ServerId> = self.restarts.keys().copied().collect();
            for id in down {
                self.restarts.insert(id, self.now);
            }
            return Ok(());
        }
        let quiet = self.schedule.scripted || self.now > self.schedule.faults_until_ms;
        if quiet || self.now < self.next_fault_ms {
            return Ok(());
        }
        self.next_fault_ms = self.now + 300 + self.rng.below(1_200);
        let ids: Vec<ServerId> = self.procs.keys().copied().collect();
        let victim = ids[self.rng.below(ids.len() as u64) as usize];
        let up = matches!(self.procs.get(&victim), Some(Some(_)));
        let torn = self.rng.below(2) == 0;
        match self.rng.below(4) {
            0 if up => self.crash(victim, torn),
            1 if up => {
                self.trace_line(format_args!(
                    "member {victim}: its disk fails its next write"
                ));
                self.failing.insert(victim);
            }
            2 if up && !self.paused.contains_key(&victim) => self.pause(victim),
            _ if self.cut.is_empty() && self.one_way.is_empty() => self.partition(&ids),
            _ => {}
        }
        Ok(())
    }

    /// Stops member `id`'s process for a while, its connections open.
    fn pause(&mut self, id: ServerId) {
        let until = self.now + 100 + self.rng.below(2_000);
        self.trace_line(format_args!("member {id}: PAUSE until {until} ms"));
        if until - self.now > self.timing.sync_ms() {
            self.counts.long_pauses += 1;
        }
        self.paused.insert(id, (until, Default::default()));
    }

    /// Splits the members in two at random (one side may be a single
    /// member): both ways (connections across break, both ends learn at
    /// once), one way (silently), or with a bridge member reaching both.
    fn partition(&mut self, ids: &[ServerId]) {
        let side: Vec<ServerId> = ids
            .iter()
            .copied()
            .filter(|_| self.rng.below(2) == 0)
            .collect();
        if side.is_empty() || side.len() == ids.len() {
            return;
        }
        let rest: Vec<ServerId> = ids.iter().copied().filter(|b| !side.contains(b)).collect();
        match self.rng.below(3) {
            0 => {
                self.trace_line(format_args!("partition {side:?} from {rest:?}"));
                self.counts.partitions += 1;
                self.cut_between(&side, &rest);
            }
            1 => {
                self.trace_line(format_args!("partition {side:?} -> {rest:?} one way"));
                self.counts.one_way_partitions += 1;
                for &a in &side {
                    for &b in &rest {
                        self.one_way.insert((a, b));
                    }
                }
            }
            _ => {
                // The first of the larger side reaches both.
                let (mut bigger, smaller) = match side.len() >= rest.len() {
                    true => (side, rest),
                    false => (rest, side),
                };
                let bridge = bigger.remove(0);
                if bigger.is_empty() {
                    return;
                }
                self.trace_line(format_args!(
                    "partition {bigger:?} from {smaller:?}, {bridge} bridging"
                ));
                self.counts.bridges += 1;
                self.cut_between(&bigger, &smaller);
            }
        }
        self.heals_at = Some(self.now + 200 + self.rng.below(3_000));
    }

    fn cut_between(&mut self, side: &[ServerId], rest: &[ServerId]) {
        for &a in side {
            for &b in rest {
                self.cut_link(a, b);
            }
        }
    }

    pub(super) fn cut_link(&mut self, a: ServerId, b: ServerId) {
        self.cut.insert((a.min(b), a.max(b)));
        self.in_flight.retain(|_, (from, to, w)| {
            matches!(w, Wire::Closed { .. })
                || !((*from == a && *to == b) || (*from == b && *to == a))
        });
        for (end, other) in [(a, b), (b, a)] {
            let conn = match self.procs.get(&end) {
                Some(Some(p)) => p.links.quorum.get(&other).copied(),
                _ => None,
            };
            if let Some(conn) = conn {
                self.kill_conn(conn);
                self.queue(other, end, Wire::Closed { conn }, 1);
            }
        }
    }

    /// Member `id` came up: its election links to the others connect, and
    /// each other end carries its last notification to it again, as the
    /// runtime's links do on a new connection (what was sent while `id`
    /// was down was refused).
    pub(super) fn resend_to_booted(&mut self, id: ServerId) {
        let peers: Vec<ServerId> = self.up().into_iter().filter(|p| *p != id).collect();
        for from in peers {
            if self.is_cut(from, id) {
                continue;
            }
            if let Some(n) = self.last_notification.get(&(from, id)).cloned() {
                self.send(from, id, Wire::Notification(n));
            }
        }
    }

    /// Every cut link works again; each end carries its last notification
    /// again, as the runtime's election links do when they reconnect. What
    /// one-way partitions held arrives, in order.
    pub(super) fn heal(&mut self) {
        self.heals_at = None;
        self.one_way.clear();
        for ((from, to), held) in std::mem::take(&mut self.held) {
            for wire in held {
                if matches!(self.procs.get(&to), Some(Some(_))) {
                    self.counts.late_packets += 1;
                    let delay = 1 + self.rng.below(10);
                    self.queue(from, to, wire, delay);
                }
            }
        }
        let healed = std::mem::take(&mut self.cut);
        if !healed.is_empty() {
            self.trace_line(format_args!("heal"));
        }
        for (a, b) in healed {
            for (from, to) in [(a, b), (b, a)] {
                if !matches!(self.procs.get(&from), Some(Some(_))) {
                    continue;
                }
                if let Some(n) = self.last_notification.get(&(from, to)).cloned() {
                    self.send(from, to, Wire::Notification(n));
                }
            }
        }
    }
}
