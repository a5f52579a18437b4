//! The switch's metric families at `/metrics` (encoded by `prometheus-client` in
//! [`telemetry::exposition`]): the pipeline's per-function counters, route lookups, Clover
//! steering decisions, the mode register, the sockets' counters and the pipeline latency.

use std::sync::atomic::Ordering;

use telemetry::family::{Family, Number, labels};

use crate::control::Control;
use crate::io_stats::IoStats;
use crate::spec;

/// Every family of a switch now.
pub fn families(control: &Control, io: &IoStats) -> Vec<Family> {
    let p = control.pipeline();
    let counters = p.counters();
    let packets = counters
        .list()
        .into_iter()
        .map(|(function, name, v)| {
            (
                labels(&[("function", &function), ("counter", &name)]),
                Number::Int(v),
            )
        })
        .collect();
    let mode = p.mode();
    let enabled = spec::mode::ALL
        .iter()
        .map(|(name, bit)| {
            (
                labels(&[("function", name)]),
                Number::Int(u64::from(mode & bit != 0)),
            )
        })
        .collect();
    let violations: u64 = p.registers().iter().map(|r| r.violations()).sum();
    let balanced = p
        .read_balance()
        .counters
        .per_member
        .iter()
        .enumerate()
        .map(|(member, n)| (labels(&[("member", &member.to_string())]), Number::Int(*n)))
        .collect();
    drop(p);
    let routes = control.state().routes.len();
    vec![
        Family::counter(
            "dmkv_switch_packets_total",
            "Packets counted by each switch function (label counter: what the function did with them)",
            packets,
        ),
        Family::counter(
            "dmkv_switch_route_lookups_total",
            "Route lookups by result (hit: forwarded to a connection, miss: no route, dropped)",
            vec![
                (
                    labels(&[("result", "hit")]),
                    Number::Int(counters.forward.forwarded),
                ),
                (
                    labels(&[("result", "miss")]),
                    Number::Int(counters.forward.missed),
                ),
            ],
        ),
        Family::counter(
            "dmkv_switch_clover_steered_total",
            "Clover requests redirected to a chain's committed tail, by direction (write: link CASes, read: node READs)",
            vec![
                (
                    labels(&[("direction", "write")]),
                    Number::Int(counters.write_steer.steered),
                ),
                (
                    labels(&[("direction", "read")]),
                    Number::Int(counters.read_steer.steered),
                ),
            ],
        ),
        Family::counter(
            "dmkv_switch_balanced_reads_total",
            "Load-balanced READs by the member that served them (label member: 0 the primary, 1 and 2 the backups), over every replica set",
            balanced,
        ),
        Family::gauge(
            "dmkv_switch_function_enabled",
            "Mode register bits by function (1 = enabled)",
            enabled,
        ),
        Family::counter_value(
            "dmkv_switch_register_access_violations_total",
            "Second register accesses by one packet",
            violations,
        ),
        Family::counter_value(
            "dmkv_switch_datagrams_received_total",
            "Datagrams received",
            io.received.load(Ordering::Relaxed),
        ),
        Family::counter_value(
            "dmkv_switch_datagrams_sent_total",
            "Datagrams sent",
            io.sent.load(Ordering::Relaxed),
        ),
        Family::counter_value(
            "dmkv_switch_segmented_datagrams_total",
            "Datagrams sent as a later segment of one segmented send (UDP offload)",
            io.segmented.load(Ordering::Relaxed),
        ),
        Family::counter_value(
            "dmkv_switch_send_errors_total",
            "Datagrams the kernel refused to send",
            io.send_errors.load(Ordering::Relaxed),
        ),
        io.pipeline_latency.family(
            "dmkv_switch_pipeline_duration_seconds",
            "Time each packet spent in the pipeline model (parse, stages, deparse)",
        ),
        Family::gauge_value("dmkv_switch_routes", "Installed connections", routes),
    ]
}
