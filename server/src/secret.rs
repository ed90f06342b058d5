//! Passwords and digests read from the configuration: kept for the code
//! that needs them and shown nowhere else (`Debug`, the AdminServer,
//! `conf`), as `********`.

use std::fmt;

/// What a secret is shown as.
pub const REDACTED: &str = "********";

/// A password or digest; its `Debug` never shows it.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The value itself, for the code that checks or uses it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

/// Whether a zoo.cfg key (or a JAAS option) holds a secret: any password
/// (`ssl.keyStore.password`, a JAAS `user_NAME`...) and the super digest.
/// A `passwordPath` names a file and is not one.
pub fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    key.ends_with("password") || key.ends_with("superdigest") || key.starts_with("user_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_never_debugged() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?}"), REDACTED);
        assert_eq!(format!("{:?}", Some(s.clone())), "Some(********)");
        assert_eq!(s.expose(), "hunter2");
    }

    #[test]
    fn secret_keys_are_passwords_and_digests() {
        for key in [
            "ssl.keyStore.password",
            "ssl.quorum.trustStore.password",
            "DigestAuthenticationProvider.superDigest",
            "zookeeper.DigestAuthenticationProvider.superDigest",
            "user_bob",
            "password",
        ] {
            assert!(is_secret_key(key), "{key}");
        }
        for key in [
            "ssl.keyStore.passwordPath",
            "ssl.keyStore.location",
            "dataDir",
        ] {
            assert!(!is_secret_key(key), "{key}");
        }
    }
}
