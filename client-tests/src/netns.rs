//! Network namespaces for ensembles that can be partitioned: each member runs
//! in a namespace of its own with two links.
//!
//! ```text
//!   namespace <prefix>-m0          namespace <prefix>-sw          namespace <prefix>-m1 ...
//!   peer0 10.1.1.1/24 ── veth ── m0 ┐                 ┌ m1 ── veth ── peer0 10.1.1.2/24
//!                                    └── bridge br0 ──┘
//!   cli0 10.a.b.2/30 ─ veth ─┐                              ┌─ veth ─ cli0 10.a.b.6/30
//!                  test process's namespace: <link>0 10.a.b.1/30, <link>1 10.a.b.5/30
//! ```
//!
//! * The **peer network** (the `server.N` addresses, [`Topology::peer_ip`]) is a
//!   bridge in a "switch" namespace of its own, so no peer address is ever
//!   visible to (or can clash with) the test machine's own network.
//! * The **client path** ([`Topology::client_ip`]) is one point-to-point veth
//!   per member from the test process's namespace, in a /24 of 10.0.0.0/8 that
//!   no route of that namespace touches (chosen under a lock file, so parallel
//!   test processes never pick the same one).
//! * [`Topology::isolate`] takes member `i`'s port on the bridge down: its
//!   packets to the other members, and theirs to it, are dropped silently (a
//!   pulled cable: no RST, no ICMP), while its client path keeps working, so a
//!   test can still talk to a member that the others cannot reach.
//!   [`Topology::heal`] brings the port back up.
//!
//! Names carry the test process's pid and a per-process counter, so test
//! binaries and tests running in parallel never clash; namespaces and links
//! left behind by a test process that no longer exists are removed when the
//! next topology is built. Everything a [`Topology`] creates is removed when it
//! drops; stop the processes running inside first (declare the topology before
//! the processes, or own both in one struct with the processes first).
//!
//! Needs root and iproute2 (`ip netns`, veth, bridge).

use std::fs::File;
use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// Prefix of every namespace created here: `zkdt-<pid>-<n>-...`.
const NS_PREFIX: &str = "zkdt-";

/// Prefix of every link created in the test process's namespace:
/// `zkt<pid hex>-<n hex>-<member>` (at most 15 bytes, the kernel's limit).
const LINK_PREFIX: &str = "zkt";

/// The peer network inside the topology (never visible outside it).
const PEER_NET: [u8; 3] = [10, 1, 1];

/// First octets of the /24s the client paths may use: 10.240.0.0 to 10.247.255.0.
const CLIENT_POOL: std::ops::Range<u32> = (10 << 24 | 240 << 16)..(10 << 24 | 248 << 16);

/// Serialises choosing addresses and creating links among test processes.
const LOCK_FILE: &str = "/tmp/zkd-client-tests-netns.lock";

/// Topologies built by this process so far.
static NEXT: AtomicU32 = AtomicU32::new(0);

/// Members in namespaces of their own, linked by a switch, each reachable from
/// the test process. Removes everything it created on drop.
pub struct Topology {
    prefix: String,
    link_prefix: String,
    members: usize,
    /// The client paths' /24 (first three octets).
    client_net: [u8; 3],
    /// Namespaces created, in creation order.
    namespaces: Vec<String>,
    /// Links created in the test process's namespace.
    root_links: Vec<String>,
}

impl Topology {
    /// Builds namespaces for `members` members (at most 60). Fails the test
    /// with the failing command's output when the machine does not allow it.
    pub fn new(members: usize) -> Topology {
        assert!((1..=60).contains(&members), "1..=60 members, not {members}");
        let pid = std::process::id();
        let seq = NEXT.fetch_add(1, Ordering::Relaxed);
        assert!(seq < 0x1000, "too many topologies in one test process");
        let lock = File::create(LOCK_FILE).expect("create the netns lock file");
        lock.lock().expect("lock the netns lock file");
        remove_stale();
        let client_net = free_client_net(pid, seq);
        let mut topology = Topology {
            prefix: format!("{NS_PREFIX}{pid}-{seq}"),
            link_prefix: format!("{LINK_PREFIX}{pid:x}-{seq:x}-"),
            members,
            client_net,
            namespaces: Vec::new(),
            root_links: Vec::new(),
        };
        // On a failure below, dropping `topology` removes what exists so far.
        topology.build();
        drop(lock);
        topology
    }

    fn build(&mut self) {
        let sw = self.switch();
        self.add_namespace(&sw);
        ip(&["-n", &sw, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &sw, "link", "set", "br0", "up"]);
        for i in 0..self.members {
            let ns = self.namespace(i);
            self.add_namespace(&ns);
            // The peer network: peer0 in the member, m<i> on the bridge.
            let port = format!("m{i}");
            ip(&[
                "-n", &ns, "link", "add", "peer0", "type", "veth", "peer", "name", &port, "netns",
                &sw,
            ]);
            ip(&["-n", &sw, "link", "set", &port, "master", "br0", "up"]);
            let peer = format!("{}/24", self.peer_ip(i));
            ip(&["-n", &ns, "addr", "add", &peer, "dev", "peer0"]);
            ip(&["-n", &ns, "link", "set", "peer0", "up"]);
            // The client path: <link>i here, cli0 in the member.
            let link = format!("{}{i}", self.link_prefix);
            ip(&[
                "link", "add", &link, "type", "veth", "peer", "name", "cli0", "netns", &ns,
            ]);
            self.root_links.push(link.clone());
            let here = format!("{}/30", self.client_host_ip(i));
            ip(&["addr", "add", &here, "dev", &link]);
            ip(&["link", "set", &link, "up"]);
            let there = format!("{}/30", self.client_ip(i));
            ip(&["-n", &ns, "addr", "add", &there, "dev", "cli0"]);
            ip(&["-n", &ns, "link", "set", "cli0", "up"]);
        }
    }

    fn add_namespace(&mut self, name: &str) {
        ip(&["netns", "add", name]);
        self.namespaces.push(name.to_owned());
        ip(&["-n", name, "link", "set", "lo", "up"]);
    }

    /// How many members the topology has.
    pub fn members(&self) -> usize {
        self.members
    }

    /// The namespace member `i` runs in.
    pub fn namespace(&self, i: usize) -> String {
        format!("{}-m{i}", self.prefix)
    }

    /// The switch's namespace.
    fn switch(&self) -> String {
        format!("{}-sw", self.prefix)
    }

    /// The command prefix that runs a program in member `i`'s namespace
    /// (`ip netns exec` execs the program, so its pid is the program's).
    pub fn wrapper(&self, i: usize) -> Vec<String> {
        ["ip", "netns", "exec"]
            .iter()
            .map(|s| s.to_string())
            .chain([self.namespace(i)])
            .collect()
    }

    /// Member `i`'s address on the peer network (for its `server.N` line).
    pub fn peer_ip(&self, i: usize) -> Ipv4Addr {
        let [a, b, c] = PEER_NET;
        Ipv4Addr::new(a, b, c, i as u8 + 1)
    }

    /// Member `i`'s address on its client path, reachable from the test process.
    pub fn client_ip(&self, i: usize) -> Ipv4Addr {
        let [a, b, c] = self.client_net;
        Ipv4Addr::new(a, b, c, 4 * i as u8 + 2)
    }

    /// The test process's end of member `i`'s client path.
    fn client_host_ip(&self, i: usize) -> Ipv4Addr {
        let [a, b, c] = self.client_net;
        Ipv4Addr::new(a, b, c, 4 * i as u8 + 1)
    }

    /// Cuts member `i` off the peer network (both directions, silently); its
    /// client path stays up.
    pub fn isolate(&self, i: usize) {
        ip(&[
            "-n",
            &self.switch(),
            "link",
            "set",
            &format!("m{i}"),
            "down",
        ]);
    }

    /// Puts member `i` back on the peer network.
    pub fn heal(&self, i: usize) {
        ip(&["-n", &self.switch(), "link", "set", &format!("m{i}"), "up"]);
    }

    /// Whether member `i` is cut off the peer network.
    pub fn is_isolated(&self, i: usize) -> bool {
        let out = ip(&["-n", &self.switch(), "-o", "link", "show", &format!("m{i}")]);
        !out.contains(",UP") && !out.contains("<UP")
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        // Links first: a namespace's devices go away asynchronously after
        // `netns del`, a link deleted here is gone (with its address) at once.
        for link in &self.root_links {
            let _ = try_ip(&["link", "del", link]);
        }
        for ns in self.namespaces.iter().rev() {
            let _ = try_ip(&["netns", "del", ns]);
        }
    }
}

/// Runs `ip args`, failing the test with its output if it fails.
fn ip(args: &[&str]) -> String {
    match try_ip(args) {
        Ok(out) => out,
        Err(e) => panic!(
            "`ip {}` failed: {e} (the netns tests need root and iproute2: run `bash client-tests/run-all.sh` as root)",
            args.join(" ")
        ),
    }
}

fn try_ip(args: &[&str]) -> Result<String, String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run ip: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Whether a test process with this pid still runs.
fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Removes namespaces and links that test processes which no longer exist left
/// behind (killed before their topologies dropped).
fn remove_stale() {
    if let Ok(list) = try_ip(&["netns", "list"]) {
        for name in list.lines().filter_map(|l| l.split_whitespace().next()) {
            let pid = name
                .strip_prefix(NS_PREFIX)
                .and_then(|rest| rest.split('-').next())
                .and_then(|pid| pid.parse::<u32>().ok());
            if pid.is_some_and(|pid| !alive(pid)) {
                let _ = try_ip(&["netns", "del", name]);
            }
        }
    }
    if let Ok(list) = try_ip(&["-o", "link", "show"]) {
        for line in list.lines() {
            // "7: zkt1f2a-0-1@if3: <...>"
            let Some(name) = line.split(": ").nth(1) else {
                continue;
            };
            let name = name.split('@').next().unwrap_or(name);
            let parts: Vec<&str> = name.split('-').collect();
            let pid = match parts.as_slice() {
                [head, seq, member]
                    if u32::from_str_radix(seq, 16).is_ok() && member.parse::<u32>().is_ok() =>
                {
                    head.strip_prefix(LINK_PREFIX)
                        .and_then(|pid| u32::from_str_radix(pid, 16).ok())
                }
                _ => None,
            };
            if pid.is_some_and(|pid| !alive(pid)) {
                let _ = try_ip(&["link", "del", name]);
            }
        }
    }
}

/// A /24 of the client pool that no route of this namespace overlaps.
fn free_client_net(pid: u32, seq: u32) -> [u8; 3] {
    let routes = try_ip(&["-4", "route", "show", "table", "all"]).unwrap_or_default();
    let taken: Vec<(u32, u32)> = routes
        .lines()
        .filter_map(|line| line.split_whitespace().take(2).find_map(parse_cidr))
        .collect();
    let nets = (CLIENT_POOL.end - CLIENT_POOL.start) >> 8;
    let start = pid
        .wrapping_mul(7919)
        .wrapping_add(seq.wrapping_mul(104_729))
        % nets;
    for k in 0..nets {
        let net = CLIENT_POOL.start + (((start + k) % nets) << 8);
        let overlaps = taken.iter().any(|&(addr, len)| {
            let shorter = len.min(24);
            let mask = if shorter == 0 {
                0
            } else {
                u32::MAX << (32 - shorter)
            };
            addr & mask == net & mask
        });
        if !overlaps {
            let [a, b, c, _] = net.to_be_bytes();
            return [a, b, c];
        }
    }
    panic!("no free /24 in 10.240.0.0/13 for the client paths; routes:\n{routes}");
}

/// `a.b.c.d/len` or `a.b.c.d` (a /32) as (address, prefix length).
fn parse_cidr(token: &str) -> Option<(u32, u32)> {
    let (addr, len) = match token.split_once('/') {
        Some((addr, len)) => (addr, len.parse().ok()?),
        None => (token, 32),
    };
    let addr: Ipv4Addr = addr.parse().ok()?;
    (len <= 32).then_some((u32::from(addr), len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_parse() {
        assert_eq!(parse_cidr("10.240.3.0/24"), Some((0x0af0_0300, 24)));
        assert_eq!(parse_cidr("127.0.0.1"), Some((0x7f00_0001, 32)));
        assert_eq!(parse_cidr("default"), None);
        assert_eq!(parse_cidr("local"), None);
    }
}
