//! Comparing the two targets: one seed's ops applied to both, their results,
//! events and final trees compared, with the normalisation that the crate
//! doc lists.

use super::ops::random_op;
use super::*;

/// `/zookeeper/config`'s data as text with the port numbers masked: an
/// ensemble's `server.N=127.0.0.1:quorumPort:electionPort:role` lines name
/// free ports picked per run, which differ between the two ensembles by
/// construction. Everything else in the node is compared.
pub(super) fn masked_ports(data: &[u8]) -> String {
    let masked: Vec<String> = String::from_utf8_lossy(data)
        .split('\n')
        .map(|line| {
            line.split(':')
                .map(|part| {
                    if !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) {
                        "PORT"
                    } else {
                        part
                    }
                })
                .collect::<Vec<_>>()
                .join(":")
        })
        .collect();
    format!("{:?}", masked.join("\n"))
}

/// Strips the parts of a multi result that 3.8 and 3.9 legitimately differ on.
fn comparable(result: &str) -> String {
    result
        .split("; ")
        .map(|r| match r.find(" [") {
            Some(i) if r.starts_with("created ") => r[..i].to_owned(),
            _ => r.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Applies seed `seed`'s op sequence to both targets and compares every
/// result, then what every session heard and the final trees. The first
/// divergence ends the seed (the states differ from there on) and is returned.
pub(super) async fn compare(
    theirs: &Target,
    ours: &Target,
    seed: u64,
    replay: &str,
) -> Result<usize, String> {
    let mut rng = StdRng::seed_from_u64(seed);
    compare_next(theirs, ours, (&mut rng, OPS_PER_SEED), seed, replay).await
}

/// [`compare`] with the next `count` ops of `rng`.
pub(super) async fn compare_next(
    theirs: &Target,
    ours: &Target,
    (rng, count): (&mut StdRng, usize),
    seed: u64,
    replay: &str,
) -> Result<usize, String> {
    let mut compared = 0;
    let members = theirs.ports.len();
    // The member whose writes the others may not have applied yet.
    let mut unsettled: Option<usize> = None;
    for i in 0..count {
        let op = random_op(rng);
        let member = op.session() % members;
        if unsettled.is_some_and(|u| u != member) {
            theirs.settle().await;
            ours.settle().await;
            unsettled = None;
        }
        let expected = theirs.exec(&op).await;
        let actual = ours.exec(&op).await;
        if op.writes() {
            unsettled = Some(member);
        }
        let (e, a) = if matches!(op, Op::Multi { .. }) {
            (comparable(&expected), comparable(&actual))
        } else {
            (expected.clone(), actual.clone())
        };
        if a != e {
            return Err(format!(
                "seed {seed}, op {i}: {op:?}\n  zookeeper: {expected}\n  zkd:       {actual}\nreplay: {replay}"
            ));
        }
        compared += 1;
    }
    // Let in-flight notifications land, then compare what every session heard.
    theirs.settle().await;
    ours.settle().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    for s in 0..SESSIONS {
        let mut e = theirs.events[s].lock().unwrap().clone();
        let mut a = ours.events[s].lock().unwrap().clone();
        e.sort();
        a.sort();
        if a != e {
            return Err(format!(
                "seed {seed}: one-shot events of session {s} differ\n  zookeeper: {e:?}\n  zkd:       {a:?}\nreplay: {replay}"
            ));
        }
    }
    let e = theirs.recursive.lock().unwrap().clone();
    let a = ours.recursive.lock().unwrap().clone();
    assert!(
        !e.is_empty(),
        "the recursive watch saw nothing: the test is not exercising watches"
    );
    if a != e {
        return Err(format!(
            "seed {seed}: persistent-recursive events differ (order included)\n  zookeeper: {e:?}\n  zkd:       {a:?}\nreplay: {replay}"
        ));
    }
    same_trees(
        theirs,
        ours,
        &format!("seed {seed}: final trees differ"),
        replay,
    )
    .await?;
    Ok(compared)
}

/// Both targets' whole trees (every node's data, Stat and ACL), or an error
/// starting with `what` that lists the nodes only one side has.
pub(super) async fn same_trees(
    theirs: &Target,
    ours: &Target,
    what: &str,
    replay: &str,
) -> Result<(), String> {
    let (e, a) = (theirs.dump().await, ours.dump().await);
    if a == e {
        return Ok(());
    }
    let only = |x: &[String], y: &[String]| -> Vec<String> {
        x.iter().filter(|n| !y.contains(n)).cloned().collect()
    };
    // The same nodes, listed in another order or more than once.
    let first = e.iter().zip(&a).position(|(x, y)| x != y);
    Err(format!(
        "{what}\n  only on zookeeper: {:#?}\n  only on zkd:       {:#?}\n  \
         {} nodes and {}, first apart at {first:?}: {:?} and {:?}\nreplay: {replay}",
        only(&e, &a),
        only(&a, &e),
        e.len(),
        a.len(),
        first.map(|i| &e[i]),
        first.map(|i| &a[i]),
    ))
}
