//! The request spans of [`dmkv_service::trace::trace_requests`], through an
//! OpenTelemetry layer exporting to memory: named `METHOD /route/template` with the
//! HTTP semantic-convention attributes, a child of a valid `traceparent` (remote
//! parent, same trace), a trace of their own for a malformed one, an error status for a
//! 5xx answer, and no span for health checks and metrics scrapes.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use dmkv_service::{HttpServer, Listener};
use opentelemetry::trace::{SpanId, SpanKind, Status, TraceId, TracerProvider as _};
use opentelemetry::{Key, Value};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing_subscriber::layer::SubscriberExt as _;

#[derive(Debug, Clone, Default)]
struct Collector(Arc<Mutex<Vec<SpanData>>>);

impl SpanExporter for Collector {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.0.lock().unwrap().extend(batch);
        Ok(())
    }
}

fn attr(span: &SpanData, key: &'static str) -> Option<Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key == Key::from_static_str(key))
        .map(|kv| kv.value.clone())
}

/// Sends `GET path` with `traceparent` if any; returns the status line.
fn get_with(url: &str, path: &str, traceparent: Option<&str>) -> String {
    let mut s = TcpStream::connect(url.trim_start_matches("http://")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let tp = traceparent
        .map(|t| format!("traceparent: {t}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n{tp}\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer.lines().next().unwrap_or_default().to_owned()
}

#[test]
fn requests_are_spans_named_by_route_and_children_of_their_caller() {
    let collector = Collector::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(collector.clone())
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("test"));
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer)).unwrap();

    let app = Router::new()
        .route("/v1/things/{name}", get(|| async { "thing" }))
        .route(
            "/v1/broken",
            get(|| async { StatusCode::INTERNAL_SERVER_ERROR }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route("/metrics", get(|| async { "" }))
        .layer(axum::middleware::from_fn(
            dmkv_service::trace::trace_requests,
        ));
    let listener = Listener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let server = HttpServer::spawn("test-http", listener, app, Duration::from_secs(1)).unwrap();
    let url = server.url();

    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent = "00f067aa0ba902b7";
    let tp = format!("00-{trace}-{parent}-01");
    assert!(get_with(&url, "/v1/things/a", Some(&tp)).contains("200"));
    assert!(get_with(&url, "/v1/things/b", Some("00-garbage")).contains("200"));
    assert!(get_with(&url, "/v1/broken", None).contains("500"));
    assert!(get_with(&url, "/healthz", None).contains("200"));
    assert!(get_with(&url, "/metrics", None).contains("200"));
    server.stop();
    provider.force_flush().unwrap();
    let spans = collector.0.lock().unwrap().clone();
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "GET /v1/things/{name}",
            "GET /v1/things/{name}",
            "GET /v1/broken"
        ],
        "one span per request except the routine ones"
    );

    let child = &spans[0];
    assert_eq!(child.span_kind, SpanKind::Server);
    assert_eq!(
        child.span_context.trace_id(),
        TraceId::from_hex(trace).unwrap()
    );
    assert_eq!(child.parent_span_id, SpanId::from_hex(parent).unwrap());
    assert!(child.parent_span_is_remote);
    assert_eq!(attr(child, "http.request.method"), Some(Value::from("GET")));
    assert_eq!(
        attr(child, "http.route"),
        Some(Value::from("/v1/things/{name}"))
    );
    assert_eq!(
        attr(child, "http.response.status_code"),
        Some(Value::I64(200))
    );

    let own = &spans[1];
    assert_eq!(own.parent_span_id, SpanId::INVALID);
    assert_ne!(
        own.span_context.trace_id(),
        TraceId::from_hex(trace).unwrap()
    );

    let broken = &spans[2];
    assert_eq!(
        attr(broken, "http.response.status_code"),
        Some(Value::I64(500))
    );
    assert!(
        matches!(broken.status, Status::Error { .. }),
        "{:?}",
        broken.status
    );
}
