//! The Markdown results page `--results-md PATH` writes: the page header, the cell table
//! and the soft-RoCE / raw-UDP echo table, with the figures `print_table` prints.

use testbed::results_page::{PageHeader, markdown_table};

/// How the repository's page is written.
pub const WRITTEN_BY: &str =
    "cargo run --release -p verbs-bench -- --results-md docs/results/verbs-bench.md";

/// One measured cell, as the tables show it.
#[derive(Clone, Debug)]
pub struct CellLine {
    /// Transport name.
    pub transport: &'static str,
    /// Verb name.
    pub verb: &'static str,
    /// Payload bytes.
    pub size: usize,
    /// CAS/FAA on one shared word.
    pub contended: bool,
    /// Client threads.
    pub threads: usize,
    /// Outstanding operations per thread.
    pub depth: usize,
    /// Throughput.
    pub ops_per_sec: f64,
    /// Median latency, µs.
    pub p50_us: f64,
    /// 99th percentile latency, µs.
    pub p99_us: f64,
    /// 99.9th percentile latency, µs.
    pub p999_us: f64,
    /// RoCEv2 packets per operation, both directions.
    pub packets_per_op: f64,
    /// RoCEv2 bytes per operation, both directions.
    pub bytes_per_op: f64,
    /// Retransmissions per operation.
    pub retransmissions_per_op: f64,
    /// Failed CASes per operation.
    pub cas_failures_per_op: f64,
    /// CPU µs per operation, every thread of the process (clients and memory node).
    pub cpu_us_per_op: f64,
    /// Of which the memory node's threads.
    pub memnode_cpu_us_per_op: f64,
}

/// One soft RoCE (udp) cell beside the raw UDP echo of the same shape.
#[derive(Clone, Debug)]
pub struct EchoLine {
    /// Verb name.
    pub verb: &'static str,
    /// Payload bytes.
    pub size: usize,
    /// Client threads.
    pub threads: usize,
    /// Outstanding operations per thread.
    pub depth: usize,
    /// Request datagram bytes.
    pub request_bytes: usize,
    /// Response datagram bytes.
    pub reply_bytes: usize,
    /// Soft RoCE throughput.
    pub udp_ops_per_sec: f64,
    /// Echo throughput.
    pub echo_ops_per_sec: f64,
    /// `udp_ops_per_sec / echo_ops_per_sec`.
    pub ratio: f64,
    /// Soft RoCE median latency, µs.
    pub udp_p50_us: f64,
    /// Echo median latency, µs.
    pub echo_p50_us: f64,
    /// Soft RoCE CPU µs per operation (clients and memory node).
    pub udp_cpu_us_per_op: f64,
    /// Of which the memory node's threads.
    pub udp_server_cpu_us_per_op: f64,
    /// Echo CPU µs per operation (clients and echo server).
    pub echo_cpu_us_per_op: f64,
    /// Of which the echo server's thread.
    pub echo_server_cpu_us_per_op: f64,
    /// Soft RoCE: requests per send call at the clients.
    pub udp_client_per_send: f64,
    /// Soft RoCE: responses per send call at the memory node (when it ran in process).
    pub udp_node_per_send: Option<f64>,
    /// Echo: requests per send call at the clients.
    pub echo_client_per_send: f64,
    /// Echo: replies per send call at the server.
    pub echo_server_per_send: f64,
}

/// "client / server" datagrams per send call, one decimal; "–" for a side not counted.
pub fn per_send_pair(client: f64, server: Option<f64>) -> String {
    match server {
        Some(s) => format!("{client:.1} / {s:.1}"),
        None => format!("{client:.1} / –"),
    }
}

/// The page: header, then the cell table and (when measured) the echo table.
pub fn render(header: &PageHeader, cells: &[CellLine], echoes: &[EchoLine]) -> String {
    let mut s = header.render("Results: `verbs-bench`", WRITTEN_BY);
    s.push_str("## Every verb on every transport\n\n");
    let rows: Vec<Vec<String>> = cells
        .iter()
        .map(|c| {
            vec![
                c.transport.to_string(),
                c.verb.to_string(),
                c.size.to_string(),
                if c.contended { "yes" } else { "no" }.to_string(),
                c.threads.to_string(),
                c.depth.to_string(),
                format!("{:.0}", c.ops_per_sec),
                format!("{:.1}", c.p50_us),
                format!("{:.1}", c.p99_us),
                format!("{:.1}", c.p999_us),
                format!("{:.2}", c.packets_per_op),
                format!("{:.0}", c.bytes_per_op),
                format!("{:.3}", c.retransmissions_per_op),
                format!("{:.3}", c.cas_failures_per_op),
                format!("{:.2}", c.cpu_us_per_op),
                format!("{:.2}", c.memnode_cpu_us_per_op),
                format!("{:.2}", c.cpu_us_per_op - c.memnode_cpu_us_per_op),
            ]
        })
        .collect();
    s.push_str(&markdown_table(
        &[
            "transport",
            "verb",
            "size",
            "contended",
            "threads",
            "depth",
            "ops/s",
            "p50 µs",
            "p99 µs",
            "p99.9 µs",
            "packets/op",
            "bytes/op",
            "retransmissions/op",
            "CAS failures/op",
            "CPU µs/op",
            "memnode CPU µs/op",
            "client CPU µs/op",
        ],
        &rows,
    ));
    if !echoes.is_empty() {
        s.push_str("\n## Soft RoCE (udp) against a raw UDP echo\n\n");
        s.push_str(
            "Same datagram sizes, threads, depth and segmentation offload (by default, runs of datagrams between the two loopback sockets cross the kernel as one buffer, as between a client and a memory node). The echo sends a response as one datagram; soft RoCE cuts it into packets of the path MTU (`--pmtu`, 1024 B by default). Datagrams per send is how many datagrams each `sendmmsg` carried at the clients / at the server (the memory node, or the echo server): each send costs about one crossing of the kernel whatever it carries, so it says how many operations share one.\n\n",
        );
        let rows: Vec<Vec<String>> = echoes
            .iter()
            .map(|e| {
                vec![
                    e.verb.to_string(),
                    e.size.to_string(),
                    e.threads.to_string(),
                    e.depth.to_string(),
                    e.request_bytes.to_string(),
                    e.reply_bytes.to_string(),
                    format!("{:.0}", e.udp_ops_per_sec),
                    format!("{:.0}", e.echo_ops_per_sec),
                    format!("{:.0} %", e.ratio * 100.0),
                    format!("{:.1}", e.udp_p50_us),
                    format!("{:.1}", e.echo_p50_us),
                    format!("{:.2}", e.udp_server_cpu_us_per_op),
                    format!("{:.2}", e.udp_cpu_us_per_op - e.udp_server_cpu_us_per_op),
                    format!("{:.2}", e.echo_server_cpu_us_per_op),
                    format!("{:.2}", e.echo_cpu_us_per_op - e.echo_server_cpu_us_per_op),
                    per_send_pair(e.udp_client_per_send, e.udp_node_per_send),
                    per_send_pair(e.echo_client_per_send, Some(e.echo_server_per_send)),
                ]
            })
            .collect();
        s.push_str(&markdown_table(
            &[
                "verb",
                "size",
                "threads",
                "depth",
                "request B",
                "response B",
                "udp ops/s",
                "echo ops/s",
                "udp / echo",
                "udp p50 µs",
                "echo p50 µs",
                "udp memnode CPU µs/op",
                "udp client CPU µs/op",
                "echo server CPU µs/op",
                "echo client CPU µs/op",
                "udp datagrams per send",
                "echo datagrams per send",
            ],
            &rows,
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(transport: &'static str, ops: f64) -> CellLine {
        CellLine {
            transport,
            verb: "read",
            size: 64,
            contended: false,
            threads: 1,
            depth: 4,
            ops_per_sec: ops,
            p50_us: 1.24,
            p99_us: 3.0,
            p999_us: 9.0,
            packets_per_op: 2.0,
            bytes_per_op: 158.0,
            retransmissions_per_op: 0.0,
            cas_failures_per_op: 0.0,
            cpu_us_per_op: 2.5,
            memnode_cpu_us_per_op: 1.0,
        }
    }

    #[test]
    fn two_cells_and_an_echo_render() {
        let header = PageHeader::fixed("verbs-bench --results-md out.md");
        let echo = EchoLine {
            verb: "read",
            size: 64,
            threads: 1,
            depth: 4,
            request_bytes: 58,
            reply_bytes: 122,
            udp_ops_per_sec: 70_000.0,
            echo_ops_per_sec: 100_000.0,
            ratio: 0.7,
            udp_p50_us: 10.0,
            echo_p50_us: 7.5,
            udp_cpu_us_per_op: 9.25,
            udp_server_cpu_us_per_op: 4.0,
            echo_cpu_us_per_op: 6.5,
            echo_server_cpu_us_per_op: 3.0,
            udp_client_per_send: 4.0,
            udp_node_per_send: None,
            echo_client_per_send: 4.0,
            echo_server_per_send: 3.5,
        };
        let page = render(
            &header,
            &[cell("local", 1_000_000.4), cell("udp", 70_000.0)],
            &[echo],
        );
        assert!(
            page.starts_with(&header.render("Results: `verbs-bench`", WRITTEN_BY)),
            "{page}"
        );
        assert!(page.contains(
            "| transport | verb | size | contended | threads | depth | ops/s | p50 µs | p99 µs | p99.9 µs | packets/op | bytes/op | retransmissions/op | CAS failures/op | CPU µs/op | memnode CPU µs/op | client CPU µs/op |\n\
             |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n\
             | local | read | 64 | no | 1 | 4 | 1000000 | 1.2 | 3.0 | 9.0 | 2.00 | 158 | 0.000 | 0.000 | 2.50 | 1.00 | 1.50 |\n\
             | udp | read | 64 | no | 1 | 4 | 70000 | 1.2 | 3.0 | 9.0 | 2.00 | 158 | 0.000 | 0.000 | 2.50 | 1.00 | 1.50 |\n"
        ), "{page}");
        assert!(
            page.contains(
                "| read | 64 | 1 | 4 | 58 | 122 | 70000 | 100000 | 70 % | 10.0 | 7.5 | 4.00 | 5.25 | 3.00 | 3.50 | 4.0 / – | 4.0 / 3.5 |\n"
            ),
            "{page}"
        );
    }
}
