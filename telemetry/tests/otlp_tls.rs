//! The OTLP exporter reaches an `https://` collector over TLS, trusting the CA named by
//! `OTEL_EXPORTER_OTLP_CERTIFICATE`, and refuses a collector that CA did not sign.
//!
//! The exporter is installed process-wide from the environment, so each case runs
//! [`export_one_span_child`] in a child process with its own variables, while this process
//! plays the collector: a TLS listener on 127.0.0.1 that records every handshake.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::AsyncReadExt as _;

/// Set in the child process only.
const CHILD_VAR: &str = "DMKV_OTLP_TLS_TEST_CHILD";
/// The first bytes of every HTTP/2 connection.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Runs in the child: installs the exporter from the environment, emits a span and
/// flushes it by dropping the guard.
#[test]
#[ignore = "run in a child process by the other tests"]
fn export_one_span_child() {
    if std::env::var_os(CHILD_VAR).is_none() {
        return;
    }
    let guard = telemetry::init("otlp-tls-test", telemetry::LogFormat::Human);
    eprintln!("exporting={}", guard.exporting());
    {
        let span = tracing::info_span!("otlp_tls_test_span");
        let _entered = span.enter();
        tracing::info!("inside the exported span");
    }
    drop(guard);
}

/// One TLS handshake seen by the collector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Handshake {
    /// Completed, with the negotiated ALPN protocol and whether the HTTP/2 preface followed.
    Verified {
        alpn: Option<Vec<u8>>,
        h2_preface: bool,
    },
    /// The client aborted or the handshake failed.
    Failed(String),
}

/// A CA and a `localhost` server certificate it signed.
struct Pki {
    ca_pem: String,
    server_cert: CertificateDer<'static>,
    server_key: Vec<u8>,
}

fn new_pki() -> Pki {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let server_key = KeyPair::generate().unwrap();
    let server_cert = CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&server_key, &ca)
        .unwrap();
    Pki {
        ca_pem: ca.pem(),
        server_cert: server_cert.der().clone(),
        server_key: server_key.serialize_der(),
    }
}

/// The collector: accepts TLS connections on 127.0.0.1 and records each handshake.
struct Collector {
    port: u16,
    handshakes: Arc<Mutex<Vec<Handshake>>>,
    /// Owns the accept loop; dropping the collector stops it.
    _runtime: tokio::runtime::Runtime,
}

impl Collector {
    fn start(pki: &Pki) -> Collector {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![pki.server_cert.clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pki.server_key.clone())),
            )
            .unwrap();
        config.alpn_protocols = vec![b"h2".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        let handshakes = Arc::new(Mutex::new(Vec::new()));
        let seen = handshakes.clone();
        runtime.spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                let seen = seen.clone();
                tokio::spawn(async move {
                    let record = match acceptor.accept(tcp).await {
                        Ok(mut tls) => {
                            let alpn = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
                            let mut preface = [0u8; H2_PREFACE.len()];
                            let read = tokio::time::timeout(
                                Duration::from_secs(5),
                                tls.read_exact(&mut preface),
                            )
                            .await;
                            let h2_preface = matches!(read, Ok(Ok(_))) && preface == H2_PREFACE;
                            Handshake::Verified { alpn, h2_preface }
                        }
                        Err(e) => Handshake::Failed(e.to_string()),
                    };
                    seen.lock().unwrap().push(record);
                });
            }
        });
        Collector {
            port,
            handshakes,
            _runtime: runtime,
        }
    }

    fn handshakes(&self) -> Vec<Handshake> {
        self.handshakes.lock().unwrap().clone()
    }
}

fn write_temp(name: &str, contents: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("dmkv-otlp-tls-{}-{name}", std::process::id()));
    std::fs::write(&path, contents).unwrap();
    path
}

/// Runs [`export_one_span_child`] against `https://localhost:port` trusting `ca_file`;
/// returns its standard error.
fn run_child(port: u16, ca_file: &Path) -> String {
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "export_one_span_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_VAR, "1")
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("https://localhost:{port}"),
        )
        .env("OTEL_EXPORTER_OTLP_CERTIFICATE", ca_file)
        .env("OTEL_EXPORTER_OTLP_TIMEOUT", "3000")
        .env("RUST_LOG", "info")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("DMKV_TLS_CA_FILE")
        .env_remove("OTEL_SDK_DISABLED")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "child failed:\n{stderr}");
    stderr
}

/// Waits briefly for the collector to finish recording handshakes in flight.
fn settle(collector: &Collector, done: impl Fn(&[Handshake]) -> bool) -> Vec<Handshake> {
    for _ in 0..50 {
        let seen = collector.handshakes();
        if done(&seen) {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    collector.handshakes()
}

#[test]
fn exports_over_tls_to_a_collector_signed_by_the_configured_ca() {
    let pki = new_pki();
    let collector = Collector::start(&pki);
    let ca_file = write_temp("trusted-ca.pem", &pki.ca_pem);
    let stderr = run_child(collector.port, &ca_file);
    std::fs::remove_file(&ca_file).unwrap();
    assert!(stderr.contains("exporting=true"), "{stderr}");
    assert!(stderr.contains("tls=true"), "{stderr}");
    let seen = settle(&collector, |s| {
        s.iter().any(|h| matches!(h, Handshake::Verified { .. }))
    });
    assert!(
        seen.contains(&Handshake::Verified {
            alpn: Some(b"h2".to_vec()),
            h2_preface: true,
        }),
        "no verified gRPC (h2) connection: {seen:?}\nchild:\n{stderr}"
    );
}

#[test]
fn refuses_a_collector_signed_by_another_ca() {
    let pki = new_pki();
    let collector = Collector::start(&pki);
    let other = new_pki();
    let ca_file = write_temp("other-ca.pem", &other.ca_pem);
    let stderr = run_child(collector.port, &ca_file);
    std::fs::remove_file(&ca_file).unwrap();
    assert!(stderr.contains("exporting=true"), "{stderr}");
    let seen = settle(&collector, |s| !s.is_empty());
    assert!(
        !seen.is_empty(),
        "the exporter never tried to connect\nchild:\n{stderr}"
    );
    assert!(
        seen.iter().all(|h| matches!(h, Handshake::Failed(_))),
        "a connection was verified with the wrong CA: {seen:?}"
    );
}

#[test]
fn unreadable_ca_file_disables_export_with_a_clear_error() {
    let pki = new_pki();
    let collector = Collector::start(&pki);
    let missing = std::env::temp_dir().join(format!(
        "dmkv-otlp-tls-{}-missing-ca.pem",
        std::process::id()
    ));
    let stderr = run_child(collector.port, &missing);
    assert!(stderr.contains("exporting=false"), "{stderr}");
    assert!(
        stderr.contains(&missing.display().to_string()),
        "error does not name the file:\n{stderr}"
    );
    assert!(
        stderr.contains("OTEL_EXPORTER_OTLP_CERTIFICATE"),
        "error does not name the variable:\n{stderr}"
    );
    assert!(collector.handshakes().is_empty());
}
