//! The `dmkv` binary against an in-process cluster over soft RoCE.

use std::process::{Command, Output};

use kvstore::TransportKind;
use testbed::EmbeddedOptions;

fn dmkv(url: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dmkv"))
        .arg("--metadata")
        .arg(url)
        .args(args)
        .env_remove("DMKV_METADATA")
        .env_remove("DMKV_TOKEN")
        .env_remove("DMKV_TOKEN_FILE")
        .env_remove("DMKV_CREDENTIAL")
        .env_remove("DMKV_CREDENTIAL_FILE")
        .output()
        .expect("run dmkv")
}

/// [`dmkv`] with environment variable `key` set to `value`.
fn dmkv_env(url: &str, key: &str, value: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dmkv"))
        .arg("--metadata")
        .arg(url)
        .args(args)
        .env_remove("DMKV_METADATA")
        .env_remove("DMKV_TOKEN")
        .env_remove("DMKV_TOKEN_FILE")
        .env_remove("DMKV_CREDENTIAL")
        .env_remove("DMKV_CREDENTIAL_FILE")
        .env(key, value)
        .output()
        .expect("run dmkv")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn cli_round_trip() {
    let client = testbed::embedded_client(EmbeddedOptions {
        transport: TransportKind::Udp,
        ..EmbeddedOptions::default()
    })
    .expect("cluster");
    let url = client.metadata_url();

    let o = dmkv(
        &url,
        &[
            "create-table",
            "users",
            "--index",
            "clover",
            "--value-limit",
            "128",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = dmkv(&url, &["tables"]);
    assert!(text(&o.stdout).contains("users\tindex=clover\tvalue_limit=128"));

    let o = dmkv(&url, &["get", "users", "alice"]);
    assert_eq!(o.status.code(), Some(1), "absent key");
    assert!(text(&o.stderr).contains("not found"));

    let o = dmkv(&url, &["put", "users", "alice", "hello world"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = dmkv(&url, &["get", "users", "alice"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "hello world\n");

    // The library sees what the binary wrote.
    let s = client.session().expect("session");
    let t = s.table("users").expect("table");
    assert_eq!(
        s.block_on(t.get(b"alice")),
        Ok(Some(b"hello world".to_vec()))
    );
    s.block_on(t.put(b"bob", b"from the library")).expect("put");
    let o = dmkv(&url, &["get", "users", "bob"]);
    assert_eq!(text(&o.stdout), "from the library\n");

    let o = dmkv(&url, &["insert", "users", "alice", "x"]);
    assert_eq!(o.status.code(), Some(1));
    let o = dmkv(&url, &["del", "users", "alice"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = dmkv(&url, &["del", "users", "alice"]);
    assert_eq!(o.status.code(), Some(1));

    let long = "v".repeat(200);
    let o = dmkv(&url, &["put", "users", "carol", &long]);
    assert_eq!(o.status.code(), Some(3));
    assert!(text(&o.stderr).contains("exceeds the limit"));
    let o = dmkv(&url, &["get", "nope", "k"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(text(&o.stderr).contains("no such table"));
    let o = dmkv("127.0.0.1:1", &["tables"]);
    assert_eq!(o.status.code(), Some(3));
    let o = dmkv(&url, &["frobnicate"]);
    assert_eq!(o.status.code(), Some(2));
    let o = dmkv(&url, &["--help"]);
    assert!(o.status.success());
    assert!(text(&o.stdout).contains("create-table"));
}

#[test]
fn cli_inplace_tables() {
    let client = testbed::embedded_client(EmbeddedOptions {
        transport: TransportKind::Udp,
        ..EmbeddedOptions::default()
    })
    .expect("cluster");
    let url = client.metadata_url();
    let o = dmkv(
        &url,
        &[
            "create-table",
            "hot",
            "--index",
            "inplace",
            "--scheme",
            "pessimistic-rw-async-separate",
            "--capacity",
            "500",
            "--value-limit",
            "128",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("capacity 500"),
        "{}",
        text(&o.stdout)
    );
    let o = dmkv(&url, &["tables"]);
    assert!(text(&o.stdout).contains("hot\tindex=inplace\tvalue_limit=128"));
    let o = dmkv(&url, &["put", "hot", "k", "in place"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = dmkv(&url, &["get", "hot", "k"]);
    assert_eq!(text(&o.stdout), "in place\n", "{}", text(&o.stderr));
    // Refused: a missing capacity (usage), forbidden combinations (with why).
    let o = dmkv(
        &url,
        &["create-table", "x", "--index", "inplace", "--scheme", "crc"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    for (scheme, needle) in [
        ("pessimistic-rw-wu", "shared FAA readers"),
        ("bookend-unsafe-demo", "--unsafe-demo"),
    ] {
        let o = dmkv(
            &url,
            &[
                "create-table",
                "x",
                "--index",
                "inplace",
                "--scheme",
                scheme,
                "--capacity",
                "10",
            ],
        );
        assert_eq!(o.status.code(), Some(3), "{scheme}");
        assert!(text(&o.stderr).contains(needle), "{}", text(&o.stderr));
    }
}

/// Values from a file or standard input, JSON output, and an error about the token
/// that names the flag and the environment variable.
#[test]
fn cli_values_from_files_json_and_token_hints() {
    let client = testbed::embedded_client(EmbeddedOptions {
        transport: TransportKind::Udp,
        ..EmbeddedOptions::default()
    })
    .expect("cluster");
    let url = client.metadata_url();
    let o = dmkv(&url, &["create-table", "files", "--index", "race"]);
    assert!(o.status.success(), "{}", text(&o.stderr));

    // From a file, bytes as they are (not UTF-8).
    let dir = std::env::temp_dir().join(format!("dmkv-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("value.bin");
    std::fs::write(&file, b"\xff\x00binary").expect("write");
    let o = dmkv(
        &url,
        &[
            "put",
            "files",
            "bin",
            "--value-file",
            file.to_str().expect("path"),
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = dmkv(&url, &["--json", "get", "files", "bin"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(doc["value_base64"], "/wBiaW5hcnk=");
    assert_eq!(doc["key"], "bin");

    // From standard input.
    let mut child = Command::new(env!("CARGO_BIN_EXE_dmkv"))
        .args([
            "--metadata",
            &url,
            "put",
            "files",
            "piped",
            "--value-file",
            "-",
        ])
        .env_remove("DMKV_TOKEN")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("run dmkv");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(b"from a pipe").expect("write stdin");
    }
    assert!(child.wait().expect("wait").success());
    let o = dmkv(&url, &["--json", "get", "files", "piped"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(doc["value"], "from a pipe");

    // A value and a file at once is a usage error; so is neither.
    let o = dmkv(&url, &["put", "files", "k", "v", "--value-file", "-"]);
    assert_eq!(o.status.code(), Some(2));
    let o = dmkv(&url, &["put", "files", "k"]);
    assert_eq!(o.status.code(), Some(2));

    // JSON table list.
    let o = dmkv(&url, &["--json", "tables"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert!(
        doc.as_array()
            .is_some_and(|a| a.iter().any(|t| t["name"] == "files"))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Against a metadata service that wants a token, a command without one fails with
/// a message that says how to give it.
#[test]
fn cli_names_the_token_flag_when_the_service_wants_one() {
    use metadata::server::{MetadataServer, ServerConfig, StoreConfig};
    use metadata::store::MemStore;
    let mut config = ServerConfig::local(StoreConfig::Memory(MemStore::new()));
    config.token = Some("s3cret".into());
    let server = MetadataServer::start(config).expect("a metadata service with a token");
    let url = server.url();
    let o = dmkv(&url, &["create-table", "t"]);
    assert_eq!(o.status.code(), Some(3));
    let err = text(&o.stderr);
    assert!(
        err.contains("--credential-file") && err.contains("DMKV_TOKEN"),
        "{err}"
    );
    // The token is no command-line argument.
    let o = dmkv(&url, &["--token", "s3cret", "create-table", "t"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    // From a file, or the environment, it works.
    let dir = tempfile::tempdir().expect("temp dir");
    let token_file = dir.path().join("root.token");
    std::fs::write(&token_file, "s3cret\n").expect("write");
    let path = token_file.to_str().expect("path");
    let o = dmkv(&url, &["--token-file", path, "create-table", "t"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = dmkv_env(&url, "DMKV_TOKEN", "s3cret", &["drop-table", "t"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

/// An admin issues a table credential; a client holding only it reads and writes its
/// table with the credential from a file or the environment, is refused elsewhere
/// with a hint, and is shut out once the credential is revoked.
#[test]
fn cli_credentials_from_a_file_and_the_environment() {
    let cluster = testbed::Embedded::start_with_root_token(
        &EmbeddedOptions {
            transport: TransportKind::Udp,
            ..EmbeddedOptions::default()
        },
        "root",
    )
    .expect("cluster");
    let url = cluster.metadata_url();
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("root.token");
    std::fs::write(&root, "root").expect("write");
    let root = root.to_str().expect("path");
    for t in ["orders", "secrets"] {
        let o = dmkv(&url, &["--token-file", root, "create-table", t]);
        assert!(o.status.success(), "{}", text(&o.stderr));
    }
    let o = dmkv(
        &url,
        &[
            "--token-file",
            root,
            "credentials",
            "create",
            "--table",
            "orders",
            "--access",
            "read-write",
            "--label",
            "orders app",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let secret = text(&o.stdout).trim().to_owned();
    assert!(secret.starts_with("dmkv_"), "{secret}");
    assert!(text(&o.stderr).contains("shown this once"));
    let cred = dir.path().join("app.cred");
    std::fs::write(&cred, format!("{secret}\n")).expect("write");
    let cred = cred.to_str().expect("path");

    let o = dmkv(
        &url,
        &["--credential-file", cred, "put", "orders", "k", "v"],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = dmkv_env(&url, "DMKV_CREDENTIAL", &secret, &["get", "orders", "k"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "v\n");
    let o = dmkv_env(&url, "DMKV_CREDENTIAL", &secret, &["tables"]);
    assert!(text(&o.stdout).contains("orders") && !text(&o.stdout).contains("secrets"));

    // Out of scope: 403 with a hint; admin work: 403.
    let o = dmkv(&url, &["--credential-file", cred, "get", "secrets", "k"]);
    assert_eq!(o.status.code(), Some(3));
    let err = text(&o.stderr);
    assert!(
        err.contains("\"secrets\"") && err.contains("dmkv credentials create"),
        "{err}"
    );
    let o = dmkv(&url, &["--credential-file", cred, "drop-table", "orders"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    let o = dmkv(&url, &["--credential-file", cred, "credentials", "list"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));

    // Listed for the admin, without the secret; revoked, it stops working.
    let o = dmkv(&url, &["--token-file", root, "credentials", "list"]);
    let listed = text(&o.stdout);
    assert!(listed.contains("read-write on orders") && listed.contains("label=orders app"));
    assert!(!listed.contains(&secret));
    let id = listed.split('\t').next().expect("an id").to_owned();
    let o = dmkv(&url, &["--token-file", root, "credentials", "revoke", &id]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = dmkv(&url, &["--credential-file", cred, "get", "orders", "k"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(
        text(&o.stderr).contains("--credential-file"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn tables_that_lost_data_say_so() {
    let client = testbed::embedded_client(EmbeddedOptions {
        transport: TransportKind::Udp,
        ..EmbeddedOptions::default()
    })
    .expect("cluster");
    let url = client.metadata_url();
    let o = dmkv(
        &url,
        &[
            "create-table",
            "idx",
            "--index",
            "race",
            "--value-limit",
            "64",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = dmkv(&url, &["tables"]);
    assert_eq!(
        text(&o.stdout).lines().next(),
        Some("idx\tindex=race\tvalue_limit=64\tmemnodes=[1]"),
        "a healthy table's line is unchanged"
    );

    // The memnode comes back with new memory (another rkey): the table is lost.
    let meta = dmkv_api::MetadataClient::new(&url).expect("metadata client");
    let node = meta.memnodes().expect("memnodes").remove(0);
    let mut regions: Vec<_> = node
        .regions
        .iter()
        .map(|r| dmkv_api::metadata::RegionSpec {
            rkey: r.rkey ^ 1,
            base_va: r.base_va,
            len: r.len,
            path: r.path.clone(),
            instance: 0,
        })
        .collect();
    regions.truncate(1);
    meta.register_memnode(&dmkv_api::metadata::RegisterMemnodeRequest {
        name: node.name.clone(),
        admin_url: node.admin_url.clone(),
        data_addr: node.data_addr.clone(),
        capacity: node.capacity,
        regions,
        zone: None,
    })
    .expect("re-registration");
    let o = dmkv(&url, &["tables"]);
    let out = text(&o.stdout);
    assert!(
        out.contains("idx\tindex=race\tvalue_limit=64\tmemnodes=[1]\thealth=LOST"),
        "{out}"
    );
    assert!(
        out.contains(&format!("  lost on memnode {} (1)", node.name)),
        "{out}"
    );
}

/// `--access rpc` runs the data commands as RPCs on a node with workers (and says
/// what is missing on one without); `--access hybrid` works on both.
#[test]
fn cli_access_modes() {
    let options = EmbeddedOptions {
        transport: TransportKind::Udp,
        ..EmbeddedOptions::default()
    };
    let client =
        testbed::embedded_client_with_rpc_workers(options.clone(), testbed::Security::Open, 1)
            .expect("cluster");
    let url = client.metadata_url();
    let o = dmkv(&url, &["create-table", "h", "--index", "race"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    for mode in ["rpc", "hybrid", "one-sided"] {
        let o = dmkv(&url, &["put", "h", mode, "v", "--access", mode]);
        assert!(o.status.success(), "{mode}: {}", text(&o.stderr));
        let o = dmkv(&url, &["get", "h", mode, "--access", "rpc"]);
        assert_eq!(text(&o.stdout), "v\n", "{mode}: {}", text(&o.stderr));
    }
    // Requests written into the queue pair's ring instead of sent.
    let o = dmkv(
        &url,
        &[
            "put",
            "h",
            "w",
            "by-ring",
            "--access",
            "rpc",
            "--rpc-transport",
            "write",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = dmkv(
        &url,
        &[
            "get",
            "h",
            "w",
            "--access",
            "rpc",
            "--rpc-transport",
            "write",
        ],
    );
    assert_eq!(text(&o.stdout), "by-ring\n", "{}", text(&o.stderr));
    let o = dmkv(&url, &["get", "h", "rpc", "--access", "two-sided"]);
    assert!(!o.status.success());
    let o = dmkv(&url, &["get", "h", "rpc", "--rpc-transport", "rdma"]);
    assert!(!o.status.success());

    // A passive node: rpc names the missing workers, hybrid goes one-sided.
    let passive = testbed::embedded_client(options).expect("cluster");
    let url = passive.metadata_url();
    let o = dmkv(&url, &["create-table", "h", "--index", "race"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = dmkv(&url, &["put", "h", "k", "v", "--access", "rpc"]);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("--rpc-workers"),
        "{}",
        text(&o.stderr)
    );
    let o = dmkv(
        &url,
        &[
            "put",
            "h",
            "k",
            "v",
            "--access",
            "hybrid",
            "--hybrid-k",
            "1",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
}
