//! TLS for client connections with rustls (ring provider), by mongod's options:
//! `--tlsMode disabled|allowTLS|preferTLS|requireTLS`, `--tlsCertificateKeyFile` (one PEM
//! file with the certificate chain and the key), `--tlsCAFile` (client certificates are
//! verified against it when given), `--tlsAllowConnectionsWithoutCertificates` and
//! `--tlsDisabledProtocols`. A verified client certificate's subject, in RFC 2253 form, is
//! what MONGODB-X509 authenticates as.

use anyhow::{bail, Context};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

/// `--tlsMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Disabled,
    /// Plain connections are served; TLS ones too.
    Allow,
    /// As `Allow` (the two differ only for replica-set members' outgoing connections).
    Prefer,
    Require,
}

impl Mode {
    pub fn parse(s: &str) -> anyhow::Result<Mode> {
        Ok(match s {
            "disabled" => Mode::Disabled,
            "allowTLS" | "allowSSL" => Mode::Allow,
            "preferTLS" | "preferSSL" => Mode::Prefer,
            "requireTLS" | "requireSSL" => Mode::Require,
            other => bail!(
                "--tlsMode must be disabled, allowTLS, preferTLS or requireTLS, not '{other}'"
            ),
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::Disabled => "disabled",
            Mode::Allow => "allowTLS",
            Mode::Prefer => "preferTLS",
            Mode::Require => "requireTLS",
        }
    }
}

/// The TLS options in force.
#[derive(Debug, Clone)]
pub struct Settings {
    pub mode: Mode,
    pub certificate_key_file: Option<PathBuf>,
    pub ca_file: Option<PathBuf>,
    pub allow_without_certificates: bool,
    /// `TLS1_0,TLS1_1,TLS1_2,TLS1_3` names; rustls never speaks 1.0 or 1.1.
    pub disabled_protocols: Vec<String>,
}

/// How long a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The first byte of a TLS record carrying a handshake (the ClientHello).
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// The TLS side of the listener, or None when TLS is off.
pub struct Tls {
    mode: Mode,
    acceptor: TlsAcceptor,
}

fn read_pem_certs(path: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .with_context(|| format!("cannot read certificates from {}", path.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("bad PEM certificate in {}", path.display()))?;
    if certs.is_empty() {
        bail!("no certificate in {}", path.display());
    }
    Ok(certs)
}

/// Refuses a server certificate outside its validity period, as mongod does at startup.
fn check_validity(cert: &CertificateDer<'_>, path: &Path) -> anyhow::Result<()> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref())
        .map_err(|e| anyhow::anyhow!("cannot parse the certificate in {}: {e}", path.display()))?;
    if !parsed.validity().is_valid() {
        bail!(
            "The provided SSL certificate is expired or not yet valid ({})",
            path.display()
        );
    }
    Ok(())
}

fn protocol_versions(
    disabled: &[String],
) -> anyhow::Result<Vec<&'static rustls::SupportedProtocolVersion>> {
    for d in disabled {
        if !["TLS1_0", "TLS1_1", "TLS1_2", "TLS1_3", "none"].contains(&d.as_str()) {
            bail!(
                "--tlsDisabledProtocols: unknown protocol '{d}' (TLS1_0, TLS1_1, TLS1_2, TLS1_3)"
            );
        }
    }
    let versions: Vec<_> = [
        ("TLS1_2", &rustls::version::TLS12),
        ("TLS1_3", &rustls::version::TLS13),
    ]
    .into_iter()
    .filter(|(n, _)| !disabled.iter().any(|d| d == n))
    .map(|(_, v)| v)
    .collect();
    if versions.is_empty() {
        bail!("--tlsDisabledProtocols leaves no TLS version (this server speaks TLS 1.2 and 1.3)");
    }
    Ok(versions)
}

impl Tls {
    /// Loads certificates and keys; None when `--tlsMode disabled`.
    pub fn new(s: &Settings) -> anyhow::Result<Option<Tls>> {
        if s.mode == Mode::Disabled {
            return Ok(None);
        }
        let Some(path) = &s.certificate_key_file else {
            bail!(
                "--tlsMode (net.tls.mode) {} needs --tlsCertificateKeyFile (net.tls.certificateKeyFile)",
                s.mode.name()
            );
        };
        let chain = read_pem_certs(path)?;
        check_validity(&chain[0], path)?;
        let key = PrivateKeyDer::from_pem_file(path)
            .with_context(|| format!("no private key in {}", path.display()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&protocol_versions(&s.disabled_protocols)?)
            .context("TLS protocol versions")?;
        let builder = match &s.ca_file {
            Some(ca) => {
                let mut roots = rustls::RootCertStore::empty();
                for c in read_pem_certs(ca)? {
                    roots
                        .add(c)
                        .with_context(|| format!("bad CA certificate in {}", ca.display()))?;
                }
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                );
                let verifier = match s.allow_without_certificates {
                    true => verifier.allow_unauthenticated(),
                    false => verifier,
                };
                builder.with_client_cert_verifier(verifier.build().context("client verifier")?)
            }
            None => builder.with_no_client_auth(),
        };
        let config = builder.with_single_cert(chain, key).with_context(|| {
            format!(
                "the key in {} does not match its certificate",
                path.display()
            )
        })?;
        Ok(Some(Tls {
            mode: s.mode,
            acceptor: TlsAcceptor::from(Arc::new(config)),
        }))
    }
}

/// A client connection after the TLS decision.
pub enum Accepted {
    Plain(TcpStream),
    /// A TLS connection and the subject of its verified client certificate.
    Tls(
        Box<tokio_rustls::server::TlsStream<TcpStream>>,
        Option<String>,
    ),
}

/// Decides how to talk to a new client: TLS when required, or (allowTLS/preferTLS) when
/// its first byte opens a TLS handshake record; plain otherwise.
pub async fn accept(tls: Option<&Tls>, stream: TcpStream) -> std::io::Result<Accepted> {
    let Some(tls) = tls else {
        return Ok(Accepted::Plain(stream));
    };
    if tls.mode != Mode::Require {
        let mut first = [0u8; 1];
        let n = tokio::time::timeout(HANDSHAKE_TIMEOUT, stream.peek(&mut first))
            .await
            .map_err(|_| std::io::ErrorKind::TimedOut)??;
        if n == 0 || first[0] != TLS_HANDSHAKE_RECORD {
            return Ok(Accepted::Plain(stream));
        }
    }
    let stream = tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.acceptor.accept(stream))
        .await
        .map_err(|_| std::io::ErrorKind::TimedOut)??;
    let subject = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .and_then(|c| rfc2253_subject(c.as_ref()));
    Ok(Accepted::Tls(Box::new(stream), subject))
}

/// The subject of a DER certificate as RFC 2253 writes it (last RDN first, `,` between
/// RDNs, `+` inside one), which is how MongoDB names X.509 users.
pub fn rfc2253_subject(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let registry = x509_parser::objects::oid_registry();
    let mut rdns = Vec::new();
    for rdn in cert.subject().iter() {
        let mut parts = Vec::new();
        for attr in rdn.iter() {
            let key = x509_parser::objects::oid2abbrev(attr.attr_type(), registry)
                .map(str::to_string)
                .unwrap_or_else(|_| attr.attr_type().to_id_string());
            let value = attr.as_str().ok()?;
            parts.push(format!("{key}={}", escape_rfc2253(value)));
        }
        rdns.push(parts.join("+"));
    }
    rdns.reverse();
    Some(rdns.join(","))
}

fn escape_rfc2253(value: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc2253_escapes_special_characters() {
        assert_eq!(escape_rfc2253("a,b+c"), "a\\,b\\+c");
        assert_eq!(escape_rfc2253(" lead"), "\\ lead");
        assert_eq!(escape_rfc2253("plain"), "plain");
    }

    #[test]
    fn disabled_protocols_leave_tls12_or_tls13() {
        assert_eq!(
            protocol_versions(&["TLS1_0".into(), "TLS1_1".into()])
                .unwrap()
                .len(),
            2
        );
        assert_eq!(protocol_versions(&["TLS1_2".into()]).unwrap().len(), 1);
        assert!(protocol_versions(&["TLS1_2".into(), "TLS1_3".into()]).is_err());
        assert!(protocol_versions(&["SSL3".into()]).is_err());
    }

    #[test]
    fn modes_parse_by_mongod_names() {
        assert_eq!(Mode::parse("requireTLS").unwrap(), Mode::Require);
        assert_eq!(Mode::parse("preferSSL").unwrap(), Mode::Prefer);
        assert!(Mode::parse("on").is_err());
    }
}
