//! ACL checks and fix-up, and the authentication schemes ZooKeeper ships:
//! `world`, `auth`, `digest`, `ip` and `super` (via superDigest).

use super::java_order;
use base64::Engine;
use sha1::{Digest, Sha1};
use std::net::IpAddr;
use zkd_protocol::records::{Acl, Id, SharedAcl};
use zkd_protocol::{ErrorCode, Perms};

/// Identities one connection may hold: each auth packet can add one, and
/// a client must not grow server memory without bound that way.
const MAX_IDS: usize = 16;

/// How a server checks ACLs, the same for every connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AclRules {
    /// Whether the server has ZooKeeper's SASL provider: `sasl` ids are
    /// then valid in ACLs and matched by them.
    pub sasl_scheme: bool,
    /// `skipACL=yes`: every check passes, as ZooKeeper's `checkACL` does
    /// with it (reconfig included).
    pub skip: bool,
}

/// The identities a connection holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthIds {
    /// Whether the server has ZooKeeper's SASL provider: `sasl` ids are
    /// then valid in ACLs and matched by them.
    sasl_scheme: bool,
    /// `skipACL=yes`.
    skip: bool,
    /// In the order they were added (ip first).
    added: Vec<Id>,
    /// The same ids in the order ZooKeeper's per-connection hash set yields
    /// them; empty while there is one, the order of one (issue 52: most
    /// connections hold only their ip for life).
    ordered: Vec<Id>,
}

impl AuthIds {
    /// A connection from `remote_ip` holds `ip:<remote_ip>` from the start.
    pub fn for_remote(remote_ip: &str) -> AuthIds {
        let mut ids = AuthIds::default();
        ids.add(Id {
            scheme: "ip".into(),
            id: remote_ip.into(),
        });
        ids
    }

    /// These ids on a server that checks ACLs by `rules`.
    pub fn with_rules(mut self, rules: AclRules) -> AuthIds {
        self.sasl_scheme = rules.sasl_scheme;
        self.skip = rules.skip;
        self
    }

    /// A SASL exchange authenticated the client as `sasl:` + `user`; the
    /// SASL super user (`superUser`) is `super` too, as in ZooKeeper.
    pub fn authenticated_sasl(&mut self, user: String, super_user: Option<&str>) {
        if super_user == Some(user.as_str()) {
            self.add(Id {
                scheme: "super".into(),
                id: String::new(),
            });
        }
        self.add(Id {
            scheme: "sasl".into(),
            id: user,
        });
    }

    /// A TLS client's certificate authenticated it as `x509:` + `subject`.
    pub fn certified(&mut self, subject: String) {
        self.add(Id {
            scheme: "x509".into(),
            id: subject,
        });
    }

    /// The identities in ZooKeeper's order: `auth` ACLs expand to them and
    /// whoAmI lists them in this order, and clients compare ACL lists as lists.
    pub fn ids(&self) -> &[Id] {
        match self.ordered.is_empty() {
            true => &self.added,
            false => &self.ordered,
        }
    }

    /// The identities in the order they were added, as a follower forwards them.
    pub fn added(&self) -> &[Id] {
        &self.added
    }

    /// The identities a follower forwarded, added in their order, so the
    /// leader checks ACLs (and expands `auth`) exactly as the follower would.
    pub fn from_added(ids: impl IntoIterator<Item = Id>) -> AuthIds {
        let mut auth = AuthIds::default();
        for id in ids {
            auth.add(id);
        }
        auth
    }

    /// Adds an identity; false if the connection already holds too many.
    fn add(&mut self, id: Id) -> bool {
        if self.added.contains(&id) {
            return true;
        }
        if self.added.len() >= MAX_IDS {
            return false;
        }
        // Most connections hold one id for life: no room for more (issue 52).
        self.added.reserve_exact(1);
        self.added.push(id);
        if self.added.len() == 1 {
            return true;
        }
        let hashes: Vec<i32> = self
            .added
            .iter()
            .map(|id| java_order::id_hash(&id.scheme, &id.id))
            .collect();
        self.ordered = java_order::concurrent_hash_set_order(&hashes)
            .into_iter()
            .map(|i| self.added[i].clone())
            .collect();
        true
    }

    fn is_super(&self) -> bool {
        self.added.iter().any(|id| id.scheme == "super")
    }

    /// Processes an auth packet. `Err(AuthFailed)` for an unknown scheme.
    pub fn authenticate(
        &mut self,
        scheme: &str,
        auth: &[u8],
        super_digest: Option<&str>,
    ) -> Result<(), ErrorCode> {
        match scheme {
            "digest" => {
                let id = digest_id(&String::from_utf8_lossy(auth));
                if super_digest == Some(id.as_str()) {
                    self.add(Id {
                        scheme: "super".into(),
                        id: String::new(),
                    });
                }
                // Any credentials are accepted: a wrong password yields an id matching nothing.
                if self.add(Id {
                    scheme: "digest".into(),
                    id,
                }) {
                    Ok(())
                } else {
                    Err(ErrorCode::AuthFailed)
                }
            }
            "ip" => Ok(()),
            _ => Err(ErrorCode::AuthFailed),
        }
    }

    /// ZooKeeper's `checkACL`: may this connection do `perm` on a node with `acl`?
    pub fn allows(&self, acl: &[Acl], perm: i32) -> bool {
        if acl.is_empty() || self.skip || self.is_super() {
            return true;
        }
        acl.iter().filter(|a| a.perms & perm != 0).any(|a| {
            let id = &a.id;
            match id.scheme.as_str() {
                "world" => id.id == "anyone",
                "digest" => self
                    .added
                    .iter()
                    .any(|h| h.scheme == "digest" && h.id == id.id),
                "ip" => self
                    .added
                    .iter()
                    .any(|h| h.scheme == "ip" && ip_matches(&h.id, &id.id)),
                "x509" => self
                    .added
                    .iter()
                    .any(|h| h.scheme == "x509" && h.id == id.id),
                // ZooKeeper's SASL provider: a held id of `super` matches any.
                "sasl" if self.sasl_scheme => self
                    .added
                    .iter()
                    .any(|h| h.scheme == "sasl" && (h.id == id.id || h.id == "super")),
                _ => false,
            }
        })
    }

    /// `fixupACL`: validates an ACL being set and expands `auth` entries.
    pub fn fix_up(&self, acl: &[Acl]) -> Result<Vec<Acl>, ErrorCode> {
        if acl.is_empty() {
            return Err(ErrorCode::InvalidAcl);
        }
        let mut out: Vec<Acl> = Vec::with_capacity(acl.len());
        let mut push = |a: Acl| {
            if !out.contains(&a) {
                out.push(a);
            }
        };
        for a in acl {
            match a.id.scheme.as_str() {
                _ if valid_as_is(a, self.sasl_scheme) => push(a.clone()),
                "auth" => {
                    // Only authenticated identities count; ip is not one.
                    let mut any = false;
                    let authenticated =
                        |id: &&Id| matches!(id.scheme.as_str(), "digest" | "x509" | "sasl");
                    for id in self.ids().iter().filter(authenticated) {
                        any = true;
                        push(Acl {
                            perms: a.perms,
                            id: id.clone(),
                        });
                    }
                    if !any {
                        return Err(ErrorCode::InvalidAcl);
                    }
                }
                _ => return Err(ErrorCode::InvalidAcl),
            }
        }
        Ok(out)
    }

    /// [`fix_up`](Self::fix_up), shared: an ACL that fixes up to `like` (as a
    /// child mostly repeats its parent's) is `like` itself. One that fix_up
    /// would keep as it is is compared in place, not copied first.
    pub fn fix_up_like(
        &self,
        acl: &[Acl],
        like: Option<&SharedAcl>,
    ) -> Result<SharedAcl, ErrorCode> {
        let as_is = !acl.is_empty()
            && acl.iter().all(|a| valid_as_is(a, self.sasl_scheme))
            && acl.iter().enumerate().all(|(i, a)| !acl[..i].contains(a));
        let fixed = match like {
            Some(like) if as_is && like.as_slice() == acl => return Ok(like.clone()),
            _ if as_is => acl.to_vec(),
            _ => self.fix_up(acl)?,
        };
        Ok(match like {
            Some(like) if **like == fixed => like.clone(),
            _ => SharedAcl::new(fixed),
        })
    }
}

/// An entry fix-up keeps as it is: `world:anyone`, a `digest` id of
/// `user:hash`, a valid `ip` id, an `x509` subject, or a `sasl` user on a
/// server with the SASL provider (`auth` entries are expanded instead).
fn valid_as_is(a: &Acl, sasl_scheme: bool) -> bool {
    match a.id.scheme.as_str() {
        "world" => a.id.id == "anyone",
        "digest" => a.id.id.split(':').count() == 2,
        "ip" => valid_ip_id(&a.id.id),
        // A certificate's subject, as a TLS client authenticates.
        "x509" => !a.id.id.is_empty(),
        "sasl" => sasl_scheme && !a.id.id.is_empty(),
        _ => false,
    }
}

/// `digest:` identity of `user:password`: `user:base64(sha1("user:password"))`.
pub fn digest_id(user_password: &str) -> String {
    let user = user_password.split(':').next().unwrap_or("");
    let hash = Sha1::digest(user_password.as_bytes());
    format!(
        "{user}:{}",
        base64::engine::general_purpose::STANDARD.encode(hash)
    )
}

/// The user name `whoAmI` shows for an identity.
pub fn user_of(id: &Id) -> String {
    match id.scheme.as_str() {
        "digest" => id.id.split(':').next().unwrap_or("").to_owned(),
        _ => id.id.clone(),
    }
}

/// getACL without ADMIN masks digest hashes (`user:x`).
pub fn mask_digests(acl: &[Acl]) -> Vec<Acl> {
    acl.iter()
        .map(|a| match a.id.scheme.as_str() {
            "digest" => {
                let user = a.id.id.split(':').next().unwrap_or("");
                Acl {
                    perms: a.perms,
                    id: Id {
                        scheme: "digest".into(),
                        id: format!("{user}:x"),
                    },
                }
            }
            _ => a.clone(),
        })
        .collect()
}

fn parse_ip_id(id: &str) -> Option<(IpAddr, u32)> {
    let (addr, bits) = match id.split_once('/') {
        Some((a, b)) => (a, Some(b.parse::<u32>().ok()?)),
        None => (id, None),
    };
    let addr: IpAddr = addr.parse().ok()?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let bits = bits.unwrap_or(max);
    (bits <= max).then_some((addr, bits))
}

fn valid_ip_id(id: &str) -> bool {
    parse_ip_id(id).is_some()
}

fn ip_matches(have: &str, acl_id: &str) -> bool {
    let (Some((addr, _)), Some((net, bits))) = (parse_ip_id(have), parse_ip_id(acl_id)) else {
        return false;
    };
    match (addr, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => prefix_eq(&a.octets(), &n.octets(), bits),
        (IpAddr::V6(a), IpAddr::V6(n)) => prefix_eq(&a.octets(), &n.octets(), bits),
        _ => false,
    }
}

fn prefix_eq(a: &[u8], b: &[u8], bits: u32) -> bool {
    (0..bits as usize).all(|i| (a[i / 8] >> (7 - i % 8)) & 1 == (b[i / 8] >> (7 - i % 8)) & 1)
}

/// Whether `perm` is one of the permission bits.
pub fn is_perm(perm: i32) -> bool {
    perm & Perms::ALL == perm
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_matches_zookeeper() {
        assert_eq!(digest_id("user:pass"), "user:smGaoVKd/cQkjm7b88GyorAUz20=");
    }

    #[test]
    fn ip_prefixes_match() {
        assert!(ip_matches("127.0.0.1", "127.0.0.0/8"));
        assert!(!ip_matches("10.0.0.1", "127.0.0.0/8"));
        assert!(!ip_matches("::1", "127.0.0.1"));
    }

    #[test]
    fn auth_scheme_needs_an_authenticated_id() {
        let mut ids = AuthIds::for_remote("127.0.0.1");
        let auth = Acl {
            perms: 31,
            id: Id {
                scheme: "auth".into(),
                id: String::new(),
            },
        };
        assert_eq!(
            ids.fix_up(std::slice::from_ref(&auth)),
            Err(ErrorCode::InvalidAcl)
        );
        ids.authenticate("digest", b"user:pass", None).unwrap();
        let fixed = ids.fix_up(&[auth]).unwrap();
        assert_eq!(fixed[0].id.id, "user:smGaoVKd/cQkjm7b88GyorAUz20=");
        assert!(ids.allows(&fixed, Perms::READ));
        assert!(!AuthIds::for_remote("127.0.0.1").allows(&fixed, Perms::READ));
    }

    fn entry(scheme: &str, id: &str) -> Acl {
        Acl {
            perms: 31,
            id: Id {
                scheme: scheme.into(),
                id: id.into(),
            },
        }
    }

    /// A child's ACL that fixes up to its parent's shares the parent's list;
    /// anything else gets what fix_up gives, errors included, whatever the
    /// parent holds.
    #[test]
    fn fix_up_like_shares_only_what_fix_up_would_give() {
        let mut ids = AuthIds::for_remote("127.0.0.1");
        ids.authenticate("digest", b"user:pass", None).unwrap();
        let world = vec![entry("world", "anyone")];
        let parent = SharedAcl::new(world.clone());
        let same = ids.fix_up_like(&world, Some(&parent)).unwrap();
        assert!(SharedAcl::ptr_eq(&same, &parent));
        // Expanded, then equal: shared too.
        let digest = SharedAcl::new(ids.fix_up(&[entry("auth", "")]).unwrap());
        let expanded = ids
            .fix_up_like(&[entry("auth", "")], Some(&digest))
            .unwrap();
        assert!(SharedAcl::ptr_eq(&expanded, &digest));
        // A repeated entry is dropped, as fix_up drops it.
        let twice = [world.clone(), world.clone()].concat();
        let once = ids.fix_up_like(&twice, Some(&parent)).unwrap();
        assert!(SharedAcl::ptr_eq(&once, &parent));
        let alone = ids.fix_up_like(&twice, None).unwrap();
        assert_eq!(*alone, world);
        // Invalid stays invalid, even where a parent holds the same list.
        for bad in [
            entry("world", "someone"),
            entry("sasl", "user"),
            entry("ip", "1.2.3"),
        ] {
            let held = SharedAcl::new(vec![bad.clone()]);
            assert_eq!(
                ids.fix_up_like(&[bad], Some(&held)),
                Err(ErrorCode::InvalidAcl)
            );
        }
        assert_eq!(
            ids.fix_up_like(&[], Some(&parent)),
            Err(ErrorCode::InvalidAcl)
        );
    }
}
