//! The iteration orders of the Java hash collections whose contents ZooKeeper
//! returns as lists. Clients compare ACL lists with list equality, so the
//! order of ids that `auth` expands to (and of whoAmI and getEphemerals) must
//! be ZooKeeper's, which is the order of a Java hash table, not insertion.
//!
//! - A connection's identities are a `ConcurrentHashMap`-backed set
//!   (`ServerCnxn.authInfo`, default capacity 16, resized at 12 entries).
//! - A session's ephemerals are a `HashSet<String>`; getEphemerals answers
//!   from a clone of it, whose table is sized for its current length.
//!
//! Both tables put an entry in bin `spread(hashCode) & (n - 1)` and iterate
//! bins in order, each bin in the order its entries were linked.

/// Java's `String.hashCode`: over UTF-16 code units, wrapping.
pub fn string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// The `hashCode` jute generates for a record of two strings (an `Id`).
pub fn id_hash(scheme: &str, id: &str) -> i32 {
    let result = 17i32.wrapping_mul(37).wrapping_add(string_hash(scheme));
    result.wrapping_mul(37).wrapping_add(string_hash(id))
}

/// `HashMap.hash` / `ConcurrentHashMap.spread`: high bits folded into low.
fn spread(h: i32) -> u32 {
    let h = h as u32;
    (h ^ (h >> 16)) & 0x7fff_ffff
}

/// The iteration order of a `ConcurrentHashMap` key set after inserting
/// `hashes` in order (no duplicates, no removals): indexes into `hashes`.
pub fn concurrent_hash_set_order(hashes: &[i32]) -> Vec<usize> {
    const INITIAL_BINS: usize = 16;
    let mut bins: Vec<Vec<usize>> = vec![Vec::new(); INITIAL_BINS];
    // sizeCtl: the table doubles once the count reaches three quarters of it.
    let mut size_ctl = INITIAL_BINS - INITIAL_BINS / 4;
    for (count, (i, h)) in hashes.iter().enumerate().map(|(i, h)| (i + 1, (i, h))) {
        let n = bins.len();
        bins[spread(*h) as usize & (n - 1)].push(i);
        if count >= size_ctl {
            bins = transfer(&bins, hashes);
            size_ctl = (n << 1) - (n >> 1);
        }
    }
    bins.into_iter().flatten().collect()
}

/// `ConcurrentHashMap.transfer` for one thread: each bin splits into a low and
/// a high bin. The trailing run of entries bound for the same half keeps its
/// order; the entries before it are prepended one by one, so they reverse.
fn transfer(bins: &[Vec<usize>], hashes: &[i32]) -> Vec<Vec<usize>> {
    let n = bins.len();
    let mut next = vec![Vec::new(); n * 2];
    for (i, bin) in bins.iter().enumerate() {
        let high = |e: &usize| spread(hashes[*e]) as usize & n != 0;
        let Some(last) = bin.last() else { continue };
        let last_high = high(last);
        let run_start = bin
            .iter()
            .rposition(|e| high(e) != last_high)
            .map_or(0, |p| p + 1);
        let (mut low_bin, mut high_bin) = (Vec::new(), Vec::new());
        let run = bin[run_start..].to_vec();
        if last_high {
            high_bin = run;
        } else {
            low_bin = run;
        }
        for e in &bin[..run_start] {
            if high(e) {
                high_bin.insert(0, *e);
            } else {
                low_bin.insert(0, *e);
            }
        }
        next[i] = low_bin;
        next[i + n] = high_bin;
    }
    next
}

/// The iteration order of a clone of a `HashSet<String>` holding `items`
/// (given in insertion order): indexes into `items`.
///
/// The clone's table is sized for its length (JDK 17's `putMapEntries`) and
/// filled in the source set's iteration order, so entries sharing a bin of
/// the clone keep the source's order: by source bin, then insertion. The
/// source's table is taken as grown by insertions alone; one that once held
/// many more entries keeps a larger table, which zkd does not track.
pub fn hash_set_clone_order(items: &[&str]) -> Vec<usize> {
    let clone_bins = table_size_for((items.len() as f32 / 0.75 + 1.0) as usize);
    let mut source_bins = 16;
    while items.len() * 4 > source_bins * 3 {
        source_bins *= 2;
    }
    let mut order: Vec<usize> = (0..items.len()).collect();
    // Stable: entries in the same source bin stay in insertion order.
    order.sort_by_key(|i| {
        let h = spread(string_hash(items[*i])) as usize;
        (h & (clone_bins - 1), h & (source_bins - 1))
    });
    order
}

/// `HashMap.tableSizeFor`: the smallest power of two at least `cap` (min 1).
fn table_size_for(cap: usize) -> usize {
    cap.max(1).next_power_of_two()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_hash_matches_java() {
        // Values printed by Java's "…".hashCode().
        assert_eq!(string_hash(""), 0);
        assert_eq!(string_hash("digest"), -1331913276);
        assert_eq!(string_hash("ip"), 3367);
        assert_eq!(string_hash("hello world"), 1794106052);
    }

    #[test]
    fn a_small_set_iterates_by_bin() {
        // Bins 3, 1, 3, 0 (hashes below 2^16 spread to themselves).
        let order = concurrent_hash_set_order(&[3, 1, 19, 16]);
        assert_eq!(order, vec![3, 1, 0, 2]);
        assert_eq!(hash_set_clone_order(&[]), Vec::<usize>::new());
    }

    #[test]
    fn a_cloned_hash_set_orders_like_zookeeper() {
        // Seen from ZooKeeper 3.8 on JDK 17: a clone of five entries has eight
        // bins; three share bin 3 there and keep the order of the source's
        // sixteen bins (3, 11, 11), ties in insertion order.
        let inserted = [
            "/b-0000000005",
            "/zookeeper/u-0000000002",
            "/a-0000000002",
            "/b/x-0000000002",
            "/b/x-0000000003",
        ];
        let order: Vec<&str> = hash_set_clone_order(&inserted)
            .into_iter()
            .map(|i| inserted[i])
            .collect();
        assert_eq!(
            order,
            [
                "/b/x-0000000003",
                "/b-0000000005",
                "/zookeeper/u-0000000002",
                "/b/x-0000000002",
                "/a-0000000002"
            ]
        );
    }

    #[test]
    fn resizing_reverses_the_entries_before_the_last_run() {
        // Twelve entries in bin 0 of 16: the twelfth insertion doubles the
        // table. Bit 16 of the hash sends an entry to bin 16.
        let hashes: Vec<i32> = [0, 16, 0, 16, 0, 0, 16, 16, 0, 16, 0, 0]
            .iter()
            .enumerate()
            .map(|(i, b)| b + 32 * i as i32)
            .collect();
        let order = concurrent_hash_set_order(&hashes);
        // Low bin: the last run (entries 10, 11) first, then 8, 5, 4, 2, 0 prepended.
        // High bin: 9, 7, 6, 3, 1 prepended in reverse.
        assert_eq!(order, vec![8, 5, 4, 2, 0, 10, 11, 9, 7, 6, 3, 1]);
    }
}
