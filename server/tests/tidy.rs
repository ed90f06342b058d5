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

/// Lines of code (comments aside) in `dir`'s files that hold any of
/// `words`; with `skip_tests`, files of test code only are passed over.
fn code_holding(dir: &Path, words: &[&str], skip_tests: bool, findings: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            code_holding(&path, words, skip_tests, findings);
        } else if path.extension().is_some_and(|e| e == "rs") && !(skip_tests && test_only(&path)) {
            let text = std::fs::read_to_string(&path).expect("read source");
            for (n, line) in text.lines().enumerate() {
                if words.iter().any(|w| code_of(line).contains(w)) {
                    findings.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                }
            }
        }
    }
}

/// The driver the runtime and the simulator share brings no async runtime
/// and reaches nothing of the runtime's (issue 49, item 4).
#[test]
fn the_shared_driver_holds_no_tokio_and_no_runtime() {
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/driver");
    let mut findings = Vec::new();
    code_holding(&driver, &["tokio", "runtime::"], true, &mut findings);
    assert!(
        findings.is_empty(),
        "in server/src/driver:\n{}",
        findings.join("\n")
    );
}

/// The simulator drives the members as the runtime does, through the
/// shared driver, and imports nothing of the runtime.
#[test]
fn the_simulator_imports_nothing_of_the_runtime() {
    let sim = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/sim");
    let mut findings = Vec::new();
    code_holding(&sim, &["runtime::"], false, &mut findings);
    assert!(
        findings.is_empty(),
        "in server/src/sim:\n{}",
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

/// Production functions longer than this need a named exception.
const MAX_FN_LINES: usize = 70;

/// The longer production functions, each at most as long as it was when
/// the ratchet began (issue 35; `client-tests/src` joined it in issue 50):
/// one may shrink (then lower or drop its entry), never grow, and no other
/// may pass `MAX_FN_LINES`.
const LONG_FNS: [(&str, &str, usize); 16] = [
    ("server/src/launcher/supervise.rs", "supervise", 105),
    ("server/src/driver/peer_wire.rs", "encode_zab", 85),
    ("server/src/driver/peer_wire.rs", "decode_single", 76),
    ("server/src/core/pipeline/read.rs", "execute", 83),
    ("server/src/runtime/peer/quorum_link.rs", "accept", 74),
    ("server/src/core/pipeline/prep.rs", "create", 75),
    ("client-tests/src/nemesis/checker/sessions.rs", "check", 100),
    ("client-tests/src/nemesis/checker/queue.rs", "check", 112),
    (
        "client-tests/src/nemesis/checker/register/mod.rs",
        "check_key",
        75,
    ),
    (
        "client-tests/src/nemesis/checker/register/wgl.rs",
        "wgl",
        93,
    ),
    ("client-tests/src/nemesis/checker/set.rs", "check", 114),
    ("client-tests/src/nemesis/checker/counter.rs", "check", 77),
    ("client-tests/src/bin/lazyfs/state.rs", "rename", 90),
    ("client-tests/src/bin/nemesis/main.rs", "run_cell", 115),
    ("client-tests/src/bin/bench.rs", "run_phase_at", 96),
    ("client-tests/src/bin/bench/ensemble.rs", "print", 86),
];

/// Whether `path` holds only test code (whole files; `#[cfg(test)]`
/// modules inside a file are skipped by [`function_lengths`]).
fn test_only(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let text = path.to_string_lossy();
    name == "tests.rs"
        || name.ends_with("_tests.rs")
        || name == "conformance.rs"
        || text.contains("/src/sim/")
}

/// The name of the function a line declares, if it declares one.
fn declared_fn(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    for prefix in [
        "pub(crate) ",
        "pub(super) ",
        "pub ",
        "const ",
        "async ",
        "unsafe ",
    ] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    let name = rest.strip_prefix("fn ")?;
    let end = name.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    Some(&name[..end])
}

/// `(name, lines)` of every function with a body in `text`, outside
/// `#[cfg(test)]` modules; a body ends at the first `}` at the indent of
/// its `fn` (rustfmt's layout).
fn function_lengths(text: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let indent = |l: &str| l.len() - l.trim_start().len();
    let closes = |from: usize, at: usize| {
        (from..lines.len()).find(|&k| lines[k].trim() == "}" && indent(lines[k]) == at)
    };
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.trim() == "#[cfg(test)]"
            && lines
                .get(i + 1)
                .is_some_and(|l| l.contains("mod ") && l.ends_with('{'))
        {
            i = closes(i + 2, indent(lines[i + 1])).unwrap_or(lines.len()) + 1;
            continue;
        }
        if let Some(name) = declared_fn(line) {
            let open = (i..lines.len()).find(|&k| {
                let l = lines[k].trim_end();
                l.ends_with('{') || l.ends_with(';') || l.ends_with("{}")
            });
            if let Some(open) = open.filter(|&k| lines[k].trim_end().ends_with('{')) {
                if let Some(end) = closes(open + 1, indent(line)) {
                    found.push((name.to_owned(), end - i + 1));
                }
            }
        }
        i += 1;
    }
    found
}

fn scan_lengths(dir: &Path, root: &Path, out: &mut Vec<(String, String, usize)>) {
    for entry in std::fs::read_dir(dir).expect("read source dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            scan_lengths(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs") && !test_only(&path) {
            let text = std::fs::read_to_string(&path).expect("read source");
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            for (name, n) in function_lengths(&text) {
                out.push((rel.clone(), name, n));
            }
        }
    }
}

#[test]
fn production_functions_stay_short() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut lengths = Vec::new();
    for dir in [
        "server/src",
        "protocol/src",
        "storage/src",
        "client-tests/src",
    ] {
        scan_lengths(&root.join(dir), root, &mut lengths);
    }
    let mut findings = Vec::new();
    for (file, name, n) in &lengths {
        let allowed = LONG_FNS
            .iter()
            .find(|(f, fname, _)| f == file && fname == name)
            .map_or(MAX_FN_LINES, |(_, _, max)| *max);
        if *n > allowed {
            findings.push(format!(
                "{file}: fn {name} is {n} lines (at most {allowed})"
            ));
        }
    }
    for (file, name, max) in LONG_FNS {
        let now = lengths
            .iter()
            .find(|(f, fname, _)| f == file && fname == name);
        match now {
            Some((_, _, n)) if *n < max => findings.push(format!(
                "{file}: fn {name} shrank to {n} lines: lower its entry in LONG_FNS (or drop it at {MAX_FN_LINES} or less)"
            )),
            None => findings.push(format!("{file}: fn {name} is gone: drop its entry in LONG_FNS")),
            _ => {}
        }
    }
    assert!(findings.is_empty(), "{}", findings.join("\n"));
}

#[test]
fn function_lengths_are_counted_from_fn_to_its_closing_brace() {
    let text = "fn short() {\n    one();\n}\n\n#[cfg(test)]\nmod tests {\n    fn skipped() {\n    }\n}\n    pub(crate) async fn two(\n        a: u8,\n    ) -> u8 {\n        a\n    }\nfn decl();\n";
    assert_eq!(
        function_lengths(text),
        vec![("short".to_owned(), 3), ("two".to_owned(), 5)]
    );
}
