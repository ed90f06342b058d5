//! Log colour: escapes only for a person at a terminal, never in a file or a
//! pipe, and never under NO_COLOR.

use std::process::Command;

/// Runs `zkd serve` on a config with an invalid value (it logs one error and
/// exits), with stderr on a pseudo-terminal when `tty` is set (via `script`).
fn zkd_error_output(tty: bool, no_color: Option<&str>) -> String {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("zoo.cfg");
    std::fs::write(&cfg, "dataDir=/tmp/x\nclientPort=1\ntickTime=often\n").unwrap();
    let zkd = format!(
        "{} serve --config {}",
        env!("CARGO_BIN_EXE_zkd"),
        cfg.display()
    );
    let mut cmd = if tty {
        let mut c = Command::new("script");
        c.args(["-q", "-e", "-c", &zkd, "/dev/null"]);
        c
    } else {
        let mut c = Command::new(env!("CARGO_BIN_EXE_zkd"));
        c.args(["serve", "--config"]).arg(&cfg);
        c
    };
    cmd.env_remove("NO_COLOR");
    if let Some(v) = no_color {
        cmd.env("NO_COLOR", v);
    }
    let out = cmd
        .output()
        .expect("run zkd (script comes with util-linux)");
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

#[test]
fn logs_to_a_file_or_pipe_carry_no_escapes() {
    let text = zkd_error_output(false, None);
    assert!(text.contains("tickTime"), "{text}");
    assert!(
        !text.contains('\u{1b}'),
        "colour escapes in a piped log: {text:?}"
    );
}

#[test]
fn a_terminal_gets_colour_unless_no_color_is_set() {
    let coloured = zkd_error_output(true, None);
    assert!(coloured.contains("tickTime"), "{coloured}");
    assert!(
        coloured.contains('\u{1b}'),
        "a terminal gets colour: {coloured:?}"
    );
    let plain = zkd_error_output(true, Some("1"));
    assert!(plain.contains("tickTime"), "{plain}");
    assert!(
        !plain.contains('\u{1b}'),
        "NO_COLOR=1 turns colour off: {plain:?}"
    );
    // An empty NO_COLOR does not count (no-color.org).
    assert!(zkd_error_output(true, Some("")).contains('\u{1b}'));
}
