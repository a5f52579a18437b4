//! The TLS flags every dmkv service takes: its certificate and key (serve HTTPS only)
//! and the CA bundle it trusts when it calls other services.

use std::path::PathBuf;

use crate::tls::{ServerTls, TlsError};

/// `--tls-cert-file`, `--tls-key-file` and `--tls-ca-file`, for a service's flags
/// (`#[command(flatten)]`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TlsArgs {
    /// PEM certificate chain (the service's certificate first): serve HTTPS only.
    /// Needs --tls-key-file.
    #[arg(
        long,
        env = "DMKV_TLS_CERT_FILE",
        value_name = "PATH",
        requires = "tls_key_file"
    )]
    pub tls_cert_file: Option<PathBuf>,

    /// PEM private key of --tls-cert-file (PKCS#8, PKCS#1 or SEC1).
    #[arg(
        long,
        env = "DMKV_TLS_KEY_FILE",
        value_name = "PATH",
        requires = "tls_cert_file"
    )]
    pub tls_key_file: Option<PathBuf>,

    /// PEM CA bundle that certificates of the services this one calls over https://
    /// must chain to (default: the public web roots).
    #[arg(long, env = "DMKV_TLS_CA_FILE", value_name = "PATH")]
    pub tls_ca_file: Option<PathBuf>,
}

impl TlsArgs {
    /// The certificate and key, loaded and checked, when both are given.
    pub fn server_tls(&self) -> Result<Option<ServerTls>, TlsError> {
        match (&self.tls_cert_file, &self.tls_key_file) {
            (Some(cert), Some(key)) => ServerTls::load(cert, key).map(Some),
            _ => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Flags {
        #[command(flatten)]
        tls: TlsArgs,
    }

    #[test]
    fn a_certificate_needs_its_key_and_nothing_is_plain_http() {
        let none = Flags::try_parse_from(["x"]).unwrap();
        assert!(none.tls.server_tls().unwrap().is_none());
        assert!(Flags::try_parse_from(["x", "--tls-cert-file", "a.crt"]).is_err());
        assert!(Flags::try_parse_from(["x", "--tls-key-file", "a.key"]).is_err());
        let both =
            Flags::try_parse_from(["x", "--tls-cert-file", "a.crt", "--tls-key-file", "a.key"])
                .unwrap();
        let e = both.tls.server_tls().unwrap_err();
        assert_eq!(e.file, PathBuf::from("a.crt"));
    }
}
