//! A listener given a TLS identity serves HTTPS only: a client trusting the CA gets
//! its answers, one trusting another CA fails the handshake, plain HTTP gets a 400
//! saying to use HTTPS, a stop still drains and returns, and SIGHUP reloads the
//! certificate.

#[path = "support/test_pki.rs"]
mod test_pki;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use dmkv_service::{HttpServer, Listener, ServerTls};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use test_pki::TestPki;

fn serve(pki: &TestPki) -> HttpServer {
    let tls = ServerTls::load(&pki.cert, &pki.key).unwrap();
    let listener = Listener::bind("127.0.0.1:0".parse().unwrap())
        .unwrap()
        .with_tls(Some(tls));
    let app = Router::new().route("/healthz", get(|| async { "ok" }));
    HttpServer::spawn("tls-test", listener, app, Duration::from_secs(1)).unwrap()
}

/// `GET /healthz` over TLS trusting only the CA in `ca`: the answer, or the I/O error.
fn get_over_tls(server: &HttpServer, ca: &Path) -> std::io::Result<String> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let tcp = TcpStream::connect(server.addr()).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    tls.write_all(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")?;
    let mut answer = String::new();
    tls.read_to_string(&mut answer)?;
    Ok(answer)
}

#[test]
fn a_client_trusting_the_ca_is_served_over_https() {
    let pki = TestPki::generate();
    let server = serve(&pki);
    assert!(
        server.url().starts_with("https://127.0.0.1:"),
        "{}",
        server.url()
    );
    let answer = get_over_tls(&server, &pki.ca).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("ok"), "{answer}");
    server.stop();
}

#[test]
fn a_client_trusting_another_ca_fails_the_handshake() {
    let pki = TestPki::generate();
    let server = serve(&pki);
    let e = get_over_tls(&server, &pki.other_ca).unwrap_err();
    assert!(e.to_string().contains("UnknownIssuer"), "{e}");
    // The server keeps serving those who trust it.
    assert!(
        get_over_tls(&server, &pki.ca)
            .unwrap()
            .starts_with("HTTP/1.1 200")
    );
}

#[test]
fn plain_http_is_told_to_use_https() {
    let pki = TestPki::generate();
    let server = serve(&pki);
    let mut s = TcpStream::connect(server.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("HTTPS only"), "{answer}");
}

#[test]
fn stopping_closes_idle_tls_connections_after_the_drain() {
    let pki = TestPki::generate();
    let server = serve(&pki);
    // An idle TLS connection (handshake done, no request) does not hold the stop
    // beyond the drain.
    let _ = get_over_tls(&server, &pki.ca).unwrap();
    let idle = TcpStream::connect(server.addr()).unwrap();
    let started = Instant::now();
    server.stop();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    drop(idle);
}

/// The DER of the certificate the server presents to a client trusting `ca`.
fn presented_certificate(server: &HttpServer, ca: &Path) -> Vec<u8> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = ServerName::try_from("localhost").unwrap();
    let mut conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let mut tcp = TcpStream::connect(server.addr()).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    while conn.is_handshaking() {
        conn.complete_io(&mut tcp).unwrap();
    }
    conn.peer_certificates().unwrap()[0].as_ref().to_vec()
}

#[test]
fn sighup_reloads_the_certificate() {
    let pki = TestPki::generate();
    let server = serve(&pki);
    let before = presented_certificate(&server, &pki.ca);
    // A renewed certificate (same CA, new key) replaces the files; SIGHUP picks it up.
    let (cert, key) = pki.renewed();
    std::fs::write(&pki.cert, cert).unwrap();
    std::fs::write(&pki.key, key).unwrap();
    let status = std::process::Command::new("kill")
        .args(["-HUP", &std::process::id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = presented_certificate(&server, &pki.ca);
        if now != before {
            assert_eq!(now, presented_certificate(&server, &pki.ca));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "SIGHUP did not reload the certificate"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        get_over_tls(&server, &pki.ca)
            .unwrap()
            .starts_with("HTTP/1.1 200")
    );
}
