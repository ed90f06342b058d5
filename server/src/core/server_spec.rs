//! One member's `server.N` line as ZooKeeper 3.5+ writes it:
//! `host:quorumPort:electionPort[:participant|:observer][;[clientHost:]clientPort]`.
//! zoo.cfg, the dynamic file, `/zookeeper/config` and a reconfig's
//! `joining` and `newMembers` all use it.

use std::collections::BTreeMap;

/// One `server.N` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerSpec {
    pub host: String,
    pub quorum_port: u16,
    pub election_port: u16,
    /// `participant` or `observer`.
    pub observer: bool,
    /// The optional `;[host:]port` client address.
    pub client_address: Option<String>,
}

/// The client host a line's bare `;port` stands for.
pub const WILDCARD: &str = "0.0.0.0";

impl ServerSpec {
    /// Reads the value of a `server.N` line; the error says what is wrong.
    pub fn parse(value: &str) -> Result<ServerSpec, String> {
        let (addr, client) = match value.split_once(';') {
            Some((a, c)) => (a, Some(c.trim().to_owned())),
            None => (value, None),
        };
        let parts: Vec<&str> = addr.trim().split(':').collect();
        if parts.len() < 3 || parts.len() > 4 {
            return Err("expected host:quorumPort:electionPort[:participant|observer]".into());
        }
        let quorum_port = port(parts[1])?;
        let election_port = port(parts[2])?;
        if quorum_port == election_port {
            return Err("quorum and election ports must differ".into());
        }
        let observer = match parts.get(3).copied() {
            None | Some("participant") => false,
            Some("observer") => true,
            Some(other) => return Err(format!("unknown role {other:?}")),
        };
        if let Some(client) = &client {
            client_host_port(client)?;
        }
        Ok(ServerSpec {
            host: parts[0].to_owned(),
            quorum_port,
            election_port,
            observer,
            client_address: client,
        })
    }

    /// The line's value as ZooKeeper's `QuorumServer` prints it: the role
    /// always, and a bare client port with the wildcard host.
    pub fn value(&self) -> String {
        let role = match self.observer {
            true => "observer",
            false => "participant",
        };
        let mut out = format!(
            "{}:{}:{}:{role}",
            self.host, self.quorum_port, self.election_port
        );
        match self.client_address.as_deref() {
            Some(port) if !port.contains(':') => out.push_str(&format!(";{WILDCARD}:{port}")),
            Some(address) => out.push_str(&format!(";{address}")),
            None => {}
        }
        out
    }

    /// Whether the two lines name one of the same addresses (ZooKeeper's
    /// `checkAddressDuplicate`, over the quorum and election addresses).
    pub fn shares_an_address(&self, other: &ServerSpec) -> bool {
        let mine = [self.quorum_port, self.election_port];
        self.host == other.host
            && (mine.contains(&other.quorum_port) || mine.contains(&other.election_port))
    }
}

/// The text `/zookeeper/config` holds for `servers` at `version`: a line
/// per member in id order, then `version=` in hex.
pub fn config_text(servers: &BTreeMap<u64, ServerSpec>, version: i64) -> String {
    let mut out = String::new();
    for (id, s) in servers {
        out.push_str(&format!("server.{id}={}\n", s.value()));
    }
    out.push_str(&format!("version={version:x}"));
    out
}

/// A server line's client address: `host:port`, or `port` alone for every
/// address ([`WILDCARD`]).
pub fn client_host_port(address: &str) -> Result<(String, u16), String> {
    match address.rsplit_once(':') {
        Some((host, p)) => Ok((host.to_owned(), port(p)?)),
        None => Ok((WILDCARD.to_owned(), port(address)?)),
    }
}

fn port(s: &str) -> Result<u16, String> {
    s.trim()
        .parse::<u16>()
        .map_err(|_| format!("{s:?} is not a port"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_reads_and_prints_as_zookeeper_prints_it() {
        let s = ServerSpec::parse("h:1:2;2181").unwrap();
        assert_eq!(s.value(), "h:1:2:participant;0.0.0.0:2181");
        let o = ServerSpec::parse(" h:3:4:observer ; 127.0.0.1:2182").unwrap();
        assert_eq!(o.value(), "h:3:4:observer;127.0.0.1:2182");
        assert!(ServerSpec::parse("h:1:1").is_err());
        assert!(ServerSpec::parse("h:1").is_err());
        assert!(ServerSpec::parse("h:1:2:voter").is_err());
        assert!(ServerSpec::parse("h:1:2;x").is_err());
        let servers = BTreeMap::from([(2, o.clone()), (1, s.clone())]);
        assert_eq!(
            config_text(&servers, 0x1_0000_0003),
            "server.1=h:1:2:participant;0.0.0.0:2181\n\
             server.2=h:3:4:observer;127.0.0.1:2182\nversion=100000003"
        );
        assert!(s.shares_an_address(&ServerSpec::parse("h:2:9").unwrap()));
        assert!(!s.shares_an_address(&ServerSpec::parse("g:1:2").unwrap()));
    }
}
