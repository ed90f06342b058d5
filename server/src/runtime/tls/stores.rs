//! The key and trust stores ZooKeeper reads (`ssl.keyStore.*`,
//! `ssl.trustStore.*`): PKCS12, and PEM (certificates, and a private key
//! that `password` decrypts when it is an encrypted PKCS#8 key, as
//! ZooKeeper's PEM loader reads it). JKS, ZooKeeper's default for a file
//! without a known extension, is refused with what to do instead.

use crate::config::{StoreKind, StoreSpec};
use pkcs8::der::Decode;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A store that could not be read, with why.
pub type StoreError = String;

/// A key store's key and its certificate chain.
pub struct Identity {
    pub key: PrivateKeyDer<'static>,
    pub chain: Vec<CertificateDer<'static>>,
}

fn read(spec: &StoreSpec) -> Result<Vec<u8>, StoreError> {
    std::fs::read(&spec.location)
        .map_err(|e| format!("cannot read {}: {e}", spec.location.display()))
}

fn jks(spec: &StoreSpec) -> StoreError {
    format!(
        "{} is a JKS store, which zkd does not read: convert it to PKCS12 \
         (keytool -importkeystore -srckeystore IN.jks -destkeystore OUT.p12 -deststoretype PKCS12) \
         or PEM, and name it .p12 or .pem (or set its .type)",
        spec.location.display()
    )
}

/// A PKCS12 store, opened with its password.
fn pkcs12(bytes: &[u8], spec: &StoreSpec) -> Result<p12_keystore::KeyStore, StoreError> {
    p12_keystore::KeyStore::from_pkcs12(bytes, spec.password.expose()).map_err(|e| {
        let at = spec.location.display();
        format!("cannot open {at} (a wrong ssl.*Store.password?): {e}")
    })
}

/// The key and chain of a key store.
pub fn identity(spec: &StoreSpec) -> Result<Identity, StoreError> {
    let bytes = read(spec)?;
    let at = spec.location.display();
    match spec.kind {
        StoreKind::Jks => Err(jks(spec)),
        StoreKind::Pkcs12 => {
            let store = pkcs12(&bytes, spec)?;
            let (_, entry) = store
                .private_key_chain()
                .ok_or_else(|| format!("{at} holds no private key"))?;
            let key = PrivatePkcs8KeyDer::from(entry.key().to_vec()).into();
            let chain = entry
                .chain()
                .iter()
                .map(|c| CertificateDer::from(c.as_der().to_vec()))
                .collect();
            Ok(Identity { key, chain })
        }
        StoreKind::Pem => {
            let chain = pem_certificates(&bytes, &spec.location)?;
            let key = pem_key(&bytes, spec.password.expose()).map_err(|e| format!("{at}: {e}"))?;
            Ok(Identity { key, chain })
        }
    }
}

/// The certificates a trust store trusts.
pub fn trusted(spec: &StoreSpec) -> Result<Vec<CertificateDer<'static>>, StoreError> {
    let bytes = read(spec)?;
    let at = spec.location.display();
    match spec.kind {
        StoreKind::Jks => Err(jks(spec)),
        StoreKind::Pkcs12 => {
            let store = pkcs12(&bytes, spec)?;
            let certs: Vec<_> = store
                .entries()
                .flat_map(|(_, entry)| match entry {
                    p12_keystore::KeyStoreEntry::Certificate(c) => vec![c.as_der().to_vec()],
                    p12_keystore::KeyStoreEntry::PrivateKeyChain(k) => {
                        k.chain().iter().map(|c| c.as_der().to_vec()).collect()
                    }
                    _ => Vec::new(),
                })
                .map(CertificateDer::from)
                .collect();
            match certs.is_empty() {
                true => Err(format!("{at} holds no certificate")),
                false => Ok(certs),
            }
        }
        StoreKind::Pem => pem_certificates(&bytes, &spec.location),
    }
}

fn pem_certificates(
    bytes: &[u8],
    at: &std::path::Path,
) -> Result<Vec<CertificateDer<'static>>, StoreError> {
    let certs: Vec<_> = CertificateDer::pem_slice_iter(bytes)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", at.display()))?;
    match certs.is_empty() {
        true => Err(format!("{} holds no certificate", at.display())),
        false => Ok(certs),
    }
}

/// The PEM's private key: an encrypted PKCS#8 key decrypted with
/// `password`, or a plain one (PKCS#8, PKCS#1 or SEC1).
fn pem_key(bytes: &[u8], password: &str) -> Result<PrivateKeyDer<'static>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not a PEM file".to_owned())?;
    if let Some(block) = pem_block(text, "ENCRYPTED PRIVATE KEY") {
        let (_, der) = pkcs8::der::pem::decode_vec(block.as_bytes())
            .map_err(|e| format!("its encrypted key: {e}"))?;
        let encrypted = pkcs8::EncryptedPrivateKeyInfo::from_der(&der)
            .map_err(|e| format!("its encrypted key: {e}"))?;
        let plain = encrypted.decrypt(password).map_err(|_| {
            "cannot decrypt its private key: a wrong ssl.keyStore.password?".to_owned()
        })?;
        return Ok(PrivatePkcs8KeyDer::from(plain.as_bytes().to_vec()).into());
    }
    PrivateKeyDer::from_pem_slice(bytes).map_err(|e| format!("no private key: {e}"))
}

/// The PEM block labelled `label`, markers included.
fn pem_block<'a>(text: &'a str, label: &str) -> Option<&'a str> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = text.find(&begin)?;
    let stop = text[start..].find(&end)? + start + end.len();
    Some(&text[start..stop])
}
