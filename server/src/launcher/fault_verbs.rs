//! The verbs of `zkd fault` and of the supervisor's HTTP API: one grammar,
//! parsed from a verb and its words (`partition 1 2 / 3`), pure.

use std::collections::BTreeSet;

/// Which member a verb acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Member `i` (its myid).
    Member(usize),
    /// Whichever member leads when the verb runs.
    Leader,
}

/// One fault (or heal, or status) for a running ensemble.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verb {
    /// SIGKILL; the member stays down until `restart` or `heal`.
    Kill(Target),
    /// Start the member again (killing it first if it runs).
    Restart(usize),
    /// SIGSTOP: the process freezes with its sockets open.
    Pause(Target),
    /// SIGCONT.
    Resume(usize),
    /// Members on either side lose every peer message to the other side.
    Partition(BTreeSet<usize>, BTreeSet<usize>),
    /// Messages from the first side to the second are lost; the other way works.
    PartitionOneWay(BTreeSet<usize>, BTreeSet<usize>),
    /// Cut the member off from every peer.
    Isolate(Target),
    /// The member stops answering its clients.
    CutClients(usize),
    /// Every client of the member is disconnected; sessions live.
    CloseConnections(usize),
    /// Each txn-log fsync of the member takes this many ms longer.
    SlowDisk(usize, u64),
    /// The member's next txn-log fsync fails (it exits, as on EIO).
    DiskError(usize),
    /// Reconfig: the member leaves the configuration (`--reconfig` only).
    Remove(Target),
    /// Reconfig: the member joins the configuration again.
    Add(usize),
    /// The leader expires this session (`0x` hex, as clients print it).
    ExpireSession(String),
    /// Undo every fault: resume, restart, rejoin, reconnect.
    Heal,
    /// Each member's state and the faults in force.
    Status,
}

impl Verb {
    /// Parses `verb` and its words for an ensemble of `n` members.
    pub fn parse(verb: &str, args: &[String], n: usize) -> Result<Verb, String> {
        let words: Vec<&str> = args.iter().flat_map(|a| a.split_whitespace()).collect();
        let member = |w: &str| parse_member(w, n);
        let one = |what: &str| match words.as_slice() {
            [w] => Ok(*w),
            _ => Err(format!("{verb} takes one argument, {what}")),
        };
        let none = |v: Verb| match words.is_empty() {
            true => Ok(v),
            false => Err(format!("{verb} takes no arguments")),
        };
        match verb {
            "kill" => target(one("N or leader")?, n).map(Verb::Kill),
            "restart" => member(one("N")?).map(Verb::Restart),
            "pause" => target(one("N or leader")?, n).map(Verb::Pause),
            "resume" => member(one("N")?).map(Verb::Resume),
            "partition" => sides(verb, &words, n).map(|(a, b)| Verb::Partition(a, b)),
            "partition-one-way" => sides(verb, &words, n).map(|(a, b)| Verb::PartitionOneWay(a, b)),
            "isolate" => target(one("N or leader")?, n).map(Verb::Isolate),
            "cut-clients" => member(one("N")?).map(Verb::CutClients),
            "close-connections" => member(one("N")?).map(Verb::CloseConnections),
            "slow-disk" => match words.as_slice() {
                [m, ms] => {
                    let ms = ms
                        .parse()
                        .map_err(|_| format!("slow-disk: {ms:?} is not a number of ms"))?;
                    Ok(Verb::SlowDisk(member(m)?, ms))
                }
                _ => Err("slow-disk takes two arguments, N and MS".into()),
            },
            "disk-error" => member(one("N")?).map(Verb::DiskError),
            "expire-session" => {
                let id = one("0xID")?;
                crate::runtime::faults::parse_session(id)?;
                Ok(Verb::ExpireSession(id.to_owned()))
            }
            "remove" => target(one("N or leader")?, n).map(Verb::Remove),
            "add" => member(one("N")?).map(Verb::Add),
            "heal" => none(Verb::Heal),
            "status" => none(Verb::Status),
            _ => Err(format!(
                "unknown verb {verb:?}; one of: kill, restart, pause, resume, partition, \
                 partition-one-way, isolate, cut-clients, close-connections, slow-disk, \
                 disk-error, expire-session, remove, add, heal, status"
            )),
        }
    }
}

fn parse_member(word: &str, n: usize) -> Result<usize, String> {
    match word.parse::<usize>() {
        Ok(i) if (1..=n).contains(&i) => Ok(i),
        _ => Err(format!("{word:?} is not a member: expected 1 to {n}")),
    }
}

fn target(word: &str, n: usize) -> Result<Target, String> {
    match word {
        "leader" => Ok(Target::Leader),
        _ => parse_member(word, n).map(Target::Member),
    }
}

/// `A... / B...`: two non-empty, disjoint sets of members.
fn sides(
    verb: &str,
    words: &[&str],
    n: usize,
) -> Result<(BTreeSet<usize>, BTreeSet<usize>), String> {
    let joined = words.join(" ");
    let Some((a, b)) = joined.split_once('/') else {
        return Err(format!(
            "{verb} takes two sides: A... / B... (e.g. 1 / 2 3)"
        ));
    };
    let side = |text: &str| -> Result<BTreeSet<usize>, String> {
        text.split(|c: char| c == ',' || c.is_whitespace())
            .filter(|w| !w.is_empty())
            .map(|w| parse_member(w, n))
            .collect()
    };
    let (a, b) = (side(a)?, side(b)?);
    if a.is_empty() || b.is_empty() {
        return Err(format!("{verb}: both sides need a member (A... / B...)"));
    }
    if let Some(both) = a.intersection(&b).next() {
        return Err(format!("{verb}: member {both} is on both sides"));
    }
    Ok((a, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<Verb, String> {
        let mut words = line.split_whitespace();
        let verb = words.next().unwrap_or("");
        let args: Vec<String> = words.map(str::to_owned).collect();
        Verb::parse(verb, &args, 3)
    }

    #[test]
    fn verbs_parse() {
        let set = |v: &[usize]| v.iter().copied().collect::<BTreeSet<_>>();
        assert_eq!(parse("kill leader"), Ok(Verb::Kill(Target::Leader)));
        assert_eq!(parse("pause 2"), Ok(Verb::Pause(Target::Member(2))));
        assert_eq!(
            parse("partition 1 / 2 3"),
            Ok(Verb::Partition(set(&[1]), set(&[2, 3])))
        );
        assert_eq!(
            parse("partition 1,2/3"),
            Ok(Verb::Partition(set(&[1, 2]), set(&[3])))
        );
        assert_eq!(
            parse("partition-one-way 3 / 1"),
            Ok(Verb::PartitionOneWay(set(&[3]), set(&[1])))
        );
        assert_eq!(parse("slow-disk 2 150"), Ok(Verb::SlowDisk(2, 150)));
        assert_eq!(
            parse("expire-session 0x10000abc"),
            Ok(Verb::ExpireSession("0x10000abc".into()))
        );
        assert_eq!(parse("remove leader"), Ok(Verb::Remove(Target::Leader)));
        assert_eq!(parse("add 3"), Ok(Verb::Add(3)));
        assert_eq!(parse("heal"), Ok(Verb::Heal));
    }

    #[test]
    fn bad_verbs_and_arguments_are_refused() {
        for bad in [
            "explode",
            "kill",
            "kill 4",
            "kill 0",
            "kill follower",
            "restart leader",
            "partition 1 2 3",
            "partition 1 / 1 2",
            "partition / 2",
            "slow-disk 1",
            "slow-disk 1 fast",
            "expire-session nope",
            "heal 1",
            "remove",
            "add leader",
            "add 4",
            "status now",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
