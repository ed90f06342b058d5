//! Quorum SASL (`quorum.auth.enableSasl`): before a link's first protocol
//! frame, the member that dials proves who it is with DIGEST-MD5 (its JAAS
//! `QuorumLearner` user) to the member it reaches (its `QuorumServer`
//! users), as ZooKeeper's QuorumAuthLearner and QuorumAuthServer do on
//! both the election and the quorum port.
//!
//! ```text
//!   dialer:   AUTH in-progress ""          acceptor: AUTH in-progress challenge
//!   dialer:   AUTH in-progress response    acceptor: AUTH success rspauth
//!   dialer:   hello / FOLLOWERINFO ...     (or AUTH error, and the link closes)
//! ```
//!
//! An AUTH packet is ZooKeeper's QuorumAuthPacket: its magic number, a
//! status and a token. The acceptor tells it from a protocol frame by its
//! first four bytes (read as a frame's length, the magic's high half is
//! 1.5 GiB, far past any frame's), so members with and without SASL can be mixed during a
//! rolling switch: a member without SASL answers AUTH with an error, and
//! one that does not require SASL takes links that skip it.
//! `quorum.auth.learnerRequireSasl` makes the dialer close a link its peer
//! did not authenticate; `quorum.auth.serverRequireSasl` makes the acceptor
//! close links that skip or fail it.

use super::stream::{PeerRead, PeerWrite};
use super::Shared;
use crate::core::sasl::digest_md5::{self, DigestMd5, Step, QUORUM_SERVICE};
use bytes::BytesMut;
use std::io;
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// ZooKeeper's `QuorumAuth.QUORUM_AUTH_MAGIC_NUMBER` (Java's
/// `-0xa0dbcafecafe1234L`, which wraps).
const MAGIC: i64 = (0xa0db_cafe_cafe_1234_u64 as i64).wrapping_neg();

// An AUTH packet's first four bytes never pass for a frame's length.
const _: () = assert!((MAGIC >> 32) as usize > super::MAX_PEER_FRAME);

/// The longest token taken (DIGEST-MD5's are a few hundred bytes).
const MAX_TOKEN: usize = 64 << 10;

/// Packets one exchange may take before it is abandoned.
const MAX_ROUNDS: usize = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Success,
    Error,
    InProgress,
}

impl Status {
    fn code(self) -> i32 {
        match self {
            Status::Success => 0,
            Status::Error => -1,
            Status::InProgress => 1,
        }
    }
}

fn refused(why: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, why.into())
}

async fn send(write: &mut PeerWrite, status: Status, token: &[u8]) -> io::Result<()> {
    let mut packet = Vec::with_capacity(16 + token.len());
    packet.extend_from_slice(&MAGIC.to_be_bytes());
    packet.extend_from_slice(&status.code().to_be_bytes());
    packet.extend_from_slice(&(token.len() as i32).to_be_bytes());
    packet.extend_from_slice(token);
    write.write_all(&packet).await?;
    write.flush().await
}

/// The rest of a packet whose magic number was read.
async fn receive_body(read: &mut PeerRead) -> io::Result<(Status, Vec<u8>)> {
    let status = match read.read_i32().await? {
        0 => Status::Success,
        -1 => Status::Error,
        1 => Status::InProgress,
        other => return Err(refused(format!("AUTH status {other}"))),
    };
    let len = read.read_i32().await?;
    let len = match usize::try_from(len) {
        Ok(n) if n <= MAX_TOKEN => n,
        // -1: a null token.
        _ if len == -1 => 0,
        _ => return Err(refused(format!("AUTH token of {len} bytes"))),
    };
    let mut token = vec![0; len];
    read.read_exact(&mut token).await?;
    Ok((status, token))
}

async fn receive(read: &mut PeerRead) -> io::Result<(Status, Vec<u8>)> {
    if read.read_i64().await? != MAGIC {
        return Err(refused("a packet that is not AUTH"));
    }
    receive_body(read).await
}

/// The accepting side, before the link's first frame: runs the exchange if
/// the peer starts one, and hands back the bytes read that belong to the
/// protocol, and whether the peer authenticated. An error closes the link.
pub(super) async fn accept(
    shared: &Shared,
    read: &mut PeerRead,
    write: &mut PeerWrite,
    remote: SocketAddr,
) -> io::Result<(BytesMut, bool)> {
    let mut head = [0u8; 4];
    read.read_exact(&mut head).await?;
    let magic = MAGIC.to_be_bytes();
    if head != magic[..4] {
        if shared
            .settings
            .sasl
            .as_ref()
            .is_some_and(|q| q.server_required)
        {
            return Err(refused(
                "no quorum SASL, which quorum.auth.serverRequireSasl requires",
            ));
        }
        return Ok((BytesMut::from(&head[..]), false));
    }
    if read.read_u32().await?.to_be_bytes() != magic[4..] {
        return Err(refused("a broken AUTH packet"));
    }
    let (_, mut token) = receive_body(read).await?;
    let Some(sasl) = &shared.settings.sasl else {
        // No quorum SASL here: say so; a peer that does not require it goes on.
        send(write, Status::Error, b"").await?;
        return Ok((BytesMut::new(), false));
    };
    let mut server = DigestMd5::new(QUORUM_SERVICE, crate::runtime::os_nonce());
    for _ in 0..MAX_ROUNDS {
        match server.step(&token, &sasl.server_users) {
            Ok(Step::Challenge(challenge)) => {
                send(write, Status::InProgress, &challenge).await?;
                token = receive(read).await?.1;
            }
            Ok(Step::Authenticated { token, user }) => {
                tracing::debug!("quorum SASL: {remote} authenticated as {user}");
                send(write, Status::Success, &token).await?;
                return Ok((BytesMut::new(), true));
            }
            Err(why) => {
                let _ = send(write, Status::Error, b"").await;
                return Err(refused(why));
            }
        }
    }
    Err(refused("an AUTH exchange that does not end"))
}

/// The dialing side, before the link's first frame: proves this member's
/// `QuorumLearner` identity if quorum SASL is on. An error closes the link.
pub(super) async fn dial(
    shared: &Shared,
    read: &mut PeerRead,
    write: &mut PeerWrite,
) -> io::Result<()> {
    let Some(sasl) = &shared.settings.sasl else {
        return Ok(());
    };
    let (user, password) = (&sasl.learner.0, sasl.learner.1.expose());
    send(write, Status::InProgress, b"").await?;
    let mut rspauth = None;
    for _ in 0..MAX_ROUNDS {
        match receive(read).await? {
            (Status::Error, _) if sasl.learner_required => {
                return Err(refused("the peer did not authenticate this member"));
            }
            (Status::Error, _) => {
                tracing::warn!("quorum SASL: the peer does not authenticate; going on without (learnerRequireSasl is false)");
                return Ok(());
            }
            (Status::InProgress, challenge) => {
                let cnonce = crate::runtime::os_nonce();
                let (answer, expected) =
                    digest_md5::answer(&challenge, QUORUM_SERVICE, user, password, &cnonce)
                        .map_err(refused)?;
                rspauth = Some(expected);
                send(write, Status::InProgress, &answer).await?;
            }
            (Status::Success, token) => {
                // The peer's rspauth proves it knows the password too.
                return match rspauth.is_some_and(|r| r == token) {
                    true => Ok(()),
                    false => Err(refused("the peer did not prove it knows the password")),
                };
            }
        }
    }
    Err(refused("an AUTH exchange that does not end"))
}
