//! A cluster whose memory nodes require the admin token, reached through the soft
//! switch: the switch presents the token when it creates its clients' responder queue
//! pairs, and sessions through it work; a switch without the token cannot create them.

use accel_p4::switch::{SoftSwitch, SwitchConfig};
use kvstore::{AcceleratorUse, Client, ClientOptions, ConnectionOptions, TableSpec, TransportKind};
use testbed::{Embedded, EmbeddedOptions};

fn options(switch_admin: String) -> ClientOptions {
    let mut o = ClientOptions::default().with_connection(
        ConnectionOptions::default().with_accelerator(AcceleratorUse::Via(switch_admin)),
    );
    o.connection.transport = TransportKind::Udp;
    o
}

#[test]
fn sessions_through_the_switch_reach_secured_memory_nodes() {
    let cluster = Embedded::start_secured(&EmbeddedOptions {
        memnodes: 2,
        transport: TransportKind::Udp,
        ..EmbeddedOptions::default()
    })
    .unwrap();
    let token = cluster.admin_token().map(str::to_owned);
    assert!(token.is_some());
    let sw = SoftSwitch::start(SwitchConfig {
        memnode_token: token,
        ..SwitchConfig::local()
    })
    .unwrap();
    let client = Client::connect(&cluster.metadata_url(), options(sw.admin_url())).unwrap();
    client.create_table("t", &TableSpec::clover(256)).unwrap();
    let s = client.session().unwrap();
    let t = s.table("t").unwrap();
    for i in 0..50u32 {
        s.block_on(t.put(&i.to_le_bytes(), b"through the switch"))
            .unwrap();
    }
    for i in 0..50u32 {
        assert_eq!(
            s.block_on(t.get(&i.to_le_bytes())).unwrap(),
            Some(b"through the switch".to_vec())
        );
    }

    // Without the token the switch is refused by the memory nodes.
    let tokenless = SoftSwitch::start(SwitchConfig::local()).unwrap();
    let other = Client::connect(&cluster.metadata_url(), options(tokenless.admin_url())).unwrap();
    let Err(e) = other.session() else {
        panic!("a switch without the token got queue pairs on secured memory nodes");
    };
    assert!(e.to_string().contains("401"), "{e}");
}
