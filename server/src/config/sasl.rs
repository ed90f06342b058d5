//! Client SASL with ZooKeeper's keys: the JAAS file's `Server` section
//! (`java.security.auth.login.config`, a JVM property in ZooKeeper, a
//! zoo.cfg key here), the SASL super user (`superUser`), and refusing
//! sessions that have not authenticated (`sessionRequireClientSASLAuth`,
//! or `enforce.auth.enabled` with `enforce.auth.schemes`).

use super::jaas::Jaas;
use super::{err, ConfigError, Props, X509_PROVIDER};
use std::collections::BTreeMap;

/// ZooKeeper's SASL authentication provider class.
pub const SASL_PROVIDER: &str = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider";

/// The zoo.cfg key naming the JAAS file.
pub const JAAS_KEY: &str = "java.security.auth.login.config";

/// DIGEST-MD5 users a client may authenticate as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaslConfig {
    /// User names and their passwords (the `Server` section's `user_NAME`).
    pub users: BTreeMap<String, String>,
    /// `superUser`: this SASL id is also `super`.
    pub super_user: Option<String>,
}

/// The JAAS file's `Server` users, if `java.security.auth.login.config`
/// names one: a file ZooKeeper would fail to start on is an error here too.
pub(super) fn sasl(p: &mut Props) -> Result<Option<SaslConfig>, ConfigError> {
    let super_user = p.get("superUser").map(str::to_owned);
    let Some(path) = p.get(JAAS_KEY).map(str::to_owned) else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| err(JAAS_KEY, format!("cannot read {path}: {e}")))?;
    let jaas = Jaas::parse(&text).map_err(|e| err(JAAS_KEY, format!("{path}: {e}")))?;
    let users = jaas
        .digest_users("Server")
        .map_err(|e| err(JAAS_KEY, format!("{path}: {e}")))?;
    Ok(Some(SaslConfig { users, super_user }))
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
