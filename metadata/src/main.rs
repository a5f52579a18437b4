//! `metadata`: the dmkv metadata service binary.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use dmkv_api::grant::GrantKey;
use dmkv_api::secret_file::{read_secret_file, secret_from_env};
use dmkv_service::secrets::read_secret;
use dmkv_service::{Signals, TlsArgs};
use metadata::alloc::AllocatorKind;
use metadata::catalog::CatalogConfig;
use metadata::clock::SystemClock;
use metadata::grant_issuer::GrantIssuer;
use metadata::placement::PlacementKind;
use metadata::server::DEFAULT_LISTEN;
use metadata::{MetadataServer, ServerConfig, StoreConfig};

/// dmkv metadata service: registers memnodes, leases chunks of their memory to clients,
/// keeps the table catalog and serves the index slow paths, over a JSON HTTP API.
#[derive(Debug, Parser)]
#[command(name = "metadata", version, about, long_about = None)]
#[command(after_help = "\
API (JSON, versioned under /v1; OpenAPI document at GET /v1/openapi.json):
  GET /healthz, GET /metrics,
  POST|GET /v1/memnodes, GET|DELETE /v1/memnodes/{id}, POST /v1/memnodes/{id}/heartbeat,
  POST|GET /v1/leases, GET|DELETE /v1/leases/{id}, POST /v1/leases/{id}/renew,
  POST|GET /v1/tables, GET|DELETE /v1/tables/{name}, POST /v1/tables/{name}/chains,
  PUT|GET /v1/tables/{name}/chains/{chain_id}/tail, GET /v1/cluster/stats,
  GET /v1/cluster/history?range=5m, POST /v1/tables/{name}/grants,
  POST|GET /v1/credentials, DELETE /v1/credentials/{id} (scoped credentials).
Dashboard (HTML, refreshes every second): GET /dashboard (GET / redirects there).
With a root token (--token-file PATH, or the environment variable DMKV_METADATA_TOKEN),
every route but /healthz, /metrics, /v1/openapi.json, /v1/accelerator, /v1/cluster/stats,
/v1/cluster/history and the dashboard needs `Authorization: Bearer <root token or credential>`.
Logging: RUST_LOG (default info), --log-format human|json; spans are exported over
OTLP/gRPC when OTEL_EXPORTER_OTLP_ENDPOINT is set. Stops gracefully on SIGTERM or SIGINT.")]
struct Cli {
    /// HTTP listen address.
    #[arg(long, env = "DMKV_METADATA_LISTEN", default_value = DEFAULT_LISTEN, value_name = "ADDR")]
    listen: SocketAddr,

    /// Directory of the sled database holding the catalog (created if missing).
    #[arg(
        long,
        env = "DMKV_METADATA_DATA_DIR",
        default_value = "./dmkv-metadata",
        value_name = "DIR"
    )]
    data_dir: PathBuf,

    /// File holding the root token (the secret of the root credential: every route
    /// needs it or a credential issued with it). Without a token (here or in
    /// DMKV_METADATA_TOKEN), anybody who can reach the service can change it. There
    /// is no flag taking the token itself: the command line shows in `ps`.
    #[arg(long, env = "DMKV_METADATA_TOKEN_FILE", value_name = "PATH")]
    token_file: Option<PathBuf>,

    /// A memnode without a heartbeat for this long is unhealthy (gets no new leases).
    #[arg(
        long,
        env = "DMKV_METADATA_HEARTBEAT_TIMEOUT_MS",
        default_value_t = 3000,
        value_name = "N"
    )]
    heartbeat_timeout_ms: u64,

    /// After how many milliseconds without a heartbeat a memnode is taken out of the
    /// replica sets of replicated tables, so that their backups serve in its place
    /// (0: the heartbeat timeout). A set that lost a member gets a new one by
    /// re-replication (see --rereplication-rate-mb).
    #[arg(
        long,
        env = "DMKV_METADATA_FAILOVER_AFTER_MS",
        default_value_t = 0,
        value_name = "N"
    )]
    failover_after_ms: u64,

    /// Bandwidth of re-replication in MB/s (bytes read and written while copying a
    /// replica set's data to a new member); 0 turns it off, and replica sets that
    /// lost a member stay smaller.
    #[arg(
        long,
        env = "DMKV_METADATA_REREPLICATION_RATE_MB",
        default_value_t = metadata::rereplication::DEFAULT_RATE_MB,
        value_name = "N"
    )]
    rereplication_rate_mb: u64,

    /// Who copies a new member's bytes in re-replication, drain and rejoin: `cpu` (this
    /// service's copy passes move every byte) or `switch` (the accelerator given by
    /// --accelerator copies each extent memory node to memory node with no CPU at
    /// either end, then the passes write only what changed meanwhile; needs the
    /// switch started with the memory nodes' admin token). A failed switch copy
    /// falls back to the passes.
    #[arg(
        long,
        env = "DMKV_METADATA_COPY_ENGINE",
        default_value = "cpu",
        value_name = "cpu|switch"
    )]
    copy_engine: String,

    /// With `--copy-engine switch`: bytes per READ of the switch's copies (a power of
    /// two from 64 to 512, or a multiple of 1024; default the switch's, 16 KiB). With
    /// the window, what bounds a copy's rate.
    #[arg(long, env = "DMKV_METADATA_SWITCH_COPY_CHUNK", value_name = "BYTES")]
    switch_copy_chunk: Option<u32>,

    /// With `--copy-engine switch`: READs in flight per copy, 1–16 (default the
    /// switch's, 8).
    #[arg(long, env = "DMKV_METADATA_SWITCH_COPY_WINDOW", value_name = "N")]
    switch_copy_window: Option<u32>,

    /// Lease granularity: a power of two from 1MiB to 64MiB (regions smaller than 16
    /// chunks use a smaller granularity, at least 4KiB).
    #[arg(long, env = "DMKV_METADATA_CHUNK_SIZE", default_value = "4MiB", value_name = "SIZE",
          value_parser = parse_size)]
    chunk_size: u64,

    /// TTL of leases that ask for none.
    #[arg(
        long,
        env = "DMKV_METADATA_LEASE_TTL_MS",
        default_value_t = 30_000,
        value_name = "N"
    )]
    lease_ttl_ms: u64,

    /// Time between a lease's expiry and the reuse of its memory.
    #[arg(
        long,
        env = "DMKV_METADATA_GRACE_MS",
        default_value_t = 5000,
        value_name = "N"
    )]
    grace_ms: u64,

    /// Which memnode serves a lease: most_free or round_robin.
    #[arg(
        long,
        env = "DMKV_METADATA_PLACEMENT",
        default_value = "most_free",
        value_name = "POLICY"
    )]
    placement: PlacementKind,

    /// Where in a region a lease goes: first_fit or best_fit.
    #[arg(
        long,
        env = "DMKV_METADATA_ALLOCATOR",
        default_value = "first_fit",
        value_name = "STRATEGY"
    )]
    allocator: AllocatorKind,

    /// Admin URL of the accelerator (soft switch, http://host:port): the dashboard shows
    /// its counters and `GET /v1/accelerator` advertises it, so clients create their
    /// queue pairs through it.
    #[arg(long, env = "DMKV_METADATA_ACCELERATOR", value_name = "URL")]
    accelerator: Option<String>,

    /// The accelerator's client-side UDP address (ip:port), advertised to clients with
    /// its admin URL by `GET /v1/accelerator`.
    #[arg(long, env = "DMKV_METADATA_ACCELERATOR_DATA", value_name = "ADDR")]
    accelerator_data: Option<String>,

    /// The cluster stats kept for the dashboard's charts: SPAN/INTERVAL (a sample every
    /// INTERVAL, at least 1s, kept for SPAN; units ms, s, m, h, d), or off. In memory
    /// only: a restart starts empty.
    #[arg(
        long,
        env = "DMKV_METADATA_STATS_HISTORY",
        default_value = "1h/5s",
        value_name = "SPAN/INTERVAL"
    )]
    stats_history: metadata::history::HistoryConfig,

    /// Read the memory node admin token (presented when the service zeroes table
    /// memory on memory nodes) from PATH; without it, from $DMKV_MEMNODE_ADMIN_TOKEN.
    #[arg(long, env = "DMKV_METADATA_MEMNODE_TOKEN_FILE", value_name = "PATH")]
    memnode_token_file: Option<PathBuf>,

    /// Read the key grants are signed with (shared with the memory nodes) from PATH;
    /// without it, from $DMKV_GRANT_KEY; without either, it is derived from the memory
    /// node admin token. With neither a key nor a token, no grants are issued.
    #[arg(long, env = "DMKV_GRANT_KEY_FILE", value_name = "PATH")]
    grant_key_file: Option<PathBuf>,

    /// How long a grant is valid, in seconds: revoking a client's access to a table
    /// takes effect within this long.
    #[arg(long, env = "DMKV_METADATA_GRANT_TTL", default_value_t = 60, value_name = "SECS",
          value_parser = clap::value_parser!(u64).range(1..))]
    grant_ttl: u64,

    /// Log format on standard error: human or json (one object per line, with spans).
    #[arg(
        long,
        env = "DMKV_LOG_FORMAT",
        default_value = "human",
        value_name = "FORMAT"
    )]
    log_format: telemetry::LogFormat,

    #[command(flatten)]
    tls: TlsArgs,
}

/// The environment variable the root token may come from instead of a file.
const TOKEN_ENV: &str = "DMKV_METADATA_TOKEN";

/// Parses `4MiB`, `1m`, `65536`, ... (powers of 1024).
fn parse_size(input: &str) -> Result<u64, String> {
    let s = input.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("invalid size {input:?}: expected e.g. 4MiB, 1m or 65536"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        _ => return Err(format!("invalid size {input:?}: unknown unit {unit:?}")),
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("invalid size {input:?}: too large"))
}

/// The memory node admin token and the grant issuer, from files or the environment.
fn memnode_credentials(cli: &Cli) -> Result<(Option<String>, Option<GrantIssuer>), String> {
    let token = read_secret(
        "memnode admin token",
        cli.memnode_token_file.as_deref(),
        "DMKV_MEMNODE_ADMIN_TOKEN",
    )
    .map_err(|e| e.to_string())?;
    let key = match read_secret("grant key", cli.grant_key_file.as_deref(), "DMKV_GRANT_KEY")
        .map_err(|e| e.to_string())?
    {
        Some(k) => {
            Some(GrantKey::from_secret(k.as_bytes()).map_err(|e| format!("grant key: {e}"))?)
        }
        None => token
            .as_deref()
            .map(GrantKey::derive_from_admin_token)
            .transpose()
            .map_err(|e| format!("memnode admin token: {e}"))?,
    };
    if key.is_none() {
        tracing::info!(
            "no grant key and no memnode admin token: no grants are issued, so memory nodes must run with --insecure-no-auth"
        );
    }
    let ttl = Duration::from_secs(cli.grant_ttl);
    Ok((token, key.map(|k| GrantIssuer::new(k, ttl))))
}

fn run(cli: Cli) -> Result<(), String> {
    let (memnode_token, grants) = memnode_credentials(&cli)?;
    let catalog = CatalogConfig {
        chunk_size: cli.chunk_size,
        heartbeat_timeout_ms: cli.heartbeat_timeout_ms,
        heartbeat_interval_ms: (cli.heartbeat_timeout_ms / 3).clamp(1, 1000),
        failover_after_ms: cli.failover_after_ms,
        default_lease_ttl_ms: cli.lease_ttl_ms,
        grace_ms: cli.grace_ms,
        placement: cli.placement,
        allocator: cli.allocator,
        ..CatalogConfig::default()
    };
    catalog
        .validate()
        .map_err(|e| format!("invalid configuration: {e}"))?;
    let token = match &cli.token_file {
        Some(path) => Some(read_secret_file(path)?),
        None => secret_from_env(TOKEN_ENV),
    };
    if token.is_none() {
        tracing::warn!(
            "no root token (--token-file or {TOKEN_ENV}) set: anybody who can reach this service can register memnodes, lease memory, drop tables and issue credentials"
        );
    }
    let tls = cli.tls.server_tls().map_err(|e| format!("TLS: {e}"))?;
    dmkv_api::tls::set_default_ca_file(cli.tls.tls_ca_file.as_deref())
        .map_err(|e| format!("TLS: {e}"))?;
    let mut copy_engine =
        metadata::rereplication::CopyEngine::parse(&cli.copy_engine, cli.accelerator.as_deref())?;
    if let metadata::rereplication::CopyEngine::Switch { chunk, window, .. } = &mut copy_engine {
        *chunk = cli.switch_copy_chunk;
        *window = cli.switch_copy_window;
    }
    let config = ServerConfig {
        copy_engine,
        tls,
        listen: cli.listen,
        store: StoreConfig::Sled(cli.data_dir.clone()),
        token,
        catalog,
        sweep_interval: Duration::from_millis(250),
        clock: Arc::new(SystemClock),
        accelerator: cli.accelerator.clone(),
        accelerator_data: cli.accelerator_data.clone(),
        scrubber: Arc::new(metadata::scrub::MemnodeScrubber::with_token(
            memnode_token.clone(),
        )),
        memnode_token,
        stats_history: cli.stats_history,
        rereplication: metadata::rereplication::RereplicationConfig::with_rate_mb(
            cli.rereplication_rate_mb,
        ),
        grants,
    };
    let signals = Signals::install().map_err(|e| format!("cannot wait for signals: {e}"))?;
    let server = MetadataServer::start(config).map_err(|e| e.to_string())?;
    tracing::info!(
        url = %server.url(),
        data_dir = %cli.data_dir.display(),
        chunk_size = cli.chunk_size,
        "metadata service serving"
    );
    let signal = signals.wait();
    tracing::info!(signal, "shutting down");
    server.shutdown();
    tracing::info!("stopped; catalog flushed");
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let _telemetry = telemetry::init("metadata", cli.log_format);
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("metadata: error: {e}");
            ExitCode::FAILURE
        }
    }
}
