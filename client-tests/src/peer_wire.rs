//! A hostile peer's side of zkd's peer wire, for tests that attack a
//! member's election and quorum ports: frames built from the protocol
//! crate's prost types, and connections from any loopback address (a
//! stranger on another host, or an impostor of a member).

use prost::Message;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use zkd_protocol::peer::election::{self as wire_election, ElectionHello, ElectionMessage};
use zkd_protocol::peer::zab::{self as wire, QuorumPacket, ZAB_PROTOCOL_VERSION};
use zkd_protocol::records::{Acl, CreateRequest, Id};
use zkd_protocol::{OpCode, Record};

/// One peer frame: a 4-byte big-endian length, then the prost body.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(body);
    out
}

/// A quorum-port frame carrying `packet`.
pub fn quorum_frame(packet: impl Into<QuorumPacket>) -> Vec<u8> {
    frame(&packet.into().encode_to_vec())
}

/// FOLLOWERINFO from `sid`, which accepted `accepted_epoch`.
pub fn follower_info(sid: u64, accepted_epoch: u64) -> Vec<u8> {
    quorum_frame(wire::FollowerInfo {
        accepted_epoch,
        sid,
        protocol_version: ZAB_PROTOCOL_VERSION,
        config_version: 0,
    })
}

/// The election port's hello from `sid`, giving `election_addr` to call back.
pub fn hello(sid: u64, election_addr: &str) -> Vec<u8> {
    frame(
        &ElectionMessage::from(ElectionHello {
            protocol_version: wire_election::PROTOCOL_VERSION_V1,
            sid,
            election_addr: election_addr.to_string(),
        })
        .encode_to_vec(),
    )
}

/// A REQUEST as a follower forwards it, with `auth` as the session's ids.
pub fn request(
    session_id: i64,
    cxid: i32,
    op: OpCode,
    body: Vec<u8>,
    auth: &[(&str, &str)],
) -> Vec<u8> {
    quorum_frame(wire::Request {
        session_id,
        cxid,
        op_type: op as i32,
        body: body.into(),
        auth: (auth.iter())
            .map(|(scheme, id)| wire::Id {
                scheme: scheme.to_string(),
                id: id.to_string(),
            })
            .collect(),
    })
}

/// createSession (for `session_id`), then a create of `path` as `super`.
pub fn requests_as_super(session_id: i64, path: &str) -> Vec<u8> {
    let mut out = create_session(session_id);
    out.extend(create_as_super(session_id, path));
    out
}

/// A forwarded createSession for `session_id` (10 s).
pub fn create_session(session_id: i64) -> Vec<u8> {
    let timeout = 10_000i32.to_be_bytes().to_vec();
    request(session_id, 0, OpCode::CreateSession, timeout, &[])
}

/// A forwarded create of `path` (open to anyone) in `session_id`, as `super`.
pub fn create_as_super(session_id: i64, path: &str) -> Vec<u8> {
    let create = CreateRequest {
        path: path.to_string(),
        data: Some(bytes::Bytes::from_static(b"owned")),
        acl: vec![Acl {
            perms: 31,
            id: Id {
                scheme: "world".into(),
                id: "anyone".into(),
            },
        }],
        flags: 0,
    };
    let body = create.to_bytes().to_vec();
    request(session_id, 1, OpCode::Create, body, &[("super", "")])
}

/// A LOOKING notification from `sid` voting for itself with `zxid`, carrying
/// `config` (empty: none).
pub fn looking(sid: u64, zxid: i64, peer_epoch: u64, config: &str) -> Vec<u8> {
    let n = wire_election::Notification {
        state: wire_election::ServerState::Looking as i32,
        leader: sid,
        zxid,
        election_epoch: 1,
        peer_epoch,
        sid,
        config_version: 0,
        config: bytes::Bytes::copy_from_slice(config.as_bytes()),
    };
    frame(&ElectionMessage::from(n).encode_to_vec())
}

/// A connection to `to` from the loopback address `from` (127.0.0.1 when
/// None), within 5 s.
pub async fn dial_from(from: Option<IpAddr>, to: &str) -> std::io::Result<TcpStream> {
    let to: SocketAddr = to.parse().expect("a numeric address");
    let socket = TcpSocket::new_v4()?;
    if let Some(ip) = from {
        socket.bind(SocketAddr::new(ip, 0))?;
    }
    tokio::time::timeout(Duration::from_secs(5), socket.connect(to))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out"))?
}

/// What a member did with a connection within `within`: the quorum
/// packets it sent, and whether it closed the connection.
#[derive(Debug, Default)]
pub struct Answer {
    pub packets: Vec<QuorumPacket>,
    pub closed: bool,
}

/// Sends `bytes` on a new connection from `from` to `to` and reads the
/// quorum packets coming back for up to `within`, or until it closes.
pub async fn send_and_read(
    from: Option<IpAddr>,
    to: &str,
    bytes: &[u8],
    within: Duration,
) -> std::io::Result<Answer> {
    let mut stream = dial_from(from, to).await?;
    stream.write_all(bytes).await?;
    let mut answer = Answer::default();
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let mut len = [0u8; 4];
        let read = tokio::time::timeout_at(deadline, stream.read_exact(&mut len)).await;
        match read {
            Err(_) => return Ok(answer),
            Ok(Err(_)) => {
                answer.closed = true;
                return Ok(answer);
            }
            Ok(Ok(_)) => {}
        }
        let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
        match tokio::time::timeout_at(deadline, stream.read_exact(&mut body)).await {
            Err(_) => return Ok(answer),
            Ok(Err(_)) => {
                answer.closed = true;
                return Ok(answer);
            }
            Ok(Ok(_)) => {}
        }
        if let Ok(packet) = QuorumPacket::decode(&body[..]) {
            answer.packets.push(packet);
        }
    }
}
