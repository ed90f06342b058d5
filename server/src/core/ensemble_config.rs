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
    /// The configuration a NEWLEADER carries, read back; None if `text`
    /// has no `version=` line in hex.
    pub fn parse(text: Bytes) -> Option<EnsembleConfig> {
        let last = std::str::from_utf8(&text).ok()?.lines().last()?;
        let version = i64::from_str_radix(last.strip_prefix("version=")?, 16).ok()?;
        Some(EnsembleConfig { text, version })
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
}
