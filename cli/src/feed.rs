//! `dmkv feed create|status|read|put|del`: a Clover table's change feed (see
//! `docs/zero-sided.md`, "Change feed"). `create` records the feed in the table's
//! catalog entry (every write of the table is recorded from then on) and prints its
//! layout as JSON; the other commands find it by the table's name (`--table`) or take
//! that file (`--layout`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Subcommand;
use kvstore::feed::{FeedConsumer, FeedLayout, FeedOp, FeedSpec, FeedWriter};
use kvstore::{Client, KvError};

/// What to do with a feed.
#[derive(Subcommand, Debug)]
pub enum FeedCommand {
    /// Create a feed of a Clover table and print its layout (JSON) on standard output.
    Create {
        /// Table name.
        table: String,
        /// Producer lanes (writers at once), 1 to 8.
        #[arg(long, default_value_t = 2)]
        lanes: usize,
        /// Consumer rings, 1 to 8.
        #[arg(long, default_value_t = 2)]
        consumers: usize,
        /// Bytes per slot (a record takes 40 bytes plus key and value).
        #[arg(long, default_value_t = 512)]
        slot_size: u32,
        /// Slots per ring.
        #[arg(long, default_value_t = 256)]
        slots: u32,
        /// Put the rings on this memnode id.
        #[arg(long)]
        memnode: Option<u64>,
    },
    /// Where the feed's rings stand: per lane and consumer ring its head, tail and
    /// the records waiting, as JSON.
    Status {
        #[command(flatten)]
        feed: Which,
    },
    /// Set a key through a lane the command holds (the write and its record; plain
    /// `dmkv put` records it too once the table has a feed).
    Put {
        /// The layout file `dmkv feed create` printed.
        #[arg(long, value_name = "PATH")]
        layout: PathBuf,
        /// Key.
        key: String,
        /// Value (UTF-8 text).
        value: String,
    },
    /// Delete a key through a lane of the feed (the delete and its record).
    Del {
        /// The layout file.
        #[arg(long, value_name = "PATH")]
        layout: PathBuf,
        /// Key.
        key: String,
    },
    /// Take the records waiting in a consumer ring and print them, one JSON object a
    /// line, in the feed's order (they are gone from the ring afterwards).
    Read {
        #[command(flatten)]
        feed: Which,
        /// The consumer ring, from 0.
        #[arg(long, default_value_t = 0)]
        consumer: usize,
        /// Wait this long for a first record when none is there.
        #[arg(long, default_value_t = 0)]
        wait_ms: u64,
    },
}

/// Which feed: the table's (from the catalog) or a layout file.
#[derive(clap::Args, Debug)]
#[group(required = true, multiple = false)]
pub struct Which {
    /// The table whose feed it is (as the catalog keeps it).
    #[arg(long)]
    table: Option<String>,
    /// A layout file `dmkv feed create` printed.
    #[arg(long, value_name = "PATH")]
    layout: Option<PathBuf>,
}

impl Which {
    fn layout(&self, session: &kvstore::Session) -> Result<FeedLayout, KvError> {
        match (&self.table, &self.layout) {
            (_, Some(path)) => load(path),
            (Some(table), None) => session.feed(table)?.ok_or_else(|| {
                KvError::InvalidArgument(format!(
                    "table {table} has no change feed (create one with dmkv feed create {table})"
                ))
            }),
            (None, None) => Err(KvError::InvalidArgument("name --table or --layout".into())),
        }
    }
}

fn load(path: &Path) -> Result<FeedLayout, KvError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| KvError::InvalidArgument(format!("reading {}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| {
        KvError::InvalidArgument(format!("{} is not a feed layout: {e}", path.display()))
    })
}

/// `name`: the bytes as text when they are UTF-8, else `name_base64`.
fn bytes_field(doc: &mut serde_json::Value, name: &str, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(text) => doc[name] = text.into(),
        Err(_) => doc[format!("{name}_base64")] = crate::base64(bytes).into(),
    }
}

/// Run one feed command.
pub fn run(client: &Client, command: FeedCommand) -> Result<(), KvError> {
    let session = client.session()?;
    let mut out = std::io::stdout().lock();
    match command {
        FeedCommand::Create {
            table,
            lanes,
            consumers,
            slot_size,
            slots,
            memnode,
        } => {
            let layout = session.create_feed(
                &table,
                &FeedSpec {
                    lanes,
                    consumers,
                    slot_size,
                    slots,
                    memnode,
                },
            )?;
            let doc = serde_json::to_string_pretty(&layout).map_err(|e| {
                KvError::InvalidArgument(format!("writing the layout as JSON: {e}"))
            })?;
            let _ = writeln!(out, "{doc}");
        }
        FeedCommand::Put { layout, key, value } => {
            let layout = load(&layout)?;
            session.block_on(async {
                let mut w = FeedWriter::open(&session, &layout).await?;
                let r = w.put(key.as_bytes(), value.as_bytes()).await;
                w.close().await?;
                r
            })?;
        }
        FeedCommand::Del { layout, key } => {
            let layout = load(&layout)?;
            session.block_on(async {
                let mut w = FeedWriter::open(&session, &layout).await?;
                let r = w.delete(key.as_bytes()).await;
                w.close().await?;
                r
            })?;
        }
        FeedCommand::Status { feed } => {
            let layout = feed.layout(&session)?;
            let status = session.block_on(kvstore::feed::status(&session, &layout))?;
            let ring = |s: &kvstore::feed::RingStatus| {
                serde_json::json!({
                    "head": s.head, "tail": s.tail, "waiting": s.waiting(),
                    "owner": format!("{:#x}", s.owner),
                })
            };
            let doc = serde_json::json!({
                "table": layout.table,
                "lanes": status.lanes.iter().map(ring).collect::<Vec<_>>(),
                "consumers": status.consumers.iter().map(ring).collect::<Vec<_>>(),
            });
            let _ = writeln!(out, "{doc}");
        }
        FeedCommand::Read {
            feed,
            consumer,
            wait_ms,
        } => {
            let layout = feed.layout(&session)?;
            let records = session.block_on(async {
                let mut c = FeedConsumer::open(&session, &layout, consumer).await?;
                let mut records = Vec::new();
                if let Some(first) = c.next(Duration::from_millis(wait_ms)).await? {
                    records.push(first);
                    records.extend(c.poll().await?);
                }
                Ok::<_, KvError>(records)
            })?;
            for r in records {
                let mut doc = serde_json::json!({
                    "lane": r.lane,
                    "lane_seq": r.lane_seq,
                    "op": match r.op { FeedOp::Put => "put", FeedOp::Delete => "delete" },
                    "chain_id": r.chain_id,
                    "version": r.version,
                });
                bytes_field(&mut doc, "key", &r.key);
                if r.op == FeedOp::Put {
                    bytes_field(&mut doc, "value", &r.value);
                }
                let _ = writeln!(out, "{doc}");
            }
        }
    }
    Ok(())
}
