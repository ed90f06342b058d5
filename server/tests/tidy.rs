//! Tidy: `server/src/core` stays sans-IO and deterministic. It may not use
//! tokio, sockets, files, sled, clocks, unseeded randomness, or hash maps
//! (whose iteration order is random). Comments are ignored.

use std::path::Path;

const BANNED: [(&str, &str); 14] = [
    ("tokio", "async runtime"),
    ("TcpStream", "sockets"),
    ("TcpListener", "sockets"),
    ("UdpSocket", "sockets"),
    ("std::fs", "files"),
    ("sled", "storage engine"),
    ("std::time", "clock"),
    ("Instant", "clock"),
    ("SystemTime", "clock"),
    ("thread_rng", "unseeded randomness"),
    ("rand::", "unseeded randomness"),
    ("HashMap", "random iteration order"),
    ("HashSet", "random iteration order"),
    ("std::thread", "threads"),
];

fn code_of(line: &str) -> &str {
    let trimmed = line.trim_start();
    if trimmed.starts_with("//") {
        return "";
    }
    match line.find("//") {
        Some(i) if !line[..i].contains('"') => &line[..i],
        _ => line,
    }
}

fn scan(dir: &Path, findings: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).expect("read core dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            scan(&path, findings);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).expect("read source");
            for (n, line) in text.lines().enumerate() {
                let code = code_of(line);
                for (word, why) in BANNED {
                    if code.contains(word) {
                        findings.push(format!(
                            "{}:{}: `{word}` ({why}): {}",
                            path.display(),
                            n + 1,
                            line.trim()
                        ));
                    }
                }
            }
        }
    }
}

#[test]
fn core_is_sans_io_and_deterministic() {
    let core = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/core");
    let mut findings = Vec::new();
    scan(&core, &mut findings);
    assert!(
        findings.is_empty(),
        "banned in server/src/core:\n{}",
        findings.join("\n")
    );
}

#[test]
fn the_scanner_finds_what_it_should() {
    let mut findings = Vec::new();
    let dir = std::env::temp_dir().join(format!("tidy-selftest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("bad.rs"),
        "// tokio in a comment is fine\nuse std::collections::HashMap;\n",
    )
    .unwrap();
    scan(&dir, &mut findings);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert!(findings[0].contains("HashMap"));
}
