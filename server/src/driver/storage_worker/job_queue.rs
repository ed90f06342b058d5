//! The storage thread's job queue: a channel whose jobs carry the moment
//! they were queued, and a shared count of those waiting, so the thread can
//! report ZooKeeper's `sync_processor_queue_*` figures (how long a job
//! waited, how many waited with it) as ZooKeeper's SyncRequestProcessor does.

use super::StorageJob;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What both ends count.
#[derive(Debug, Default)]
pub struct QueueCounts {
    waiting: AtomicUsize,
    queued: AtomicU64,
}

impl QueueCounts {
    /// Jobs queued since start (`sync_processor_request_queued`).
    pub fn queued(&self) -> u64 {
        self.queued.load(Ordering::Relaxed)
    }
}

/// A job as the thread takes it.
pub struct Queued {
    pub job: StorageJob,
    /// When it was queued.
    pub at: Instant,
    /// Jobs waiting when it was taken, itself included.
    pub waiting: usize,
}

/// The node loop's end.
#[derive(Debug)]
pub struct JobSender {
    jobs: Sender<(StorageJob, Instant)>,
    counts: Arc<QueueCounts>,
}

/// The storage thread's end.
pub struct JobReceiver {
    jobs: Receiver<(StorageJob, Instant)>,
    counts: Arc<QueueCounts>,
}

/// A queue whose counts are `counts`.
pub fn job_queue(counts: Arc<QueueCounts>) -> (JobSender, JobReceiver) {
    let (tx, rx) = mpsc::channel();
    let sender = JobSender {
        jobs: tx,
        counts: counts.clone(),
    };
    (sender, JobReceiver { jobs: rx, counts })
}

impl JobSender {
    /// Queues `job`; gives it back if the thread is gone.
    pub fn send(&self, job: StorageJob) -> Result<(), StorageJob> {
        self.counts.waiting.fetch_add(1, Ordering::Relaxed);
        match self.jobs.send((job, Instant::now())) {
            Ok(()) => {
                self.counts.queued.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(mpsc::SendError((job, _))) => {
                self.counts.waiting.fetch_sub(1, Ordering::Relaxed);
                Err(job)
            }
        }
    }
}

impl JobReceiver {
    fn taken(&self, (job, at): (StorageJob, Instant)) -> Queued {
        let waiting = self.counts.waiting.fetch_sub(1, Ordering::Relaxed);
        Queued { job, at, waiting }
    }

    /// The next job; None once every sender is gone.
    pub fn recv(&self) -> Option<Queued> {
        self.jobs.recv().ok().map(|j| self.taken(j))
    }

    /// The next job within `limit`.
    pub fn recv_timeout(&self, limit: Duration) -> Result<Queued, RecvTimeoutError> {
        self.jobs.recv_timeout(limit).map(|j| self.taken(j))
    }

    /// A job already waiting.
    pub fn try_recv(&self) -> Result<Queued, TryRecvError> {
        self.jobs.try_recv().map(|j| self.taken(j))
    }
}
