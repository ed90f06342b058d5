//! SASL with ZooKeeper's keys. For clients: the JAAS file's `Server`
//! section (`java.security.auth.login.config`, a JVM property in
//! ZooKeeper, a zoo.cfg key here), the SASL super user (`superUser`), and
//! refusing sessions that have not authenticated
//! (`sessionRequireClientSASLAuth`, or `enforce.auth.enabled` with
//! `enforce.auth.schemes`). Between members: `quorum.auth.*` with the
//! JAAS `QuorumServer` and `QuorumLearner` sections.

use super::jaas::Jaas;
use super::{err, ConfigError, Props, X509_PROVIDER};
use crate::secret::Secret;
use std::collections::BTreeMap;
use std::fmt;

/// ZooKeeper's SASL authentication provider class.
pub const SASL_PROVIDER: &str = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider";

/// The zoo.cfg key naming the JAAS file.
pub const JAAS_KEY: &str = "java.security.auth.login.config";

/// DIGEST-MD5 users a client may authenticate as.
#[derive(Clone, PartialEq, Eq)]
pub struct SaslConfig {
    /// User names and their passwords (the `Server` section's `user_NAME`).
    pub users: BTreeMap<String, String>,
    /// `superUser`: this SASL id is also `super`.
    pub super_user: Option<String>,
}

/// SASL between members (`quorum.auth.enableSasl`).
#[derive(Clone, PartialEq, Eq)]
pub struct QuorumSaslConfig {
    /// `quorum.auth.learnerRequireSasl`: a member dialing another closes
    /// the link unless it authenticated.
    pub learner_required: bool,
    /// `quorum.auth.serverRequireSasl`: a member closes links from others
    /// that did not authenticate.
    pub server_required: bool,
    /// Who may connect (the `QuorumServer` section's `user_NAME`).
    pub server_users: BTreeMap<String, String>,
    /// Who this member is when it connects (the `QuorumLearner` section's
    /// `username` and `password`).
    pub learner: (String, Secret),
}

// Users by name only: never their passwords.
impl fmt::Debug for SaslConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SaslConfig")
            .field("users", &self.users.keys().collect::<Vec<_>>())
            .field("super_user", &self.super_user)
            .finish()
    }
}

impl fmt::Debug for QuorumSaslConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QuorumSaslConfig")
            .field("learner_required", &self.learner_required)
            .field("server_required", &self.server_required)
            .field(
                "server_users",
                &self.server_users.keys().collect::<Vec<_>>(),
            )
            .field("learner", &self.learner)
            .finish()
    }
}

/// The JAAS file `java.security.auth.login.config` names, parsed, with its path.
pub(super) fn jaas_file(p: &mut Props) -> Result<Option<(String, Jaas)>, ConfigError> {
    let Some(path) = p.get(JAAS_KEY).map(str::to_owned) else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| err(JAAS_KEY, format!("cannot read {path}: {e}")))?;
    let jaas = Jaas::parse(&text).map_err(|e| err(JAAS_KEY, format!("{path}: {e}")))?;
    Ok(Some((path, jaas)))
}

/// The JAAS file's `Server` users. As in ZooKeeper, a file without that
/// section leaves client SASL off; one zkd cannot use is an error.
pub(super) fn sasl(
    p: &mut Props,
    jaas: Option<&(String, Jaas)>,
) -> Result<Option<SaslConfig>, ConfigError> {
    let super_user = p.get("superUser").map(str::to_owned);
    let Some((path, jaas)) = jaas else {
        return Ok(None);
    };
    if !jaas.sections.contains_key("Server") {
        return Ok(None);
    }
    let users = jaas
        .digest_users("Server")
        .map_err(|e| err(JAAS_KEY, format!("{path}: {e}")))?;
    Ok(Some(SaslConfig { users, super_user }))
}

/// `quorum.auth.*`: None unless `quorum.auth.enableSasl`; then the JAAS
/// file must hold both quorum sections (ZooKeeper fails to start without).
pub(super) fn quorum_sasl(
    p: &mut Props,
    jaas: Option<&(String, Jaas)>,
) -> Result<Option<QuorumSaslConfig>, ConfigError> {
    let enabled = p.num("quorum.auth.enableSasl")?.unwrap_or(false);
    let learner_required = p.num("quorum.auth.learnerRequireSasl")?.unwrap_or(false);
    let server_required = p.num("quorum.auth.serverRequireSasl")?.unwrap_or(false);
    let server_section = p
        .get("quorum.auth.server.saslLoginContext")
        .unwrap_or("QuorumServer")
        .to_owned();
    let learner_section = p
        .get("quorum.auth.learner.saslLoginContext")
        .unwrap_or("QuorumLearner")
        .to_owned();
    if p.get("quorum.auth.kerberos.servicePrincipal").is_some() {
        tracing::warn!("quorum.auth.kerberos.servicePrincipal: zkd has no Kerberos; ignored");
    }
    if !enabled {
        return Ok(None);
    }
    let Some((path, jaas)) = jaas else {
        return Err(err(JAAS_KEY, "is required with quorum.auth.enableSasl"));
    };
    let at = |e: String| err(JAAS_KEY, format!("{path}: {e}"));
    Ok(Some(QuorumSaslConfig {
        learner_required,
        server_required,
        server_users: jaas.digest_users(&server_section).map_err(at)?,
        learner: jaas.digest_login(&learner_section).map_err(at)?,
    }))
}

/// The auth schemes every session must hold one of before its requests
/// are served (`sessionRequireClientSASLAuth=true` is `sasl`); None when
/// not enforced. Each must be a scheme this server has: ip, digest, and
/// those of the `authProvider.*` classes.
pub(super) fn enforced_schemes(p: &mut Props) -> Result<Option<Vec<String>>, ConfigError> {
    let classes = super::auth_providers(p);
    let mut providers = vec!["ip", "digest"];
    for (class, scheme) in [(X509_PROVIDER, "x509"), (SASL_PROVIDER, "sasl")] {
        if classes.iter().any(|c| c == class) {
            providers.push(scheme);
        }
    }
    let schemes: Vec<String> = if p.num("sessionRequireClientSASLAuth")?.unwrap_or(false) {
        vec!["sasl".into()]
    } else if p.num("enforce.auth.enabled")?.unwrap_or(false) {
        let listed = p.get("enforce.auth.schemes").unwrap_or_default();
        let schemes: Vec<String> = listed
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        if schemes.is_empty() {
            return Err(err(
                "enforce.auth.schemes",
                "must be configured when enforce.auth.enabled is true",
            ));
        }
        schemes
    } else {
        let _ = p.get("enforce.auth.schemes");
        return Ok(None);
    };
    if let Some(missing) = schemes.iter().find(|s| !providers.contains(&s.as_str())) {
        return Err(err(
            "enforce.auth.schemes",
            format!("authentication scheme {missing} is not available (no authProvider for it)"),
        ));
    }
    Ok(Some(schemes))
}
