//! Server spans of HTTP requests, following the OpenTelemetry HTTP semantic
//! conventions: one info-level `http.request` span per request, exported as
//! `METHOD /route/template` (`POST /v1/tables/{name}`) with `http.request.method`,
//! `http.route` and `http.response.status_code`, a child of the caller's span when the
//! request carries a W3C `traceparent` header.
//!
//! Routine requests are not traced: heartbeats (routes ending in `/heartbeat`, most of
//! a metadata service's requests), health checks (`/healthz`) and metrics scrapes
//! (`/metrics`); they say nothing about a client's operation. Set
//! `DMKV_TRACE_HEARTBEATS=1` to trace them too.
//!
//! [`request_span`] and [`finish`] are for a service whose own middleware also counts
//! requests; [`trace_requests`] is a complete middleware for the others.

use std::sync::OnceLock;
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderMap, Method};
use axum::middleware::Next;
use axum::response::Response;
use opentelemetry::propagation::{Extractor, TextMapPropagator as _};
use opentelemetry::trace::TraceContextExt as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing::Instrument as _;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The variable that turns tracing of routine requests (heartbeats, health checks,
/// metrics scrapes) on (`1`, `true`, `yes` or `on`).
pub const TRACE_HEARTBEATS_VAR: &str = "DMKV_TRACE_HEARTBEATS";

/// The route template of a request that matched no route.
pub const UNMATCHED_ROUTE: &str = "unmatched";

/// Whether a value of [`TRACE_HEARTBEATS_VAR`] turns heartbeat tracing on.
pub fn heartbeats_traced(value: Option<&str>) -> bool {
    value.is_some_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    })
}

/// Whether this process traces heartbeats ([`TRACE_HEARTBEATS_VAR`], read once).
fn trace_heartbeats() -> bool {
    static TRACED: OnceLock<bool> = OnceLock::new();
    *TRACED.get_or_init(|| heartbeats_traced(std::env::var(TRACE_HEARTBEATS_VAR).ok().as_deref()))
}

/// Whether `route` (a template) is routine: a heartbeat, a health check or a metrics
/// scrape.
pub fn is_routine(route: &str) -> bool {
    route.ends_with("/heartbeat") || matches!(route, "/healthz" | "/metrics")
}

/// The route template of `req` (`/v1/tables/{name}`), or [`UNMATCHED_ROUTE`].
pub fn route_of(req: &Request) -> String {
    req.extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| UNMATCHED_ROUTE.to_owned())
}

/// The headers of a request, read as a W3C trace context carrier.
struct HeaderCarrier<'a>(&'a HeaderMap);

impl Extractor for HeaderCarrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

/// The span of one request to `route` (see the module documentation): disabled for an
/// untraced routine request; a child of the `traceparent` in `headers` when there is a valid
/// one (a malformed one is ignored: the request starts a trace of its own).
pub fn request_span(method: &Method, route: &str, headers: &HeaderMap) -> tracing::Span {
    if is_routine(route) && !trace_heartbeats() {
        return tracing::Span::none();
    }
    let span = tracing::info_span!(
        "http.request",
        otel.name = %format_args!("{method} {route}"),
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        http.request.method = %method,
        http.route = %route,
        http.response.status_code = tracing::field::Empty,
        latency_us = tracing::field::Empty,
    );
    let parent = TraceContextPropagator::new().extract(&HeaderCarrier(headers));
    if parent.span().span_context().is_valid() {
        // Fails only when no OpenTelemetry layer is installed: nothing to link then.
        let _ = span.set_parent(parent);
    }
    span
}

/// Records the answer on a request's span: status, latency, and an error status for a
/// 5xx answer.
pub fn finish(span: &tracing::Span, status: u16, started: Instant) {
    // Signed: the OpenTelemetry layer exports unsigned values as strings.
    span.record("http.response.status_code", i64::from(status));
    span.record(
        "latency_us",
        i64::try_from(started.elapsed().as_micros()).unwrap_or(i64::MAX),
    );
    if status >= 500 {
        span.record("otel.status_code", "error");
    }
}

/// Middleware tracing every request in a [`request_span`].
pub async fn trace_requests(req: Request, next: Next) -> Response {
    let route = route_of(&req);
    let span = request_span(req.method(), &route, req.headers());
    let started = Instant::now();
    let resp = next.run(req).instrument(span.clone()).await;
    finish(&span, resp.status().as_u16(), started);
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_tracing_is_off_unless_asked_for() {
        assert!(!heartbeats_traced(None));
        assert!(!heartbeats_traced(Some("")));
        assert!(!heartbeats_traced(Some("0")));
        assert!(!heartbeats_traced(Some("no")));
        assert!(heartbeats_traced(Some("1")));
        assert!(heartbeats_traced(Some(" TRUE ")));
        assert!(heartbeats_traced(Some("on")));
    }

    #[test]
    fn routine_routes_are_recognised() {
        assert!(is_routine("/v1/memnodes/{id}/heartbeat"));
        assert!(is_routine("/healthz"));
        assert!(is_routine("/metrics"));
        assert!(!is_routine("/v1/memnodes/{id}/drain"));
        assert!(!is_routine("/v1/tables/{name}"));
        assert!(!is_routine(UNMATCHED_ROUTE));
    }
}
