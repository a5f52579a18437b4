//! Metric families read from a service's state when a scrape arrives, encoded by
//! `prometheus-client`.
//!
//! The services keep their own counters (relaxed atomics on the data plane, the catalog's
//! figures in the metadata service); on each scrape they turn what they have into a list of
//! [`Family`] values, and [`Families`] hands them to a `prometheus-client` registry as one
//! collector, so the text itself (Prometheus 0.0.4 or OpenMetrics) is written by the crate.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

/// Label pairs of one series, in order.
pub type Labels = Vec<(String, String)>;

/// Labels from `(name, value)` pairs.
pub fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// A sample value: integers are written as integers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    /// A count.
    Int(u64),
    /// A measurement (seconds, ratios).
    Float(f64),
}

impl From<u64> for Number {
    fn from(v: u64) -> Number {
        Number::Int(v)
    }
}

impl From<usize> for Number {
    fn from(v: usize) -> Number {
        Number::Int(v as u64)
    }
}

impl From<u32> for Number {
    fn from(v: u32) -> Number {
        Number::Int(u64::from(v))
    }
}

impl From<f64> for Number {
    fn from(v: f64) -> Number {
        Number::Float(v)
    }
}

/// One histogram series at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramValue {
    /// `(upper bound, observations in this bucket alone)`, bounds increasing; the last
    /// bound may be `+Inf` (otherwise a `+Inf` bucket holding `count` is added).
    pub buckets: Vec<(f64, u64)>,
    /// Sum of the observations.
    pub sum: f64,
    /// Observations.
    pub count: u64,
}

#[derive(Debug, Clone, PartialEq)]
enum Series {
    Counter(Vec<(Labels, Number)>),
    Gauge(Vec<(Labels, Number)>),
    Histogram(Vec<(Labels, HistogramValue)>),
    Info(Labels),
}

/// One metric family: its name, help and series.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    name: String,
    help: String,
    series: Series,
}

impl Family {
    /// A counter family. `name` is the exposed name: the `_total` suffix is the one the
    /// Prometheus text shows on samples (OpenMetrics shows it on samples only), and is added
    /// if missing.
    pub fn counter(name: &str, help: &str, series: Vec<(Labels, Number)>) -> Family {
        Family::new(name, help, Series::Counter(series))
    }

    /// A counter without labels.
    pub fn counter_value(name: &str, help: &str, value: impl Into<Number>) -> Family {
        Family::counter(name, help, vec![(Labels::new(), value.into())])
    }

    /// A gauge family.
    pub fn gauge(name: &str, help: &str, series: Vec<(Labels, Number)>) -> Family {
        Family::new(name, help, Series::Gauge(series))
    }

    /// A gauge without labels.
    pub fn gauge_value(name: &str, help: &str, value: impl Into<Number>) -> Family {
        Family::gauge(name, help, vec![(Labels::new(), value.into())])
    }

    /// A histogram family.
    pub fn histogram(name: &str, help: &str, series: Vec<(Labels, HistogramValue)>) -> Family {
        Family::new(name, help, Series::Histogram(series))
    }

    /// An info family: one series `name{labels} 1`. `name` ends with `_info` (added if
    /// missing); the Prometheus text types it `gauge`, OpenMetrics `info`.
    pub fn info(name: &str, help: &str, labels: Labels) -> Family {
        Family::new(name, help, Series::Info(labels))
    }

    fn new(name: &str, help: &str, series: Series) -> Family {
        Family {
            name: name.to_owned(),
            help: help.to_owned(),
            series,
        }
    }

    /// The exposed family name (with `_total` for counters, `_info` for infos).
    pub fn name(&self) -> String {
        match &self.series {
            Series::Counter(_) => format!("{}_total", base(&self.name, "_total")),
            Series::Info(_) => format!("{}_info", base(&self.name, "_info")),
            _ => self.name.clone(),
        }
    }

    fn encode(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        match &self.series {
            Series::Counter(series) => {
                let name = base(&self.name, "_total");
                let mut m =
                    encoder.encode_descriptor(name, &self.help, None, MetricType::Counter)?;
                for (labels, value) in series {
                    with_labels(&mut m, labels, |m| match value {
                        Number::Int(v) => m.encode_counter::<NoLabelSet, _, u64>(v, None),
                        Number::Float(v) => m.encode_counter::<NoLabelSet, _, u64>(v, None),
                    })?;
                }
            }
            Series::Gauge(series) => {
                let mut m =
                    encoder.encode_descriptor(&self.name, &self.help, None, MetricType::Gauge)?;
                for (labels, value) in series {
                    with_labels(&mut m, labels, |m| match value {
                        Number::Int(v) => m.encode_gauge(v),
                        Number::Float(v) => m.encode_gauge(v),
                    })?;
                }
            }
            Series::Histogram(series) => {
                let mut m = encoder.encode_descriptor(
                    &self.name,
                    &self.help,
                    None,
                    MetricType::Histogram,
                )?;
                for (labels, h) in series {
                    with_labels(&mut m, labels, |m| {
                        m.encode_histogram::<NoLabelSet>(h.sum, h.count, &h.buckets, None)
                    })?;
                }
            }
            Series::Info(labels) => {
                let name = base(&self.name, "_info");
                let mut m = encoder.encode_descriptor(name, &self.help, None, MetricType::Info)?;
                m.encode_info(labels)?;
            }
        }
        Ok(())
    }
}

/// `name` without `suffix`.
fn base<'a>(name: &'a str, suffix: &str) -> &'a str {
    name.strip_suffix(suffix).unwrap_or(name)
}

/// Runs `f` on the series encoder of `labels` (the family's own for no labels).
fn with_labels(
    m: &mut MetricEncoder,
    labels: &Labels,
    f: impl FnOnce(&mut MetricEncoder) -> Result<(), std::fmt::Error>,
) -> Result<(), std::fmt::Error> {
    if labels.is_empty() {
        f(m)
    } else {
        f(&mut m.encode_family(labels)?)
    }
}

/// Families to encode, as one `prometheus-client` collector.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Families(pub Vec<Family>);

impl Collector for Families {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for f in &self.0 {
            f.encode(&mut encoder)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exposition::{Format, encode};

    fn text(families: Vec<Family>, format: Format) -> String {
        let mut r = prometheus_client::registry::Registry::default();
        r.register_collector(Box::new(Families(families)));
        encode(&r, format).unwrap()
    }

    fn sample() -> Vec<Family> {
        vec![
            Family::counter(
                "x_naks_total",
                "NAKs sent, by reason",
                vec![
                    (labels(&[("reason", "a\"b")]), Number::Int(3)),
                    (labels(&[("reason", "c")]), Number::Int(0)),
                ],
            ),
            Family::counter_value("x_cpu_seconds", "CPU time", 1.5),
            Family::gauge_value("x_queue_pairs", "Queue pairs", 7u64),
            Family::histogram(
                "x_duration_seconds",
                "Durations",
                vec![(
                    labels(&[("route", "/v1")]),
                    HistogramValue {
                        buckets: vec![(0.1, 1), (1.0, 2), (f64::INFINITY, 1)],
                        sum: 2.5,
                        count: 4,
                    },
                )],
            ),
            Family::info("x_build", "The build", labels(&[("version", "0.1.0")])),
        ]
    }

    #[test]
    fn prometheus_text_passes_the_strict_reader() {
        let t = text(sample(), Format::Prometheus);
        let e = crate::prom::parse(&t).unwrap_or_else(|err| panic!("{err}\n{t}"));
        assert_eq!(e.types["x_naks_total"], "counter");
        assert_eq!(e.value("x_naks_total", "reason", "a\"b"), Some(3.0));
        assert_eq!(e.value("x_naks_total", "reason", "c"), Some(0.0));
        assert_eq!(e.scalar("x_cpu_seconds_total"), Some(1.5));
        assert_eq!(e.scalar("x_queue_pairs"), Some(7.0));
        assert!(t.contains("x_queue_pairs 7\n"), "{t}");
        assert_eq!(e.value("x_duration_seconds_bucket", "le", "1"), Some(3.0));
        assert_eq!(
            e.value("x_duration_seconds_bucket", "le", "+Inf"),
            Some(4.0)
        );
        assert_eq!(
            e.value("x_duration_seconds_count", "route", "/v1"),
            Some(4.0)
        );
        assert_eq!(e.types["x_build_info"], "gauge");
        assert_eq!(e.value("x_build_info", "version", "0.1.0"), Some(1.0));
    }

    #[test]
    fn openmetrics_names_counter_and_info_families_without_their_suffix() {
        let t = text(sample(), Format::OpenMetrics);
        assert!(t.contains("# TYPE x_naks counter\n"), "{t}");
        assert!(t.contains("x_naks_total{reason=\"c\"} 0\n"), "{t}");
        assert!(t.contains("# TYPE x_build info\n"), "{t}");
        assert!(t.ends_with("# EOF\n"), "{t}");
    }

    #[test]
    fn names_carry_their_suffix_once() {
        assert_eq!(
            Family::counter_value("a_total", "A", 1u64).name(),
            "a_total"
        );
        assert_eq!(Family::counter_value("a", "A", 1u64).name(), "a_total");
        assert_eq!(Family::info("b", "B", Labels::new()).name(), "b_info");
        assert_eq!(Family::gauge_value("c", "C", 1u64).name(), "c");
    }
}
