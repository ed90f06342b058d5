//! A member's quorum link readers, as the runtime's: each Zab message
//! waits for its share of the member's budget of bytes in flight (a
//! proposal's is given back once it is durable), each SNAP piece for its
//! share of the SNAP budget (given back once written). While a link's
//! reader waits, what follows it on that link waits too, its close
//! included, and the sender's SNAP stream stalls; what it read before its
//! connection died still reaches the member when the budget allows, stale.
//! The budgets count bytes, as the runtime's do, scaled to the simulator's
//! small txns: a few dozen deep, so a slow disk makes readers wait.

use super::links::{weight, Wire};
use super::{Held, Violation, WholeSim};
use crate::core::election::ServerId;
use crate::core::{budget_units, ReadPermit};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use tokio::sync::Semaphore;

/// Bytes of Zab messages a member may hold before its readers wait: the
/// runtime's 64 MiB, scaled to the simulator's small txns (about twenty).
const ZAB_BUDGET: usize = 4 << 10;

/// Bytes of SNAP pieces a member may hold unwritten before its reader
/// waits: a few of the simulator's chunks, as the runtime's 8 MiB are.
const SNAP_BUDGET: usize = 2 << 10;

/// The budgets are counted in units of this many bytes (the runtime's in KiB).
const UNIT: usize = 64;

/// Zab messages a member may hold at most (each takes at least a unit).
pub(super) const MAX_ZAB_MESSAGES: usize = ZAB_BUDGET / UNIT;

/// One member incarnation's read budgets and its waiting readers.
pub(super) struct Readers {
    budgets: Budgets,
    /// Per sending member: what its link's reader read and holds, in order.
    waiting: BTreeMap<ServerId, VecDeque<Wire>>,
}

impl Readers {
    pub fn new() -> Readers {
        Readers {
            budgets: Budgets {
                zab: Arc::new(Semaphore::new(ZAB_BUDGET / UNIT)),
                snap: Arc::new(Semaphore::new(SNAP_BUDGET / UNIT)),
            },
            waiting: BTreeMap::new(),
        }
    }
}

struct Budgets {
    zab: Arc<Semaphore>,
    snap: Arc<Semaphore>,
}

/// Whether a reader may hand what it read to the member.
enum Admission {
    /// It needs no share of a budget (a notification, a close).
    Free,
    /// With its share of the budget.
    Granted(ReadPermit),
    /// The budget is spent: the reader waits.
    Wait,
}

impl Budgets {
    /// What `wire` needs to reach the member now.
    fn admit(&self, wire: &Wire) -> Admission {
        let (budget, bytes, whole) = match wire {
            Wire::Zab { message, .. } => (&self.zab, weight(message), ZAB_BUDGET),
            Wire::Snap { piece, .. } => (&self.snap, piece.data.len(), SNAP_BUDGET),
            Wire::Notification(_) | Wire::Closed { .. } | Wire::Refused => return Admission::Free,
        };
        let units = budget_units(bytes, UNIT, whole);
        ReadPermit::try_take(budget, units).map_or(Admission::Wait, Admission::Granted)
    }
}

impl WholeSim {
    /// `wire` from `from` reaches member `to`'s reader: it is handed to the
    /// member at once if nothing waits before it and the budget allows.
    pub(super) fn read(
        &mut self,
        from: ServerId,
        to: ServerId,
        wire: Wire,
        late: bool,
    ) -> Result<(), Violation> {
        if let Some(held) = self.paused.get_mut(&to) {
            held.1.push_back(Held::Packet(from, wire, late));
            return Ok(());
        }
        let Some(Some(p)) = self.procs.get_mut(&to) else {
            return Ok(());
        };
        // Behind what its reader already holds, it waits in line.
        let queued = p.readers.waiting.get(&from).is_some_and(|q| !q.is_empty());
        let admission = match queued {
            true => Admission::Wait,
            false => p.readers.budgets.admit(&wire),
        };
        let permit = match admission {
            Admission::Free => None,
            Admission::Granted(permit) => Some(permit),
            Admission::Wait => {
                self.counts.budget_waits += u64::from(!queued);
                p.readers.waiting.entry(from).or_default().push_back(wire);
                return Ok(());
            }
        };
        self.deliver(from, to, wire, late, permit)
    }

    /// Member `id`'s waiting readers go on as far as its budgets allow.
    pub(super) fn reads_due(&mut self, id: ServerId) -> Result<(), Violation> {
        let senders: Vec<ServerId> = match self.procs.get(&id) {
            Some(Some(p)) => p.readers.waiting.keys().copied().collect(),
            _ => return Ok(()),
        };
        for from in senders {
            loop {
                let Some(Some(p)) = self.procs.get_mut(&id) else {
                    return Ok(());
                };
                let Readers { budgets, waiting } = &mut p.readers;
                let Some(queue) = waiting.get_mut(&from) else {
                    break;
                };
                let permit = match queue.front().map(|w| budgets.admit(w)) {
                    None | Some(Admission::Wait) => break,
                    Some(Admission::Free) => None,
                    Some(Admission::Granted(permit)) => Some(permit),
                };
                let Some(wire) = queue.pop_front() else {
                    break;
                };
                // Read while its connection was open; it may be stale now.
                let late = wire_conn(&wire).is_some_and(|c| self.dead.contains(&c));
                self.deliver(from, id, wire, late, permit)?;
            }
        }
        Ok(())
    }
}

/// The quorum connection `wire` travels on, if it carries data.
pub(super) fn wire_conn(wire: &Wire) -> Option<u64> {
    match wire {
        Wire::Zab { conn, .. } | Wire::Snap { conn, .. } => Some(*conn),
        Wire::Notification(_) | Wire::Closed { .. } | Wire::Refused => None,
    }
}
