//! The runtime's side of admission (`core/admission` decides): a member's
//! host resolved again when a connection from elsewhere claims its sid,
//! handshake slots held for as long as a handshake lasts, and dials from
//! this member's own `server.N` host, so its peers can tell it by address.

use super::{Shared, State, RESOLVE_TIMEOUT};
use crate::core::admission::{HandshakeSlot, Port, Refusal, Verdict};
use crate::core::election::ServerId;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpStream;

impl Shared {
    /// What becomes of a connection from `remote` on `port` whose first
    /// frame claims `sid` (see [`Admission::admit`]). A member's sid from
    /// another address has its host resolved again first: the member may
    /// have moved, or its name now points elsewhere (a rescheduled pod).
    pub(super) async fn admit(
        &self,
        port: Port,
        sid: ServerId,
        remote: SocketAddr,
        authenticated: bool,
    ) -> Verdict {
        let admit = |state: &State| state.admission.admit(port, sid, remote.ip(), authenticated);
        let verdict = admit(&self.lock());
        if !matches!(verdict, Verdict::Refused(Refusal::WrongAddress { .. })) {
            return verdict;
        }
        let Some(host) = self.lock().servers.get(&sid.0).map(|s| s.host.clone()) else {
            return verdict;
        };
        let lookup = tokio::net::lookup_host((host.as_str(), 0));
        let resolved = tokio::time::timeout(RESOLVE_TIMEOUT, lookup).await;
        match resolved {
            Ok(Ok(found)) => {
                let addrs: Vec<_> = found.map(|a| a.ip()).collect();
                tracing::debug!(peer = %sid, %host, ?addrs, "a member's host resolved again");
                let mut state = self.lock();
                state.admission.set_member(sid, addrs);
                admit(&state)
            }
            Ok(Err(e)) => {
                tracing::warn!(peer = %sid, %host, "cannot resolve a member's host: {e}");
                verdict
            }
            Err(_) => verdict,
        }
    }

    /// A TCP connection to `host:port`, from this member's own `server.N`
    /// host when that is an address of this machine: its peers admit a
    /// member's sid only from its host, and the kernel would otherwise
    /// pick the source (on loopback, 127.0.0.1 for any 127.x peer).
    pub(super) async fn dial_tcp(&self, host: &str, port: u16) -> io::Result<TcpStream> {
        let own = self.spec(self.me)?.host;
        let source = own
            .parse::<std::net::IpAddr>()
            .ok()
            .filter(|ip| !ip.is_unspecified());
        let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{host} has no address"));
        for addr in tokio::net::lookup_host((host, port)).await? {
            let socket = match addr {
                SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
                SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
            };
            if let Some(ip) = source.filter(|ip| ip.is_ipv4() == addr.is_ipv4()) {
                // An address this machine lacks (a NAT's, say): the kernel picks.
                if let Err(e) = socket.bind(SocketAddr::new(ip, 0)) {
                    tracing::debug!("dialing {addr} from {ip}: {e}; from any address");
                }
            }
            match socket.connect(addr).await {
                Ok(stream) => return Ok(stream),
                Err(e) => last = e,
            }
        }
        Err(last)
    }
}

/// A handshake's slot, given back when the handshake ends however it ends.
pub(super) struct SlotGuard(pub(super) Arc<Shared>, pub(super) Option<HandshakeSlot>);

impl Drop for SlotGuard {
    fn drop(&mut self) {
        if let Some(slot) = self.1.take() {
            self.0.lock().admission.end_handshake(slot);
        }
    }
}

/// The addresses `host` is, if it is written as one (a name is resolved
/// when a connection first claims its member's sid).
pub(super) fn literal_addresses(host: &str) -> Vec<std::net::IpAddr> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.parse().into_iter().collect()
}
