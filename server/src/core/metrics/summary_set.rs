//! ZooKeeper's summary sets: one summary per key, here the top segment of a
//! path (`read_per_namespace`, `write_per_namespace`).

use super::Summary;
use std::collections::BTreeMap;

/// At most this many keys are kept: any client can create top-level nodes,
/// and each key holds two histograms. Later keys go unmeasured.
const MAX_KEYS: usize = 1024;

/// Summaries by key, in key order.
#[derive(Clone, Debug, Default)]
pub struct SummarySet {
    by_key: BTreeMap<Box<str>, Summary>,
}

impl SummarySet {
    /// Notes one observation of `value` under `key` at `now_ms`.
    pub fn observe(&mut self, key: &str, value: u64, now_ms: u64) {
        if let Some(summary) = self.by_key.get_mut(key) {
            return summary.observe(value, now_ms);
        }
        if self.by_key.len() < MAX_KEYS {
            let mut summary = Summary::default();
            summary.observe(value, now_ms);
            self.by_key.insert(key.into(), summary);
        }
    }

    /// Each key and its summary.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Summary)> {
        self.by_key.iter().map(|(k, s)| (&**k, s))
    }
}

/// A path's top segment, as ZooKeeper's `PathUtils.getTopNamespace`
/// (none for `/`).
pub fn top_namespace(path: &str) -> Option<&str> {
    let top = path.strip_prefix('/')?.split('/').next()?;
    (!top.is_empty()).then_some(top)
}

/// A string's length as Java counts it (UTF-16 units).
pub fn java_length(s: &str) -> u64 {
    match s.is_ascii() {
        true => s.len() as u64,
        false => s.encode_utf16().count() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_top_segments() {
        assert_eq!(top_namespace("/"), None);
        assert_eq!(top_namespace("/a"), Some("a"));
        assert_eq!(top_namespace("/a/b/c"), Some("a"));
        assert_eq!(java_length("/é𝄞"), 4);
    }

    #[test]
    fn keys_past_the_bound_go_unmeasured() {
        let mut set = SummarySet::default();
        for k in 0..MAX_KEYS + 5 {
            set.observe(&k.to_string(), 1, 0);
        }
        set.observe("0", 3, 0);
        assert_eq!(set.iter().count(), MAX_KEYS);
        let zero = set.iter().find(|(k, _)| *k == "0").unwrap().1;
        assert_eq!((zero.count(), zero.sum()), (2, 4));
    }
}
