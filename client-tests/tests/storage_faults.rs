//! zkd's real runtime on storage that misbehaves on purpose, driven by the
//! stock client over loopback:
//! - `MemStorage` power cuts drop every write that was not synced, so a write
//!   acknowledged before its fsync is caught (`kill -9` keeps the page cache
//!   and cannot show that);
//! - storage that stalls its fsyncs fills the global outstanding limit, and
//!   four-letter words must still be answered.

use bytes::Bytes;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;
use zkd_client_tests::in_process::InProcessServer;
use zkd_client_tests::{connect, persistent, within};
use zkd_protocol::Zxid;
use zkd_storage::snapshot::{SnapshotSeal, SnapshotSlot};
use zkd_storage::{
    DivergenceMark, EpochStore, MemStorage, SnapshotStore, StorageError, Store, TxnLog,
};

type Acked = Arc<Mutex<Vec<String>>>;

/// Creates `/{prefix}-{n}` for n = 0, 1, ... with up to 16 in flight,
/// recording each one the server acknowledged, until aborted.
async fn write_forever(addr: String, prefix: String, acked: Acked) {
    let client = connect(&addr, Duration::from_secs(10)).await;
    let mut in_flight = tokio::task::JoinSet::new();
    for n in 0u64.. {
        if in_flight.len() >= 16 {
            in_flight.join_next().await;
        }
        let path = format!("/{prefix}-{n}");
        let (client, acked) = (client.clone(), acked.clone());
        in_flight.spawn(async move {
            if client
                .create(&path, path.as_bytes(), &persistent())
                .await
                .is_ok()
            {
                acked.lock().unwrap().push(path);
            }
        });
    }
}

/// Cuts power five times under a pipelined write load, each time at a
/// different moment; after each cut a new server starts on what the disk
/// kept, and every create acknowledged before the cut must be there with its
/// data. Snapshots (snapCount=300) and their log purges happen meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_write_survives_a_power_cut() {
    let mut disk = MemStorage::new();
    let mut must_survive: Vec<String> = Vec::new();
    let mut total = 0;
    for cycle in 0..5u64 {
        let server = InProcessServer::start(disk.clone(), "snapCount=300\n");
        let client = connect(&server.addr(), Duration::from_secs(10)).await;
        for path in &must_survive {
            let data = within(client.get_data(path)).await;
            let (data, _) = data.unwrap_or_else(|e| {
                panic!("cycle {cycle}: acknowledged {path} lost in a power cut: {e:?}")
            });
            assert_eq!(data, path.as_bytes(), "cycle {cycle}: {path}");
        }
        total += must_survive.len();
        let acked = Acked::default();
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let prefix = format!("c{cycle}w{w}");
                tokio::spawn(write_forever(server.addr(), prefix, acked.clone()))
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(300 + 170 * cycle)).await;
        // Read what was acknowledged, then cut: each of those was acknowledged
        // before this instant, so its fsync came before it too.
        let acknowledged = acked.lock().unwrap().clone();
        let survived = disk.power_cut_copy();
        assert!(
            acknowledged.len() > 100,
            "cycle {cycle}: only {} writes in flight before the cut",
            acknowledged.len()
        );
        for w in writers {
            w.abort();
        }
        drop(client);
        tokio::task::block_in_place(|| server.stop());
        must_survive.extend(acknowledged);
        disk = survived;
    }
    assert!(total > 500, "too few acknowledged writes checked: {total}");
}

/// A `MemStorage` whose `sync` waits while the gate is closed: fsyncs that
/// take as long as the test wants.
#[derive(Clone, Debug, Default)]
struct StalledStorage {
    inner: MemStorage,
    gate: Arc<(Mutex<bool>, Condvar)>,
}

impl StalledStorage {
    fn set_stalled(&self, stalled: bool) {
        let (lock, changed) = &*self.gate;
        *lock.lock().unwrap() = stalled;
        changed.notify_all();
    }
}

impl TxnLog for StalledStorage {
    fn append(&mut self, zxid: Zxid, txn: Bytes) -> Result<(), StorageError> {
        self.inner.append(zxid, txn)
    }
    fn sync(&mut self) -> Result<(), StorageError> {
        let (lock, changed) = &*self.gate;
        let mut stalled = lock.lock().unwrap();
        while *stalled {
            stalled = changed.wait(stalled).unwrap();
        }
        self.inner.sync()
    }
    fn first_zxid(&self) -> Result<Option<Zxid>, StorageError> {
        self.inner.first_zxid()
    }
    fn last_zxid(&self) -> Result<Option<Zxid>, StorageError> {
        self.inner.last_zxid()
    }
    fn purged_through(&self) -> Result<Option<Zxid>, StorageError> {
        self.inner.purged_through()
    }
    fn read_range(&self, after: Zxid, max_txns: usize) -> Result<Vec<(Zxid, Bytes)>, StorageError> {
        self.inner.read_range(after, max_txns)
    }
    fn last_zxid_at_or_before(&self, zxid: Zxid) -> Result<Option<Zxid>, StorageError> {
        self.inner.last_zxid_at_or_before(zxid)
    }
    fn truncate_after(&mut self, zxid: Zxid) -> Result<(), StorageError> {
        self.inner.truncate_after(zxid)
    }
    fn reset(&mut self, through: Zxid) -> Result<(), StorageError> {
        self.inner.reset(through)
    }
    fn purge_through(&mut self, zxid: Zxid) -> Result<(), StorageError> {
        self.inner.purge_through(zxid)
    }
}

impl SnapshotStore for StalledStorage {
    fn append_snapshot(&mut self, slot: SnapshotSlot, piece: &[u8]) -> Result<(), StorageError> {
        self.inner.append_snapshot(slot, piece)
    }
    fn read_snapshot_at(
        &self,
        slot: SnapshotSlot,
        offset: u64,
        max: usize,
    ) -> Result<Bytes, StorageError> {
        self.inner.read_snapshot_at(slot, offset, max)
    }
    fn seal_snapshot(
        &mut self,
        slot: SnapshotSlot,
        zxid: Zxid,
        seal: SnapshotSeal,
    ) -> Result<(), StorageError> {
        self.inner.seal_snapshot(slot, zxid, seal)
    }
    fn snapshot_seals(&self) -> Result<Vec<(Zxid, SnapshotSeal)>, StorageError> {
        self.inner.snapshot_seals()
    }
    fn snapshot_zxids(&self) -> Result<Vec<Zxid>, StorageError> {
        self.inner.snapshot_zxids()
    }
    fn remove_snapshot(&mut self, slot: SnapshotSlot) -> Result<(), StorageError> {
        self.inner.remove_snapshot(slot)
    }
    fn sync_snapshots(&mut self) -> Result<(), StorageError> {
        self.inner.sync_snapshots()
    }
    fn set_fuzzy_image(&mut self, zxid: Zxid, end: Zxid) -> Result<(), StorageError> {
        self.inner.set_fuzzy_image(zxid, end)
    }
    fn fuzzy_image(&self) -> Result<Option<(Zxid, Zxid)>, StorageError> {
        self.inner.fuzzy_image()
    }
}

impl EpochStore for StalledStorage {
    fn accepted_epoch(&self) -> Result<u32, StorageError> {
        self.inner.accepted_epoch()
    }
    fn set_accepted_epoch(&mut self, epoch: u32) -> Result<(), StorageError> {
        self.inner.set_accepted_epoch(epoch)
    }
    fn current_epoch(&self) -> Result<u32, StorageError> {
        self.inner.current_epoch()
    }
    fn set_current_epoch(&mut self, epoch: u32) -> Result<(), StorageError> {
        self.inner.set_current_epoch(epoch)
    }
}

impl DivergenceMark for StalledStorage {
    fn diverged_at(&self) -> Result<Option<Zxid>, StorageError> {
        self.inner.diverged_at()
    }
    fn set_diverged_at(&mut self, zxid: Option<Zxid>) -> Result<(), StorageError> {
        self.inner.set_diverged_at(zxid)
    }
}

impl Store for StalledStorage {
    fn disk_usage(&self) -> (u64, u64) {
        (0, 0)
    }

    fn last_snapshot(&self) -> Option<(Zxid, u64)> {
        self.inner.last_snapshot()
    }
}

/// Sends a four-letter word, waiting at most `limit` for the answer.
fn four_letter_word(addr: &str, word: &str, limit: Duration) -> std::io::Result<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr)?;
    s.set_read_timeout(Some(limit))?;
    s.write_all(word.as_bytes())?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

/// With fsync stalled, no write is acknowledged (durable before acknowledged,
/// however late the fsync), and with more than the global outstanding limit
/// (1000) of writes waiting, `ruok`, `srvr` and `mntr` still answer at once:
/// an operator needs them exactly then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_fsync_stalls_nothing_is_acknowledged_and_four_letter_words_answer() {
    let storage = StalledStorage::default();
    let server = InProcessServer::start(storage.clone(), "");
    // The per-connection limit is 128 unanswered requests: spread over 12 sessions.
    let mut clients = Vec::new();
    for _ in 0..12 {
        clients.push(connect(&server.addr(), Duration::from_secs(30)).await);
    }
    storage.set_stalled(true);
    let mut writes = tokio::task::JoinSet::new();
    for (c, client) in clients.iter().enumerate() {
        for n in 0..100 {
            let path = format!("/s{c}-{n}");
            let client = client.clone();
            writes.spawn(async move { client.create(&path, b"", &persistent()).await.map(|_| ()) });
        }
    }
    // Let the node loop take in requests until it holds back the rest.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let addr = server.addr();
    let answers = tokio::task::spawn_blocking(move || {
        ["ruok", "srvr", "mntr"].map(|w| four_letter_word(&addr, w, Duration::from_secs(3)))
    })
    .await
    .unwrap();
    let mut acknowledged = 0;
    while let Some(done) = writes.try_join_next() {
        if matches!(done, Ok(Ok(()))) {
            acknowledged += 1;
        }
    }
    storage.set_stalled(false);
    assert_eq!(acknowledged, 0, "writes acknowledged before their fsync");
    let [ruok, srvr, mntr] = answers;
    assert_eq!(ruok.expect("ruok while writes are held back"), "imok");
    assert!(srvr
        .expect("srvr while writes are held back")
        .contains("Mode: standalone"));
    let mntr = mntr.expect("mntr while writes are held back");
    let outstanding: usize = mntr
        .lines()
        .find_map(|l| l.strip_prefix("zk_outstanding_requests\t"))
        .and_then(|v| v.trim().parse().ok())
        .expect("zk_outstanding_requests in mntr");
    assert!(
        outstanding >= 1000,
        "the test must fill the outstanding limit; mntr says {outstanding}"
    );
    while let Some(done) = within(writes.join_next()).await {
        done.unwrap()
            .expect("every write completes once the disk moves again");
    }
    drop(clients);
    tokio::task::block_in_place(|| server.stop());
}
