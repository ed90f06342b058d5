//! A client certificate's subject as ZooKeeper's `X509AuthenticationProvider`
//! names it: Java's `X500Principal.getName()`, RFC 2253 (the most specific
//! name first, `CN=alice,OU=clients,O=example`).

use x509_parser::prelude::{FromDer, X509Certificate};

/// The RFC 2253 keywords Java writes; any other attribute is its OID,
/// `#` and its DER in hex.
fn keyword(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.6" => "C",
        "2.5.4.9" => "STREET",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        _ => return None,
    })
}

/// The subject of the certificate `der`, or None when it does not parse.
pub fn subject(der: &[u8]) -> Option<String> {
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    let rdns: Vec<String> = cert
        .subject()
        .iter_rdn()
        .map(|rdn| {
            rdn.iter()
                .map(|attr| {
                    let oid = attr.attr_type().to_id_string();
                    match (keyword(&oid), attr.as_str()) {
                        (Some(k), Ok(value)) => format!("{k}={}", escape(value)),
                        _ => format!("{oid}=#{}", hex(&whole_ber(attr.attr_value()))),
                    }
                })
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    Some(rdns.into_iter().rev().collect::<Vec<_>>().join(","))
}

/// RFC 2253's escapes: `,+"\<>;` anywhere, `#` or a space first, a space last.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A value's whole BER (its tag, length and content), which Java writes
/// after `#`: `2.5.4.5=#130431323334` for the serialNumber "1234".
fn whole_ber(value: &x509_parser::der_parser::asn1_rs::Any) -> Vec<u8> {
    use x509_parser::der_parser::asn1_rs::ToDer;
    value.to_der_vec().unwrap_or_else(|_| value.data.to_vec())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_escaped_as_rfc_2253_asks() {
        assert_eq!(escape("alice"), "alice");
        assert_eq!(escape("a,b+c"), "a\\,b\\+c");
        assert_eq!(escape("#x "), "\\#x\\ ");
    }
}
