//! Client SASL requests (opcode 102) and auth enforcement, as ZooKeeper's
//! `processSasl` and `AuthenticationHelper` do them: each SASL token is
//! answered at once with the mechanism's next token; a failed exchange is
//! answered with AUTHFAILED (SESSIONCLOSEDREQUIRESASLAUTH where SASL is
//! required) and the connection closed. With `enforce.auth.*`, any other
//! request from a connection without one of the required schemes closes
//! it the same way.

use super::Node;
use crate::core::connection::Queued;
use crate::core::reply;
use crate::core::sasl::digest_md5::{DigestMd5, Step, CLIENT_SERVICE};
use crate::core::types::ConnId;
use zkd_protocol::records::{ReplyHeader, SetSaslResponse};
use zkd_protocol::{ErrorCode, Record};

/// Jute's length of a null buffer.
const NULL_BUFFER: i32 = -1;

impl Node {
    /// Answers one SASL token from `conn`.
    pub(in crate::core) fn sasl_step(&mut self, conn: ConnId, xid: i32, token: &[u8]) {
        let Some(sasl) = self.config.sasl.clone() else {
            // No JAAS Server section: nothing to authenticate against.
            return self.sasl_failed(conn, xid, "SASL is not configured (no JAAS Server section)");
        };
        let Some(c) = self.clients.conns.get_mut(&conn) else {
            return;
        };
        let exchange = c
            .sasl
            .get_or_insert_with(|| Box::new(DigestMd5::new(CLIENT_SERVICE, sasl.nonces.nonce())));
        let token = match exchange.step(token, &sasl.users) {
            Ok(Step::Challenge(token)) => token,
            Ok(Step::Authenticated { token, user }) => {
                tracing::info!(conn = conn.0, user = %user, "SASL authenticated");
                c.auth.authenticated_sasl(user, sasl.super_user.as_deref());
                token
            }
            Err(why) => return self.sasl_failed(conn, xid, &why),
        };
        let response = SetSaslResponse {
            token: token.into(),
        };
        self.enqueue(conn, Queued::Ready(reply::with_record(xid, 0, &response)));
    }

    fn sasl_failed(&mut self, conn: ConnId, xid: i32, why: &str) {
        // Not in auth_failed_count: ZooKeeper counts failed auth packets only.
        tracing::warn!(conn = conn.0, "client failed to SASL authenticate: {why}");
        let code = match self.sasl_required() {
            true => ErrorCode::SessionClosedRequireSaslAuth,
            false => ErrorCode::AuthFailed,
        };
        // ZooKeeper answers `SetSASLResponse(null)` beside the error, and the
        // Java client reads that body whatever the error: without it, it
        // sees the stream end and says ConnectionLoss, not AuthFailed.
        let reply = zkd_protocol::jute::encode_exact(|out| {
            let header = ReplyHeader {
                xid,
                zxid: 0,
                err: code.code(),
            };
            header.encode(out);
            out.extend_from_slice(&NULL_BUFFER.to_be_bytes());
        });
        self.send_then_close(conn, reply);
    }

    /// Whether SASL is among the schemes a session must hold.
    fn sasl_required(&self) -> bool {
        let schemes = self.config.enforced_auth.as_deref().unwrap_or_default();
        schemes.iter().any(|s| s == "sasl")
    }

    /// Whether `conn` may be served: enforcement is off, or it holds an id
    /// of a required scheme.
    pub(in crate::core) fn auth_enforced(&self, conn: ConnId) -> bool {
        let Some(schemes) = &self.config.enforced_auth else {
            return true;
        };
        let Some(c) = self.clients.conns.get(&conn) else {
            return true;
        };
        let held = c.auth.ids().iter().any(|id| schemes.contains(&id.scheme));
        if !held {
            tracing::warn!(
                conn = conn.0,
                "a request before authenticating with any of {schemes:?}: closing"
            );
        }
        held
    }
}
