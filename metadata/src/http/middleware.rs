//! What every request goes through: counting, timing and tracing (the bearer token
//! is resolved by [`super::authorize`]).

use std::time::Instant;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument as _;

use super::state::AppState;

/// Counts, times and traces every request: one `http.request` span (info level, named
/// `METHOD /route/template` when exported, a child of the caller's `traceparent`, none
/// for heartbeats unless `DMKV_TRACE_HEARTBEATS` is set; see [`dmkv_service::trace`])
/// with the method, route template, status and latency, and an event naming the method,
/// route, status and latency when answered (debug level; warning for a 5xx).
pub(super) async fn count_requests(
    State(s): State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    let method = req.method().to_string();
    let route = dmkv_service::trace::route_of(&req);
    let span = dmkv_service::trace::request_span(req.method(), &route, req.headers());
    let started = Instant::now();
    let resp = next.run(req).instrument(span.clone()).await;
    let elapsed = started.elapsed();
    let status = resp.status().as_u16();
    dmkv_service::trace::finish(&span, status, started);
    span.in_scope(|| {
        if status >= 500 {
            tracing::warn!(
                method = %method,
                route = %route,
                status,
                latency_us = elapsed.as_micros() as u64,
                "request failed"
            );
        } else {
            tracing::debug!(
                method = %method,
                route = %route,
                status,
                latency_us = elapsed.as_micros() as u64,
                "request answered"
            );
        }
    });
    s.metrics.on_request(&method, &route, status);
    s.metrics.on_latency(&method, &route, elapsed);
    resp
}
