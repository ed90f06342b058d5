//! SASL DIGEST-MD5 (RFC 2831) as ZooKeeper's JDK mechanism runs it, the
//! server's side and (for quorum SASL) the client's: realm and server name
//! `zk-sasl-md5`, protocol `zookeeper` for clients
//! (`zk-quorum-sasl-md5`, `zookeeper-quorum` between members), quality of
//! protection `auth` only, `md5-sess`, UTF-8.
//!
//! ```text
//!   client: (empty)            server: realm, nonce, qop, charset, algorithm
//!   client: username, cnonce,  server: rspauth (the server knows the password too)
//!           nc, digest-uri, response
//! ```
//!
//! The nonce comes from the caller (the OS's randomness in a server), so
//! the exchange itself is a pure function of what it is given.

use md5::{Digest, Md5};
use std::collections::BTreeMap;

/// Who the server is in an exchange: its protocol and its name, which is
/// also its realm (the digest-uri is `protocol/name`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Service {
    pub protocol: &'static str,
    pub name: &'static str,
}

/// A ZooKeeper server to its clients.
pub const CLIENT_SERVICE: Service = Service {
    protocol: "zookeeper",
    name: "zk-sasl-md5",
};

/// A member to the members that connect to it (quorum SASL).
pub const QUORUM_SERVICE: Service = Service {
    protocol: "zookeeper-quorum",
    name: "zk-quorum-sasl-md5",
};

/// Where a DIGEST-MD5 exchange stands, on the server's side.
#[derive(Debug)]
pub struct DigestMd5 {
    service: Service,
    nonce: String,
    state: State,
}

#[derive(Debug, PartialEq, Eq)]
enum State {
    /// The challenge has not been sent.
    Start,
    /// The challenge was sent; the client's response is due.
    Challenged,
    /// The exchange ended (either way): nothing more is taken.
    Over,
}

/// What the server answers a client token with.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// A challenge; the exchange goes on.
    Challenge(Vec<u8>),
    /// The client proved its password: the server's last token and the
    /// client's authorization id.
    Authenticated { token: Vec<u8>, user: String },
}

impl DigestMd5 {
    /// An exchange as `service`, whose challenge carries `nonce`
    /// (unpredictable, unique).
    pub fn new(service: Service, nonce: String) -> DigestMd5 {
        DigestMd5 {
            service,
            nonce,
            state: State::Start,
        }
    }

    /// Answers the client's next `token`; an error ends the exchange (and
    /// ZooKeeper closes the connection with AUTHFAILED).
    pub fn step(&mut self, token: &[u8], users: &BTreeMap<String, String>) -> Result<Step, String> {
        match std::mem::replace(&mut self.state, State::Over) {
            State::Start => {
                self.state = State::Challenged;
                Ok(Step::Challenge(self.challenge().into_bytes()))
            }
            State::Challenged => self.verify(token, users),
            State::Over => Err("DIGEST-MD5 authentication already completed".into()),
        }
    }

    fn challenge(&self) -> String {
        format!(
            "realm=\"{}\",nonce=\"{}\",qop=\"auth\",charset=utf-8,algorithm=md5-sess",
            self.service.name, self.nonce
        )
    }

    /// Checks the client's response against the user's password.
    fn verify(&self, token: &[u8], users: &BTreeMap<String, String>) -> Result<Step, String> {
        let text = std::str::from_utf8(token).map_err(|_| "a response that is not UTF-8")?;
        let fields = parse_fields(text)?;
        let field = |name: &str| {
            fields
                .get(name)
                .map(String::as_str)
                .ok_or_else(|| format!("the response has no {name}"))
        };
        let user = field("username")?;
        if fields.get("charset").is_some_and(|c| c != "utf-8") {
            return Err("a charset other than utf-8".into());
        }
        let realm = fields.get("realm").map(String::as_str).unwrap_or("");
        if !realm.is_empty() && realm != self.service.name {
            return Err(format!("nonexistent realm {realm:?}"));
        }
        if field("nonce")? != self.nonce {
            return Err("a stale or foreign nonce".into());
        }
        if u32::from_str_radix(field("nc")?, 16) != Ok(1) {
            return Err("a nonce count other than 1".into());
        }
        let qop = fields.get("qop").map(String::as_str).unwrap_or("auth");
        if qop != "auth" {
            return Err(format!("quality of protection {qop:?} (zkd offers auth)"));
        }
        let uri = field("digest-uri")?;
        let expected_uri = format!("{}/{}", self.service.protocol, self.service.name);
        if !uri.eq_ignore_ascii_case(&expected_uri) {
            return Err(format!("digest-uri {uri:?}, not {expected_uri:?}"));
        }
        let password = users
            .get(user)
            .ok_or_else(|| format!("user {user:?} is not a DIGEST-MD5 user"))?;
        let parts = Parts {
            user,
            realm,
            password,
            nonce: &self.nonce,
            cnonce: field("cnonce")?,
            nc: field("nc")?,
            qop,
            uri,
            authzid: fields.get("authzid").map(String::as_str),
        };
        let claimed = field("response")?.to_ascii_lowercase();
        if !same(&claimed, &parts.response("AUTHENTICATE")) {
            return Err(format!("a wrong password for {user:?}"));
        }
        Ok(Step::Authenticated {
            token: format!("rspauth={}", parts.response("")).into_bytes(),
            user: user.to_owned(),
        })
    }
}

/// The client's side of an exchange with `service`, as `user`: its answer
/// to the server's `challenge` (with the client's nonce `cnonce`), and
/// the `rspauth` token the server must send back.
pub fn answer(
    challenge: &[u8],
    service: Service,
    user: &str,
    password: &str,
    cnonce: &str,
) -> Result<(Vec<u8>, Vec<u8>), String> {
    let text = std::str::from_utf8(challenge).map_err(|_| "a challenge that is not UTF-8")?;
    let fields = parse_fields(text)?;
    let nonce = fields.get("nonce").ok_or("the challenge has no nonce")?;
    let realm = fields
        .get("realm")
        .map(String::as_str)
        .unwrap_or(service.name);
    let qops = fields.get("qop").map(String::as_str).unwrap_or("auth");
    if !qops.split(',').any(|q| q.trim() == "auth") {
        return Err(format!("the server offers qop {qops:?}, not auth"));
    }
    let uri = format!("{}/{}", service.protocol, service.name);
    let parts = Parts {
        user,
        realm,
        password,
        nonce,
        cnonce,
        nc: "00000001",
        qop: "auth",
        uri: &uri,
        authzid: None,
    };
    let quoted = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
    let response = format!(
        "charset=utf-8,username=\"{}\",realm=\"{}\",nonce=\"{}\",nc=00000001,cnonce=\"{}\",digest-uri=\"{uri}\",maxbuf=65536,response={},qop=auth",
        quoted(user),
        quoted(realm),
        quoted(nonce),
        quoted(cnonce),
        parts.response("AUTHENTICATE")
    );
    let rspauth = format!("rspauth={}", parts.response(""));
    Ok((response.into_bytes(), rspauth.into_bytes()))
}

/// What goes into a DIGEST-MD5 response value.
struct Parts<'a> {
    user: &'a str,
    realm: &'a str,
    password: &'a str,
    nonce: &'a str,
    cnonce: &'a str,
    nc: &'a str,
    qop: &'a str,
    uri: &'a str,
    authzid: Option<&'a str>,
}

impl Parts<'_> {
    /// RFC 2831's response-value, with A2's method `method`
    /// (`AUTHENTICATE` for the client's, empty for the server's rspauth).
    fn response(&self, method: &str) -> String {
        let mut secret = Md5::new();
        secret.update(hash_text(self.user));
        secret.update(b":");
        secret.update(hash_text(self.realm));
        secret.update(b":");
        secret.update(hash_text(self.password));
        let mut a1 = secret.finalize().to_vec();
        a1.extend_from_slice(format!(":{}:{}", self.nonce, self.cnonce).as_bytes());
        if let Some(authzid) = self.authzid {
            a1.extend_from_slice(format!(":{authzid}").as_bytes());
        }
        let a2 = format!("{method}:{}", self.uri);
        let kd = format!(
            "{}:{}:{}:{}:{}:{}",
            hex(&Md5::digest(&a1)),
            self.nonce,
            self.nc,
            self.cnonce,
            self.qop,
            hex(&Md5::digest(a2.as_bytes()))
        );
        hex(&Md5::digest(kd.as_bytes()))
    }
}

/// A user name, realm or password as it is hashed: ISO 8859-1 when every
/// character fits, else UTF-8 (RFC 2831 with `charset=utf-8`).
fn hash_text(s: &str) -> Vec<u8> {
    match s.chars().all(|c| (c as u32) < 256) {
        true => s.chars().map(|c| c as u8).collect(),
        false => s.as_bytes().to_vec(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Equal strings, compared without an early exit.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// `key=value` pairs separated by commas; a value is a token or a quoted
/// string with `\` escapes.
fn parse_fields(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut fields = BTreeMap::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace() || *c == ',') {
            chars.next();
        }
        if chars.peek().is_none() {
            return Ok(fields);
        }
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    None => return Err("an unclosed quoted value".into()),
                    Some('"') => break,
                    Some('\\') => value.extend(chars.next()),
                    Some(c) => value.push(c),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| *c != ',') {
                value.push(c);
            }
        }
        let key = key.trim().to_ascii_lowercase();
        if key.is_empty()
            || fields
                .insert(key.clone(), value.trim().to_owned())
                .is_some()
        {
            return Err(format!("a malformed or repeated field {key:?}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users() -> BTreeMap<String, String> {
        [("bob".to_owned(), "bobsecret".to_owned())].into()
    }

    /// bob's answer to `nonce`'s challenge with `password`.
    fn client_response(nonce: &str, password: &str, cnonce: &str) -> String {
        let challenge = DigestMd5::new(CLIENT_SERVICE, nonce.into()).challenge();
        let (response, _) = answer(
            challenge.as_bytes(),
            CLIENT_SERVICE,
            "bob",
            password,
            cnonce,
        )
        .unwrap();
        String::from_utf8(response).unwrap()
    }

    #[test]
    fn rfc_2831s_example_gives_its_response() {
        // RFC 2831 section 4, with its IMAP digest-uri and no md5-sess change.
        let parts = Parts {
            user: "chris",
            realm: "elwood.innosoft.com",
            password: "secret",
            nonce: "OA6MG9tEQGm2hh",
            cnonce: "OA6MHXh6VqTrRk",
            nc: "00000001",
            qop: "auth",
            uri: "imap/elwood.innosoft.com",
            authzid: None,
        };
        assert_eq!(
            parts.response("AUTHENTICATE"),
            "d388dad90d4bbd760a152321f2143af7"
        );
        assert_eq!(parts.response(""), "ea40f60335c427b5527b84dbabcdfffd");
    }

    #[test]
    fn the_right_password_authenticates_and_anything_else_fails() {
        let mut server = DigestMd5::new(CLIENT_SERVICE, "n0nce".into());
        let challenge = server.step(b"", &users()).unwrap();
        let Step::Challenge(c) = challenge else {
            panic!()
        };
        assert!(String::from_utf8(c).unwrap().contains("nonce=\"n0nce\""));
        let answer = server.step(
            client_response("n0nce", "bobsecret", "c").as_bytes(),
            &users(),
        );
        let Ok(Step::Authenticated { token, user }) = answer else {
            panic!("{answer:?}")
        };
        assert_eq!(user, "bob");
        assert!(token.starts_with(b"rspauth="));
        assert!(server.step(b"", &users()).is_err(), "nothing after the end");

        let mut server = DigestMd5::new(CLIENT_SERVICE, "n0nce".into());
        server.step(b"", &users()).unwrap();
        assert!(server
            .step(client_response("n0nce", "wrong", "c").as_bytes(), &users())
            .is_err());
        let mut server = DigestMd5::new(CLIENT_SERVICE, "other".into());
        server.step(b"", &users()).unwrap();
        assert!(server
            .step(
                client_response("n0nce", "bobsecret", "c").as_bytes(),
                &users()
            )
            .is_err());
        for garbage in [&b"\xff\xfe"[..], b"username=\"bob", b"=,=,", b""] {
            let mut server = DigestMd5::new(CLIENT_SERVICE, "n0nce".into());
            server.step(b"", &users()).unwrap();
            assert!(server.step(garbage, &users()).is_err());
        }
    }
}
