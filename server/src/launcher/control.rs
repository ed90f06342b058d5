//! The supervisor's side of fault injection: the members' processes, the
//! faults in force, and carrying out each verb. Process faults (kill, pause)
//! are signals from here; the rest are commands on each member's control
//! socket (`runtime::faults`). Every fault and heal is logged with its time.

use super::fault_verbs::{Target, Verb};
use super::supervise::start;
use super::{node_dir, Member};
use crate::runtime::faults::{PeerCuts, SOCKET_NAME};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Child;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long a member may take to answer its control socket.
const MEMBER_TIMEOUT: Duration = Duration::from_secs(3);
/// How long `heal` waits for every member to serve again.
pub(super) const HEAL_TIMEOUT: Duration = Duration::from_secs(60);

/// The running ensemble, shared by the supervise loop and the fault API.
pub(super) struct Ensemble {
    pub exe: PathBuf,
    pub dir: PathBuf,
    pub members: Vec<Member>,
    /// Children by member id.
    pub running: BTreeMap<usize, Child>,
    pub forwarders: Vec<JoinHandle<()>>,
    pub faults: InForce,
    /// With `--reconfig`: who may change the membership.
    pub super_user: Option<super::SuperUser>,
    /// Shutting down: no verb starts a member any more.
    pub stopping: bool,
}

/// The faults in force, as the supervisor applied them.
#[derive(Debug, Default)]
pub(super) struct InForce {
    /// Taken down by a verb (kill, or a disk error's exit): heal restarts them.
    pub down: BTreeSet<usize>,
    paused: BTreeSet<usize>,
    cuts: BTreeMap<usize, PeerCuts>,
    clients_cut: BTreeSet<usize>,
    slow_disk: BTreeMap<usize, u64>,
    /// Armed: the member's next fsync fails and it exits.
    pub disk_error: BTreeSet<usize>,
    /// Taken out of the configuration by `remove`: heal adds them back.
    pub removed: BTreeSet<usize>,
}

impl InForce {
    fn is_empty(&self) -> bool {
        self.down.is_empty()
            && self.paused.is_empty()
            && self
                .cuts
                .values()
                .all(|c| c.send.is_empty() && c.recv.is_empty())
            && self.clients_cut.is_empty()
            && self.slow_disk.is_empty()
            && self.disk_error.is_empty()
            && self.removed.is_empty()
    }

    /// The faults as JSON, one object each.
    fn describe(&self) -> Vec<Value> {
        let mut out = Vec::new();
        out.extend(
            self.down
                .iter()
                .map(|m| json!({"fault": "down", "member": m})),
        );
        out.extend(
            self.paused
                .iter()
                .map(|m| json!({"fault": "paused", "member": m})),
        );
        for (m, cuts) in &self.cuts {
            if !cuts.send.is_empty() || !cuts.recv.is_empty() {
                out.push(json!({"fault": "links-cut", "member": m,
                    "send_lost_to": cuts.send, "receive_lost_from": cuts.recv}));
            }
        }
        out.extend(
            self.clients_cut
                .iter()
                .map(|m| json!({"fault": "clients-cut", "member": m})),
        );
        for (m, ms) in &self.slow_disk {
            out.push(json!({"fault": "slow-disk", "member": m, "ms": ms}));
        }
        out.extend(
            self.disk_error
                .iter()
                .map(|m| json!({"fault": "disk-error", "member": m})),
        );
        out.extend(
            self.removed
                .iter()
                .map(|m| json!({"fault": "removed", "member": m})),
        );
        out
    }
}

/// Carries out verbs one at a time.
pub(super) struct Control {
    ensemble: Arc<Mutex<Ensemble>>,
    serial: tokio::sync::Mutex<()>,
}

/// What one member says of itself.
#[derive(Clone, Debug, Default)]
struct MemberState {
    fields: BTreeMap<String, String>,
}

impl MemberState {
    fn mode(&self) -> &str {
        self.fields.get("mode").map_or("", String::as_str)
    }

    fn epoch(&self) -> u64 {
        self.fields
            .get("epoch")
            .and_then(|e| e.parse().ok())
            .unwrap_or(0)
    }
}

impl Control {
    pub fn new(ensemble: Arc<Mutex<Ensemble>>) -> Control {
        Control {
            ensemble,
            serial: tokio::sync::Mutex::new(()),
        }
    }

    /// The number of members.
    pub fn size(&self) -> usize {
        self.lock().members.len()
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Ensemble> {
        self.ensemble.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Carries out `verb`; the answer is JSON (`done` and `status`).
    pub async fn run(&self, verb: Verb) -> Result<Value, String> {
        let _one_at_a_time = self.serial.lock().await;
        if self.lock().stopping {
            return Err("the ensemble is stopping".into());
        }
        let done = match verb {
            Verb::Status => return Ok(self.status().await),
            Verb::Kill(t) => self.kill(t).await?,
            Verb::Restart(m) => self.restart(m).await?,
            Verb::Pause(t) => self.pause(t).await?,
            Verb::Resume(m) => self.resume(m).await?,
            Verb::Partition(a, b) => self.cut(&a, &b, true).await?,
            Verb::PartitionOneWay(a, b) => self.cut(&a, &b, false).await?,
            Verb::Isolate(t) => {
                let m = self.resolve(t).await?;
                let others = (1..=self.lock().members.len())
                    .filter(|i| *i != m)
                    .collect();
                self.cut(&BTreeSet::from([m]), &others, true).await?
            }
            Verb::CutClients(m) => {
                self.tell(m, "cut-clients").await?;
                self.lock().faults.clients_cut.insert(m);
                format!("node{m} no longer answers its clients")
            }
            Verb::CloseConnections(m) => {
                let closed = self.tell(m, "close-connections").await?;
                format!("node{m} closed its client connections ({closed})")
            }
            Verb::SlowDisk(m, ms) => {
                self.tell(m, &format!("slow-disk {ms}")).await?;
                let mut e = self.lock();
                match ms {
                    0 => e.faults.slow_disk.remove(&m),
                    _ => e.faults.slow_disk.insert(m, ms),
                };
                format!("node{m}: each fsync takes {ms} ms longer")
            }
            Verb::DiskError(m) => {
                self.tell(m, "disk-error").await?;
                self.lock().faults.disk_error.insert(m);
                format!("node{m}: its next fsync fails")
            }
            Verb::ExpireSession(id) => {
                let leader = self.resolve(Target::Leader).await?;
                self.tell(leader, &format!("expire-session {id}")).await?;
                format!("session {id} expired by the leader, node{leader}")
            }
            Verb::Remove(t) => self.remove(t).await?,
            Verb::Add(m) => self.add(m).await?,
            Verb::Heal => self.heal().await?,
        };
        tracing::info!("fault: {done}");
        Ok(json!({"done": done, "status": self.status().await}))
    }

    /// The member `target` names now.
    pub(super) async fn resolve(&self, target: Target) -> Result<usize, String> {
        match target {
            Target::Member(m) => Ok(m),
            Target::Leader => {
                let states = self.query_all().await;
                states
                    .iter()
                    .filter(|(_, s)| s.as_ref().is_some_and(|s| s.mode() == "leader"))
                    .max_by_key(|(_, s)| s.as_ref().map(MemberState::epoch))
                    .map(|(m, _)| *m)
                    .ok_or_else(|| "no member leads now".to_owned())
            }
        }
    }

    async fn kill(&self, target: Target) -> Result<String, String> {
        let m = self.resolve(target).await?;
        let mut e = self.lock();
        let Some(mut child) = e.running.remove(&m) else {
            return Err(format!("node{m} is not running"));
        };
        let _ = child.kill();
        let _ = child.wait();
        e.faults.down.insert(m);
        e.faults.paused.remove(&m);
        e.faults.disk_error.remove(&m);
        Ok(format!("node{m} killed (SIGKILL)"))
    }

    async fn restart(&self, m: usize) -> Result<String, String> {
        {
            let mut e = self.lock();
            if let Some(mut child) = e.running.remove(&m) {
                let _ = child.kill();
                let _ = child.wait();
            }
            let Ensemble {
                exe,
                dir,
                members,
                running,
                forwarders,
                faults,
                ..
            } = &mut *e;
            let me = &members[m - 1];
            restore_left_out_member(dir, me, members)?;
            let child = start(exe, dir, me, forwarders)
                .map_err(|e| format!("cannot start node{m}: {e}"))?;
            running.insert(m, child);
            // A new process: its own faults went with the old one.
            faults.down.remove(&m);
            faults.paused.remove(&m);
            faults.clients_cut.remove(&m);
            faults.slow_disk.remove(&m);
            faults.disk_error.remove(&m);
        }
        // The network's faults outlive the process.
        if self.lock().faults.cuts.contains_key(&m) {
            self.send_cuts(m).await?;
        }
        Ok(format!("node{m} restarted"))
    }

    async fn pause(&self, target: Target) -> Result<String, String> {
        let m = self.resolve(target).await?;
        self.signal(m, nix::sys::signal::Signal::SIGSTOP)?;
        self.lock().faults.paused.insert(m);
        Ok(format!("node{m} paused (SIGSTOP)"))
    }

    async fn resume(&self, m: usize) -> Result<String, String> {
        if !self.lock().faults.paused.contains(&m) {
            return Err(format!("node{m} is not paused"));
        }
        self.signal(m, nix::sys::signal::Signal::SIGCONT)?;
        self.lock().faults.paused.remove(&m);
        Ok(format!("node{m} resumed (SIGCONT)"))
    }

    fn signal(&self, m: usize, signal: nix::sys::signal::Signal) -> Result<(), String> {
        let e = self.lock();
        let child = e
            .running
            .get(&m)
            .ok_or_else(|| format!("node{m} is not running"))?;
        let pid = i32::try_from(child.id()).map_err(|e| e.to_string())?;
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal)
            .map_err(|e| format!("cannot signal node{m}: {e}"))
    }

    /// Messages from `from` to `to` are lost, and back too if `both_ways`.
    async fn cut(
        &self,
        from: &BTreeSet<usize>,
        to: &BTreeSet<usize>,
        both_ways: bool,
    ) -> Result<String, String> {
        {
            let mut e = self.lock();
            for a in from {
                let cuts = e.faults.cuts.entry(*a).or_default();
                cuts.send.extend(to.iter().map(|b| *b as u64));
                if both_ways {
                    cuts.recv.extend(to.iter().map(|b| *b as u64));
                }
            }
            for b in to {
                let cuts = e.faults.cuts.entry(*b).or_default();
                cuts.recv.extend(from.iter().map(|a| *a as u64));
                if both_ways {
                    cuts.send.extend(from.iter().map(|a| *a as u64));
                }
            }
        }
        for m in from.iter().chain(to) {
            self.send_cuts(*m).await?;
        }
        let list = |s: &BTreeSet<usize>| {
            s.iter()
                .map(|m| format!("node{m}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        Ok(match both_ways {
            true => format!("partition {} / {}", list(from), list(to)),
            false => format!("messages from {} to {} are lost", list(from), list(to)),
        })
    }

    /// Sends member `m` its cuts, unless it is down or paused (then it gets
    /// them when it comes back).
    async fn send_cuts(&self, m: usize) -> Result<(), String> {
        let line = {
            let e = self.lock();
            if !e.running.contains_key(&m) || e.faults.paused.contains(&m) {
                return Ok(());
            }
            let cuts = e.faults.cuts.get(&m).cloned().unwrap_or_default();
            let list =
                |s: &BTreeSet<u64>| s.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
            format!(
                "cut-links send={} recv={}",
                list(&cuts.send),
                list(&cuts.recv)
            )
        };
        self.tell(m, &line).await.map(drop)
    }

    async fn heal(&self) -> Result<String, String> {
        let (paused, down) = {
            let e = self.lock();
            if e.faults.is_empty() && e.running.len() == e.members.len() {
                return Err("nothing to heal: no fault is in force".into());
            }
            let down: Vec<usize> = (1..=e.members.len())
                .filter(|m| !e.running.contains_key(m))
                .collect();
            (e.faults.paused.clone(), down)
        };
        for m in paused {
            self.signal(m, nix::sys::signal::Signal::SIGCONT)?;
        }
        let removed = std::mem::take(&mut self.lock().faults).removed;
        let running: Vec<usize> = self.lock().running.keys().copied().collect();
        for m in running {
            // A member that cannot answer (it just exited) is restarted below.
            if let Err(why) = self.tell(m, "heal").await {
                tracing::warn!("heal: node{m}: {why}");
            }
        }
        for m in down {
            self.restart(m).await?;
        }
        // add_back waits for a leader that takes the change.
        if !removed.is_empty() {
            self.add_back(&removed).await?;
        }
        Ok(match self.wait_serving().await {
            true => "healed: every member serves".to_owned(),
            false => format!(
                "healed, but not every member serves after {} s",
                HEAL_TIMEOUT.as_secs()
            ),
        })
    }

    /// Waits until every member serves under one leader.
    async fn wait_serving(&self) -> bool {
        self.wait_until(|states| {
            let modes: Vec<&str> = states
                .values()
                .map(|s| s.as_ref().map_or("", MemberState::mode))
                .collect();
            let leaders = modes.iter().filter(|m| **m == "leader").count();
            let single = modes.len() == 1 && modes[0] == "standalone";
            single || (leaders == 1 && modes.iter().all(|m| serving(m)))
        })
        .await
    }

    /// Waits until member `m` serves (leads, follows or observes).
    pub(super) async fn wait_member_serving(&self, m: usize) -> bool {
        self.wait_until(|states| {
            let state = states.get(&m).and_then(Option::as_ref);
            serving(state.map_or("", MemberState::mode))
        })
        .await
    }

    /// Polls the members' reports until `done` holds of them, for at most
    /// [`HEAL_TIMEOUT`].
    async fn wait_until(
        &self,
        done: impl Fn(&BTreeMap<usize, Option<MemberState>>) -> bool,
    ) -> bool {
        let deadline = tokio::time::Instant::now() + HEAL_TIMEOUT;
        while tokio::time::Instant::now() < deadline {
            if done(&self.query_all().await) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    /// Each member's own report, None when it is down, paused or silent.
    async fn query_all(&self) -> BTreeMap<usize, Option<MemberState>> {
        let ids: Vec<(usize, bool)> = {
            let e = self.lock();
            (1..=e.members.len())
                .map(|m| {
                    (
                        m,
                        e.running.contains_key(&m) && !e.faults.paused.contains(&m),
                    )
                })
                .collect()
        };
        let mut out = BTreeMap::new();
        for (m, up) in ids {
            let state = match up {
                true => self
                    .tell(m, "status")
                    .await
                    .ok()
                    .map(|line| parse_state(&line)),
                false => None,
            };
            out.insert(m, state);
        }
        out
    }

    /// Every member's state, the leader and the faults in force.
    pub async fn status(&self) -> Value {
        let states = self.query_all().await;
        let e = self.lock();
        let members: Vec<Value> = e
            .members
            .iter()
            .map(|m| {
                let process = match (e.running.get(&m.id), e.faults.paused.contains(&m.id)) {
                    (None, _) => "down",
                    (Some(_), true) => "paused",
                    (Some(_), false) => "running",
                };
                let state = states.get(&m.id).cloned().flatten().unwrap_or_default();
                let num = |k: &str| state.fields.get(k).and_then(|v| v.parse::<u64>().ok());
                json!({
                    "member": m.id,
                    "pid": e.running.get(&m.id).map(Child::id),
                    "client": m.client_address(),
                    "process": process,
                    "mode": state.fields.get("mode"),
                    "zxid": state.fields.get("zxid"),
                    "epoch": num("epoch"),
                    "sessions": num("sessions"),
                    "connections": num("connections"),
                })
            })
            .collect();
        let leader = states
            .iter()
            .filter(|(_, s)| s.as_ref().is_some_and(|s| s.mode() == "leader"))
            .max_by_key(|(_, s)| s.as_ref().map(MemberState::epoch))
            .map(|(m, _)| *m);
        json!({
            "members": members,
            "leader": leader,
            "connect": super::connect_string(&e.members),
            "faults": e.faults.describe(),
        })
    }

    /// Whether member `m`'s process is gone (the supervise loop reports it).
    fn has_exited(&self, m: usize) -> bool {
        match self.lock().running.get_mut(&m) {
            None => true,
            // The exit status stays in `Child` for the loop to report.
            Some(child) => matches!(child.try_wait(), Ok(Some(_))),
        }
    }

    /// One command on member `m`'s control socket; its `ok` detail.
    async fn tell(&self, m: usize, line: &str) -> Result<String, String> {
        let socket = {
            let e = self.lock();
            if !e.running.contains_key(&m) {
                return Err(format!("node{m} is not running"));
            }
            if e.faults.paused.contains(&m) {
                return Err(format!("node{m} is paused"));
            }
            node_dir(&e.dir, m).join("data").join(SOCKET_NAME)
        };
        let exchange = async {
            // A member just started may not have bound its socket yet; one
            // that has exited never will.
            let mut stream = loop {
                match tokio::net::UnixStream::connect(&socket).await {
                    Ok(s) => break s,
                    Err(e) if self.has_exited(m) => return Err(e),
                    Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                }
            };
            stream.write_all(format!("{line}\n").as_bytes()).await?;
            let mut reply = String::new();
            stream.read_to_string(&mut reply).await?;
            Ok::<_, std::io::Error>(reply)
        };
        let reply = tokio::time::timeout(MEMBER_TIMEOUT, exchange)
            .await
            .map_err(|_| format!("node{m} did not answer within {MEMBER_TIMEOUT:?}"))?
            .map_err(|e| format!("node{m}: {e}"))?;
        let reply = reply.trim();
        match reply.strip_prefix("ok") {
            Some(detail) => Ok(detail.trim().to_owned()),
            None => Err(format!(
                "node{m}: {}",
                reply.strip_prefix("error: ").unwrap_or(reply)
            )),
        }
    }
}

/// Before member `me` starts again: see [`super::restore_left_out`].
fn restore_left_out_member(
    dir: &std::path::Path,
    me: &Member,
    members: &[Member],
) -> Result<(), String> {
    let path = node_dir(dir, me.id).join("zoo.cfg");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    if let Some(restored) = super::restore_left_out(&text, me, members) {
        tracing::info!(
            "node{}: left out by a reconfig, it starts from the flags' members",
            me.id
        );
        super::write_whole(&path, &restored).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// `key=value key="quoted value"` pairs of a member's status line.
fn parse_state(line: &str) -> MemberState {
    let mut fields = BTreeMap::new();
    let mut rest = line;
    while let Some((key, after)) = rest.trim_start().split_once('=') {
        let (value, next) = match after.strip_prefix('"') {
            Some(quoted) => quoted.split_once('"').unwrap_or((quoted, "")),
            None => after.split_once(' ').unwrap_or((after, "")),
        };
        fields.insert(key.to_owned(), value.to_owned());
        rest = next;
    }
    MemberState { fields }
}

/// Whether a member in `mode` serves clients as part of an ensemble.
fn serving(mode: &str) -> bool {
    matches!(mode, "leader" | "follower" | "observer")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_status_lines_parse() {
        let s = parse_state(
            "mode=leader zxid=0x100000003 epoch=1 sessions=2 connections=1 role=\"leading epoch 1\" cut_send=",
        );
        assert_eq!(s.mode(), "leader");
        assert_eq!(s.epoch(), 1);
        assert_eq!(s.fields["role"], "leading epoch 1");
        assert_eq!(s.fields["cut_send"], "");
    }
}
