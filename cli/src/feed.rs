//! `dmkv feed create|put|del|read`: a Clover table's change feed (see
//! `docs/zero-sided.md`, "Change feed"). `create` prints the feed's layout as JSON;
//! the other commands take that file.

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
    /// Set a key through a lane of the feed (the write and its record).
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
        /// The layout file.
        #[arg(long, value_name = "PATH")]
        layout: PathBuf,
        /// The consumer ring, from 0.
        #[arg(long, default_value_t = 0)]
        consumer: usize,
        /// Wait this long for a first record when none is there.
        #[arg(long, default_value_t = 0)]
        wait_ms: u64,
    },
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
        FeedCommand::Read {
            layout,
            consumer,
            wait_ms,
        } => {
            let layout = load(&layout)?;
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
