//! Client-side spans, seen through a capturing subscriber: every table operation runs in
//! an info-level `kv.op` span (operation, table, index, key length, outcome, round trips,
//! work requests, bytes) on Clover, RACE and in-place tables, and every doorbell batch of
//! the verbs worker in a debug-level `verbs.batch` span (queue pair, work requests,
//! opcodes) nested inside it. At `info` no batch span is created; at `warn` nothing is.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use kvstore::{Client, KvError, SchemeSpec, TableSpec, TransportKind};
use testbed::EmbeddedOptions;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{EnvFilter, Layer};

/// A closed span: its name, fields, and its parent's sequence number.
#[derive(Debug, Clone)]
struct Closed {
    seq: u64,
    parent: Option<u64>,
    name: &'static str,
    fields: BTreeMap<String, String>,
}

impl Closed {
    fn field(&self, name: &str) -> &str {
        self.fields
            .get(name)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("span {} has no field {name}: {self:?}", self.name))
    }

    fn number(&self, name: &str) -> u64 {
        self.field(name)
            .parse()
            .unwrap_or_else(|_| panic!("{name} is not a number: {self:?}"))
    }
}

/// What a span carries while it is open (in the registry's extensions).
struct Open {
    seq: u64,
    parent: Option<u64>,
    fields: BTreeMap<String, String>,
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

/// Records every span when it closes, and counts events.
#[derive(Clone, Default)]
struct Capture {
    closed: Arc<Mutex<Vec<Closed>>>,
    events: Arc<AtomicU64>,
    next: Arc<AtomicU64>,
}

impl<S> Layer<S> for Capture
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let parent = span
            .parent()
            .and_then(|p| p.extensions().get::<Open>().map(|o| o.seq));
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        span.extensions_mut().insert(Open {
            seq,
            parent,
            fields,
        });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(open) = span.extensions_mut().get_mut::<Open>()
        {
            values.record(&mut Fields(&mut open.fields));
        }
    }

    fn on_event(&self, _: &tracing::Event<'_>, _: Context<'_, S>) {
        self.events.fetch_add(1, Ordering::Relaxed);
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let name = span.name();
        if let Some(open) = span.extensions_mut().remove::<Open>() {
            self.closed.lock().unwrap().push(Closed {
                seq: open.seq,
                parent: open.parent,
                name,
                fields: open.fields,
            });
        }
    }
}

impl Capture {
    /// The closed spans called `name`, in the order they were opened.
    fn spans(&self, name: &str) -> Vec<Closed> {
        let mut v: Vec<Closed> = self
            .closed
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.name == name)
            .cloned()
            .collect();
        v.sort_by_key(|s| s.seq);
        v
    }

    fn children(&self, parent: &Closed, name: &str) -> Vec<Closed> {
        self.spans(name)
            .into_iter()
            .filter(|s| s.parent == Some(parent.seq))
            .collect()
    }
}

fn cluster(transport: TransportKind) -> Client {
    let client = testbed::embedded_client(EmbeddedOptions {
        memnodes: 2,
        capacity: 32 << 20,
        transport,
        ..EmbeddedOptions::default()
    })
    .expect("embedded cluster");
    client
        .create_table("clover", &TableSpec::clover(1024))
        .expect("clover table");
    client
        .create_table("race", &TableSpec::race(1024))
        .expect("race table");
    let spec: SchemeSpec = "pessimistic-rw-async-embedded".parse().unwrap();
    client
        .create_table("inplace", &TableSpec::in_place(spec, 128, 64))
        .expect("in-place table");
    client
}

/// Serializes the tests: the level filters of subscribers installed per thread are
/// combined globally by `tracing`, so two at once would see each other's levels.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs the same operations on every table, on this thread, under `filter`.
fn workload(client: &Client, filter: &str) -> Capture {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let capture = Capture::default();
    let subscriber =
        tracing_subscriber::registry().with(capture.clone().with_filter(EnvFilter::new(filter)));
    tracing::subscriber::with_default(subscriber, || {
        let s = client.session().expect("session");
        for name in ["clover", "race", "inplace"] {
            let t = s.table(name).expect("table");
            s.block_on(async {
                t.insert(b"key-1", b"v1").await.unwrap();
                assert_eq!(t.get(b"key-1").await.unwrap().unwrap(), b"v1");
                t.put(b"key-1", b"v2").await.unwrap();
                t.update(b"key-1", b"v3").await.unwrap();
                t.delete(b"key-1").await.unwrap();
                assert_eq!(t.get(b"key-1").await, Ok(None));
                assert_eq!(
                    t.insert(b"", b"v").await,
                    Err(KvError::InvalidArgument(
                        "keys must be at least one byte long".into()
                    ))
                );
            });
        }
        s.quiesce();
    });
    capture
}

#[test]
fn operations_and_their_batches_are_spans() {
    for transport in [TransportKind::Local, TransportKind::Udp] {
        let client = cluster(transport);
        let capture = workload(&client, "info,verbs::worker=debug");
        let ops = capture.spans("kv.op");
        for (table, index) in [
            ("clover", "clover"),
            ("race", "race"),
            ("inplace", "inplace"),
        ] {
            let of_table: Vec<&Closed> = ops.iter().filter(|s| s.field("table") == table).collect();
            let names: Vec<&str> = of_table.iter().map(|s| s.field("op")).collect();
            assert_eq!(
                names,
                ["insert", "get", "put", "update", "delete", "get", "insert"],
                "[{transport}] {table}"
            );
            let outcomes: Vec<&str> = of_table.iter().map(|s| s.field("outcome")).collect();
            assert_eq!(
                outcomes,
                [
                    "ok",
                    "ok",
                    "ok",
                    "ok",
                    "ok",
                    "not_found",
                    "invalid_argument"
                ],
                "[{transport}] {table}"
            );
            for op in &of_table {
                assert_eq!(op.field("index"), index, "{op:?}");
                assert_eq!(op.parent, None, "operations are root spans: {op:?}");
            }
            for op in &of_table[..6] {
                assert_eq!(op.number("key_len"), 5);
                let rtt = op.number("round_trips");
                assert!(rtt >= 1, "{op:?}");
                let batches = capture.children(op, "verbs.batch");
                // Each round trip posts one batch per memory node it touches.
                assert!(
                    batches.len() as u64 >= rtt,
                    "[{transport}] {op:?}: {batches:?}"
                );
                let wrs: u64 = batches.iter().map(|b| b.number("work_requests")).sum();
                assert_eq!(wrs, op.number("work_requests"), "[{transport}] {op:?}");
                assert!(op.number("bytes") > 0);
                for b in &batches {
                    // Unless abandoned with its session (an asynchronous unlatch).
                    if b.fields.contains_key("failed") {
                        assert_eq!(b.number("failed"), 0, "{b:?}");
                    }
                    let opcodes: Vec<&str> = b.field("opcodes").split(',').collect();
                    assert_eq!(opcodes.len() as u64, b.number("work_requests"), "{b:?}");
                    assert!(
                        opcodes
                            .iter()
                            .all(|o| ["read", "write", "cas", "faa"].contains(o)),
                        "{b:?}"
                    );
                    b.number("qp");
                }
            }
            assert_eq!(of_table[2].field("value_len"), "2");
            // The rejected key never reached the network.
            let rejected = of_table[6];
            assert!(!rejected.fields.contains_key("round_trips"), "{rejected:?}");
            assert!(capture.children(rejected, "verbs.batch").is_empty());
        }
        // A write posts WRITEs and CASes somewhere.
        let all = capture.spans("verbs.batch");
        assert!(all.iter().any(|b| b.field("opcodes").contains("write")));
        assert!(all.iter().any(|b| b.field("opcodes").contains("cas")));
    }
}

#[test]
fn the_default_level_has_no_batch_spans_and_warn_has_nothing() {
    let client = cluster(TransportKind::Local);
    let info = workload(&client, "info");
    assert_eq!(info.spans("kv.op").len(), 21);
    assert!(info.spans("verbs.batch").is_empty());
    let warn = workload(&client, "warn");
    assert!(warn.closed.lock().unwrap().is_empty());
    assert_eq!(warn.events.load(Ordering::Relaxed), 0);
}
