//! Path rules shared by validation and the tree (`PathUtils` in ZooKeeper).

/// The parent of an absolute path (`/a/b` → `/a`, `/a` → `/`).
pub fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// The last segment of an absolute path.
pub fn name(path: &str) -> &str {
    match path.rfind('/') {
        Some(i) => &path[i + 1..],
        None => path,
    }
}

/// Joins a parent and a child name.
pub fn join(parent: &str, name: &str) -> String {
    if parent == "/" {
        format!("/{name}")
    } else {
        format!("{parent}/{name}")
    }
}

/// ZooKeeper's `validatePath`: Err carries the reason, for logs.
pub fn validate(path: &str) -> Result<(), &'static str> {
    if path.is_empty() {
        return Err("path must not be empty");
    }
    if !path.starts_with('/') {
        return Err("path must start with /");
    }
    if path.len() == 1 {
        return Ok(());
    }
    if path.ends_with('/') {
        return Err("path must not end with /");
    }
    for segment in path[1..].split('/') {
        match segment {
            "" => return Err("empty node name"),
            "." | ".." => return Err("relative paths not allowed"),
            _ => {}
        }
    }
    if path.chars().any(is_invalid_char) {
        return Err("invalid character");
    }
    Ok(())
}

fn is_invalid_char(c: char) -> bool {
    let c = c as u32;
    // Java sees code points above U+FFFF as surrogate pairs, which fall in the
    // rejected U+D800..U+F8FF range; U+FFFD (malformed UTF-8) is in U+FFF0..U+FFFF.
    c <= 0x1f
        || (0x7f..=0x9f).contains(&c)
        || (0xd800..=0xf8ff).contains(&c)
        || (0xfff0..=0xffff).contains(&c)
        || c > 0xffff
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_and_names() {
        assert_eq!(parent("/a/b"), "/a");
        assert_eq!(parent("/a"), "/");
        assert_eq!(name("/a/b"), "b");
        assert_eq!(join("/", "a"), "/a");
        assert_eq!(join("/a", "b"), "/a/b");
    }

    #[test]
    fn validation_matches_path_utils() {
        for ok in ["/", "/a", "/a/b", "/.foo", "/a..b", "/ü"] {
            assert_eq!(validate(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "a",
            "/a/",
            "//",
            "/a//b",
            "/.",
            "/a/..",
            "/a\u{0}",
            "/\u{1f600}",
            "/\u{fffd}",
            "/\u{e000}",
        ] {
            assert!(validate(bad).is_err(), "{bad:?}");
        }
    }
}
