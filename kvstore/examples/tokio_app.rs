//! Using dmkv from a tokio application.
//!
//! A dmkv [`Session`](kvstore::Session) is `!Send`: its queue pairs, completion polling
//! and caches belong to one thread, and its futures only make progress inside
//! `Session::block_on` on that thread. So an async application does not await table
//! futures on its own runtime; it gives each session a dedicated thread and talks to
//! it over channels:
//!
//! - `Store` is the application's handle: `Clone + Send`, with `async` methods;
//! - each request goes to the session thread that owns its key (by hash, so the
//!   operations of one key stay in order), which runs it with `block_on` and answers
//!   on a oneshot channel;
//! - blocking control-plane calls (starting the cluster, creating the table, dropping
//!   the client) run under `spawn_blocking`.
//!
//! Run it with `cargo run -p kvstore --example tokio_app`: it starts an in-process
//! cluster (a metadata service and one memory node, reached with the `local`
//! transport), so it needs nothing else. Against a running cluster, make the client
//! with `Client::connect(metadata_url, ClientOptions::default())` instead.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kvstore::{Client, ClientOptions, KvError, TableSpec, TransportKind};
use memnode::registrar::{HttpRegistrar, Registrar};
use memnode::server::{Memnode, MemnodeHandle};
use metadata::server::{MetadataServer, ServerConfig, ServerHandle, StoreConfig};
use metadata::store::MemStore;
use tokio::sync::{mpsc, oneshot};

/// One operation for a session thread, with where to send its answer.
enum Request {
    Get {
        key: Vec<u8>,
        reply: oneshot::Sender<Result<Option<Vec<u8>>, KvError>>,
    },
    Put {
        key: Vec<u8>,
        value: Vec<u8>,
        reply: oneshot::Sender<Result<(), KvError>>,
    },
    Delete {
        key: Vec<u8>,
        reply: oneshot::Sender<Result<(), KvError>>,
    },
}

/// The application's handle on one dmkv table: cheap to clone, `Send`, async.
#[derive(Clone)]
struct Store {
    threads: Vec<mpsc::Sender<Request>>,
}

/// Requests a session thread may have queued before senders wait.
const QUEUE: usize = 1024;

impl Store {
    /// Start `threads` session threads on table `table` of `client`.
    fn start(
        client: &Client,
        table: &str,
        threads: usize,
    ) -> Result<(Store, Vec<JoinHandle<()>>), KvError> {
        let mut senders = Vec::new();
        let mut handles = Vec::new();
        for i in 0..threads.max(1) {
            let (tx, rx) = mpsc::channel(QUEUE);
            let (ready_tx, ready_rx) = std::sync::mpsc::channel();
            let (client, table) = (client.clone(), table.to_owned());
            let handle = std::thread::Builder::new()
                .name(format!("dmkv-session-{i}"))
                .spawn(move || serve(client, table, rx, ready_tx))
                .map_err(|e| KvError::unavailable(format!("session thread: {e}")))?;
            // The session (its queue pairs) is opened on its own thread; wait for it.
            ready_rx
                .recv()
                .map_err(|_| KvError::unavailable("session thread stopped"))??;
            senders.push(tx);
            handles.push(handle);
        }
        Ok((Store { threads: senders }, handles))
    }

    /// The session thread that owns `key`.
    fn owner(&self, key: &[u8]) -> &mpsc::Sender<Request> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        key.hash(&mut h);
        &self.threads[(h.finish() % self.threads.len() as u64) as usize]
    }

    async fn call<T>(
        &self,
        key: &[u8],
        request: impl FnOnce(oneshot::Sender<Result<T, KvError>>) -> Request,
    ) -> Result<T, KvError> {
        let (reply, answer) = oneshot::channel();
        let gone = || KvError::unavailable("session thread stopped");
        self.owner(key)
            .send(request(reply))
            .await
            .map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }

    async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        let key_owned = key.to_vec();
        self.call(key, |reply| Request::Get {
            key: key_owned,
            reply,
        })
        .await
    }

    async fn put(&self, key: &[u8], value: &[u8]) -> Result<(), KvError> {
        let (key_owned, value) = (key.to_vec(), value.to_vec());
        self.call(key, |reply| Request::Put {
            key: key_owned,
            value,
            reply,
        })
        .await
    }

    async fn delete(&self, key: &[u8]) -> Result<(), KvError> {
        let key_owned = key.to_vec();
        self.call(key, |reply| Request::Delete {
            key: key_owned,
            reply,
        })
        .await
    }
}

/// A session thread: open the session and the table handle here (they stay on this
/// thread), then run requests until every `Store` clone is gone.
fn serve(
    client: Client,
    table: String,
    mut requests: mpsc::Receiver<Request>,
    ready: std::sync::mpsc::Sender<Result<(), KvError>>,
) {
    let opened = client
        .session()
        .and_then(|s| s.table(&table).map(|t| (s, t)));
    let (session, table) = match opened {
        Ok(st) => {
            let _ = ready.send(Ok(()));
            st
        }
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    // `blocking_recv` parks this thread (not a tokio worker) until a request comes.
    while let Some(request) = requests.blocking_recv() {
        match request {
            Request::Get { key, reply } => {
                let _ = reply.send(session.block_on(table.get(&key)));
            }
            Request::Put { key, value, reply } => {
                let _ = reply.send(session.block_on(table.put(&key, &value)));
            }
            Request::Delete { key, reply } => {
                let _ = reply.send(session.block_on(table.delete(&key)));
            }
        }
    }
    // Finish background work before the session closes its queue pairs.
    session.quiesce();
}

/// A metadata service and one memory node running in this process; stops when dropped.
struct InProcessCluster {
    registrar: Option<HttpRegistrar>,
    memnode: Option<MemnodeHandle>,
    _metadata: ServerHandle,
}

impl Drop for InProcessCluster {
    /// Stops heartbeating before the memory node stops.
    fn drop(&mut self) {
        if let Some(r) = self.registrar.take() {
            r.stop();
        }
        if let Some(m) = self.memnode.take() {
            m.shutdown();
        }
    }
}

/// A client of a new in-process cluster (blocking: call it off the async runtime).
fn in_process_client() -> Result<Client, Box<dyn std::error::Error + Send + Sync>> {
    let metadata =
        MetadataServer::start(ServerConfig::local(StoreConfig::Memory(MemStore::new())))?;
    let url = metadata.url();
    let memnode = Memnode::start(memnode::config::MemnodeConfig::local(64 << 20))?;
    let registrar = HttpRegistrar::new(&url, None, Some("example-0".into()))?
        .with_interval(Duration::from_millis(500));
    registrar.register(&memnode.node_info(), &memnode.admin_url())?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let id = loop {
        if let Some(id) = registrar.memnode_id() {
            break id;
        }
        if Instant::now() > deadline {
            return Err("the memory node did not register".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let memory = HashMap::from([(id, memnode.memory().table.clone())]);
    let cluster = InProcessCluster {
        registrar: Some(registrar),
        memnode: Some(memnode),
        _metadata: metadata,
    };
    let options = ClientOptions::with_transport(TransportKind::Local);
    Ok(Client::in_process(
        &url,
        options,
        memory,
        Box::new(cluster),
    )?)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    // Starting a cluster and creating a table are blocking calls: not on a tokio worker.
    let client = tokio::task::spawn_blocking(
        || -> Result<Client, Box<dyn std::error::Error + Send + Sync>> {
            let client = in_process_client()?;
            client.create_table("sessions", &TableSpec::clover(1024))?;
            Ok(client)
        },
    )
    .await??;
    let (store, threads) = Store::start(&client, "sessions", 2)?;

    // Many concurrent tokio tasks share the store.
    let mut tasks = Vec::new();
    for i in 0..32u32 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let key = format!("user-{i}");
            store
                .put(key.as_bytes(), format!("token-{i}").as_bytes())
                .await?;
            let got = store.get(key.as_bytes()).await?;
            assert_eq!(got, Some(format!("token-{i}").into_bytes()));
            if i % 2 == 0 {
                store.delete(key.as_bytes()).await?;
            }
            Ok::<_, KvError>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let kept = store.get(b"user-1").await?;
    let gone = store.get(b"user-2").await?;
    println!(
        "user-1: {:?}, user-2: {:?}",
        kept.as_deref().map(String::from_utf8_lossy),
        gone
    );

    // Dropping the last handle ends the session threads; then stop the cluster.
    drop(store);
    tokio::task::spawn_blocking(move || {
        for t in threads {
            let _ = t.join();
        }
        drop(client);
    })
    .await?;
    Ok(())
}
