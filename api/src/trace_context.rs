//! The client side of distributed tracing: every call of the [`HttpClient`] runs in an
//! info-level `http.client` span (exported as a client span named after the method, with
//! `http.request.method`, `server.address`, `url.path` and
//! `http.response.status_code`), and its W3C trace context goes to the service in a
//! `traceparent` header, so that the service's request span joins the caller's trace
//! (a `kv.op` of the client library, say).
//!
//! Routine calls — heartbeats, health checks, metrics scrapes — get no span, as on the
//! server side, unless `DMKV_TRACE_HEARTBEATS=1`.
//!
//! This crate does not depend on OpenTelemetry (the client library that uses it stays
//! free of telemetry exporters): the process's telemetry setup (`dmkv-telemetry`)
//! installs the function that turns a span into its `traceparent`
//! ([`set_traceparent_source`]); without one, no header is sent.
//!
//! [`HttpClient`]: crate::HttpClient

use std::sync::OnceLock;

/// The W3C trace context header.
pub const TRACEPARENT: &str = "traceparent";

/// The variable that turns tracing of routine calls on (`1`, `true`, `yes` or `on`).
pub const TRACE_HEARTBEATS_VAR: &str = "DMKV_TRACE_HEARTBEATS";

/// Whether `path` (without its query) is a routine call: a heartbeat, a health check
/// or a metrics scrape.
pub fn is_routine(path: &str) -> bool {
    let path = path.split('?').next().unwrap_or_default();
    path.ends_with("/heartbeat") || matches!(path, "/healthz" | "/metrics")
}

/// Whether this process traces routine calls ([`TRACE_HEARTBEATS_VAR`], read once).
fn trace_routine() -> bool {
    static TRACED: OnceLock<bool> = OnceLock::new();
    *TRACED.get_or_init(|| {
        std::env::var(TRACE_HEARTBEATS_VAR).is_ok_and(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "1" | "true" | "yes" | "on"
            )
        })
    })
}

/// The span of one call `method path` to `server` (`host:port`): disabled for an
/// untraced routine call, a child of the current span otherwise.
pub fn client_span(method: &str, server: &str, path: &str) -> tracing::Span {
    if is_routine(path) && !trace_routine() {
        return tracing::Span::none();
    }
    tracing::info_span!(
        "http.client",
        otel.name = %method,
        otel.kind = "client",
        otel.status_code = tracing::field::Empty,
        http.request.method = %method,
        server.address = %server,
        url.path = %path.split('?').next().unwrap_or_default(),
        http.response.status_code = tracing::field::Empty,
    )
}

/// Records the answer's status on a call's span (an error status for 5xx).
pub fn record_status(span: &tracing::Span, status: u16) {
    // Signed: the OpenTelemetry layer exports unsigned values as strings.
    span.record("http.response.status_code", i64::from(status));
    if status >= 500 {
        span.record("otel.status_code", "error");
    }
}

/// Records a call that got no answer on its span.
pub fn record_failure(span: &tracing::Span) {
    span.record("otel.status_code", "error");
}

/// How a span's `traceparent` header value is computed (`None`: the span belongs to
/// no exported trace).
pub type TraceparentSource = fn(&tracing::Span) -> Option<String>;

static SOURCE: OnceLock<TraceparentSource> = OnceLock::new();

/// Installs how spans become `traceparent` values, once per process (later calls
/// keep the first).
pub fn set_traceparent_source(source: TraceparentSource) {
    let _ = SOURCE.set(source);
}

/// The `traceparent` header value of `span`, if a source is installed and the span
/// belongs to an exported trace.
pub fn traceparent(span: &tracing::Span) -> Option<String> {
    SOURCE.get().and_then(|source| source(span))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routine_paths_are_recognised() {
        assert!(is_routine("/v1/memnodes/mn-1/heartbeat"));
        assert!(is_routine("/healthz"));
        assert!(is_routine("/metrics?x=1"));
        assert!(!is_routine("/v1/tables/t"));
        assert!(!is_routine("/v1/memnodes/mn-1/drain"));
    }

    #[test]
    fn no_header_without_an_exported_trace() {
        // No source is installed here: there is no context to send.
        let span = client_span("GET", "127.0.0.1:1", "/v1/tables");
        assert_eq!(traceparent(&span), None);
        assert_eq!(traceparent(&tracing::Span::none()), None);
    }
}
