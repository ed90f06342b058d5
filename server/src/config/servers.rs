//! The ensemble's membership as ZooKeeper 3.5+ configures it: `server.N`
//! lines (`host:quorumPort:electionPort[:participant|:observer][;[clientHost:]clientPort]`)
//! in zoo.cfg or in the file `dynamicConfigFile` names, the configuration's
//! `version`, and this member's client address taken from its own line.

use super::{err, parse_properties, Config, ConfigError, Props};
use std::collections::BTreeMap;
use std::path::Path;

pub use crate::core::ServerSpec;
use crate::core::{server_spec, WILDCARD};

/// The key naming the dynamic configuration file.
const DYNAMIC_KEY: &str = "dynamicConfigFile";

/// Reads the file `dynamicConfigFile` names into `props`, as ZooKeeper's
/// `QuorumPeerConfig.parse` does: its `server.N` lines, and the version its
/// name ends in (`zoo.cfg.dynamic.<hex>`). zoo.cfg itself may then hold no
/// `server.N` line, and the dynamic file nothing but them.
pub(super) fn read_dynamic_file(props: &mut BTreeMap<String, String>) -> Result<(), ConfigError> {
    let Some(file) = props.get(DYNAMIC_KEY).cloned() else {
        return Ok(());
    };
    if let Some(key) = props.keys().find(|k| k.starts_with("server.")) {
        return Err(err(key, "must be in a separate dynamic config file"));
    }
    let text =
        std::fs::read_to_string(&file).map_err(|e| err(DYNAMIC_KEY, format!("{file}: {e}")))?;
    for (key, value) in parse_properties(&text) {
        if key == "version" {
            return Err(err(
                DYNAMIC_KEY,
                "dynamic file shouldn't have version inside",
            ));
        }
        if !key.starts_with("server.") {
            return Err(err(DYNAMIC_KEY, format!("Unrecognised parameter: {key}")));
        }
        props.insert(key, value);
    }
    if let Some(version) = version_of_file(&file) {
        props.insert("version".into(), format!("{version:x}"));
    }
    Ok(())
}

/// The version a dynamic file's name ends in, in hex (`.100000000`); none
/// when the name has no such suffix (the version is then 0).
fn version_of_file(file: &str) -> Option<u64> {
    let name = Path::new(file).file_name()?.to_str()?;
    let (_, suffix) = name.rsplit_once('.')?;
    u64::from_str_radix(suffix, 16).ok()
}

/// The membership's version: `version=` in hex (the dynamic file's name
/// gives it there), 0 without one.
pub(super) fn version(p: &mut Props) -> Result<u64, ConfigError> {
    match p.get("version") {
        None => Ok(0),
        Some(v) => u64::from_str_radix(v, 16)
            .map_err(|_| err("version", format!("{v:?} is not a hex number"))),
    }
}

/// Every `server.N` line of `p`.
pub(super) fn servers(p: &mut Props) -> Result<BTreeMap<u64, ServerSpec>, ConfigError> {
    let mut out = BTreeMap::new();
    let keys: Vec<String> = (p.props.keys())
        .filter(|k| k.starts_with("server."))
        .cloned()
        .collect();
    for key in keys {
        let id: u64 = key["server.".len()..]
            .parse()
            .map_err(|_| err(&key, "server id must be a number"))?;
        let value = p.get(&key).unwrap_or("").to_owned();
        out.insert(id, parse_server(&key, &value)?);
    }
    Ok(out)
}

fn parse_server(key: &str, value: &str) -> Result<ServerSpec, ConfigError> {
    ServerSpec::parse(value).map_err(|m| err(key, m))
}

/// A server line's client address, with the line's key in an error.
fn client_host_port(key: &str, address: &str) -> Result<(String, u16), ConfigError> {
    server_spec::client_host_port(address).map_err(|m| err(key, m))
}

impl Config {
    /// This member's client port from its own `server.N` line, as
    /// ZooKeeper's `setupClientPort` takes it: zoo.cfg then needs no
    /// `clientPort`, and one that names another address is an error.
    pub(super) fn take_client_address(&mut self) -> Result<(), ConfigError> {
        let Some(id) = self.my_id else {
            return Ok(());
        };
        let Some(address) = (self.servers.get(&id)).and_then(|s| s.client_address.clone()) else {
            return Ok(());
        };
        let key = format!("server.{id}");
        let (host, port) = client_host_port(&key, &address)?;
        if let Some(static_port) = self.client_port {
            let static_host = self.client_port_address.as_deref().unwrap_or(WILDCARD);
            let any = static_host == WILDCARD || static_host == "::";
            if static_port != port || (!any && static_host != host) {
                return Err(err(
                    "clientPort",
                    format!(
                        "client address for this server (id = {id}) in static config file is \
                         {static_host}:{static_port} is different from client address found in \
                         dynamic file: {host}:{port}"
                    ),
                ));
            }
        }
        self.client_port = Some(port);
        self.client_port_address = Some(host);
        Ok(())
    }

    /// `peerType`: the server lines decide, as in ZooKeeper, which warns
    /// when the two disagree.
    pub(super) fn check_peer_type(&self, peer_type: Option<&str>) -> Result<(), ConfigError> {
        let observer = match peer_type.map(str::to_ascii_lowercase).as_deref() {
            None => return Ok(()),
            Some("observer") => true,
            Some("participant") => false,
            Some(other) => return Err(err("peerType", format!("Unrecognised peertype: {other}"))),
        };
        let listed = self.my_id.and_then(|id| self.servers.get(&id));
        if listed.is_some_and(|s| s.observer != observer) {
            tracing::warn!(
                peer_type,
                "peerType doesn't match the server lines; the server lines decide"
            );
        }
        Ok(())
    }

    /// Observers need a quorum of participants to follow (ZooKeeper's
    /// `parseDynamicConfig`).
    pub(super) fn check_roles(&self) -> Result<(), ConfigError> {
        let observers = self.servers.values().filter(|s| s.observer).count();
        let participants = self.servers.len() - observers;
        if observers > 0 && participants == 0 {
            return Err(err(
                "server",
                "Observers w/o participants is an invalid configuration",
            ));
        }
        if observers > 0 && participants == 1 && self.standalone_enabled {
            return Err(err(
                "server",
                "Observers w/o quorum is an invalid configuration",
            ));
        }
        Ok(())
    }

    /// The membership as ZooKeeper's `QuorumVerifier` prints it into
    /// `/zookeeper/config`: `server.N=host:quorum:election:participant`
    /// (`;client` when the line gave one) per member, then `version=` in hex.
    pub fn quorum_config_text(&self) -> String {
        server_spec::config_text(&self.servers, self.config_version as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Config, ConfigError> {
        let mut props = parse_properties(text);
        read_dynamic_file(&mut props)?;
        Config::from_properties(&props)
    }

    #[test]
    fn the_client_port_comes_from_the_server_line() {
        let c = load(
            "dataDir=/d\nmyid=2\nserver.1=h:1:2;127.0.0.1:2181\nserver.2=h:3:4:participant;2182\n",
        )
        .unwrap();
        assert_eq!(c.client_port, Some(2182));
        assert_eq!(c.client_port_address.as_deref(), Some("0.0.0.0"));
        // The same port in zoo.cfg agrees; another does not.
        let same =
            "dataDir=/d\nmyid=1\nclientPort=2181\nserver.1=h:1:2;127.0.0.1:2181\nserver.2=h:3:4\n";
        assert_eq!(
            load(same).unwrap().client_port_address.as_deref(),
            Some("127.0.0.1")
        );
        let other =
            "dataDir=/d\nmyid=1\nclientPort=2000\nserver.1=h:1:2;127.0.0.1:2181\nserver.2=h:3:4\n";
        assert_eq!(load(other).unwrap_err().key, "clientPort");
        // A member whose line has none still needs clientPort.
        let none = "dataDir=/d\nmyid=2\nserver.1=h:1:2;2181\nserver.2=h:3:4\n";
        assert_eq!(load(none).unwrap_err().key, "clientPort");
        let bad = "dataDir=/d\nmyid=2\nserver.1=h:1:2;x\nserver.2=h:3:4;2\n";
        assert_eq!(load(bad).unwrap_err().key, "server.1");
        // A member a reconfig left out (its recorded servers lack it) is
        // refused as ZooKeeper refuses it, before its missing client port.
        let left_out = "dataDir=/d\nmyid=3\nserver.1=h:1:2;2181\nserver.2=h:3:4;2182\n";
        let e = load(left_out).unwrap_err();
        assert_eq!(
            (e.key.as_str(), e.message.as_str()),
            ("myid", "My id 3 not in the peer list (no server.3 line)")
        );
    }

    #[test]
    fn a_dynamic_file_holds_the_servers_and_its_name_the_version() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("zoo.cfg.dynamic.100000000");
        std::fs::write(
            &file,
            "server.1=h:1:2;2181\nserver.2=h:3:4:observer;2182\nserver.3=h:5:6\n",
        )
        .unwrap();
        let c = load(&format!(
            "dataDir=/d\nmyid=1\ndynamicConfigFile={}\n",
            file.display()
        ))
        .unwrap();
        assert_eq!(c.config_version, 0x1_0000_0000);
        assert_eq!(c.client_port, Some(2181));
        assert!(c.servers[&2].observer);
        assert_eq!(
            c.quorum_config_text(),
            "server.1=h:1:2:participant;0.0.0.0:2181\n\
             server.2=h:3:4:observer;0.0.0.0:2182\n\
             server.3=h:5:6:participant\nversion=100000000"
        );
        let both = format!(
            "dataDir=/d\nmyid=1\nserver.1=h:1:2;2181\ndynamicConfigFile={}\n",
            file.display()
        );
        assert_eq!(load(&both).unwrap_err().key, "server.1");
        std::fs::write(&file, "server.1=h:1:2;2181\nversion=4\n").unwrap();
        let inside = format!("dataDir=/d\nmyid=1\ndynamicConfigFile={}\n", file.display());
        assert!(load(&inside)
            .unwrap_err()
            .message
            .contains("version inside"));
    }
}
