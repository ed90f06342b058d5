//! Golden byte vectors: frames captured between stock clients (Java 3.8.0,
//! kazoo 2.11.0, a raw Python client) and Apache ZooKeeper 3.8.0, decoded with
//! our records and re-encoded byte for byte. See `golden/README.md`.

use bytes::Bytes;
use zkd_protocol::records::*;
use zkd_protocol::request::ClientRequest;
use zkd_protocol::response::ClientResponse;
use zkd_protocol::Record;

struct Frame {
    name: String,
    kind: String,
    bytes: Bytes,
}

fn frames() -> Vec<Frame> {
    let text = include_str!("golden/frames.tsv");
    text.lines()
        .skip(1)
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let cols: Vec<&str> = line.split('\t').collect();
            assert_eq!(cols.len(), 4, "malformed line {line}");
            let hex = cols[3];
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect::<Vec<u8>>();
            Frame {
                name: cols[0].into(),
                kind: cols[2].into(),
                bytes: Bytes::from(bytes),
            }
        })
        .collect()
}

/// Decodes a `T` from the front of `buf` and appends its re-encoding to `out`.
fn round_trip<T: Record + std::fmt::Debug>(buf: &mut Bytes, out: &mut Vec<u8>) -> T {
    let value = T::decode(buf).unwrap_or_else(|e| panic!("{}: {e}", std::any::type_name::<T>()));
    value.encode(out);
    value
}

fn re_encode(frame: &Frame) -> Vec<u8> {
    let mut buf = frame.bytes.clone();
    let mut out = Vec::new();
    match frame.kind.as_str() {
        "connect_request" => drop(round_trip::<ConnectRequest>(&mut buf, &mut out)),
        "connect_response" => drop(round_trip::<ConnectResponse>(&mut buf, &mut out)),
        "request" => {
            let (header, request) = ClientRequest::decode_frame(frame.bytes.clone())
                .unwrap_or_else(|e| panic!("{}: {e:?}", frame.name));
            header.encode(&mut out);
            request.encode_body(&mut out);
            buf.clear();
        }
        "notification" => {
            let header: ReplyHeader = round_trip(&mut buf, &mut out);
            assert_eq!(header.xid, -1);
            drop(round_trip::<WatcherEvent>(&mut buf, &mut out));
        }
        kind => {
            let op: i32 = kind
                .strip_prefix("reply:")
                .expect("known kind")
                .parse()
                .unwrap();
            let header: ReplyHeader = round_trip(&mut buf, &mut out);
            if header.err == 0 {
                ClientResponse::decode(op, &mut buf)
                    .unwrap_or_else(|e| panic!("{}: {e}", frame.name))
                    .encode(&mut out);
            }
        }
    }
    assert!(
        buf.is_empty(),
        "{}: {} bytes left after decoding",
        frame.name,
        buf.len()
    );
    out
}

#[test]
fn every_captured_frame_decodes_and_re_encodes_byte_for_byte() {
    let frames = frames();
    assert!(frames.len() > 100, "golden file looks truncated");
    for frame in &frames {
        assert_eq!(
            re_encode(frame),
            frame.bytes.as_ref(),
            "frame {} did not round-trip",
            frame.name
        );
    }
}

#[test]
fn captured_handshakes_have_zookeepers_sizes() {
    for frame in frames() {
        match (frame.kind.as_str(), frame.name.contains("no_readonly")) {
            ("connect_request", false) => assert_eq!(frame.bytes.len(), 45, "{}", frame.name),
            ("connect_request", true) => assert_eq!(frame.bytes.len(), 44, "{}", frame.name),
            ("connect_response", false) => assert_eq!(frame.bytes.len(), 37, "{}", frame.name),
            ("connect_response", true) => assert_eq!(frame.bytes.len(), 36, "{}", frame.name),
            _ => {}
        }
    }
}
