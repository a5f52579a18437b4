//! A cluster whose HTTP APIs speak HTTPS only: the metadata service and a memory node
//! serve a throwaway CA's certificates, the memory node registers an `https://` admin
//! URL, and a client trusting the CA creates a table, puts and gets. A client that does
//! not trust the CA gets a certificate error naming what it trusts, plain HTTP to an
//! HTTPS listener gets a clear refusal, and HTTPS to a plain listener a clear error.

#[path = "../../service/tests/support/test_pki.rs"]
mod test_pki;

use std::time::{Duration, Instant};

use dmkv_api::tls::ClientTls;
use dmkv_api::{ClientError, HttpClient, MetadataClient};
use dmkv_service::ServerTls;
use kvstore::{Client, ClientOptions, TableSpec, TransportKind};
use memnode::config::MemnodeConfig;
use memnode::registrar::{HttpRegistrar, Registrar};
use memnode::server::Memnode;
use metadata::server::{MetadataServer, ServerConfig, StoreConfig};
use metadata::store::MemStore;
use test_pki::TestPki;

fn https_metadata(pki: &TestPki) -> metadata::server::ServerHandle {
    let mut config = ServerConfig::local(StoreConfig::Memory(MemStore::new()));
    config.tls = Some(ServerTls::load(&pki.cert, &pki.key).unwrap());
    MetadataServer::start(config).unwrap()
}

#[test]
fn a_client_trusting_the_ca_creates_puts_and_gets_over_https() {
    let pki = TestPki::generate();
    // What this process (the client, and the in-process metadata service calling the
    // memory node) trusts: the test CA, as --tls-ca-file would set it.
    dmkv_api::tls::set_default_ca_file(Some(&pki.ca)).unwrap();
    let server = https_metadata(&pki);
    let url = server.url();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");

    let mut config = MemnodeConfig::local(8 << 20);
    config.tls = Some(ServerTls::load(&pki.cert, &pki.key).unwrap());
    let node = Memnode::start(config).unwrap();
    assert!(
        node.admin_url().starts_with("https://"),
        "{}",
        node.admin_url()
    );
    let registrar = HttpRegistrar::new(&url, None, Some("m0".into()))
        .unwrap()
        .with_interval(Duration::from_millis(200));
    registrar
        .register(&node.node_info(), &node.admin_url())
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while registrar.memnode_id().is_none() {
        assert!(
            Instant::now() < deadline,
            "the memory node did not register"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let memnodes = MetadataClient::new(&url).unwrap().memnodes().unwrap();
    assert_eq!(memnodes.len(), 1);
    assert_eq!(memnodes[0].admin_url, node.admin_url());

    let client = Client::connect(&url, ClientOptions::with_transport(TransportKind::Udp)).unwrap();
    client
        .create_table("secure", &TableSpec::clover(1024))
        .unwrap();
    let session = client.session().unwrap();
    let table = session.table("secure").unwrap();
    session.block_on(async {
        table.put(b"alice", b"{\"age\": 30}").await.unwrap();
        assert_eq!(
            table.get(b"alice").await.unwrap().as_deref(),
            Some(&b"{\"age\": 30}"[..])
        );
        assert_eq!(table.get(b"bob").await.unwrap(), None);
    });
    // A RACE table's directory is zeroed by the metadata service through the memory
    // node's admin API: a call between two HTTPS services.
    client
        .create_table("secure_race", &TableSpec::race(1024))
        .unwrap();
    let race = session.table("secure_race").unwrap();
    session.block_on(async {
        race.put(b"k", b"v").await.unwrap();
        assert_eq!(race.get(b"k").await.unwrap().as_deref(), Some(&b"v"[..]));
    });
    drop(race);
    drop(table);
    drop(session);
    drop(client);
    registrar
        .deregister(&node.node_info(), &node.admin_url())
        .ok();
    node.shutdown();
    server.shutdown();
}

#[test]
fn a_client_not_trusting_the_ca_gets_a_certificate_error() {
    let pki = TestPki::generate();
    let server = https_metadata(&pki);
    for (tls, trusted) in [
        (ClientTls::public_roots(), "public web roots".to_owned()),
        (
            ClientTls::from_ca_file(&pki.other_ca).unwrap(),
            pki.other_ca.display().to_string(),
        ),
    ] {
        let client = HttpClient::new(&server.url()).unwrap().with_tls(tls);
        let e = client.request("GET", "/healthz", None).unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, ClientError::Protocol(_)), "{text}");
        assert!(text.contains("certificate is not trusted"), "{text}");
        assert!(text.contains("UnknownIssuer"), "{text}");
        assert!(text.contains(&trusted), "{text}");
    }
    let trusting = HttpClient::new(&server.url())
        .unwrap()
        .with_tls(ClientTls::from_ca_file(&pki.ca).unwrap());
    assert_eq!(
        trusting.request("GET", "/healthz", None).unwrap().status,
        200
    );
    server.shutdown();
}

#[test]
fn plain_http_to_an_https_listener_is_refused_clearly() {
    let pki = TestPki::generate();
    let server = https_metadata(&pki);
    let plain = format!("http://{}", server.addr());
    let e = MetadataClient::new(&plain).unwrap().tables().unwrap_err();
    assert_eq!(e.status(), Some(400), "{e}");
    assert!(e.to_string().contains("HTTPS only"), "{e}");
    server.shutdown();

    // And the other way round: https:// to a plain HTTP service.
    let plain_server =
        MetadataServer::start(ServerConfig::local(StoreConfig::Memory(MemStore::new()))).unwrap();
    let https = format!("https://{}", plain_server.addr());
    let client = HttpClient::new(&https)
        .unwrap()
        .with_tls(ClientTls::from_ca_file(&pki.ca).unwrap());
    let e = client.request("GET", "/healthz", None).unwrap_err();
    assert!(matches!(e, ClientError::Protocol(_)), "{e}");
    assert!(e.to_string().contains("is it serving HTTPS?"), "{e}");
    plain_server.shutdown();
}
