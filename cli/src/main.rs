//! `dmkv`: talk to a running dmkv cluster from the command line.
//!
//! ```text
//! dmkv --metadata http://127.0.0.1:9700 tables
//! dmkv --metadata http://127.0.0.1:9700 create-table users --index clover --value-limit 4096
//! dmkv --metadata http://127.0.0.1:9700 create-table hot --index inplace --scheme pessimistic-x-wc-wu --capacity 10000 --value-limit 256
//! dmkv --metadata http://127.0.0.1:9700 put users alice '{"age": 30}'
//! dmkv --metadata http://127.0.0.1:9700 get users alice
//! dmkv --metadata http://127.0.0.1:9700 del users alice
//! ```

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use kvstore::{Client, ClientOptions, KvError, SchemeSpec, TableSpec, TransportKind};

/// Exit status of a successful command.
const EXIT_OK: u8 = 0;
/// Exit status when the key is absent (get, del, update) or present (insert).
const EXIT_NEGATIVE: u8 = 1;
/// Exit status of every other failure (clap uses 2 for usage errors).
const EXIT_ERROR: u8 = 3;

#[derive(Parser, Debug)]
#[command(
    name = "dmkv",
    version,
    about = "Command-line client of a dmkv cluster",
    after_help = "Exit status: 0 success; 1 the key is absent (get, del, update) or already \
                  present (insert); 2 usage error; 3 any other error (unreachable cluster, \
                  no such table, value too large, ...).\n\
                  Keys and values are taken as UTF-8 text from the command line; keys are 1 to \
                  256 bytes (64 for inplace tables)."
)]
struct Cli {
    /// Metadata service URL.
    #[arg(
        long,
        env = "DMKV_METADATA",
        default_value = "http://127.0.0.1:9700",
        global = true
    )]
    metadata: String,
    /// Bearer token for mutating metadata requests.
    #[arg(long, env = "DMKV_TOKEN", global = true)]
    token: Option<String>,
    /// How to reach the memory nodes.
    #[arg(long, value_enum, default_value_t = Transport::Udp, global = true)]
    transport: Transport,
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
    },
    /// Drop a table.
    DropTable {
        /// Table name.
        name: String,
    },
    /// Print the value of a key.
    Get {
        /// Table name.
        table: String,
        /// Key.
        key: String,
    },
    /// Set a key (insert or overwrite).
    Put {
        /// Table name.
        table: String,
        /// Key.
        key: String,
        /// Value.
        value: String,
    },
    /// Create a key; fails if it exists.
    Insert {
        /// Table name.
        table: String,
        /// Key.
        key: String,
        /// Value.
        value: String,
    },
    /// Overwrite a key; fails if it does not exist.
    Update {
        /// Table name.
        table: String,
        /// Key.
        key: String,
        /// Value.
        value: String,
    },
    /// Delete a key.
    Del {
        /// Table name.
        table: String,
        /// Key.
        key: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::from(EXIT_OK),
        Err(e) => {
            let code = match e {
                KvError::NotFound | KvError::AlreadyExists => EXIT_NEGATIVE,
                _ => EXIT_ERROR,
            };
            eprintln!("dmkv: {e}");
            ExitCode::from(code)
        }
    }
}

fn run(cli: Cli) -> Result<(), KvError> {
    let options = ClientOptions::with_transport(match cli.transport {
        Transport::Udp => TransportKind::Udp,
        Transport::Shm => TransportKind::Shm,
    })
    .with_token(cli.token.clone())
    .with_name("dmkv-cli")
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
            for t in client.tables()? {
                let _ = writeln!(
                    out,
                    "{}\tindex={}\tvalue_limit={}\tmemnodes={:?}",
                    t.name,
                    t.index().as_str(),
                    t.value_limit,
                    t.memnodes
                );
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
        } => {
            let t = match index {
                Index::Clover => client.create_table(&name, &TableSpec::clover(value_limit))?,
                Index::Race => client.create_table(&name, &TableSpec::race(value_limit))?,
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
                    client.create_table(&name, &TableSpec::in_place(spec, value_limit, capacity))?
                }
            };
            println!("created table {} (id {})", t.name, t.id);
            if let Some(ip) = t.layout.in_place() {
                println!(
                    "scheme {} capacity {} tuple_bytes {} latches {:?}",
                    ip.scheme, ip.capacity, ip.tuple_bytes, ip.latch_placement
                );
            }
            Ok(())
        }
        Command::DropTable { name } => client.drop_table(&name),
        Command::Get { table, key } => {
            let s = client.session()?;
            let t = s.table(&table)?;
            // An absent key is the command's negative answer (exit status 1).
            let v = s
                .block_on(t.get(key.as_bytes()))?
                .ok_or(KvError::NotFound)?;
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(&v);
            let _ = out.write_all(b"\n");
            Ok(())
        }
        Command::Put { table, key, value } => {
            let s = client.session()?;
            let t = s.table(&table)?;
            let r = s.block_on(async {
                let r = t.put(key.as_bytes(), value.as_bytes()).await;
                t.flush().await;
                r
            });
            r?;
            s.quiesce();
            Ok(())
        }
        Command::Insert { table, key, value } => {
            let s = client.session()?;
            let t = s.table(&table)?;
            let r = s.block_on(async {
                let r = t.insert(key.as_bytes(), value.as_bytes()).await;
                t.flush().await;
                r
            });
            r?;
            s.quiesce();
            Ok(())
        }
        Command::Update { table, key, value } => {
            let s = client.session()?;
            let t = s.table(&table)?;
            let r = s.block_on(async {
                let r = t.update(key.as_bytes(), value.as_bytes()).await;
                t.flush().await;
                r
            });
            r?;
            s.quiesce();
            Ok(())
        }
        Command::Del { table, key } => {
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
