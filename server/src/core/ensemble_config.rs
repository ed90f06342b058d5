//! The ensemble's membership as `/zookeeper/config` holds it: the text
//! ZooKeeper's `QuorumVerifier` prints (`server.N=...` lines, then
//! `version=<hex>`), and its version, which is also the node's mzxid.

use super::server_spec::{config_text, ServerSpec};
use bytes::Bytes;
use std::collections::BTreeMap;

/// An ensemble configuration and its version.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EnsembleConfig {
    /// The server lines and the `version=` line, as ZooKeeper prints them.
    pub text: Bytes,
    /// The version (the zxid that established it; 0 before any did).
    pub version: i64,
}

impl EnsembleConfig {
    /// A configuration a peer sent (a NEWLEADER, a notification), read
    /// back; None unless it is server lines that read, at least one, then
    /// a `version=` line in hex that a zxid could be: anything else would
    /// be written to zoo.cfg.dynamic and stop this member's next start.
    pub fn parse(text: Bytes) -> Option<EnsembleConfig> {
        let mut lines = std::str::from_utf8(&text).ok()?.lines().rev();
        let version = i64::from_str_radix(lines.next()?.strip_prefix("version=")?, 16).ok()?;
        let mut servers = 0;
        for line in lines {
            let (key, value) = line.split_once('=')?;
            let id: u64 = key.strip_prefix("server.")?.parse().ok()?;
            ServerSpec::parse(value).ok().filter(|_| id > 0)?;
            servers += 1;
        }
        (servers > 0 && version >= 0).then_some(EnsembleConfig { text, version })
    }

    /// The server lines, without the `version=` line.
    pub fn server_lines(&self) -> impl Iterator<Item = &str> {
        let text = std::str::from_utf8(&self.text).unwrap_or_default();
        text.lines().filter(|l| !l.starts_with("version="))
    }

    /// The configuration of `servers` at `version`.
    pub fn of(servers: &BTreeMap<u64, ServerSpec>, version: i64) -> EnsembleConfig {
        let text = Bytes::from(config_text(servers, version));
        EnsembleConfig { text, version }
    }

    /// The members its lines list, by id. Members wrote the text, so a line
    /// that does not read is a bug elsewhere; it is left out.
    pub fn servers(&self) -> BTreeMap<u64, ServerSpec> {
        let lines = self.server_lines().filter_map(|l| l.split_once('='));
        lines
            .filter_map(|(key, value)| {
                let id = key.strip_prefix("server.")?.parse().ok()?;
                Some((id, ServerSpec::parse(value).ok()?))
            })
            .collect()
    }

    /// The same servers under another version.
    pub fn with_version(&self, version: i64) -> EnsembleConfig {
        let mut text: String = self.server_lines().map(|l| format!("{l}\n")).collect();
        text.push_str(&format!("version={version:x}"));
        EnsembleConfig {
            text: Bytes::from(text),
            version,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_version_keeps_the_servers_and_reads_back() {
        let text = "server.1=a:1:2:participant;0.0.0.0:3\nserver.2=b:1:2:observer\nversion=0";
        let zero = EnsembleConfig::parse(Bytes::from(text)).unwrap();
        assert_eq!(zero.version, 0);
        let stamped = zero.with_version(0x1_0000_0000);
        assert_eq!(
            &stamped.text[..],
            b"server.1=a:1:2:participant;0.0.0.0:3\nserver.2=b:1:2:observer\nversion=100000000"
        );
        assert_eq!(
            EnsembleConfig::parse(stamped.text.clone()),
            Some(stamped.clone())
        );
        assert_eq!(EnsembleConfig::parse(Bytes::from("server.1=a:1:2")), None);
        let servers = stamped.servers();
        assert_eq!(servers.len(), 2);
        assert!(servers[&2].observer);
        assert_eq!(EnsembleConfig::of(&servers, 0x1_0000_0000), stamped);
        assert_eq!(EnsembleConfig::parse(Bytes::new()), None);
    }

    #[test]
    fn a_peer_config_is_server_lines_and_a_version_only() {
        let read = |text: &'static str| EnsembleConfig::parse(Bytes::from(text));
        assert!(read("server.1=a:1:2\nversion=1").is_some());
        assert_eq!(read("server.1=a:1:2\nclientPort=1\nversion=1"), None);
        assert_eq!(read("server.1=a:1:2\n\nversion=1"), None);
        assert_eq!(read("server.0=a:1:2\nversion=1"), None);
        assert_eq!(read("server.1=a:x:2\nversion=1"), None);
        assert_eq!(read("version=1"), None);
        assert_eq!(read("server.1=a:1:2\nversion=-1"), None);
    }
}
