//! Each fix of the member lifecycle planted back as a bug (a failpoint on
//! this test's thread only) and caught by its script: a script that passes
//! with the bug in place would be blind. Run by `run-all.sh` in a build
//! with the `failpoints` feature.

use super::divergence::a_damaged_follower_resyncs;
use super::visibility::{rejoin_with_uncommitted, Rejoin};
use crate::failpoints::{planted, Failpoint};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The first failure of `row` over seeds 1..=20 with `failpoint` planted.
fn caught(failpoint: Failpoint, row: impl Fn(u64) -> Result<(), String>) -> String {
    for seed in 1..=20 {
        let outcome = planted::with(failpoint, || catch_unwind(AssertUnwindSafe(|| row(seed))));
        match outcome {
            Ok(Ok(())) => continue,
            Ok(Err(e)) => return format!("seed {seed}: {e}"),
            Err(_) => return format!("seed {seed}: panicked"),
        }
    }
    panic!(
        "{} planted, and no seed of its row caught it",
        failpoint.name()
    )
}

#[test]
fn a_diff_that_keeps_uncommitted_proposals_is_caught() {
    let failure = caught(Failpoint::DiffUncommitted, |seed| {
        rejoin_with_uncommitted(seed, Rejoin::Restart)
    });
    assert!(
        failure.contains("visibility:") || failure.contains("serves the uncommitted"),
        "{failure}"
    );
}

#[test]
fn a_member_serving_a_diverged_tree_is_caught() {
    let failure = caught(Failpoint::ServeDiverged, a_damaged_follower_resyncs);
    assert!(failure.contains("stops serving"), "{failure}");
}
