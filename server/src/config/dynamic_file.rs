//! The files ZooKeeper keeps with `reconfigEnabled=true`, kept the same
//! way: `zoo.cfg.bak`, the static file as it was, written at each start
//! that has no `dynamicConfigFile` yet; and for each configuration that
//! takes effect, `zoo.cfg.dynamic.<version in hex>` with its sorted server
//! lines, and zoo.cfg rewritten to point at it, without its server lines
//! (`QuorumPeerConfig.writeDynamicConfig` and `editStaticConfig`). A restart
//! reads the configuration, version and all, back from them.

use super::Config;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Keys the rewritten zoo.cfg leaves to the dynamic file.
const MOVED: [&str; 5] = [
    "server.",
    "group",
    "weight",
    "dynamicConfigFile",
    "peerType",
];

/// Where a member with reconfig keeps its configuration.
#[derive(Clone, Debug)]
pub struct ConfigFiles {
    /// zoo.cfg.
    static_path: PathBuf,
    /// The member's own server line gives its client address, so zoo.cfg's
    /// `clientPort`/`clientPortAddress` go too (ZooKeeper's
    /// `needEraseClientInfoFromStaticConfig`).
    erase_client_port: bool,
}

impl ConfigFiles {
    /// The files of a member started from `path` with reconfig; None without.
    pub fn of(config: &Config, path: &Path) -> Option<ConfigFiles> {
        if !config.reconfig_enabled || !config.is_quorum() {
            return None;
        }
        let me = config.my_id.and_then(|id| config.servers.get(&id));
        Some(ConfigFiles {
            static_path: path.to_path_buf(),
            erase_client_port: me.is_some_and(|s| s.client_address.is_some()),
        })
    }

    /// Copies zoo.cfg to zoo.cfg.bak, as ZooKeeper does at each start
    /// before its configuration has a dynamic file.
    pub fn back_up(&self) -> std::io::Result<()> {
        let text = std::fs::read(&self.static_path)?;
        write_atomically(&self.with_suffix(".bak"), &text)
    }

    /// Records the configuration `version` with these server lines: its
    /// dynamic file, and zoo.cfg pointing at it. Returns the dynamic file.
    pub fn record<'a>(
        &self,
        server_lines: impl Iterator<Item = &'a str>,
        version: i64,
    ) -> std::io::Result<PathBuf> {
        let mut lines: Vec<&str> = server_lines.collect();
        lines.sort_unstable();
        let dynamic = self.with_suffix(&format!(".dynamic.{version:x}"));
        write_atomically(&dynamic, lines.join("\n").as_bytes())?;
        let dynamic = dynamic.canonicalize()?;
        let text = std::fs::read_to_string(&self.static_path)?;
        let rewritten = self.rewritten(&text, &dynamic);
        write_atomically(&self.static_path, rewritten.as_bytes())?;
        Ok(dynamic)
    }

    /// zoo.cfg's `key=value` lines but those the dynamic file holds, then
    /// the pointer to `dynamic`. Comments go, as in ZooKeeper's rewrite.
    fn rewritten(&self, text: &str, dynamic: &Path) -> String {
        let mut out = String::new();
        for entry in super::entries(text) {
            let key = entry.key.as_str();
            let client = matches!(key, "clientPort" | "clientPortAddress");
            if MOVED.iter().any(|m| key.starts_with(m)) || (client && self.erase_client_port) {
                continue;
            }
            out.push_str(&format!("{key}={}\n", entry.value));
        }
        out.push_str(&format!("dynamicConfigFile={}\n", dynamic.display()));
        out
    }

    fn with_suffix(&self, suffix: &str) -> PathBuf {
        let mut name = self.static_path.clone().into_os_string();
        name.push(suffix);
        PathBuf::from(name)
    }
}

/// Writes `path` whole or not at all: a temporary file beside it, synced,
/// renamed over it.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.to_path_buf().into_os_string();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_configuration_reads_back_with_its_version() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::write(data.join("myid"), "2\n").unwrap();
        let path = dir.path().join("zoo.cfg");
        let text = format!(
            "# a comment\ntickTime=500\ndataDir={}\nreconfigEnabled=true\n\
             server.1=127.0.0.1:1001:2001;3001\nserver.2=127.0.0.1:1002:2002;3002\n\
             server.3=127.0.0.1:1003:2003;3003\n",
            data.display()
        );
        std::fs::write(&path, &text).unwrap();
        let config = Config::load(&path).unwrap();
        let files = ConfigFiles::of(&config, &path).unwrap();
        files.back_up().unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("zoo.cfg.bak")).unwrap(),
            text
        );

        let shown = config.quorum_config_text();
        let lines = shown.lines().filter(|l| !l.starts_with("version="));
        let dynamic = files.record(lines, 0x1_0000_0000).unwrap();
        assert!(dynamic.ends_with("zoo.cfg.dynamic.100000000"));
        assert_eq!(
            std::fs::read_to_string(&dynamic).unwrap(),
            "server.1=127.0.0.1:1001:2001:participant;0.0.0.0:3001\n\
             server.2=127.0.0.1:1002:2002:participant;0.0.0.0:3002\n\
             server.3=127.0.0.1:1003:2003:participant;0.0.0.0:3003"
        );
        let rewritten = std::fs::read_to_string(&path).unwrap();
        assert!(
            !rewritten.contains("server.") && !rewritten.contains('#'),
            "{rewritten}"
        );
        assert!(rewritten.ends_with(&format!("dynamicConfigFile={}\n", dynamic.display())));

        let again = Config::load(&path).unwrap();
        assert_eq!(again.config_version, 0x1_0000_0000);
        assert_eq!(again.client_port, Some(3002));
        assert_eq!(again.servers.len(), 3);
    }
}
