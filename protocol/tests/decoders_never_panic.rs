//! Property tests: arbitrary bytes fed to every decoder a client can reach
//! never panic or allocate without bound, and generated records round-trip.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use tokio_util::codec::Decoder;
use zkd_protocol::client_codec::FrameCodec;
use zkd_protocol::records::*;
use zkd_protocol::request::ClientRequest;
use zkd_protocol::Record;

/// Bytes that often start with a valid header, so the body decoders get exercised.
fn request_like() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<i32>(),
        prop_oneof![
            Just(1),
            Just(4),
            Just(14),
            Just(22),
            Just(101),
            Just(105),
            Just(100),
            -20i32..120
        ],
        proptest::collection::vec(any::<u8>(), 0..256),
    )
        .prop_map(|(xid, op, body)| {
            let mut out = RequestHeader { xid, r#type: op }.to_bytes().to_vec();
            out.extend(body);
            out
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn request_decoding_never_panics(bytes in prop_oneof![request_like(), proptest::collection::vec(any::<u8>(), 0..512)]) {
        let _ = ClientRequest::decode_frame(Bytes::from(bytes));
    }

    #[test]
    fn frame_splitting_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let mut codec = FrameCodec::new(1024);
        let mut buf = BytesMut::from(&bytes[..]);
        while let Ok(Some(_)) = codec.decode(&mut buf) {}
    }

    #[test]
    fn record_decoding_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let b = Bytes::from(bytes);
        let _ = ConnectRequest::decode(&mut b.clone());
        let _ = ConnectResponse::decode(&mut b.clone());
        let _ = MultiResponse::decode(&mut b.clone());
        let _ = MultiRequest::decode(&mut b.clone(), false);
        let _ = SetWatches2::decode(&mut b.clone());
        let _ = GetAclResponse::decode(&mut b.clone());
    }

    #[test]
    fn create_requests_round_trip(path in ".{0,40}", data in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..64)),
                                  perms in any::<i32>(), scheme in "[a-z]{0,8}", id in ".{0,20}", flags in any::<i32>()) {
        let req = CreateRequest {
            path,
            data: data.map(Bytes::from),
            acl: vec![Acl { perms, id: Id { scheme, id } }],
            flags,
        };
        prop_assert_eq!(CreateRequest::decode(&mut req.to_bytes()).unwrap(), req);
    }
}
