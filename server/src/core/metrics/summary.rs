//! One summary metric (a latency, a size): count, sum, min and max since
//! start, and quantiles over a sliding window, as ZooKeeper's summaries
//! give them to `mntr` (avg/min/max/cnt/sum, p50..p999) and to Prometheus
//! (quantiles, `_count`, `_sum`).

use hdrhistogram::Histogram;

/// How long a window of observations lasts. Quantiles come from the
/// window before the current one, so they cover the last 5 to 10 minutes
/// (Prometheus' Java client keeps 10 minutes).
const WINDOW_MS: u64 = 5 * 60 * 1000;

/// Two significant digits: a quantile is within 1% of the true value.
const SIGNIFICANT_DIGITS: u8 = 2;

/// Observations of one quantity.
#[derive(Clone, Debug)]
pub struct Summary {
    count: u64,
    sum: u64,
    min: u64,
    max: u64,
    /// The current window's observations and the previous window's: the
    /// quantiles read both (merged only when read, so an observation is
    /// recorded once).
    current: Histogram<u32>,
    previous: Histogram<u32>,
    window_started_ms: u64,
}

impl Default for Summary {
    fn default() -> Self {
        Summary {
            count: 0,
            sum: 0,
            min: 0,
            max: 0,
            current: histogram(),
            previous: histogram(),
            window_started_ms: 0,
        }
    }
}

fn histogram() -> Histogram<u32> {
    Histogram::new(SIGNIFICANT_DIGITS).expect("two significant digits are valid")
}

impl Summary {
    /// Notes one observation of `value` at `now_ms`.
    pub fn observe(&mut self, value: u64, now_ms: u64) {
        self.min = if self.count == 0 {
            value
        } else {
            self.min.min(value)
        };
        self.max = self.max.max(value);
        self.count += 1;
        self.sum = self.sum.saturating_add(value);
        if now_ms.saturating_sub(self.window_started_ms) >= WINDOW_MS {
            self.previous = std::mem::replace(&mut self.current, histogram());
            self.window_started_ms = now_ms;
        }
        // The histograms grow to take any value; one that cannot (past
        // 2^63) is left out of the quantiles, not of the totals.
        let _ = self.current.record(value);
    }

    /// Observations since start.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Their sum.
    pub fn sum(&self) -> u64 {
        self.sum
    }

    /// The smallest (0 before any).
    pub fn min(&self) -> u64 {
        self.min
    }

    /// The largest (0 before any).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The mean, to four decimals as ZooKeeper rounds it (0 before any).
    pub fn avg(&self) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let avg = self.sum as f64 / self.count as f64;
        (avg * 10_000.0).round() / 10_000.0
    }

    /// The `q` quantile of the recent window; None when it saw nothing.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        let mut recent = self.previous.clone();
        // Both grow alike; a merge that cannot fit is read from the current one.
        if recent.add(&self.current).is_err() {
            recent = self.current.clone();
        }
        (!recent.is_empty()).then(|| recent.value_at_quantile(q))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_are_exact_and_quantiles_within_one_percent() {
        let mut s = Summary::default();
        assert_eq!((s.count(), s.min(), s.max(), s.avg()), (0, 0, 0, 0.0));
        assert_eq!(s.quantile(0.5), None);
        for v in 1..=1000 {
            s.observe(v, 0);
        }
        assert_eq!(
            (s.count(), s.sum(), s.min(), s.max()),
            (1000, 500_500, 1, 1000)
        );
        assert_eq!(s.avg(), 500.5);
        let p99 = s.quantile(0.99).unwrap();
        assert!((980..=1000).contains(&p99), "{p99}");
    }

    #[test]
    fn quantiles_forget_windows_past_the_last_two() {
        let mut s = Summary::default();
        s.observe(1000, 0);
        s.observe(5, WINDOW_MS);
        let top = s.quantile(1.0).unwrap_or(0);
        assert!(
            (1000..=1010).contains(&top),
            "the window before is kept: {top}"
        );
        s.observe(7, 2 * WINDOW_MS);
        assert_eq!(s.quantile(1.0), Some(7), "the first window is gone");
        assert_eq!(s.quantile(0.0), Some(5));
        assert_eq!((s.count(), s.max()), (3, 1000), "totals keep everything");
    }
}
