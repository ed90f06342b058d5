//! The control socket's commands: one line each, answered with one line.

use super::PeerCuts;
use crate::core::session::SessionId;

/// One fault command to a member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultCommand {
    /// Hold bytes to and from these peers (replaces the previous cuts).
    CutLinks(PeerCuts),
    /// Stop answering clients: their traffic waits unread.
    CutClients,
    /// Disconnect every client (their sessions live on).
    CloseConnections,
    /// Add this many ms to each txn-log fsync (0: none).
    SlowDisk(u64),
    /// Fail the next txn-log fsync.
    DiskError,
    /// Expire a session now (the leader, or a standalone server).
    ExpireSession(SessionId),
    /// Undo every fault in force here.
    Heal,
    /// Report mode, zxid, sessions and faults.
    Status,
}

impl FaultCommand {
    /// Parses `verb [args]`, e.g. `cut-links send=2,3 recv=2`.
    pub fn parse(line: &str) -> Result<FaultCommand, String> {
        let mut words = line.split_whitespace();
        let verb = words.next().ok_or("an empty command")?;
        let args: Vec<&str> = words.collect();
        let none = |c: FaultCommand| match args.is_empty() {
            true => Ok(c),
            false => Err(format!("{verb} takes no arguments")),
        };
        match verb {
            "cut-links" => parse_cuts(&args).map(FaultCommand::CutLinks),
            "cut-clients" => none(FaultCommand::CutClients),
            "close-connections" => none(FaultCommand::CloseConnections),
            "slow-disk" => match args.as_slice() {
                [ms] => ms
                    .parse()
                    .map(FaultCommand::SlowDisk)
                    .map_err(|_| format!("slow-disk: {ms:?} is not a number of ms")),
                _ => Err("slow-disk takes one argument, MS".into()),
            },
            "disk-error" => none(FaultCommand::DiskError),
            "expire-session" => match args.as_slice() {
                [id] => parse_session(id).map(FaultCommand::ExpireSession),
                _ => Err("expire-session takes one argument, 0xID".into()),
            },
            "heal" => none(FaultCommand::Heal),
            "status" => none(FaultCommand::Status),
            _ => Err(format!("unknown command {verb:?}")),
        }
    }
}

/// `send=2,3 recv=2` (either may be left out or empty).
fn parse_cuts(args: &[&str]) -> Result<PeerCuts, String> {
    let mut cuts = PeerCuts::default();
    for arg in args {
        let (key, list) = arg
            .split_once('=')
            .ok_or_else(|| format!("cut-links: {arg:?} is not send=IDS or recv=IDS"))?;
        let set = match key {
            "send" => &mut cuts.send,
            "recv" => &mut cuts.recv,
            _ => return Err(format!("cut-links: {key:?} is not send or recv")),
        };
        for id in list.split(',').filter(|s| !s.is_empty()) {
            set.insert(
                id.parse()
                    .map_err(|_| format!("cut-links: {id:?} is not a member id"))?,
            );
        }
    }
    Ok(cuts)
}

/// A session id as clients print it: `0x` and hex digits (or decimal).
pub fn parse_session(text: &str) -> Result<SessionId, String> {
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).map(|v| v as i64),
        None => text.parse::<i64>(),
    };
    parsed
        .map(SessionId)
        .map_err(|_| format!("{text:?} is not a session id (0x followed by hex digits)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_and_bad_ones_are_refused() {
        let cuts = FaultCommand::parse("cut-links send=2,3 recv=3").unwrap();
        let FaultCommand::CutLinks(cuts) = cuts else {
            panic!("{cuts:?}")
        };
        assert_eq!(cuts.send.into_iter().collect::<Vec<_>>(), vec![2, 3]);
        assert_eq!(cuts.recv.into_iter().collect::<Vec<_>>(), vec![3]);
        assert_eq!(
            FaultCommand::parse("cut-links"),
            Ok(FaultCommand::CutLinks(PeerCuts::default()))
        );
        assert_eq!(
            FaultCommand::parse("expire-session 0x1000a2b3c4d0000"),
            Ok(FaultCommand::ExpireSession(SessionId(0x1000a2b3c4d0000)))
        );
        assert_eq!(
            FaultCommand::parse("slow-disk 250"),
            Ok(FaultCommand::SlowDisk(250))
        );
        for bad in [
            "",
            "explode",
            "heal now",
            "slow-disk",
            "slow-disk x",
            "expire-session 0xzz",
            "cut-links to=2",
            "cut-links send=a",
        ] {
            assert!(FaultCommand::parse(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
