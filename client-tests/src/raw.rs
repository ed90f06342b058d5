//! A hand-driven client speaking raw jute frames, for what stock clients
//! cannot be made to send: malformed frames, odd xids, handshake variants.

use bytes::Bytes;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use zkd_protocol::records::{ConnectRequest, ConnectResponse, ReplyHeader, RequestHeader};
use zkd_protocol::request::ClientRequest;
use zkd_protocol::Record;

/// A blocking raw connection with a read timeout.
pub struct RawClient {
    stream: TcpStream,
}

/// What reading a frame found.
#[derive(Debug, PartialEq, Eq)]
pub enum Read1 {
    /// A whole frame.
    Frame(Bytes),
    /// The server closed the connection.
    Closed,
    /// Nothing arrived within the timeout.
    Silent,
}

impl RawClient {
    /// Connects to `127.0.0.1:port`.
    pub fn connect(port: u16) -> RawClient {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        stream.set_nodelay(true).expect("nodelay");
        RawClient { stream }
    }

    /// Writes raw bytes.
    pub fn write_raw(&mut self, bytes: &[u8]) {
        // The server may already have closed; tests then observe that on read.
        let _ = self.stream.write_all(bytes);
    }

    /// Writes one length-prefixed frame.
    pub fn send_frame(&mut self, payload: &[u8]) {
        let mut out = (payload.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(payload);
        self.write_raw(&out);
    }

    /// Reads one frame.
    pub fn read(&mut self) -> Read1 {
        let mut len = [0u8; 4];
        match self.stream.read_exact(&mut len) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::TimedOut => {
                return Read1::Silent
            }
            Err(_) => return Read1::Closed,
        }
        let mut payload = vec![0u8; i32::from_be_bytes(len).max(0) as usize];
        match self.stream.read_exact(&mut payload) {
            Ok(()) => Read1::Frame(Bytes::from(payload)),
            Err(_) => Read1::Closed,
        }
    }

    /// Reads one frame, failing the test if there is none.
    pub fn recv(&mut self) -> Bytes {
        match self.read() {
            Read1::Frame(f) => f,
            other => panic!("expected a frame, got {other:?}"),
        }
    }

    /// Whether the server closed the connection (EOF before the timeout).
    pub fn closed_by_server(&mut self) -> bool {
        loop {
            match self.read() {
                Read1::Closed => return true,
                Read1::Silent => return false,
                Read1::Frame(_) => continue,
            }
        }
    }

    /// Sends a ConnectRequest and reads the response.
    pub fn handshake(&mut self, request: &ConnectRequest) -> Option<ConnectResponse> {
        self.send_frame(&request.to_bytes());
        match self.read() {
            Read1::Frame(mut f) => ConnectResponse::decode(&mut f).ok(),
            _ => None,
        }
    }

    /// A fresh connection with a new session (readOnly byte sent).
    pub fn new_session(port: u16, timeout_ms: i32) -> (RawClient, ConnectResponse) {
        let mut c = RawClient::connect(port);
        let req = ConnectRequest {
            time_out: timeout_ms,
            passwd: Bytes::from_static(&[0; 16]),
            read_only: Some(false),
            ..ConnectRequest::default()
        };
        let resp = c.handshake(&req).expect("handshake");
        (c, resp)
    }

    /// Sends a request with the given xid.
    pub fn send_request(&mut self, xid: i32, request: &ClientRequest) {
        let mut out = Vec::new();
        RequestHeader {
            xid,
            r#type: request.op_code() as i32,
        }
        .encode(&mut out);
        request.encode_body(&mut out);
        self.send_frame(&out);
    }

    /// Sends a request and returns the next frame that is not a notification.
    pub fn call(&mut self, xid: i32, request: &ClientRequest) -> (ReplyHeader, Bytes) {
        self.send_request(xid, request);
        loop {
            let mut frame = self.recv();
            let header = ReplyHeader::decode(&mut frame).expect("reply header");
            if header.xid != -1 {
                return (header, frame);
            }
        }
    }
}
