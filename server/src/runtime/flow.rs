//! What the node loop sends one connection, and the connection's flow
//! control: shared by the node loop and the connection's task.

use super::connection_counts::AddressSlot;
use bytes::Bytes;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

/// Bytes queued for a client beyond which zkd stops reading its requests, so a
/// client that does not read its replies cannot make the server buffer without bound.
pub(super) const MAX_QUEUED_REPLY_BYTES: usize = 8 * 1024 * 1024;

/// Requests of one connection taken in but not yet answered. Together with the
/// byte bound this caps what one connection can make the server hold
/// (ZooKeeper throttles on a global outstanding count only).
const MAX_PENDING_REQUESTS: usize = 128;

/// One connection's outbox and counters.
///
/// The frames wait in a queue of their own rather than a channel: a tokio
/// channel allocates a block of 32 slots up front, about 1.8 KiB for every
/// idle session (issue 15). The connection's one task waits on it through a
/// single stored waker rather than `Notify`s, whose waiting futures would
/// take room in every idle connection's task (issue 52).
#[derive(Debug)]
pub struct Flow {
    queued_bytes: AtomicUsize,
    pending_requests: AtomicUsize,
    outbox: Mutex<Outbox>,
    /// The connection's place in its address's count (`maxClientCnxns`),
    /// given back once neither its task nor the node loop holds it. Kept
    /// here rather than in the task, whose size tokio rounds up to 128 bytes.
    _slot: AddressSlot,
}

/// Frames for the writer, in order, what is to become of the connection,
/// and the connection's task to wake when any of that changes.
#[derive(Debug, Default)]
struct Outbox {
    frames: VecDeque<(Bytes, bool)>,
    /// Close once the frames are written.
    close: bool,
    /// End at once, queued frames and all.
    ended: bool,
    task: Option<Waker>,
}

impl Flow {
    /// The flow of a connection holding `slot`.
    pub fn new(slot: AddressSlot) -> Flow {
        Flow {
            queued_bytes: AtomicUsize::new(0),
            pending_requests: AtomicUsize::new(0),
            outbox: Mutex::default(),
            _slot: slot,
        }
    }

    /// Queues a frame for the writer; `answers_request` is false for
    /// notifications and the ConnectResponse, which flow control must not
    /// count as answers.
    pub fn send(&self, frame: Bytes, answers_request: bool) {
        self.change(|outbox| outbox.frames.push_back((frame, answers_request)));
    }

    /// Has the writer flush what is queued and close the connection.
    pub fn close(&self) {
        self.change(|outbox| outbox.close = true);
    }

    /// Ends the connection at once, dropping what is queued for it.
    pub fn end(&self) {
        self.change(|outbox| outbox.ended = true);
    }

    /// Changes the outbox and wakes the connection's task, outside the lock.
    fn change(&self, change: impl FnOnce(&mut Outbox)) {
        let task = {
            let mut outbox = self.outbox();
            change(&mut outbox);
            outbox.task.take()
        };
        if let Some(task) = task {
            task.wake();
        }
    }

    fn outbox(&self) -> MutexGuard<'_, Outbox> {
        self.outbox.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Ready when the node loop has ended the connection.
    pub(super) fn poll_ended(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut outbox = self.outbox();
        if outbox.ended {
            return Poll::Ready(());
        }
        outbox.wait(cx);
        Poll::Pending
    }

    /// The queued frames, once there are any, leaving the outbox without a
    /// buffer until the next frame; and whether to close after them.
    pub(super) fn poll_frames(
        &self,
        cx: &mut Context<'_>,
    ) -> Poll<(VecDeque<(Bytes, bool)>, bool)> {
        let mut outbox = self.outbox();
        if !outbox.frames.is_empty() || outbox.close {
            return Poll::Ready((std::mem::take(&mut outbox.frames), outbox.close));
        }
        outbox.wait(cx);
        Poll::Pending
    }

    /// The node loop queued a frame of `n` bytes for the writer; returns the
    /// bytes now queued.
    pub fn queued(&self, n: usize) -> usize {
        self.queued_bytes.fetch_add(n, Ordering::AcqRel) + n
    }

    /// The reader forwarded a request.
    pub(super) fn requested(&self) {
        self.pending_requests.fetch_add(1, Ordering::AcqRel);
    }

    /// The writer wrote frames of `n` bytes, `answers` of which answer
    /// requests (notifications and the ConnectResponse do not).
    pub(super) fn written(&self, n: usize, answers: usize) {
        self.queued_bytes.fetch_sub(n, Ordering::AcqRel);
        if answers > 0 {
            // Saturate: a reply to a request taken in before the count started must not wrap.
            let _ = self
                .pending_requests
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |p| {
                    Some(p.saturating_sub(answers))
                });
        }
    }

    /// Ready once the client has read enough of its replies. Only the
    /// connection's own writer makes room, and it runs before the reader
    /// in the same task, so the writer's wake-ups are the ones that matter.
    pub(super) fn poll_room(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.has_room() {
            return Poll::Ready(());
        }
        self.outbox().wait(cx);
        Poll::Pending
    }

    fn has_room(&self) -> bool {
        self.queued_bytes.load(Ordering::Acquire) < MAX_QUEUED_REPLY_BYTES
            && self.pending_requests.load(Ordering::Acquire) < MAX_PENDING_REQUESTS
    }
}

impl Outbox {
    /// Wakes `cx`'s task at the next change.
    fn wait(&mut self, cx: &mut Context<'_>) {
        match &self.task {
            Some(task) if task.will_wake(cx.waker()) => {}
            _ => self.task = Some(cx.waker().clone()),
        }
    }
}
