//! The thread-aware allocation experiment as line charts (SVG, beside the results
//! page): per transport and verb, throughput against threads with one line per
//! queue-pair policy, doorbell batching and completion waiting — the shape of SMART's
//! Figs. 3 and 13a.

use std::path::Path;

use testbed::plot::{Chart, Series, Written, write_chart};

/// One measured cell as the charts see it.
#[derive(Debug, Clone)]
pub struct Point {
    /// Transport name.
    pub transport: String,
    /// Verb name (`read` or `cas`).
    pub verb: String,
    /// Policy, doorbell and completions, as the line's label.
    pub setting: String,
    /// Threads.
    pub threads: usize,
    /// READs per second, or successful CASes per second.
    pub per_sec: f64,
}

/// The charts' lines, one chart per (transport, verb), in first-seen order.
fn group(points: &[Point]) -> Vec<((String, String), Vec<Series>)> {
    let mut charts: Vec<((String, String), Vec<Series>)> = Vec::new();
    for p in points {
        let key = (p.transport.clone(), p.verb.clone());
        let at = match charts.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                charts.push((key, Vec::new()));
                charts.len() - 1
            }
        };
        let lines = &mut charts[at].1;
        let point = (p.threads as f64, p.per_sec);
        match lines.iter_mut().find(|l| l.label == p.setting) {
            Some(l) => l.points.push(point),
            None => lines.push(Series {
                label: p.setting.clone(),
                points: vec![point],
            }),
        }
    }
    for (_, lines) in &mut charts {
        for l in lines.iter_mut() {
            l.points.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
    }
    charts
}

/// Write one chart per transport and verb into `dir`.
pub fn write(points: &[Point], dir: &Path) -> Result<Vec<Written>, String> {
    let mut out = Vec::new();
    for ((transport, verb), lines) in group(points) {
        let file = format!("verbs-bench-threads-{transport}-{verb}.svg");
        let y = if verb == "cas" {
            "successful CAS per second"
        } else {
            "READs per second"
        };
        let title = format!("{transport}: {y} against threads");
        let chart = Chart {
            title: &title,
            x_desc: "threads",
            y_desc: y,
            log2_x: true,
        };
        out.push(write_chart(dir, &file, &chart, &lines)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(verb: &str, setting: &str, threads: usize, per_sec: f64) -> Point {
        Point {
            transport: "udp".into(),
            verb: verb.into(),
            setting: setting.into(),
            threads,
            per_sec,
        }
    }

    #[test]
    fn one_chart_per_verb_one_line_per_setting() {
        let points = vec![
            p("read", "shared", 2, 20.0),
            p("read", "shared", 1, 10.0),
            p("read", "per-thread", 1, 12.0),
            p("cas", "shared", 1, 5.0),
        ];
        let g = group(&points);
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].1.len(), 2);
        assert_eq!(g[0].1[0].points, vec![(1.0, 10.0), (2.0, 20.0)]);
        let dir = tempfile::tempdir().expect("dir");
        let w = write(&points, dir.path()).expect("charts");
        assert_eq!(w[1].file, "verbs-bench-threads-udp-cas.svg");
        assert!(dir.path().join(&w[0].file).exists());
    }
}
