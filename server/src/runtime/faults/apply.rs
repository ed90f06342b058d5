//! The node loop carrying out fault commands.

use super::{FaultCommand, PeerCuts};
use crate::runtime::NodeLoop;

impl NodeLoop {
    /// Carries out `command`; the answer is one line for the control socket.
    pub(in crate::runtime) fn fault(&mut self, command: FaultCommand) -> Result<String, String> {
        let Some(faults) = self.faults.as_mut() else {
            return Err("fault injection is not enabled".into());
        };
        match command {
            FaultCommand::CutLinks(cuts) => {
                if self.member.is_none() {
                    return Err("a standalone server has no peer links".into());
                }
                tracing::warn!(send = ?cuts.send, recv = ?cuts.recv, "fault: peer links cut");
                faults.cuts.send_replace(cuts);
            }
            FaultCommand::CutClients => {
                tracing::warn!("fault: clients are no longer answered");
                faults.clients_cut = true;
            }
            FaultCommand::CloseConnections => {
                let conns: Vec<_> = self.conns.keys().copied().collect();
                tracing::warn!(
                    connections = conns.len(),
                    "fault: closing every client connection"
                );
                for conn in &conns {
                    self.drop_connection(*conn);
                }
                return Ok(format!("closed={}", conns.len()));
            }
            FaultCommand::SlowDisk(ms) => {
                tracing::warn!(ms, "fault: each txn-log fsync takes longer");
                faults.disk.set_slow_ms(ms);
            }
            FaultCommand::DiskError => {
                tracing::warn!("fault: the next txn-log fsync fails");
                faults.disk.arm_failure(true);
            }
            FaultCommand::ExpireSession(session) => {
                if !self.node.expire_session(self.now, session) {
                    return Err(match self.node.mode().name() {
                        "leader" | "standalone" => format!("no live session {session}"),
                        mode => format!("this member is a {mode}; sessions expire on the leader"),
                    });
                }
                tracing::warn!(%session, "fault: session expired");
            }
            FaultCommand::Heal => {
                faults.cuts.send_replace(PeerCuts::default());
                faults.clients_cut = false;
                faults.disk.set_slow_ms(0);
                faults.disk.arm_failure(false);
                tracing::warn!("fault: healed");
            }
            FaultCommand::Status => return Ok(self.fault_status()),
        }
        Ok(String::new())
    }

    /// `key=value` pairs: mode, zxid, epoch, sessions, connections, leader
    /// (as this member knows it) and the faults in force.
    fn fault_status(&self) -> String {
        let zxid = self.node.processed_zxid();
        let member = self.member.as_ref().map(|m| m.member.member());
        let role = member.map_or("standalone".into(), |m| m.describe());
        let epoch = member
            .and_then(|m| m.epoch())
            .map_or(zxid.epoch().into(), u64::from);
        let mut status = format!(
            "mode={} zxid=0x{:x} epoch={} sessions={} connections={} role={:?}",
            self.node.mode().name(),
            zxid.0,
            epoch,
            self.node.sessions().len(),
            self.node.connections().len(),
            role,
        );
        if let Some(faults) = &self.faults {
            let cuts = faults.cuts.borrow();
            let list = |s: &std::collections::BTreeSet<u64>| {
                s.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
            };
            let disk = &faults.disk;
            status.push_str(&format!(
                " cut_send={} cut_recv={} clients_cut={} slow_disk_ms={} disk_error_armed={}",
                list(&cuts.send),
                list(&cuts.recv),
                faults.clients_cut,
                disk.slow_ms(),
                disk.failure_armed(),
            ));
        }
        status
    }
}
