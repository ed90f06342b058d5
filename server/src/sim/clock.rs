//! Each member's own monotonic clock: its own origin, and a rate that
//! differs from the others' (a slow or busy machine's timers run late).
//! Zab's safety must not depend on clocks at all; its liveness only on
//! each member's timeouts, measured on its own clock.

use super::rng::Rng;

/// A member's clock against the simulation's time.
#[derive(Clone, Copy, Debug)]
pub struct MemberClock {
    /// Member milliseconds per 1,000 simulated ones.
    permille: u64,
    /// The member's reading at simulated time 0.
    origin: u64,
}

impl MemberClock {
    /// The simulation's own time: no skew.
    pub const EXACT: MemberClock = MemberClock {
        permille: 1000,
        origin: 0,
    };

    /// A clock 20% slow to 25% fast, from an arbitrary origin.
    pub fn skewed(rng: &mut Rng) -> MemberClock {
        MemberClock {
            permille: 800 + rng.below(451),
            origin: rng.below(1 << 40),
        }
    }

    /// What the member's clock reads at simulated time `now`.
    pub fn local(self, now: u64) -> u64 {
        self.origin + now * self.permille / 1000
    }

    /// The first simulated time at which the member's clock reads `local`
    /// or more.
    pub fn sim_time(self, local: u64) -> u64 {
        (local.saturating_sub(self.origin) * 1000).div_ceil(self.permille)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_on_the_members_clock_falls_at_the_first_simulated_time_that_reaches_it() {
        let mut rng = Rng::new(7);
        for _ in 0..1000 {
            let clock = MemberClock::skewed(&mut rng);
            let now = rng.below(1 << 30);
            let deadline = clock.local(now) + rng.below(5000);
            let at = clock.sim_time(deadline);
            assert!(clock.local(at) >= deadline, "{clock:?}: {at} is early");
            assert!(
                at == 0 || clock.local(at - 1) < deadline,
                "{clock:?}: {at} is late"
            );
        }
    }
}
