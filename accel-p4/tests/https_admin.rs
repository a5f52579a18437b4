//! The soft switch's admin API over HTTPS: with a certificate and key it serves
//! `https://` only, answers a client trusting the CA, and tells a plain-HTTP one to
//! use HTTPS.

#[path = "../../service/tests/support/test_pki.rs"]
mod test_pki;

use accel_p4::switch::{SoftSwitch, SwitchConfig};
use dmkv_api::HttpClient;
use dmkv_api::tls::ClientTls;
use dmkv_service::ServerTls;
use test_pki::TestPki;

#[test]
fn the_admin_api_serves_https_only() {
    let pki = TestPki::generate();
    let mut config = SwitchConfig::local();
    config.tls = Some(ServerTls::load(&pki.cert, &pki.key).unwrap());
    let switch = SoftSwitch::start(config).unwrap();
    let url = switch.admin_url();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let client = HttpClient::new(&url)
        .unwrap()
        .with_tls(ClientTls::from_ca_file(&pki.ca).unwrap());
    let health = client.request("GET", "/healthz", None).unwrap();
    assert_eq!(health.status, 200, "{}", health.text());

    let plain = HttpClient::new(&format!("http://{}", switch.admin_addr())).unwrap();
    let refused = plain.request("GET", "/healthz", None).unwrap();
    assert_eq!(refused.status, 400);
    assert!(refused.text().contains("HTTPS only"), "{}", refused.text());
    switch.shutdown();
}
