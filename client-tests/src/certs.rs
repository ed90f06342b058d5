//! Test certificates made with openssl (under faketime for one dated in
//! the past): a CA, certificates it signs, PKCS12 stores of them.

use std::path::Path;
use std::process::Command;

/// Runs openssl (under faketime when `at` is set) in `dir`; panics with its
/// error output when it fails.
pub fn openssl(dir: &Path, at: Option<&str>, args: &str) {
    let mut command = match at {
        Some(at) => {
            let mut c = Command::new("faketime");
            c.arg(at).arg("openssl");
            c
        }
        None => Command::new("openssl"),
    };
    let out = command
        .args(args.split(' '))
        .current_dir(dir)
        .output()
        .expect("openssl");
    assert!(
        out.status.success(),
        "openssl {args}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A self-signed CA in `dir`: `NAME.pem` and `NAME.key`.
pub fn ca(dir: &Path, name: &str, subject: &str) {
    openssl(dir, None, &format!("req -x509 -newkey rsa:2048 -nodes -keyout {name}.key -out {name}.pem -days 30 -subj {subject}"));
}

/// `NAME.key` and `NAME.crt` in `dir` for `subject` (openssl's
/// `/O=../CN=..` form), signed by the CA `ca`, with the extensions in the
/// file `ext`, issued at `at` (faketime's form) or now.
pub fn sign(dir: &Path, name: &str, subject: &str, ca: &str, ext: &str, at: Option<&str>) {
    openssl(
        dir,
        None,
        &format!("req -newkey rsa:2048 -nodes -keyout {name}.key -out {name}.csr -subj {subject}"),
    );
    openssl(dir, at, &format!("x509 -req -in {name}.csr -CA {ca}.pem -CAkey {ca}.key -CAcreateserial -out {name}.crt -days 30 -extfile {ext}"));
}

/// `NAME.p12` in `dir`: `NAME.key` and `NAME.crt` under `password`.
pub fn pkcs12(dir: &Path, name: &str, password: &str) {
    openssl(
        dir,
        None,
        &format!("pkcs12 -export -in {name}.crt -inkey {name}.key -out {name}.p12 -passout pass:{password}"),
    );
}
