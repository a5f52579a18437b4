//! `exporter=`: YCSB's measurement exporters, which write the report's
//! `(metric, measurement, value)` triples.
//!
//! - `site.ycsb.measurements.exporter.TextMeasurementsExporter` (`text`, the default):
//!   `[METRIC], measurement, value` lines;
//! - `site.ycsb.measurements.exporter.JSONMeasurementsExporter` (`json`): one object
//!   `{"metric": "...", "measurement": "...", "value": ...}` per line;
//! - `site.ycsb.measurements.exporter.JSONArrayMeasurementsExporter` (`jsonarray`): the same
//!   objects in one JSON array.
//!
//! The older `com.yahoo.ycsb.measurements.exporter.*` class names are accepted too.

use crate::measure::java_double;
use crate::props::{PropError, Properties};

/// One value of the report: an integer or a double (printed as Java prints it in text).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MetricValue {
    /// A count or a latency in whole microseconds.
    Int(i64),
    /// An average, a throughput or a variance.
    Float(f64),
}

impl MetricValue {
    fn text(self) -> String {
        match self {
            MetricValue::Int(i) => i.to_string(),
            MetricValue::Float(d) => java_double(d),
        }
    }

    /// JSON has no NaN or infinities: those are written as `null`.
    fn json(self) -> String {
        match self {
            MetricValue::Int(i) => i.to_string(),
            MetricValue::Float(d) if d.is_finite() => {
                serde_json::to_string(&d).unwrap_or_else(|_| "null".into())
            }
            MetricValue::Float(_) => "null".into(),
        }
    }
}

/// One line of the report: `[metric], measurement, value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Metric {
    /// `OVERALL`, `READ`, `PROTOCOL`, …
    pub metric: String,
    /// `RunTime(ms)`, `Operations`, `95thPercentileLatency(us)`, a bucket or a time, …
    pub measurement: String,
    /// The value.
    pub value: MetricValue,
}

impl Metric {
    /// A metric with an integer value.
    pub fn int(metric: &str, measurement: impl Into<String>, value: i64) -> Metric {
        Metric {
            metric: metric.to_string(),
            measurement: measurement.into(),
            value: MetricValue::Int(value),
        }
    }

    /// A metric with an unsigned value (saturating at `i64::MAX`).
    pub fn uint(metric: &str, measurement: impl Into<String>, value: u64) -> Metric {
        Metric::int(
            metric,
            measurement,
            i64::try_from(value).unwrap_or(i64::MAX),
        )
    }

    /// A metric with a double value.
    pub fn float(metric: &str, measurement: impl Into<String>, value: f64) -> Metric {
        Metric {
            metric: metric.to_string(),
            measurement: measurement.into(),
            value: MetricValue::Float(value),
        }
    }

    fn json(&self) -> String {
        let s = |v: &str| serde_json::to_string(v).unwrap_or_else(|_| "\"\"".into());
        format!(
            "{{\"metric\": {}, \"measurement\": {}, \"value\": {}}}",
            s(&self.metric),
            s(&self.measurement),
            self.value.json()
        )
    }
}

/// Which exporter writes the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Exporter {
    /// `TextMeasurementsExporter`.
    #[default]
    Text,
    /// `JSONMeasurementsExporter`: one object per line.
    Json,
    /// `JSONArrayMeasurementsExporter`: one array.
    JsonArray,
}

const PACKAGES: [&str; 2] = [
    "site.ycsb.measurements.exporter.",
    "com.yahoo.ycsb.measurements.exporter.",
];

impl Exporter {
    /// Parse an `exporter` value: YCSB's class name (either package) or `text`, `json`,
    /// `jsonarray`.
    pub fn parse(value: &str) -> Option<Exporter> {
        let v = value.trim();
        let class = PACKAGES.iter().find_map(|p| v.strip_prefix(p)).unwrap_or(v);
        match class {
            "TextMeasurementsExporter" | "text" => Some(Exporter::Text),
            "JSONMeasurementsExporter" | "json" => Some(Exporter::Json),
            "JSONArrayMeasurementsExporter" | "jsonarray" => Some(Exporter::JsonArray),
            _ => None,
        }
    }

    /// The `exporter` property (default text); an unknown exporter is an error.
    pub fn from_props(props: &Properties) -> Result<Exporter, PropError> {
        match props.get("exporter") {
            None => Ok(Exporter::Text),
            Some(v) => Exporter::parse(v).ok_or_else(|| {
                props.invalid(
                    "exporter",
                    format!(
                        "unknown exporter; use {}TextMeasurementsExporter, \
                         …JSONMeasurementsExporter or …JSONArrayMeasurementsExporter \
                         (or text, json, jsonarray)",
                        PACKAGES[0]
                    ),
                )
            }),
        }
    }

    /// Write `metrics` in this exporter's format.
    pub fn render(self, metrics: &[Metric]) -> String {
        let mut out = String::new();
        match self {
            Exporter::Text => {
                for m in metrics {
                    out.push_str(&format!(
                        "[{}], {}, {}\n",
                        m.metric,
                        m.measurement,
                        m.value.text()
                    ));
                }
            }
            Exporter::Json => {
                for m in metrics {
                    out.push_str(&m.json());
                    out.push('\n');
                }
            }
            Exporter::JsonArray => {
                out.push('[');
                for (i, m) in metrics.iter().enumerate() {
                    out.push_str(if i == 0 { "\n  " } else { ",\n  " });
                    out.push_str(&m.json());
                }
                out.push_str("\n]\n");
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Metric> {
        vec![
            Metric::uint("OVERALL", "RunTime(ms)", 371),
            Metric::float("OVERALL", "Throughput(ops/sec)", 53908.35579514825),
            Metric::float("READ", "AverageLatency(us)", 1.0),
            Metric::float("READ", "AverageLatency(us)", f64::NAN),
            Metric::uint("READ", "Return=OK", 9912),
        ]
    }

    #[test]
    fn class_and_short_names_parse() {
        for (name, e) in [
            (
                "site.ycsb.measurements.exporter.TextMeasurementsExporter",
                Exporter::Text,
            ),
            (
                "com.yahoo.ycsb.measurements.exporter.JSONMeasurementsExporter",
                Exporter::Json,
            ),
            (
                "site.ycsb.measurements.exporter.JSONArrayMeasurementsExporter",
                Exporter::JsonArray,
            ),
            ("text", Exporter::Text),
            ("json", Exporter::Json),
            (" jsonarray ", Exporter::JsonArray),
        ] {
            assert_eq!(Exporter::parse(name), Some(e), "{name}");
        }
        assert_eq!(Exporter::parse("site.ycsb.measurements.exporter.Csv"), None);
        let mut p = Properties::new();
        assert_eq!(Exporter::from_props(&p).unwrap(), Exporter::Text);
        p.set("exporter", "xml");
        let e = Exporter::from_props(&p).unwrap_err().to_string();
        assert!(e.contains("exporter=xml") && e.contains("jsonarray"), "{e}");
    }

    #[test]
    fn text_is_ycsb_lines() {
        assert_eq!(
            Exporter::Text.render(&sample()),
            "[OVERALL], RunTime(ms), 371\n\
             [OVERALL], Throughput(ops/sec), 53908.35579514825\n\
             [READ], AverageLatency(us), 1.0\n\
             [READ], AverageLatency(us), NaN\n\
             [READ], Return=OK, 9912\n"
        );
    }

    #[test]
    fn json_objects_parse_back_one_per_line() {
        let text = Exporter::Json.render(&sample());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5);
        assert_eq!(
            lines[0],
            r#"{"metric": "OVERALL", "measurement": "RunTime(ms)", "value": 371}"#
        );
        let v: Vec<serde_json::Value> = lines
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(v[1]["value"].as_f64(), Some(53908.35579514825));
        assert_eq!(v[2]["value"].as_f64(), Some(1.0));
        assert!(v[3]["value"].is_null());
        assert_eq!(v[4]["measurement"], "Return=OK");
    }

    #[test]
    fn json_array_parses_back_as_one_array() {
        let v: serde_json::Value =
            serde_json::from_str(&Exporter::JsonArray.render(&sample())).unwrap();
        let a = v.as_array().unwrap();
        assert_eq!(a.len(), 5);
        assert_eq!(a[0]["metric"], "OVERALL");
        assert_eq!(a[4]["value"], 9912);
        let empty: serde_json::Value =
            serde_json::from_str(&Exporter::JsonArray.render(&[])).unwrap();
        assert_eq!(empty, serde_json::json!([]));
    }
}
