//! zoo.cfg read as ZooKeeper reads it, with `java.util.Properties.load`:
//! `#`/`!` comments, `=`, `:` or blanks between key and value, a line
//! ending in an odd number of `\` continued on the next (its leading blanks
//! dropped), `\t \n \r \f \uXXXX` escapes and `\` before any other
//! character standing for that character. Keys and values are then
//! trimmed, as ZooKeeper's `QuorumPeerConfig` trims them.

use crate::secret::{is_secret_key, REDACTED};
use std::collections::BTreeMap;
use std::ops::Range;

/// One `key=value` entry as read, and the natural lines it spans.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub key: String,
    pub value: String,
    pub lines: Range<usize>,
}

/// Every entry of `text`, in file order (a later one for the same key
/// wins, as in `Properties`).
pub fn entries(text: &str) -> Vec<Entry> {
    let lines = natural_lines(text);
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let first = i;
        let line = lines[i].trim_start_matches(is_blank);
        i += 1;
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let mut logical = line.to_owned();
        while ends_in_escape(&logical) {
            logical.pop();
            let Some(next) = lines.get(i) else { break };
            logical.push_str(next.trim_start_matches(is_blank));
            i += 1;
        }
        let (key, value) = split(&logical);
        out.push(Entry {
            key: java_trim(&unescape(key)).to_owned(),
            value: java_trim(&unescape(value)).to_owned(),
            lines: first..i,
        });
    }
    out
}

/// `text` as a map; keys lose a `zookeeper.` prefix, since ZooKeeper reads
/// the system properties it makes of unknown keys with or without it.
pub fn parse_properties(text: &str) -> BTreeMap<String, String> {
    entries(text)
        .into_iter()
        .map(|e| {
            let key = e.key.strip_prefix("zookeeper.").unwrap_or(&e.key);
            (key.to_owned(), e.value)
        })
        .collect()
}

/// `text` with each secret's value (a password, the super digest)
/// replaced by `********`; every other line as it was.
pub fn redacted(text: &str) -> String {
    let lines = natural_lines(text);
    let mut secret_at = BTreeMap::new();
    for entry in entries(text).into_iter().filter(|e| is_secret_key(&e.key)) {
        secret_at.insert(entry.lines.start, entry);
    }
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < lines.len() {
        match secret_at.get(&i) {
            Some(entry) => {
                out.push_str(&format!("{}={REDACTED}\n", entry.key));
                i = entry.lines.end;
            }
            None => {
                out.push_str(lines[i]);
                out.push('\n');
                i += 1;
            }
        }
    }
    out
}

/// Lines as `Properties` ends them: `\n`, `\r\n` or `\r`.
fn natural_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut rest = text;
    while let Some(end) = rest.find(['\n', '\r']) {
        lines.push(&rest[..end]);
        let skip = if rest[end..].starts_with("\r\n") {
            2
        } else {
            1
        };
        rest = &rest[end + skip..];
    }
    if !rest.is_empty() {
        lines.push(rest);
    }
    lines
}

fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\x0c')
}

/// Whether `line` ends in an odd number of backslashes.
fn ends_in_escape(line: &str) -> bool {
    line.chars().rev().take_while(|&c| c == '\\').count() % 2 == 1
}

/// The raw key and value of a logical line: the key ends at the first
/// unescaped `=`, `:` or blank; blanks and one `=` or `:` follow it.
fn split(line: &str) -> (&str, &str) {
    let mut escaped = false;
    let mut key_end = line.len();
    for (at, c) in line.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '=' || c == ':' || is_blank(c) {
            key_end = at;
            break;
        }
    }
    let rest = line[key_end..].trim_start_matches(is_blank);
    let rest = rest
        .strip_prefix(['=', ':'])
        .map_or(rest, |r| r.trim_start_matches(is_blank));
    (&line[..key_end], rest)
}

/// `Properties`' escapes read; a malformed `\u` is kept as written.
fn unescape(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let hex: String = chars.clone().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(decoded) if hex.len() == 4 => {
                        out.push(decoded);
                        chars.nth(3);
                    }
                    _ => out.push('u'),
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

/// Java's `String.trim`: every character up to U+0020 at either end.
fn java_trim(s: &str) -> &str {
    s.trim_matches(|c: char| c <= ' ')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(text: &str) -> Vec<(String, String)> {
        parse_properties(text).into_iter().collect()
    }

    fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut v: Vec<_> = expected
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn separators_comments_and_blanks() {
        let text = "# a comment\n! another\n\n  tickTime = 2000\ndataDir:/d\nclientPort 2181\ninitLimit\t=\t5 \r\nsyncLimit=\n";
        assert_eq!(
            map(text),
            pairs(&[
                ("tickTime", "2000"),
                ("dataDir", "/d"),
                ("clientPort", "2181"),
                ("initLimit", "5"),
                ("syncLimit", ""),
            ])
        );
    }

    #[test]
    fn escapes_and_continuations_as_java_reads_them() {
        let text = "ssl.keyStore.password=pa\\\\ss\\=w\\:o\\u0072d\nserver.1=127.0.0.1:\\\n    2888:3888\na\\ b=c\\\\\ncomment=#not one\nend=\\\n";
        assert_eq!(
            map(text),
            pairs(&[
                ("ssl.keyStore.password", "pa\\ss=w:ord"),
                ("server.1", "127.0.0.1:2888:3888"),
                ("a b", "c\\"),
                ("comment", "#not one"),
                ("end", ""),
            ])
        );
    }

    #[test]
    fn the_zookeeper_prefix_is_dropped_and_the_last_value_wins() {
        let text = "zookeeper.skipACL=yes\nx=1\nx=2\n";
        assert_eq!(map(text), pairs(&[("skipACL", "yes"), ("x", "2")]));
    }

    #[test]
    fn redaction_hides_every_secret_and_keeps_the_rest() {
        let text = "# keys\ntickTime=2000\nssl.keyStore.password=hunter2\nssl.trustStore.password : \\\n  hunter3\nzookeeper.DigestAuthenticationProvider.superDigest=super:D/ig=\nssl.keyStore.passwordPath=/etc/pw\n";
        let shown = redacted(text);
        assert_eq!(
            shown,
            "# keys\ntickTime=2000\nssl.keyStore.password=********\nssl.trustStore.password=********\nzookeeper.DigestAuthenticationProvider.superDigest=********\nssl.keyStore.passwordPath=/etc/pw\n"
        );
        assert!(!shown.contains("hunter") && !shown.contains("D/ig"));
    }
}
