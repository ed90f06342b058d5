//! The fault API's membership verbs change the membership as an operator
//! would: a client session on a member, `addauth digest super:…`, then
//! reconfig (opcode 16), so the change goes through the same path, checks
//! and answers as zkCli's `reconfig`.

use bytes::{Bytes, BytesMut};
use futures_util::{SinkExt, StreamExt};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_util::codec::Framed;
use zkd_protocol::client_codec::FrameCodec;
use zkd_protocol::records::{
    AuthPacket, ConnectRequest, ConnectResponse, GetDataResponse, ReconfigRequest, ReplyHeader,
    RequestHeader,
};
use zkd_protocol::{ErrorCode, OpCode, Record};

/// Bound on the whole exchange: a reconfig waits for a quorum of the old and
/// of the new configuration.
const TIMEOUT: Duration = Duration::from_secs(10);
/// The session asked for; it is closed at the end in any case.
const SESSION_TIMEOUT_MS: i32 = 10_000;
/// The xid ZooKeeper's clients use for auth packets.
const AUTH_XID: i32 = -4;
const MAX_FRAME: usize = 1 << 20;

/// One incremental change: server lines joining, ids leaving.
#[derive(Clone, Debug, Default)]
pub(super) struct Change {
    pub joining: Vec<String>,
    pub leaving: Vec<usize>,
}

/// Why a reconfig was not done.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Refusal {
    /// The member answered with this error (NEWCONFIGNOQUORUM, BADARGUMENTS...).
    Answered(ErrorCode),
    /// No answer: connection refused or lost, timeout, garbled reply.
    NoAnswer(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Answered(code) => write!(f, "refused with {code:?} ({})", code.code()),
            Refusal::NoAnswer(why) => write!(f, "no answer: {why}"),
        }
    }
}

/// Asks the member at `address` for `change` as the super user with
/// `password`; returns the new configuration's text.
pub(super) async fn reconfig(
    address: &str,
    password: &str,
    change: &Change,
) -> Result<String, Refusal> {
    tokio::time::timeout(TIMEOUT, exchange(address, password, change))
        .await
        .map_err(|_| Refusal::NoAnswer(format!("none within {TIMEOUT:?}")))?
}

async fn exchange(address: &str, password: &str, change: &Change) -> Result<String, Refusal> {
    let io = |e: std::io::Error| Refusal::NoAnswer(format!("{address}: {e}"));
    let stream = TcpStream::connect(address).await.map_err(io)?;
    let mut conn = Framed::new(stream, FrameCodec::new(MAX_FRAME));
    let connect = ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 0,
        time_out: SESSION_TIMEOUT_MS,
        session_id: 0,
        passwd: Bytes::from_static(&[0; 16]),
        read_only: Some(false),
    };
    conn.send(connect.to_bytes()).await.map_err(io)?;
    let session: ConnectResponse = decode(next_frame(&mut conn).await?)?;
    if session.session_id == 0 {
        return Err(Refusal::NoAnswer(format!("{address} gave no session")));
    }
    let auth = AuthPacket {
        r#type: 0,
        scheme: "digest".into(),
        auth: Bytes::from(format!("super:{password}")),
    };
    let answer = call(&mut conn, AUTH_XID, OpCode::Auth, &auth.to_bytes()).await;
    let answer = match answer {
        Ok(_) => {
            let request = ReconfigRequest {
                joining_servers: change.joining.join(","),
                leaving_servers: change
                    .leaving
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
                new_members: String::new(),
                cur_config_id: -1,
            };
            call(&mut conn, 1, OpCode::Reconfig, &request.to_bytes())
                .await
                .and_then(decode::<GetDataResponse>)
                .map(|reply| {
                    String::from_utf8_lossy(reply.data.as_deref().unwrap_or_default()).into_owned()
                })
        }
        Err(e) => Err(e),
    };
    // The session goes now rather than at its timeout.
    let _ = call(&mut conn, 2, OpCode::CloseSession, &[]).await;
    answer
}

/// Sends one request and returns the body of its reply, skipping pings and
/// watch events.
async fn call(
    conn: &mut Framed<TcpStream, FrameCodec>,
    xid: i32,
    op: OpCode,
    body: &[u8],
) -> Result<Bytes, Refusal> {
    let mut frame = BytesMut::new();
    RequestHeader {
        xid,
        r#type: op as i32,
    }
    .encode(&mut frame);
    frame.extend_from_slice(body);
    conn.send(frame.freeze())
        .await
        .map_err(|e| Refusal::NoAnswer(e.to_string()))?;
    loop {
        let mut reply = next_frame(conn).await?;
        let header: ReplyHeader = decode_from(&mut reply)?;
        if header.xid != xid {
            continue;
        }
        return match ErrorCode::from_i32(header.err) {
            Some(ErrorCode::Ok) => Ok(reply),
            Some(code) => Err(Refusal::Answered(code)),
            None => Err(Refusal::NoAnswer(format!("error code {}", header.err))),
        };
    }
}

async fn next_frame(conn: &mut Framed<TcpStream, FrameCodec>) -> Result<Bytes, Refusal> {
    match conn.next().await {
        Some(Ok(frame)) => Ok(frame),
        Some(Err(e)) => Err(Refusal::NoAnswer(e.to_string())),
        None => Err(Refusal::NoAnswer("the member closed the connection".into())),
    }
}

fn decode<R: Record>(mut frame: Bytes) -> Result<R, Refusal> {
    decode_from(&mut frame)
}

fn decode_from<R: Record>(frame: &mut Bytes) -> Result<R, Refusal> {
    R::decode(frame).map_err(|e| Refusal::NoAnswer(format!("a garbled reply: {e}")))
}
