//! `dmkv`: talk to a running dmkv cluster from the command line.
//!
//! ```text
//! dmkv --metadata http://127.0.0.1:9700 tables
//! dmkv --metadata http://127.0.0.1:9700 create-table users --index clover --value-limit 4096
//! dmkv --metadata http://127.0.0.1:9700 create-table hot --index inplace --scheme pessimistic-x-wc-wu --capacity 10000 --value-limit 256
//! dmkv --metadata http://127.0.0.1:9700 put users alice '{"age": 30}'
//! dmkv --metadata http://127.0.0.1:9700 put users photo --value-file photo.jpg
//! echo hello | dmkv --metadata http://127.0.0.1:9700 put users bob --value-file -
//! dmkv --metadata http://127.0.0.1:9700 --json get users alice
//! dmkv --metadata http://127.0.0.1:9700 del users alice
//! dmkv --metadata http://127.0.0.1:9700 keys users --prefix al --limit 10
//! dmkv --token-file root.token credentials create --table users --access read-write > app.cred
//! dmkv --credential-file app.cred get users alice
//! ```
//!
//! Secrets come from files (`--credential-file`, `--token-file`) or the environment
//! (`DMKV_CREDENTIAL`, `DMKV_TOKEN`), never from the command line ([`bearer`]).

mod bearer;
mod credentials;
mod feed;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use dmkv_api::metadata::TableState;
use kvstore::{
    AccessMode, AccessOptions, Client, ClientOptions, KvError, SchemeSpec, TableSpec, TransportKind,
};

/// Exit status of a successful command.
const EXIT_OK: u8 = 0;
/// Exit status when the key is absent (get, del, update) or present (insert).
const EXIT_NEGATIVE: u8 = 1;
/// Exit status of every other failure (clap uses 2 for usage errors).
const EXIT_ERROR: u8 = 3;
/// Exit status of a write that may or may not have taken effect.
const EXIT_OUTCOME_UNKNOWN: u8 = 4;

#[derive(Parser, Debug)]
#[command(
    name = "dmkv",
    version,
    about = "Command-line client of a dmkv cluster",
    after_help = "Exit status: 0 success; 1 the key is absent (get, del, update) or already \
                  present (insert); 2 usage error; 3 any other error (unreachable cluster, \
                  no such table, value too large, ...).\n\
                  Keys are taken as UTF-8 text from the command line (1 to 256 bytes; 64 for \
                  inplace tables); values from the command line or, with --value-file, from a \
                  file or standard input (-).\n\
                  Logs go to standard error; RUST_LOG sets the level (default warn)."
)]
struct Cli {
    /// Metadata service URL (http://host:port or https://host:port).
    #[arg(
        long,
        env = "DMKV_METADATA",
        default_value = "http://127.0.0.1:9700",
        global = true
    )]
    metadata: String,
    /// File holding a credential (`dmkv_…`) to present to the metadata service (or
    /// the environment variable DMKV_CREDENTIAL holding the credential itself).
    #[arg(long, env = "DMKV_CREDENTIAL_FILE", global = true, value_name = "PATH")]
    credential_file: Option<PathBuf>,
    /// File holding the cluster's root token, for admins (or the environment variable
    /// DMKV_TOKEN holding the token itself).
    #[arg(long, env = "DMKV_TOKEN_FILE", global = true, value_name = "PATH")]
    token_file: Option<PathBuf>,
    /// PEM CA bundle that the certificates of https:// services must chain to
    /// (default: the public web roots).
    #[arg(long, env = "DMKV_TLS_CA_FILE", value_name = "PATH", global = true)]
    tls_ca_file: Option<PathBuf>,
    /// How to reach the memory nodes.
    #[arg(long, value_enum, default_value_t = Transport::Udp, global = true)]
    transport: Transport,
    /// Print results as JSON (`tables`: an array of table descriptions; `get`: an object
    /// with the table, the key and the value — as text when it is UTF-8, else base64;
    /// `keys`: an object with the table and its keys, each `key` or `key_base64`).
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Transport {
    /// Soft RoCE over UDP.
    Udp,
    /// The memory nodes' shared-memory files (same host).
    Shm,
}

/// How a data command reaches the table's index.
#[derive(clap::Args, Debug, Clone, Copy)]
struct AccessArgs {
    /// How the command reaches the table's index: one-sided verbs, RPCs executed
    /// by the memory node's workers (needs `memnode --rpc-workers N`; RACE: one per
    /// operation; Clover: the walk to the tail and the link; in-place: each probed
    /// tuple under a pessimistic latch; refused for other latch schemes and for
    /// replicated tables), or hybrid (one-sided first, RPC past --hybrid-k round
    /// trips or, in-place, on a held latch).
    #[arg(long, value_enum, default_value_t = Access::OneSided)]
    access: Access,
    /// With --access hybrid: the most round trips the operation takes one-sided
    /// before it turns to an RPC.
    #[arg(long, default_value_t = 3, value_name = "K", value_parser = clap::value_parser!(u32).range(1..))]
    hybrid_k: u32,
    /// How RPC requests travel: a SEND on the queue pair, or one WRITE into the queue
    /// pair's request ring at the memory node (`memnode --rpc-rings`); replies come
    /// back by SEND either way.
    #[arg(long, value_enum, default_value_t = RpcCarrier::Send)]
    rpc_transport: RpcCarrier,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum RpcCarrier {
    /// A SEND on the queue pair.
    Send,
    /// A WRITE into the queue pair's request ring.
    Write,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Access {
    /// One-sided verbs only.
    OneSided,
    /// One RPC per operation, executed next to memory.
    Rpc,
    /// One-sided first, RPC past --hybrid-k round trips.
    Hybrid,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Index {
    /// Per-key chains of immutable versions.
    Clover,
    /// RACE extendible hashing.
    Race,
    /// A fixed array of tuples updated in place under a latch scheme (needs
    /// --scheme and --capacity).
    Inplace,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List the tables.
    Tables,
    /// Create a table.
    CreateTable {
        /// Table name (1-64 characters [A-Za-z0-9_.-]).
        name: String,
        /// Index.
        #[arg(long, value_enum, default_value_t = Index::Clover)]
        index: Index,
        /// Largest value in bytes (64 B ... 1 MiB).
        #[arg(long, default_value_t = 4096)]
        value_limit: u64,
        /// Latch scheme of an inplace table, e.g. pessimistic-rw-async-embedded,
        /// pessimistic-x-wc-wu, pessimistic-rw-async-separate, versioning, crc,
        /// farm-consistent, bookend-unsafe-demo (with --unsafe-demo).
        #[arg(long, required_if_eq("index", "inplace"))]
        scheme: Option<String>,
        /// Number of tuples of an inplace table (fixed for its life).
        #[arg(long, required_if_eq("index", "inplace"))]
        capacity: Option<u64>,
        /// Acknowledge that the bookend scheme returns torn values (it exists only
        /// to demonstrate that).
        #[arg(long)]
        unsafe_demo: bool,
        /// Copies of the table's data, 1 to 3, on distinct memnodes (distinct zones
        /// where the memnodes declare them); needs that many registered memnodes.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=3))]
        replication: u32,
    },
    /// Drop a table.
    DropTable {
        /// Table name.
        name: String,
    },
    /// Move one copy of a replicated table to another memnode (rebalancing): a new
    /// member is copied to while the table serves, then the member named leaves.
    MoveCopy {
        /// Table name.
        table: String,
        /// The replica set (its position in the table's replica sets, from 0).
        #[arg(long, default_value_t = 0)]
        set: usize,
        /// The memnode id that hands its copy over.
        #[arg(long)]
        from: u64,
        /// The memnode id that takes it (default: one is picked as for a failover).
        #[arg(long)]
        to: Option<u64>,
    },
    /// Print the value of a key.
    Get {
        /// Table name.
        table: String,
        /// Key.
        key: String,
        #[command(flatten)]
        access: AccessArgs,
    },
    /// Set a key (insert or overwrite).
    Put {
        /// Table name.
        table: String,
        /// Key.
        key: String,
        #[command(flatten)]
        value: ValueSource,
        #[command(flatten)]
        access: AccessArgs,
    },
    /// Create a key; fails if it exists.
    Insert {
        /// Table name.
        table: String,
        /// Key.
        key: String,
        #[command(flatten)]
        value: ValueSource,
        #[command(flatten)]
        access: AccessArgs,
    },
    /// Overwrite a key; fails if it does not exist.
    Update {
        /// Table name.
        table: String,
        /// Key.
        key: String,
        #[command(flatten)]
        value: ValueSource,
        #[command(flatten)]
        access: AccessArgs,
    },
    /// Delete a key.
    Del {
        /// Table name.
        table: String,
        /// Key.
        key: String,
        #[command(flatten)]
        access: AccessArgs,
    },
    /// List the live keys of a table, in byte order, one a line.
    Keys {
        /// Table name.
        table: String,
        /// Only keys starting with this text.
        #[arg(long, default_value = "")]
        prefix: String,
        /// At most this many keys.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        limit: Option<u64>,
    },
    /// Issue, list and revoke scoped credentials (admins).
    Credentials {
        #[command(subcommand)]
        command: credentials::CredentialsCommand,
    },
    /// A Clover table's change feed: create it, write through it, read a consumer ring.
    Feed {
        #[command(subcommand)]
        command: feed::FeedCommand,
    },
}

/// Where a value comes from: the command line, or a file (`-`: standard input).
#[derive(clap::Args, Debug)]
#[group(required = true, multiple = false)]
struct ValueSource {
    /// Value (UTF-8 text).
    value: Option<String>,
    /// Read the value from this file instead (`-`: standard input), as bytes.
    #[arg(long, value_name = "PATH")]
    value_file: Option<PathBuf>,
}

impl ValueSource {
    fn bytes(self) -> Result<Vec<u8>, KvError> {
        match (self.value, self.value_file) {
            (Some(v), _) => Ok(v.into_bytes()),
            (None, Some(path)) if path.as_os_str() == "-" => {
                let mut v = Vec::new();
                std::io::stdin().read_to_end(&mut v).map_err(|e| {
                    KvError::InvalidArgument(format!("reading the value from standard input: {e}"))
                })?;
                Ok(v)
            }
            (None, Some(path)) => std::fs::read(&path).map_err(|e| {
                KvError::InvalidArgument(format!("reading the value from {}: {e}", path.display()))
            }),
            (None, None) => Err(KvError::InvalidArgument(
                "give the value, or --value-file PATH (- for standard input)".into(),
            )),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Log lines at warn; with OTEL_EXPORTER_OTLP_ENDPOINT set, the operation's spans
    // are exported too (flushed when the guard drops, after the command).
    let _telemetry = telemetry::init_client("dmkv");
    match run(cli) {
        Ok(()) => ExitCode::from(EXIT_OK),
        Err(e) => {
            let code = match e {
                KvError::NotFound | KvError::AlreadyExists => EXIT_NEGATIVE,
                KvError::OutcomeUnknown(_) => EXIT_OUTCOME_UNKNOWN,
                _ => EXIT_ERROR,
            };
            eprintln!("dmkv: {e}");
            if let Some(hint) = hint(&e) {
                eprintln!("dmkv: {hint}");
            }
            ExitCode::from(code)
        }
    }
}

/// What to do after a 401 from the metadata service.
const HINT_401: &str = "the metadata service wants a valid credential for this: give one with \
     --credential-file PATH or the DMKV_CREDENTIAL environment variable (admins: the root \
     token with --token-file PATH or DMKV_TOKEN); a revoked or expired credential must be \
     replaced by a new one (dmkv credentials create, run by an admin)";

/// What to do after a 403 from the metadata service.
const HINT_403: &str = "the credential given does not cover this (the message above names the \
     scope needed): ask an admin for one that does, e.g. dmkv credentials create --table \
     TABLE --access read-write";

/// What to do about a write whose outcome is unknown, or an error the metadata
/// service answered with 401 or 403 (the HTTP client's error is somewhere in the
/// error's source chain, or its text is in the message of a refused credential).
fn hint(e: &KvError) -> Option<&'static str> {
    let by_status = |status: u16| match status {
        401 => Some(HINT_401),
        403 => Some(HINT_403),
        _ => None,
    };
    match e {
        KvError::OutcomeUnknown(_) => {
            return Some(
                "the write may or may not have been applied: read the key (dmkv get) before \
                 writing it again",
            );
        }
        KvError::InvalidArgument(m) if m.contains("refused the credential") => {
            return [401, 403]
                .into_iter()
                .find(|s| m.contains(&format!("HTTP {s}")))
                .and_then(by_status);
        }
        _ => {}
    }
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(c) = cause {
        if let Some(dmkv_api::ClientError::Http { status, .. }) = c.downcast_ref() {
            return by_status(*status);
        }
        cause = c.source();
    }
    None
}

/// The value of a key as JSON: text when it is UTF-8, else base64.
fn value_json(table: &str, key: &str, value: &[u8]) -> String {
    let mut doc = serde_json::Map::new();
    doc.insert("table".into(), table.into());
    doc.insert("key".into(), key.into());
    match std::str::from_utf8(value) {
        Ok(text) => doc.insert("value".into(), text.into()),
        Err(_) => doc.insert("value_base64".into(), base64(value).into()),
    };
    serde_json::Value::Object(doc).to_string()
}

/// A key as one line of text: as it is when it is UTF-8 without control characters
/// or backslashes, else with every byte outside printable ASCII (and the backslash)
/// escaped as `\xNN`, `\n`, `\t`, `\\` …, so a line always stands for one key.
fn key_text(key: &[u8]) -> String {
    match std::str::from_utf8(key) {
        Ok(text) if !text.chars().any(|c| c.is_control() || c == '\\') => text.to_owned(),
        _ => key.escape_ascii().to_string(),
    }
}

/// Listed keys as JSON: `{"table", "keys": [{"key": text} or {"key_base64": …}]}`.
fn keys_json(table: &str, keys: &[Vec<u8>]) -> String {
    let keys: Vec<serde_json::Value> = keys
        .iter()
        .map(|k| match std::str::from_utf8(k) {
            Ok(text) => serde_json::json!({ "key": text }),
            Err(_) => serde_json::json!({ "key_base64": base64(k) }),
        })
        .collect();
    serde_json::json!({ "table": table, "keys": keys }).to_string()
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The access settings of a data command (one-sided for the others).
fn access_options(command: &Command) -> AccessOptions {
    let args = match command {
        Command::Get { access, .. }
        | Command::Put { access, .. }
        | Command::Insert { access, .. }
        | Command::Update { access, .. }
        | Command::Del { access, .. } => *access,
        _ => return AccessOptions::default(),
    };
    AccessOptions::default()
        .with_mode(match args.access {
            Access::OneSided => AccessMode::OneSided,
            Access::Rpc => AccessMode::Rpc,
            Access::Hybrid => AccessMode::Hybrid,
        })
        .with_hybrid_k(args.hybrid_k)
        .with_transport(match args.rpc_transport {
            RpcCarrier::Send => kvstore::RpcTransport::Send,
            RpcCarrier::Write => kvstore::RpcTransport::Write,
        })
}

fn run(cli: Cli) -> Result<(), KvError> {
    dmkv_api::tls::set_default_ca_file(cli.tls_ca_file.as_deref())
        .map_err(|e| KvError::InvalidArgument(format!("--tls-ca-file: {e}")))?;
    let secret = bearer::bearer(cli.credential_file.as_ref(), cli.token_file.as_ref())?;
    if let Command::Credentials { command } = cli.command {
        let meta = dmkv_api::MetadataClient::new(&cli.metadata)
            .map_err(|e| KvError::InvalidArgument(e.to_string()))?
            .with_token(secret);
        return credentials::run(&meta, command, cli.json);
    }
    let options = ClientOptions::with_transport(match cli.transport {
        Transport::Udp => TransportKind::Udp,
        Transport::Shm => TransportKind::Shm,
    })
    .with_token(secret)
    .with_name("dmkv-cli")
    .with_access(access_options(&cli.command))
    // One command writes a few objects: ask for small chunks. When the command
    // ends, its session hands them over to the table (trimmed to what it used);
    // if it is killed, its leases expire and the table adopts them.
    .with_memory(
        kvstore::MemoryOptions::default()
            .with_chunk_bytes(64 << 10)
            .with_lease_ttl(Duration::from_secs(60)),
    );
    let client = Client::connect(&cli.metadata, options)?;
    match cli.command {
        Command::Tables => {
            let mut out = std::io::stdout().lock();
            let tables = client.tables()?;
            if cli.json {
                let doc = serde_json::to_string(&tables).map_err(|e| {
                    KvError::InvalidArgument(format!("writing the tables as JSON: {e}"))
                })?;
                let _ = writeln!(out, "{doc}");
                return Ok(());
            }
            for t in tables {
                // A healthy table's line says nothing more; a table that lost data
                // says so, with one line per lost copy.
                let health = match t.health.state {
                    TableState::Healthy => String::new(),
                    TableState::Degraded => "\thealth=degraded".to_owned(),
                    TableState::Lost => "\thealth=LOST".to_owned(),
                };
                let _ = writeln!(
                    out,
                    "{}\tindex={}\tvalue_limit={}\tmemnodes={:?}{health}",
                    t.name,
                    t.index().as_str(),
                    t.value_limit,
                    t.memnodes
                );
                for l in &t.health.lost {
                    let _ = writeln!(
                        out,
                        "  lost on memnode {} ({}) at {} ms since the epoch: {}",
                        l.memnode_name, l.memnode_id, l.since_ms, l.reason
                    );
                }
            }
            Ok(())
        }
        Command::CreateTable {
            name,
            index,
            value_limit,
            scheme,
            capacity,
            unsafe_demo,
            replication,
        } => {
            let spec = match index {
                Index::Clover => TableSpec::clover(value_limit),
                Index::Race => TableSpec::race(value_limit),
                Index::Inplace => {
                    let (Some(scheme), Some(capacity)) = (scheme, capacity) else {
                        return Err(KvError::InvalidArgument(
                            "an inplace table needs --scheme and --capacity".into(),
                        ));
                    };
                    let spec: SchemeSpec = scheme.parse()?;
                    if spec.is_unsafe() && !unsafe_demo {
                        return Err(KvError::InvalidArgument(format!(
                            "{} returns torn values; pass --unsafe-demo to create it as a \
                             demonstration",
                            spec.name()
                        )));
                    }
                    TableSpec::in_place(spec, value_limit, capacity)
                }
            };
            let t = client.create_replicated_table(&name, &spec, replication)?;
            println!("created table {} (id {})", t.name, t.id);
            if !t.replica_sets.is_empty() {
                println!(
                    "replication {} replica sets {:?}",
                    t.replication, t.replica_sets
                );
            }
            if let Some(ip) = t.layout.in_place() {
                println!(
                    "scheme {} capacity {} tuple_bytes {} latches {:?}",
                    ip.scheme, ip.capacity, ip.tuple_bytes, ip.latch_placement
                );
            }
            Ok(())
        }
        Command::DropTable { name } => client.drop_table(&name),
        Command::MoveCopy {
            table,
            set,
            from,
            to,
        } => {
            let req = dmkv_api::rereplication::MoveCopyRequest { set, from, to };
            let t = client.move_copy(&table, &req)?;
            let mut out = std::io::stdout().lock();
            if cli.json {
                let doc = serde_json::to_string(&t).map_err(|e| {
                    KvError::InvalidArgument(format!("writing the table as JSON: {e}"))
                })?;
                let _ = writeln!(out, "{doc}");
            } else {
                let _ = writeln!(
                    out,
                    "moving memnode {from}'s copy of {table} (replica set {set}); progress: GET /v1/rereplication"
                );
            }
            Ok(())
        }
        Command::Get { table, key, .. } => {
            let s = client.session()?;
            let t = s.table(&table)?;
            // An absent key is the command's negative answer (exit status 1).
            let v = s
                .block_on(t.get(key.as_bytes()))?
                .ok_or(KvError::NotFound)?;
            let mut out = std::io::stdout().lock();
            if cli.json {
                let _ = writeln!(out, "{}", value_json(&table, &key, &v));
            } else {
                let _ = out.write_all(&v);
                let _ = out.write_all(b"\n");
            }
            Ok(())
        }
        Command::Put {
            table, key, value, ..
        } => {
            let s = client.session()?;
            let t = s.table(&table)?;
            let value = value.bytes()?;
            let r = s.block_on(async {
                let r = t.put(key.as_bytes(), &value).await;
                t.flush().await;
                r
            });
            r?;
            s.quiesce();
            Ok(())
        }
        Command::Insert {
            table, key, value, ..
        } => {
            let s = client.session()?;
            let t = s.table(&table)?;
            let value = value.bytes()?;
            let r = s.block_on(async {
                let r = t.insert(key.as_bytes(), &value).await;
                t.flush().await;
                r
            });
            r?;
            s.quiesce();
            Ok(())
        }
        Command::Update {
            table, key, value, ..
        } => {
            let s = client.session()?;
            let t = s.table(&table)?;
            let value = value.bytes()?;
            let r = s.block_on(async {
                let r = t.update(key.as_bytes(), &value).await;
                t.flush().await;
                r
            });
            r?;
            s.quiesce();
            Ok(())
        }
        Command::Keys {
            table,
            prefix,
            limit,
        } => {
            let s = client.session()?;
            let t = s.table(&table)?;
            let limit = limit.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
            let keys = s.block_on(t.keys(prefix.as_bytes(), limit))?;
            let mut out = std::io::stdout().lock();
            if cli.json {
                let _ = writeln!(out, "{}", keys_json(&table, &keys));
            } else {
                for k in &keys {
                    let _ = writeln!(out, "{}", key_text(k));
                }
            }
            Ok(())
        }
        Command::Credentials { .. } => Ok(()),
        Command::Feed { command } => feed::run(&client, command),
        Command::Del { table, key, .. } => {
            let s = client.session()?;
            let t = s.table(&table)?;
            let r = s.block_on(async {
                let r = t.delete(key.as_bytes()).await;
                t.flush().await;
                r
            });
            r?;
            s.quiesce();
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_standard() {
        for (raw, enc) in [
            (&b""[..], ""),
            (b"f", "Zg=="),
            (b"fo", "Zm8="),
            (b"foo", "Zm9v"),
            (b"foob", "Zm9vYg=="),
            (b"\xff\x00\xfe", "/wD+"),
        ] {
            assert_eq!(base64(raw), enc);
        }
    }

    #[test]
    fn values_print_as_text_or_base64() {
        assert_eq!(
            value_json("t", "k", b"hi"),
            r#"{"key":"k","table":"t","value":"hi"}"#
        );
        assert_eq!(
            value_json("t", "k", b"\xff"),
            r#"{"key":"k","table":"t","value_base64":"/w=="}"#
        );
    }

    #[test]
    fn keys_print_one_a_line_escaped_when_not_plain_text() {
        assert_eq!(key_text(b"alice"), "alice");
        assert_eq!(key_text("zoë".as_bytes()), "zoë");
        assert_eq!(key_text(b"a\nb"), "a\\nb");
        assert_eq!(key_text(b"a\\b"), "a\\\\b");
        assert_eq!(key_text(&[0xfb, b'x']), "\\xfbx");
        assert_eq!(
            keys_json("t", &[b"alice".to_vec(), vec![0xfb, 0xff]]),
            r#"{"keys":[{"key":"alice"},{"key_base64":"+/8="}],"table":"t"}"#
        );
    }

    #[test]
    fn a_refused_credential_names_the_fix() {
        let e = KvError::InvalidArgument(
            "the metadata service refused the credential: GET /v1/tables/b failed with HTTP \
             403 (forbidden): needs read"
                .into(),
        );
        assert!(hint(&e).is_some_and(|h| h.contains("dmkv credentials create")));
        let e = KvError::InvalidArgument(
            "the metadata service refused the credential: GET /v1/tables failed with HTTP 401 \
             (unauthorized): revoked"
                .into(),
        );
        assert!(hint(&e).is_some_and(|h| h.contains("--credential-file")));
    }

    #[test]
    fn a_401_names_the_credential_flags() {
        let e = KvError::unavailable_because(
            "creating a lease",
            dmkv_api::ClientError::Http {
                method: "POST",
                path: "/v1/leases".into(),
                status: 401,
                code: "unauthorized".into(),
                message: "needs a token".into(),
            },
        );
        assert!(hint(&e).is_some_and(|h| {
            h.contains("--credential-file")
                && h.contains("DMKV_CREDENTIAL")
                && h.contains("--token-file")
                && h.contains("DMKV_TOKEN")
        }));
        assert_eq!(hint(&KvError::NotFound), None);
    }

    #[test]
    fn an_unknown_outcome_says_to_read_the_key() {
        let e = KvError::OutcomeUnknown(kvstore::Cause::new(
            "the put of key \"k\" may or may not have taken effect",
        ));
        assert!(hint(&e).is_some_and(|h| h.contains("may or may not") && h.contains("dmkv get")));
    }
}
