//! The JAAS login file ZooKeeper takes its SASL users from
//! (`-Djava.security.auth.login.config`; zkd reads the zoo.cfg key of the
//! same name): sections of login modules with their options,
//!
//! ```text
//! Server {
//!     org.apache.zookeeper.server.auth.DigestLoginModule required
//!     user_super="adminsecret"
//!     user_bob="bobsecret";
//! };
//! ```
//!
//! with `//` and `/* */` comments. Only ZooKeeper's DigestLoginModule is
//! taken: Kerberos (Krb5LoginModule) needs a KDC and GSSAPI, which zkd has
//! not.

use crate::secret::{is_secret_key, Secret, REDACTED};
use std::collections::BTreeMap;
use std::fmt;

/// ZooKeeper's DIGEST-MD5 login module.
pub const DIGEST_LOGIN_MODULE: &str = "org.apache.zookeeper.server.auth.DigestLoginModule";

/// One login module entry: its class, flag and options.
#[derive(Clone, PartialEq, Eq)]
pub struct LoginModule {
    pub class: String,
    pub flag: String,
    pub options: BTreeMap<String, String>,
}

// The options with every password shown as `********`.
impl fmt::Debug for LoginModule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let options: BTreeMap<&str, &str> = self
            .options
            .iter()
            .map(|(k, v)| match is_secret_key(k) {
                true => (k.as_str(), REDACTED),
                false => (k.as_str(), v.as_str()),
            })
            .collect();
        f.debug_struct("LoginModule")
            .field("class", &self.class)
            .field("flag", &self.flag)
            .field("options", &options)
            .finish()
    }
}

/// A parsed JAAS file: its sections by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Jaas {
    pub sections: BTreeMap<String, Vec<LoginModule>>,
}

impl Jaas {
    /// Parses `text`; the error says where it went wrong.
    pub fn parse(text: &str) -> Result<Jaas, String> {
        let mut tokens = tokenize(text)?.into_iter().peekable();
        let mut jaas = Jaas::default();
        while let Some(name) = tokens.next() {
            let name = name.word()?;
            expect(tokens.next(), "{")?;
            let mut modules = Vec::new();
            loop {
                match tokens.next() {
                    Some(Token::Punct('}')) => break,
                    Some(Token::Word(class)) => {
                        let flag = tokens.next().ok_or("a flag after the module")?.word()?;
                        let mut options = BTreeMap::new();
                        loop {
                            match tokens.next() {
                                Some(Token::Punct(';')) => break,
                                Some(Token::Word(key)) => {
                                    expect(tokens.next(), "=")?;
                                    let value = match tokens.next() {
                                        Some(Token::Word(v)) | Some(Token::Quoted(v)) => v,
                                        _ => return Err(format!("no value for {key}")),
                                    };
                                    options.insert(key, value);
                                }
                                other => {
                                    return Err(format!(
                                        "unexpected {} in {name}",
                                        describe(&other)
                                    ))
                                }
                            }
                        }
                        modules.push(LoginModule {
                            class,
                            flag,
                            options,
                        });
                    }
                    other => return Err(format!("unexpected {} in {name}", describe(&other))),
                }
            }
            expect(tokens.next(), ";")?;
            jaas.sections.insert(name, modules);
        }
        Ok(jaas)
    }

    /// The users (`user_NAME="password"`) of `section`'s DigestLoginModule;
    /// an error when the section is missing or holds another module.
    pub fn digest_users(&self, section: &str) -> Result<BTreeMap<String, String>, String> {
        let modules = self
            .sections
            .get(section)
            .ok_or_else(|| format!("no JAAS configuration section named '{section}'"))?;
        let mut users = BTreeMap::new();
        for module in modules {
            if module.class != DIGEST_LOGIN_MODULE {
                return Err(format!(
                    "section {section}: {} is not a login module zkd has (it has DIGEST-MD5's, {DIGEST_LOGIN_MODULE})",
                    module.class
                ));
            }
            for (key, value) in &module.options {
                if let Some(user) = key.strip_prefix("user_") {
                    users.insert(user.to_owned(), value.clone());
                }
            }
        }
        Ok(users)
    }
}

impl Jaas {
    /// The `username` and `password` of `section`'s DigestLoginModule (a
    /// client's, or a member's `QuorumLearner`).
    pub fn digest_login(&self, section: &str) -> Result<(String, Secret), String> {
        let modules = self
            .sections
            .get(section)
            .ok_or_else(|| format!("no JAAS configuration section named '{section}'"))?;
        let module = modules
            .iter()
            .find(|m| m.class == DIGEST_LOGIN_MODULE)
            .ok_or_else(|| format!("section {section} has no {DIGEST_LOGIN_MODULE}"))?;
        let get = |key: &str| {
            module
                .options
                .get(key)
                .cloned()
                .ok_or_else(|| format!("section {section} has no {key}"))
        };
        Ok((get("username")?, Secret::new(get("password")?)))
    }
}

// No Debug: an error must never print a token, which may be a password.
#[derive(Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Punct(char),
}

impl Token {
    fn word(self) -> Result<String, String> {
        match self {
            Token::Word(w) => Ok(w),
            other => Err(format!("expected a name, found {}", describe(&Some(other)))),
        }
    }
}

fn expect(token: Option<Token>, punct: &str) -> Result<(), String> {
    match token {
        Some(Token::Punct(c)) if punct.starts_with(c) => Ok(()),
        other => Err(format!("expected {punct:?}, found {}", describe(&other))),
    }
}

/// What an error says it found: the kind of token, never its text.
fn describe(token: &Option<Token>) -> String {
    match token {
        None => "the end of the file".into(),
        Some(Token::Word(_)) => "a word".into(),
        Some(Token::Quoted(_)) => "a quoted value".into(),
        Some(Token::Punct(c)) => format!("'{c}'"),
    }
}

/// The character a `\` stands for in a quoted string, as Java's
/// `StreamTokenizer` (which reads JAAS files) reads it: C's escapes,
/// up to three octal digits, and any other character as itself.
fn escaped(chars: &mut std::iter::Peekable<std::str::Chars>) -> char {
    let Some(c) = chars.next() else {
        return '\\';
    };
    match c {
        'a' => '\x07',
        'b' => '\x08',
        'f' => '\x0c',
        'n' => '\n',
        'r' => '\r',
        't' => '\t',
        'v' => '\x0b',
        '0'..='7' => {
            let mut code = c.to_digit(8).unwrap_or(0);
            // A third digit only when the first is 0-3, as Java keeps it a byte.
            let most = if c <= '3' { 2 } else { 1 };
            for _ in 0..most {
                match chars.peek().and_then(|d| d.to_digit(8)) {
                    Some(d) => {
                        code = code * 8 + d;
                        chars.next();
                    }
                    None => break,
                }
            }
            char::from_u32(code).unwrap_or('\0')
        }
        other => other,
    }
}

/// Words, quoted strings (with `\` escapes) and `{};=`, comments skipped.
fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '{' | '}' | ';' | '=' => tokens.push(Token::Punct(c)),
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                loop {
                    match chars.next() {
                        None => return Err("an unclosed /* comment".into()),
                        Some('/') if last == '*' => break,
                        Some(c) => last = c,
                    }
                }
            }
            '"' => {
                let mut value = String::new();
                loop {
                    match chars.next() {
                        None => return Err("an unclosed quoted string".into()),
                        Some('"') => break,
                        Some('\\') => value.push(escaped(&mut chars)),
                        Some(c) => value.push(c),
                    }
                }
                tokens.push(Token::Quoted(value));
            }
            c => {
                let mut word = String::from(c);
                while let Some(&next) = chars.peek() {
                    if next.is_whitespace() || "{};=\"".contains(next) {
                        break;
                    }
                    word.push(next);
                    chars.next();
                }
                tokens.push(Token::Word(word));
            }
        }
    }
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zookeepers_sample_file_gives_its_users() {
        let text = r#"
            /* the server's users */
            Server {
                org.apache.zookeeper.server.auth.DigestLoginModule required
                user_super="adminsecret"
                user_bob="bob \"s\" secret"; // bob
            };
            Client {
                org.apache.zookeeper.server.auth.DigestLoginModule required
                username="bob"
                password="bobsecret";
            };
        "#;
        let jaas = Jaas::parse(text).unwrap();
        let users = jaas.digest_users("Server").unwrap();
        assert_eq!(users["super"], "adminsecret");
        assert_eq!(users["bob"], "bob \"s\" secret");
        assert_eq!(jaas.sections["Client"][0].options["username"], "bob");
        assert!(jaas.digest_users("QuorumServer").is_err());
    }

    #[test]
    fn kerberos_and_broken_files_are_refused() {
        let krb =
            "Server { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true; };";
        let jaas = Jaas::parse(krb).unwrap();
        assert!(jaas
            .digest_users("Server")
            .unwrap_err()
            .contains("Krb5LoginModule"));
        for broken in [
            "Server {",
            "Server { m required a=\"b; };",
            "Server { m required a; };",
        ] {
            assert!(Jaas::parse(broken).is_err(), "{broken}");
        }
    }

    #[test]
    fn quoted_values_read_javas_escapes() {
        let text = r#"Server { m required user_a="t\tab\101\\q\"" user_b="\z"; };"#;
        let jaas = Jaas::parse(text).unwrap();
        let options = &jaas.sections["Server"][0].options;
        assert_eq!(options["user_a"], "t\tabA\\q\"");
        assert_eq!(options["user_b"], "z");
    }

    #[test]
    fn neither_errors_nor_debug_show_a_password() {
        for broken in [
            r#"Server { m required user_bob="hunter2" "hunter2"; };"#,
            r#"Server { m required user_bob="hunter2" = hunter2; };"#,
            r#"Server { m required password = "hunter2" }; "#,
            r#"Server { "hunter2" }; "#,
        ] {
            let e = Jaas::parse(broken).unwrap_err();
            assert!(!e.contains("hunter2"), "{broken}: {e}");
        }
        let text = r#"Client { m required username="bob" password="hunter2"; };"#;
        let jaas = Jaas::parse(text).unwrap();
        let shown = format!("{jaas:?}");
        assert!(
            !shown.contains("hunter2") && shown.contains("bob"),
            "{shown}"
        );
    }
}
