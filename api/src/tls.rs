//! Which servers an [`crate::HttpClient`] trusts on `https://` URLs: the CA
//! certificates of a PEM bundle (`--tls-ca-file`, env `DMKV_TLS_CA_FILE`), or, without
//! one, the public web roots (Mozilla's, built in). Certificates are always verified:
//! there is no way to turn verification off.
//!
//! A process sets its trust once at start-up ([`set_default`]); clients built after
//! that use it. A process that never sets it reads `DMKV_TLS_CA_FILE` on first use.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use ureq::tls::{Certificate, RootCerts, TlsConfig, TlsProvider};

use crate::error::ClientError;

/// The environment variable naming the CA bundle clients trust.
pub const CA_FILE_ENV: &str = "DMKV_TLS_CA_FILE";

/// The servers a client trusts.
#[derive(Debug, Clone, Default)]
pub struct ClientTls {
    ca: Option<TrustedCa>,
}

/// A CA bundle and where it was read from.
#[derive(Debug, Clone)]
struct TrustedCa {
    file: PathBuf,
    certs: Arc<Vec<Certificate<'static>>>,
}

impl ClientTls {
    /// Trusts the public web roots only.
    pub fn public_roots() -> ClientTls {
        ClientTls::default()
    }

    /// Trusts exactly the CA certificates of the PEM bundle in `path` (at least one).
    pub fn from_ca_file(path: &Path) -> Result<ClientTls, ClientError> {
        let context = format!("reading the TLS CA file {}", path.display());
        let invalid = |why: String| ClientError::Io {
            context: context.clone(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, why),
        };
        let pem = std::fs::read(path).map_err(|source| ClientError::Io {
            context: context.clone(),
            source,
        })?;
        let certs = CertificateDer::pem_slice_iter(&pem)
            .map(|c| c.map(|der| Certificate::from_der(der.as_ref()).to_owned()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid(format!("not a PEM certificate bundle: {e}")))?;
        if certs.is_empty() {
            return Err(invalid(
                "holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into(),
            ));
        }
        Ok(ClientTls {
            ca: Some(TrustedCa {
                file: path.to_owned(),
                certs: Arc::new(certs),
            }),
        })
    }

    /// The CA bundle trusted, if any (`None`: the public web roots).
    pub fn ca_file(&self) -> Option<&Path> {
        self.ca.as_ref().map(|c| c.file.as_path())
    }

    /// The `ureq` TLS settings: rustls with `ring`, these roots, verification on.
    pub(crate) fn ureq_config(&self) -> TlsConfig {
        let roots = match &self.ca {
            Some(ca) => RootCerts::Specific(ca.certs.clone()),
            None => RootCerts::WebPki,
        };
        TlsConfig::builder()
            .provider(TlsProvider::Rustls)
            .root_certs(roots)
            .build()
    }
}

/// The process's trust, once set or read from the environment.
static DEFAULT: RwLock<Option<ClientTls>> = RwLock::new(None);

/// Makes `tls` what clients built from now on trust.
pub fn set_default(tls: ClientTls) {
    let mut d = DEFAULT.write().unwrap_or_else(|p| p.into_inner());
    *d = Some(tls);
}

/// Reads the CA bundle in `path` (when given, else the one `DMKV_TLS_CA_FILE` names,
/// if any) and makes it what clients built from now on trust: what a program does
/// with its `--tls-ca-file` flag at start-up. Returns what is now trusted.
pub fn set_default_ca_file(path: Option<&Path>) -> Result<ClientTls, ClientError> {
    let tls = match path {
        Some(p) => ClientTls::from_ca_file(p)?,
        None => from_env()?,
    };
    set_default(tls.clone());
    Ok(tls)
}

/// The CA bundle `DMKV_TLS_CA_FILE` names, else the public web roots.
fn from_env() -> Result<ClientTls, ClientError> {
    match std::env::var_os(CA_FILE_ENV) {
        Some(p) if !p.is_empty() => ClientTls::from_ca_file(Path::new(&p)),
        _ => Ok(ClientTls::public_roots()),
    }
}

/// What a new client trusts: what was set, else what `DMKV_TLS_CA_FILE` names (read
/// once), else the public web roots.
pub fn default_tls() -> Result<ClientTls, ClientError> {
    if let Some(t) = DEFAULT.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
        return Ok(t.clone());
    }
    let tls = from_env()?;
    let mut d = DEFAULT.write().unwrap_or_else(|p| p.into_inner());
    Ok(d.get_or_insert(tls).clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_bundle_is_read_and_a_bad_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let ca = rcgen::generate_simple_self_signed(vec!["ca".into()]).unwrap();
        let good = dir.path().join("ca.crt");
        std::fs::write(&good, ca.cert.pem().repeat(2)).unwrap();
        let tls = ClientTls::from_ca_file(&good).unwrap();
        assert_eq!(tls.ca_file(), Some(good.as_path()));
        assert!(matches!(
            tls.ureq_config().root_certs(),
            RootCerts::Specific(c) if c.len() == 2
        ));

        let empty = dir.path().join("empty.crt");
        std::fs::write(&empty, "no certificates here\n").unwrap();
        let e = ClientTls::from_ca_file(&empty).unwrap_err().to_string();
        assert!(
            e.contains("empty.crt") && e.contains("no PEM certificate"),
            "{e}"
        );
        let missing = dir.path().join("missing.crt");
        let e = ClientTls::from_ca_file(&missing).unwrap_err().to_string();
        assert!(e.contains("missing.crt"), "{e}");
    }

    #[test]
    fn without_a_bundle_the_public_roots_are_trusted() {
        let tls = ClientTls::public_roots();
        assert_eq!(tls.ca_file(), None);
        let config = tls.ureq_config();
        assert!(matches!(config.root_certs(), RootCerts::WebPki));
        assert!(!config.disable_verification());
    }
}
