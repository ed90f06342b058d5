//! Local snapshots, streamed: the node hands its image over a piece at a
//! time as its cursor writes it, and a helper thread appends each piece to
//! the snapshot's file, so neither the node nor this thread ever holds a
//! whole image, and writing one never delays the log's fsyncs.
//!
//! One stream at a time: a stream that starts while the last one is still
//! being sealed is skipped whole, as ZooKeeper skips a snapshot while one is
//! in progress. A stream cut off is abandoned: its file is removed and any
//! of its pieces still to come are ignored, so a partial image can never be
//! sealed. That happens when the history is about to change under it (a
//! truncation or an installed SNAP), and when a new stream starts before it
//! ended (the node dropped it when its member stopped serving).

use super::{Saved, StorageMetrics};
use crate::core::types::SnapshotPiece;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::Arc;
use zkd_protocol::Zxid;
use zkd_storage::snapshot::{SnapshotSlot, SnapshotWriter};
use zkd_storage::{StorageError, Store};

/// What the helper is asked to do, in order.
#[derive(Debug)]
enum Work {
    Piece(SnapshotPiece),
    /// Remove the unsealed image of this stream.
    Abandon(Zxid),
}

/// Bytes of local-snapshot pieces the storage side is done with (written,
/// or dropped), ever. The node compares it with what it handed over and
/// writes no more of its image while too much waits for the disk.
#[derive(Clone, Debug, Default)]
pub struct SnapshotProgress(Arc<AtomicU64>);

impl SnapshotProgress {
    /// Bytes done with so far.
    pub fn stored(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    fn add(&self, piece_bytes: usize) {
        self.0.fetch_add(piece_bytes as u64, Ordering::Relaxed);
    }
}

/// The storage worker's side of local snapshots.
pub(super) struct LocalSnapshots {
    work: Option<Sender<Work>>,
    /// The simulator's: no thread, each piece handled when submitted.
    #[cfg(test)]
    inline: Option<Box<dyn FnMut(Work) + Send>>,
    done: Receiver<Saved>,
    /// The stream being handed over, not yet at its last piece.
    streaming: Option<Zxid>,
    /// Streams handed over whole and not yet reported saved.
    pub(super) in_flight: usize,
    thread: Option<std::thread::JoinHandle<()>>,
    progress: SnapshotProgress,
}

impl LocalSnapshots {
    /// Starts the helper thread on `storage`, keeping `retain` snapshots
    /// and counting pieces done in `progress`.
    pub(super) fn start<S: Store>(
        storage: S,
        retain: usize,
        progress: SnapshotProgress,
        metrics: StorageMetrics,
    ) -> std::io::Result<LocalSnapshots> {
        let (work, todo) = mpsc::channel();
        let (report, done) = mpsc::channel();
        let saver = Saver::new(storage, retain, progress.clone(), metrics);
        let thread = std::thread::Builder::new()
            .name("zkd-snapshot".into())
            .spawn(move || run(saver, todo, report))?;
        Ok(LocalSnapshots {
            work: Some(work),
            #[cfg(test)]
            inline: None,
            done,
            streaming: None,
            in_flight: 0,
            thread: Some(thread),
            progress,
        })
    }

    /// Without a thread: each piece is written when submitted.
    #[cfg(test)]
    pub(super) fn inline<S: Store>(storage: S, retain: usize) -> LocalSnapshots {
        let (report, done) = mpsc::channel();
        let progress = SnapshotProgress::default();
        let metrics = StorageMetrics::default();
        let mut saver = Saver::new(storage, retain, progress.clone(), metrics);
        let handle = move |work| {
            if let Some(saved) = saver.handle(work) {
                let _ = report.send(saved);
            }
        };
        LocalSnapshots {
            work: None,
            inline: Some(Box::new(handle)),
            done,
            streaming: None,
            in_flight: 0,
            thread: None,
            progress,
        }
    }

    /// What the node's snapshots have been paced by.
    #[cfg(test)]
    pub(super) fn progress(&self) -> &SnapshotProgress {
        &self.progress
    }

    /// Hands a piece over, or drops it if its stream is skipped or abandoned.
    pub(super) fn submit(&mut self, piece: SnapshotPiece) {
        if piece.first {
            if self.in_flight > 0 {
                tracing::warn!(zxid = %piece.zxid, "too busy to snapshot, skipping");
                self.progress.add(piece.data.len());
                return;
            }
            // The node streams one image at a time: one still open was
            // dropped (its member stopped serving), so it goes.
            self.abandon();
            self.streaming = Some(piece.zxid);
        }
        if self.streaming != Some(piece.zxid) {
            self.progress.add(piece.data.len());
            return;
        }
        if piece.last {
            self.streaming = None;
            self.in_flight += 1;
        }
        self.send(Work::Piece(piece));
    }

    /// Abandons the stream being handed over, if any (the history is about
    /// to change under it).
    pub(super) fn abandon(&mut self) {
        if let Some(zxid) = self.streaming.take() {
            tracing::info!(%zxid, "snapshot abandoned");
            self.send(Work::Abandon(zxid));
        }
    }

    fn send(&mut self, work: Work) {
        #[cfg(test)]
        if let Some(handle) = &mut self.inline {
            handle(work);
            return;
        }
        if let Some(to) = &self.work {
            // A closed channel: the thread stopped after a failure, which
            // `collect` reports.
            let _ = to.send(work);
        }
    }

    /// Results of streams saved (all handed over, waiting, if `wait`): the
    /// highest log purge goal they set. Fails if a save failed.
    pub(super) fn collect(&mut self, wait: bool) -> Result<Option<Zxid>, StorageError> {
        let mut goal = None;
        while self.in_flight > 0 {
            let saved = if wait {
                self.done.recv().ok()
            } else {
                match self.done.try_recv() {
                    Ok(saved) => Some(saved),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => None,
                }
            };
            let Some(saved) = saved else {
                return Err(StorageError::Db("the snapshot thread stopped".into()));
            };
            self.in_flight -= 1;
            goal = goal.max(saved?);
        }
        Ok(goal)
    }

    /// Stops handing work over (after a failure: the thread ends on its own).
    pub(super) fn detach(&mut self) {
        self.work = None;
    }

    /// Abandons a stream in progress and ends the thread once it is idle.
    pub(super) fn stop(&mut self) {
        self.abandon();
        self.work = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The helper's state: the image being written, if any.
struct Saver<S> {
    storage: S,
    retain: usize,
    writing: Option<(Zxid, SnapshotWriter)>,
    /// When the image being written got its first piece.
    started: Option<std::time::Instant>,
    progress: SnapshotProgress,
    metrics: StorageMetrics,
}

impl<S: Store> Saver<S> {
    fn new(
        storage: S,
        retain: usize,
        progress: SnapshotProgress,
        metrics: StorageMetrics,
    ) -> Saver<S> {
        Saver {
            storage,
            retain,
            writing: None,
            started: None,
            progress,
            metrics,
        }
    }

    /// Carries out one piece of work; the outcome once an image is sealed
    /// (or failed).
    fn handle(&mut self, work: Work) -> Option<Saved> {
        match work {
            Work::Piece(piece) => {
                let bytes = piece.data.len();
                let saved = self.piece(piece).transpose();
                self.progress.add(bytes);
                saved
            }
            Work::Abandon(zxid) => {
                if self.writing.as_ref().is_some_and(|(open, _)| *open == zxid) {
                    self.writing = None;
                    // An unsealed image is never read: removing it only
                    // frees the disk, so a failure here is no failure.
                    if let Err(e) = self.storage.remove_snapshot(SnapshotSlot::Saved(zxid)) {
                        tracing::warn!(%zxid, "removing an abandoned snapshot: {e}");
                    }
                }
                None
            }
        }
    }

    fn piece(&mut self, piece: SnapshotPiece) -> Result<Option<Option<Zxid>>, StorageError> {
        let slot = SnapshotSlot::Saved(piece.zxid);
        if piece.first {
            self.writing = Some((piece.zxid, SnapshotWriter::new(&mut self.storage, slot)?));
            self.started = Some(std::time::Instant::now());
        }
        let Some((zxid, writer)) = &mut self.writing else {
            return Ok(None);
        };
        if *zxid != piece.zxid {
            return Ok(None);
        }
        writer.write(&mut self.storage, &piece.data)?;
        if !piece.last {
            // Paced writeback: a piece at a time, as the node writes them.
            self.storage.write_out_snapshot(slot)?;
            return Ok(None);
        }
        let (zxid, writer) = self.writing.take().expect("checked above");
        writer.seal(&mut self.storage, zxid)?;
        if let Some(started) = self.started.take() {
            self.metrics.snapshot_saved(started.elapsed());
        }
        tracing::info!(%zxid, "snapshot saved");
        Ok(Some(self.storage.purge_snapshots(self.retain)?))
    }
}

/// The helper thread: works until the channel closes or a save fails.
fn run<S: Store>(mut saver: Saver<S>, todo: Receiver<Work>, done: Sender<Saved>) {
    for work in todo {
        let Some(saved) = saver.handle(work) else {
            continue;
        };
        let failed = saved.is_err();
        if done.send(saved).is_err() || failed {
            if failed {
                // As the worker: never drop a store after an I/O error.
                std::mem::forget(saver);
            }
            return;
        }
    }
}
