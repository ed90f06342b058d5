//! A leader's SNAP over real loopback links: what waits behind the image
//! follows it as fast as the follower reads, and a follower with more
//! waiting than its link may queue is dropped.

use super::member_driver::{carry_out, MemberIo};
use super::peer::tests::{ensemble, link, next_event, settings, Member};
use super::peer::{PeerEvent, PeerNetwork, PeerSettings};
use crate::core::election::ServerId;
use crate::core::member::{LinkLimits, Outbox, SnapSender};
use crate::core::storage_job::StorageJob;
use crate::core::zab::{FlowMarks, ZabMessage};
use bytes::Bytes;
use std::collections::VecDeque;
use std::time::Duration;
use tokio::time::timeout;
use zkd_protocol::peer::zab::MAX_SNAP_CHUNK;
use zkd_protocol::Zxid;
use zkd_storage::DataTree;

const TEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Proposals of this many bytes wait behind the image.
const PROPOSAL: usize = 64 << 10;

fn proposal(counter: u32) -> ZabMessage {
    ZabMessage::Proposal {
        zxid: Zxid::new(2, counter),
        txn: Bytes::from(vec![counter as u8; PROPOSAL]),
    }
}

/// A SNAP sender and the outbox it sends through, carried out on a real
/// peer network as the member's driver does.
struct Streaming {
    sender: SnapSender,
    out: Outbox,
}

impl Streaming {
    fn new(net: &PeerNetwork) -> Streaming {
        Streaming {
            sender: SnapSender::default(),
            out: Outbox::new(LinkLimits {
                max_queued: net.max_queued_bytes(),
                flow: FlowMarks::RUNTIME,
            }),
        }
    }

    fn start(&mut self, to: ServerId, tree: &DataTree, net: &mut PeerNetwork) {
        self.out.link_up(to);
        self.sender.start(0, to, tree, &mut self.out);
        self.carry_out(net);
    }

    fn send(&mut self, to: ServerId, message: ZabMessage, net: &mut PeerNetwork) {
        self.sender.send(to, message, &mut self.out);
        self.carry_out(net);
    }

    /// A step at `now`, after the driver's look at the links.
    fn step(&mut self, now: u64, tree: &DataTree, net: &mut PeerNetwork) {
        self.out
            .set_levels(now, [ServerId(1)].into_iter(), |p| net.queued_bytes(p));
        self.sender.step(now, tree, &mut self.out);
        self.carry_out(net);
    }

    fn carry_out(&mut self, net: &mut PeerNetwork) {
        let mut commands = VecDeque::new();
        self.out.take(&mut commands);
        let mut jobs: VecDeque<StorageJob> = VecDeque::new();
        carry_out(
            &mut commands,
            MemberIo {
                links: net,
                jobs: &mut jobs,
            },
        )
        .expect("no storage");
        assert!(jobs.is_empty(), "a SNAP sender submits no storage jobs");
    }
}

/// Leader 2 and follower 1, linked, with `settings`.
async fn pair(settings: PeerSettings) -> Vec<Member> {
    let mut m = ensemble(&[1, 2], &[], settings).await;
    let (f, l) = m.split_at_mut(1);
    link(&mut f[0], &mut l[0], 1, 2).await;
    m
}

/// 25 MiB held behind an image never sit in the leader's outbox at once:
/// they go out as the follower reads, after the image, in order.
#[tokio::test]
async fn messages_held_behind_an_image_follow_it_as_the_follower_reads() {
    timeout(TEST_TIMEOUT, async {
        let roomy = PeerSettings {
            stall_timeout: Duration::from_secs(10),
            max_queued_bytes: 256 << 20,
            ..settings()
        };
        let mut m = pair(roomy).await;
        let (f, l) = m.split_at_mut(1);
        let (f, l) = (&mut f[0], &mut l[0]);
        let follower = ServerId(1);
        let tree = DataTree::new();
        let mut sender = Streaming::new(&l.net);
        sender.start(follower, &tree, &mut l.net);
        const COUNT: u32 = 400;
        for counter in 1..=COUNT {
            sender.send(follower, proposal(counter), &mut l.net);
        }
        let (mut image_done, mut next) = (false, 1);
        let mut now = 0;
        while next <= COUNT {
            sender.step(now, &tree, &mut l.net);
            // No await since the step: the link's writer has not run.
            let queued = l.net.queued_bytes(follower).expect("the link is up");
            assert!(
                queued <= 6 * MAX_SNAP_CHUNK,
                "{queued} B queued at once for the follower"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
            now += 1;
            while let Ok(event) = f.events.try_recv() {
                match event {
                    PeerEvent::SnapChunk { piece, .. } => {
                        assert!(next == 1, "an image piece after a held message");
                        image_done |= piece.fuzzy_through.is_some();
                    }
                    PeerEvent::Zab { message, .. } => {
                        assert!(image_done, "a held message before the image's end");
                        assert_eq!(message, proposal(next));
                        next += 1;
                    }
                    other => panic!("unexpected {other:?}"),
                }
            }
        }
        // The turn that released the last message may have used up its
        // budget with it (or found the link full); a later one finds
        // nothing left.
        for _ in 0..3 {
            if let Some(due) = sender.sender.poll_timeout() {
                tokio::time::sleep(Duration::from_millis(1)).await;
                sender.step(due, &tree, &mut l.net);
            }
        }
        assert_eq!(
            sender.sender.poll_timeout(),
            None,
            "nothing is held any more"
        );
        // Sent directly again.
        sender.send(follower, proposal(COUNT + 1), &mut l.net);
        assert_eq!(next_zab_message(f).await, proposal(COUNT + 1));
    })
    .await
    .expect("test timed out");
}

/// More held behind an image than the link may queue: the follower has
/// fallen too far behind, and its link closes.
#[tokio::test]
async fn a_follower_with_more_held_than_its_link_may_queue_is_dropped() {
    timeout(TEST_TIMEOUT, async {
        let tight = PeerSettings {
            max_queued_bytes: 8 << 20,
            ..settings()
        };
        let mut m = pair(tight).await;
        let (f, l) = m.split_at_mut(1);
        let (f, l) = (&mut f[0], &mut l[0]);
        let follower = ServerId(1);
        let tree = DataTree::new();
        let mut sender = Streaming::new(&l.net);
        sender.start(follower, &tree, &mut l.net);
        let mut counter = 0;
        while l.net.queued_bytes(follower).is_some() {
            counter += 1;
            assert!(counter <= 200, "12 MiB held and the link is still up");
            sender.send(follower, proposal(counter), &mut l.net);
        }
        assert!(
            counter * PROPOSAL as u32 >= 8 << 20,
            "closed after {counter}"
        );
        assert_eq!(
            sender.sender.poll_timeout(),
            Some(0),
            "stepped once more, then none"
        );
        sender.step(0, &tree, &mut l.net);
        assert_eq!(sender.sender.poll_timeout(), None);
        loop {
            match next_event(f).await {
                PeerEvent::ZabClosed {
                    peer: ServerId(2), ..
                } => break,
                PeerEvent::SnapChunk { .. } => continue,
                other => panic!("unexpected {other:?}"),
            }
        }
    })
    .await
    .expect("test timed out");
}

async fn next_zab_message(member: &mut Member) -> ZabMessage {
    match next_event(member).await {
        PeerEvent::Zab { message, .. } => message,
        other => panic!("expected a Zab message, got {other:?}"),
    }
}
