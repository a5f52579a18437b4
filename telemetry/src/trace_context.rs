//! The OpenTelemetry half of trace propagation: turning a `tracing` span into its W3C
//! `traceparent` header value, installed into `dmkv-api`'s HTTP client (which does not
//! depend on OpenTelemetry itself) by every telemetry setup of this crate.

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::TraceContextExt as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The `traceparent` header value of `span`, if it belongs to an exported trace.
pub fn traceparent_of(span: &tracing::Span) -> Option<String> {
    let cx = span.context();
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    carrier.remove(dmkv_api::trace_context::TRACEPARENT)
}

/// Makes the HTTP client of `dmkv-api` send the `traceparent` of its call spans (for
/// processes that install their own subscriber; [`crate::init`] and its siblings call
/// it).
pub fn install() {
    dmkv_api::trace_context::set_traceparent_source(traceparent_of);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_outside_any_exported_trace_has_no_traceparent() {
        assert_eq!(traceparent_of(&tracing::Span::none()), None);
    }
}
