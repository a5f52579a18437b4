//! A service's TLS identity: its certificate chain and private key, read from PEM files
//! at start-up and checked against each other, as the rustls server configuration
//! ([`ServerTls`]) a [`crate::Listener`] serves HTTPS with (`ring` crypto, TLS 1.2 and
//! 1.3, HTTP/1.1 offered through ALPN). [`ServerTls::reload`] reads the files again
//! (on SIGHUP): new handshakes get the new pair, and a bad pair leaves the old one.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Why a TLS identity could not be loaded; names the file at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsError {
    /// The file at fault.
    pub file: PathBuf,
    /// What was wrong with it.
    pub reason: String,
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file.display(), self.reason)
    }
}

impl std::error::Error for TlsError {}

/// The rustls configuration of an HTTPS listener (cheap to clone; clones share the
/// certificate, and a reload of one is seen by all).
#[derive(Clone)]
pub struct ServerTls {
    config: Arc<ServerConfig>,
    current: Arc<CurrentCert>,
    cert_file: PathBuf,
    key_file: PathBuf,
}

impl fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerTls")
            .field("cert_file", &self.cert_file)
            .field("key_file", &self.key_file)
            .finish_non_exhaustive()
    }
}

/// The certificate and key new handshakes get; replaced by a reload.
#[derive(Debug)]
struct CurrentCert(RwLock<Arc<CertifiedKey>>);

impl ResolvesServerCert for CurrentCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().unwrap_or_else(|p| p.into_inner()).clone())
    }
}

/// The certificate chain of `cert_file` with the key of `key_file`, checked to belong
/// together.
fn certified_key(
    cert_file: &Path,
    key_file: &Path,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, TlsError> {
    let certs = read_certificates(cert_file)?;
    let key = read_private_key(key_file)?;
    CertifiedKey::from_der(certs, key, provider).map_err(|e| {
        let reason = match e {
            rustls::Error::InconsistentKeys(_) => format!(
                "the private key does not match the certificate in {}",
                cert_file.display()
            ),
            other => format!("unusable private key or certificate: {other}"),
        };
        TlsError {
            file: key_file.to_owned(),
            reason,
        }
    })
}

impl ServerTls {
    /// Reads the PEM certificate chain in `cert_file` (the server's certificate first)
    /// and the PEM private key (PKCS#8, PKCS#1 or SEC1) in `key_file`, and checks the
    /// key belongs to the certificate. Every error names the file at fault.
    pub fn load(cert_file: &Path, key_file: &Path) -> Result<ServerTls, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = certified_key(cert_file, key_file, &provider)?;
        let current = Arc::new(CurrentCert(RwLock::new(Arc::new(key))));
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError {
                file: cert_file.to_owned(),
                reason: format!("no usable TLS protocol version: {e}"),
            })?
            .with_no_client_auth()
            .with_cert_resolver(current.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(ServerTls {
            config: Arc::new(config),
            current,
            cert_file: cert_file.to_owned(),
            key_file: key_file.to_owned(),
        })
    }

    /// Reads the certificate and key files again: new handshakes get the new pair
    /// (connections already open keep theirs). On any error — a file unreadable, a key
    /// that does not match — the pair in use stays and the error names the file.
    pub fn reload(&self) -> Result<(), TlsError> {
        let key = certified_key(
            &self.cert_file,
            &self.key_file,
            self.config.crypto_provider(),
        )?;
        *self.current.0.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(key);
        Ok(())
    }

    /// The certificate file (what a reload reads again, with the key file).
    pub fn cert_file(&self) -> &Path {
        &self.cert_file
    }

    /// The rustls configuration.
    pub fn config(&self) -> Arc<ServerConfig> {
        self.config.clone()
    }
}

/// Reads `path` whole, naming it in the error.
fn read(path: &Path, what: &str) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| TlsError {
        file: path.to_owned(),
        reason: format!("cannot read the {what}: {e}"),
    })
}

/// The certificates of a PEM file; at least one.
fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(path, "TLS certificate file")?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError {
            file: path.to_owned(),
            reason: format!("not a PEM certificate file: {e}"),
        })?;
    if certs.is_empty() {
        return Err(TlsError {
            file: path.to_owned(),
            reason: "holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into(),
        });
    }
    Ok(certs)
}

/// The first private key of a PEM file.
fn read_private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read(path, "TLS private key file")?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| TlsError {
        file: path.to_owned(),
        reason: match e {
            rustls_pki_types::pem::Error::NoItemsFound => {
                "holds no PEM private key (-----BEGIN PRIVATE KEY-----)".into()
            }
            other => format!("not a PEM private key file: {other}"),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate for `localhost` and its key, as PEM.
    fn self_signed() -> (String, String) {
        let c = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        (c.cert.pem(), c.signing_key.serialize_pem())
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn a_matching_pair_loads() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = self_signed();
        let c = write(dir.path(), "tls.crt", &cert);
        let k = write(dir.path(), "tls.key", &key);
        let tls = ServerTls::load(&c, &k).unwrap();
        assert_eq!(tls.config().alpn_protocols, vec![b"http/1.1".to_vec()]);
    }

    #[test]
    fn a_key_of_another_certificate_is_refused_naming_the_key_file() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, _) = self_signed();
        let (_, other_key) = self_signed();
        let c = write(dir.path(), "tls.crt", &cert);
        let k = write(dir.path(), "other.key", &other_key);
        let e = ServerTls::load(&c, &k).unwrap_err();
        assert_eq!(e.file, k);
        assert!(e.reason.contains("does not match"), "{e}");
        assert!(e.to_string().contains("other.key"), "{e}");
    }

    #[test]
    fn missing_and_malformed_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = self_signed();
        let c = write(dir.path(), "tls.crt", &cert);
        let k = write(dir.path(), "tls.key", &key);
        let missing = dir.path().join("absent.crt");
        let e = ServerTls::load(&missing, &k).unwrap_err();
        assert_eq!(e.file, missing);
        assert!(e.reason.contains("cannot read"), "{e}");

        let junk = write(dir.path(), "junk.pem", "not pem at all\n");
        let e = ServerTls::load(&junk, &k).unwrap_err();
        assert_eq!(e.file, junk);
        assert!(e.reason.contains("no PEM certificate"), "{e}");
        let e = ServerTls::load(&c, &junk).unwrap_err();
        assert_eq!(e.file, junk);
        assert!(e.reason.contains("no PEM private key"), "{e}");
        // A certificate where the key should be.
        let e = ServerTls::load(&c, &c).unwrap_err();
        assert_eq!(e.file, c);
    }

    /// The end-entity certificate new handshakes get.
    fn served(tls: &ServerTls) -> Vec<u8> {
        tls.current.0.read().unwrap().cert[0].as_ref().to_vec()
    }

    #[test]
    fn a_reload_swaps_the_pair_and_a_bad_one_keeps_the_old() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = self_signed();
        let c = write(dir.path(), "tls.crt", &cert);
        let k = write(dir.path(), "tls.key", &key);
        let tls = ServerTls::load(&c, &k).unwrap();
        let first = served(&tls);

        let (cert2, key2) = self_signed();
        write(dir.path(), "tls.crt", &cert2);
        write(dir.path(), "tls.key", &key2);
        tls.reload().unwrap();
        let second = served(&tls);
        assert_ne!(first, second);
        // Clones share the certificate.
        assert_eq!(served(&tls.clone()), second);

        // Half-rotated: a new certificate with the old key is refused, naming the key.
        let (cert3, _) = self_signed();
        write(dir.path(), "tls.crt", &cert3);
        let e = tls.reload().unwrap_err();
        assert_eq!(e.file, k);
        assert_eq!(served(&tls), second);
    }
}
