//! The membership nemesis's hands, as Jepsen's membership nemesis has them:
//! a member removed from the ensemble by `reconfig`, added back later, each
//! through whichever member serves (the ensemble runs with `skipACL=yes`,
//! so no super user is needed).

use crate::cluster::Cluster;
use std::time::{Duration, Instant};
use zookeeper_client as zk;

/// How long one reconfig may take, connecting included.
const RECONFIG_TIMEOUT: Duration = Duration::from_secs(15);

/// How long adding a member back is retried (it must first sync as a
/// learner outside the configuration: a NEWCONFIGNOQUORUM until then).
const ADD_BACK_FOR: Duration = Duration::from_secs(30);

/// A change of membership.
#[derive(Clone, Debug)]
pub enum Change {
    /// This server id leaves.
    Remove(usize),
    /// This server line joins.
    Add(String),
}

/// Removes member `i`; the new configuration's server lines, or the error.
pub fn remove(cluster: &Cluster, i: usize) -> Result<String, String> {
    reconfig(cluster.connect_string(), Change::Remove(i + 1))
}

/// Adds member `i` back, retrying while the ensemble refuses (bounded).
pub fn add_back(cluster: &Cluster, i: usize) -> Result<String, String> {
    let deadline = Instant::now() + ADD_BACK_FOR;
    loop {
        match reconfig(
            cluster.connect_string(),
            Change::Add(cluster.server_line(i)),
        ) {
            Ok(config) => return Ok(config),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

/// One reconfig through `connect`, on a thread and runtime of its own (the
/// nemesis runs outside the workload's runtime).
fn reconfig(connect: String, change: Change) -> Result<String, String> {
    let run = move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        runtime.block_on(async move {
            tokio::time::timeout(RECONFIG_TIMEOUT, send(&connect, &change))
                .await
                .map_err(|_| format!("{change:?}: timed out"))?
        })
    };
    std::thread::spawn(run)
        .join()
        .map_err(|_| "the reconfig thread panicked".to_owned())?
}

async fn send(connect: &str, change: &Change) -> Result<String, String> {
    let client = zk::Client::connector()
        .with_session_timeout(Duration::from_secs(6))
        .connect(connect)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let id;
    let (joining, leaving): (Vec<&str>, Vec<&str>) = match change {
        Change::Remove(i) => {
            id = i.to_string();
            (Vec::new(), vec![id.as_str()])
        }
        Change::Add(line) => (vec![line.as_str()], Vec::new()),
    };
    let update = zk::EnsembleUpdate::Incremental {
        joinings: joining.into_iter(),
        leavings: leaving.into_iter(),
    };
    let (data, _) = client
        .update_ensemble(update, None)
        .await
        .map_err(|e| format!("{change:?}: {e}"))?;
    let text = String::from_utf8_lossy(&data);
    Ok(text
        .lines()
        .filter(|l| l.starts_with("server."))
        .collect::<Vec<_>>()
        .join(" "))
}
