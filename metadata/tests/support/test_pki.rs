//! A throwaway certificate authority and a server certificate it signs, written as
//! PEM files into a temporary directory for one test.

use std::path::PathBuf;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

/// PEM files of a test CA and of a server certificate for `localhost` and
/// `127.0.0.1`, removed with the value (each test file uses what it needs).
#[allow(dead_code)]
pub struct TestPki {
    /// The CA certificate (what clients trust).
    pub ca: PathBuf,
    /// The server's certificate.
    pub cert: PathBuf,
    /// The server's private key.
    pub key: PathBuf,
    /// A CA certificate that signed nothing here (a client trusting only it must
    /// refuse the server).
    pub other_ca: PathBuf,
    /// A private key that matches no certificate here.
    pub other_key: PathBuf,
    ca_issuer: Issuer<'static, KeyPair>,
    _dir: tempfile::TempDir,
}

fn ca(name: &str) -> (rcgen::Certificate, Issuer<'static, KeyPair>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    (cert, Issuer::new(params, key))
}

/// A server certificate for `localhost` and `127.0.0.1` signed by `issuer`, and its
/// key, as PEM.
fn server_cert(issuer: &Issuer<'static, KeyPair>) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let mut params =
        CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "dmkv test server");
    let cert = params.signed_by(&key, issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

#[allow(dead_code)]
impl TestPki {
    /// Generates the keys and certificates and writes them.
    pub fn generate() -> TestPki {
        let dir = tempfile::tempdir().unwrap();
        let (ca_cert, issuer) = ca("dmkv test CA");
        let (other_ca_cert, _) = ca("unrelated test CA");
        let (cert, key) = server_cert(&issuer);
        let other_key = KeyPair::generate().unwrap();
        let write = |name: &str, pem: String| {
            let p = dir.path().join(name);
            std::fs::write(&p, pem).unwrap();
            p
        };
        TestPki {
            ca: write("ca.crt", ca_cert.pem()),
            cert: write("tls.crt", cert),
            key: write("tls.key", key),
            other_ca: write("other-ca.crt", other_ca_cert.pem()),
            other_key: write("other.key", other_key.serialize_pem()),
            ca_issuer: issuer,
            _dir: dir,
        }
    }

    /// A new server certificate and key (PEM) from the same CA: a renewal.
    pub fn renewed(&self) -> (String, String) {
        server_cert(&self.ca_issuer)
    }
}
