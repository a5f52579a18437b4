//! A client holding only a table credential: sessions, reads and writes on the
//! tables its credential covers (Clover and RACE), and clear refusals elsewhere.

use dmkv_api::MetadataClient;
use dmkv_api::credentials::{Access, CreateCredentialRequest, CredentialKind};
use kvstore::{Client, ClientOptions, KvError, TableSpec, TransportKind};
use testbed::{Embedded, EmbeddedOptions};

const ROOT: &str = "root-token";

fn credential(url: &str, tables: &[&str], access: Access) -> String {
    MetadataClient::new(url)
        .unwrap()
        .with_token(Some(ROOT.into()))
        .create_credential(&CreateCredentialRequest {
            kind: CredentialKind::Table,
            tables: tables.iter().map(|t| (*t).to_owned()).collect(),
            access: Some(access),
            ..Default::default()
        })
        .unwrap()
        .secret
}

#[test]
fn a_table_credential_is_enough_to_read_and_write_its_tables() {
    let embedded = Embedded::start_with_root_token(
        &EmbeddedOptions {
            memnodes: 1,
            capacity: 64 << 20,
            transport: TransportKind::Local,
            ..EmbeddedOptions::default()
        },
        ROOT,
    )
    .unwrap();
    let url = embedded.metadata_url();
    let local = embedded.local_memory();
    let client = |options: ClientOptions| {
        Client::in_process(&url, options.with_name("app"), local.clone(), Box::new(())).unwrap()
    };
    let local_options = || ClientOptions::with_transport(TransportKind::Local);
    let admin = client(local_options().with_token(Some(ROOT.into())));
    admin.create_table("a", &TableSpec::clover(256)).unwrap();
    admin.create_table("r", &TableSpec::race(256)).unwrap();
    admin.create_table("b", &TableSpec::clover(256)).unwrap();

    let app =
        client(local_options().with_credential(credential(&url, &["a", "r"], Access::ReadWrite)));
    let s = app.session().unwrap();
    let a = s.table("a").unwrap();
    let r = s.table("r").unwrap();
    s.block_on(async {
        a.put(b"k", b"v1").await.unwrap();
        assert_eq!(a.get(b"k").await, Ok(Some(b"v1".to_vec())));
        a.delete(b"k").await.unwrap();
        assert_eq!(a.get(b"k").await, Ok(None));
        r.put(b"k", b"v2").await.unwrap();
        assert_eq!(r.get(b"k").await, Ok(Some(b"v2".to_vec())));
        r.delete(b"k").await.unwrap();
    });
    // Another table, and the catalog, are out of its reach.
    match s.table("b") {
        Err(KvError::InvalidArgument(m)) => {
            assert!(m.contains("403") || m.contains("\"b\""), "{m}")
        }
        other => panic!("table b: {:?}", other.map(|_| ())),
    }
    assert!(matches!(
        app.create_table("c", &TableSpec::clover(256)),
        Err(KvError::InvalidArgument(_))
    ));
    assert_eq!(app.tables().unwrap().len(), 2);

    // A read-only credential reads, and is refused a write.
    s.block_on(async { a.put(b"seen", b"yes").await.unwrap() });
    let reader = client(local_options().with_credential(credential(&url, &["a"], Access::Read)));
    let rs = reader.session().unwrap();
    let ra = rs.table("a").unwrap();
    rs.block_on(async {
        assert_eq!(ra.get(b"seen").await, Ok(Some(b"yes".to_vec())));
        assert!(matches!(
            ra.put(b"new", b"no").await,
            Err(KvError::InvalidArgument(_))
        ));
    });
    drop(embedded);
}
