//! The same workload on a 3-member zkd ensemble and a 3-member ZooKeeper
//! ensemble (see the crate doc).

use super::*;
use zkd_client_tests::ensemble::Ensemble;
use zkd_client_tests::oracle_ensemble::ZooKeeperEnsemble;

/// Members per ensemble in [`random_operations_on_ensembles_match_an_apache_zookeeper_ensemble`].
const MEMBERS: usize = 3;

async fn run_ensemble_seed(seed: u64) -> Result<usize, String> {
    // One after the other: members connecting to each other take ephemeral
    // ports, which the other ensemble's members may have picked but not bound yet.
    let (oracle, zkd) = tokio::task::block_in_place(|| {
        let oracle = ZooKeeperEnsemble::start_with(MEMBERS, 2000, &[]);
        let zkd = Ensemble::start_with(
            MEMBERS,
            ServerOptions::default().with("extendedTypesEnabled", "true"),
        );
        (oracle, zkd)
    });
    let theirs = Target::connect(
        &oracle.members.iter().map(|m| m.port).collect::<Vec<_>>(),
        seed,
    )
    .await;
    let ours = Target::connect(
        &zkd.members.iter().map(|m| m.port).collect::<Vec<_>>(),
        seed,
    )
    .await;
    theirs.settle().await;
    ours.settle().await;
    let replay = format!(
        "ZKD_DIFFERENTIAL_ENSEMBLE_SEEDS_ONLY={seed} cargo test -p zkd-client-tests --test differential random_operations_on_ensembles"
    );
    compare(&theirs, &ours, seed, &replay).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_operations_on_ensembles_match_an_apache_zookeeper_ensemble() {
    // More seeds on demand: ZKD_DIFFERENTIAL_ENSEMBLE_SEEDS=50 (each starts two ensembles).
    let (compared, divergences) =
        every_seed("ZKD_DIFFERENTIAL_ENSEMBLE_SEEDS", 3, run_ensemble_seed).await;
    report(&divergences, compared, "an Apache ZooKeeper ensemble");
}
