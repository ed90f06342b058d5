//! An ACL list carried by create txns and shared with the tree's nodes.
//!
//! Nearly every create in a tree carries the same ACL list. As an `Arc` the
//! list is copied by reference when a txn is, and a tree node can keep the
//! txn's own allocation. Decoding reuses the list the last decode on this
//! thread produced when the encoded bytes are the same, so a follower
//! checking a stream of proposals allocates no ACL strings for them.

use super::Acl;
use crate::jute::{DecodeError, Record};
use bytes::{Buf, BufMut, Bytes};
use std::cell::RefCell;
use std::sync::Arc;

/// An ACL list shared between the txns and tree nodes that hold it.
pub type SharedAcl = Arc<Vec<Acl>>;

thread_local! {
    /// The encoding of the list decoded last on this thread, and that list.
    static LAST_DECODED: RefCell<Option<(Vec<u8>, SharedAcl)>> = const { RefCell::new(None) };
}

impl Record for SharedAcl {
    fn encode(&self, buf: &mut impl BufMut) {
        Vec::<Acl>::encode(self, buf);
    }

    fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        let Some(len) = encoded_len(buf) else {
            // Malformed or null: the plain decode says how, or reads it as empty.
            return Ok(Arc::new(Vec::<Acl>::decode(buf)?));
        };
        LAST_DECODED.with(|last| {
            let mut last = last.borrow_mut();
            if let Some((bytes, acl)) = last.as_ref() {
                if bytes.as_slice() == &buf[..len] {
                    let acl = acl.clone();
                    buf.advance(len);
                    return Ok(acl);
                }
            }
            // Copied, not sliced: a slice would pin the whole frame it came in.
            let bytes = buf[..len].to_vec();
            let acl = Arc::new(Vec::<Acl>::decode(buf)?);
            *last = Some((bytes, acl.clone()));
            Ok(acl)
        })
    }
}

/// The length of the well-formed, non-null `vector<ACL>` at the front of
/// `buf`, found without decoding it; `None` for anything else.
fn encoded_len(buf: &[u8]) -> Option<usize> {
    let mut at = 0;
    let int = |at: &mut usize| -> Option<i32> {
        let bytes = buf.get(*at..*at + 4)?;
        *at += 4;
        Some(i32::from_be_bytes(bytes.try_into().ok()?))
    };
    let count = usize::try_from(int(&mut at)?).ok()?;
    for _ in 0..count {
        int(&mut at)?; // perms
        for _ in 0..2 {
            // scheme, then id
            let len = usize::try_from(int(&mut at)?).ok()?;
            at = at.checked_add(len).filter(|end| *end <= buf.len())?;
        }
    }
    Some(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Id;

    fn digest(user: &str) -> Acl {
        Acl {
            perms: 31,
            id: Id {
                scheme: "digest".into(),
                id: format!("{user}:hash"),
            },
        }
    }

    #[test]
    fn equal_encodings_decode_to_one_allocation_and_others_to_their_own() {
        let world: SharedAcl = Arc::new(vec![Acl::world(31)]);
        let two: SharedAcl = Arc::new(vec![digest("a"), Acl::world(1)]);
        let mut stream = Vec::new();
        for acl in [&world, &world, &two, &world] {
            acl.encode(&mut stream);
        }
        stream.extend_from_slice(b"tail");
        let mut buf = Bytes::from(stream);
        let decoded: Vec<SharedAcl> = (0..4)
            .map(|_| SharedAcl::decode(&mut buf).unwrap())
            .collect();
        assert_eq!(&buf[..], b"tail", "each decode takes exactly its own bytes");
        assert_eq!(decoded[0], world);
        assert!(Arc::ptr_eq(&decoded[0], &decoded[1]));
        assert_eq!(decoded[2], two);
        assert_eq!(decoded[3], world);
        assert!(!Arc::ptr_eq(&decoded[2], &decoded[3]));
    }

    #[test]
    fn malformed_and_null_lists_decode_as_a_plain_vector_does() {
        for raw in [
            &[0xff, 0xff, 0xff, 0xff][..],          // null: empty
            &[0, 0, 0, 1, 0, 0, 0, 31][..],         // ends inside the entry
            &[0, 0, 0, 1, 0, 0, 0, 31, 0, 0, 0, 9], // a string longer than the input
            &[0x80, 0, 0, 0][..],                   // a negative count
        ] {
            let plain = Vec::<Acl>::decode(&mut Bytes::copy_from_slice(raw));
            let shared = SharedAcl::decode(&mut Bytes::copy_from_slice(raw));
            assert_eq!(shared.map(|a| a.to_vec()), plain, "{raw:?}");
        }
    }

    #[test]
    fn a_list_decoded_again_after_another_is_still_equal() {
        let world: SharedAcl = Arc::new(vec![Acl::world(31)]);
        let other: SharedAcl = Arc::new(vec![digest("b")]);
        for acl in [&world, &other, &world] {
            let decoded = SharedAcl::decode(&mut acl.to_bytes()).unwrap();
            assert_eq!(&decoded, acl);
        }
    }
}
