//! ZooKeeper's quorum hostname verification (`ssl.quorum.hostnameVerification`,
//! on by default): the other member's certificate must name the address
//! of the socket, as ZKTrustManager checks it on both ends of a quorum
//! link. The address may be one of the certificate's IP subject
//! alternative names; else a name of that host must be one of its DNS
//! names (its CN when it has none). ZooKeeper finds the host's name by
//! reverse DNS; zkd resolves the certificate's names and looks for the
//! address among theirs, which needs no PTR records.

use std::net::IpAddr;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

/// Ok when the certificate `der` names `address`; else why not.
pub async fn names_address(der: &[u8], address: IpAddr) -> Result<(), String> {
    let address = address.to_canonical();
    let (_, cert) = X509Certificate::from_der(der).map_err(|e| format!("its certificate: {e}"))?;
    let (ips, mut names) = alternative_names(&cert);
    if ips.contains(&address) {
        return Ok(());
    }
    if names.is_empty() {
        let cn = cert.subject().iter_common_name().next();
        names.extend(cn.and_then(|a| a.as_str().ok()).map(str::to_owned));
    }
    for name in names.iter().filter(|n| !n.contains('*')) {
        let Ok(resolved) = tokio::net::lookup_host((name.as_str(), 0)).await else {
            continue;
        };
        if resolved
            .into_iter()
            .any(|a| a.ip().to_canonical() == address)
        {
            return Ok(());
        }
    }
    Err(format!(
        "its certificate names neither {address} nor a host name of it (IP {ips:?}, DNS {names:?})"
    ))
}

/// The certificate's IP and DNS subject alternative names.
fn alternative_names(cert: &X509Certificate) -> (Vec<IpAddr>, Vec<String>) {
    let (mut ips, mut names) = (Vec::new(), Vec::new());
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return (ips, names);
    };
    for name in &san.value.general_names {
        match name {
            GeneralName::DNSName(dns) => names.push(dns.to_string()),
            GeneralName::IPAddress(bytes) => {
                let ip = match bytes.len() {
                    4 => <[u8; 4]>::try_from(*bytes).map(IpAddr::from).ok(),
                    16 => <[u8; 16]>::try_from(*bytes).map(IpAddr::from).ok(),
                    _ => None,
                };
                ips.extend(ip.map(|ip| ip.to_canonical()));
            }
            _ => {}
        }
    }
    (ips, names)
}
