//! `accel-p4`: the dmkv soft switch and its tools.

use std::process::ExitCode;

use std::net::{SocketAddr, SocketAddrV4};

use accel_p4::control::ControlState;
use accel_p4::switch::{SoftSwitch, SwitchConfig};
use clap::{Parser, Subcommand};
use dmkv_service::{Signals, TlsArgs};

/// dmkv switch acceleration: the P4 pipeline model run as a soft switch, and its tools.
#[derive(Debug, Parser)]
#[command(name = "accel-p4", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the soft switch: a UDP middlebox between clients and memnodes.
    #[command(after_help = "\
Clients create queue pairs through the switch (POST /v1/qps on its admin API, with the
memnode's admin URL) and send to --client-side; the switch forwards from --memnode-side.
Admin API: GET /healthz, GET /metrics, GET /v1/switch, GET|PUT /v1/mode, GET /v1/counters,
GET /v1/registers[/{name}], PUT /v1/registers/{name}/{index}, GET /v1/tables,
GET|POST /v1/routes, DELETE /v1/routes/{conn}, POST /v1/qps, PUT /v1/atomics/range,
GET|PUT /v1/faults, GET|PUT /v1/steer (Clover steering), GET /v1/openapi.json (the
OpenAPI document of every route). Every route but /healthz, /metrics and /v1/openapi.json
needs `Authorization: Bearer` with the memory node admin token, or a grant for the client
routes (POST /v1/qps, POST /v1/routes/{conn}/grant, DELETE /v1/routes/{conn},
PUT /v1/latch/regions); a queue pair made with a grant is confined to its windows.
Logging: RUST_LOG (default info), --log-format human|json; spans
are exported over OTLP/gRPC when OTEL_EXPORTER_OTLP_ENDPOINT is set. Stops on SIGTERM or
SIGINT.")]
    Serve(Box<ServeArgs>),
    /// Print `p4/include/spec.p4` as generated from the spec module.
    GenSpec,
    /// Run an STF test vector file against the model.
    Stf {
        /// The `.stf` file.
        file: std::path::PathBuf,
    },
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// UDP address clients send to (a specific IPv4 address: the ICRC covers it).
    #[arg(
        long,
        env = "DMKV_SWITCH_CLIENT_SIDE",
        default_value = "127.0.0.1:4791"
    )]
    client_side: SocketAddrV4,
    /// UDP address requests are forwarded from (memnode QPs are created with it).
    #[arg(
        long,
        env = "DMKV_SWITCH_MEMNODE_SIDE",
        default_value = "127.0.0.1:4792"
    )]
    memnode_side: SocketAddrV4,
    /// Admin HTTP address.
    #[arg(long, env = "DMKV_SWITCH_ADMIN", default_value = "127.0.0.1:9400")]
    admin: SocketAddr,
    /// Functions to enable, comma-separated: write_steer, read_steer, atomic_replace,
    /// switch_atomics, opt_latch, faults.
    #[arg(long, env = "DMKV_SWITCH_MODE", value_delimiter = ',')]
    mode: Vec<String>,
    /// JSON file where routes and settings persist across restarts.
    #[arg(long, env = "DMKV_SWITCH_STATE")]
    state_file: Option<std::path::PathBuf>,
    /// Milliseconds a tuple may stay latched by one holder (optimistic latching) before
    /// the switch releases it as held by a dead client; 0 never releases. Must exceed
    /// the longest WRITE a live client retransmits.
    #[arg(long, env = "DMKV_SWITCH_LATCH_LEASE_MS", default_value_t = 2000)]
    latch_lease_ms: u64,
    /// Microseconds the data plane busy-polls its sockets for the next datagram
    /// (yielding the processor between looks) before sleeping in the kernel; 0 sleeps
    /// at once (spends no processor time waiting, answers later).
    #[arg(long, env = "DMKV_SWITCH_BUSY_POLL_US", default_value_t = 50)]
    busy_poll_us: u64,
    /// Read the memory node admin token from PATH; without it, from
    /// $DMKV_MEMNODE_ADMIN_TOKEN. The switch presents it when it creates queue pairs on
    /// memory nodes for its clients, requires it on its own admin API (clients present
    /// grants instead, and their connections are confined to the grants' windows), and
    /// verifies grants with the key derived from it. Without it the switch refuses to
    /// start unless --insecure-no-auth.
    #[arg(long, env = "DMKV_SWITCH_MEMNODE_TOKEN_FILE", value_name = "PATH")]
    memnode_token_file: Option<std::path::PathBuf>,

    /// Read the key grants are verified with from PATH (the memory nodes' and the
    /// metadata service's --grant-key-file); without it, from $DMKV_GRANT_KEY; without
    /// either, it is derived from the memory node admin token.
    #[arg(long, env = "DMKV_GRANT_KEY_FILE", value_name = "PATH")]
    grant_key_file: Option<std::path::PathBuf>,

    /// Serve the admin API without authentication: anyone who reaches it can change
    /// the switch's mode, inject faults, and (with a memory node admin token) get
    /// whole-region queue pairs. Only for isolated test setups; connections made with a
    /// grant are still confined to its windows.
    #[arg(long, env = "DMKV_SWITCH_INSECURE_NO_AUTH")]
    insecure_no_auth: bool,

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

fn serve(args: ServeArgs) -> ExitCode {
    let _telemetry = telemetry::init("accel-p4", args.log_format);
    let mode = match accel_p4::admin::parse_functions(&args.mode) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("accel-p4: --mode: {e}");
            return ExitCode::from(2);
        }
    };
    let tls = match args.tls.server_tls() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("accel-p4: TLS: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = dmkv_api::tls::set_default_ca_file(args.tls.tls_ca_file.as_deref()) {
        eprintln!("accel-p4: TLS: {e}");
        return ExitCode::FAILURE;
    }
    let memnode_token = match dmkv_service::secrets::read_secret(
        "memnode admin token",
        args.memnode_token_file.as_deref(),
        "DMKV_MEMNODE_ADMIN_TOKEN",
    ) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("accel-p4: {e}");
            return ExitCode::FAILURE;
        }
    };
    let grant_key = match dmkv_service::secrets::read_secret(
        "grant key",
        args.grant_key_file.as_deref(),
        "DMKV_GRANT_KEY",
    ) {
        Ok(k) => match k
            .map(|k| dmkv_api::grant::GrantKey::from_secret(k.as_bytes()))
            .transpose()
        {
            Ok(k) => k,
            Err(e) => {
                eprintln!("accel-p4: grant key: {e}");
                return ExitCode::FAILURE;
            }
        },
        Err(e) => {
            eprintln!("accel-p4: {e}");
            return ExitCode::FAILURE;
        }
    };
    if memnode_token.is_none() && !args.insecure_no_auth {
        eprintln!(
            "accel-p4: no memory node admin token: give --memnode-token-file PATH or set \
             DMKV_MEMNODE_ADMIN_TOKEN (it also guards the switch's admin API), or \
             --insecure-no-auth for an isolated test setup"
        );
        return ExitCode::from(2);
    }
    if args.insecure_no_auth {
        tracing::warn!(
            "the switch's admin API is open (--insecure-no-auth): anyone who reaches it can change its mode, inject faults and take queue pairs"
        );
    }
    let config = SwitchConfig {
        tls,
        memnode_token,
        grant_key,
        open_admin: args.insecure_no_auth,
        client_side: args.client_side,
        memnode_side: args.memnode_side,
        admin: args.admin,
        state_file: args.state_file,
        initial: ControlState {
            mode,
            ..ControlState::default()
        },
        latch_lease: std::time::Duration::from_millis(args.latch_lease_ms),
        busy_poll: std::time::Duration::from_micros(args.busy_poll_us),
    };
    let handle = match SoftSwitch::start(config) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("accel-p4: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Handlers first, banner second: whoever waits for the banner may signal at once.
    let signals = match Signals::install() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("accel-p4: cannot wait for signals: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "accel-p4 soft switch: clients send to {}, forwarding from {}, admin {}",
        handle.client_side(),
        handle.memnode_side(),
        handle.admin_url()
    );
    let signal = signals.wait();
    tracing::info!(signal, "shutting down");
    handle.shutdown();
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve(*args),
        Command::GenSpec => {
            print!("{}", accel_p4::spec::p4_include());
            ExitCode::SUCCESS
        }
        Command::Stf { file } => {
            let text = match std::fs::read_to_string(&file) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("accel-p4: cannot read {}: {e}", file.display());
                    return ExitCode::FAILURE;
                }
            };
            match accel_p4::stf::run(&text) {
                Ok(_) => {
                    println!("{}: ok", file.display());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("{}: {e}", file.display());
                    ExitCode::FAILURE
                }
            }
        }
    }
}
