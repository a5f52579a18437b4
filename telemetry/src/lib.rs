//! Logging and tracing for the dmkv services.
//!
//! [`init`] installs the process-wide `tracing` subscriber:
//!
//! - a `tracing-subscriber` formatter on standard error, human-readable or one JSON
//!   object per line ([`LogFormat`], from `--log-format` or `DMKV_LOG_FORMAT`), filtered by
//!   `RUST_LOG` (default `info`);
//! - when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set
//!   and not empty, an OpenTelemetry layer exporting the same spans over OTLP/gRPC with a
//!   batch exporter. The exporter's gRPC channel lives on a one-thread tokio runtime owned
//!   by the returned [`Guard`]; dropping the guard flushes what is queued and shuts the
//!   exporter down. Export failures are logged once, then at most once a minute with
//!   the number of failures since (never once per batch). Without the variable no
//!   exporter, runtime or thread is created.
//!
//! An `https://` endpoint is reached over TLS ([`otlp_tls`]): the collector's certificate
//! is checked against the CA file in `OTEL_EXPORTER_OTLP_CERTIFICATE`, else
//! `DMKV_TLS_CA_FILE`, else the public web roots; `http://` stays plaintext.
//!
//! The usual OTLP variables apply to the exporter (`OTEL_EXPORTER_OTLP_TIMEOUT`,
//! `OTEL_EXPORTER_OTLP_HEADERS`, ...). Spans carry the resource of
//! [`resource::ServiceIdentity`]: `service.name` (the one given to [`init`] unless
//! `OTEL_SERVICE_NAME` overrides it), `service.version` and `service.instance.id`.
//!
//! [`init_client`] is the same for command-line programs (the `dmkv` CLI, `ycsb`): log
//! lines at `warn` unless `RUST_LOG` says otherwise, while the exporter still receives
//! the info-level spans (`kv.op` and the HTTP calls made inside it).
//!
//! Metrics: a service turns its counters into [`family::Family`] values when a scrape
//! arrives and [`exposition::render`] encodes them with `prometheus-client`, adding
//! [`build_info`] and the [`process`] metrics (Prometheus text, or OpenMetrics when the
//! scraper asks). [`prom`] reads such text back strictly (the metadata service's cluster
//! view, tests), and [`promtool`] runs `promtool check metrics` on it.

pub mod build_info;
pub mod exposition;
pub mod family;
pub mod histogram;
pub mod otlp_tls;
pub mod process;
pub mod prom;
pub mod promtool;
pub mod resource;
pub mod trace_context;

use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_otlp::WithTonicConfig as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// The variable naming the OTLP collector (`http://host:4317`).
pub const OTLP_ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The trace-specific variant, which wins when both are set.
pub const OTLP_TRACES_ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// The variable choosing the log format when `--log-format` is not given.
pub const LOG_FORMAT_VAR: &str = "DMKV_LOG_FORMAT";
/// How often repeated export failures are reported.
pub const EXPORT_ERROR_INTERVAL: Duration = Duration::from_secs(60);
/// How long dropping the [`Guard`] waits for queued spans to be exported.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// How log lines look.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// One line per event for people (`2026-01-01T00:00:00Z  INFO span{..}: message k=v`).
    #[default]
    Human,
    /// One JSON object per event, with the current span and its parents.
    Json,
}

impl LogFormat {
    /// The format's name as accepted by [`FromStr`].
    pub fn as_str(self) -> &'static str {
        match self {
            LogFormat::Human => "human",
            LogFormat::Json => "json",
        }
    }

    /// The format named by `DMKV_LOG_FORMAT`, human if unset or unknown.
    pub fn from_env() -> LogFormat {
        std::env::var(LOG_FORMAT_VAR)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_default()
    }
}

impl fmt::Display for LogFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for LogFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<LogFormat, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "human" | "text" | "pretty" => Ok(LogFormat::Human),
            "json" => Ok(LogFormat::Json),
            other => Err(format!(
                "unknown log format {other:?}: expected human or json"
            )),
        }
    }
}

/// Keeps the exporter running; dropping it flushes and shuts the exporter down.
#[must_use = "dropping the guard stops trace export"]
pub struct Guard {
    provider: Option<SdkTracerProvider>,
    runtime: Option<tokio::runtime::Runtime>,
    endpoint: Option<String>,
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field("exporting", &self.provider.is_some())
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

impl Guard {
    /// Whether spans are exported over OTLP.
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }

    /// The collector spans go to, if any.
    pub fn endpoint(&self) -> Option<&str> {
        self.endpoint.as_deref()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            // Errors were already reported by the exporter wrapper.
            let _ = provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT);
        }
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

/// The OTLP endpoint from the environment, if set and not empty.
pub fn otlp_endpoint_from_env() -> Option<String> {
    [OTLP_TRACES_ENDPOINT_VAR, OTLP_ENDPOINT_VAR]
        .into_iter()
        .filter_map(|v| std::env::var(v).ok())
        .map(|v| v.trim().to_owned())
        .find(|v| !v.is_empty())
}

/// Installs the global subscriber for `service` (see the crate documentation). Logging
/// setup problems (an invalid `RUST_LOG`, an exporter that cannot be built) are reported
/// on standard error and do not stop the service. Calling it twice keeps the first
/// subscriber.
pub fn init(service: &str, format: LogFormat) -> Guard {
    init_instance(service, format, None)
}

/// Like [`init`] for the instance `instance` of `service` (a memory node's name), which
/// becomes the spans' `service.instance.id`.
pub fn init_instance(service: &str, format: LogFormat, instance: Option<&str>) -> Guard {
    install(service, format, instance, "info")
}

/// Like [`init`] for a command-line program: human log lines at `warn` unless
/// `RUST_LOG` says otherwise; exported spans at `info` unless `RUST_LOG` says otherwise.
pub fn init_client(service: &str) -> Guard {
    install(service, LogFormat::Human, None, "warn")
}

fn install(
    service: &str,
    format: LogFormat,
    instance: Option<&str>,
    default_log_level: &str,
) -> Guard {
    trace_context::install();
    let (filter, filter_error) = env_filter(default_log_level);
    let mut guard = Guard {
        provider: None,
        runtime: None,
        endpoint: None,
    };
    let mut exporter_error = None;
    let otel_layer = match otlp_endpoint_from_env() {
        Some(endpoint) => {
            let identity = resource::ServiceIdentity::from_env(service, instance);
            match exporter(&identity, &endpoint) {
                Ok((provider, runtime)) => {
                    let tracer = provider.tracer(service.to_owned());
                    guard.provider = Some(provider);
                    guard.runtime = Some(runtime);
                    guard.endpoint = Some(endpoint);
                    Some(
                        tracing_opentelemetry::layer()
                            .with_tracer(tracer)
                            .with_filter(env_filter("info").0)
                            .with_filter(tracing_subscriber::filter::filter_fn(|m| {
                                !is_exporter_internal(m.target())
                            })),
                    )
                }
                Err(e) => {
                    exporter_error = Some(format!("OTLP trace export to {endpoint} disabled: {e}"));
                    None
                }
            }
        }
        None => None,
    };
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let fmt_layer = match format {
        LogFormat::Human => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(ansi)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .with_writer(std::io::stderr)
            .boxed(),
    };
    let installed = tracing_subscriber::registry()
        .with(otel_layer)
        .with(fmt_layer.with_filter(filter))
        .try_init()
        .is_ok();
    if let Some(e) = filter_error {
        tracing::warn!("invalid RUST_LOG ({e}); logging at info");
    }
    if let Some(e) = exporter_error {
        tracing::warn!("{e}");
    }
    if installed && let Some(endpoint) = &guard.endpoint {
        tracing::info!(
            endpoint = %endpoint,
            service,
            tls = otlp_tls::is_https(endpoint),
            "exporting traces over OTLP/gRPC"
        );
    }
    guard
}

/// `RUST_LOG`, or `default` (with the parse error) when unset or invalid.
fn env_filter(default: &str) -> (EnvFilter, Option<String>) {
    match std::env::var(EnvFilter::DEFAULT_ENV) {
        Ok(v) if !v.trim().is_empty() => match EnvFilter::try_new(&v) {
            Ok(f) => (f, None),
            Err(e) => (EnvFilter::new(default), Some(e.to_string())),
        },
        _ => (EnvFilter::new(default), None),
    }
}

/// Targets whose spans would feed back into the exporter (its own gRPC stack).
fn is_exporter_internal(target: &str) -> bool {
    [
        "h2",
        "hyper",
        "hyper_util",
        "tonic",
        "tower",
        "opentelemetry",
    ]
    .iter()
    .any(|p| target.starts_with(p))
}

fn exporter(
    identity: &resource::ServiceIdentity,
    endpoint: &str,
) -> Result<(SdkTracerProvider, tokio::runtime::Runtime), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("otlp-export")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the export runtime: {e}"))?;
    // The gRPC channel spawns its worker on the current runtime.
    let _enter = runtime.enter();
    let mut builder = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint);
    if let Some(tls) = otlp_tls::client_config_for(endpoint)? {
        builder = builder.with_tls_config(tls);
    }
    let otlp = builder.build().map_err(|e| e.to_string())?;
    let exporter = QuietExporter {
        inner: otlp,
        endpoint: endpoint.to_owned(),
        state: Arc::new(Mutex::new(ErrorState::default())),
    };
    let provider = SdkTracerProvider::builder()
        .with_resource(identity.resource())
        .with_batch_exporter(exporter)
        .build();
    drop(_enter);
    Ok((provider, runtime))
}

/// Failures since the last report.
#[derive(Debug, Default)]
struct ErrorState {
    failing: bool,
    last_report: Option<Instant>,
    suppressed: u64,
}

/// What to say about one export result, if anything (pure, for tests).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Report {
    /// The first failure (or the first after a recovery).
    First,
    /// A failure after [`EXPORT_ERROR_INTERVAL`]; this many were not reported.
    Again(u64),
    /// Exports work again after failures.
    Recovered,
}

impl ErrorState {
    fn on_result(&mut self, ok: bool, now: Instant) -> Option<Report> {
        if ok {
            if self.failing {
                self.failing = false;
                self.suppressed = 0;
                return Some(Report::Recovered);
            }
            return None;
        }
        if !self.failing {
            self.failing = true;
            self.last_report = Some(now);
            self.suppressed = 0;
            return Some(Report::First);
        }
        let due = self
            .last_report
            .is_none_or(|t| now.duration_since(t) >= EXPORT_ERROR_INTERVAL);
        if due {
            let n = std::mem::take(&mut self.suppressed);
            self.last_report = Some(now);
            Some(Report::Again(n))
        } else {
            self.suppressed += 1;
            None
        }
    }
}

/// The OTLP exporter with rate-limited error reports.
#[derive(Debug)]
struct QuietExporter<E> {
    inner: E,
    endpoint: String,
    state: Arc<Mutex<ErrorState>>,
}

impl<E> QuietExporter<E> {
    fn report(&self, result: &OTelSdkResult) {
        let report = self
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .on_result(result.is_ok(), Instant::now());
        let endpoint = &self.endpoint;
        match (report, result) {
            (Some(Report::First), Err(e)) => tracing::warn!(
                target: "dmkv_telemetry",
                endpoint = %endpoint,
                error = %e,
                "OTLP trace export failed; further failures are reported at most once a minute"
            ),
            (Some(Report::Again(n)), Err(e)) => tracing::warn!(
                target: "dmkv_telemetry",
                endpoint = %endpoint,
                error = %e,
                failures_not_reported = n,
                "OTLP trace export still failing"
            ),
            (Some(Report::Recovered), _) => tracing::info!(
                target: "dmkv_telemetry",
                endpoint = %endpoint,
                "OTLP trace export recovered"
            ),
            _ => {}
        }
    }
}

impl<E: SpanExporter> SpanExporter for QuietExporter<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let result = self.inner.export(batch).await;
        self.report(&result);
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_formats_parse() {
        assert_eq!("json".parse::<LogFormat>(), Ok(LogFormat::Json));
        assert_eq!(" Human ".parse::<LogFormat>(), Ok(LogFormat::Human));
        assert!("xml".parse::<LogFormat>().is_err());
        assert_eq!(LogFormat::default(), LogFormat::Human);
        assert_eq!(LogFormat::Json.to_string(), "json");
    }

    #[test]
    fn export_errors_are_rate_limited() {
        let t0 = Instant::now();
        let mut s = ErrorState::default();
        assert_eq!(s.on_result(true, t0), None);
        assert_eq!(s.on_result(false, t0), Some(Report::First));
        for i in 1..100 {
            assert_eq!(
                s.on_result(false, t0 + Duration::from_millis(i * 100)),
                None
            );
        }
        assert_eq!(
            s.on_result(false, t0 + EXPORT_ERROR_INTERVAL),
            Some(Report::Again(99))
        );
        assert_eq!(s.on_result(false, t0 + EXPORT_ERROR_INTERVAL), None);
        assert_eq!(
            s.on_result(true, t0 + EXPORT_ERROR_INTERVAL),
            Some(Report::Recovered)
        );
        assert_eq!(s.on_result(true, t0 + EXPORT_ERROR_INTERVAL), None);
        assert_eq!(
            s.on_result(false, t0 + EXPORT_ERROR_INTERVAL),
            Some(Report::First)
        );
    }

    #[test]
    fn exporter_internals_are_not_traced() {
        assert!(is_exporter_internal("h2::proto"));
        assert!(is_exporter_internal("tonic"));
        assert!(is_exporter_internal("opentelemetry_sdk"));
        assert!(!is_exporter_internal("memnode::dataplane"));
        assert!(!is_exporter_internal("metadata"));
    }
}
