//! One trace across the client and the metadata service, through the OpenTelemetry
//! pipeline the binaries install (spans collected in memory instead of sent over OTLP):
//! a `kv.op` of the client library is the parent of its `http.client` call, whose
//! `traceparent` makes the metadata service's request span a child of it, named after
//! the route template with the HTTP semantic-convention attributes. A memory node's
//! admin API joins its caller's trace the same way. The memory nodes' heartbeats, sent
//! all along, leave no span on either side.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kvstore::{Client, TableSpec, TransportKind};
use opentelemetry::trace::{SpanId, SpanKind, TraceId, TracerProvider as _};
use opentelemetry::{Key, Value};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use testbed::EmbeddedOptions;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt as _;

/// Keeps every exported span.
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

fn by_id(spans: &[SpanData], id: SpanId) -> Option<&SpanData> {
    spans.iter().find(|s| s.span_context.span_id() == id)
}

#[test]
fn a_table_operation_and_its_metadata_request_share_one_trace() {
    let collector = Collector::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(collector.clone())
        .with_resource(telemetry::resource::ServiceIdentity::from_env("dmkv", None).resource())
        .build();
    let layer = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("dmkv"))
        .with_filter(LevelFilter::INFO);
    // Global: the metadata service and the memory nodes answer on threads of their own.
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer)).unwrap();
    // The HTTP client sends traceparent through the telemetry crate's bridge.
    telemetry::trace_context::install();

    let client: Client = testbed::embedded_client(EmbeddedOptions {
        memnodes: 1,
        capacity: 16 << 20,
        transport: TransportKind::Udp,
        ..EmbeddedOptions::default()
    })
    .unwrap();
    client
        .create_table("traced", &TableSpec::clover(256))
        .unwrap();
    let session = client.session().unwrap();
    let table = session.table("traced").unwrap();
    session.block_on(async {
        for i in 0..4u8 {
            table.insert(&[b'k', i], b"value").await.unwrap();
        }
    });
    session.quiesce();
    // The embedded memory nodes heartbeat every 500 ms.
    std::thread::sleep(Duration::from_millis(1200));
    drop(table);
    drop(session);
    drop(client);
    provider.force_flush().unwrap();
    let spans = collector.0.lock().unwrap().clone();

    let names: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
    assert!(
        !names.iter().any(|n| n.contains("heartbeat")),
        "heartbeats are traced by default: {names:?}"
    );

    // The metadata requests made inside table operations (leasing memory, publishing
    // chains): server span → client call → kv.op.
    let inside_ops: Vec<(&SpanData, &SpanData, &SpanData)> = spans
        .iter()
        .filter(|s| s.span_kind == SpanKind::Server)
        .filter_map(|server| {
            let call = by_id(&spans, server.parent_span_id)?;
            let op = by_id(&spans, call.parent_span_id).filter(|op| op.name == "kv.op")?;
            Some((server, call, op))
        })
        .collect();
    let inside: Vec<&str> = inside_ops.iter().map(|(s, _, _)| s.name.as_ref()).collect();
    assert!(inside.contains(&"POST /v1/leases"), "{names:?}");
    // A new key's chain: through the table's chain directory (chain ids, the
    // directory) or, without one, through the service (`.../chains`).
    assert!(
        inside
            .iter()
            .any(|n| n.starts_with("POST /v1/tables/{name}/chains")),
        "{names:?}"
    );
    for (server, _, _) in &inside_ops {
        let method = attr(server, "http.request.method").unwrap().to_string();
        let route = attr(server, "http.route").unwrap().to_string();
        assert_eq!(server.name, format!("{method} {route}"));
    }
    let (server, call, op) = inside_ops
        .iter()
        .find(|(s, _, _)| s.name == "POST /v1/leases")
        .copied()
        .unwrap();

    let trace: TraceId = op.span_context.trace_id();
    assert_eq!(call.span_context.trace_id(), trace);
    assert_eq!(server.span_context.trace_id(), trace);
    assert!(
        server.parent_span_is_remote,
        "the parent came in a traceparent"
    );
    assert_eq!(call.span_kind, SpanKind::Client);
    assert_eq!(attr(op, "op"), Some(Value::from("insert")));
    assert_eq!(attr(op, "table"), Some(Value::from("traced")));

    assert_eq!(
        attr(server, "http.request.method"),
        Some(Value::from("POST"))
    );
    assert_eq!(attr(server, "http.route"), Some(Value::from("/v1/leases")));
    assert_eq!(call.name, "POST");
    assert_eq!(
        attr(server, "http.response.status_code").map(|v| v.to_string()),
        attr(call, "http.response.status_code").map(|v| v.to_string()),
    );
    assert!(attr(call, "http.response.status_code").is_some());
    let path = attr(call, "url.path").unwrap().to_string();
    assert_eq!(path, "/v1/leases");

    // The memory node's admin API joins the trace of the call too (creating the
    // session's queue pair over UDP).
    let qp = spans
        .iter()
        .find(|s| s.name == "POST /v1/qps")
        .unwrap_or_else(|| panic!("no queue pair creation span: {names:?}"));
    let qp_call = by_id(&spans, qp.parent_span_id).unwrap();
    assert_eq!(qp_call.span_kind, SpanKind::Client);
    assert_eq!(qp_call.span_context.trace_id(), qp.span_context.trace_id());
    assert_eq!(attr(qp, "http.response.status_code"), Some(Value::I64(201)));

    // Requests outside any operation (creating the table) start traces of their own.
    let create = spans
        .iter()
        .find(|s| s.name == "POST /v1/tables")
        .unwrap_or_else(|| panic!("no table creation span: {names:?}"));
    let create_call = by_id(&spans, create.parent_span_id).unwrap();
    assert_eq!(create_call.parent_span_id, SpanId::INVALID);
    assert_eq!(
        create_call.span_context.trace_id(),
        create.span_context.trace_id()
    );
}
