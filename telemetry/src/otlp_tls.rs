//! TLS for the OTLP trace exporter.
//!
//! An `https://` collector endpoint is reached over TLS (rustls with the ring provider,
//! ALPN `h2`). The server certificate is checked against the PEM CA file named by
//! `OTEL_EXPORTER_OTLP_CERTIFICATE`, else by `DMKV_TLS_CA_FILE`, else against the public
//! web roots (webpki-roots). An `http://` endpoint stays plaintext.

use std::fmt;
use std::path::PathBuf;

use tonic::transport::{Certificate, ClientTlsConfig};

/// The OpenTelemetry variable naming the PEM CA file that signs the collector's certificate.
pub const OTLP_CERTIFICATE_VAR: &str = "OTEL_EXPORTER_OTLP_CERTIFICATE";
/// The dmkv-wide CA file variable, used when [`OTLP_CERTIFICATE_VAR`] is not set.
pub const DMKV_CA_FILE_VAR: &str = "DMKV_TLS_CA_FILE";

/// What an `https://` collector's certificate is checked against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustRoots {
    /// The CAs in a PEM file, named by the variable `var`.
    CaFile {
        /// The PEM file.
        path: PathBuf,
        /// The variable that named it.
        var: &'static str,
    },
    /// The public web roots compiled into the binary.
    WebRoots,
}

impl fmt::Display for TrustRoots {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrustRoots::CaFile { path, var } => write!(f, "CA file {} ({var})", path.display()),
            TrustRoots::WebRoots => f.write_str("the public web roots"),
        }
    }
}

impl TrustRoots {
    /// The trust roots named by the environment (see the module documentation).
    pub fn from_env() -> TrustRoots {
        TrustRoots::from_lookup(|var| std::env::var(var).ok())
    }

    /// The trust roots named by `lookup` (a variable's value, if set); empty values count
    /// as unset.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> TrustRoots {
        [OTLP_CERTIFICATE_VAR, DMKV_CA_FILE_VAR]
            .into_iter()
            .find_map(|var| {
                lookup(var)
                    .map(|v| v.trim().to_owned())
                    .filter(|v| !v.is_empty())
                    .map(|v| TrustRoots::CaFile {
                        path: PathBuf::from(v),
                        var,
                    })
            })
            .unwrap_or(TrustRoots::WebRoots)
    }

    /// The tonic TLS settings trusting these roots. An unreadable or certificate-less CA
    /// file is an error naming the file and the variable.
    pub fn client_config(&self) -> Result<ClientTlsConfig, String> {
        match self {
            TrustRoots::WebRoots => Ok(ClientTlsConfig::new().with_webpki_roots()),
            TrustRoots::CaFile { path, var } => {
                let pem = std::fs::read(path).map_err(|e| {
                    format!("cannot read the CA file {} ({var}): {e}", path.display())
                })?;
                if !pem
                    .windows(b"-----BEGIN CERTIFICATE-----".len())
                    .any(|w| w == b"-----BEGIN CERTIFICATE-----")
                {
                    return Err(format!(
                        "the CA file {} ({var}) holds no PEM certificate",
                        path.display()
                    ));
                }
                Ok(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem)))
            }
        }
    }
}

/// Whether `endpoint` asks for TLS (`https://`, any case).
pub fn is_https(endpoint: &str) -> bool {
    endpoint
        .get(..8)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"))
}

/// The TLS settings for `endpoint`: `None` for plaintext endpoints, else settings trusting
/// [`TrustRoots::from_env`].
pub fn client_config_for(endpoint: &str) -> Result<Option<ClientTlsConfig>, String> {
    if !is_https(endpoint) {
        return Ok(None);
    }
    TrustRoots::from_env().client_config().map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn otel_variable_wins_over_dmkv_variable() {
        let vars = [
            (OTLP_CERTIFICATE_VAR, "/a.pem"),
            (DMKV_CA_FILE_VAR, "/b.pem"),
        ];
        assert_eq!(
            TrustRoots::from_lookup(lookup(&vars)),
            TrustRoots::CaFile {
                path: "/a.pem".into(),
                var: OTLP_CERTIFICATE_VAR
            }
        );
        let vars = [(OTLP_CERTIFICATE_VAR, " "), (DMKV_CA_FILE_VAR, "/b.pem")];
        assert_eq!(
            TrustRoots::from_lookup(lookup(&vars)),
            TrustRoots::CaFile {
                path: "/b.pem".into(),
                var: DMKV_CA_FILE_VAR
            }
        );
        assert_eq!(TrustRoots::from_lookup(lookup(&[])), TrustRoots::WebRoots);
    }

    #[test]
    fn unreadable_ca_file_names_file_and_variable() {
        let roots = TrustRoots::CaFile {
            path: "/nonexistent/dmkv-ca.pem".into(),
            var: DMKV_CA_FILE_VAR,
        };
        let err = roots.client_config().unwrap_err();
        assert!(err.contains("/nonexistent/dmkv-ca.pem"), "{err}");
        assert!(err.contains(DMKV_CA_FILE_VAR), "{err}");
    }

    #[test]
    fn ca_file_without_certificate_is_an_error() {
        let path = std::env::temp_dir().join(format!("dmkv-otlp-ca-{}.pem", std::process::id()));
        std::fs::write(&path, b"not a certificate\n").unwrap();
        let roots = TrustRoots::CaFile {
            path: path.clone(),
            var: OTLP_CERTIFICATE_VAR,
        };
        let err = roots.client_config().unwrap_err();
        std::fs::remove_file(&path).unwrap();
        assert!(err.contains("no PEM certificate"), "{err}");
        assert!(err.contains(OTLP_CERTIFICATE_VAR), "{err}");
    }

    #[test]
    fn only_https_endpoints_use_tls() {
        assert!(is_https("https://collector:4317"));
        assert!(is_https("HTTPS://collector:4317"));
        assert!(!is_https("http://collector:4317"));
        assert!(!is_https("collector:4317"));
        assert!(matches!(
            client_config_for("http://localhost:4317"),
            Ok(None)
        ));
    }
}
