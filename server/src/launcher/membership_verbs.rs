//! The fault API's membership verbs (`remove`, `add`, and heal adding back
//! what `remove` took out), carried out through the client API as the
//! ensemble's super user, as Jepsen's membership nemesis does.

use super::control::{Control, HEAL_TIMEOUT};
use super::fault_verbs::Target;
use super::reconfig_client::{reconfig, Change, Refusal};
use std::collections::BTreeSet;
use std::time::Duration;
use zkd_protocol::ErrorCode;

/// Pause between attempts at a reconfig the ensemble cannot take yet.
const RETRY: Duration = Duration::from_millis(250);

impl Control {
    /// `remove N|leader`: reconfig leaving N.
    pub(super) async fn remove(&self, target: Target) -> Result<String, String> {
        let m = self.resolve(target).await?;
        let change = Change {
            leaving: vec![m],
            ..Change::default()
        };
        let config = self.change(&change).await?;
        self.lock().faults.removed.insert(m);
        Ok(format!("node{m} removed by reconfig; {}", summary(&config)))
    }

    /// `add N`: reconfig joining N's server line. A member that runs is
    /// waited for until it serves, as `heal` waits: it learns nothing while
    /// the configuration leaves it out, and syncs only once it is added.
    pub(super) async fn add(&self, m: usize) -> Result<String, String> {
        let line = self.lock().members[m - 1].dynamic_server_line();
        let change = Change {
            joining: vec![line],
            ..Change::default()
        };
        let config = self.change(&change).await?;
        self.lock().faults.removed.remove(&m);
        let added = format!("node{m} added by reconfig; {}", summary(&config));
        if !self.lock().running.contains_key(&m) {
            return Ok(format!("{added}; it is down, and syncs once restarted"));
        }
        Ok(match self.wait_member_serving(m).await {
            true => format!("{added}; it serves"),
            false => format!(
                "{added}; it does not serve after {} s",
                HEAL_TIMEOUT.as_secs()
            ),
        })
    }

    /// Adds `removed` back in one change; a configuration without a synced
    /// quorum is retried too (the joiners may still be syncing).
    pub(super) async fn add_back(&self, removed: &BTreeSet<usize>) -> Result<(), String> {
        let joining = {
            let e = self.lock();
            removed
                .iter()
                .map(|m| e.members[m - 1].dynamic_server_line())
                .collect()
        };
        let change = Change {
            joining,
            ..Change::default()
        };
        match self.until_answered(&change, true).await {
            Ok(_) => Ok(()),
            Err(why) => {
                self.lock().faults.removed.extend(removed);
                Err(format!(
                    "healed, but the removed members were not added back: reconfig {why}"
                ))
            }
        }
    }

    /// One change, refused outright without `--reconfig`.
    async fn change(&self, change: &Change) -> Result<String, String> {
        if self.lock().super_user.is_none() {
            return Err(
                "this ensemble was started without --reconfig: its membership is fixed".into(),
            );
        }
        self.until_answered(change, false)
            .await
            .map_err(|why| match why {
                Refusal::Answered(_) => format!("reconfig {why}; nothing changed"),
                // The change may have been made: status shows the membership.
                Refusal::NoAnswer(_) => format!("reconfig got {why}"),
            })
    }

    /// Asks until the change is answered (done or refused), for up to
    /// HEAL_TIMEOUT: a leader may be stepping down or not elected yet, or
    /// another change in progress. Asking again is safe: adding a member
    /// again, or removing one that is gone, changes nothing. With
    /// `until_quorum`, NEWCONFIGNOQUORUM is asked again too.
    async fn until_answered(&self, change: &Change, until_quorum: bool) -> Result<String, Refusal> {
        let deadline = tokio::time::Instant::now() + HEAL_TIMEOUT;
        loop {
            let why = match self.ask_leader(change).await {
                Ok(config) => return Ok(config),
                Err(why) => why,
            };
            let again = match why {
                Refusal::NoAnswer(_) | Refusal::Answered(ErrorCode::ReconfigInProgress) => true,
                Refusal::Answered(ErrorCode::NewConfigNoQuorum) => until_quorum,
                Refusal::Answered(_) => false,
            };
            if !again || tokio::time::Instant::now() >= deadline {
                return Err(why);
            }
            tracing::debug!("fault API: reconfig {why}; asking again");
            tokio::time::sleep(RETRY).await;
        }
    }

    /// Sends `change` to the leader: a reconfig forwarded by a follower
    /// would lose its answer when the leader it removes goes.
    async fn ask_leader(&self, change: &Change) -> Result<String, Refusal> {
        let Some(user) = self.lock().super_user.clone() else {
            return Err(Refusal::NoAnswer("reconfig is off".into()));
        };
        let leader = self
            .resolve(Target::Leader)
            .await
            .map_err(Refusal::NoAnswer)?;
        let address = self.lock().members[leader - 1].client_address();
        reconfig(&address, &user.password, change).await
    }
}

/// `version=…` and the voters of a configuration's text.
fn summary(config: &str) -> String {
    let version = config
        .lines()
        .find_map(|l| l.strip_prefix("version="))
        .unwrap_or("?");
    let members: Vec<&str> = config
        .lines()
        .filter_map(|l| l.strip_prefix("server."))
        .filter_map(|l| l.split('=').next())
        .collect();
    format!("configuration {version}: servers {}", members.join(","))
}
