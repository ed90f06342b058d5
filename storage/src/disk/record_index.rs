//! Where each record of one txn-log segment starts, in 4 bytes a record.
//!
//! Held for every txn the log keeps, so it is kept small: zxids rise by one
//! within an epoch, so they are stored as runs (the index and zxid of each
//! run's first record), and offsets as `u32`, as a segment is closed past
//! 64 MiB and a record is at most 64 MiB. A `(zxid, u64)` pair per record
//! was 16 bytes, most of a megabyte per 60,000 txns (issue 15).

use zkd_protocol::Zxid;

/// The records of one segment: zxids strictly rising, offsets rising.
#[derive(Debug, Default)]
pub(super) struct RecordIndex {
    offsets: Vec<u32>,
    /// The first record of each run of consecutive zxids: its index and zxid.
    runs: Vec<(u32, Zxid)>,
}

impl RecordIndex {
    /// How many records there are.
    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    /// Adds a record at `offset` whose zxid is above every one before it.
    /// False, and nothing added, if the offset does not fit (a file past
    /// 4 GiB is not a segment this log wrote).
    pub fn push(&mut self, zxid: Zxid, offset: u64) -> bool {
        let (Ok(offset), Ok(i)) = (u32::try_from(offset), u32::try_from(self.len())) else {
            return false;
        };
        if self
            .last()
            .is_none_or(|last| zxid.0 != last.0.wrapping_add(1))
        {
            self.runs.push((i, zxid));
        }
        self.offsets.push(offset);
        true
    }

    /// The zxid of record `i` (`i < len`).
    pub fn zxid(&self, i: usize) -> Zxid {
        let run = self.runs.partition_point(|&(start, _)| start as usize <= i) - 1;
        let (start, first) = self.runs[run];
        Zxid(first.0 + (i - start as usize) as i64)
    }

    /// Where record `i` starts (`i < len`).
    pub fn offset(&self, i: usize) -> u64 {
        u64::from(self.offsets[i])
    }

    /// The first record's zxid.
    pub fn first(&self) -> Option<Zxid> {
        self.runs.first().map(|&(_, z)| z)
    }

    /// The last record's zxid.
    pub fn last(&self) -> Option<Zxid> {
        self.len().checked_sub(1).map(|i| self.zxid(i))
    }

    /// How many records have a zxid at or below `zxid`: the index of the
    /// first record above it.
    pub fn count_through(&self, zxid: Zxid) -> usize {
        let run = self.runs.partition_point(|&(_, first)| first <= zxid);
        let Some(&(start, first)) = run.checked_sub(1).map(|r| &self.runs[r]) else {
            return 0;
        };
        let end = self.runs.get(run).map_or(self.len(), |&(s, _)| s as usize);
        let within = zxid.0.checked_sub(first.0).unwrap_or(i64::MAX);
        let within = usize::try_from(within).unwrap_or(usize::MAX);
        end.min((start as usize).saturating_add(within).saturating_add(1))
    }

    /// Keeps the first `keep` records.
    pub fn truncate(&mut self, keep: usize) {
        self.offsets.truncate(keep);
        let runs = self
            .runs
            .partition_point(|&(start, _)| (start as usize) < keep);
        self.runs.truncate(runs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Against a plain list of pairs: rising zxids with gaps (new
        /// epochs) and runs, every query agrees, before and after a cut.
        #[test]
        fn agrees_with_a_list_of_pairs(
            steps in prop::collection::vec((0i64..4, 1u64..300), 0..200),
            probes in prop::collection::vec(0i64..2_000, 1..40),
            keep in 0usize..220,
        ) {
            let mut index = RecordIndex::default();
            let mut model: Vec<(Zxid, u64)> = Vec::new();
            let (mut zxid, mut offset) = (5i64, 0u64);
            for (gap, len) in steps {
                // Mostly the next zxid; sometimes a jump, as at a new epoch.
                zxid += if gap == 0 { 40 } else { 1 };
                prop_assert!(index.push(Zxid(zxid), offset));
                model.push((Zxid(zxid), offset));
                offset += len;
            }
            for _ in 0..2 {
                prop_assert_eq!(index.len(), model.len());
                prop_assert_eq!(index.first(), model.first().map(|p| p.0));
                prop_assert_eq!(index.last(), model.last().map(|p| p.0));
                for (i, &(z, at)) in model.iter().enumerate() {
                    prop_assert_eq!(index.zxid(i), z);
                    prop_assert_eq!(index.offset(i), at);
                }
                for &p in &probes {
                    let expected = model.partition_point(|&(z, _)| z <= Zxid(p));
                    prop_assert_eq!(index.count_through(Zxid(p)), expected);
                }
                index.truncate(keep);
                model.truncate(keep);
            }
        }
    }

    #[test]
    fn an_offset_past_4_gib_is_refused() {
        let mut index = RecordIndex::default();
        assert!(!index.push(Zxid(1), 1 << 32));
        assert_eq!(index.len(), 0);
        assert!(index.push(Zxid(1), u64::from(u32::MAX)));
        assert_eq!(index.count_through(Zxid(i64::MAX)), 1);
    }
}
