//! `zkd ensemble --reconfig`: each member's zoo.cfg enables reconfig with a
//! super user whose password the ensemble keeps in `DIR/super-password`,
//! and a rerun keeps the membership the members recorded (their
//! `dynamicConfigFile`) instead of going back to the flags'.

use super::{invalid, io_error, EnsembleError, Member};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The file in DIR holding the super user's password.
pub const PASSWORD_FILE: &str = "super-password";

/// The ensemble's super user, for clients and for the fault API's
/// membership verbs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SuperUser {
    /// The password (`addauth digest super:<password>`).
    pub password: String,
}

impl SuperUser {
    /// The password in `dir`, made (random, readable by its owner only) on
    /// the first run with `--reconfig`.
    pub fn load_or_create(dir: &Path) -> Result<SuperUser, EnsembleError> {
        let path = dir.join(PASSWORD_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) if !text.trim().is_empty() => {
                return Ok(SuperUser {
                    password: text.trim().to_owned(),
                })
            }
            Ok(_) => return Err(invalid(format!("{} is empty", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error(&path, e)),
        }
        let password: String = rand::random::<[u8; 16]>()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| io_error(&path, e))?;
        file.write_all(format!("{password}\n").as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|e| io_error(&path, e))?;
        Ok(SuperUser { password })
    }

    /// The zoo.cfg lines that enable reconfig for this super user.
    pub fn zoo_cfg_lines(&self) -> String {
        let digest = crate::core::acl::digest_id(&format!("super:{}", self.password));
        format!(
            "# reconfig is on (--reconfig): the super user's password is in ../{PASSWORD_FILE}.\n\
             reconfigEnabled=true\n\
             DigestAuthenticationProvider.superDigest={digest}\n"
        )
    }
}

/// The `dynamicConfigFile=` line of a zoo.cfg member `id` rewrote, when the
/// file it names exists and holds the member's own server line: the
/// membership it last activated, to start from again.
pub fn recorded_dynamic_file(zoo_cfg: &str, id: usize) -> Option<&str> {
    let own = format!("server.{id}=");
    zoo_cfg.lines().map(str::trim).find(|line| {
        line.strip_prefix("dynamicConfigFile=")
            .and_then(|path| std::fs::read_to_string(path.trim()).ok())
            .is_some_and(|servers| servers.lines().any(|l| l.trim().starts_with(&own)))
    })
}

/// Makes `zoo_cfg` (member `me`'s) startable again after a reconfig left
/// the member out: its recorded file lacks its own server line, and with
/// it the client port, so it would not start (nor would ZooKeeper's). The
/// flags' members stand instead; the member learns the current
/// configuration from its peers' election notifications and follows
/// without a vote. None when nothing needs to change.
pub fn restore_left_out(zoo_cfg: &str, me: &Member, members: &[Member]) -> Option<String> {
    let pointer = |l: &&str| l.trim().starts_with("dynamicConfigFile=");
    if !zoo_cfg.lines().any(|l| pointer(&l)) || recorded_dynamic_file(zoo_cfg, me.id).is_some() {
        return None;
    }
    let mut text: String = zoo_cfg
        .lines()
        .filter(|l| !pointer(l))
        .map(|l| format!("{l}\n"))
        .collect();
    for m in members {
        text.push_str(&m.dynamic_server_line());
        text.push('\n');
    }
    Some(text)
}
