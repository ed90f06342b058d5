//! Client SASL in the core: the users a DIGEST-MD5 exchange checks, the
//! SASL super user, and where nonces come from. Each connection runs its
//! own exchange ([`digest_md5::DigestMd5`]); a completed one adds
//! `sasl:` + the user to the connection's identities.

pub mod digest_md5;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// Fresh, unpredictable nonces for DIGEST-MD5 challenges (the OS's
/// randomness in a server; tests may give fixed ones).
pub trait NonceSource: Send + Sync {
    /// A new nonce: printable, without `"` or `\`.
    fn nonce(&self) -> String;
}

/// What the core needs to authenticate clients with SASL.
#[derive(Clone)]
pub struct SaslSettings {
    /// DIGEST-MD5 users and their passwords (the JAAS `Server` section).
    pub users: Arc<BTreeMap<String, String>>,
    /// `superUser`: this SASL id is also `super`.
    pub super_user: Option<String>,
    /// Where challenges' nonces come from.
    pub nonces: Arc<dyn NonceSource>,
}

impl fmt::Debug for SaslSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the passwords.
        f.debug_struct("SaslSettings")
            .field("users", &self.users.keys().collect::<Vec<_>>())
            .field("super_user", &self.super_user)
            .finish_non_exhaustive()
    }
}
